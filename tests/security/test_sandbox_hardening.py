"""Issue 30 items 2, 5, 6, 11, 17, 18: what a sandboxed function can no longer do.

Run by the real server (as CI's user, root) unless a test says otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from rltune.functions.sandbox import active_isolation, bwrap_problem

from .conftest import run_function, start_server, zip_bytes

pytestmark = pytest.mark.skipif(
    active_isolation() != "bwrap" and not os.environ.get("RLTUNE_REQUIRE_ISOLATION"),
    reason=f"no sandbox here: {bwrap_problem()}")

PROBE = '''
import ctypes, errno, json, os, sys
from rltune.sdk import AbstractRewardProcessor, Reward, RewardOutput

libc = ctypes.CDLL(None, use_errno=True)

def _err(ret):
    return "ok" if ret >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")

class Probe(AbstractRewardProcessor):
    async def process(self, input_data):
        t = json.loads(os.environ["TARGETS"])
        status = dict(line.split(":", 1) for line in open("/proc/self/status")
                      if ":" in line)
        handle = ctypes.create_string_buffer(8 + 128)
        ctypes.memmove(handle, (ctypes.c_uint * 1)(128), 4)
        mount_id = ctypes.c_int()
        found = {
            "cap_eff": status["CapEff"].strip(), "uid": status["Uid"].split()[0],
            "seccomp": status["Seccomp"].strip(),
            "umount_tmp": _err(libc.umount2(b"/tmp", 2)),  # MNT_DETACH
            "name_to_handle": _err(libc.name_to_handle_at(-100, b"/workspace", handle,
                                                           ctypes.byref(mount_id), 0)),
            "open_by_handle": _err(libc.open_by_handle_at(os.open("/", os.O_RDONLY), handle,
                                                          os.O_RDONLY)),
            "cwd": os.getcwd(),
            "mount_points": [line.split()[4] for line in open("/proc/self/mountinfo")],
            "env": dict(os.environ),
        }
        try:
            found["admin_key"] = open(t["admin_key"]).read()
        except OSError as exc:
            found["admin_key"] = "ERR " + type(exc).__name__
        return RewardOutput(reward=Reward(reward_score=0.0, found=found))
'''


def test_a_function_of_a_root_server_has_no_capability_and_no_escape_syscall(server):
    """Item 2 (and item 18: neutral working directory and mount points)."""
    with server.client() as admin:
        key = admin.post("/v1/keys", json={"workspace": "probe"}).json()["api_key"]
    targets = {"admin_key": str(server.home / "server" / "admin.key")}
    with server.client(key) as c:
        found = run_function(c, {"probe.py": PROBE}, "probe.py:Probe",
                             {"TARGETS": json.dumps(targets)})
    assert int(found["cap_eff"], 16) == 0, found
    assert found["seccomp"] == "2", found  # a filter is loaded
    assert found["umount_tmp"] == "EPERM", found
    assert found["name_to_handle"] == "EPERM" and found["open_by_handle"] == "EPERM", found
    assert found["admin_key"].startswith("ERR "), found
    if os.geteuid() == 0:
        from rltune.functions.sandbox import userns_problem

        if userns_problem() is None:
            assert found["uid"] == "65534", found
    home = str(server.home)
    assert found["cwd"] == "/workspace"
    assert not any(home in p for p in found["mount_points"]), found["mount_points"]
    assert not any(home in v for k, v in found["env"].items() if k != "TARGETS"), found["env"]


NOBODY_PROBE = r'''
import json, subprocess, sys
from pathlib import Path
from rltune.functions import sandbox
private = Path(sys.argv[1])
c = sandbox.bwrap_command([sys.executable, "-c", "print(open('/proc/self/status').read())"],
                          Path(sys.argv[2]), private)
out = subprocess.run(c.argv, pass_fds=c.pass_fds, capture_output=True, text=True)
print(json.dumps({"rc": out.returncode, "out": out.stdout, "err": out.stderr[-500:]}))
'''


def test_the_sandbox_works_for_a_server_that_is_not_root():
    """Item 2: the same sandbox started by an unprivileged user (``nobody``)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root to switch to nobody (setpriv)")
    drop = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    real = os.path.realpath(sys.executable)
    can = subprocess.run([*drop, "sh", "-c", f"test -x '{real}' && exec '{sys.executable}' "
                          "-c 'import rltune'"], capture_output=True, env={"PATH": "/usr/bin:/bin"})
    if can.returncode != 0:
        pytest.skip(f"nobody cannot run this interpreter ({sys.executable}) here: "
                    f"{can.stderr.decode(errors='replace')[-200:]}")
    tmp_path = Path(tempfile.mkdtemp(prefix="rltune-nobody-"))  # pytest's is root's only
    os.chmod(tmp_path, 0o755)
    for d in (tmp_path / "ws", tmp_path / "private"):
        d.mkdir()
        os.chown(d, 65534, 65534)
    res = subprocess.run([*drop, sys.executable, "-c", NOBODY_PROBE, str(tmp_path / "private"),
                          str(tmp_path / "ws")], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "RLTUNE_HOME": str(tmp_path / "h")})
    shutil.rmtree(tmp_path, ignore_errors=True)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["rc"] == 0, out
    assert "CapEff:\t0000000000000000" in out["out"] and "Seccomp:\t2" in out["out"], out


WRITER = '''
import os
from rltune.sdk import AbstractRewardProcessor, Reward, RewardOutput

class Cache(AbstractRewardProcessor):
    async def process(self, input_data):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache.txt")
        result = {"seen": os.path.exists(path)}
        if os.environ.get("MODE") == "write":
            try:
                with open(path, "w") as fh:
                    fh.write("planted by A")
                result["wrote"] = "ok"
            except OSError as exc:
                result["wrote"] = type(exc).__name__
        home = os.path.join(os.environ["HOME"], "mine.txt")  # the private writable layer
        with open(home, "w") as fh:
            fh.write("x")
        return RewardOutput(reward=Reward(reward_score=0.0, found=result))
'''


def test_tenants_with_identical_code_do_not_share_a_writable_folder(server):
    """Item 6: A writes into its code folder; B, with the same code, does not see it."""
    with server.client() as admin:
        key_a = admin.post("/v1/keys", json={"workspace": "cache-a"}).json()["api_key"]
        key_b = admin.post("/v1/keys", json={"workspace": "cache-b"}).json()["api_key"]
    files = {"cache_fn.py": WRITER}
    with server.client(key_a) as a:
        found_a = run_function(a, files, "cache_fn.py:Cache", {"MODE": "write"})
    with server.client(key_b) as b:
        found_b = run_function(b, files, "cache_fn.py:Cache", {"MODE": "read"})
    assert found_b["seen"] is False, (found_a, found_b)
    assert found_a["wrote"] == "OSError" or found_a["wrote"] != "ok", found_a


TMP_FILLER = '''
import os
from rltune.sdk import AbstractRewardProcessor, Reward, RewardOutput

class Fill(AbstractRewardProcessor):
    async def process(self, input_data):
        written, error = 0, None
        chunk = b"x" * (8 << 20)
        try:
            with open("/tmp/fill", "wb") as fh:
                while written < (320 << 20):
                    fh.write(chunk)
                    fh.flush()
                    written += len(chunk)
        except OSError as exc:
            error = exc.strerror
        finally:
            if os.path.exists("/tmp/fill"):
                os.remove("/tmp/fill")
        return RewardOutput(reward=Reward(reward_score=0.0, found={"written": written,
                                                                    "error": error}))
'''


def test_a_worker_cannot_write_more_than_its_memory_size_to_tmp(server):
    """Item 11: /tmp is a tmpfs of ``memory_size`` MB."""
    with server.client() as admin:
        key = admin.post("/v1/keys", json={"workspace": "filler"}).json()["api_key"]
    with server.client(key) as c:
        found = run_function(c, {"fill.py": TMP_FILLER}, "fill.py:Fill", {}, memory_size=192)
    assert found["error"] is not None and found["written"] <= 192 << 20, found


def test_a_key_of_a_second_workspace_stops_working_when_the_sandbox_is_gone(tmp_path,
                                                                            monkeypatch):
    """Item 5: restarted without bubblewrap (auto -> none), the server refuses the key."""
    home = tmp_path / "home"
    home.mkdir()
    srv = start_server(home)
    try:
        with srv.client() as admin:
            key = admin.post("/v1/keys", json={"workspace": "second"}).json()["api_key"]
        with srv.client(key) as c:
            assert c.get("/v1/files").status_code == 200
    finally:
        srv.kill()
    monkeypatch.setenv("RLTUNE_FUNCTION_ISOLATION", "none")
    srv = start_server(home)
    try:
        assert httpx.get(srv.url + "/health").json()["function_isolation"] == "none"
        with srv.client(key) as c:
            r = c.get("/v1/files")
            assert r.status_code == 403, r.text
            assert "second workspace" in r.json()["error"]["message"]
            assert c.post("/v1/functions", params={"classpath": "p.py:P", "type": "reward"},
                          content=zip_bytes({"p.py": PROBE})).status_code == 403
        with srv.client() as admin:  # the default workspace keeps working
            assert admin.get("/v1/files").status_code == 200
    finally:
        srv.kill()
