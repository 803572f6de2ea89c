"""The training doctor on real failures (issue 28): jobs of the warm-started nano calculator
agent, each made to fail one way (tests/console/doctor_jobs.py: a learning rate far too high,
a max_length that cuts the answers, a reward that pays for length, one question repeated),
run on a real job server. Each must raise its code in ``alerts.jsonl``, at
``GET /v1/jobs/{id}/alerts``, in the job page's alerts panel (headless Chromium) and as a
marker on its metric charts. Every rollout samples with its own seed, so each job runs the same
way every time (measured values in ``CASES``). The healthy run is the GSPO learning test
(tests/trainer/test_learning.py asserts it raises no alert).

The four jobs run two at a time on the server: a few minutes in all on a loaded 2-core box,
hence ``slow``."""

from __future__ import annotations

import json

import pytest
from console_harness import login, shot
from doctor_jobs import CASES, submit
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FAILURES = ("lr", "truncation", "length", "overfit")
REWARD = "critic/rewards/mean"
LENGTH = "trajectory/response_length/mean"


@pytest.fixture(scope="module")
def failing_jobs(server, nano_model_dir, tmp_path_factory) -> dict[str, str]:
    """All four jobs submitted at once (the server runs two at a time)."""
    work = tmp_path_factory.mktemp("doctor-failures")
    return {case: submit(server, work, nano_model_dir, case) for case in FAILURES}


@pytest.mark.parametrize("case", FAILURES)
def test_the_failure_raises_its_code_in_the_file_the_rest_route_and_the_console(
    case, failing_jobs, server, page
):
    job_id = failing_jobs[case]
    server.wait(job_id, {"SUCCEEDED"}, timeout=1200)
    expected = CASES[case]["expect"]
    lines = (server.home / "server" / "jobs" / job_id / "alerts.jsonl").read_text().splitlines()
    in_file = [json.loads(x) for x in lines]
    codes = {a["code"] for a in in_file}
    assert expected & codes, (case, [(a["step"], a["code"], a["evidence"]) for a in in_file])
    code = sorted(expected & codes)[0]
    alert = next(a for a in in_file if a["code"] == code)
    assert alert["evidence"] and alert["advice"]

    rest = server.call("GET", f"/v1/jobs/{job_id}/alerts")["alerts"]
    assert [(a["step"], a["code"]) for a in rest] == [(a["step"], a["code"]) for a in in_file]

    login(page, server)
    page.goto(f"{server.url}/#/jobs/{job_id}/details")
    panel = page.locator("#alerts-panel")
    expect(panel).to_be_visible()
    expect(panel.locator(f'li.alert[data-code="{code}"]').first).to_be_visible()
    page.goto(f"{server.url}/#/jobs/{job_id}/metrics")
    chart = page.locator(f'.chart[data-metric="{LENGTH}"]')
    marker = chart.locator(f'.alert-marker[data-code="{code}"]').first
    expect(marker).to_be_attached()
    assert marker.get_attribute("data-step") == str(alert["step"])


def test_the_compare_page_overlays_the_failing_runs_with_their_alerts(failing_jobs, server, page):
    """The four runs on one chart per metric (README screenshot ``runs-compare``)."""
    for job_id in failing_jobs.values():
        server.wait(job_id, {"SUCCEEDED"}, timeout=1200)
    ids = ",".join(failing_jobs.values())
    login(page, server)
    page.goto(f"{server.url}/#/compare?jobs={ids}&metrics={REWARD},{LENGTH}")
    for metric in (REWARD, LENGTH):
        chart = page.locator(f'.compare-chart[data-metric="{metric}"]')
        expect(chart.locator(".u-legend .u-series")).to_have_count(1 + len(failing_jobs))
    lr = page.locator(f'.compare-chart[data-metric="{REWARD}"] '
                      f'.alert-marker[data-job="{failing_jobs["lr"]}"][data-code="P3"]')
    expect(lr).to_have_count(1)
    shot(page, "runs-compare")
