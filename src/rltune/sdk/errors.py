"""The error tree of rltune. Each class carries the HTTP status the server maps it to.

Every message says what was wrong, where, and how to fix it.

Example:
    >>> from rltune.sdk.errors import ConfigError
    >>> err = ConfigError("batch_size must be >= 1", where="job.yaml:3", hint="set batch_size: 8")
    >>> str(err)
    'job.yaml:3: batch_size must be >= 1 (fix: set batch_size: 8)'
    >>> err.http_status
    422
"""

from __future__ import annotations


class RltuneError(Exception):
    """Base of every error rltune raises on purpose."""

    http_status = 500
    code = "internal_error"

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        self.message = message
        self.where = where
        self.hint = hint
        super().__init__(self.__str__())

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        return f"{text} (fix: {self.hint})" if self.hint else text

    def to_dict(self) -> dict[str, str | None]:
        return {"code": self.code, "message": self.message, "where": self.where, "hint": self.hint}


class ValidationError(RltuneError):
    """Input (config, dataset, request body) breaks a rule."""

    http_status = 422
    code = "invalid_input"


class ConfigError(ValidationError):
    code = "invalid_config"


class DatasetError(ValidationError):
    code = "invalid_dataset"


class ArchiveError(ValidationError):
    """A workspace archive is unsafe or too large."""

    http_status = 400
    code = "invalid_archive"


class AuthError(RltuneError):
    http_status = 401
    code = "unauthorized"


class NotFoundError(RltuneError):
    http_status = 404
    code = "not_found"


class ConflictError(RltuneError):
    """The resource's state forbids the operation (e.g. cancelling a finished job)."""

    http_status = 409
    code = "conflict"


class UserCodeError(RltuneError):
    """The user's processor could not be loaded or failed in ``setup()``."""

    http_status = 400
    code = "user_code_error"


class FunctionCallError(RltuneError):
    """A call to a user function failed after its retries."""

    http_status = 502
    code = "function_call_failed"


class OverloadedError(RltuneError):
    http_status = 503
    code = "overloaded"


class DependencyError(RltuneError):
    """An installed package (e.g. transformers) does not behave as rltune needs."""

    http_status = 500
    code = "unsupported_dependency"


class TrainingFailedError(RltuneError):
    """A job ran but could not train: too many of its steps had no successful rollout."""

    http_status = 500
    code = "training_failed"


class BuildError(RltuneError):
    """A model build (the demo models' warm start) missed its target; ``metrics`` says how."""

    http_status = 500
    code = "build_failed"

    def __init__(self, message: str, *, metrics: dict | None = None, **kw: str | None):
        self.metrics = metrics or {}
        super().__init__(message, **kw)
