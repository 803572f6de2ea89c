"""Where rltune keeps things, and where a model name comes from (no torch here).

Home directory: ``$RLTUNE_HOME``, else ``~/.rltune``::

    <home>/models/<name>/          demo models (``rltune models build-demo``) and your own
    <home>/models/.partial/        unfinished demo-model builds (resumed by the next build)
    <home>/server/                 the job server's database, server.json, admin.key
    <home>/functions/              registered functions and their venvs
    <home>/published/<ws>/<name>/  published models of a job-server workspace

Checkpoints of a run: ``<job dir>/checkpoints/checkpoint-<step>/``.

A model spec (``model.name`` of a job, ``rltune serve MODEL``, ``teacher_model``) resolves, in
this order (:func:`check_model`; ``rltune.models.registry.resolve_model`` then builds a demo
size or downloads a hub id), to:

1. a directory holding ``config.json`` (a ``save_pretrained`` output or a hub snapshot);
2. a name under ``<home>/models``, else a model published in the ``default`` workspace (on
   the job server: in the caller's workspace);
3. a demo size (``nano``, ``small``) or a demo task model (``nano-multistep``): built on
   first use;
4. a Hugging Face hub id (``Qwen/Qwen2.5-0.5B-Instruct``): its snapshot in the HF cache
   (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``), downloaded
   when it is not there, unless ``HF_HUB_OFFLINE`` is set: then a missing snapshot is a
   ``NotFoundError`` that says how to get it.

:func:`check_model` answers without building or downloading anything, so the CLI and the job
server can refuse a job before it starts. The demo models are named here (:data:`DEMO_SIZES`,
:data:`DEMO_TASK_MODELS`); ``rltune.models.recipes`` checks at import that its recipes are
exactly these.

Example:
    >>> str(models_home("/tmp/h")), str(checkpoint_dir("/tmp/run", 3))
    ('/tmp/h/models', '/tmp/run/checkpoints/checkpoint-3')
    >>> checkpoint_step("/tmp/run/checkpoints/checkpoint-3"), checkpoint_step("/tmp/x")
    (3, None)
    >>> is_hub_id("Qwen/Qwen2.5-0.5B-Instruct"), is_hub_id("./runs/x"), is_hub_id("nano")
    (True, False, False)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from rltune.modelcodes import lookup as lookup_code
from rltune.sdk.errors import DependencyError, NotFoundError, ValidationError

PathLike = Union[str, Path]

CHECKPOINTS = "checkpoints"
CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_TRUE = {"1", "true", "yes", "on"}
#: The demo model sizes built on first use (one recipe each in ``rltune.models.recipes``).
DEMO_SIZES = ("nano", "small")
#: Demo models of another task than the calculator's, ``<size>-<task>`` (built on first use
#: from that size's demo model; ``rltune.models.recipes.TASK_RECIPES``).
DEMO_TASK_MODELS = ("nano-multistep",)


# -- home -----------------------------------------------------------------------------------


def rltune_home(home: Optional[PathLike] = None) -> Path:
    """``home``, else ``$RLTUNE_HOME``, else ``~/.rltune``."""
    return Path(home or os.environ.get("RLTUNE_HOME") or Path.home() / ".rltune").expanduser()


def models_home(home: Optional[PathLike] = None) -> Path:
    return rltune_home(home) / "models"


def partial_build_file(home: Optional[PathLike], name: str) -> Path:
    """The saved state of an unfinished build of demo model ``name`` (``rltune.models.partial``);
    its lock is the same path with the suffix ``.lock``."""
    return models_home(home) / ".partial" / f"{name}.pt"


def server_home(home: Optional[PathLike] = None) -> Path:
    return rltune_home(home) / "server"


def functions_home(home: Optional[PathLike] = None) -> Path:
    return rltune_home(home) / "functions"


def published_dir(home: Optional[PathLike], workspace: str, name: str) -> Path:
    """Where the files of a published model live (``rltune.lifecycle.publish``)."""
    if workspace in ("", ".", "..") or "/" in workspace:
        from rltune.sdk.errors import ValidationError

        raise ValidationError(f"workspace {workspace!r} cannot hold published models",
                              where="workspace", hint="use a workspace name with a letter")
    return rltune_home(home) / "published" / workspace / name


# -- checkpoints ----------------------------------------------------------------------------


def checkpoints_root(job_dir: PathLike) -> Path:
    return Path(job_dir) / CHECKPOINTS


def checkpoint_dir(job_dir: PathLike, step: int) -> Path:
    return checkpoints_root(job_dir) / f"checkpoint-{step}"


def checkpoint_step(path: PathLike) -> Optional[int]:
    """The step of a ``checkpoint-<step>`` folder, None for any other name."""
    m = CHECKPOINT_NAME.match(Path(path).name)
    return int(m.group(1)) if m else None


# -- the Hugging Face cache -----------------------------------------------------------------


def hf_offline() -> bool:
    """Whether hub downloads are off (``HF_HUB_OFFLINE``), read now, not at import time."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def hf_cache_dir() -> Path:
    """The hub cache huggingface_hub uses, from the environment as it is now."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg).expanduser() / "huggingface" / "hub"


def is_hub_id(spec: str) -> bool:
    """``org/name`` with hub-legal characters (a path such as ``./x`` or ``/x`` is not one)."""
    return bool(_HUB_ID.match(spec)) and ".." not in spec


def cached_snapshot(repo_id: str, revision: str = "main") -> Optional[Path]:
    """The cached snapshot directory of ``repo_id`` that has a ``config.json``, or None."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        raise DependencyError(
            f"resolving the hub id {repo_id!r} needs huggingface_hub",
            where="model.name", hint="pip install 'rltune[train]'") from None
    found = try_to_load_from_cache(repo_id, "config.json", cache_dir=str(hf_cache_dir()),
                                   revision=revision)
    return Path(found).parent if isinstance(found, str) else None


def download_snapshot(repo_id: str) -> Path:
    """Download (or refresh) ``repo_id`` into the HF cache; its snapshot directory."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, cache_dir=str(hf_cache_dir())))
    except Exception as exc:  # network, auth, missing repo: all end the same way for the user
        raise NotFoundError(
            f"could not download {repo_id!r} from the Hugging Face hub: "
            f"{type(exc).__name__}: {exc}",
            where="model.name",
            hint="check the id and the network (a gated model needs `hf auth login` or "
            "HF_TOKEN); or download it elsewhere into this cache "
            f"({hf_cache_dir()}) and set HF_HUB_OFFLINE=1") from None


# -- models ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSource:
    """How a model spec resolves: ``kind`` is ``dir``, ``named``, ``demo`` or ``hub``;
    ``path`` is the directory (None while a demo is unbuilt or a hub id is not cached)."""

    spec: str
    kind: str
    path: Optional[Path]

    def describe(self) -> str:
        if self.kind == "hub":
            where = f"cached at {self.path}" if self.path else "not cached: downloads on start"
            return f"Hugging Face hub id ({where})"
        if self.kind == "demo":
            return f"demo model ({self.path or 'not built yet: builds on first use'})"
        return str(self.path)


def check_model(spec: str, home: Optional[PathLike] = None, *, what: str = "model.name",
                workspace: str = "default") -> ModelSource:
    """Where ``spec`` would come from, without building or downloading anything.

    A bare name may be a model published in ``workspace`` (the job server passes the caller's;
    local tools use ``default``).

    Raises ``NotFoundError`` when it cannot resolve at all: an unknown name, or a hub id that
    is not cached while ``HF_HUB_OFFLINE`` is set.
    """
    spec = str(spec or "").strip()
    if not spec:
        raise NotFoundError("no model given", where=what,
                            hint="set model.name: a model directory, a name under "
                            f"{models_home(home)}, a demo model "
                            f"({', '.join(DEMO_SIZES + DEMO_TASK_MODELS)}) or a "
                            "hub id such as Qwen/Qwen2.5-0.5B-Instruct")
    path = Path(spec).expanduser()
    if (path / "sharded" / ".metadata").is_file():  # checkpoint_format: sharded
        raise ValidationError(
            f"{spec} is a sharded checkpoint (its weights are the trainer ranks' "
            "torch.distributed.checkpoint shards), not a Hugging Face folder", where=what,
            hint=f"consolidate it first: `rltune models consolidate {spec} --out DIR`, then use "
                 "DIR (publishing the job's checkpoint consolidates it too)")
    if (path / "config.json").is_file():
        return ModelSource(spec, "dir", path.resolve())
    named = models_home(home) / spec
    if "/" not in spec and (named / "config.json").is_file():
        return ModelSource(spec, "named", named)
    published = published_dir(home, workspace, spec) if "/" not in spec else None
    if published is not None and (published / "config.json").is_file():
        return ModelSource(spec, "named", published)
    if spec in DEMO_SIZES or spec in DEMO_TASK_MODELS:
        return ModelSource(spec, "demo", named if (named / "config.json").is_file() else None)
    hub = lookup_code(spec, home=home) if "/" not in spec and not path.exists() else None
    if hub is not None:  # a cloud model code (rltune.modelcodes): resolves as its hub id
        try:
            return check_model(hub, home, what=what, workspace=workspace)
        except NotFoundError as exc:
            raise NotFoundError(f"model {spec!r} is the cloud code of the hub id {hub!r}; "
                                f"{exc.message}", where=exc.where, hint=exc.hint) from None
    if is_hub_id(spec) and not path.exists():
        snapshot = cached_snapshot(spec)
        if snapshot is None and hf_offline():
            raise NotFoundError(
                f"model {spec!r} is not in the Hugging Face cache ({hf_cache_dir()}) and "
                "HF_HUB_OFFLINE is set, so it cannot be downloaded",
                where=what,
                hint=f"download it where the hub is reachable (`hf download {spec}` with the "
                "same HF_HOME), or unset HF_HUB_OFFLINE to let rltune download it")
        return ModelSource(spec, "hub", snapshot)
    known = sorted(p.name for p in models_home(home).glob("*") if (p / "config.json").is_file())
    raise NotFoundError(
        f"no model {spec!r}: not a model directory (with config.json), not a name under "
        f"{models_home(home)}, not a demo size, not a cloud model code, not a hub id "
        "(org/name)",
        where=what,
        hint=("known names: " + ", ".join(known)) if known else
        "pass a directory saved with save_pretrained, a hub id such as "
        "Qwen/Qwen2.5-0.5B-Instruct, or build the demo model with `rltune models build-demo`")
