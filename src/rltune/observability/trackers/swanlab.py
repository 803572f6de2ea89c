"""SwanLab: offline by default (a run folder under ``<job dir>/swanlog`` that ``swanlab sync``
uploads later), ``local`` or ``online``; ``SWANLAB_MODE``, ``SWANLAB_PROJ_NAME`` (or
``SWANLAB_PROJECT``), ``SWANLAB_WORKSPACE`` and ``SWANLAB_LOG_DIR`` apply where the YAML sets
nothing. SwanLab keeps one run per process, as its API does.
The job config is the run's config; SwanLab has no table type, so no sample table; the training
doctor's alerts are ``swanlab.Text`` at their step (``doctor/alerts``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import swanlab

from rltune.config.observability import TrackerConfig
from rltune.observability.trackers.base import local_dir
from rltune.observability.trackers.env import option


class SwanLabTracker:
    name = "swanlab"

    def __init__(self, cfg: TrackerConfig, *, job_dir: Path, job_name: str):
        self.job_dir, self.project = job_dir, option(cfg, "project") or job_name
        self.mode, self.dir = option(cfg, "mode") or "offline", option(cfg, "dir")
        self.run: Any = None

    def start(self, *, run_name: str, params: dict[str, Any], resume_id: Optional[str]) -> str:
        self.run = swanlab.init(
            project=self.project,
            name=run_name,
            mode=self.mode,
            log_dir=str(local_dir(self.dir, self.job_dir, "swanlog")),
            config=params,
            id=resume_id,
            resume="allow" if resume_id else None,
        )
        return str(self.run.id)

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def table(self, step: int, rows: list[list[Any]]) -> None:
        return None  # SwanLab has no table media type

    def alert(self, step: int, code: str, title: str, text: str) -> None:
        self.run.log({"doctor/alerts": swanlab.Text(text)}, step=step)

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
