"""Re-use the real-server fixtures of tests/server (loaded by path: test dirs are not packages)."""

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "rltune_test_server_fixtures", Path(__file__).parents[1] / "server" / "conftest.py")
_mod = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _mod
_spec.loader.exec_module(_mod)
server, server_home = _mod.server, _mod.server_home
make_workspace, start_server = _mod.make_workspace, _mod.start_server


@pytest.fixture
def db_url():
    """These suites run on the embedded SQLite store (tests/server runs every store)."""
    return None
