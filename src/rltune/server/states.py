"""Job states and the transitions the server allows (anything else answers 409).

Example:
    >>> can_move("PENDING", "RUNNING"), can_move("SUCCEEDED", "RUNNING")
    (True, False)
"""

from __future__ import annotations

from rltune.sdk.errors import ConflictError

PENDING, RUNNING, SUCCEEDED, FAILED, CANCELED = (
    "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELED")
STATES = (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELED)
TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELED})

#: from-state → states it may move to. FAILED/CANCELED → PENDING is ``resume``.
TRANSITIONS: dict[str, frozenset[str]] = {
    PENDING: frozenset({RUNNING, CANCELED}),
    RUNNING: frozenset({SUCCEEDED, FAILED, CANCELED}),
    SUCCEEDED: frozenset(),
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
