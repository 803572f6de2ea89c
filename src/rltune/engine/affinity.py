"""Session affinity for an engine group: which replica holds a session's KV.

A *session* is what shares a prompt prefix from call to call: one rollout's turns, or every
rollout of one prompt's group (the gateway names it, see ``Gateway.register``). Each replica
has its own prefix KV cache (:mod:`rltune.engine.prefixcache`), so a later turn prefills only
its new tokens only if it lands where the earlier turns ran. The group pins a session to the
replica its first call went to (the least loaded one then) and sends every later call there
while that replica is in rotation; when it fails, the session moves to the least loaded live
replica and stays there.

Pins end when the gateway says the session is over (``end``) or, past ``max_sessions`` (a
caller that never says so), when the least recently used one makes room.

Example:
    >>> a = SessionAffinity(max_sessions=2)
    >>> a.pin("s1", 0); a.pin("s2", 1); a.lookup("s1")
    0
    >>> a.pin("s3", 1); a.lookup("s2") is None    # s2 was the least recently used
    True
    >>> a.per_replica(2)
    [1, 1]
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Optional

DEFAULT_MAX_SESSIONS = 16384


class SessionAffinity:
    """Session -> replica index, LRU-bounded by ``max_sessions``."""

    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS):
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.max_sessions = max_sessions
        self._pins: OrderedDict[str, int] = OrderedDict()
        self._counts: dict[int, int] = {}  # replica index -> sessions pinned to it

    def lookup(self, session: str) -> Optional[int]:
        """The replica ``session`` is pinned to (marked recently used), or None."""
        index = self._pins.get(session)
        if index is not None:
            self._pins.move_to_end(session)
        return index

    def pin(self, session: str, index: int) -> None:
        """Send ``session``'s calls to replica ``index`` from now on."""
        self.end(session)
        self._pins[session] = index
        self._counts[index] = self._counts.get(index, 0) + 1
        while len(self._pins) > self.max_sessions:
            self._drop(self._pins.popitem(last=False)[1])

    def end(self, session: str) -> None:
        """Forget ``session`` (its calls are over); unknown sessions are ignored."""
        index = self._pins.pop(session, None)
        if index is not None:
            self._drop(index)

    def _drop(self, index: int) -> None:
        self._counts[index] -= 1

    def sessions_on(self, index: int) -> int:
        """How many sessions are pinned to replica ``index``."""
        return self._counts.get(index, 0)

    def per_replica(self, replicas: int) -> list[int]:
        """How many sessions each of ``replicas`` holds."""
        return [self.sessions_on(i) for i in range(replicas)]

    def __len__(self) -> int:
        return len(self._pins)
