"""Dataset references of a job and the enums of the cloud SDK's job config.

Example:
    >>> from rltune.config import TrainingDataset
    >>> TrainingDataset(file_name="data/train.jsonl").type.value
    'training'
"""

from __future__ import annotations

from enum import Enum
from typing import Literal, Optional

from pydantic import model_validator

from rltune.config._base import StrictModel


class DataSourceType(str, Enum):
    FILE_ID = "file_id"
    DOWNLOAD_URL = "download_url"
    OSS_MOUNT = "oss_mount"


class DatasetsType(str, Enum):
    TRAINING = "training"
    TESTING = "testing"
    VALIDATION = "validation"


class TrainingType(str, Enum):
    TRAINING_TYPE = "reinforcement"
    PG_OPD = "pg_opd"


class MountStorage(StrictModel):
    region: Optional[str] = None
    bucket: Optional[str] = None
    file_path: Optional[str] = None


class Dataset(StrictModel):
    """A dataset: a local ``file_name`` (JSONL, JSON, parquet or a folder saved by
    ``datasets``; rltune's, TRL's or verl's rows), an uploaded ``file_id`` or a
    ``download_url``."""

    type: DatasetsType = DatasetsType.TRAINING
    data_source_type: DataSourceType = DataSourceType.FILE_ID
    file_name: Optional[str] = None
    file_id: Optional[str] = None
    download_url: Optional[str] = None
    mount_storage: Optional[MountStorage] = None

    @model_validator(mode="after")
    def _has_source(self) -> Dataset:
        src = self.data_source_type
        if src is DataSourceType.FILE_ID and not (self.file_name or self.file_id):
            raise ValueError(
                "dataset has neither file_name nor file_id; set file_name: path/to/data.jsonl"
            )
        if src is DataSourceType.DOWNLOAD_URL and not self.download_url:
            raise ValueError(
                "data_source_type is download_url but download_url is empty; set download_url"
            )
        if src is DataSourceType.OSS_MOUNT and not self.mount_storage:
            raise ValueError(
                "data_source_type is oss_mount but mount_storage is empty; set mount_storage"
            )
        return self


class TrainingDataset(Dataset):
    type: Literal[DatasetsType.TRAINING] = DatasetsType.TRAINING


class ValidationDataset(Dataset):
    type: Literal[DatasetsType.VALIDATION] = DatasetsType.VALIDATION
