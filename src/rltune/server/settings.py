"""Server settings: where state lives and the limits, from arguments or ``RLTUNE_*`` env vars."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, Field, field_validator

from rltune.config.netguard import ENV_VAR as NETWORKS_ENV
from rltune.config.netguard import AddressPolicy
from rltune.config.s3grants import ENV_VAR as S3_GRANTS_ENV
from rltune.config.s3grants import S3Grants
from rltune.paths import rltune_home, server_home

DEFAULT_PORT = 8600


class ServerSettings(BaseModel):
    """Everything the server needs to start. ``from_env()`` fills unset fields from env vars.

    Example:
        >>> s = ServerSettings(home="/tmp/x")
        >>> str(s.server_dir), s.db_url
        ('/tmp/x/server', 'sqlite:////tmp/x/server/rltune.db')
    """

    home: Path = Field(default_factory=rltune_home)
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    #: SQLAlchemy-style URL; default: SQLite file under ``$RLTUNE_HOME/server``.
    db: Optional[str] = None
    max_concurrent_jobs: int = Field(1, ge=1, le=64)
    #: Largest accepted upload (dataset or archive), bytes.
    max_upload_bytes: int = Field(200 * 2**20, ge=1)
    #: Seconds between scheduler passes.
    poll_interval: float = Field(0.5, gt=0)
    #: Serve several workspaces although function code cannot be sandboxed (no bubblewrap).
    allow_unisolated: bool = False
    #: Run jobs' functions as Ray actors on this cluster (``host:port`` of its head, or
    #: ``auto`` on a node of it); unset: local processes. See docs/ray.md.
    ray_address: Optional[str] = Field(None, min_length=1)
    #: Networks (CIDR, comma-separated) a tenant's ``download_url`` and MLflow ``uri`` may
    #: reach besides public addresses; default none (docs/security.md).
    url_allow_networks: str = ""
    #: ``workspace=bucket[/prefix]`` grants (comma-separated): the only ``s3://`` datasets the
    #: server reads for a workspace, with its own ``AWS_*`` keys; default none.
    s3_workspace_buckets: str = ""
    #: Largest JSON request body (job configs, every JSON route), bytes.
    max_json_bytes: int = Field(2**20, ge=1024)
    #: Live (STARTING or RUNNING) deployments per workspace and on the whole server.
    max_deployments_per_workspace: int = Field(4, ge=0)
    max_deployments: int = Field(8, ge=0)

    @field_validator("url_allow_networks")
    @classmethod
    def _networks(cls, value: str) -> str:
        AddressPolicy.parse(value)  # a bad network is refused at start, naming it
        return value

    @field_validator("s3_workspace_buckets")
    @classmethod
    def _s3_grants(cls, value: str) -> str:
        S3Grants.parse(value)  # a bad grant is refused at start, naming it
        return value

    @property
    def s3_grants(self) -> S3Grants:
        return S3Grants.parse(self.s3_workspace_buckets)

    @property
    def address_policy(self) -> AddressPolicy:
        return AddressPolicy.parse(self.url_allow_networks)

    @property
    def server_dir(self) -> Path:
        return server_home(self.home)

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.server_dir / 'rltune.db'}"

    @property
    def admin_key_path(self) -> Path:
        return self.server_dir / "admin.key"

    @property
    def jobs_dir(self) -> Path:
        return self.server_dir / "jobs"

    @property
    def files_dir(self) -> Path:
        return self.server_dir / "files"

    @classmethod
    def from_env(cls, **given: object) -> ServerSettings:
        env = {
            "host": os.environ.get("RLTUNE_SERVER_HOST"),
            "port": os.environ.get("RLTUNE_SERVER_PORT"),
            "db": os.environ.get("RLTUNE_DB_URL"),
            "max_concurrent_jobs": os.environ.get("RLTUNE_MAX_CONCURRENT_JOBS"),
            "max_upload_bytes": os.environ.get("RLTUNE_MAX_UPLOAD_BYTES"),
            "allow_unisolated": os.environ.get("RLTUNE_ALLOW_UNISOLATED"),
            "ray_address": os.environ.get("RLTUNE_RAY_ADDRESS"),
            "url_allow_networks": os.environ.get(NETWORKS_ENV),
            "s3_workspace_buckets": os.environ.get(S3_GRANTS_ENV),
            "max_json_bytes": os.environ.get("RLTUNE_MAX_JSON_BYTES"),
            "max_deployments_per_workspace":
                os.environ.get("RLTUNE_MAX_DEPLOYMENTS_PER_WORKSPACE"),
            "max_deployments": os.environ.get("RLTUNE_MAX_DEPLOYMENTS"),
        }
        data = {k: v for k, v in env.items() if v}
        data.update({k: v for k, v in given.items() if v is not None})
        return cls.model_validate(data)
