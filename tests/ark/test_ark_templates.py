"""The templates as the clouds ship them: Ark's rl_demo (with its weather variant) and
rl_search_mcp_demo, whose plugins import only the cloud SDK's names (so they upload to Ark
unchanged); each plugin runs through `rltune ark test pipeline_plugin` against a scripted
OpenAI-compatible edge, and each job.yaml loads."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi import FastAPI, Request

from openai_edge import serve  # tests/openai_edge.py
from rltune.config import load_job_config
from rltune.templates import TEMPLATES_DIR, create_workspace

ARK = [sys.executable, "-m", "rltune.ark"]
#: What Ark template plugins may import besides the standard library.
CLOUD_NAMES = {"ark_sdk", "openai", "mcp", "httpx", "plugins"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("template", ["rl_demo", "rl_search_mcp_demo"])
def test_template_plugins_import_only_cloud_sdk_names(template, tmp_path):
    ws = create_workspace(tmp_path / template, template, train_rows=4, val_rows=2)
    files = list((ws / "plugins").glob("*.py")) + [ws / "job.py"] * (ws / "job.py").exists()
    assert files
    for path in files:
        foreign = _imports(path) - CLOUD_NAMES - set(sys.stdlib_module_names) - {"__future__"}
        assert not foreign, f"{path.relative_to(ws)} imports {foreign}"
    for job in ws.glob("job*.yaml"):
        load_job_config(job)  # every job of the template loads (plugins found, keys known)
    assert (TEMPLATES_DIR / template).is_dir()


@pytest.fixture(scope="module")
def scripted():
    """An OpenAI-compatible edge that plays the agent: a tool call first, then an answer that
    uses the tool's result; and a judge that gives every answer 1."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        msgs = body["messages"]
        if "Grade each numbered answer" in json.dumps(msgs[0]):
            n = msgs[-1]["content"].count("\n") - 2
            message = {"role": "assistant", "content": json.dumps({"scores": [1] * max(n, 1)})}
        elif msgs[-1]["role"] == "tool":
            message = {"role": "assistant", "content": f"From the tool: {msgs[-1]['content']}"}
        else:
            tool = body["tools"][0]["function"]["name"]
            args = {"city": "Beijing"} if tool == "get_weather" else {"query": "Lumen Bridge"}
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call-1", "type": "function",
                "function": {"name": tool, "arguments": json.dumps(args)}}]}
        reason = "tool_calls" if message.get("tool_calls") else "stop"
        return {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": reason, "message": message}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}

    with serve(app) as base_url:
        yield base_url


def _plugin(ws: Path, fn: str, request: dict, **env: str) -> dict:
    res = subprocess.run([*ARK, "test", "pipeline_plugin", "--fn", fn, "--request",
                          json.dumps(request)], cwd=ws, capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_weather_variant_tool_and_grader(scripted, tmp_path):
    ws = create_workspace(tmp_path / "rl", "rl_demo", train_rows=4, val_rows=2)
    row = json.loads((ws / "data" / "weather.jsonl").read_text().splitlines()[0])
    assert row["extra"] == {"answer": "26", "condition": "sunny"}
    sample = {**row, "model": "m"}
    out = _plugin(ws, "plugins.weather_rollout:weather_rollout",
                  {"proxy": {"url": scripted, "jwt_token": "k"}, "sample": sample})
    roles = [m["role"] for m in out["trajectory"]["messages"]]
    assert roles == ["assistant", "tool", "assistant"]
    assert out["trajectory"]["extra"] == {"tool_calls": 1}
    graded = _plugin(ws, "plugins.weather_grader:weather_grader",
                     {"sample": sample, "trajectory": out["trajectory"]})
    assert graded["rewards"] == [1.0]  # the answer states 26 and sunny


@pytest.mark.slow  # a whole job, 10-20 s: CI's default run is at its time budget
def test_search_mcp_demo_rollout_and_judge(scripted, tmp_path):
    pytest.importorskip("mcp")
    ws = create_workspace(tmp_path / "s", "rl_search_mcp_demo", train_rows=4, val_rows=2)
    row = json.loads((ws / "data" / "search_dataset_dev_100.jsonl").read_text().splitlines()[0])
    sample = {**row, "model": "m"}
    out = _plugin(ws, "plugins.rollout:search_rollout",
                  {"proxy": {"url": scripted, "jwt_token": "k"}, "sample": sample})
    tool_reply = out["trajectory"]["messages"][1]["content"]
    assert "Lumen" in tool_reply and "Porto" in tool_reply  # the MCP server's passage
    graded = _plugin(ws, "plugins.answer_grader:contains_answer",
                     {"sample": sample, "trajectory": out["trajectory"]})
    assert graded["rewards"] == [1.0]
    judged = _plugin(ws, "plugins.llm_grader:llm_grader",
                     {"sample": sample, "trajectories": [out["trajectory"]] * 2},
                     JUDGE_BASE_URL=scripted, JUDGE_MODEL="judge")
    assert judged["status"] == "success" and judged["rewards"] == [1.0, 1.0]


def test_bailian_agentic_rl_example_workspace(tmp_path):
    """The Bailian demo's layout: submit_job.py, test_functions.py, cli.sh, resources/*_input.json,
    the reward, decorator and group rewards (run locally on their example inputs), an OPD job."""
    ws = create_workspace(tmp_path / "agentic-rl-example", "agentic-rl-example", train_rows=8,
                          val_rows=2)
    for name in ("submit_job.py", "test_functions.py", "cli.sh", "job.yaml", "opd-job.yaml",
                 "resources/rollout_input.json", "resources/reward_input.json",
                 "resources/group_reward_input.json", "functions/reward/reward_decorator.py",
                 "functions/reward/group_reward.py", "data/calc_train_min.jsonl"):
        assert (ws / name).is_file(), name
    allowed = {"dashscope", "openai", "functions"} | set(sys.stdlib_module_names) | {
        "__future__"}  # functions: the workspace's own package
    for path in [*ws.glob("*.py"), *ws.glob("functions/**/*.py")]:
        assert _imports(path) <= allowed, f"{path.name} imports {_imports(path) - allowed}"
    assert load_job_config(ws / "job.yaml").rewards[0].reward_metric_weight == {
        "accuracy": 0.7, "format": 0.3}
    assert load_job_config(ws / "opd-job.yaml").training.type.value == "pg_opd"
    env = {**os.environ, "RLTUNE_HOME": str(tmp_path / "home")}
    for classpath, kind, score in (
            ("functions.reward.reward.DemoRewardProcessor", "reward", 1.0),
            ("functions.reward.reward_decorator.SafetyProcessor", "reward", 1.0),
            ("functions.reward.group_reward.DemoGroupRewardProcessor", "group_reward", None)):
        res = subprocess.run([sys.executable, "-m", "rltune.cli.main", "test-functions", "-c",
                              classpath, "-i", f"resources/{kind}_input.json", "-o", "json"],
                             cwd=ws, env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        out = json.loads(res.stdout)
        assert out["status"] == "success", out
        if score is not None:
            assert out["reward"]["reward_score"] == pytest.approx(score)
        else:
            assert out["reward"]["rewards"][0]["reward_score"] > 0


def test_search_demo_judge_says_what_was_wrong_with_an_unreadable_reply(tmp_path):
    """A judge reply without {"scores": [...]}: RETRY naming the shape and quoting the reply
    (not an AttributeError of the regex)."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        return {"id": "j", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "Both answers look fine to me."}}]}

    ws = create_workspace(tmp_path / "s", "rl_search_mcp_demo", train_rows=4, val_rows=2)
    sample = {"messages": [{"role": "user", "content": "q"}], "extra": {"answer": "Porto"}}
    trajectory = {"messages": [{"role": "assistant", "content": "Porto"}]}
    with serve(app) as judge:
        res = subprocess.run(
            [*ARK, "test", "pipeline_plugin", "--fn", "plugins.llm_grader:llm_grader",
             "--request", json.dumps({"sample": sample, "trajectories": [trajectory] * 2})],
            cwd=ws, capture_output=True, text=True, timeout=120,
            env={**os.environ, "JUDGE_BASE_URL": judge, "JUDGE_MODEL": "judge"})
    assert res.returncode == 1, res.stderr
    out = json.loads(res.stdout)
    assert out["status"] == "retry"
    assert out["error"] == ("judge failed: the judge's reply is not {\"scores\": [2 numbers]}: "
                            "'Both answers look fine to me.'")


def test_weather_raw_rollout_and_random_reward_local_test(scripted, tmp_path):
    """Ark's weather demo in raw mode (``raw_rollout.py``) graded by ``random_reward.py``, run
    as Ark's docs run a local test (the file's ``__main__``)."""
    ws = create_workspace(tmp_path / "rl", "rl_demo", train_rows=4, val_rows=2)
    res = subprocess.run([*ARK, "plugins/raw_rollout.py"], cwd=ws, capture_output=True,
                         text=True, env={**os.environ, "ARK_BASE_URL": scripted}, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = dict(line.split(" ", 1) for line in res.stdout.splitlines() if line.startswith("["))
    # the scripted model asks for Beijing's weather: the row about Beijing contains the answer
    assert rows["[0]"].startswith("success rewards=[1.0]"), res.stdout
    assert rows["[1]"].startswith("success rewards=[0.0]"), res.stdout  # Shanghai: 22 is not
    summary = json.loads(res.stdout[res.stdout.index("{"):])
    assert summary["samples"] == 6 and summary["failed"] == 0, summary
