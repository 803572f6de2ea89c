"""``/v1/instances`` on a real server: one owner (``InstanceManager``) of the instance records.

Load, list, get, test, logs, stop (by deleting the function) and delete answer the same shapes as
before; a server instance leaves no record in the function registry's folder; another workspace
sees 404; a job may name an instance by id; after a restart the records read ``stopped``.
"""

from __future__ import annotations

import io
import json
import signal
import zipfile

from .conftest import start_server

ROW = json.dumps({"messages": [{"role": "user", "content": "1+1"}],
                  "rollout_extra": {"answer": "2"}}) + "\n"
CODE = ("from rltune.sdk import AbstractRewardProcessor, Reward, RewardOutput\n"
        "class R(AbstractRewardProcessor):\n"
        "    async def process(self, data):\n"
        "        return RewardOutput(reward=Reward(reward_score=0.5))\n")
VIEW_KEYS = {"instance_id", "entity_id", "type", "status", "trigger_url", "runtime", "created_at"}
REWARD_INPUT = {"agent_output": {"messages": [{"role": "assistant", "content": "2"}]}}


def _zip(entries: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in entries.items():
            zf.writestr(name, text)
    return buf.getvalue()


def _register(c, ftype: str) -> str:
    r = c.post("/v1/functions", params={"classpath": "r.py:R", "type": ftype},
               content=_zip({"r.py": CODE}))
    assert r.status_code == 201, r.text
    return r.json()["entity_id"]


def test_instance_lifecycle_over_rest(server):
    with server.client() as c:
        rw = _register(c, "reward")
        r = c.post(f"/v1/functions/{rw}/load",
                   json={"runtime": {"concurrency": 2, "env": {"TOKEN": "s3cret"}},
                         "timeout": 30})
        assert r.status_code == 201, r.text
        inst = r.json()
        iid = inst["instance_id"]
        assert set(inst) == VIEW_KEYS and iid.startswith("rw-ins-")
        assert (inst["entity_id"], inst["type"], inst["status"]) == (rw, "reward", "active")
        assert inst["trigger_url"].startswith("http://127.0.0.1:")
        assert inst["trigger_url"].endswith("/api/v1")
        assert inst["runtime"]["concurrency"] == 2 and inst["runtime"]["env"] == {"TOKEN": "***"}
        # the list and the record read the one source
        listed = c.get("/v1/instances").json()
        assert listed["total"] == 1 and listed["items"] == [inst]
        assert c.get(f"/v1/instances/{iid}").json() == inst
        # the registry keeps no record of a server instance
        folder = server.home / "functions" / "instances"
        assert not folder.exists() or not list(folder.iterdir())

        out = c.post(f"/v1/instances/{iid}/test", json={"input": REWARD_INPUT})
        assert out.status_code == 200, out.text
        body = out.json()
        assert set(body) == {"instance_id", "status", "seconds", "output"}
        assert body["status"] == "success" and body["output"]["reward"]["reward_score"] == 0.5
        wrong = c.post(f"/v1/instances/{iid}/test", json={"input": {}, "type": "rollout"})
        assert wrong.status_code == 422 and wrong.json()["error"]["where"] == "type"
        logs = c.get(f"/v1/instances/{iid}/logs").json()
        assert logs["total"] == 2 and logs["next_offset"] == 3
        assert "loaded " + rw in logs["logs"][0] and "test: success" in logs["logs"][1]

        # a job names the instance by id: it resolves to the entity (the model check fails later)
        f = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW * 4).json()
        ro = _register(c, "rollout")
        config = {"model": "no-such-model",
                  "datasets": [{"type": "training", "file_id": f["file_id"]}],
                  "functions": [{"type": "rollout", "name": "ro", "entity_id": ro},
                                {"type": "reward", "name": "rw", "instance_id": iid}],
                  "training": {"hyper_parameters": {"batch_size": 2, "n_rollouts": 2,
                                                    "max_prompt_length": 100,
                                                    "max_length": 200}}}
        job = c.post("/v1/jobs", json={"config": config})
        assert job.json()["error"]["where"] == "model.name", job.text
        config["functions"][1]["instance_id"] = "rw-ins-nope"
        job = c.post("/v1/jobs", json={"config": config})
        assert job.status_code == 404 and job.json()["error"]["where"] == (
            "functions[1] (rw).instance_id")

        other = c.post("/v1/keys", json={"workspace": "team-b"}).json()
    with server.client(other["api_key"]) as b:
        assert b.get("/v1/instances").json()["total"] == 0
        for method, path in (("GET", f"/v1/instances/{iid}"), ("GET", f"/v1/instances/{iid}/logs"),
                             ("POST", f"/v1/instances/{iid}/test"),
                             ("DELETE", f"/v1/instances/{iid}")):
            r = b.request(method, path, **({"json": {"input": {}}} if method == "POST" else {}))
            assert r.status_code == 404, (method, path, r.text)
            assert r.json()["error"]["code"] == "not_found"

    with server.client() as c:
        # deleting the function stops its instances; the record stays, as stopped
        assert c.delete(f"/v1/functions/{rw}").json() == {"entity_id": rw, "deleted": True}
        stopped = c.get(f"/v1/instances/{iid}").json()
        assert stopped == {**inst, "status": "stopped", "trigger_url": None}
        r = c.post(f"/v1/instances/{iid}/test", json={"input": REWARD_INPUT})
        assert r.status_code == 409 and "is stopped" in r.json()["error"]["message"]
        assert c.get(f"/v1/instances/{iid}/logs").json()["logs"][-1].endswith(" stopped")
        assert c.delete(f"/v1/instances/{iid}").json() == {"instance_id": iid, "deleted": True}
        assert c.get(f"/v1/instances/{iid}").status_code == 404


def test_instances_read_stopped_after_a_restart(server_home):
    srv = start_server(server_home)
    try:
        with srv.client() as c:
            rw = _register(c, "reward")
            iid = c.post(f"/v1/functions/{rw}/load", json={}).json()["instance_id"]
            assert c.get(f"/v1/instances/{iid}").json()["status"] == "active"
    finally:
        srv.kill(signal.SIGTERM)
    srv = start_server(server_home)
    try:
        with srv.client() as c:
            view = c.get(f"/v1/instances/{iid}").json()
            assert (view["status"], view["trigger_url"]) == ("stopped", None)
            r = c.post(f"/v1/instances/{iid}/test", json={"input": REWARD_INPUT})
            assert r.status_code == 409
    finally:
        srv.kill(signal.SIGTERM)
