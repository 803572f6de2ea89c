"""The console compares runs (issue 32): two real jobs on a real server, overlaid on one uPlot
chart per picked metric in headless Chromium, with the doctor's alert markers and a CSV export
that holds exactly the REST series of both jobs."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from console_harness import login, submit_calc_job
from playwright.sync_api import expect

REWARD = "critic/rewards/mean"
CLIP = "trajectory/response_length/clip_ratio"
VAL = "validation/data/reward/mean@1"  # picked by default with the training reward


@pytest.mark.slow  # a whole job, 10-20 s: CI's default run is at its time budget
def test_two_jobs_reward_curves_overlay_on_one_chart_and_export_as_csv(
    page, server, tiny_model_dir, tmp_path
):
    # the untrained tiny model never stops within max_length: P9 at step 2 marks job a
    a = submit_calc_job(server, tmp_path / "a", tiny_model_dir, name="cmp-a", n_epochs=1,
                        max_steps=3, save_strategy="no",
                        top={"advisor": {"thresholds": {"P9": {"window": 2}}}})
    b = submit_calc_job(server, tmp_path / "b", tiny_model_dir, name="cmp-b", n_epochs=1,
                        max_steps=2, save_strategy="no", learning_rate=1e-4,
                        top={"advisor": {"enabled": False}})
    for job_id in (a, b):
        server.wait(job_id, {"SUCCEEDED"}, timeout=300)
    rest = {j: server.call("GET", f"/v1/jobs/{j}/metrics")["series"] for j in (a, b)}
    assert len(rest[a][REWARD]) == 3 and len(rest[b][REWARD]) == 2

    login(page, server)
    page.click("header a.nav:has-text('Compare')")
    page.wait_for_selector("#compare-jobs input.compare-job")
    page.check(f'input.compare-job[data-job="{a}"]')
    page.check(f'input.compare-job[data-job="{b}"]')
    chart = page.locator(f'.compare-chart[data-metric="{REWARD}"]')
    expect(chart.locator("canvas")).to_have_count(1)  # uPlot draws on a canvas
    legend = chart.locator(".u-legend .u-series")
    expect(legend).to_have_count(3)  # the step column and one curve per job
    expect(legend.nth(1)).to_contain_text(a)
    expect(legend.nth(2)).to_contain_text(b)
    expect(chart.locator(f'.alert-marker[data-code="P9"][data-job="{a}"]')).to_have_count(1)
    assert chart.locator(".alert-marker").first.get_attribute("data-step") == "2"
    expect(chart.locator(f'.alert-marker[data-job="{b}"]')).to_have_count(0)
    expect(page.locator(f'.compare-chart[data-metric="{VAL}"] .u-legend .u-series')
           ).to_have_count(3)
    # pick a second metric: a second chart; the choice is in the address (a shareable link)
    page.fill("#compare-metric-filter", "clip_ratio")
    page.check(f'input.compare-metric-box[data-metric="{CLIP}"]')
    expect(page.locator(f'.compare-chart[data-metric="{CLIP}"] canvas')).to_have_count(1)
    assert f"jobs={a}%2C{b}" in page.url or f"jobs={a},{b}" in page.url, page.url

    with page.expect_download() as dl:
        page.click("#compare-csv")
    rows = list(csv.DictReader(io.StringIO(Path(dl.value.path()).read_text())))
    assert set(rows[0]) == {"job_id", "job_name", "metric", "step", "value"}
    for job_id, name in ((a, "cmp-a"), (b, "cmp-b")):
        for metric in (REWARD, VAL, CLIP):
            got = [(int(r["step"]), float(r["value"])) for r in rows
                   if r["job_id"] == job_id and r["metric"] == metric]
            assert got == [(s, float(v)) for s, v in rest[job_id][metric]], (job_id, metric)
            assert {r["job_name"] for r in rows if r["job_id"] == job_id} == {name}
    assert {r["metric"] for r in rows} == {REWARD, VAL, CLIP}

    # the deep link alone draws the same comparison
    page.goto(f"{server.url}/#/compare?jobs={a},{b}&metrics={REWARD}")
    page.reload()
    expect(page.locator(f'.compare-chart[data-metric="{REWARD}"] .u-legend .u-series')
           ).to_have_count(3)
    expect(page.locator(".compare-chart")).to_have_count(1)
