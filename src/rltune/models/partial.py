"""The saved state of an unfinished demo-model build, so an interrupted build resumes.

While :func:`rltune.models.registry.ensure_demo_model` trains, the warm start saves its whole
state (weights, optimizer, scheduler, step and phase, RNG states, the metrics history: see
``warmstart.LoopState``) to one file, :func:`rltune.paths.partial_build_file`, every
:data:`SAVE_EVERY` steps and after each evaluation. The file carries a key hashed from the
recipe, the seed, the model shape and the tokenizer's vocabulary: a build of another recipe
discards it instead of resuming from it. Writes go to a temporary file renamed over the old
one, so a build killed while saving leaves the previous state intact.

:func:`build_lock` keeps two builds of the same model (two terminals, two test workers, a job
server and a CLI) from writing the same files: the second waits, then finds the model built.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

    from rltune.models.recipes import Recipe

#: Steps between two saves (each evaluation saves too). A nano save is ~10 MB.
SAVE_EVERY = 10
#: Bumped when the saved layout changes, so an old partial is discarded, not misread.
FORMAT = 1

Notify = Callable[[str], None]


def recipe_key(recipe: Recipe, seed: int, tokenizer: PreTrainedTokenizerFast) -> str:
    """A hash of everything that decides a build's weights, step by step."""
    from rltune.models.factory import shape_of

    vocab = sorted(tokenizer.get_vocab().items())
    facts = {
        "format": FORMAT,
        "size": recipe.size,
        "shape": asdict(shape_of(recipe.size)),
        "copy_gain": recipe.copy_gain,
        "lookback_gain": recipe.lookback_gain,
        "base": recipe.base,
        "config": asdict(recipe.warm_start(seed)),
        "vocab": hashlib.sha256(json.dumps(vocab).encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()


class PartialBuild:
    """The partial state of one build (a ``warmstart.Checkpoint``): ``load`` it once, ``save``
    it as the run goes, ``discard`` it when the build ends either way."""

    def __init__(self, path: Path, key: str, name: str, *, every: int = SAVE_EVERY,
                 notify: Notify | None = None) -> None:
        if every < 1:
            raise ValueError(f"PartialBuild(every={every}): save at least every 1 step")
        self.path, self.key, self.name, self.every = path, key, name, every
        self.notify = notify or (lambda message: None)
        self.resumed_from: int | None = None

    def load(self) -> dict[str, Any] | None:
        """The saved state of this recipe's build, or None (nothing saved, another recipe's,
        or unreadable: those two are discarded, with a note)."""
        import torch

        if not self.path.is_file():
            return None
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as exc:  # truncated or foreign file: start over, say why
            self.notify(f"discarding the unreadable partial {self.name} build at {self.path} "
                        f"({type(exc).__name__}: {exc}); starting from step 0")
            self.discard()
            return None
        if not isinstance(state, dict) or state.get("key") != self.key:
            self.notify(f"discarding the partial {self.name} build at {self.path}: it was "
                        "made by another recipe; starting from step 0")
            self.discard()
            return None
        loop = state["loop"]
        self.resumed_from = loop["step"]
        self.notify(f"resuming the {self.name} build from step {loop['step']} "
                    f"(phase {loop['phase']})")
        return state

    def save(self, state: dict[str, Any]) -> None:
        import torch

        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        torch.save({**state, "key": self.key}, tmp)
        os.replace(tmp, self.path)

    def discard(self) -> None:
        """Remove the state and any temporary file a killed save left behind."""
        self.path.unlink(missing_ok=True)
        for tmp in self.path.parent.glob(f".{self.path.name}.*.tmp"):
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def build_lock(path: Path, notify: Notify | None = None) -> Iterator[None]:
    """Hold the build lock of ``path`` (a ``partial_build_file``) for the ``with`` block.

    An advisory ``flock`` on ``<path>.lock``: released by the kernel when the holder exits,
    however it exits. The lock file is never deleted, so two waiters cannot end up holding
    locks on two different files.
    """
    lock_path = path.with_suffix(".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "?"
            if notify:
                notify(f"another process (pid {holder}) is building {path.stem}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
