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

from typing import Any


class RltuneError(Exception):
    """Base of every error rltune raises on purpose."""

    http_status = 500
    code = "internal_error"

    def __init_subclass__(cls, *, status: int | None = None, code: str | None = None,
                          **kwargs: object) -> None:
        # ``class AuthError(RltuneError, status=401, code="unauthorized")``: one line a class.
        super().__init_subclass__(**kwargs)
        if status is not None:
            cls.http_status = status
        if code is not None:
            cls.code = code

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


class ValidationError(RltuneError, status=422, code="invalid_input"):
    """Input (config, dataset, request body) breaks a rule."""


class ConfigError(ValidationError, code="invalid_config"):
    """A job config, a command-line option or a request setting breaks a rule."""


class DatasetError(ValidationError, code="invalid_dataset"):
    """A dataset file or its rows break a rule."""


class ArchiveError(ValidationError, status=400, code="invalid_archive"):
    """A workspace archive is unsafe or too large."""


class AuthError(RltuneError, status=401, code="unauthorized"):
    """A request without a valid key."""


class NotFoundError(RltuneError, status=404, code="not_found"):
    """No such resource (in this workspace)."""


class ConflictError(RltuneError, status=409, code="conflict"):
    """The resource's state forbids the operation (e.g. cancelling a finished job)."""


class UserCodeError(RltuneError, status=400, code="user_code_error"):
    """The user's processor could not be loaded or failed in ``setup()``."""


class FunctionCallError(RltuneError, status=502, code="function_call_failed"):
    """A call to a user function failed after its retries."""


class OverloadedError(RltuneError, status=503, code="overloaded"):
    """The server or a function pool has no room for the request now."""


class DependencyError(RltuneError, status=500, code="unsupported_dependency"):
    """An installed package (e.g. transformers) does not behave as rltune needs."""


class ServerUnreachableError(RltuneError, status=503, code="server_unreachable"):
    """No rltune server answers at the address a client uses (``rltune`` exits 4)."""


class TrainingFailedError(RltuneError, status=500, code="training_failed"):
    """A job ran but could not train: too many of its steps had no successful rollout."""


class BuildError(RltuneError, status=500, code="build_failed"):
    """A model build (the demo models' warm start) missed its target; ``metrics`` says how."""

    def __init__(self, message: str, *, metrics: dict[str, Any] | None = None, **kw: str | None):
        self.metrics = metrics or {}
        super().__init__(message, **kw)


# Errors one part raises and usually handles itself (a dropped rollout, a retried worker call).
# They keep the built-in base callers catch them by (ValueError, ConnectionError, TimeoutError)
# and are importable from the module that raises them as well.


class RowShapeError(DatasetError, ValueError):
    """A dataset row has no prompt rltune can read (the message names the columns it has);
    raised by ``rltune.config.compat.rowshapes``."""


class InvalidReward(UserCodeError, ValueError):
    """A reward function produced a value that cannot be trained on (NaN, inf, missing
    metric); the rollout is dropped and counted (``rltune.rollout.scoring``)."""


class JudgeError(FunctionCallError, ValueError):
    """An LLM judge's reply cannot be read as one score per response (``rltune.ark.judge``)."""


class WorkerConnectionError(FunctionCallError, ConnectionError):
    """A function worker could not be reached or dropped the connection mid-call
    (``rltune.functions.http``)."""


class WorkerTimeout(FunctionCallError, TimeoutError):
    """A function worker did not answer within the timeout (``rltune.functions.http``)."""


class UnsafeFileError(UserCodeError, OSError):
    """A file in a folder that tenant code can write is a link, a FIFO, a hard link, a folder
    or over its size bound, so trusted code refuses to use it (``rltune.safefs``)."""
