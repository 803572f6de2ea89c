"""Weights & Biases: offline by default (a run folder under ``<job dir>/wandb`` that
``wandb sync`` uploads later), or ``mode: online``; ``WANDB_MODE``, ``WANDB_PROJECT``,
``WANDB_ENTITY`` and ``WANDB_DIR`` apply where the YAML sets nothing. The job config is the
run's config, sample trajectories a ``wandb.Table`` per step, the training doctor's alerts W&B
alerts (and text in the history); resuming passes the saved run id."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import wandb

from rltune.config.observability import TrackerConfig
from rltune.observability.trackers.base import TABLE_COLUMNS, local_dir
from rltune.observability.trackers.env import option


class WandbTracker:
    name = "wandb"

    def __init__(self, cfg: TrackerConfig, *, job_dir: Path, job_name: str):
        self.job_dir, self.project = job_dir, option(cfg, "project") or job_name
        self.mode = option(cfg, "mode") or "offline"
        self.entity, self.dir = option(cfg, "entity"), option(cfg, "dir")
        self.run: Any = None

    def start(self, *, run_name: str, params: dict[str, Any], resume_id: Optional[str]) -> str:
        self.run = wandb.init(
            project=self.project,
            entity=self.entity,
            mode=self.mode,
            dir=str(local_dir(self.dir, self.job_dir, ".")),
            name=run_name,
            id=resume_id,
            resume="must" if resume_id and (self.mode == "online") else (
                "allow" if resume_id else None),
            config=params,
            reinit="create_new",
            settings=wandb.Settings(silent=True, console="off"),
        )
        return self.run.id

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def table(self, step: int, rows: list[list[Any]]) -> None:
        self.run.log({"samples": wandb.Table(columns=list(TABLE_COLUMNS), data=rows)},
                     step=step)

    def alert(self, step: int, code: str, title: str, text: str) -> None:
        """W&B's own alert (sent when the run is online or synced) and the text in the
        history (``doctor/alert``) at the step."""
        self.run.alert(title=f"rltune doctor {code}: {title}"[:63], text=text,
                       level=wandb.AlertLevel.WARN)
        self.run.log({"doctor/alert": text}, step=step)

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
