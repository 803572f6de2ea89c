"""Function components of a job: where the code is (``fcmodel``), how it runs (``runtime``),
and, for rewards, how much its score counts (``weight``, ``reward_metric_weight``).

Names and fields match the cloud SDK's classes so cloud job code works with an import change.
In YAML / dicts the ``type`` key picks the class: ``rollout`` | ``reward`` | ``group_reward``.

Example:
    >>> from rltune.config import RewardFunctionComponent
    >>> r = RewardFunctionComponent.model_validate(
    ...     {"name": "exact", "weight": "0.5", "fcmodel": {"classpath": "reward.py:Exact"}})
    >>> r.weight, r.fcmodel.filepath, r.fcmodel.classname
    (0.5, 'reward.py', 'Exact')
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from rltune.config._base import StrictModel
from rltune.sdk.data import FunctionType


class FunctionComponentModel(StrictModel):
    """Where a function's code lives: a workspace folder and a classpath inside it."""

    zipdir: str = "./"
    classpath: Optional[str] = ""
    filepath: str = ""
    classname: str = ""
    requirements_path: Optional[str] = "./requirements.txt"
    extra_files: Optional[list[str]] = Field(default_factory=list)
    oss_id: Optional[str] = None
    oss_signed_url: Optional[str] = None

    @model_validator(mode="before")
    @classmethod
    def _split_classpath(cls, data: Any) -> Any:
        # Same split as the cloud SDK: "a/b.py:Class" or "pkg.mod.Class" → file part + class.
        if not isinstance(data, dict):
            return data
        cp = str(data.get("classpath") or "").strip()
        if cp and not data.get("classname"):
            if ":" in cp:
                file_part, name = cp.rsplit(":", 1)
            elif "." in cp:
                file_part, name = cp.rsplit(".", 1)
            else:
                raise ValueError(
                    f"classpath '{cp}' has no class part; write 'pkg.module.Class', "
                    "'pkg.module:Class' or 'path/to/file.py:Class'"
                )
            data = {**data, "filepath": file_part, "classname": name}
        return data


class FunctionComponentRuntime(StrictModel):
    """How a function's workers run (the canonical runtime model; the function pool uses it).

    Every field defaults to None = "the backend's default", as in the cloud SDK. Local
    backends read ``concurrency``, ``capacity``, ``min_capacity``, ``max_capacity``,
    ``memory_size`` (MB limit per worker), ``disk_size`` (MB a sandboxed worker may write under
    its ``/worker``), ``cpu`` and ``env``; VPC fields are accepted for
    compatibility and ignored locally.
    """

    layer_code: Optional[str] = None
    cpu: Optional[float] = Field(None, gt=0, le=1024)
    memory_size: Optional[int] = Field(None, ge=1, description="MB")
    disk_size: Optional[int] = Field(None, ge=1, description="MB")
    concurrency: Optional[int] = Field(None, ge=1, le=100000)
    capacity: Optional[int] = Field(None, ge=0, le=100000)
    max_capacity: Optional[int] = Field(None, ge=1, le=100000)
    min_capacity: Optional[int] = Field(None, ge=0, le=100000)
    memory_scale_threshold: Optional[float] = Field(None, ge=0, le=1)
    concurrency_scale_threshold: Optional[float] = Field(None, ge=0, le=1)
    enable_vpc_config: Optional[bool] = None
    security_group_id: Optional[str] = None
    switch_ids: Optional[list[str]] = None
    vpc_id: Optional[str] = None
    vpc_role: Optional[str] = None
    enable_log: Optional[bool] = None
    env: Optional[dict[str, Any]] = None

    @model_validator(mode="after")
    def _capacities(self) -> FunctionComponentRuntime:
        lo, hi = self.min_capacity, self.max_capacity
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(
                f"min_capacity ({lo}) is larger than max_capacity ({hi}); "
                "set min_capacity <= max_capacity"
            )
        return self

    def env_strings(self) -> dict[str, str]:
        """``env`` as process environment strings (booleans as ``"true"``/``"false"``)."""
        out: dict[str, str] = {}
        for key, value in (self.env or {}).items():
            out[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


class AgenticRLFunctionComponent(StrictModel):
    """A user function of a job. Use the typed subclasses for rewards (they carry weights)."""

    type: FunctionType = FunctionType.ROLLOUT
    name: Optional[str] = Field(None, min_length=1, max_length=128)
    timeout: Optional[int] = Field(None, ge=1, le=86400, description="seconds per call")
    fcmodel: Optional[FunctionComponentModel] = Field(default_factory=FunctionComponentModel)
    runtime: Optional[FunctionComponentRuntime] = None
    entity_id: Optional[str] = None
    instance_id: Optional[str] = None
    instance_url: Optional[str] = None
    instance_token: Optional[str] = None
    instance_status: Optional[int] = -1
    #: How much a reward's score counts (rewards only; the cloud docs pass it to this class).
    weight: Optional[float] = Field(None, ge=-1e6, le=1e6)
    reward_metric_weight: Optional[dict[str, float]] = None

    @field_validator("reward_metric_weight", mode="before")
    @classmethod
    def _metric_weights(cls, value: Any) -> Any:
        if isinstance(value, dict):
            out = {}
            for key, w in value.items():
                if isinstance(w, bool):
                    raise ValueError(
                        f"weight of metric '{key}' must be a number, not {w}; write e.g. 0.5"
                    )
                try:
                    out[key] = float(w)
                except (TypeError, ValueError):
                    raise ValueError(
                        f"weight of metric '{key}' must be a number, got {w!r}; write e.g. 0.5"
                    ) from None
            return out
        return value

    @model_validator(mode="after")
    def _rollout_has_no_weight(self) -> AgenticRLFunctionComponent:
        # A rollout's score is not combined with anything: a weight there would be ignored.
        if self.type is FunctionType.ROLLOUT:
            if self.weight not in (None, 1.0):
                raise ValueError(
                    f"a rollout function has no weight (got {self.weight}); only reward and "
                    "group_reward functions are weighted: remove 'weight' or set it to 1"
                )
            if self.reward_metric_weight:
                raise ValueError(
                    "a rollout function has no reward_metric_weight; set it on the reward "
                    "function whose metrics it weighs"
                )
        return self


class RolloutFunctionComponent(AgenticRLFunctionComponent):
    """The rollout (agent) function (``weight`` may only be unset or 1)."""

    type: Literal[FunctionType.ROLLOUT] = FunctionType.ROLLOUT


class _WeightedComponent(AgenticRLFunctionComponent):
    pass


class RewardFunctionComponent(_WeightedComponent):
    """A reward scoring one trajectory; its score counts ``weight`` times."""

    type: Literal[FunctionType.REWARD] = FunctionType.REWARD


class GroupRewardFunctionComponent(_WeightedComponent):
    """A group reward scoring the n trajectories of one prompt together."""

    type: Literal[FunctionType.GROUP_REWARD] = FunctionType.GROUP_REWARD


def _component_tag(value: Any) -> str:
    raw = value.get("type", "rollout") if isinstance(value, dict) else getattr(value, "type", None)
    return raw.value if isinstance(raw, FunctionType) else str(raw or "rollout")


#: One entry of ``functions``; the ``type`` key selects the class (default rollout).
FunctionComponent = Annotated[
    Union[
        Annotated[RolloutFunctionComponent, Tag("rollout")],
        Annotated[RewardFunctionComponent, Tag("reward")],
        Annotated[GroupRewardFunctionComponent, Tag("group_reward")],
    ],
    Discriminator(
        _component_tag,
        custom_error_type="invalid_function_type",
        custom_error_message="function 'type' must be one of rollout, reward, group_reward",
    ),
]


def as_typed_component(comp: Any) -> Any:
    """A component as its typed class (a plain ``AgenticRLFunctionComponent(type=REWARD, ...)``
    becomes a ``RewardFunctionComponent``); dicts are validated the same way."""
    from pydantic import TypeAdapter

    if isinstance(comp, (RolloutFunctionComponent, RewardFunctionComponent,
                         GroupRewardFunctionComponent)):
        return comp
    if isinstance(comp, AgenticRLFunctionComponent):
        comp = comp.model_dump(exclude_unset=True) | {"type": comp.type}
    return TypeAdapter(FunctionComponent).validate_python(comp)


class FunctionBackend(StrictModel):
    """Where a job's function instances run (rltune's own key; ``function_backend: ray`` is
    short for ``{type: ray}``).

    ``local`` (default): worker processes on this machine. ``ray``: one Ray actor per instance
    on the cluster at ``address`` (``host:port`` of the head's GCS, or ``auto`` on a node of
    the cluster); unset, ``RAY_ADDRESS`` gives it. Needs the ``ray`` extra.
    """

    type: Literal["local", "ray"] = "local"
    address: Optional[str] = Field(None, min_length=1)
    #: ray only: the address the policy gateway binds and gives rollouts, reachable from
    #: every node. Unset: this machine's address in the Ray cluster (local: 127.0.0.1).
    gateway_host: Optional[str] = Field(None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _address_needs_ray(self) -> FunctionBackend:
        for key in ("address", "gateway_host"):
            value = getattr(self, key)
            if value and self.type != "ray":
                raise ValueError(
                    f"function_backend.{key} ({value}) only applies to type ray; "
                    f"set type: ray, or remove {key}"
                )
        return self
