"""A function's own output reaches the user (issue 14): ``print`` and logging of a rollout and
a reward, tagged by function and rollout, are in the job's log over REST (the cloud path
``/v1/fine-tunes/{id}/logs``) and in the console's log view, after the job ended. The same job
sets ``ENABLE_TRAJECTORY: "false"`` (stores no trajectories) and has a rollout that does not copy
``rollout_extra`` (the reward still gets the row's)."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from console_harness import login, upload

from rltune.functions.archive import zip_workspace

LOUD = '''
import logging
import openai
from dashscope.finetune.reinforcement import (AbstractRewardProcessor, AbstractRolloutProcessor,
                                              AgentOutput, Reward, RewardOutput, RolloutOutput)

log = logging.getLogger("loud")


class LoudRollout(AbstractRolloutProcessor):
    async def process(self, input_data):
        res = input_data.model_resource
        client = openai.AsyncOpenAI(base_url=res.base_url,
                                    api_key=res.api_key.get_secret_value())
        print("rollout-marker", input_data.request_metadata.rollout_id)
        reply = await client.chat.completions.create(
            model=res.model_name, messages=input_data.messages, max_tokens=8)
        msg = {"role": "assistant", "content": reply.choices[0].message.content or ""}
        return RolloutOutput(agent_output=AgentOutput(messages=input_data.messages + [msg]))


class LoudReward(AbstractRewardProcessor):
    def process(self, input_data):
        extra = input_data.agent_output.rollout_extra
        print("marker extra=" + json.dumps(extra, sort_keys=True))
        log.warning("logged-marker")
        return RewardOutput(reward=Reward(reward_score=1.0 if extra else 0.0))
'''.replace("import logging\n", "import json\nimport logging\n", 1)

ROWS = [{"messages": [{"role": "user", "content": f"What is {i} + 1?"}],
         "rollout_extra": {"solution": str(i + 1), "row": i}} for i in range(2)]


@pytest.fixture(scope="module")
def loud_job(server, tiny_model_dir, tmp_path_factory) -> str:
    work = tmp_path_factory.mktemp("loud")
    ws = work / "ws"
    (ws / "functions").mkdir(parents=True)
    (ws / "functions" / "loud.py").write_text(LOUD)
    archive = zip_workspace(ws, work / "ws.zip").path.read_bytes()
    ids = {}
    for name, ftype, cp in (("loud-rollout", "rollout", "functions/loud.py:LoudRollout"),
                            ("loud-reward", "reward", "functions/loud.py:LoudReward")):
        ids[name] = server.call("POST", "/v1/functions", content=archive,
                                params={"classpath": cp, "type": ftype, "name": name},
                                headers={"Content-Type": "application/zip"})["entity_id"]
    data = work / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    runtime = {"concurrency": 4, "capacity": 1, "min_capacity": 1, "max_capacity": 1}
    job = {"name": "loud", "model": {"name": str(tiny_model_dir)},
           "datasets": [{"type": "training", "file_id": upload(server, data)}],
           "functions": [
               {"type": "rollout", "name": "loud-rollout", "entity_id": ids["loud-rollout"],
                "runtime": runtime},
               {"type": "reward", "name": "loud-reward", "entity_id": ids["loud-reward"],
                "runtime": {**runtime, "env": {"ENABLE_TRAJECTORY": "false"}}}],
           "training": {"hyper_parameters": {
               "batch_size": 2, "n_rollouts": 2, "max_length": 160, "max_prompt_length": 140,
               "n_epochs": 1, "save_strategy": "no", "learning_rate": 1e-3}}}
    job_id = server.call("POST", "/v1/fine-tunes", json={"config_yaml": yaml.safe_dump(job)})
    server.wait(job_id["job_id"], {"SUCCEEDED"}, timeout=300)
    return job_id["job_id"]


def test_function_output_is_in_the_job_log_over_rest(server, loud_job):
    res = server.call("GET", f"/v1/fine-tunes/{loud_job}/logs", params={"line": 100000})
    lines = res["logs"]
    assert res["finished"]
    rollout = [ln for ln in lines if "rollout-marker" in ln]
    # 2 prompts x 2 rollouts; each line tagged with the function and its own rollout id
    assert len(rollout) == 4, "\n".join(lines)
    ids = set()
    for ln in rollout:
        m = re.search(r" INFO +\[fn loud-rollout (\S+)\] rollout-marker (\S+)$", ln)
        assert m and m.group(1) == m.group(2), ln
        ids.add(m.group(1))
    assert len(ids) == 4
    reward = [ln for ln in lines if "] marker extra=" in ln]
    # the reward's lines carry the id of the rollout they score: one each
    assert sorted(re.search(r"\[fn loud-reward (\S+)\]", ln).group(1) for ln in reward) == \
        sorted(ids)
    extras = sorted(json.loads(ln.split("extra=", 1)[1])["row"] for ln in reward)
    assert extras == [0, 0, 1, 1]  # the row's rollout_extra, though the rollout dropped it
    logged = [ln for ln in lines if "logged-marker" in ln]
    assert len(logged) == 4 and all(" WARNING [fn loud-reward " in ln for ln in logged)
    assert all(re.search(r"\] loud: logged-marker$", ln) for ln in logged)
    metrics = server.call("GET", f"/v1/jobs/{loud_job}/metrics")["series"]
    assert metrics["critic/rewards/mean"][0][1] == 1.0  # every reward saw rollout_extra


def test_enable_trajectory_false_stores_none(server, loud_job):
    assert server.call("GET", f"/v1/jobs/{loud_job}/trajectories/steps")["steps"] == []
    assert server.call("GET", f"/v1/jobs/{loud_job}/metrics")["names"]  # the rest is kept


def test_console_log_view_shows_function_output(page, server, loud_job):
    from playwright.sync_api import expect  # the page fixture skips without playwright

    login(page, server)
    page.goto(f"{server.url}/#/jobs/{loud_job}/logs")
    expect(page.locator("#log-live")).to_have_text("job succeeded")
    page.fill("#log-search", "marker")
    lines = page.locator("#log-lines .log-line")
    expect(lines.filter(has_text="[fn loud-reward ")).to_have_count(8)  # print + logging
    expect(lines.filter(has_text="rollout-marker")).to_have_count(4)
    expect(page.locator("#log-count")).to_contain_text("12 of")
    page.fill("#log-search", "")
    page.check("#log-fn-only")  # only the functions' output, each line tagged and marked
    expect(lines.filter(has_text="marker")).to_have_count(12)
    texts = lines.all_inner_texts()
    assert texts and all(" [fn loud-" in t for t in texts)
    expect(lines.first).to_have_class(re.compile(r"\blog-fn\b"))
