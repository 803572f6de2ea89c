"""Where demo models live, and building them on first use.

Models are saved under ``$RLTUNE_HOME/models/<name>`` (``RLTUNE_HOME`` defaults to
``~/.rltune``); ``<name>`` is the size (``nano``, ``small``) for seed 0 and ``<size>-seed<k>``
otherwise. A directory counts as built once its ``rltune_model.json`` exists: building writes
into a temporary sibling directory and renames it at the end, so an interrupted build never
leaves a half model behind. The build's own state is saved as it goes
(``rltune.models.partial``), so the next build after an interruption resumes where it stopped;
a lock keeps two builds of one model from running at once (the second waits, then reuses).

Example (1-2 min the first time, then cached: instant):
    >>> path = ensure_demo_model("nano")      # doctest: +SKIP
    >>> ensure_demo_model("nano") == path     # doctest: +SKIP
    True
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rltune.models.factory import META_FILE, count_parameters, read_meta
from rltune.models.partial import SAVE_EVERY, Notify, PartialBuild, build_lock, recipe_key
from rltune.models.progress_lines import line_progress
from rltune.models.recipes import Recipe, demo_recipe, recipe_for, task_model
from rltune.models.warmstart import Progress
from rltune.paths import (
    PathLike,
    check_model,
    download_snapshot,
    models_home,
    partial_build_file,
    rltune_home,
)
from rltune.sdk.errors import BuildError

__all__ = ["ensure_demo_model", "list_models", "model_name", "models_home", "resolve_model",
           "rltune_home"]


def resolve_model(spec: PathLike, home: PathLike | None = None, *,
                  what: str = "model.name") -> Path:
    """The model directory for ``spec`` (the order is ``rltune.paths.check_model``'s): builds
    a demo size and downloads a hub id when needed."""
    source = check_model(str(spec), home, what=what)
    if source.path is not None:
        return source.path
    if source.kind == "demo":
        recipe = demo_recipe(source.spec)
        return Path(ensure_demo_model(recipe.size, home=home, task=recipe.task))
    return download_snapshot(source.spec)


def model_name(size: str, seed: int = 0, task: str = "calc") -> str:
    base = task_model(size, task)
    return base if seed == 0 else f"{base}-seed{seed}"


def ensure_demo_model(
    size: str = "nano",
    seed: int = 0,
    home: str | Path | None = None,
    progress: Progress | None = None,
    *,
    force: bool = False,
    save_every: int = SAVE_EVERY,
    task: str = "calc",
) -> Path:
    """Path of the warm-started ``size`` model, building it first if it is not cached.

    ``progress`` receives the warm start's events (dicts with ``phase``, ``step``, ``loss``,
    and on evaluations ``accuracy``, ``tool_rate`` ...) and notes (dicts with a ``message``:
    resuming, waiting for another build); without one, plain lines go to stderr
    (``progress_lines``). ``force`` rebuilds. The build saves its state every ``save_every``
    steps and after each evaluation (``rltune.models.partial``); a build of the same size,
    seed and recipe after an interruption resumes from there. A ``task`` other than ``calc``
    (``multistep``) fine-tunes the calculator demo model of the same size and seed, which is
    built first when it is not cached.
    """
    recipe = recipe_for(size, task)
    name = model_name(size, seed, task)
    target = models_home(home) / name
    if not force and (target / META_FILE).is_file():
        return target
    report = progress or line_progress(name)

    def notify(message: str) -> None:
        report({"phase": "note", "message": message})

    state_file = partial_build_file(home, name)
    with build_lock(state_file, notify):
        if not force and (target / META_FILE).is_file():  # the build we waited for made it
            return target
        base = None
        if recipe.base is not None:
            base = ensure_demo_model(recipe.base, seed, home, progress, save_every=save_every)
        return _build(recipe, seed, target, state_file, report, notify, save_every, base)


def _build(recipe: Recipe, seed: int, target: Path, state_file: Path, progress: Progress,
           notify: Notify, save_every: int, base: Path | None = None) -> Path:
    import torch

    from rltune.models.factory import build_model, save_model, with_lookback_layer
    from rltune.models.tokenizer import load_tokenizer, train_tokenizer
    from rltune.models.warmstart import warm_start

    size = recipe.size
    t0 = time.perf_counter()
    config = recipe.warm_start(seed)
    tokenizer = train_tokenizer(seed=seed) if base is None else load_tokenizer(base)
    partial = PartialBuild(state_file, recipe_key(recipe, seed, tokenizer), target.name,
                           every=save_every, notify=notify)
    with torch.random.fork_rng(devices=[]):
        if base is None:
            model = build_model(size, tokenizer, seed=seed, copy_gain=recipe.copy_gain)
        else:
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
        if recipe.lookback_gain is not None:
            model = with_lookback_layer(model, recipe.lookback_gain, seed=seed)
        result = warm_start(model, tokenizer, config, progress, checkpoint=partial)
    if not result.ok:
        partial.discard()  # a recipe that missed its target must not resume
        raise BuildError(
            f"the {target.name} warm start (seed {seed}) missed its target: stopped at step "
            f"{result.steps} ({result.reason}) with held-out {_describe(result.metrics)}; "
            f"the target is accuracy in {list(config.band)} with the tool path right "
            f">= {config.min_tool_accuracy:.0%} of the time",
            where=f"rltune.models.recipes:{target.name}",
            hint="nothing was saved; report this with the metrics and `lscpu`, or retry "
            "with another --seed",
            metrics=result.metrics,
        )
    meta: dict[str, Any] = {
        "name": target.name,
        "size": size,
        "demo_task": recipe.task,
        "seed": seed,
        "parameters": count_parameters(model),
        "task": config.task,
        "base_model": None if base is None else base.name,
        "target_band": list(config.band),
        "copy_gain": recipe.copy_gain,
        "lookback_gain": recipe.lookback_gain,
        "stop_reason": result.reason,
        "steps": result.steps,
        "heldout_accuracy": result.metrics.get("accuracy"),
        "heldout_metrics": result.metrics,
        "eval_episodes": config.eval_episodes,
        "train_seconds": round(result.train_seconds, 1),
        "build_seconds": round(time.perf_counter() - t0, 1),
        "resumed_from_step": partial.resumed_from,
        "torch_threads": result.threads,
        "history": result.history,
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        save_model(model, tokenizer, tmp, meta)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    partial.discard()
    return target


def _describe(metrics: dict[str, float]) -> str:
    names = ("accuracy", "tool_rate", "tool_accuracy", "direct_accuracy", "format_rate")
    return ", ".join(f"{k} {metrics[k]:.2f}" for k in names if k in metrics) or "no evaluation"


def list_models(home: str | Path | None = None) -> list[dict[str, Any]]:
    """One summary dict per built model under ``models_home()``, sorted by name."""
    root = models_home(home)
    out = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        meta = read_meta(d)
        if meta is None or d.name.startswith("."):
            continue
        meta.pop("history", None)
        out.append({**meta, "name": d.name, "path": str(d)})
    return out
