"""rltune's error tree (defined in ``rltune.sdk.errors`` so that user code can use it too)."""

from rltune.sdk.errors import (
    ArchiveError,
    AuthError,
    BuildError,
    ConfigError,
    ConflictError,
    DatasetError,
    DependencyError,
    FunctionCallError,
    NotFoundError,
    OverloadedError,
    RltuneError,
    ServerUnreachableError,
    UserCodeError,
    ValidationError,
)

__all__ = [
    "ArchiveError",
    "AuthError",
    "BuildError",
    "ConfigError",
    "ConflictError",
    "DatasetError",
    "DependencyError",
    "FunctionCallError",
    "NotFoundError",
    "OverloadedError",
    "RltuneError",
    "ServerUnreachableError",
    "UserCodeError",
    "ValidationError",
]
