"""Registry: entity and instance ids, records under $RLTUNE_HOME, a loaded instance's URL."""

from __future__ import annotations

import json

import httpx
import pytest

from conftest import WS, rollout_input
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


async def test_load_gives_an_instance_with_a_url(reg):
    ent = reg.register("functions.behave.Behave", "rollout", WS)
    async with reg.load(ent.entity_id, runtime={"concurrency": 4}, timeout=5) as loaded:
        inst = loaded.instance
        assert inst.instance_id.startswith("ro-ins-") and inst.status == "active"
        assert reg.get_instance(inst.instance_id).url == inst.url
        async with httpx.AsyncClient() as c:
            r = await c.post(inst.trigger_url, json=rollout_input("hey"))
            assert r.json()["agent_output"]["messages"][-1]["content"] == "echo hey"
            r = await c.post(inst.trigger_url, json=rollout_input(**{"raise": "x"}))
            assert r.status_code == 200 and r.json()["status"] == "failed"
            r = await c.post(inst.trigger_url, json={"messages": "nope"})
            assert r.status_code == 422
            health = (await c.get(inst.url + "/health")).json()
            assert health["workers"] == 1 and health["calls"] == 2
        # the instance runs the extracted archive, not the source folder
        assert str(loaded.pool.spec.workspace).startswith(str(reg.root / "workspaces"))
    assert reg.get_instance(inst.instance_id).status == "stopped"
