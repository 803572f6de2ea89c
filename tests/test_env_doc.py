"""docs/env.md lists every environment variable the code reads: each ``RLTUNE_*`` name found
in ``src/rltune`` appears in the page (and the page names none the code has dropped)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"\bRLTUNE_[A-Z0-9_]*[A-Z0-9]\b")


def _names(text: str) -> set[str]:
    return set(NAME.findall(text))


def test_every_rltune_variable_in_the_code_is_documented():
    in_code: set[str] = set()
    for path in (ROOT / "src" / "rltune").rglob("*.py"):
        in_code |= _names(path.read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "env.md").read_text(encoding="utf-8")
    assert len(in_code) >= 20  # the scan found the variables (guards a broken pattern)
    missing = sorted(in_code - _names(page))
    assert not missing, f"add to docs/env.md: {missing}"
    stale = sorted(_names(page) - in_code)
    assert not stale, f"docs/env.md names variables no code reads: {stale}"
