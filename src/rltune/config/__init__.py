"""rltune.config: the job configuration (pydantic, no torch) — one schema behind YAML, the SDK,
the CLI and REST — plus dataset loading.

Example:
    >>> from rltune.config import JobConfig
    >>> JobConfig(model={"name": "nano"}).hyper_parameters.algorithm
    'gspo'
"""

from rltune.config.algorithm import PRESETS, AlgorithmKnobs, resolve_algorithm
from rltune.config.components import (
    AgenticRLFunctionComponent,
    FunctionBackend,
    FunctionComponent,
    FunctionComponentModel,
    FunctionComponentRuntime,
    GroupRewardFunctionComponent,
    RewardFunctionComponent,
    RolloutFunctionComponent,
)
from rltune.config.data import DataRow, EpochSampler, fill_ground_truth, load_dataset
from rltune.config.datasets import (
    Dataset,
    DatasetsType,
    DataSourceType,
    MountStorage,
    TrainingDataset,
    TrainingType,
    ValidationDataset,
)
from rltune.config.hyperparams import HyperParameters
from rltune.config.job import (
    FoundationModel,
    JobConfig,
    Observability,
    Training,
    TuningModel,
    load_job_config,
    load_job_config_text,
    validate_hyper_parameters,
)
from rltune.sdk.data import FunctionType

__all__ = [
    "PRESETS",
    "AgenticRLFunctionComponent",
    "AlgorithmKnobs",
    "DataRow",
    "DataSourceType",
    "Dataset",
    "DatasetsType",
    "EpochSampler",
    "FoundationModel",
    "FunctionBackend",
    "FunctionComponent",
    "FunctionComponentModel",
    "FunctionComponentRuntime",
    "FunctionType",
    "GroupRewardFunctionComponent",
    "HyperParameters",
    "JobConfig",
    "MountStorage",
    "Observability",
    "RewardFunctionComponent",
    "RolloutFunctionComponent",
    "Training",
    "TrainingDataset",
    "TrainingType",
    "TuningModel",
    "ValidationDataset",
    "fill_ground_truth",
    "load_dataset",
    "load_job_config",
    "load_job_config_text",
    "resolve_algorithm",
    "validate_hyper_parameters",
]
