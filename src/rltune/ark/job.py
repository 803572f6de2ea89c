"""Ark's Python job objects (``job.py``): ``ModelCustomizationJob`` and its parts.

``to_dict()`` gives Ark's YAML shape (plugins as ``python_func: module:function``),
``to_job_config()`` the rltune ``JobConfig`` (through :mod:`rltune.config.compat.ark_job`), and
``submit()`` runs the job with ``rltune train`` in a child process (this cloud adapter does not
import the trainer); ``url`` is then the job's output folder.

Example:
    >>> job = ModelCustomizationJob(
    ...     name="demo", customization_type=CustomizationType.GRPO,
    ...     model_reference=ModelReference(
    ...         foundation_model=FoundationModelReference(name="nano")),
    ...     hyperparameters={"batch_size": "2", "num_generations": "4"},
    ...     data=Data(training_set=TrainingDataset(local_files=["data/train.jsonl"])))
    >>> job.to_dict()["model_reference"], job.to_dict()["hyperparameters"]["num_generations"]
    ({'foundation_model': {'name': 'nano'}}, '4')
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from rltune.config.yaml_io import dump_yaml


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class CustomizationType(str, Enum):
    GRPO = "GRPO"
    GRPOLoRA = "GRPOLoRA"
    PPO = "PPO"
    FinetuneSft = "FinetuneSft"
    FinetuneLoRA = "FinetuneLoRA"
    DPO = "DPO"
    DPOLoRA = "DPOLoRA"


class Tag(_Model):
    key: str
    value: str


class FoundationModelReference(_Model):
    name: str
    model_version: Optional[str] = None


class ModelReference(_Model):
    foundation_model: Optional[FoundationModelReference] = None
    custom_model_id: Optional[str] = None


class TrainingDataset(_Model):
    local_files: list[str] = Field(default_factory=list)
    tos_bucket: Optional[str] = None
    tos_paths: Optional[list[str]] = None
    datasets: Optional[list[dict[str, Any]]] = None
    preset_dataset: Optional[dict[str, Any]] = None


class ValidationDataset(TrainingDataset):
    pass


class Data(_Model):
    training_set: TrainingDataset
    validation_set: Optional[ValidationDataset] = None
    validation_percentage: Optional[float] = None


class PipelinePluginWrapper(_Model):
    """A plugin of the pipeline: the decorated function, its env vars and (graders) weight."""

    plugin: Union[Callable[..., Any], dict[str, Any]]
    envs: Optional[dict[str, str]] = None
    weight: Optional[float] = None

    def to_dict(self) -> dict[str, Any]:
        if isinstance(self.plugin, dict):
            plugin = dict(self.plugin)
        else:
            from rltune.ark.plugins import plugin_spec

            spec = plugin_spec(self.plugin)
            plugin = {"name": spec.name,
                      "python_func": f"{spec.func.__module__}:{spec.func.__name__}"}
        if self.envs:
            plugin["envs"] = dict(self.envs)
        out: dict[str, Any] = {"plugin": plugin}
        if self.weight is not None:
            out["weight"] = self.weight
        return out


class GRPOPipeline(_Model):
    graders: list[PipelinePluginWrapper]
    rollout: Optional[PipelinePluginWrapper] = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"graders": [g.to_dict() for g in self.graders]}
        if self.rollout is not None:
            out["rollout"] = self.rollout.to_dict()
        if type(self) is not GRPOPipeline:
            out["type"] = type(self).__name__
        return out


class PPOPipeline(GRPOPipeline):
    """Ark's PPO pipeline; rltune has no critic model, so a job with it is refused."""


class ModelCustomizationJob(_Model):
    name: Optional[str] = None
    model_reference: Union[ModelReference, dict[str, Any]]
    customization_type: CustomizationType = CustomizationType.GRPO
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    data: Data
    custom_rl_pipeline: Optional[GRPOPipeline] = None
    tags: Optional[list[Tag]] = None
    project: Optional[str] = None
    enable_trajectory: Optional[bool] = None
    save_model_limit: Optional[int] = None
    url: Optional[str] = Field(None, exclude=True)

    def to_dict(self) -> dict[str, Any]:
        """Ark's job.yaml shape."""
        out = self.model_dump(mode="json", exclude_none=True,
                              exclude={"custom_rl_pipeline", "url"})
        if self.custom_rl_pipeline is not None:
            out["custom_rl_pipeline"] = self.custom_rl_pipeline.to_dict()
        return out

    def to_yaml(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_text(dump_yaml(self.to_dict()), encoding="utf-8")
        return p

    def to_job_config(self, root: str | Path = ".") -> Any:
        """The rltune ``JobConfig`` (plugins are found under ``root``)."""
        from rltune.config.compat.ark_job import ark_job_to_config
        from rltune.config.job import JobConfig

        return JobConfig.load_from_dict(ark_job_to_config(self.to_dict(), root=Path(root)))

    def submit(self, debug: bool = False, root: str | Path = ".") -> dict[str, Any]:
        """Train the job as ``rltune train`` does, in a child process whose output shows here;
        sets ``url`` to the job's folder and returns the training summary.

        ``debug`` has no rltune counterpart and must stay False.
        """
        from rltune.sdk.errors import ConfigError

        if debug:
            raise ConfigError("submit(debug=True) has no counterpart in rltune",
                              where="ModelCustomizationJob.submit",
                              hint="call submit(); test plugins with rltune test-functions")
        base = Path(root).resolve()
        self.to_job_config(base)  # a refused key fails here, before anything starts
        job_dir = base / "runs" / f"ft-{secrets.token_hex(6)}"
        self.url = str(job_dir)
        return _train(_anchored(self.to_dict(), base), job_dir)


def _anchored(ark_job: dict[str, Any], base: Path) -> dict[str, Any]:
    """The rltune job dict of ``ark_job`` with its data and plugins found under ``base``
    wherever the job file is written."""
    from rltune.config.compat.ark_job import ark_job_to_config

    data = ark_job_to_config(ark_job, root=base)
    data["workspace_dir"] = str(base)
    for fn in data["functions"]:
        fn["fcmodel"]["zipdir"] = str(base)
    return data


def _train(data: dict[str, Any], job_dir: Path) -> dict[str, Any]:
    """Run ``rltune train -q`` on ``data`` in ``job_dir`` (a child process: the adapter does not
    import the trainer); its output is shown as it comes, its summary returned."""
    from rltune.sdk.errors import RltuneError

    job_dir.mkdir(parents=True, exist_ok=True)
    config = job_dir / "job.yaml"
    config.write_text(dump_yaml(data), encoding="utf-8")
    cmd = [sys.executable, "-m", "rltune.cli.main", "train", "-c", str(config),
           "-O", str(job_dir), "-q"]
    lines: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            lines.append(line.rstrip("\n"))
    if proc.returncode != 0:
        raise RltuneError(f"the job failed: rltune train exited with {proc.returncode}",
                          where=str(job_dir), hint="its error is printed above; the job's "
                          "log is in that folder")
    start = lines.index("{") if "{" in lines else len(lines)
    end = lines.index("}", start) if "}" in lines[start:] else start - 1
    return json.loads("\n".join(lines[start:end + 1])) if end >= start else {}


__all__ = [
    "CustomizationType",
    "Data",
    "FoundationModelReference",
    "GRPOPipeline",
    "ModelCustomizationJob",
    "ModelReference",
    "PPOPipeline",
    "PipelinePluginWrapper",
    "Tag",
    "TrainingDataset",
    "ValidationDataset",
]
