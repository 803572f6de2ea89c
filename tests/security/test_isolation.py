"""A hostile tenant's function, run by the real server, finds none of the server's secrets."""

from __future__ import annotations

import json
import os

import pytest

from rltune.functions.sandbox import active_isolation, bwrap_problem

from .conftest import run_function

HOSTILE = '''
import glob, json, os
from rltune.sdk import AbstractRewardProcessor, Reward, RewardOutput

def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(4096).decode("utf-8", "replace")
    except Exception as exc:
        return "ERR " + type(exc).__name__

class Spy(AbstractRewardProcessor):
    async def process(self, input_data):
        t = json.loads(os.environ["TARGETS"])
        found = {"env": dict(os.environ)}
        for name in ("admin_key", "db", "other_file", "server_environ"):
            found[name] = _read(t[name])
        found["home_listing"] = sorted(glob.glob(t["home"] + "/**", recursive=True))[:50]
        with open(os.path.join(os.environ["TMPDIR"], "scratch"), "w") as fh:
            fh.write("ok")  # a private temporary directory is writable
        return RewardOutput(reward=Reward(reward_score=0.0, found=found))
'''


def test_a_hostile_function_reads_no_secret(server):
    if active_isolation() != "bwrap" and not os.environ.get("RLTUNE_REQUIRE_ISOLATION"):
        pytest.skip(f"no sandbox here: {bwrap_problem()}")
    home = server.home
    admin_key = server.key
    with server.client() as admin:
        other = admin.post("/v1/keys", json={"workspace": "victim"}).json()
        tenant = admin.post("/v1/keys", json={"workspace": "tenant"}).json()
    with server.client(other["api_key"]) as victim:
        f = victim.post("/v1/files", params={"filename": "secret.jsonl"},
                        content=b'{"messages": [{"role": "user", "content": "VICTIMDATA"}]}\n')
        assert f.status_code == 201, f.text
    victim_file = next((home / "server" / "files" / "victim").glob("*.jsonl"))
    targets = {"admin_key": str(home / "server" / "admin.key"),
               "db": str(home / "server" / "rltune.db"), "other_file": str(victim_file),
               "server_environ": f"/proc/{server.proc.pid}/environ", "home": str(home)}
    with server.client(tenant["api_key"]) as c:
        found = run_function(c, {"spy.py": HOSTILE}, "spy.py:Spy",
                             {"TARGETS": json.dumps(targets)})
    text = json.dumps(found)
    assert admin_key not in text and other["api_key"] not in text
    assert "VICTIMDATA" not in text and "SQLite format" not in text
    for name in ("admin_key", "db", "other_file", "server_environ"):
        assert found[name].startswith("ERR "), (name, found[name])
    # Nothing of the server's home is mounted (its code is at /workspace).
    # (glob answers "<home>/" for a "<home>/**" that does not exist)
    assert found["home_listing"] in ([], [f"{home}/"]), found["home_listing"]
    env = found["env"]
    assert "RLTUNE_HOME" not in env and "RLTUNE_API_KEY" not in env
    assert not any(str(home / "server") in v for k, v in env.items() if k != "TARGETS"), env
    assert set(env) <= {"PATH", "PWD", "HOME", "TMPDIR", "PYTHONPATH", "PYTHONUNBUFFERED",
                        "PYTHONDONTWRITEBYTECODE", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
                        "TARGETS", "RLTUNE_WORKER_CPU", "RLTUNE_LOG_LEVEL",
                        "RLTUNE_WORKER_HTTP", "RLTUNE_WORKER_LOOP", "OMP_NUM_THREADS",
                        "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                        "RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM"}, sorted(env)
