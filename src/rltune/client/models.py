"""Response objects of the client, shaped like the cloud SDK's (``FineTune.output.job_id``)."""

from __future__ import annotations

import logging
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict

log = logging.getLogger("rltune.client")


class FineTuneOutput(BaseModel):
    """A job as the server reports it (extra fields kept: progress, error, config, ...)."""

    model_config = ConfigDict(extra="allow")

    job_id: Optional[str] = None
    job_name: Optional[str] = None
    status: Optional[str] = None
    model: Optional[str] = None
    created_at: Optional[float] = None
    logs: Optional[list[str]] = None
    #: A submit's hyper-parameter anti-patterns (the job runs anyway), each naming the key.
    warnings: Optional[list[str]] = None


class FineTune(BaseModel):
    """``status_code`` / ``code`` / ``message`` / ``output`` as in the cloud SDK.

    It is also awaitable (``await client.submit_job(...)`` works like the documented usage).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    status_code: int = 200
    #: The HTTP status of the call when it differs from ``status_code`` (submit: 201).
    http_status: Optional[int] = None
    request_id: Optional[str] = None
    code: Optional[str] = None
    message: Optional[str] = None
    output: Any = None

    def __await__(self):
        async def _self() -> FineTune:
            return self

        return _self().__await__()

    @classmethod
    def of_job(cls, data: dict[str, Any], status_code: int = 200) -> FineTune:
        return cls(status_code=status_code, output=FineTuneOutput.model_validate(data))

    @classmethod
    def of_submit(cls, data: dict[str, Any], status_code: int) -> FineTune:
        """A submit's answer (HTTP 201); each of its ``warnings`` is logged at WARNING on the
        ``rltune.client`` logger (stderr unless logging is set up otherwise), so the SDK and
        the CLI show them."""
        out = cls.of_job(data, status_code)
        out.http_status = 201
        for warning in data.get("warnings") or []:
            log.warning("%s: %s", data.get("job_id"), warning)
        return out
