"""A job's observability for the length of one run: trackers, the tracked sink, tracing.

``JobObservability.open`` runs before the trainer loads anything: every tracker is started
(or reopened with the run id saved in the checkpoint being resumed) and a tracker that cannot
start stops the job right there, with a ``ConfigError`` naming it — never in the middle of a
run. ``run_ids()`` goes into each checkpoint's ``trainer_state.json`` under ``"trackers"``.

Example (what ``Trainer.run`` does)::

    with JobObservability.open(config, job_dir=d, job_id=j, sink=sink, resume_from=ckpt) as obs:
        sink = obs.sink                      # metrics/trajectories now reach the trackers too
        with obs.step(1): ...                # the step's root span
        state["trackers"] = obs.run_ids()    # saved with the checkpoint
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

from rltune.jobdir import read_trainer_state
from rltune.observability.fanout import TrackedSink
from rltune.observability.spans import step_span
from rltune.observability.tracing import TracingHandle, start_job_tracing
from rltune.observability.trackers.base import Tracker, build_tracker
from rltune.sdk.errors import ConfigError

STATE_KEY = "trackers"


def saved_run_ids(checkpoint: str | Path | None) -> dict[str, str]:
    """The tracker run ids a checkpoint was saved with (empty for none or an older one)."""
    if checkpoint is None:
        return {}
    ids = read_trainer_state(checkpoint).get(STATE_KEY) or {}
    return {str(k): str(v) for k, v in ids.items()}


class JobObservability:
    def __init__(self, sink: TrackedSink, tracing: Optional[TracingHandle],
                 run_ids: dict[str, str], job_id: str):
        self.sink = sink
        self.tracing = tracing
        self._run_ids = run_ids
        self.job_id = job_id

    @classmethod
    def open(cls, config: Any, *, job_dir: Path, job_id: str, sink: Any,
             resume_from: str | Path | None = None) -> JobObservability:
        obs = config.observability
        resume = saved_run_ids(resume_from)
        params = config.to_dict()
        started: list[Tracker] = []
        run_ids: dict[str, str] = {}
        tracing: Optional[TracingHandle] = None
        try:
            tracing = start_job_tracing(Path(job_dir), config)  # a bad OTEL_* setting fails here
            for i, cfg in enumerate(obs.trackers if obs else []):
                tracker = build_tracker(cfg, job_dir=Path(job_dir), job_name=config.name)
                try:
                    run_ids[cfg.type] = tracker.start(run_name=job_id, params=params,
                                                      resume_id=resume.get(cfg.type))
                except Exception as exc:
                    again = (f" (resuming run {resume[cfg.type]})" if cfg.type in resume
                             else "")
                    raise ConfigError(
                        f"tracker {cfg.type} could not start{again}: "
                        f"{type(exc).__name__}: {exc}",
                        where=f"observability.trackers[{i}]",
                        hint="fix its options (uri, dir, mode, project) or remove it; the job "
                             "stops before step 1 rather than train without it",
                    ) from exc
                started.append(tracker)
                sink.log(f"tracker {cfg.type}: run {run_ids[cfg.type]}"
                         + (" (resumed)" if cfg.type in resume else ""))
        except BaseException:
            for tracker in started:
                with contextlib.suppress(Exception):
                    tracker.close()
            if tracing is not None:
                tracing.close()
            raise
        if tracing is not None:
            where = "the job directory (traces/)" if tracing.store else "the OTLP endpoint"
            sink.log(f"tracing on: spans go to {where}; ENABLE_TRAJECTORY=false turns it off")
        samples = obs.sample_trajectories if obs else 0
        tracked = TrackedSink(sink, started, samples=samples,
                              spans=tracing.store if tracing else None,
                              metric_names=obs.metric_names if obs else ("rltune",))
        return cls(tracked, tracing, run_ids, job_id)

    def run_ids(self) -> dict[str, str]:
        """``{tracker: run id}`` to save in checkpoints."""
        return dict(self._run_ids)

    @contextlib.contextmanager
    def step(self, step: int) -> Iterator[None]:
        with step_span(step, self.job_id):
            yield

    def close(self) -> None:
        try:
            self.sink.close()
        finally:
            if self.tracing is not None:
                self.tracing.close()

    def __enter__(self) -> JobObservability:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
