"""Job states and the transitions the server allows (anything else answers 409).

Example:
    >>> can_move("PENDING", "RUNNING"), can_move("SUCCEEDED", "RUNNING")
    (True, False)
"""

from __future__ import annotations

from rltune.names import JOB_STATUSES, JOB_TERMINAL
from rltune.sdk.errors import ConflictError

PENDING, RUNNING, SUCCEEDED, STOPPED, FAILED, CANCELED = JOB_STATUSES
STATES = JOB_STATUSES
TERMINAL = frozenset(JOB_TERMINAL)

#: from-state → states it may move to. FAILED/CANCELED/STOPPED → PENDING is ``resume``;
#: RUNNING → STOPPED is the job process ending at a step boundary after ``stop``.
TRANSITIONS: dict[str, frozenset[str]] = {
    PENDING: frozenset({RUNNING, CANCELED}),
    RUNNING: frozenset({SUCCEEDED, STOPPED, FAILED, CANCELED}),
    SUCCEEDED: frozenset(),
    STOPPED: frozenset({PENDING}),
    FAILED: frozenset({PENDING}),
    CANCELED: frozenset({PENDING}),
}


def can_move(src: str, dst: str) -> bool:
    return dst in TRANSITIONS.get(src, frozenset())


def sources_of(dst: str) -> list[str]:
    """The states from which ``dst`` may be reached."""
    return [s for s, targets in TRANSITIONS.items() if dst in targets]


def check_move(job_id: str, src: str, dst: str, verb: str) -> None:
    """Raise ``ConflictError`` (409) when ``src → dst`` is not allowed."""
    if not can_move(src, dst):
        allowed = ", ".join(sources_of(dst)) or "no state"
        raise ConflictError(f"cannot {verb} job {job_id}: it is {src}", where=job_id,
                            hint=f"{verb} works on jobs that are {allowed}")
