"""The function component spec: what to run (classpath, workspace, type) and how (runtime knobs).

``FunctionComponentRuntime`` keeps the cloud SDK's field names so a job YAML
written for the cloud validates here. Every field is optional; ``resolve()`` fills rltune's
local defaults, which are sized for one machine rather than a cloud account.

Example:
    >>> spec = FunctionComponentSpec(classpath="reward.py:Exact", func_type="reward",
    ...                              runtime={"concurrency": 8, "max_capacity": 4})
    >>> r = spec.resolved_runtime()
    >>> (r.concurrency, r.capacity, r.min_capacity, r.max_capacity)
    (8, 1, 1, 4)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rltune.config.components import FunctionComponentRuntime as _ConfigRuntime
from rltune.sdk.data import FunctionType
from rltune.sdk.errors import ConfigError

#: rltune's local defaults (the cloud's platform defaults are far larger: capacity 10, …).
LOCAL_DEFAULTS: dict[str, Any] = {
    "cpu": 1.0,  # threads a worker's numeric libraries may use
    "memory_size": 4096,  # MB of RSS before the worker is killed and replaced
    "disk_size": 1024,  # MB a sandboxed worker may write under /worker (its HOME)
    "concurrency": 16,  # requests in flight per worker
    "capacity": 1,  # workers at start
    "min_capacity": 1,
    "max_capacity": 4,
    "concurrency_scale_threshold": 0.8,
    "memory_scale_threshold": 0.9,
    "env": {},
}


MAX_PROCESSES_ENV, DEFAULT_MAX_PROCESSES = "RLTUNE_WORKER_MAX_PROCESSES", 128


def max_processes() -> int:
    """The operator's process limit per worker (``RLTUNE_WORKER_MAX_PROCESSES``, default 128;
    0 turns it off), checked."""
    import os

    raw = os.environ.get(MAX_PROCESSES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_PROCESSES
    if not raw.isdigit():
        raise ConfigError(f"{MAX_PROCESSES_ENV}={raw!r} is not a whole number",
                          where=MAX_PROCESSES_ENV,
                          hint=f"unset it for the default ({DEFAULT_MAX_PROCESSES}), 0 for none")
    return int(raw)


class FunctionComponentRuntime(_ConfigRuntime):
    """Runtime knobs of one function component (cloud names; all optional), plus ``resolve()``.

    The fields are those of ``rltune.config.FunctionComponentRuntime`` (the job config's model);
    this subclass adds rltune's local defaults. When a field is None: ``cpu`` 1,
    ``memory_size`` 4096 MB, ``concurrency`` 16, ``capacity`` 1, ``min_capacity`` 1,
    ``max_capacity`` 4, ``concurrency_scale_threshold`` 0.8, ``memory_scale_threshold`` 0.9,
    ``disk_size`` 1024 MB (the size of a sandboxed worker's ``/worker``), ``env`` {}.
    ``layer_code`` and the VPC fields are accepted for compatibility and ignored locally.
    """

    def resolve(self) -> FunctionComponentRuntime:
        """A copy with every None knob replaced by the local default, checked for consistency."""
        data = self.model_dump()
        for key, default in LOCAL_DEFAULTS.items():
            if data.get(key) is None:
                data[key] = default
        # Defaults bend around what the user did set: min_capacity 6 alone means max 6 too.
        given = [v for v in (self.min_capacity, self.capacity) if v is not None]
        if self.max_capacity is None and given:
            data["max_capacity"] = max(data["max_capacity"], *given)
        if self.min_capacity is None:
            data["min_capacity"] = min(data["min_capacity"], data["max_capacity"],
                                       *([self.capacity] if self.capacity is not None else []))
        lo, hi = data["min_capacity"], data["max_capacity"]
        if self.capacity is None:
            data["capacity"] = max(lo, min(data["capacity"], hi))
        if lo > hi:
            raise ConfigError(
                f"min_capacity {lo} > max_capacity {hi}",
                where="runtime.min_capacity",
                hint="make min_capacity <= max_capacity",
            )
        if not lo <= data["capacity"] <= hi:
            raise ConfigError(
                f"capacity {data['capacity']} is outside [min_capacity {lo}, max_capacity {hi}]",
                where="runtime.capacity",
                hint="set capacity between min_capacity and max_capacity",
            )
        return FunctionComponentRuntime.model_validate(data)


class FunctionComponentSpec(BaseModel):
    """One function component the pool runs: processor, workspace, type, runtime, call policy.

    ``timeout`` (seconds) bounds each call (None = no bound); ``max_retries`` bounds how often a
    call is retried on another worker after its worker crashed or was killed.
    """

    model_config = ConfigDict(extra="forbid")

    classpath: str
    func_type: FunctionType = FunctionType.ROLLOUT
    workspace: Path = Field(default_factory=Path.cwd)
    name: Optional[str] = None
    timeout: Optional[float] = Field(None, gt=0)
    runtime: FunctionComponentRuntime = Field(default_factory=FunctionComponentRuntime)
    max_retries: int = Field(2, ge=0, le=10)
    queue_size: int = Field(100, ge=0, description="per-worker requests waiting beyond concurrency")
    scale_in_cooldown: float = Field(30.0, ge=0, description="idle seconds before a worker stops")
    start_timeout: float = Field(60.0, gt=0, description="seconds a worker may take to start")
    python: Optional[str] = Field(None, description="interpreter for workers (a built venv)")
    build_venv: Union[bool, Literal["auto"]] = Field(
        False, description="build (cached by hash) a venv for the workspace's requirements.txt; "
        "'auto': only when a line is not satisfied by this environment (what jobs use)")
    hang_timeout: float = Field(
        30.0, gt=0, description="a busy worker whose /health does not answer this long is hung")
    health_interval: float = Field(5.0, gt=0, description="seconds between /health probes")

    @field_validator("runtime", mode="before")
    @classmethod
    def _any_runtime(cls, value: Any) -> Any:
        # Accept the job config's runtime model (same fields) as well as a dict.
        if isinstance(value, BaseModel) and not isinstance(value, FunctionComponentRuntime):
            return value.model_dump(exclude_none=True)
        return value

    @model_validator(mode="after")
    def _check(self) -> FunctionComponentSpec:
        self.workspace = Path(self.workspace).expanduser().resolve()
        if not self.workspace.is_dir():
            raise ConfigError(
                f"workspace {self.workspace} is not a directory",
                where="workspace",
                hint="point workspace at the folder that holds your functions",
            )
        return self

    def resolved_runtime(self) -> FunctionComponentRuntime:
        """The runtime with local defaults filled in."""
        return self.runtime.resolve()

    @property
    def display_name(self) -> str:
        return self.name or f"{self.func_type.value}:{self.classpath}"
