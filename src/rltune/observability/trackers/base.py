"""What every experiment tracker does, and how one is built from its config.

A tracker is started once before step 1 (``start`` returns its run id, saved in checkpoints so a
resumed job continues the same run), then receives each step's metrics and a table of sample
trajectories, and is closed at the end. Tracker packages are optional: one is imported only
when a job names it, and a missing package is a ``ConfigError`` naming the extra to install.
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import Any, Optional, Protocol

from rltune.config.observability import TrackerConfig
from rltune.names import TRACKERS, check_registry
from rltune.sdk.errors import ConfigError

#: Columns of the sample-trajectory table.
TABLE_COLUMNS = ("step", "rollout_id", "reward", "advantage", "status", "num_llm_calls",
                 "response_tokens", "prompt", "response")

#: tracker name -> (module in rltune.observability.trackers, class, pip package, extra)
_IMPLEMENTATIONS = {
    "tensorboard": ("tensorboard", "TensorBoardTracker", "tensorboard", "tensorboard"),
    "mlflow": ("mlflow", "MlflowTracker", "mlflow-skinny", "mlflow"),
    "wandb": ("wandb", "WandbTracker", "wandb", "wandb"),
    "swanlab": ("swanlab", "SwanLabTracker", "swanlab", "swanlab"),
    "trackio": ("trackio", "TrackioTracker", "trackio", "trackio"),
}
check_registry("tracker", TRACKERS, _IMPLEMENTATIONS)


class Tracker(Protocol):
    name: str

    def start(self, *, run_name: str, params: dict[str, Any], resume_id: Optional[str]) -> str:
        """Open (or reopen ``resume_id``) the run; return its id."""
        ...

    def metrics(self, step: int, values: dict[str, float]) -> None: ...
    def table(self, step: int, rows: list[list[Any]]) -> None: ...
    def alert(self, step: int, code: str, title: str, text: str) -> None:
        """A training-doctor alert at ``step`` (``text``: the alert's one-line form)."""
        ...

    def close(self) -> None: ...


def build_tracker(cfg: TrackerConfig, *, job_dir: Path, job_name: str) -> Tracker:
    """The tracker for ``cfg``; its package is imported here (``ConfigError`` if missing)."""
    module_name, cls_name, package, extra = _IMPLEMENTATIONS[cfg.type]
    try:
        module = importlib.import_module(f"rltune.observability.trackers.{module_name}")
        cls = getattr(module, cls_name)
        return cls(cfg, job_dir=job_dir, job_name=job_name)
    except ImportError as exc:
        raise ConfigError(
            f"tracker {cfg.type!r} needs the {package} package, which is not installed "
            f"({exc})",
            where="observability.trackers",
            hint=f"pip install 'rltune[{extra}]', or remove {cfg.type} from the trackers",
        ) from exc


def finite(values: dict[str, Any]) -> dict[str, float]:
    """The finite numeric values (NaN and inf stay in metrics.jsonl as null, not in trackers)."""
    out = {}
    for key, value in values.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = float(value)
            if math.isfinite(value):
                out[key] = value
    return out


def local_dir(cfg_dir: Optional[str], job_dir: Path, default: str) -> Path:
    """A tracker's local folder: ``dir`` from the config, else ``<job_dir>/<default>``."""
    path = Path(cfg_dir).expanduser() if cfg_dir else job_dir / default
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()
