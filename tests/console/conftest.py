"""Fixtures of the console's browser tests: a real job server, real jobs, headless Chromium.

Chromium is Debian's (``/usr/bin/chromium``, installed by ``.ci/run``), driven by Playwright's
Python API; the tests never download a browser. They are skipped, with the reason, where
Chromium or Playwright is missing.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_harness import ServerProc, submit_calc_job

CHROMIUM = os.environ.get("RLTUNE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    home = tmp_path_factory.mktemp("console_home")
    srv = ServerProc.start(home)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def job_model_dir(request: pytest.FixtureRequest) -> Path:
    """The tiny untrained model. ``RLTUNE_CONSOLE_MODEL=nano`` (or a model directory) uses the
    warm-started nano agent: tool calls and mixed rewards, as the README screenshots show
    (``nano`` builds it first, a few minutes on a loaded 2-core box)."""
    name = os.environ.get("RLTUNE_CONSOLE_MODEL", "tiny")
    if name in ("tiny", "nano"):
        return request.getfixturevalue(f"{name}_model_dir")
    if not (Path(name) / "config.json").is_file():
        raise ValueError(f"RLTUNE_CONSOLE_MODEL={name!r}: use tiny, nano or a model directory")
    return Path(name)


@pytest.fixture(scope="module")
def finished_job(server: ServerProc, job_model_dir: Path, tmp_path_factory) -> str:
    """A job that ran to the end: 4 steps of 2 prompts × 2 rollouts on the tiny model; with a
    warm-started one, the README's learning run: 20 GSPO steps of 4 questions × 8 rollouts, so
    the metric charts show the reward rising (a few minutes on 2 cores)."""
    work = tmp_path_factory.mktemp("finished")
    nano = os.environ.get("RLTUNE_CONSOLE_MODEL", "tiny") != "tiny"
    size: dict = {}
    hp: dict = {}
    if nano:
        # 4 x 8 = 32 trajectories a step: one page of the trajectory table (50 rows)
        size = {"train_rows": 80, "val_rows": 32}
        hp = {"batch_size": 4, "n_rollouts": 8, "ppo_mini_batch_size": 16, "learning_rate": 2e-4,
              "max_length": 320, "max_prompt_length": 256, "eval_steps": 4, "val_n_rollouts": 2,
              "save_steps": 5}
    job_id = submit_calc_job(
        server, work, job_model_dir, name="calc-agent", n_epochs=1, **size, **hp
    )
    server.wait(job_id, {"SUCCEEDED"}, timeout=1200 if nano else 300)
    return job_id


@pytest.fixture(scope="module")
def browser():
    pw_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    with pw_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.js_errors = errors
    yield pg
    ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
