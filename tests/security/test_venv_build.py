"""Issue 30 items 1, 3, 17: requirements builds are tenant code; the job log is append-only.

Local packages only (``--no-index``): an in-tree build backend with no requirements, or a
wheel written here, so no test reaches a package index.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import json
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from rltune.functions.requirements import ensure_venv
from rltune.sdk.errors import ConfigError

from .test_sandbox_hardening import pytestmark  # noqa: F401 - the same skip rule

BACKEND_PYPROJECT = ('[project]\nname = "evil"\nversion = "1.0"\n'
                     '[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                     'backend-path = ["."]\n')
LEAKING_BACKEND = '''
import os

def _admin_key():
    for start in (os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        d = start
        while True:
            path = os.path.join(d, "server", "admin.key")
            if os.path.exists(path):
                return open(path).read().strip()
            if os.path.dirname(d) == d:
                break
            d = os.path.dirname(d)
    return "not found"

def get_requires_for_build_wheel(config_settings=None):
    raise RuntimeError("LEAK " + _admin_key() + " HOME=" + os.environ.get("RLTUNE_HOME", ""))

build_wheel = get_requires_for_build_wheel
'''
SLEEPING_BACKEND = '''
import time

def get_requires_for_build_wheel(config_settings=None):
    time.sleep(600)
    return []
'''
REWARD = ('from rltune.sdk import AbstractRewardProcessor, Reward, RewardOutput\n'
          'class R(AbstractRewardProcessor):\n'
          '    def process(self, x):\n'
          '        return RewardOutput(reward=Reward(reward_score=0.0))\n')


def test_a_build_cannot_read_the_admin_key_or_show_it_to_the_tenant(tmp_path, monkeypatch):
    """Item 1: a build hook that walks up to server/admin.key and raises with it.

    The workspace lies where the server extracts uploads and a job builds it there (the job
    process calls ``ensure_venv``; its ``ConfigError`` becomes the job's ``error``)."""
    home = tmp_path / "home"
    monkeypatch.setenv("RLTUNE_HOME", str(home))
    secret = "rlt-" + "S3cr3tAdminKeyValue" * 2
    (home / "server").mkdir(parents=True)
    (home / "server" / "admin.key").write_text(secret + "\n")
    ws = home / "functions" / "workspaces" / "0123abcd"
    (ws / "evil").mkdir(parents=True)
    (ws / "requirements.txt").write_text("--no-index\n./evil\n")
    (ws / "evil" / "pyproject.toml").write_text(BACKEND_PYPROJECT)
    (ws / "evil" / "backend.py").write_text(LEAKING_BACKEND)
    with pytest.raises(ConfigError) as err:
        _build_in_thread(ws, home / "functions" / "venvs", 300)
    shown = json.dumps(err.value.to_dict())
    assert secret not in shown and "S3cr3t" not in shown and str(home) not in shown, shown
    assert err.value.where == "requirements.txt"
    # The server keeps the whole output for its operator; the hook found no key.
    logs = list((home / "functions" / "venvs").glob("venv-*.build.log"))
    text = "".join(p.read_text(errors="replace") for p in logs)
    assert "LEAK not found" in text and secret not in text, text[-2000:]


def _build_in_thread(ws: Path, cache: Path, limit_s: float):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        fut = pool.submit(ensure_venv, ws, cache)
        return fut.result(timeout=limit_s)  # on main the build never ends: fail, don't hang


def test_a_build_that_sleeps_is_stopped_at_the_time_limit(tmp_path, monkeypatch):
    """Item 1: ``RLTUNE_VENV_BUILD_TIMEOUT`` stops the build with a clear error."""
    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RLTUNE_VENV_BUILD_TIMEOUT", "4")
    ws = tmp_path / "ws"
    (ws / "slow").mkdir(parents=True)
    (ws / "requirements.txt").write_text("--no-index\n./slow\n")
    (ws / "slow" / "pyproject.toml").write_text(BACKEND_PYPROJECT.replace("evil", "slow"))
    (ws / "slow" / "backend.py").write_text(SLEEPING_BACKEND)
    started = time.monotonic()
    with pytest.raises(ConfigError) as err:
        _build_in_thread(ws, tmp_path / "venvs", 120)
    assert "time limit of 4 s" in err.value.message and err.value.where == "requirements.txt"
    assert time.monotonic() - started < 60
    assert not list((tmp_path / "venvs").glob("venv-*/bin"))  # nothing half-built kept


def _wheel(path: Path, value: str) -> None:
    dist = "marker-1.0.dist-info"
    files = {"marker.py": f"VALUE = {value!r}\n",
             f"{dist}/METADATA": "Metadata-Version: 2.1\nName: marker\nVersion: 1.0\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    files[f"{dist}/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{dist}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    path.write_bytes(buf.getvalue())


@pytest.mark.slow  # a whole job, 10-20 s: CI's default run is at its time budget
def test_same_requirements_text_with_different_local_packages_builds_twice(tmp_path,
                                                                           monkeypatch):
    """Item 3: the venv cache is keyed by the workspace's content, not the file's text."""
    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "home"))
    values = {}
    for tenant in ("a", "b"):
        ws = tmp_path / tenant
        ws.mkdir()
        (ws / "requirements.txt").write_text("--no-index\n./marker-1.0-py3-none-any.whl\n")
        _wheel(ws / "marker-1.0-py3-none-any.whl", f"tenant {tenant}")
        python = _build_in_thread(ws, tmp_path / "venvs", 300)
        out = subprocess.run([str(python), "-c", "import marker; print(marker.VALUE)"],
                             capture_output=True, text=True, timeout=60)
        values[tenant] = out.stdout.strip()
    assert values == {"a": "tenant a", "b": "tenant b"}, values


TRUNCATOR = '''
import os, sys
from rltune.sdk import AbstractRewardProcessor, Reward, RewardOutput

class Truncate(AbstractRewardProcessor):
    def process(self, x):
        path = sys.argv[sys.argv.index("--job-log") + 1]
        print("function line")
        tried = []
        for attempt in (lambda: open(path, "w").close(), lambda: os.truncate(path, 0)):
            try:
                attempt()
                tried.append("ok")
            except OSError as exc:
                tried.append(type(exc).__name__)
        return RewardOutput(reward=Reward(reward_score=0.0), tried=tried)
'''


def test_a_function_cannot_truncate_its_jobs_log(tmp_path, monkeypatch):
    """Item 17: the job's train.log reaches a sandboxed worker as a pipe (append-only)."""
    from rltune.functions import FunctionPool
    from rltune.functions.spec import FunctionComponentSpec

    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "home"))
    log = tmp_path / "job" / "train.log"
    log.parent.mkdir()
    log.write_text("trainer line\n")
    monkeypatch.setenv("RLTUNE_JOB_LOG", str(log))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "trunc.py").write_text(TRUNCATOR)
    spec = FunctionComponentSpec(classpath="trunc.Truncate", func_type="reward", workspace=ws)

    async def call():
        async with await FunctionPool.start(spec) as pool:
            return await pool.call({"agent_output": {"messages": []}})

    asyncio.run(call())
    deadline = time.monotonic() + 10
    while "function line" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    text = log.read_text()
    assert text.startswith("trainer line\n"), text
    assert "function line" in text, text


#: An in-tree build backend whose wheel carries the CA bundle the build was given.
CA_BACKEND = '''
import base64, hashlib, os, zipfile

def get_requires_for_build_wheel(config_settings=None):
    return []

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open(os.environ["PIP_CERT"]) as fh:
        ca = fh.read()
    name = "cacheck-1.0-py3-none-any.whl"
    dist = "cacheck-1.0.dist-info"
    files = {"cacheck.py": "CA = %r\\nSSL = %r\\n" % (ca, os.environ.get("SSL_CERT_FILE")),
             dist + "/METADATA": "Metadata-Version: 2.1\\nName: cacheck\\nVersion: 1.0\\n",
             dist + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\n"
                              "Tag: py3-none-any\\n"}
    files[dist + "/RECORD"] = "".join(n + ",,\\n" for n in files) + dist + "/RECORD,,\\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as zf:
        for n, text in files.items():
            zf.writestr(n, text)
    return name
'''


def test_builds_use_the_operators_index_find_links_and_ca(tmp_path, monkeypatch):
    """Item 10: requirements.txt names a package by name only; with no index
    (RLTUNE_BUILD_INDEX_URL=none) it comes from the operator's wheel folder
    (RLTUNE_BUILD_FIND_LINKS), and the build sees the operator's CA bundle. No index is
    reached."""
    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "home"))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels / "marker-1.0-py3-none-any.whl", "from the operator's folder")
    ca = tmp_path / "corp-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nTESTCA\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("RLTUNE_BUILD_INDEX_URL", "none")
    monkeypatch.setenv("RLTUNE_BUILD_FIND_LINKS", str(wheels))
    monkeypatch.setenv("RLTUNE_BUILD_CA_BUNDLE", str(ca))
    ws = tmp_path / "ws"
    (ws / "cacheck").mkdir(parents=True)
    (ws / "cacheck" / "pyproject.toml").write_text(BACKEND_PYPROJECT.replace("evil", "cacheck"))
    (ws / "cacheck" / "backend.py").write_text(CA_BACKEND)
    (ws / "requirements.txt").write_text("marker==1.0\n./cacheck\n")
    python = _build_in_thread(ws, tmp_path / "venvs", 300)
    out = subprocess.run([str(python), "-c", "import cacheck, marker; print(repr(marker.VALUE));"
                          "print(repr(cacheck.CA)); print(cacheck.SSL)"],
                         capture_output=True, text=True, timeout=60)
    value, ca_seen, ssl = out.stdout.strip().splitlines()
    assert value == repr("from the operator's folder"), out
    assert ca_seen == repr(ca.read_text())
    assert ssl == "/build/ca.pem"  # mounted read-only under a neutral name


@pytest.mark.parametrize("name, value, where", [
    ("RLTUNE_BUILD_INDEX_URL", "ftp://mirror/simple", "RLTUNE_BUILD_INDEX_URL"),
    ("RLTUNE_BUILD_FIND_LINKS", "relative/wheels", "RLTUNE_BUILD_FIND_LINKS"),
    ("RLTUNE_BUILD_FIND_LINKS", "/no/such/folder", "RLTUNE_BUILD_FIND_LINKS"),
    ("RLTUNE_BUILD_CA_BUNDLE", "/no/such/ca.pem", "RLTUNE_BUILD_CA_BUNDLE"),
])
def test_a_bad_build_source_setting_is_refused_by_name(tmp_path, monkeypatch, name, value,
                                                      where):
    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(name, value)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "requirements.txt").write_text("marker==1.0\n")
    with pytest.raises(ConfigError) as err:
        _build_in_thread(ws, tmp_path / "venvs", 60)
    assert err.value.where == where and value in err.value.message
