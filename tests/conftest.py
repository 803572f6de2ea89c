"""Shared fixtures: tiny self-made models (no hub, no network).

* ``tiny_model_dir`` — untrained ~0.1M-parameter Qwen2 + tokenizer + chat template, saved once
  per session (about 2 s). Load it with ``AutoModelForCausalLM.from_pretrained(dir)`` and
  ``rltune.models.load_tokenizer(dir)``.
* ``hf_standin_dir`` / ``hf_home`` — a Qwen-style model rltune did not build, as a directory
  and as the hub id ``acme/qwen-standin`` in an offline, pre-filled HF cache.
* ``nano_model_dir`` — the warm-started ~0.8M ``nano`` calculator agent, built once per session
  into a session-temporary RLTUNE_HOME (1-2.5 min on 2 cores), shared by every test that asks.

Under pytest-xdist (``make test`` runs ``-n 2 --dist loadfile``) the first worker that collects
a test needing the nano model starts its build in a background process, into a home the workers
share; each worker runs the files that do not need the model first, and ``ensure_demo_model``
makes a worker that gets there early wait on the build's lock. So the build overlaps the rest of
the suite.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# Tests share a loaded 2-core box: one intra-op thread per process avoids the 20x slowdown of
# oversubscribed torch thread pools (benchmarks/RESULTS.md, "Tiny-model kit").
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# trackio reads TRACKIO_DIR once, when it is imported: one folder per test process (never the
# user's), shared by every trackio test in it; each test uses a project of its own.
os.environ.setdefault("TRACKIO_DIR", tempfile.mkdtemp(prefix="rltune-test-trackio-"))


NANO_HOME_ENV = "RLTUNE_TEST_NANO_HOME"  # the shared home of the background build (xdist)
NANO_FIXTURES = {"nano_build", "nano_model_dir"}


def _is_xdist_controller(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(
        config, "workerinput"
    )


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("RLTUNE_TEST_NANO") or not _is_xdist_controller(config):
        return
    # the workers are started after this and inherit it
    os.environ[NANO_HOME_ENV] = tempfile.mkdtemp(prefix="rltune-test-nano-")


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: only the tests that will run count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker, when a selected test needs the nano model: start its build, and
    order the files that need it last, the learning tests (the longest, ``e2e``) first among
    them, so that the other worker runs the rest alongside. ``make test`` passes
    ``--no-loadscope-reorder`` to keep this order (xdist would sort files by size)."""
    home = os.environ.get(NANO_HOME_ENV)
    if not home or not hasattr(config, "workerinput"):
        return
    late = {item.path for item in items if NANO_FIXTURES & set(item.fixturenames)}
    if not late:
        return
    e2e = {item.path for item in items if item.get_closest_marker("e2e")}
    # stable: the order within a file holds
    items.sort(key=lambda item: (item.path in late, item.path not in e2e))
    _start_nano_build(Path(home))


def _start_nano_build(home: Path) -> None:
    """Start the build once per run (the first worker to get here), in its own session: it
    outlives a worker that runs out of tests; the controller ends it with the run."""
    try:
        fd = os.open(home / "build.log", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    cmd = [sys.executable, "-m", "rltune.cli.main", "models", "build-demo", "--size", "nano",
           "--home", str(home)]
    with os.fdopen(fd, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    (home / "build.pid").write_text(str(proc.pid))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The background nano build's outcome, for the run's log (xdist controller only)."""
    from rltune.models.factory import read_meta
    from rltune.models.registry import model_name
    from rltune.paths import models_home

    home = os.environ.get(NANO_HOME_ENV)
    if not home or not _is_xdist_controller(terminalreporter.config):
        return
    m, log = read_meta(models_home(home) / model_name("nano")), Path(home) / "build.log"
    if m is not None:
        line = (f"nano model built in the background: {m['build_seconds']} s, "
                f"{m['steps']} steps, held-out accuracy {m['heldout_accuracy']}")
    elif log.is_file():
        tail = log.read_text(errors="replace").strip().splitlines()[-1:]
        line = f"the background nano build did not finish: {tail}"
    else:
        return  # no selected test needed the model
    terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    home = os.environ.get(NANO_HOME_ENV)
    if not home or not _is_xdist_controller(config):
        return
    pid_file = Path(home) / "build.pid"
    if pid_file.is_file():  # still running only when the run was cut short
        pid = int(pid_file.read_text())
        try:  # the build's own process, not one that reused its pid
            if "build-demo" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                os.kill(pid, signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError):
            pass
    shutil.rmtree(os.environ.pop(NANO_HOME_ENV), ignore_errors=True)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory of an untrained tiny model in Hugging Face format (read-only by convention)."""
    from rltune.models import build_tiny_model, save_model

    model, tokenizer = build_tiny_model(seed=0)
    return save_model(
        model,
        tokenizer,
        tmp_path_factory.mktemp("models") / "tiny",
        meta={"size": "tiny", "seed": 0, "trained": False},
    )


@pytest.fixture(scope="session")
def hf_standin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A foreign (not rltune-built) Qwen-style model directory: see tests/hf_standin.py."""
    from hf_standin import build_standin

    return build_standin(tmp_path_factory.mktemp("hf") / "qwen-standin")


@pytest.fixture
def hf_home(tmp_path, monkeypatch, hf_standin_dir) -> Path:
    """An offline HF_HOME whose hub cache holds the stand-in as ``acme/qwen-standin`` (and an
    empty RLTUNE_HOME)."""
    from hf_standin import fill_hf_cache

    home = tmp_path / "hf"
    fill_hf_cache(home, "acme/qwen-standin", hf_standin_dir)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("RLTUNE_HOME", str(tmp_path / "rltune"))
    return home


@pytest.fixture(scope="session")
def nano_build(tmp_path_factory: pytest.TempPathFactory) -> Path | Exception:
    """The warm-started nano model's directory (built once per test session), or the
    ``BuildError`` that stopped its build: only ``test_nano_builds_into_the_band`` fails on it,
    with the build's metrics, and the tests that need the model skip.

    ``RLTUNE_TEST_NANO=<model dir>`` uses an already built one instead (for example each cell
    of ``benchmarks/warmstart_robustness.py --rl``, to check RL from every warm start).
    """
    from rltune.models import ensure_demo_model
    from rltune.sdk.errors import BuildError

    if os.environ.get("RLTUNE_TEST_NANO"):
        return Path(os.environ["RLTUNE_TEST_NANO"])
    shared = os.environ.get(NANO_HOME_ENV)
    home = Path(shared) if shared else tmp_path_factory.mktemp("rltune_home")
    try:
        return ensure_demo_model("nano", seed=0, home=home)
    except BuildError as exc:
        return exc


@pytest.fixture(scope="session")
def nano_model_dir(nano_build: Path | Exception) -> Path:
    """Directory of the warm-started nano model (see ``nano_build``)."""
    if isinstance(nano_build, Exception):
        pytest.skip(f"no nano model (see test_nano_builds_into_the_band): {nano_build}")
    return nano_build


@pytest.fixture
def workspace_reward():
    """``workspace_reward(workspace, cls)``: a new instance of the reward class ``cls`` of
    ``<workspace>/functions/reward.py`` (a shipped template's folder or a created workspace),
    loaded from the file under a name of its own."""
    import importlib.util

    def load(workspace: Path, cls: str):
        path = Path(workspace) / "functions" / "reward.py"
        spec = importlib.util.spec_from_file_location(f"reward_{abs(hash(path))}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, cls)()

    return load
