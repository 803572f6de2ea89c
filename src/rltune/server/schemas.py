"""The success bodies of the REST API as pydantic models: each route names its own as
``response_model``, so their JSON Schemas type every 2xx answer in the OpenAPI document.

The routes build plain dicts; these models describe them (a field without a default is always
present, ``Optional`` ones may be null). ``tests/server/test_schemathesis.py`` checks real
answers against them. A body that carries a user's data (a trajectory, a job config, a
function's test output) is an open object with its known fields typed.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, Optional, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field

from rltune.doctor.alerts import Alert

T = TypeVar("T")


class Body(BaseModel):
    """Base of every answer model. A route names its model as ``response_model`` and returns a
    plain dict: FastAPI checks the dict against the model, keeps the keys the model does not
    name (``extra="allow"``) and leaves out the ones the dict has not set
    (``rltune.server.openapi.TypedRoute``), so the answer is the dict the route built."""

    model_config = ConfigDict(extra="allow")


class Page(Body, Generic[T]):
    """One page of a list, newest first unless the route says otherwise."""

    items: list[T]
    total: int = Field(description="matching records in all pages")
    page_no: int
    page_size: int


class ErrorDetail(BaseModel):
    code: str = Field(description="machine-readable: not_found, conflict, invalid_input, ...")
    message: str
    where: Optional[str] = None
    hint: Optional[str] = None


class ErrorBody(BaseModel):
    """Every failure (``rltune.server.errors``)."""

    error: ErrorDetail
    status: int


# ---- server and keys
class Health(Body):
    status: Literal["ok"]
    version: str
    pid: int
    function_isolation: str
    function_backend: Literal["local", "ray"]
    jobs_running: int
    jobs_pending: int
    time: float


class WhoAmI(Body):
    key_id: str
    workspace: str
    admin: bool


class KeyView(Body):
    key_id: str
    name: str
    workspace: str
    admin: bool
    created_at: float
    revoked_at: Optional[float]


class NewKey(KeyView):
    api_key: Optional[str] = Field(description="the secret, shown once (null in a replay)")


class KeyList(Body):
    items: list[KeyView]


# ---- files, functions, instances
class FileView(Body):
    file_id: str
    filename: str
    bytes: int
    rows: int
    sha256: str
    purpose: str
    description: Optional[str]
    created_at: float


class FileDeleted(Body):
    file_id: str
    deleted: bool


class FunctionView(Body):
    entity_id: str
    type: str
    name: str
    classpath: str
    archive_sha256: str
    archive_size: int
    files: list[str]
    created_at: float


class FunctionDeleted(Body):
    entity_id: str
    deleted: bool


class InstanceView(Body):
    instance_id: str
    entity_id: str
    type: str
    status: Literal["active", "stopped"]
    trigger_url: Optional[str]
    runtime: dict[str, Any]
    created_at: float


class InstanceTest(Body):
    instance_id: str
    status: str
    seconds: float
    output: dict[str, Any] = Field(description="the function's output, validated by its type")


class InstanceLogs(Body):
    instance_id: str
    logs: list[str]
    offset: int
    next_offset: int
    total: int


class InstanceDeleted(Body):
    instance_id: str
    deleted: bool


# ---- jobs
class JobView(Body):
    job_id: str
    job_name: str
    status: str
    model: str
    algorithm: Optional[str]
    training_type: Optional[str]
    created_at: float
    started_at: Optional[float]
    finished_at: Optional[float]
    progress: Optional[dict[str, Any]] = Field(description="progress.json of the job")
    latest_reward: Optional[float]
    training_file_ids: list[str]
    validation_file_ids: list[str]
    resume_from: Optional[str]
    error: Optional[str]
    published_model: Optional[str]
    publish_error: Optional[str]
    copied_from: Optional[str] = Field(None, description="the job this one was copied from")
    stop_requested_at: Optional[float] = Field(None, description="when a stop was asked for")
    project: Optional[str] = None
    tags: dict[str, str] = Field(default_factory=dict)


class JobSubmitted(JobView):
    """A submitted job (``POST /v1/jobs``, ``/v1/jobs/{id}/copy``)."""

    warnings: list[str] = Field(
        default_factory=list,
        description="the seed's hyper-parameter anti-patterns in the job (an SFT learning "
        "rate, n_rollouts 1, ...), each naming the key and a fix: the job runs anyway, and "
        "its train.log starts with them; [] when there are none")


class JobDetail(JobView):
    config: dict[str, Any] = Field(description="the job config, secrets masked")
    config_yaml: str
    checkpoints: int
    exit_code: Optional[int]


class HyperParameterField(Body):
    name: str
    type: str = Field(description="a JSON Schema type, or choice (see choices)")
    default: Any
    choices: Optional[list[Any]]
    minimum: Optional[float]
    maximum: Optional[float]
    nullable: bool
    description: str


class HyperParameterFields(Body):
    items: list[HyperParameterField]


class JobDeleted(Body):
    job_id: str
    deleted: bool


class JobLogs(Body):
    job_id: str
    logs: list[str]
    offset: int
    next_offset: int
    status: str
    finished: bool


class JobMetrics(Body):
    job_id: str
    names: list[str]
    series: dict[str, list[list[Union[int, float, None]]]] = Field(
        description="{name: [[step, value], ...]}: pairs, the step an integer; a NaN/inf "
                    "value is null")


class JobAlerts(Body):
    job_id: str
    alerts: list[Alert]


class StepCount(Body):
    step: int
    count: int


class TrajectorySteps(Body):
    job_id: str
    steps: list[StepCount]


class Trajectory(Body):
    """One rollout's record (``trajectories/step_<n>.jsonl``); more fields than these."""

    rollout_id: Optional[str] = None
    sample_index: Optional[int] = None
    status: Optional[str] = None
    reward: Optional[float] = None


class TrajectoryPage(Page[Trajectory]):
    job_id: str
    step: int


class TrajectoryGroup(Body):
    sample_index: int
    rewards: list[Optional[float]]
    trajectories: list[Trajectory]


class TrajectoryGroups(Body):
    job_id: str
    step: int
    groups: list[TrajectoryGroup]


class Checkpoint(Body):
    name: str
    step: int
    path: str
    validation_reward: Optional[float]
    created_at: float


class JobCheckpoints(Body):
    job_id: str
    checkpoints: list[Checkpoint]


# ---- models, deployments, evaluations
class ModelView(Body):
    name: str
    status: str
    source_job: Optional[str]
    checkpoint: Optional[str]
    step: Optional[int]
    validation_reward: Optional[float]
    base_model: Optional[str]
    kind: Optional[Literal["lora", "full"]]
    lora_rank: Optional[int]
    algorithm: Optional[str]
    has_adapter: Optional[bool]
    description: Optional[str]
    created_at: Optional[float]
    auto: Optional[bool]


class ModelFile(Body):
    path: str
    bytes: int


class ModelDetail(ModelView):
    files: list[ModelFile]


class ModelDeleted(Body):
    name: str
    deleted: bool


class ModelPushed(Body):
    name: str
    repo_id: str
    part: Literal["merged", "adapter"]
    commit_url: str


class DeploymentKey(Body):
    key_id: str
    created_at: float


class NewDeploymentKey(DeploymentKey):
    api_key: str = Field(description="the secret, shown once")


class DeploymentView(Body):
    deployment_id: str
    name: Optional[str]
    status: str
    models: list[str]
    engine: Optional[str]
    base_url: Optional[str]
    keys: list[DeploymentKey]
    created_at: float
    started_at: Optional[float]
    stopped_at: Optional[float]
    error: Optional[str]


class NewDeployment(DeploymentView):
    api_key: str = Field(description="the secret, shown once")


class DeploymentDeleted(Body):
    deployment_id: str
    deleted: bool


class DeploymentLogs(Body):
    deployment_id: str
    logs: list[str]


class DeploymentKeyRevoked(Body):
    key_id: str
    revoked: bool


class ChatCompletion(Body):
    """The deployment's OpenAI chat completion, relayed as it answered."""

    id: Optional[str] = None
    object: Optional[str] = None
    model: Optional[str] = None
    choices: Optional[list[dict[str, Any]]] = None
    usage: Optional[dict[str, Any]] = None


class EvaluationView(Body):
    evaluation_id: str
    status: str
    job_id: str
    models: list[str]
    dataset: Optional[str]
    n: int
    k: int
    threshold: Optional[float]
    created_at: float
    finished_at: Optional[float]
    summary: Optional[dict[str, dict[str, Optional[float]]]] = Field(
        description="{model: {mean@1, pass@k}}")
    error: Optional[str]
    result: Optional[dict[str, Any]] = Field(None, description="result.json, once finished")


class EvaluationDetail(EvaluationView):
    logs: list[str]


class EvaluationDeleted(Body):
    evaluation_id: str
    deleted: bool
