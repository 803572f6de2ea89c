"""Issue 37 item 2: every folder a sandboxed function can write is touched by trusted code
only through ``rltune.safefs``, and links, FIFOs and hard links put there by a function leave
no file created, appended or read outside the job's folder.

``test_every_writable_mount_is_listed`` reads the writable mounts out of the real bubblewrap
command line: a new writable folder fails it until it is listed in ``TENANT_WRITABLE`` and
given an attack here (``ATTACKS``). The 1-step job at the end is the whole attack: a reward
function replaces its rollout's span file and the job's ``_job.jsonl`` with links to a file of
another tenant and to a path of its choice.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from rltune.functions import sandbox
from rltune.functions.backends.local import READY_MAX_BYTES, _ready_info
from rltune.functions.requirements import READY_MARKER
from rltune.observability.spanstore import SpanStore
from rltune.safefs import TENANT_WRITABLE, TenantFolder
from rltune.sdk.errors import UserCodeError

PRIVATE_ROW = b'{"messages": [{"role": "user", "content": "VICTIMROW"}]}\n'


@pytest.fixture
def outside(tmp_path):
    """Another tenant's file (a private row) and a path no one may create."""
    victim = tmp_path / "other-workspace" / "dataset.jsonl"
    victim.parent.mkdir()
    victim.write_bytes(PRIVATE_ROW)
    return victim, tmp_path / "other-workspace" / "made-by-root"


def _plant(folder: Path, victim: Path, made: Path, names: list[str]) -> None:
    """What a function can do in a folder it writes: links in and out, a FIFO."""
    kinds = ["link", "dangling", "fifo", "hardlink"]
    for name, kind in zip(names, kinds * len(names), strict=False):
        path = folder / name
        if kind == "link":
            os.symlink(victim, path)
        elif kind == "dangling":
            os.symlink(made, path)
        elif kind == "fifo":
            os.mkfifo(path)
        else:  # the kernel refuses a hard link across mounts; same folder here: worst case
            os.link(victim, path)


def _check_untouched(victim: Path, made: Path) -> None:
    assert victim.read_bytes() == PRIVATE_ROW, "a file outside the folder was appended to"
    assert not made.exists(), "a file was created where a link pointed"


def _attack_traces(folder: Path, victim: Path, made: Path) -> None:
    store = SpanStore(folder)
    names = ["ro-a", "ro-b", "ro-c", "ro-d", None]
    _plant(folder, victim, made, [store.name_for(n) for n in names[:4]] + ["_job.jsonl"])
    for rid in names:
        store.append({"name": "reward", "rollout_id": rid, "start": 1.0})
    taken = [store.take(rid) for rid in names[:4]]
    assert b"VICTIMROW" not in repr(taken).encode() and taken == [[]] * 4
    _check_untouched(victim, made)


def _attack_worker_dir(folder: Path, victim: Path, made: Path) -> None:
    """A local worker reports ready on a pipe, so the pool opens nothing in its ``/worker``:
    links, a FIFO and a hard link named ``ready.json`` there are never read; what function code
    writes to the pipe itself is refused unless it is a JSON object, bounded in size."""
    victim.write_bytes(b'{"ok": false, "error": "VICTIMROW"}')
    _plant(folder, victim, made, ["ready.json", "ready.json.tmp", "fifo", "hard"])
    for line in (b"not json", b"[1, 2]", b"x" * (2 * READY_MAX_BYTES)):
        with pytest.raises(UserCodeError) as err:
            _ready_info(line[:READY_MAX_BYTES], "fn")
        assert "VICTIMROW" not in str(err.value.to_dict())
    assert _ready_info(b'{"ok": true, "port": 1}', "fn")["port"] == 1
    victim.write_bytes(PRIVATE_ROW)
    _check_untouched(victim, made)


def _attack_venv(folder: Path, victim: Path, made: Path) -> None:
    """What ``ensure_venv`` does after a build the function ran: the marker is a new file."""
    os.symlink(made, folder / READY_MARKER)
    marker = TenantFolder(folder, max_bytes=4096)
    assert not marker.is_file(READY_MARKER)  # a planted link is no ready venv
    marker.replace(READY_MARKER, b"digest pip\n")
    assert marker.is_file(READY_MARKER)
    _check_untouched(victim, made)


def _attack_workspace_copy(folder: Path, victim: Path, made: Path) -> None:
    """The build's private copy of the workspace is only removed (``shutil.rmtree``, which
    removes links without following them)."""
    import shutil

    os.symlink(victim.parent, folder / "linked-dir")
    os.symlink(victim, folder / "linked-file")
    shutil.rmtree(folder)
    _check_untouched(victim, made)


ATTACKS = {"/traces": _attack_traces, "/worker": _attack_worker_dir,
           "/venv": _attack_venv, "/workspace": _attack_workspace_copy}


def _writable_mounts(argv: list[str]) -> set[str]:
    return {argv[i + 2] for i, a in enumerate(argv) if a in ("--bind", "--bind-try",
                                                             "--dev-bind", "--dev-bind-try")}


def test_every_writable_mount_is_listed(tmp_path):
    """Each folder the sandbox mounts writable (a worker's, a venv build's) is listed and
    attacked below; an unlisted one is refused when the command is built."""
    for d in ("ws", "private", "venv", "traces"):
        (tmp_path / d).mkdir()
    worker = sandbox.bwrap_command(["true"], tmp_path / "ws", tmp_path / "private",
                                   venv=tmp_path / "venv",
                                   writable={tmp_path / "traces": sandbox.TRACES})
    build = sandbox.bwrap_command(["true"], tmp_path / "ws", tmp_path / "private",
                                  workspace_writable=True, venv=tmp_path / "venv",
                                  venv_writable=True)
    try:
        mounts = _writable_mounts(worker.argv) | _writable_mounts(build.argv)
    finally:
        worker.close()
        build.close()
    assert mounts == set(TENANT_WRITABLE) == set(ATTACKS), mounts
    with pytest.raises(ValueError, match="/checkpoints is not a tenant-writable folder"):
        sandbox.bwrap_command(["true"], tmp_path / "ws", tmp_path / "private",
                              writable={tmp_path: "/checkpoints"})


def test_bind_mounts_are_made_in_one_place():
    """No other module builds a bubblewrap bind mount (it would bypass the list)."""
    src = Path(sandbox.__file__).resolve().parents[1]
    found = [str(p.relative_to(src)) for p in src.rglob("*.py")
             if re.search(r"['\"]--(dev-)?bind", p.read_text(encoding="utf-8"))]
    assert found == ["functions/sandbox.py"], found


@pytest.mark.parametrize("inside", sorted(TENANT_WRITABLE))
def test_links_fifos_and_hard_links_in_a_writable_folder_reach_nothing_outside(
        inside, tmp_path, outside):
    folder = tmp_path / "job" / inside.strip("/")
    folder.mkdir(parents=True)
    ATTACKS[inside](folder, *outside)


PLANTER = """
import os, re
from rltune.sdk import AbstractRewardProcessor, Reward, RewardOutput

class Planter(AbstractRewardProcessor):
    async def process(self, input_data):
        traces = os.environ["RLTUNE_TRACE_DIR"]
        rid = re.sub(r"[^A-Za-z0-9._-]", "_", input_data.request_metadata.rollout_id)
        for name, target in ((rid + ".jsonl", os.environ["VICTIM"]),
                             ("_job.jsonl", os.environ["MADE"])):
            path = os.path.join(traces, name)
            if os.path.lexists(path):
                os.unlink(path)
            os.symlink(target, path)
        return RewardOutput(reward=Reward(reward_score=0.0))
"""


# The acceptance test of the issue: a 1-step job on the nano model (15 s on 2 cores).
async def test_a_job_whose_function_plants_links_in_traces_touches_nothing_outside(
        tmp_path, nano_model_dir, outside, monkeypatch):
    from observability.test_tracing_job import one_step_job, run_job  # tests/observability

    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "ENABLE_TRAJECTORY"):
        monkeypatch.delenv(var, raising=False)
    victim, made = outside
    ws = one_step_job(tmp_path, nano_model_dir)
    (ws / "functions" / "planter.py").write_text(PLANTER)
    job = yaml.safe_load((ws / "job.yaml").read_text())
    (reward,) = [f for f in job["functions"] if f["type"] == "reward"]
    reward["fcmodel"]["classpath"] = "functions/planter.py:Planter"
    reward["runtime"]["env"] = {"VICTIM": str(victim), "MADE": str(made)}
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    job_dir = tmp_path / "job"
    await run_job(ws, job_dir)
    _check_untouched(victim, made)
    text = (job_dir / "trajectories" / "step_000001.jsonl").read_text()
    assert "VICTIMROW" not in text and text.count("rollout_id") >= 4


PLANTING_BACKEND = '''
import io, os, zipfile

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    os.symlink({made!r}, "/venv/{marker}")  # the marker trusted code writes after the build
    os.symlink({victim_dir!r}, "/workspace/linked-dir")  # the copy is removed after it
    name = "planter-1.0-py3-none-any.whl"
    dist = "planter-1.0.dist-info"
    files = {{"planter.py": "X = 1\\n",
             dist + "/METADATA": "Metadata-Version: 2.1\\nName: planter\\nVersion: 1.0\\n",
             dist + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\n"
                              "Tag: py3-none-any\\n"}}
    files[dist + "/RECORD"] = "".join(n + ",,\\n" for n in files) + dist + "/RECORD,,\\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as zf:
        for n, text in files.items():
            zf.writestr(n, text)
    return name
'''


def test_a_build_that_plants_links_in_its_venv_and_workspace_touches_nothing_outside(
        tmp_path, outside, monkeypatch):
    """The /venv and /workspace rows with a real sandboxed build (pip runs the backend)."""
    import concurrent.futures

    from rltune.functions.requirements import ensure_venv
    from rltune.functions.sandbox import active_isolation

    if active_isolation() != "bwrap":
        pytest.skip("the build writes /venv and /workspace only in the sandbox")
    victim, made = outside
    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "home"))
    ws = tmp_path / "ws"
    (ws / "planter").mkdir(parents=True)
    (ws / "requirements.txt").write_text("--no-index\n./planter\n")
    (ws / "planter" / "pyproject.toml").write_text(
        '[project]\nname = "planter"\nversion = "1.0"\n[build-system]\nrequires = []\n'
        'build-backend = "backend"\nbackend-path = ["."]\n')
    (ws / "planter" / "backend.py").write_text(PLANTING_BACKEND.format(
        made=str(made), marker=READY_MARKER, victim_dir=str(victim.parent)))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        python = pool.submit(ensure_venv, ws, tmp_path / "venvs").result(timeout=300)
    venv = python.parent.parent
    assert TenantFolder(venv, max_bytes=4096).is_file(READY_MARKER)
    assert (venv / READY_MARKER).read_text().endswith("pip\n")
    _check_untouched(victim, made)
    assert sorted(p.name for p in victim.parent.iterdir()) == ["dataset.jsonl"]
