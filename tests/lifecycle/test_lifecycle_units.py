"""Publishing, scoring and export helpers, and the deployment router in process."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os

import httpx
import pytest

from rltune.lifecycle.export import export_dir
from rltune.lifecycle.publish import check_name, link_model_files, pick_checkpoint
from rltune.lifecycle.scores import pass_at_k, prompt_scores
from rltune.sdk.errors import ConflictError, NotFoundError, ValidationError

CKPTS = [{"name": "checkpoint-2", "step": 2, "validation_reward": 0.5},
         {"name": "checkpoint-4", "step": 4, "validation_reward": 0.5},
         {"name": "checkpoint-6", "step": 6, "validation_reward": None}]


def test_pick_checkpoint():
    assert pick_checkpoint(CKPTS, "best")["step"] == 4  # ties: the later one
    assert pick_checkpoint(CKPTS, "last")["step"] == 6
    assert pick_checkpoint(CKPTS, None)["step"] == 6
    assert pick_checkpoint(CKPTS, 2)["step"] == 2
    assert pick_checkpoint(CKPTS, "checkpoint-2")["step"] == 2
    unscored = [{**c, "validation_reward": None} for c in CKPTS]
    assert pick_checkpoint(unscored, "best")["step"] == 6
    with pytest.raises(NotFoundError, match="no checkpoint at step 3"):
        pick_checkpoint(CKPTS, 3)
    with pytest.raises(ValidationError):
        pick_checkpoint(CKPTS, "newest")
    with pytest.raises(NotFoundError, match="no checkpoint"):
        pick_checkpoint([], "best")
    with pytest.raises(ValidationError):
        check_name("../x")


def test_link_model_files_hard_links_and_skips_resume_state(tmp_path):
    src = tmp_path / "checkpoint-1"
    (src / "adapter").mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "training_state.pt", "rng_state.pt",
                 "adapter/adapter_config.json"):
        (src / name).write_text(name)
    dst = tmp_path / "pub" / "m"
    link_model_files(src, dst)
    assert sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file()) == [
        "adapter/adapter_config.json", "config.json", "model.safetensors"]
    assert os.stat(dst / "model.safetensors").st_ino == os.stat(src / "model.safetensors").st_ino
    with pytest.raises(ConflictError):
        link_model_files(src, dst)
    export_dir(dst, tmp_path / "merged", "merged")
    assert not (tmp_path / "merged" / "adapter").exists()
    export_dir(dst, tmp_path / "adapter", "adapter")
    assert [p.name for p in (tmp_path / "adapter").iterdir()] == ["adapter_config.json"]


def test_pass_at_k_and_prompt_scores():
    assert pass_at_k(4, 0, 2) == 0.0 and pass_at_k(4, 4, 1) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)  # 1 - C(3,3)/C(5,3)
    assert pass_at_k(5, 3, 3) == 1.0  # 2 failures < k: some pick always passes
    s = prompt_scores([1.0, None, 0.5, 0.0], k=2, threshold=1.0)
    assert s["mean@1"] == pytest.approx(0.375) and s["failed"] == 1 and s["passed"] == 1
    assert s["pass@k"] == pytest.approx(0.5)


def test_router_authenticates_and_routes_by_model(tmp_path, tiny_model_dir):
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway.server import Gateway
    from rltune.lifecycle.serveproc import KeyRing, Router

    (tmp_path / "internal.key").write_text("internal-secret")
    (tmp_path / "keys.json").write_text(json.dumps({"sha256": [
        hashlib.sha256(b"key-a").hexdigest()]}))

    async def go():
        engines = {n: TransformersEngine.from_pretrained(tiny_model_dir, threads=1, model_name=n)
                   for n in ("m-a", "m-b")}
        router = Router({n: Gateway(e, open_access=True) for n, e in engines.items()},
                        KeyRing(tmp_path))
        transport = httpx.ASGITransport(app=router)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                assert (await c.get("/health")).json()["models"] == ["m-a", "m-b"]
                assert (await c.get("/v1/models")).status_code == 401
                bad = {"Authorization": "Bearer key-b"}
                assert (await c.get("/v1/models", headers=bad)).status_code == 401
                ok = {"Authorization": "Bearer key-a"}
                ids = [m["id"] for m in (await c.get("/v1/models", headers=ok)).json()["data"]]
                assert ids == ["m-a", "m-b"]
                body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
                for name in ("m-b", "m-a"):
                    r = await c.post("/v1/chat/completions", headers=ok,
                                     json={**body, "model": name})
                    assert r.status_code == 200 and r.json()["model"] == name
                r = await c.post("/v1/chat/completions", headers=ok, json={**body, "model": "x"})
                assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
                # a key added later is read on its next use; the internal key always works
                (tmp_path / "keys.json").write_text(json.dumps({"sha256": [
                    hashlib.sha256(b"key-b").hexdigest()]}))
                os.utime(tmp_path / "keys.json", ns=(1, 1))
                assert (await c.get("/v1/models", headers=bad)).status_code == 200
                assert (await c.get("/v1/models", headers=ok)).status_code == 401
                internal = {"Authorization": "Bearer internal-secret"}
                assert (await c.get("/v1/models", headers=internal)).status_code == 200
        finally:
            for e in engines.values():
                await e.close()

    asyncio.run(go())


def _fake_job(store, jobs_dir, job_id, rewards, tuned="m1"):
    import time

    for step, reward in enumerate(rewards, start=1):
        ck = jobs_dir / job_id / "checkpoints" / f"checkpoint-{step}"
        ck.mkdir(parents=True)
        (ck / "trainer_state.json").write_text(json.dumps({"validation_reward": reward}))
        (ck / "config.json").write_text("{}")
        (ck / "model.safetensors").write_text(f"weights {job_id} {step}")
    store.put("jobs", {"id": job_id, "workspace": "w", "status": "SUCCEEDED",
                       "created_at": time.time(), "model": "nano", "algorithm": "gspo",
                       "config": {"tuned_model_name": tuned,
                                  "training": {"hyper_parameters": {"lora_rank": 4}}}})


def test_auto_publish_takes_the_best_and_reports_a_taken_name(tmp_path):
    from rltune.server.published import auto_publish, find_model
    from rltune.server.store import open_store

    store = open_store(":memory:")
    jobs = tmp_path / "jobs"
    _fake_job(store, jobs, "ft-1", [0.2, 0.9, 0.5])
    assert auto_publish(store, tmp_path, jobs, "ft-1") == "m1"
    rec = find_model(store, "w", "m1")
    assert rec["checkpoint"] == "checkpoint-2" and rec["kind"] == "lora" and rec["auto"]
    assert (tmp_path / "published" / "w" / "m1" / "model.safetensors").read_text() == \
        "weights ft-1 2"
    _fake_job(store, jobs, "ft-2", [0.1])
    assert auto_publish(store, tmp_path, jobs, "ft-2") is None
    job = store.get("jobs", "ft-2")
    assert job["status"] == "SUCCEEDED" and "'m1' exists" in job["publish_error"]
    assert find_model(store, "w", "m1")["source_job"] == "ft-1"
    _fake_job(store, jobs, "ft-3", [0.1], tuned=None)
    assert auto_publish(store, tmp_path, jobs, "ft-3") is None


def test_lora_checkpoint_publishes_and_exports_merged_and_adapter(tmp_path):
    pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    from rltune.config import HyperParameters
    from rltune.lifecycle.publish import has_adapter
    from rltune.trainer.checkpoint import save_checkpoint
    from rltune.trainer.lora import wrap_with_lora
    from rltune.trainer.testing import tiny_qwen2

    ckpt = save_checkpoint(tmp_path / "ckpts", step=1,
                           model=wrap_with_lora(tiny_qwen2(), HyperParameters(lora_rank=4)))
    pub = tmp_path / "published" / "w" / "lora-m"
    link_model_files(ckpt, pub)
    assert has_adapter(pub)
    merged = export_dir(pub, tmp_path / "merged", "merged")
    assert AutoModelForCausalLM.from_pretrained(merged).num_parameters() > 0
    adapter = export_dir(pub, tmp_path / "adapter", "adapter")
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {
        p.name for p in adapter.iterdir()}


def test_auto_publish_takes_the_last_when_the_config_asks(tmp_path):
    """``publish_checkpoint: last`` publishes the last checkpoint as Bailian does when a job
    ends (not the best validated one); without tuned_model_name the key is refused."""
    from rltune.config import load_job_config_text
    from rltune.sdk.errors import ConfigError
    from rltune.server.published import auto_publish, find_model
    from rltune.server.store import open_store

    store = open_store(":memory:")
    jobs = tmp_path / "jobs"
    _fake_job(store, jobs, "ft-1", [0.2, 0.9, 0.5])
    job = store.get("jobs", "ft-1")
    store.update("jobs", "ft-1", config={**job["config"], "publish_checkpoint": "last"})
    assert auto_publish(store, tmp_path, jobs, "ft-1") == "m1"
    assert find_model(store, "w", "m1")["checkpoint"] == "checkpoint-3"
    with pytest.raises(ConfigError, match="publish_checkpoint"):
        load_job_config_text("model: nano\npublish_checkpoint: last\n")
    assert load_job_config_text("model: nano\ntuned_model_name: m\npublish_checkpoint: last\n"
                                ).publish_checkpoint == "last"


def test_a_deployment_and_a_lone_gateway_answer_bad_responses_bodies_alike(tmp_path,
                                                                          tiny_model_dir):
    """Issue 37 items 6 and 11: a body nested 50,000 deep is a 400 ``too_deep`` (not a 500)
    and ``input: ""`` a 400 naming ``input``, from a deployment's router and from the gateway
    alone (``rltune serve``)."""
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway.server import Gateway
    from rltune.lifecycle.serveproc import KeyRing, Router

    (tmp_path / "internal.key").write_text("internal-secret")
    (tmp_path / "keys.json").write_text(json.dumps({"sha256": []}))
    deep = b'{"model": "m", "input": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"

    async def go():
        engine = TransformersEngine.from_pretrained(tiny_model_dir, threads=1, model_name="m")
        gws = {n: Gateway(engine, open_access=True) for n in ("m", "n")}
        auth = {"Authorization": "Bearer internal-secret", "content-type": "application/json"}
        answers = []
        try:
            for app in (Router(gws, KeyRing(tmp_path)), Router({"m": gws["m"]},
                                                               KeyRing(tmp_path)), gws["m"].app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                    r = await c.post("/v1/responses", headers=auth, content=deep)
                    e = await c.post("/v1/responses", headers=auth,
                                     json={"model": "m", "input": ""})
                    answers.append(((r.status_code, r.json()["error"]["code"]),
                                    (e.status_code, e.json()["error"]["param"])))
                    assert "nested more than" in r.json()["error"]["message"]
                    assert "input: is empty" in e.json()["error"]["message"]
        finally:
            await engine.close()
        assert answers == [((400, "too_deep"), (400, "input"))] * 3, answers

    asyncio.run(go())
