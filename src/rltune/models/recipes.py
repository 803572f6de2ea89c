"""Warm-start recipes of the demo sizes (shape in ``factory.SHAPES``, training knobs here).

Each recipe is fixed and seeded, and the run stops on held-out metrics (see ``warmstart``).
Bit-for-bit identical builds across CPUs are not the aim: the recipes are built to reach their
target from any seed, thread count and ISA (the robustness table in RESULTS.md, made by
``benchmarks/warmstart_robustness.py``). Two choices make that so:

* ``copy_gain``: heads start as copiers (``factory.copy_friendly_init``), so the copy of the
  question's operands into the tool call and of the tool's result into the answer is learned
  smoothly in ~150-480 steps. With the default init it came in a chaotic jump somewhere
  between step 300 and never, which is why builds differed between CPU types.
* fp32 math: no bf16 on some CPUs only. The learning rate is constant after warm-up (nano)
  or falls linearly over the fixed step budget (small); the budget is the recipe's, not the
  machine's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from rltune.models.multistep import MultiStepConfig
from rltune.models.tasks import TaskConfig
from rltune.models.warmstart import WarmStartConfig
from rltune.paths import DEMO_SIZES, DEMO_TASK_MODELS
from rltune.sdk.errors import ValidationError


@dataclass(frozen=True)
class Recipe:
    size: str
    config: WarmStartConfig = field(default_factory=WarmStartConfig)
    copy_gain: float = 0.3
    note: str = ""
    # A task recipe fine-tunes this demo model (same size and seed) instead of a fresh one.
    base: str | None = None
    task: str = "calc"
    # Grow the base a new first layer of lookback heads at this gain before the warm start
    # (``factory.with_lookback_layer``): multi-digit copies then come in ~100 steps, not 400+.
    lookback_gain: float | None = None

    def warm_start(self, seed: int) -> WarmStartConfig:
        return replace(self.config, seed=seed)


_TASK = TaskConfig(digits=1, heldout_percent=30)

RECIPES: dict[str, Recipe] = {
    # Copy: 80 % tool transcripts until the sampled (T=1) tool path is right >= 90 % of the
    # time; mix: 35 % at a fifth of the rate until accuracy is in the band. The model then
    # calls the tool on ~20-50 % of questions and is right when it does, so RL's headroom is
    # the tool decision. Measured stops: step 180-510 (RESULTS.md). The copy's budget is 900:
    # seed 1 under the `sse` ISA setting sat at a 0.6-0.75 tool path from step 225 to 575
    # and became reliable only at step 600; the mix phase has 100 steps of its own.
    "nano": Recipe(
        "nano",
        # At 1.5e-3 with the decaying rate seeds 1-2 reached the target sooner (275 and 230
        # steps against 480 for seed 1 here), but RL from those models plateaued at ~0.8
        # validation in the demo (0.84 best in 40 steps) against 0.93 from this recipe's.
        WarmStartConfig(task=_TASK, lr=2.5e-3, final_lr_fraction=1.0, max_steps=900),
        note="~0.8M params, single-digit +,-,* (tests, CI, README demo)",
    ),
    "small": Recipe(
        "small",
        WarmStartConfig(task=_TASK, lr=1e-3, max_steps=600),
        note="~4.2M params, single-digit +,-,*",
    ),
}


#: Demo tasks besides the calculator's (``--task``); their recipes, by model name.
TASKS = ("calc", "multistep")

TASK_RECIPES: dict[str, Recipe] = {
    # Chains of 2-4 dependent calls (rltune.models.multistep), fine-tuned from the nano
    # calculator agent, which already writes a call and copies a result into an answer: what
    # it learns here is to chain, and to copy numbers of two and three digits from anywhere in
    # the conversation, which nano (trained on one-digit operands) never had to. That copy is
    # what a lookback layer (``lookback_gain``) is for: without it the operand's second digit
    # was still right only ~0.1 of the time after 200-500 steps and the build missed its band;
    # with it, in band at step ~175 (RESULTS.md, `make demo-agent`). At gain 0.05 whether the
    # copy ever formed depended on the floating-point order: on an AVX2-only CPU with
    # transformers 5.25 the build was still at 0.02 at step 600. At 0.2 it was in band at step
    # 250-275 on every CPU path tried (RESULTS.md, "The multistep build at lookback gain 0.2").
    # Intermediate results stay within 999, so no call copies more than three digits. Stops at
    # the first evaluation with 25-45 % of held-out chains exactly right (sampled, T=1): where
    # the template's RL starts.
    "nano-multistep": Recipe(
        "nano",
        WarmStartConfig(
            task=MultiStepConfig(max_value=999), lr=2.5e-3, final_lr_fraction=1.0,
            warmup_steps=10, max_steps=600, eval_every=25, eval_episodes=64, band=(0.25, 0.45),
            mix_tool_fraction=None, max_turns=5,
        ),
        note="the nano calculator agent and a lookback layer, fine-tuned on 2-4 dependent "
             "calculator calls",
        base="nano",
        task="multistep",
        lookback_gain=0.2,
    ),
}


# the names rltune.paths resolves without importing this
if tuple(RECIPES) != DEMO_SIZES or tuple(TASK_RECIPES) != DEMO_TASK_MODELS:
    raise RuntimeError(f"demo recipes {tuple(RECIPES)} + {tuple(TASK_RECIPES)} != "
                       f"rltune.paths' DEMO_SIZES {DEMO_SIZES} + DEMO_TASK_MODELS "
                       f"{DEMO_TASK_MODELS}")


def task_model(size: str, task: str = "calc") -> str:
    """The demo model's base name: the size for the calculator task, else ``<size>-<task>``."""
    return size if task == "calc" else f"{size}-{task}"


def recipe_for(size: str, task: str = "calc") -> Recipe:
    if task not in TASKS:
        raise ValidationError(f"unknown demo task {task!r}", where="task",
                              hint=f"use one of {', '.join(TASKS)}")
    if task != "calc":
        name = task_model(size, task)
        if name not in TASK_RECIPES:
            sizes = [r.size for r in TASK_RECIPES.values() if r.task == task]
            raise ValidationError(f"no {task} recipe for size {size!r}", where="size",
                                  hint=f"use --size {' or '.join(sizes)} with --task {task}")
        return TASK_RECIPES[name]
    if size not in RECIPES:
        raise ValidationError(
            f"no warm-start recipe for size {size!r}",
            where="size",
            hint=f"use one of {', '.join(RECIPES)} (tiny is untrained: build_tiny_model())",
        )
    return RECIPES[size]


def demo_recipe(name: str) -> Recipe:
    """The recipe of a demo model name (``nano``, ``nano-multistep``)."""
    if name in TASK_RECIPES:
        return TASK_RECIPES[name]
    return recipe_for(name)
