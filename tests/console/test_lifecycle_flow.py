"""The model lifecycle end to end on the warm-started nano agent, through REST with real keys
(slow: it trains a short GSPO job, then a second job and two evaluations).

nano job (``tuned_model_name`` set) → auto-published → publish best → deploy → the official
``openai`` client chats with it (tool call included) → evaluation base vs tuned → a job with
``model: <published name>`` starts from exactly those weights → stop → delete the source job
→ the model still deploys and answers. Another workspace's key gets 404 at every step.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import httpx
import pytest
from console_harness import ServerProc, submit_calc_job

from rltune.models.tasks import CALCULATOR_TOOL, SYSTEM_PROMPT

pytestmark = pytest.mark.slow
TRAIN_HP = {"batch_size": 8, "n_rollouts": 8, "ppo_mini_batch_size": 32, "learning_rate": 2e-4,
            "lr_scheduler_type": "constant", "kl_loss_coef": 0.0, "max_length": 256,
            "max_prompt_length": 200, "eval_steps": 3, "val_n_rollouts": 2, "save_steps": 3,
            "save_total_limit": 3, "n_epochs": 1}


def tensor_hashes(model_dir: Path) -> dict[str, str]:
    from safetensors import safe_open

    out = {}
    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as f:
        for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
            out[name] = hashlib.sha256(f.get_tensor(name).numpy().tobytes()).hexdigest()
    return out


def wait_for(get, ok, timeout=300.0):
    deadline = time.monotonic() + timeout
    while True:
        rec = get()
        if ok(rec):
            return rec
        assert time.monotonic() < deadline, rec
        assert rec["status"] not in ("FAILED",), rec
        time.sleep(0.5)


@pytest.fixture(scope="module")
def srv(tmp_path_factory) -> ServerProc:
    home = tmp_path_factory.mktemp("lifecycle_home")
    s = ServerProc.start(home, max_jobs=1)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def trained(srv, nano_model_dir, tmp_path_factory) -> str:
    """6 GSPO steps of 8 questions x 8 rollouts (the demo's recipe), auto-published."""
    work = tmp_path_factory.mktemp("trained")
    job_id = submit_calc_job(srv, work, nano_model_dir, name="calc-train", train_rows=48,
                             val_rows=16, top={"tuned_model_name": "calc-auto"}, **TRAIN_HP)
    srv.wait(job_id, {"SUCCEEDED"}, timeout=1500)
    return job_id


@pytest.fixture(scope="module")
def other(srv) -> httpx.Client:
    key = srv.call("POST", "/v1/keys", json={"workspace": "other", "name": "o"})["api_key"]
    c = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    yield c
    c.close()


def assert_404(resp: httpx.Response) -> None:
    assert resp.status_code == 404, (resp.request.method, resp.request.url, resp.text)


def questions(n: int = 8) -> list[str]:
    from rltune.models.recipes import recipe_for
    from rltune.models.tasks import make_dataset_rows

    rows = make_dataset_rows(n, "heldout", seed=1, config=recipe_for("nano").config.task)
    return [r["messages"][-1]["content"] for r in rows]


def chat_with_tool(client, model: str) -> None:
    """Ask calculator questions (sampled at temperature 1, as in training; greedy decoding of
    the nano agent tends to answer directly) until the model calls the tool, run the tool
    and finish the turn."""
    from rltune.models.tasks import calculate

    for i, q in enumerate(questions()):
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": q}]
        resp = client.chat.completions.create(model=model, messages=messages,
                                              tools=[CALCULATOR_TOOL], temperature=1.0, seed=i,
                                              max_tokens=64, logprobs=True)
        msg = resp.choices[0].message
        assert resp.model == model and resp.choices[0].logprobs.content
        if not msg.tool_calls:
            continue
        call = msg.tool_calls[0]
        assert call.function.name == "calculator"
        assert resp.choices[0].finish_reason == "tool_calls"
        expression = json.loads(call.function.arguments)["expression"]
        messages += [msg.model_dump(exclude_none=True, exclude={"refusal"}),
                     {"role": "tool", "tool_call_id": call.id,
                      "content": str(calculate(expression))}]
        final = client.chat.completions.create(model=model, messages=messages,
                                               tools=[CALCULATOR_TOOL], temperature=1.0,
                                               seed=i, max_tokens=64)
        assert final.choices[0].message.content or final.choices[0].message.tool_calls
        return
    raise AssertionError("the model never called the calculator")


def test_console_publish_deploy_playground_and_evaluation(page, srv, trained):
    """Publish from the Outputs tab, deploy from Models, chat in the playground (tool call
    answered, tokens coloured), evaluate base vs the published model from the Models page
    and read it side by side."""
    from console_harness import login, shot
    from playwright.sync_api import expect

    login(page, srv)
    page.goto(f"{srv.url}/#/jobs/{trained}/outputs")
    page.fill("#publish-name", "calc-ui")
    page.click("#publish-btn")
    expect(page.locator("#published-link")).to_have_text("calc-ui")
    published = srv.call("GET", "/v1/models/calc-ui")
    assert published["source_job"] == trained and published["checkpoint"] == best_of(srv, trained)
    page.click("#published-link")
    page.locator("#models-table tr[data-model='calc-ui'] .deploy-btn").click()
    expect(page.locator("#deployment-key")).to_contain_text("rlt-")
    link = page.locator("#deployments-table .playground-link")
    expect(link).to_have_count(1, timeout=180_000)
    shot(page, "models")
    link.click()
    expect(page.locator("#chat-model")).to_have_value("calc-ui")
    page.fill("#chat-system", SYSTEM_PROMPT)
    page.fill("#chat-tools", json.dumps([CALCULATOR_TOOL]))
    page.fill("#chat-temperature", "1")
    for question in questions():
        page.click("#chat-reset")
        page.fill("#chat-input", question)
        page.click("#chat-send")
        last = page.locator(".chat-msg.role-assistant")
        expect(last).to_have_count(1, timeout=60_000)
        assert last.locator(".playground-tokens .tok").count() > 0
        if last.locator(".tool-call").count():
            assert "calculator(" in last.locator(".tool-call").first.inner_text()
            page.fill("#chat-input", "7")
            page.click("#chat-send")
            expect(page.locator(".chat-msg.role-tool")).to_have_count(1)
            expect(page.locator(".chat-msg.role-assistant")).to_have_count(2, timeout=60_000)
            break
    else:
        raise AssertionError("the model never called the calculator in the playground")
    shot(page, "playground")
    # evaluate base vs the published model from the Models page; read it side by side
    page.goto(f"{srv.url}/#/models")
    page.fill("#eval-job", trained)
    page.fill("#eval-models", "base, calc-ui")
    page.fill("#eval-n", "8")
    page.click("#eval-form button[type=submit]")
    opener = page.locator("#evaluations-table .eval-open")
    expect(opener).to_have_count(1, timeout=900_000)
    opener.click()
    base = float(page.locator("#eval-totals tr[data-model='base'] .mean1").inner_text())
    tuned = float(page.locator("#eval-totals tr[data-model='calc-ui'] .mean1").inner_text())
    assert tuned > base
    expect(page.locator("#eval-prompts tr")).to_have_count(17)  # header + 16 prompts
    shot(page, "evaluation")
    for d in srv.call("GET", "/v1/deployments")["items"]:
        if d["status"] in ("STARTING", "RUNNING"):
            srv.call("POST", f"/v1/deployments/{d['deployment_id']}/stop")
    srv.call("DELETE", "/v1/models/calc-ui")


def best_of(srv, job_id: str) -> str:
    ckpts = srv.call("GET", f"/v1/jobs/{job_id}/checkpoints")["checkpoints"]
    return max((c for c in ckpts if c["validation_reward"] is not None),
               key=lambda c: (c["validation_reward"], c["step"]))["name"]


def test_publish_deploy_chat_evaluate_continue(srv, trained, other, nano_model_dir,
                                               tmp_path_factory):
    import openai

    job_id = trained
    # ---- tuned_model_name auto-published the best checkpoint
    auto = srv.call("GET", "/v1/models/calc-auto")
    assert auto["source_job"] == job_id and auto["auto"] is True
    assert srv.job(job_id).get("error") is None
    ckpts = srv.call("GET", f"/v1/jobs/{job_id}/checkpoints")["checkpoints"]
    best = max((c for c in ckpts if c["validation_reward"] is not None),
               key=lambda c: (c["validation_reward"], c["step"]))
    assert auto["checkpoint"] == best["name"]

    # ---- publish best through REST; another workspace sees none of it
    assert_404(other.post(f"/v1/jobs/{job_id}/publish", json={"name": "x"}))
    pub = srv.call("POST", f"/v1/jobs/{job_id}/publish",
                   json={"name": "calc-best", "checkpoint": "best"})
    assert pub["checkpoint"] == best["name"] and pub["kind"] == "full"
    assert pub["validation_reward"] == best["validation_reward"]
    assert [m["name"] for m in srv.call("GET", "/v1/models")["items"]] == ["calc-best",
                                                                           "calc-auto"]
    assert other.get("/v1/models").json()["items"] == []
    for method, path in (("GET", "/v1/models/calc-best"), ("DELETE", "/v1/models/calc-best"),
                         ("GET", "/v1/models/calc-best/export")):
        assert_404(other.request(method, path))
    assert_404(other.post("/v1/deployments", json={"models": ["calc-best"]}))

    # ---- deploy both models on one gateway; chat with the official openai client
    dep = srv.call("POST", "/v1/deployments", json={"models": ["calc-best", "calc-auto"]})
    dep_id, key = dep["deployment_id"], dep["api_key"]
    dep = wait_for(lambda: srv.call("GET", f"/v1/deployments/{dep_id}"),
                   lambda d: d["status"] == "RUNNING")
    for method, path in (("GET", f"/v1/deployments/{dep_id}"),
                         ("GET", f"/v1/deployments/{dep_id}/logs"),
                         ("POST", f"/v1/deployments/{dep_id}/keys"),
                         ("POST", f"/v1/deployments/{dep_id}/chat/completions"),
                         ("POST", f"/v1/deployments/{dep_id}/stop"),
                         ("DELETE", f"/v1/deployments/{dep_id}")):
        assert_404(other.request(method, path, json={} if method == "POST" else None))
    client = openai.OpenAI(base_url=dep["base_url"], api_key=key)
    assert {m.id for m in client.models.list()} == {"calc-best", "calc-auto"}
    chat_with_tool(client, "calc-best")
    chat_with_tool(client, "calc-auto")
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=dep["base_url"], api_key="rlt-wrong").models.list()
    extra = srv.call("POST", f"/v1/deployments/{dep_id}/keys")["api_key"]
    assert openai.OpenAI(base_url=dep["base_url"], api_key=extra).models.list().data
    with pytest.raises(openai.AuthenticationError):  # a workspace key is no deployment key
        openai.OpenAI(base_url=dep["base_url"], api_key=srv.key).models.list()

    # ---- evaluation: base vs tuned on the validation set, as JSON from the CLI
    import os
    import subprocess
    import sys

    assert_404(other.post("/v1/evaluations", json={"job_id": job_id}))
    env = {**os.environ, "RLTUNE_BASE_URL": srv.url, "RLTUNE_API_KEY": srv.key}
    out = subprocess.run([sys.executable, "-m", "rltune.cli.main", "models", "evaluate", job_id,
                          "-m", "base", "-m", "calc-best", "-n", "8", "-k", "2", "-o", "json"],
                         env=env, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stderr
    ev = json.loads(out.stdout)
    by = {m["model"]: m for m in ev["result"]["models"]}
    assert by["calc-best"]["mean@1"] > by["base"]["mean@1"], ev["summary"]
    assert len(ev["result"]["per_prompt"]) == 16
    assert set(ev["result"]["per_prompt"][0]["models"]) == {"base", "calc-best"}
    assert_404(other.get(f"/v1/evaluations/{ev['evaluation_id']}"))

    # ---- continue training: `model: calc-best` starts from exactly its weights
    published = Path(srv.home) / "published" / "default" / "calc-best"
    assert tensor_hashes(published) != tensor_hashes(nano_model_dir)  # training changed them
    work = tmp_path_factory.mktemp("cont")
    job2 = submit_calc_job(srv, work, nano_model_dir, name="calc-cont", train_rows=2,
                           val_rows=2, top={"model": "calc-best"}, batch_size=2, n_rollouts=2,
                           learning_rate=0.0, save_steps=1, n_epochs=1)
    j2 = srv.wait(job2, {"SUCCEEDED"}, timeout=600)
    assert j2["model"] == "calc-best"
    ckpt = srv.call("GET", f"/v1/jobs/{job2}/checkpoints")["checkpoints"][0]
    assert tensor_hashes(Path(ckpt["path"])) == tensor_hashes(published)

    # ---- stop; delete the source job; the model still deploys and answers
    stopped = srv.call("POST", f"/v1/deployments/{dep_id}/stop")
    assert stopped["status"] == "STOPPED"
    with pytest.raises(openai.APIConnectionError):
        openai.OpenAI(base_url=dep["base_url"], api_key=key, max_retries=0).models.list()
    srv.call("DELETE", f"/v1/jobs/{job_id}")
    assert not (Path(srv.home) / "server" / "jobs" / job_id).exists()
    dep2 = srv.call("POST", "/v1/deployments", json={"models": ["calc-best"]})
    d2 = wait_for(lambda: srv.call("GET", f"/v1/deployments/{dep2['deployment_id']}"),
                  lambda d: d["status"] == "RUNNING")
    chat_with_tool(openai.OpenAI(base_url=d2["base_url"], api_key=dep2["api_key"]),
                   "calc-best")
    srv.call("POST", f"/v1/deployments/{dep2['deployment_id']}/stop")

