"""The job transition table."""

import pytest

from rltune.sdk.errors import ConflictError
from rltune.server import states as S


def test_table():
    assert S.can_move(S.PENDING, S.RUNNING) and S.can_move(S.RUNNING, S.CANCELED)
    assert S.can_move(S.FAILED, S.PENDING) and S.can_move(S.CANCELED, S.PENDING)
    assert not S.can_move(S.SUCCEEDED, S.PENDING)
    assert not S.can_move(S.PENDING, S.SUCCEEDED)
    with pytest.raises(ConflictError, match="cannot cancel job ft-1: it is SUCCEEDED"):
        S.check_move("ft-1", S.SUCCEEDED, S.CANCELED, "cancel")
