"""Registry: entity and instance ids and records under $RLTUNE_HOME; it starts no process.

``run_instance`` (front.py) is what starts a registered entity's pool and URL."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import psutil
import pytest

from conftest import WS, rollout_input
from rltune.functions.front import run_instance
from rltune.functions.registry import FunctionRegistry
from rltune.sdk.errors import NotFoundError


@pytest.fixture
def reg(tmp_path, monkeypatch):
    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "home"))
    return FunctionRegistry()


def test_register_ids_records_and_dedup(reg, tmp_path):
    ro = reg.register("functions.behave.Behave", "rollout", WS)
    rw = reg.register("functions/sync_reward.py:ExactMatch", "reward", WS, name="exact")
    grw = reg.register("functions.cloud_reward.LengthRank", "group_reward", WS)
    assert ro.entity_id.startswith("ro-") and rw.entity_id.startswith("rw-")
    assert grw.entity_id.startswith("grw-") and not grw.entity_id.startswith("grw-ins")
    root = tmp_path / "home" / "functions"
    saved = json.loads((root / "entities" / f"{rw.entity_id}.json").read_text())
    assert saved["name"] == "exact" and saved["classpath"] == "functions/sync_reward.py:ExactMatch"
    assert len(list((root / "archives").glob("*.zip"))) == 1  # same content, one archive
    assert [e.entity_id for e in reg.list("reward")] == [rw.entity_id]
    assert reg.get(ro.entity_id).files == ro.files and "requirements.txt" in ro.files


def test_clear_errors(reg, tmp_path):
    with pytest.raises(NotFoundError, match="no registered function 'rw-nope'"):
        reg.get("rw-nope")
    with pytest.raises(NotFoundError, match=r"functions/missing\.py does not exist"):
        reg.register("functions.missing.X", "reward", WS)
    ws = tmp_path / "ws"
    (ws / "data").mkdir(parents=True)
    (ws / "data" / "r.py").write_text("")
    with pytest.raises(NotFoundError, match="excluded from the archive"):
        reg.register("data/r.py:R", "reward", ws)


def test_instance_records_active_then_stopped(reg):
    ent = reg.register("functions.behave.Behave", "rollout", WS)
    spec = reg.spec_for(ent.entity_id, {"concurrency": 4}, timeout=5)
    inst = reg.record_instance(ent.entity_id, "http://127.0.0.1:9", spec.runtime, 5)
    assert inst.instance_id.startswith("ro-ins-") and inst.status == "active"
    assert inst.trigger_url == "http://127.0.0.1:9/api/v1" and inst.runtime.concurrency == 4
    assert [i.instance_id for i in reg.list_instances()] == [inst.instance_id]
    assert reg.mark_stopped(inst.instance_id).status == "stopped"
    assert reg.get_instance(inst.instance_id).status == "stopped"
    with pytest.raises(NotFoundError, match="no function instance 'ro-ins-nope'"):
        reg.get_instance("ro-ins-nope")


def test_an_instance_whose_owner_died_reads_stopped(reg):
    ent = reg.register("functions/sync_reward.py:ExactMatch", "reward", WS)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    inst = reg.record_instance(ent.entity_id, "http://127.0.0.1:9",
                               reg.spec_for(ent.entity_id).runtime, owner_pid=dead.pid)
    assert inst.instance_id.startswith("rw-ins-")
    assert reg.get_instance(inst.instance_id).status == "stopped"


def test_spec_for_runs_the_extracted_archive_and_starts_nothing(reg):
    ent = reg.register("functions.behave.Behave", "rollout", WS)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    spec = reg.spec_for(ent.entity_id, timeout=5)
    assert {p.pid for p in psutil.Process().children(recursive=True)} == before
    assert str(spec.workspace).startswith(str(reg.root / "workspaces"))
    assert (spec.workspace / "functions" / "behave.py").is_file()
    assert spec.classpath == ent.classpath and spec.timeout == 5


async def test_run_instance_serves_a_registered_entity(reg):
    ent = reg.register("functions.behave.Behave", "rollout", WS)
    spec = reg.spec_for(ent.entity_id, {"concurrency": 4}, timeout=5)
    async with run_instance(spec) as (pool, url):
        async with httpx.AsyncClient() as c:
            r = await c.post(f"{url}/api/v1", json=rollout_input("hey"))
            assert r.json()["agent_output"]["messages"][-1]["content"] == "echo hey"
            r = await c.post(f"{url}/api/v1", json=rollout_input(**{"raise": "x"}))
            assert r.status_code == 200 and r.json()["status"] == "failed"
            r = await c.post(f"{url}/api/v1", json={"messages": "nope"})
            assert r.status_code == 422
            health = (await c.get(url + "/health")).json()
            assert health["workers"] == 1 and health["calls"] == 2
        assert pool.spec.workspace == spec.workspace
        pids = [w.handle.pid for w in pool.workers]
    assert pids and not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                            for p in pids)
