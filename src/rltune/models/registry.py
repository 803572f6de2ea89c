"""Where demo models live, and building them on first use.

Models are saved under ``$RLTUNE_HOME/models/<name>`` (``RLTUNE_HOME`` defaults to
``~/.rltune``); ``<name>`` is the size (``nano``, ``small``) for seed 0 and ``<size>-seed<k>``
otherwise. A directory counts as built once its ``rltune_model.json`` exists: building writes
into a temporary sibling directory and renames it at the end, so an interrupted build never
leaves a half model behind.

Example:
    >>> path = ensure_demo_model("nano")      # doctest: +SKIP  (1-2 min the first time)
    >>> ensure_demo_model("nano") == path     # doctest: +SKIP  (cached: instant)
    True
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rltune.models.factory import META_FILE, count_parameters, read_meta
from rltune.models.recipes import RECIPES, recipe_for
from rltune.models.warmstart import Progress
from rltune.sdk.errors import BuildError, NotFoundError


def rltune_home(home: str | Path | None = None) -> Path:
    """``home``, else ``$RLTUNE_HOME``, else ``~/.rltune``."""
    return Path(home or os.environ.get("RLTUNE_HOME") or Path.home() / ".rltune").expanduser()


def models_home(home: str | Path | None = None) -> Path:
    return rltune_home(home) / "models"


def model_name(size: str, seed: int = 0) -> str:
    return size if seed == 0 else f"{size}-seed{seed}"


def ensure_demo_model(
    size: str = "nano",
    seed: int = 0,
    home: str | Path | None = None,
    progress: Progress | None = None,
    *,
    force: bool = False,
) -> Path:
    """Path of the warm-started ``size`` model, building it first if it is not cached.

    ``progress`` receives the warm start's events (dicts with ``phase``, ``step``, ``loss``,
    and on evaluations ``accuracy``, ``tool_rate`` ...). ``force`` rebuilds.
    """
    import torch

    from rltune.models.factory import build_model, save_model
    from rltune.models.tokenizer import train_tokenizer
    from rltune.models.warmstart import warm_start

    recipe = recipe_for(size)
    target = models_home(home) / model_name(size, seed)
    if not force and (target / META_FILE).is_file():
        return target
    t0 = time.perf_counter()
    config = recipe.warm_start(seed)
    tokenizer = train_tokenizer(seed=seed)
    with torch.random.fork_rng(devices=[]):
        model = build_model(size, tokenizer, seed=seed, copy_gain=recipe.copy_gain)
        result = warm_start(model, tokenizer, config, progress)
    if not result.ok:
        raise BuildError(
            f"the {size} warm start (seed {seed}) missed its target: stopped at step "
            f"{result.steps} ({result.reason}) with held-out {_describe(result.metrics)}; "
            f"the target is accuracy in {list(config.band)} with the tool path right "
            f">= {config.min_tool_accuracy:.0%} of the time",
            where=f"rltune.models.recipes:{size}",
            hint="nothing was saved; report this with the metrics and `lscpu`, or retry "
            "with another --seed",
            metrics=result.metrics,
        )
    meta: dict[str, Any] = {
        "name": target.name,
        "size": size,
        "seed": seed,
        "parameters": count_parameters(model),
        "task": config.task,
        "target_band": list(config.band),
        "copy_gain": recipe.copy_gain,
        "stop_reason": result.reason,
        "steps": result.steps,
        "heldout_accuracy": result.metrics.get("accuracy"),
        "heldout_metrics": result.metrics,
        "eval_episodes": config.eval_episodes,
        "train_seconds": round(result.train_seconds, 1),
        "build_seconds": round(time.perf_counter() - t0, 1),
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
    return target


def _describe(metrics: dict[str, float]) -> str:
    names = ("accuracy", "tool_rate", "tool_accuracy", "direct_accuracy", "format_rate")
    return ", ".join(f"{k} {metrics[k]:.2f}" for k in names if k in metrics) or "no evaluation"


def resolve_model(name_or_path: str | Path, home: str | Path | None = None) -> Path:
    """A model directory from a path, a name under ``models_home()``, or a size to build."""
    path = Path(name_or_path).expanduser()
    if (path / "config.json").is_file():
        return path
    cached = models_home(home) / str(name_or_path)
    if (cached / "config.json").is_file():
        return cached
    if str(name_or_path) in RECIPES:
        return ensure_demo_model(str(name_or_path), home=home)
    from rltune.lifecycle.publish import published_dir  # published models (default workspace)

    published = published_dir(rltune_home(home), "default", str(name_or_path))
    if (published / "config.json").is_file():
        return published
    raise NotFoundError(
        f"no model {str(name_or_path)!r}",
        where=str(name_or_path),
        hint=f"pass a model directory, a name under {models_home(home)}, "
        f"or a size to build ({', '.join(RECIPES)})",
    )


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
