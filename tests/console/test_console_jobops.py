"""The console's job operations in a real browser against a real server and a real job on
the tiny model: compare trajectories each against the previous one (Ark's second mode), create
a job from uploaded files and registered functions, stop a running job (STOPPED, checkpoint
kept), copy it through the YAML editor, and resume it."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from console_harness import ServerProc, login, shot, submit_calc_job

expect = pytest.importorskip("playwright.sync_api", reason="pip install playwright").expect


def _until(server: ServerProc, job_id: str, cond, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = server.job(job_id)
        if cond(job):
            return job
        assert time.monotonic() < deadline, f"timeout waiting on {job_id}: {job}"
        time.sleep(0.5)


def _step(job: dict) -> int:
    return (job.get("progress") or {}).get("step") or 0


@pytest.fixture(scope="module")
def long_job(server: ServerProc, tiny_model_dir: Path, tmp_path_factory) -> str:
    """A job of 200 steps (4 a epoch) that saves no checkpoint of its own, running."""
    work = tmp_path_factory.mktemp("jobops")
    job_id = submit_calc_job(server, work, tiny_model_dir, name="long", n_epochs=50,
                             save_strategy="no")
    _until(server, job_id, lambda j: _step(j) >= 1 or j["status"] not in ("PENDING", "RUNNING"))
    assert server.job(job_id)["status"] == "RUNNING"
    return job_id


def test_compare_each_trajectory_with_the_previous_one(page, server, long_job):
    login(page, server)
    page.goto(f"{server.url}/#/jobs/{long_job}/trajectories?step=1")
    rows = page.locator("#traj-table tr[data-rid]")
    expect(rows).to_have_count(4)
    rids = [rows.nth(i).get_attribute("data-rid") for i in (2, 0, 3)]  # picked in this order
    for rid in rids:
        page.locator(f'#traj-table tr[data-rid="{rid}"] input.pick').check()
    expect(page.locator("#compare-btn")).to_have_text("Compare selected (3)")
    page.click("#compare-btn")
    expect(page.locator("#compare-view")).to_be_visible()  # the baseline mode first
    page.click('#compare-modes [data-mode="previous"]')
    thumbs = page.locator("#chain-view .thumb")
    expect(thumbs).to_have_count(3)
    assert [thumbs.nth(i).get_attribute("data-rid") for i in range(3)] == rids
    assert "mode=previous" in page.url
    expect(thumbs.nth(0).locator(".zoom")).to_have_count(0)  # the first has no previous one
    expect(thumbs.nth(1).locator(".thumb-diff")).to_contain_text("messages differ from #1")
    expect(thumbs.nth(2).locator(".thumb-reward .delta")).to_have_count(1)
    shot(page, "trajectory-compare-previous")

    thumbs.nth(2).locator(".zoom").click()  # #2 → #3, side by side
    zoom = page.locator("#chain-zoom")
    expect(zoom).to_have_attribute("data-pair", "1-2")
    expect(zoom.locator("#compare-view")).to_have_attribute("data-base", rids[1])
    expect(zoom.locator("#compare-view .side-by-side .col")).to_have_count(2)
    expect(page.locator("#chain-next")).to_be_disabled()
    page.click("#chain-prev")
    expect(zoom).to_have_attribute("data-pair", "0-1")
    expect(zoom.locator("#compare-view")).to_have_attribute("data-base", rids[0])
    cols = zoom.locator("#compare-view .side-by-side .col")
    assert [cols.nth(i).get_attribute("data-rid") for i in range(2)] == rids[:2]
    page.click("#chain-back")
    expect(page.locator("#chain-view .thumb")).to_have_count(3)


def test_create_a_job_from_the_console(page, server, long_job, tiny_model_dir):
    files = {f["filename"]: f["file_id"] for f in server.call("GET", "/v1/files")["items"]}
    fns = {f["name"]: f["entity_id"] for f in server.call("GET", "/v1/functions")["items"]}
    login(page, server)
    page.click("#new-job")
    expect(page.locator("#new-job-form")).to_be_visible()
    page.fill("#job-name", "from-console")
    page.check(f'input[name=training][value="{files["long-train.jsonl"]}"]')
    page.check(f'input[name=validation][value="{files["long-val.jsonl"]}"]')
    page.select_option("#job-rollout", fns["calc-rollout"])
    page.check(f'input[name=reward][value="{fns["exact"]}"]')
    for knob, value in (("batch_size", "2"), ("n_rollouts", "2"), ("max_length", "200"),
                        ("max_prompt_length", "180"), ("learning_rate", "0.001")):
        page.fill(f"#hp-{knob}", value)
    page.select_option("#hp-save_strategy", '"no"')
    expect(page.locator("#hp-n_epochs")).to_have_attribute("placeholder", "1")  # the default
    shot(page, "new-job")
    page.click("#new-job-submit")  # no model yet: the server's error, on the form
    expect(page.locator("#new-job-error .error-box")).to_contain_text("model")
    page.fill("#job-model", str(tiny_model_dir))
    page.click("#new-job-submit")
    expect(page).to_have_url(re.compile(r"#/jobs/ft-[0-9a-f]+/details$"))
    job_id = page.url.split("#/jobs/")[1].split("/")[0]
    expect(page.locator(".job-head h2")).to_contain_text("from-console")
    cfg = server.job(job_id)["config"]
    hp = cfg["training"]["hyper_parameters"]
    assert (hp["batch_size"], hp["n_rollouts"], hp["learning_rate"], hp["save_strategy"]) == (
        2, 2, 0.001, "no")
    assert hp["n_epochs"] == 1  # left empty: the default
    assert {(d["type"], d["file_id"]) for d in cfg["datasets"]} == {
        ("training", files["long-train.jsonl"]), ("validation", files["long-val.jsonl"])}
    assert {(f["type"], f["entity_id"]) for f in cfg["functions"]} == {
        ("rollout", fns["calc-rollout"]), ("reward", fns["exact"])}
    server.call("POST", f"/v1/jobs/{job_id}/cancel")


@pytest.mark.slow  # a whole job, 10-20 s: CI's default run is at its time budget
def test_stop_copy_and_resume_from_the_console(page, server, long_job):
    login(page, server)
    page.goto(f"{server.url}/#/jobs/{long_job}/details")
    expect(page.locator(".job-head .badge")).to_have_text("RUNNING")
    page.click("#stop-job")
    page.click('[data-test="dialog-confirm"]')
    expect(page.locator(".job-head .badge")).to_have_text("STOPPED", timeout=180_000)
    job = server.job(long_job)
    stopped_at = _step(job)
    ckpts = server.call("GET", f"/v1/jobs/{long_job}/checkpoints")["checkpoints"]
    assert [c["step"] for c in ckpts] == [stopped_at]  # save_strategy "no": the stop's own
    expect(page.locator("#stop-job")).to_have_count(0)
    expect(page.locator("#cancel-job")).to_have_count(0)

    # Copy: the YAML in an editor, edited, submitted as a new job
    page.click("#copy-job")
    editor = page.locator("#copy-yaml")
    text = editor.input_value()
    assert "n_epochs: 50" in text
    editor.fill(text.replace("n_epochs: 50", "n_epochs: 3"))
    page.fill("#copy-name", "long-edited")
    page.click("#copy-submit")
    expect(page.locator(".job-head h2")).to_contain_text("long-edited")
    copy_id = page.url.split("#/jobs/")[1].split("/")[0]
    copy = server.job(copy_id)
    assert copy_id != long_job and copy["copied_from"] == long_job
    assert copy["config"]["training"]["hyper_parameters"]["n_epochs"] == 3
    server.call("POST", f"/v1/jobs/{copy_id}/cancel")

    # Resume: the STOPPED job continues from its checkpoint
    page.goto(f"{server.url}/#/jobs/{long_job}/details")
    page.click("#resume-job")
    page.click('[data-test="dialog-confirm"]')
    expect(page.locator(".job-head .badge")).to_have_text(re.compile("PENDING|RUNNING"))
    job = _until(server, long_job, lambda j: _step(j) > stopped_at
                 or j["status"] not in ("PENDING", "RUNNING"))
    assert job["status"] == "RUNNING" and job["resume_from"] == ckpts[0]["path"]
    expect(page.locator(".job-head .badge")).to_have_text("RUNNING")
    expect(page.locator("#stop-job")).to_be_visible()
    server.call("POST", f"/v1/jobs/{long_job}/cancel")
