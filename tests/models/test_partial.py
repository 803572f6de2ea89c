"""Resumable demo-model builds (``rltune.models.partial``): an interrupted build resumes to the
same weights, a changed recipe never resumes a stale state, a failed build leaves nothing.
The builds run the short recipe of ``short_build`` (a few seconds each)."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest
from short_build import cli_build, short_recipe

from rltune.models import recipes
from rltune.models.factory import read_meta
from rltune.models.registry import ensure_demo_model
from rltune.paths import partial_build_file
from rltune.sdk.errors import BuildError


@pytest.fixture
def tiny_recipe(monkeypatch):
    monkeypatch.setitem(recipes.RECIPES, "tiny", short_recipe())
    return recipes.RECIPES["tiny"]


class Interrupt(Exception):
    """Stands for Ctrl-C (a KeyboardInterrupt would stop pytest itself)."""


def _interrupt_at(step: int, notes: list[str]):
    def on_event(event):
        if "message" in event:
            notes.append(event["message"])
        elif event["step"] == step:
            raise Interrupt(step)

    return on_event


def _weights(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def _assert_same_weights(a, b):
    import torch

    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-6, atol=1e-6, msg=k)


def _untimed(history):
    return [{k: v for k, v in e.items() if k != "train_seconds"} for e in history]


def _build(home, notes=None, **kw):
    notes = [] if notes is None else notes

    def on_event(event):
        if "message" in event:
            notes.append(event["message"])

    return ensure_demo_model("tiny", home=home, progress=kw.pop("progress", on_event), **kw)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The short recipe built without interruption."""
    mp = pytest.MonkeyPatch()
    mp.setitem(recipes.RECIPES, "tiny", short_recipe())
    try:
        return _build(tmp_path_factory.mktemp("ref"))
    finally:
        mp.undo()


@pytest.mark.parametrize(("stop", "saved", "phase"), [(13, 12, "copy"), (47, 44, "mix")])
def test_an_interrupted_build_resumes_to_the_same_weights(tmp_path, tiny_recipe, reference,
                                                          stop, saved, phase):
    state = partial_build_file(tmp_path, "tiny")
    notes: list[str] = []
    with pytest.raises(Interrupt):
        ensure_demo_model("tiny", home=tmp_path, progress=_interrupt_at(stop, notes),
                          save_every=4)
    assert state.is_file() and not (tmp_path / "models" / "tiny").exists()
    path = _build(tmp_path, notes, save_every=4)
    assert f"resuming the tiny build from step {saved} (phase {phase})" in notes
    meta, ref = read_meta(path), read_meta(reference)
    assert meta["resumed_from_step"] == saved and ref["resumed_from_step"] is None
    assert meta["steps"] == ref["steps"] == 50
    # the same evaluations, before and after the stop (timings aside)
    assert _untimed(meta["history"]) == _untimed(ref["history"])
    _assert_same_weights(path, reference)
    assert not state.exists()  # a finished build removes its partial


def test_a_changed_recipe_discards_the_partial(tmp_path, tiny_recipe, monkeypatch, reference):
    state = partial_build_file(tmp_path, "tiny")
    notes: list[str] = []
    monkeypatch.setitem(recipes.RECIPES, "tiny", short_recipe(lr=3e-3))
    with pytest.raises(Interrupt):
        ensure_demo_model("tiny", home=tmp_path, progress=_interrupt_at(9, notes), save_every=4)
    assert state.is_file()
    monkeypatch.setitem(recipes.RECIPES, "tiny", short_recipe())  # back to the reference's
    path = _build(tmp_path, notes, save_every=4)
    assert any("discarding the partial tiny build" in n and "another recipe" in n
               for n in notes), notes
    assert not any(n.startswith("resuming") for n in notes), notes
    assert read_meta(path)["resumed_from_step"] is None
    _assert_same_weights(path, reference)  # built from step 0 with the recipe of today


def test_an_unreadable_partial_is_discarded(tmp_path, tiny_recipe, reference):
    state = partial_build_file(tmp_path, "tiny")
    state.parent.mkdir(parents=True)
    state.write_bytes(b"half a file")
    notes: list[str] = []
    path = _build(tmp_path, notes)
    assert any("discarding the unreadable partial tiny build" in n for n in notes), notes
    _assert_same_weights(path, reference)
    assert not state.exists()


def test_a_failed_build_removes_its_partial(tmp_path, monkeypatch):
    # the mix phase never reaches an empty band: BuildError at step 60, after saves
    monkeypatch.setitem(recipes.RECIPES, "tiny", short_recipe(band=(2.0, 2.0)))
    state = partial_build_file(tmp_path, "tiny")
    saved_at: dict[int, int] = {}

    def on_event(event):
        if "step" in event and state.is_file():
            import torch

            saved_at[event["step"]] = torch.load(state, weights_only=True)["loop"]["step"]

    with pytest.raises(BuildError, match="missed its target"):
        ensure_demo_model("tiny", home=tmp_path, progress=on_event, save_every=5)
    assert saved_at[7] == 5 and saved_at[40] == 40 and saved_at[60] == 60
    assert not state.exists()
    assert not (tmp_path / "models" / "tiny").exists()


def test_a_second_build_waits_for_the_first_and_reuses_its_model(tmp_path, tiny_recipe,
                                                                 tiny_model_dir):
    """flock conflicts between two opens in one process as between processes: while the
    test holds the build lock, a build in a thread waits; the model "the first build" saves
    in the meantime is then returned, not rebuilt."""
    import shutil
    import threading

    from rltune.models.partial import build_lock

    state = partial_build_file(tmp_path, "tiny")
    notes: list[str] = []
    result: list = []
    with build_lock(state):
        waiter = threading.Thread(target=lambda: result.append(_build(tmp_path, notes)))
        waiter.start()
        deadline = time.monotonic() + 60
        while not notes and time.monotonic() < deadline:
            time.sleep(0.01)
        assert notes == [f"another process (pid {os.getpid()}) is building tiny; "
                         "waiting for it"]
        assert waiter.is_alive() and not result
        shutil.copytree(tiny_model_dir, tmp_path / "models" / "tiny")
    waiter.join(timeout=60)
    assert result == [tmp_path / "models" / "tiny"]
    assert read_meta(result[0])["trained"] is False  # ours, not a second build
    assert not state.exists()


@pytest.mark.slow  # ~25 s quiet: a whole CLI build twice; the resume itself is tested above
def test_a_killed_cli_build_resumes_to_the_same_weights(tmp_path, reference):
    """A real `rltune models build-demo` with its output piped (as in CI), SIGKILLed once its
    first partial state is on disk, then run again: it says it resumes, prints a line per
    evaluation, and ends with the weights of an uninterrupted build."""
    import torch

    state = partial_build_file(tmp_path, "tiny")
    proc = cli_build(tmp_path)
    try:
        deadline = time.monotonic() + 300
        while not state.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, (out, err)
    assert state.is_file(), (out, err)
    loop = torch.load(state, weights_only=True)["loop"]
    assert loop["step"] % 10 == 0 and 0 < loop["step"] < 50  # saved every SAVE_EVERY = 10
    again = cli_build(tmp_path)
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, (out, err)
    assert f"resuming the tiny build from step {loop['step']} (phase {loop['phase']})" in err
    # progress without a terminal: a plain line per evaluation, with its metrics and time
    evals = re.findall(r"^tiny: step (\d+)/\d+ (copy|mix) loss [\d.]+ acc \d\.\d\d "
                       r"tool \d\.\d\d/\d\.\d\d \(\d+ s\)$", err, re.M)
    expected = [step for step in (40, 50) if step > loop["step"]]  # the evaluations it ran
    assert [int(step) for step, _ in evals if int(step) in (40, 50)] == expected, err
    assert "\x1b[" not in out + err  # no terminal control codes
    assert "built " in out and not state.exists()
    assert read_meta(tmp_path / "models" / "tiny")["resumed_from_step"] == loop["step"]
    _assert_same_weights(tmp_path / "models" / "tiny", reference)
