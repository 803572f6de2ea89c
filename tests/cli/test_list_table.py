"""``rltune list``'s table keeps every job id whole at any terminal width; the other columns
wrap instead (rl_cmd.jobs_table). A real ``rltune list`` through a pipe is checked in
test_rl_cmd.py."""

from __future__ import annotations

import io

from rich.console import Console

from rltune.cli.rl_cmd import jobs_table

JOBS = [{"job_id": f"ft-{i:012x}{'ab' * i}", "job_name": "calc-agent-with-a-long-name",
         "status": "SUCCEEDED", "model": "/work/nanohome/models/nano-warm-started",
         "latest_reward": 0.78125, "project": "project-alpha",
         "tags": {"team": "rl", "owner": "someone"}} for i in range(3)]


def shown(width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(jobs_table(JOBS, "jobs"))
    return buf.getvalue()


def test_ids_are_never_cut_or_wrapped():
    for width in (200, 100, 80, 60):
        lines = shown(width).splitlines()
        assert max(len(line) for line in lines) <= max(width, 60), width
        for job in JOBS:
            assert any(job["job_id"] in line for line in lines), (width, job["job_id"])
        assert any("SUCCEEDED" in line for line in lines), width
    assert "…" not in shown(80)  # nothing cut: the long columns wrap


def test_a_wide_console_shows_every_cell_on_one_line():
    out = shown(10_000)
    assert "calc-agent-with-a-long-name" in out and "/work/nanohome/models/nano-warm-started" in out
    assert "team=rl,owner=someone" in out
