"""An alert of the training doctor, and ``alerts.jsonl`` in the job folder (one JSON object
per line: ``step``, ``code``, ``title``, ``evidence``, ``advice``).

Example:
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> append_alert(d, Alert(step=3, code="P9", title="t", evidence={"clip_ratio": 0.9},
    ...                       advice="max_length +2048"))
    >>> [a.code for a in read_alerts(d)]
    ['P9']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from rltune.jobdir import JobDir, read_jsonl


class Alert(BaseModel):
    """One diagnosis: at ``step`` the detector ``code`` fired on ``evidence``."""

    model_config = ConfigDict(extra="forbid")

    step: int
    code: str
    title: str
    evidence: dict[str, Any]
    advice: str

    def line(self) -> str:
        """One human line: ``step 12 P9 high truncation rate … (clip_ratio=0.9) → advice``."""
        ev = ", ".join(f"{k}={v}" for k, v in self.evidence.items() if k != "steps")
        return f"step {self.step} [{self.code}] {self.title} ({ev}) -> {self.advice}"


def append_alert(job_dir: str | Path, alert: Alert) -> None:
    with open(JobDir(job_dir).alerts, "a", encoding="utf-8") as fh:
        fh.write(alert.model_dump_json() + "\n")


def read_alerts(job_dir: str | Path) -> list[Alert]:
    """The job's alerts, oldest first (a torn last line of a running job is skipped)."""
    out = []
    for value in read_jsonl(JobDir(job_dir).alerts):
        try:
            out.append(Alert.model_validate(value))
        except ValueError:
            continue
    return out
