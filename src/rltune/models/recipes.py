"""Warm-start recipes of the demo sizes (shape in ``factory.SHAPES``, training knobs here).

Each recipe is fixed and seeded; the run stops on held-out accuracy (see ``warmstart``), so
the same recipe lands in the same band on a fast or a loaded machine, only slower. Recipes pin
two torch threads: the sum order of a matmul depends on the thread count, and the copy skill is
learned in a sudden, chaotic jump, so one thread instead of two changed where (and whether)
``small`` got there (RESULTS.md). Two threads on a busy box are slower, but the model is the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from rltune.models.tasks import TaskConfig
from rltune.models.warmstart import WarmStartConfig
from rltune.sdk.errors import ValidationError


@dataclass(frozen=True)
class Recipe:
    size: str
    config: WarmStartConfig = field(default_factory=WarmStartConfig)
    note: str = ""

    def warm_start(self, seed: int) -> WarmStartConfig:
        return replace(self.config, seed=seed)


RECIPES: dict[str, Recipe] = {
    # Two phases (see ``warmstart``). Copy: 60 % tool transcripts until the sampled (T=1)
    # tool path is right >= 90 % of the time; copying expression and result is learned in a
    # sudden jump (~250-350 steps at 32/batch). Mix: 35 % tool transcripts at a fifth of the
    # rate until accuracy is in the band (tens of steps): the model then calls the tool on
    # ~20-40 % of questions and is right when it does, so RL's headroom is the tool decision.
    # The learning rate matters: at 4e-3 nano never learned the copy in 700 steps (RESULTS.md).
    "nano": Recipe(
        "nano",
        WarmStartConfig(
            task=TaskConfig(digits=1, heldout_percent=30),
            tool_fraction=0.6,
            mix_tool_fraction=0.35,
            lr=2.5e-3,
            batch_size=32,
            max_steps=1000,
            eval_every=50,
            eval_episodes=60,
            min_tool_accuracy=0.9,
            threads=2,
        ),
        note="~0.8M params, single-digit +,-,* (tests, CI)",
    ),
    # Same two phases as nano, plus guessed direct answers: with true ones small memorised
    # the training questions' answers and, after RL, still copied the tool's result wrong on
    # ~15 % of unseen questions (validation plateau ~0.82-0.87). Measured failures
    # (RESULTS.md): lr 2e-3 / 2.5e-3 / 3e-3 learned the copy late or never.
    "small": Recipe(
        "small",
        WarmStartConfig(
            task=TaskConfig(digits=1, heldout_percent=30),
            tool_fraction=0.6,
            mix_tool_fraction=0.35,
            guess_direct=True,
            lr=1.5e-3,
            batch_size=32,
            max_steps=1000,
            eval_every=50,
            eval_episodes=60,
            min_tool_accuracy=0.9,
            threads=2,
        ),
        note="~9M params, single-digit +,-,* (README demo)",
    ),
}


def recipe_for(size: str) -> Recipe:
    if size not in RECIPES:
        raise ValidationError(
            f"no warm-start recipe for size {size!r}",
            where="size",
            hint=f"use one of {', '.join(RECIPES)} (tiny is untrained: build_tiny_model())",
        )
    return RECIPES[size]
