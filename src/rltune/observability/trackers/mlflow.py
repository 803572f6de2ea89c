"""MLflow: a run in a tracking server (``uri``) or a local SQLite store (``<job dir>/mlflow.db``,
artifacts in ``<job dir>/mlartifacts``; MLflow's file store is deprecated).
``MLFLOW_TRACKING_URI`` and ``MLFLOW_EXPERIMENT_NAME`` apply where the YAML sets nothing.

Metric names keep their slashes; MLflow takes only letters, digits, ``_ - . / : `` and spaces,
so ``…/mean@1`` is logged as ``…/mean_at_1``, Ark's ``train/reward->final_reward.mean`` as
``train/reward_to_final_reward.mean``, and any other refused character becomes ``_`` (see
:func:`mlflow_key`). The job config is the run's params
(flattened with dots), sample trajectories are JSON table artifacts ``samples/step_<n>.json``,
the training doctor's alerts tags ``doctor/<code>`` and the artifact ``doctor/alerts.txt``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunStatus

from rltune.config.observability import TrackerConfig
from rltune.observability.trackers.base import TABLE_COLUMNS, local_dir
from rltune.observability.trackers.env import option

_MAX_PARAM_CHARS = 6000
PROBE_TIMEOUT_S = 5.0


_REFUSED = re.compile(r"[^/\w.\- :]")  # MLflow's own rule for metric names, negated


def mlflow_key(name: str) -> str:
    """The MLflow name of a metric: ``@`` becomes ``_at_``, ``->`` ``_to_``, and any other
    character MLflow refuses ``_``.

    >>> mlflow_key("validation/data/reward/mean@1")
    'validation/data/reward/mean_at_1'
    >>> mlflow_key("train/reward->final_reward.mean")
    'train/reward_to_final_reward.mean'
    """
    return _REFUSED.sub("_", name.replace("@", "_at_").replace("->", "_to_"))


def flatten(params: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config → ``{"training.hyper_parameters.learning_rate": "2e-06", ...}``."""
    out: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = str(value)[:_MAX_PARAM_CHARS]
    return out


def _check_reachable(uri: str) -> None:
    """An http(s) tracking server must accept a connection within seconds: otherwise the job
    fails now, not after MLflow's minutes of retries."""
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https") and parts.hostname:
        from rltune.config.netguard import probe_tcp

        probe_tcp(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80),
                  timeout=PROBE_TIMEOUT_S, where="observability.trackers.mlflow.uri",
                  what=f"the MLflow server {parts.scheme}://{parts.netloc}")


class MlflowTracker:
    name = "mlflow"

    def __init__(self, cfg: TrackerConfig, *, job_dir: Path, job_name: str):
        uri = option(cfg, "uri")
        self.uri = uri or f"sqlite:///{Path(job_dir).resolve() / 'mlflow.db'}"
        # Artifacts of a new experiment stay in the job dir (MLflow's default is the cwd).
        self.artifacts = None if uri else local_dir(None, job_dir, "mlartifacts").as_uri()
        self.experiment = option(cfg, "project") or job_name
        self.client: Any = None
        self.run_id = ""
        self.alert_lines: list[str] = []

    def start(self, *, run_name: str, params: dict[str, Any], resume_id: Optional[str]) -> str:
        _check_reachable(self.uri)
        self.client = MlflowClient(tracking_uri=self.uri)
        if resume_id:
            try:
                self.client.get_run(resume_id)
            except Exception as exc:
                raise RuntimeError(
                    f"run {resume_id} is not in the store {self.uri} ({exc}); a job resumed "
                    "into another directory needs uri: set to the first job's store"
                ) from exc
            self.client.update_run(resume_id, status=RunStatus.to_string(RunStatus.RUNNING))
            self.run_id = resume_id
            return resume_id
        found = self.client.get_experiment_by_name(self.experiment)
        exp_id = found.experiment_id if found else self.client.create_experiment(
            self.experiment, artifact_location=self.artifacts)
        run = self.client.create_run(exp_id, run_name=run_name)
        self.run_id = run.info.run_id
        items = [Param(k, v) for k, v in flatten(params).items()]
        for i in range(0, len(items), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(self.run_id, params=items[i:i + 100])
        return self.run_id

    def metrics(self, step: int, values: dict[str, float]) -> None:
        now = int(time.time() * 1000)
        batch = [Metric(mlflow_key(k), v, now, step) for k, v in values.items()]
        for i in range(0, len(batch), 1000):
            self.client.log_batch(self.run_id, metrics=batch[i:i + 1000])

    def table(self, step: int, rows: list[list[Any]]) -> None:
        self.client.log_dict(self.run_id, {"columns": list(TABLE_COLUMNS), "data": rows},
                             f"samples/step_{step:06d}.json")

    def alert(self, step: int, code: str, title: str, text: str) -> None:
        """A tag per code (``doctor/P9``: its latest alert) and every alert so far in the
        text artifact ``doctor/alerts.txt``."""
        self.alert_lines.append(text)
        self.client.set_tag(self.run_id, f"doctor/{code}", text[:5000])
        self.client.log_text(self.run_id, "\n".join(self.alert_lines) + "\n",
                             "doctor/alerts.txt")

    def close(self) -> None:
        if self.client is not None and self.run_id:
            self.client.set_terminated(self.run_id)
