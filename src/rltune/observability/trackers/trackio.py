"""trackio: a local SQLite project (``$TRACKIO_DIR``, trackio's default folder otherwise) that
``trackio show`` serves. The run id is the run name, which trackio resumes by. Sample
trajectories are a ``trackio.Table`` per step, the training doctor's alerts trackio alerts;
the job config is the run's config."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import trackio

from rltune.config.observability import TrackerConfig
from rltune.observability.trackers.base import TABLE_COLUMNS


class TrackioTracker:
    name = "trackio"

    def __init__(self, cfg: TrackerConfig, *, job_dir: Path, job_name: str):
        self.project = cfg.project or job_name
        self.run: Any = None

    def start(self, *, run_name: str, params: dict[str, Any], resume_id: Optional[str]) -> str:
        self.run = trackio.init(project=self.project, name=resume_id or run_name, config=params,
                                resume="must" if resume_id else "never")
        return str(self.run.name)

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def table(self, step: int, rows: list[list[Any]]) -> None:
        self.run.log({"samples": trackio.Table(columns=list(TABLE_COLUMNS), data=rows)},
                     step=step)

    def alert(self, step: int, code: str, title: str, text: str) -> None:
        self.run.alert(title=f"rltune doctor {code}: {title}", text=text,
                       level=trackio.AlertLevel.WARN, step=step)

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
