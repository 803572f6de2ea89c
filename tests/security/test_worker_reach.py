"""Two workspaces on one server, functions in bubblewrap: tenant B's function posts a reward
input to every port listening on the loopback and gets no answer from tenant A's workers or
A's loaded instance (each answers only its own pool or the server), nor anything carrying A's
``runtime.env`` secret. Run as root and, where this machine lets ``nobody`` run the
interpreter, with the server as an unprivileged user."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from rltune.functions.sandbox import active_isolation, bwrap_problem
from server.conftest import wait_for_server  # tests/server/conftest.py

from .conftest import Server, run_function, start_server, zip_bytes

SECRET = "A-SECRET-7f3c0e"

#: Tenant A's reward: it answers with its runtime.env secret (what B must never read).
VICTIM = '''
import os
from rltune.sdk import AbstractRewardProcessor, Reward, RewardOutput

class Victim(AbstractRewardProcessor):
    async def process(self, input_data):
        return RewardOutput(reward=Reward(reward_score=1.0, found=os.environ["SECRET"]))
'''

#: Tenant B's reward: every listening loopback port from /proc/net/tcp, a reward input posted
#: to /api/v1 and a GET /health on each; what each answered.
PROBE = '''
import concurrent.futures, http.client, json, socket
from rltune.sdk import AbstractRewardProcessor, Reward, RewardOutput

BODY = json.dumps({"func_type": "reward", "agent_output": {"messages": []}})

def listening():
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, port = local.split(":")
            if state == "0A" and addr in ("0100007F", "00000000",
                                          "00000000000000000000000000000000",
                                          "00000000000000000000000001000000"):
                ports.add(int(port, 16))
    return sorted(ports)

def ask(port):
    out = {}
    for method, path, body in (("POST", "/api/v1", BODY), ("GET", "/health", None)):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
            c.request(method, path, body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            out[path] = [r.status, r.read(4000).decode("utf-8", "replace")]
            c.close()
        except Exception as exc:
            out[path] = [0, type(exc).__name__]
    return port, out

class Probe(AbstractRewardProcessor):
    def process(self, input_data):  # in a thread: its own worker's loop answers meanwhile
        ports = listening()
        with concurrent.futures.ThreadPoolExecutor(32) as ex:
            found = dict(ex.map(ask, ports))
        return RewardOutput(reward=Reward(reward_score=0.0, found={str(k): v for k, v in
                                                                   found.items()}))
'''


def _server_as_nobody(root: Path) -> Server:
    """The job server as ``nobody`` (home owned by it), like ``start_server``."""
    home = root / "home"
    home.mkdir(parents=True)
    nobody = pwd.getpwnam("nobody")
    for p in (root, home):
        os.chown(p, nobody.pw_uid, nobody.pw_gid)
    env = {**os.environ, "RLTUNE_HOME": str(home), "RLTUNE_TORCH_THREADS": "1",
           "OMP_NUM_THREADS": "1", "HOME": str(root)}
    log = open(root / "server.log", "ab")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(["runuser", "-u", "nobody", "--", sys.executable, "-m",
                             "rltune.server", "--port", "0"], env=env, cwd=str(root),
                            stdout=log, stderr=subprocess.STDOUT)
    return wait_for_server(proc, home, root / "server.log", same_pid=False)


def _nobody_problem() -> str | None:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return "needs root and runuser to start the server as nobody"
    res = subprocess.run(["runuser", "-u", "nobody", "--", sys.executable, "-c",
                          "import rltune, fastapi"], capture_output=True, timeout=60)
    if res.returncode != 0:
        return ("nobody cannot run this interpreter here: "
                f"{res.stderr.decode(errors='replace')[:200]}")
    return None


@pytest.fixture(params=["root", "nobody"])
def srv(request, tmp_path):
    if active_isolation() != "bwrap" and not os.environ.get("RLTUNE_REQUIRE_ISOLATION"):
        pytest.skip(f"no sandbox here: {bwrap_problem()}")
    if request.param == "root":
        home = tmp_path / "home"
        home.mkdir()
        server = start_server(home)
        yield server
        server.kill()
        return
    problem = _nobody_problem()
    if problem:
        pytest.skip(problem)
    root = Path(tempfile.mkdtemp(prefix="rltune-nobody-"))
    try:
        server = _server_as_nobody(root)
        yield server
        server.kill()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_tenant_reaches_no_other_tenants_worker(srv):
    with srv.client() as admin:
        keys = {ws: admin.post("/v1/keys", json={"workspace": ws}).json()["api_key"]
                for ws in ("team-a", "team-b")}
    with srv.client(keys["team-a"]) as a:
        fn = a.post("/v1/functions", params={"classpath": "v.py:Victim", "type": "reward"},
                    content=zip_bytes({"v.py": VICTIM}))
        assert fn.status_code == 201, fn.text
        inst = a.post(f"/v1/functions/{fn.json()['entity_id']}/load",
                      json={"runtime": {"env": {"SECRET": SECRET}, "capacity": 2}})
        assert inst.status_code == 201, inst.text
        trigger = inst.json()["trigger_url"]
        r = a.post(f"/v1/instances/{inst.json()['instance_id']}/test",
                   json={"input": {"agent_output": {"messages": []}}})
        assert r.json()["output"]["reward"]["found"] == SECRET  # A's own calls still work
    with srv.client(keys["team-b"]) as b:
        found = run_function(b, {"p.py": PROBE}, "p.py:Probe", {})
        own = _listening(srv.proc.pid)  # while both instances still serve
    assert SECRET not in json.dumps(found)
    rest = httpx.URL(srv.url).port
    # The server, A's endpoint and 2 workers, B's endpoint and worker (B's own are refused
    # too: the probe carries no secret).
    assert httpx.URL(trigger).port in own and len(own - {rest}) >= 5, own
    for port in sorted(own - {rest}):
        got = found.get(str(port))
        assert got is not None, (port, sorted(found))  # B saw it listening ...
        assert got["/api/v1"][0] == 401 and got["/health"][0] == 401, (port, got)  # refused
    assert found[str(rest)]["/api/v1"][0] == 404  # the REST server runs nothing for B there


def _listening(pid: int) -> set[int]:
    """Loopback TCP ports a process and its descendants listen on."""
    import psutil

    ports = set()
    top = psutil.Process(pid)
    for p in (top, *top.children(recursive=True)):
        try:
            conns = p.net_connections(kind="tcp")
        except psutil.Error:
            continue
        ports.update(c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN)
    return ports


@pytest.mark.slow  # a training job on the tiny model: about a minute on 2 cores
def test_a_tenant_reaches_nothing_of_another_tenants_running_job(srv, tmp_path, tiny_model_dir):
    """The same probe while workspace A trains: A's job's rollout and reward workers answer
    it 401, A's policy gateway tells it only that it is alive (not A's model path or
    counters), and nothing on the loopback runs a call for B."""
    import asyncio

    import yaml

    from rltune.client import AgenticRL
    from server.conftest import make_workspace

    with srv.client() as admin:
        keys = {ws: admin.post("/v1/keys", json={"workspace": ws}).json()["api_key"]
                for ws in ("team-a", "team-b")}
    ws = make_workspace(tmp_path, tiny_model_dir, n_epochs=50, save_strategy="no")
    job = yaml.safe_load((ws / "job.yaml").read_text())
    for fn in job["functions"]:
        fn["runtime"]["env"] = {"SECRET": SECRET}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    client = AgenticRL(api_key=keys["team-a"], base_url=srv.url).init(ws / "job.yaml")
    asyncio.run(client.register_functions())
    asyncio.run(client.upload_datasets())
    job_id = client.submit_job().output.job_id
    with srv.client(keys["team-a"]) as a:
        deadline = time.monotonic() + 240
        while (got := a.get(f"/v1/jobs/{job_id}").json()).get("progress") is None or \
                got["progress"].get("step", 0) < 1:
            assert got["status"] in ("PENDING", "RUNNING") and time.monotonic() < deadline, got
            time.sleep(0.3)
        try:
            with srv.client(keys["team-b"]) as b:
                found = run_function(b, {"p.py": PROBE}, "p.py:Probe", {})
                own = _listening(srv.proc.pid)  # the job's process is the server's child
        finally:
            a.post(f"/v1/jobs/{job_id}/cancel")
    text = json.dumps(found)
    assert SECRET not in text and str(tiny_model_dir) not in text
    rest = httpx.URL(srv.url).port
    answered = {port: found.get(str(port)) for port in own - {rest}}
    assert len(answered) >= 5, answered  # the job's gateway and 2 workers, B's 2 listeners
    for port, got in answered.items():
        assert got is not None, (port, sorted(found))
        assert got["/api/v1"][0] in (401, 404), (port, got)  # nothing ran B's input
        assert got["/health"][0] == 401 or json.loads(got["/health"][1]) == {"status": "ok"}, \
            (port, got)
