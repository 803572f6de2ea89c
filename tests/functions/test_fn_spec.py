"""Component spec: cloud runtime names, local defaults, consistency errors; requirements."""

from __future__ import annotations

import subprocess

import pytest

from conftest import WS
from rltune.functions.requirements import ensure_venv, missing_requirements
from rltune.functions.spec import FunctionComponentRuntime, FunctionComponentSpec
from rltune.sdk.errors import ConfigError


def test_job_config_runtime_is_accepted():
    from rltune.config.components import FunctionComponentRuntime as ConfigRuntime

    spec = FunctionComponentSpec(classpath="a.B", workspace=WS,
                                 runtime=ConfigRuntime(concurrency=3, env={"A": 1}))
    assert spec.resolved_runtime().concurrency == 3 and spec.runtime.env_strings() == {"A": "1"}


def test_cloud_runtime_fields_and_local_defaults():
    cloud = {"layer_code": "x", "cpu": 2, "memory_size": 4096, "disk_size": 512,
             "concurrency": 30, "capacity": 2, "max_capacity": 5, "min_capacity": 1,
             "memory_scale_threshold": 0.8, "concurrency_scale_threshold": 0.6,
             "enable_vpc_config": False, "enable_log": True, "env": {"DEBUG": True, "N": 3}}
    rt = FunctionComponentRuntime.model_validate(cloud)
    assert rt.env_strings() == {"DEBUG": "true", "N": "3"}  # as the cloud sends them
    empty = FunctionComponentRuntime().resolve()
    assert (empty.cpu, empty.memory_size, empty.concurrency) == (1.0, 4096, 16)
    assert (empty.capacity, empty.min_capacity, empty.max_capacity) == (1, 1, 4)
    assert FunctionComponentRuntime(max_capacity=1, capacity=None).resolve().capacity == 1
    assert FunctionComponentRuntime(min_capacity=0).resolve().capacity == 1


def test_bad_runtime_is_a_clear_error():
    with pytest.raises(Exception, match="cpus"):
        FunctionComponentRuntime(cpus=2)
    with pytest.raises(Exception, match=r"min_capacity \(5\) is larger than max_capacity"):
        FunctionComponentRuntime(min_capacity=5, max_capacity=2)
    r = FunctionComponentRuntime(min_capacity=5).resolve()  # defaults bend around it
    assert (r.min_capacity, r.capacity, r.max_capacity) == (5, 5, 5)
    r = FunctionComponentRuntime(capacity=0).resolve()
    assert (r.min_capacity, r.capacity, r.max_capacity) == (0, 0, 4)
    with pytest.raises(ConfigError, match=r"capacity 9 is outside \[min_capacity 1") as info:
        FunctionComponentRuntime(capacity=9, max_capacity=3).resolve()
    assert info.value.where == "runtime.capacity"
    with pytest.raises(ConfigError, match="is not a directory"):
        FunctionComponentSpec(classpath="a.B", workspace=WS / "nope")


def test_missing_requirements_lists_lines(tmp_path):
    (tmp_path / "requirements.txt").write_text(
        "pydantic>=2\npydantic<1  # too old\n-r other.txt\nno-such-pkg-xyz\n!!bad\n")
    found = [(m.lineno, m.reason.split(":")[0]) for m in missing_requirements(tmp_path)]
    assert found[0][0] == 2 and found[0][1].startswith("installed version is")
    assert found[1:] == [(4, "not installed"), (5, "not a requirement")]
    assert missing_requirements(WS) == []


def test_cloud_sdk_lines_are_skipped_like_dashscope(tmp_path):
    """An Ark plugin's requirements.txt names ark_sdk (by name or its tarball URL) and a
    Bailian one the FC_PYPI_LIB wheel: rltune serves both SDKs, so neither is missing."""
    (tmp_path / "requirements.txt").write_text(
        "ark_sdk==0.2.8\nark-sdk\n"
        "https://ark-public-example-cn-beijing.tos-cn-beijing.volces.com/ark-sdk/"
        "ark_sdk-0.2.8.tar.gz\n./dashscope-1.25.23-py3-none-any.whl\ndashscope>=1.25.19\n"
        "https://example.com/other_pkg-1.0.tar.gz\n")
    assert [m.lineno for m in missing_requirements(tmp_path)] == [6]


@pytest.mark.slow
def test_ensure_venv_builds_once_and_sees_rltune(tmp_path):
    (tmp_path / "requirements.txt").write_text("pydantic>=2\n")
    python = ensure_venv(tmp_path, tmp_path / "venvs")
    assert python.exists() and ensure_venv(tmp_path, tmp_path / "venvs") == python
    out = subprocess.run([str(python), "-c", "import rltune.functions.worker; print('ok')"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


@pytest.mark.slow
async def test_pool_worker_runs_in_the_built_venv(tmp_path, monkeypatch):
    from rltune.functions import FunctionPool

    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "home"))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "requirements.txt").write_text("pydantic>=2\n")
    (ws / "where.py").write_text(
        "import sys\nfrom rltune.sdk import AbstractRewardProcessor, RewardOutput, Reward\n"
        "class Where(AbstractRewardProcessor):\n    def process(self, x):\n"
        "        return RewardOutput(reward=Reward(reward_score=1.0), python=sys.prefix)\n")
    spec = FunctionComponentSpec(classpath="where.Where", func_type="reward", workspace=ws,
                                 build_venv=True)
    async with await FunctionPool.start(spec) as pool:
        out = await pool.call({"agent_output": {"messages": []}})
    from rltune.functions.sandbox import active_isolation

    # In the sandbox the venv is mounted at /venv; without it, used from the cache.
    assert out.python == "/venv" if active_isolation() == "bwrap" else \
        "functions/venvs/venv-" in out.python


def _local_wheel(folder) -> str:
    """A one-module wheel written by hand (installs offline): markerpkg.VALUE."""
    import base64
    import hashlib
    import zipfile

    files = {"markerpkg/__init__.py": b"VALUE = 'installed-marker'\n",
             "markerpkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: markerpkg\n"
                                                 b"Version: 0.1\n",
             "markerpkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
                                              b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{k},sha256={base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b'=').decode()},{len(v)}"  # noqa: E501
              for k, v in files.items()] + ["markerpkg-0.1.dist-info/RECORD,,"]
    files["markerpkg-0.1.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / "markerpkg-0.1-py3-none-any.whl", "w") as z:
        for k, v in files.items():
            z.writestr(k, v)
    return "./wheels/markerpkg-0.1-py3-none-any.whl"


@pytest.mark.slow
async def test_auto_venv_installs_missing_requirements_once_per_hash(tmp_path, monkeypatch):
    """What jobs do (build_venv="auto"): an unsatisfied line is installed into a venv cached by
    the file's hash; two pools (and their concurrent workers) build it once."""
    from rltune.functions import FunctionPool

    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "home"))
    ws = tmp_path / "ws"
    (ws / "requirements.txt").parent.mkdir()
    (ws / "requirements.txt").write_text(_local_wheel(ws / "wheels") + "\n")
    (ws / "uses.py").write_text(
        "import markerpkg, sys\nfrom rltune.sdk import AbstractRewardProcessor, RewardOutput, "
        "Reward\nclass Uses(AbstractRewardProcessor):\n    def process(self, x):\n"
        "        return RewardOutput(reward=Reward(reward_score=1.0), value=markerpkg.VALUE,"
        " python=sys.prefix)\n")
    spec = FunctionComponentSpec(classpath="uses.Uses", func_type="reward", workspace=ws,
                                 build_venv="auto", runtime={"capacity": 2, "max_capacity": 2})
    async with await FunctionPool.start(spec) as pool:
        out = await pool.call({"agent_output": {"messages": []}})
    from rltune.functions.sandbox import active_isolation

    assert out.value == "installed-marker"
    assert out.python == "/venv" if active_isolation() == "bwrap" else \
        "functions/venvs/venv-" in out.python
    venvs = list((tmp_path / "home" / "functions" / "venvs").glob("venv-*/.rltune-ready"))
    assert len(venvs) == 1
    stamp = venvs[0].stat().st_mtime_ns
    async with await FunctionPool.start(spec) as pool:
        assert (await pool.call({"agent_output": {"messages": []}})).value == "installed-marker"
    assert venvs[0].stat().st_mtime_ns == stamp  # reused, not rebuilt
