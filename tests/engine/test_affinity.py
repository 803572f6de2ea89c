"""Session pins of an engine group: lookup, LRU bound, end, per-replica counts."""

from __future__ import annotations

import pytest

from rltune.engine.affinity import SessionAffinity


def test_pins_are_found_counted_and_ended():
    a = SessionAffinity()
    a.pin("s1", 0)
    a.pin("s2", 1)
    a.pin("s3", 1)
    assert a.lookup("s1") == 0 and a.lookup("nope") is None
    assert a.per_replica(3) == [1, 2, 0] and a.sessions_on(1) == 2
    a.pin("s3", 0)  # moved (its replica failed): counted once, on the new one
    assert a.per_replica(2) == [2, 1] and len(a) == 3
    a.end("s1")
    a.end("s1")  # twice, or never pinned: nothing happens
    assert a.per_replica(2) == [1, 1] and a.lookup("s1") is None


def test_the_least_recently_used_pin_makes_room():
    a = SessionAffinity(max_sessions=2)
    a.pin("old", 0)
    a.pin("new", 1)
    a.lookup("old")  # used again: "new" is now the least recent
    a.pin("third", 1)
    assert a.lookup("new") is None and a.lookup("old") == 0
    assert a.per_replica(2) == [1, 1]


def test_max_sessions_must_be_positive():
    with pytest.raises(ValueError, match="max_sessions"):
        SessionAffinity(max_sessions=0)
