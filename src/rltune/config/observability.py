"""The job's ``observability:`` block: which experiment trackers receive the run.

Each tracker is a name or a mapping with the options that tracker uses; an option another
tracker uses is refused with the list of what this one accepts (nothing is silently ignored).

Example:
    >>> obs = Observability.model_validate(
    ...     {"trackers": ["tensorboard", {"type": "mlflow", "uri": "file:///tmp/mlruns"}]})
    >>> [t.type for t in obs.trackers], obs.trackers[1].uri
    (['tensorboard', 'mlflow'], 'file:///tmp/mlruns')
    >>> Observability.model_validate({"trackers": [{"type": "tensorboard", "uri": "x"}]})
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for Observability
    ...
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rltune.config._base import StrictModel
from rltune.names import METRIC_VOCABULARIES, TRACKERS, literal

TrackerName = literal(TRACKERS)
MetricVocabulary = literal(METRIC_VOCABULARIES)
TRACKER_NAMES: tuple[str, ...] = TRACKERS

#: The options each tracker reads (besides ``type``).
TRACKER_OPTIONS: dict[str, frozenset[str]] = {
    "tensorboard": frozenset({"dir"}),
    "wandb": frozenset({"project", "entity", "mode", "dir"}),
    "mlflow": frozenset({"uri", "project"}),
    "swanlab": frozenset({"project", "mode", "dir"}),
    "trackio": frozenset({"project"}),
}
_MODES = {"wandb": ("offline", "online"), "swanlab": ("offline", "online", "local")}


class TrackerConfig(StrictModel):
    """One experiment tracker. Unset options take the defaults in docs/observability.md."""

    type: TrackerName
    #: W&B / SwanLab / trackio project, MLflow experiment name (default: the job name).
    project: Optional[str] = None
    #: W&B entity (team or user).
    entity: Optional[str] = None
    #: W&B: offline (default) or online; SwanLab: offline (default), local or online.
    mode: Optional[str] = None
    #: MLflow tracking URI (default: a file store in ``<job dir>/mlruns``).
    uri: Optional[str] = None
    #: Where the tracker writes locally (default: a folder in the job directory).
    dir: Optional[str] = None

    @model_validator(mode="after")
    def _options_of_this_tracker(self) -> TrackerConfig:
        allowed = TRACKER_OPTIONS[self.type]
        for key in ("project", "entity", "mode", "uri", "dir"):
            if getattr(self, key) is not None and key not in allowed:
                raise PydanticCustomError(
                    "tracker_option",
                    "{tracker} does not use '{key}'; its options are: {allowed}",
                    {"tracker": self.type, "key": key,
                     "allowed": ", ".join(sorted(allowed)) or "none"},
                )
        modes = _MODES.get(self.type)
        if self.mode is not None and modes and self.mode not in modes:
            raise PydanticCustomError(
                "tracker_mode", "{tracker} mode '{mode}' is not one of: {modes}",
                {"tracker": self.type, "mode": self.mode, "modes": ", ".join(modes)},
            )
        return self


class Observability(StrictModel):
    """Experiment trackers of the job (the cloud SDK's block is empty; rltune fills it)."""

    trackers: list[TrackerConfig] = Field(default_factory=list)
    #: Sample trajectories sent to each tracker's table per step (0 = none).
    sample_trajectories: int = Field(4, ge=0, le=256)
    #: Whose metric names the trackers get: rltune's always, plus TRL's and verl's when
    #: listed (``[rltune, verl, trl]``; docs/metrics.md has the tables).
    metric_names: list[MetricVocabulary] = Field(default_factory=lambda: ["rltune"])

    @field_validator("metric_names", mode="before")
    @classmethod
    def _one_name_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("trackers", mode="before")
    @classmethod
    def _names_are_trackers(cls, value: Any) -> Any:
        if isinstance(value, (str, dict)):
            value = [value]
        if isinstance(value, list):
            return [{"type": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _once_each(self) -> Observability:
        names = [t.type for t in self.trackers]
        for name in names:
            if names.count(name) > 1:
                raise PydanticCustomError(
                    "tracker_twice", "tracker '{name}' is listed twice; keep one entry",
                    {"name": name},
                )
        return self


def with_trackers(observability: Optional[Observability], names: list[str]) -> Observability:
    """``observability`` plus the trackers named on the command line (``--tracker``).

    A name already configured keeps its options; an unknown name is a ``ConfigError``.
    """
    from rltune.sdk.errors import ConfigError

    base = observability or Observability()
    have = {t.type for t in base.trackers}
    added = []
    for name in names:
        if name not in TRACKER_NAMES:
            raise ConfigError(f"unknown tracker {name!r}", where="--tracker",
                              hint=f"use one of: {', '.join(TRACKER_NAMES)}")
        if name not in have:
            have.add(name)
            added.append(TrackerConfig(type=name))  # type: ignore[arg-type]
    return base.model_copy(update={"trackers": [*base.trackers, *added]})
