"""docs/doctor.md lists every code of the training doctor with its title, thresholds (with the
defaults of ``config/advisor.py``) and advice, as the code has them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltune.config.advisor import DEFAULT_THRESHOLDS
from rltune.doctor.detectors import DETECTORS

DOC = (Path(__file__).resolve().parents[2] / "docs" / "doctor.md").read_text()


def section(code: str) -> str:
    head = f"### `{code}`: "
    assert head in DOC, f"docs/doctor.md has no section {head!r}"
    start = DOC.index(head)
    end = DOC.find("\n### ", start + 1)
    return DOC[start:end if end > 0 else len(DOC)]


def test_every_threshold_belongs_to_a_detector_and_back():
    assert set(DETECTORS) == set(DEFAULT_THRESHOLDS)


@pytest.mark.parametrize("code", sorted(DETECTORS))
def test_the_docs_list_the_code_with_its_title_thresholds_and_advice(code):
    text = " ".join(section(code).split())
    det = DETECTORS[code]
    assert f"### `{code}`: {det.title}" in text
    assert "**evidence:**" in text
    shown = ", ".join(f"`{k}` {v:g}" for k, v in DEFAULT_THRESHOLDS[code].items())
    assert f"**thresholds (defaults):** {shown}" in text
    assert f"**advice:** {det.advice}" in text
