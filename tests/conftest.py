"""Shared fixtures: tiny self-made models (no hub, no network).

* ``tiny_model_dir`` — untrained ~0.1M-parameter Qwen2 + tokenizer + chat template, saved once
  per session (about 2 s). Load it with ``AutoModelForCausalLM.from_pretrained(dir)`` and
  ``rltune.models.load_tokenizer(dir)``.
* ``hf_standin_dir`` / ``hf_home`` — a Qwen-style model rltune did not build, as a directory
  and as the hub id ``acme/qwen-standin`` in an offline, pre-filled HF cache.
* ``nano_model_dir`` — the warm-started ~0.8M ``nano`` calculator agent, built once per session
  into a session-temporary RLTUNE_HOME (1-2 min on 2 cores), shared by every test that asks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests share a loaded 2-core box: one intra-op thread per process avoids the 20x slowdown of
# oversubscribed torch thread pools (benchmarks/RESULTS.md, "Tiny-model kit").
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


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
    home = tmp_path_factory.mktemp("rltune_home")
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
