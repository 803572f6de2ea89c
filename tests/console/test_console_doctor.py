"""The training doctor end to end on a real job server: a job whose answers are all cut at
``max_length`` (the untrained tiny model never stops within 20 tokens) raises P9 in
``alerts.jsonl``, at ``GET /v1/jobs/{id}/alerts`` (404 from another workspace), in the job
page's alerts panel and as a marker on the charts."""

from __future__ import annotations

import json

import httpx
import pytest
from console_harness import login, submit_calc_job
from playwright.sync_api import expect
from typer.testing import CliRunner

from rltune.cli.main import app


@pytest.mark.slow  # a whole job, 10-20 s: CI's default run is at its time budget
def test_a_truncating_job_shows_p9_in_alerts_jsonl_rest_and_the_console(
    page, server, tiny_model_dir, tmp_path
):
    job_id = submit_calc_job(
        server, tmp_path, tiny_model_dir, name="truncated", n_epochs=1, max_steps=2,
        eval_steps=2, save_strategy="no",
        top={"advisor": {"thresholds": {"P9": {"window": 2}}}},
    )
    server.wait(job_id, {"SUCCEEDED"}, timeout=300)
    lines = (server.home / "server" / "jobs" / job_id / "alerts.jsonl").read_text().splitlines()
    codes = [json.loads(x)["code"] for x in lines]
    assert "P9" in codes
    rest = server.call("GET", f"/v1/jobs/{job_id}/alerts")["alerts"]
    p9 = next(a for a in rest if a["code"] == "P9")
    assert p9["step"] == 2 and p9["evidence"]["clip_ratio"] >= 0.5
    assert "max_length" in p9["advice"]
    other = server.call("POST", "/v1/keys", json={"name": "doc", "workspace": "doctor-other"})
    res = httpx.get(f"{server.url}/v1/jobs/{job_id}/alerts",
                    headers={"Authorization": f"Bearer {other['api_key']}"})
    assert res.status_code == 404, res.text
    # rltune doctor ft-… against the REST server (the job folder is not local to the CLI)
    cli = CliRunner().invoke(app, ["doctor", job_id, "--server", server.url, "--api-key",
                                   server.key], env={"RLTUNE_HOME": str(tmp_path / "elsewhere")})
    assert cli.exit_code == 3, cli.output
    assert "step 2 [P9] high truncation rate" in cli.output and "max_length" in cli.output
    denied = CliRunner().invoke(app, ["doctor", job_id, "--server", server.url, "--api-key",
                                      other["api_key"]])
    assert denied.exit_code == 2 and job_id in denied.output, denied.output

    login(page, server)
    page.goto(f"{server.url}/#/jobs/{job_id}/details")
    panel = page.locator("#alerts-panel")
    expect(panel).to_be_visible()
    expect(panel.locator('li.alert[data-code="P9"]')).to_contain_text("max_length")
    page.goto(f"{server.url}/#/jobs/{job_id}/metrics")
    chart = page.locator('.chart[data-metric="trajectory/response_length/clip_ratio"]')
    expect(chart.locator('.alert-marker[data-code="P9"]')).to_have_count(1)
