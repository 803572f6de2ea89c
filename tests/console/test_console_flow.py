"""The console's main flow in real headless Chromium against a real job server and real jobs.

Log in (a wrong key is refused); open a finished job: details, metric charts drawn with data
points, a step's trajectories, the replay of one, its group view and a comparison of two;
outputs; watch the log of a running job grow; cancel it from the page. Each tab's screenshot
goes to docs/images/ (shown in the README).
"""

from __future__ import annotations

import re

import httpx
import pytest
from console_harness import login, shot
from playwright.sync_api import expect


def test_wrong_key_is_refused(page, server):
    login(page, server, key="rk-not-a-real-key")
    expect(page.locator(".login-error")).to_contain_text("refused")
    expect(page.locator("#jobs-table")).to_have_count(0)
    shot(page, "login")


def test_jobs_list_and_details(page, server, finished_job):
    login(page, server)
    row = page.locator(f'#jobs-table tr[data-job="{finished_job}"]')
    expect(row).to_be_visible()
    expect(row.locator(".badge")).to_have_text("SUCCEEDED")
    expect(row.locator(".progress-text")).to_have_text(re.compile(r"^(\d+) / \1$"))
    spark = row.locator(".spark")  # the reward sparkline, drawn by uPlot on a canvas
    expect(spark.locator("canvas")).to_have_count(1)
    assert int(spark.get_attribute("data-points")) >= 2
    expect(page.locator("#workspace")).to_have_text("workspace default")
    row.locator("a.job-link").click()
    expect(page.locator("#status-timeline li")).to_have_count(3)
    expect(page.locator("#config-yaml")).to_contain_text(re.compile(r"n_rollouts: \d+"))
    expect(page.locator("#functions tr")).to_have_count(3)  # header + rollout + reward
    shot(page, "job-details")


def test_metrics_charts_have_data_points(page, server, finished_job):
    login(page, server)
    page.goto(f"{server.url}/#/jobs/{finished_job}/metrics")
    rewards = page.locator('.chart[data-metric="critic/rewards/mean"]')
    expect(rewards).to_be_visible()
    series = server.call("GET", f"/v1/jobs/{finished_job}/metrics")["series"]
    steps = len(series["critic/rewards/mean"])
    assert steps >= 3
    expect(rewards.locator("canvas")).to_have_count(1)  # uPlot draws on a canvas
    # one point per logged step, the smoothed curve over the same steps, each drawn as a dot
    drawn = rewards.evaluate("""c => ({steps: c.uplot.data[0].length,
        raw: c.uplot.data[1].filter(v => v !== null).length,
        smoothed: c.uplot.data[2].filter(v => v !== null).length,
        dots: c.uplot.series[2].points.show(c.uplot, 2)})""")
    assert drawn == {"steps": steps, "raw": steps, "smoothed": steps, "dots": True}
    for group in ("critic", "trajectory", "trace", "timing", "perf", "validation", "custom"):
        expect(page.locator(f'.metric-group[data-group="{group}"]')).to_be_visible()
    expect(page.locator('.metric-group[data-group="custom"] .chart').first).to_have_attribute(
        "data-metric", re.compile(r"^trace/reward_metrics/")
    )
    # Hover shows the value at a step; a typed step range shows mean / max / min on every chart.
    rewards.scroll_into_view_if_needed()  # a long run has more charts above the fold to load
    box = rewards.locator(".u-over").bounding_box()  # uPlot's plot area takes the mouse
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
    expect(rewards.locator(".chart-info")).to_have_text(re.compile(r"^step \d+: "))
    page.fill("#range-from", "1")
    page.fill("#range-to", str(steps - 1))
    page.click("#apply-range")
    expect(rewards.locator(".chart-info")).to_contain_text(f"steps 1–{steps - 1}: mean ")
    expect(page.locator(".chart-info[data-range]")).to_have_count(page.locator(".chart").count())
    page.locator('.metric-group[data-group="critic"]').evaluate("e => e.scrollIntoView()")
    shot(page, "job-metrics")  # the reward charts at the top
    # Dragging across a chart selects a range too, on every chart.
    page.dblclick('.chart[data-metric="critic/rewards/mean"] .u-over')
    box = rewards.locator(".u-over").bounding_box()  # the page scrolled for the screenshot
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.12, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.97, y, steps=5)
    page.mouse.up()
    expect(rewards.locator(".chart-info")).to_have_attribute("data-range", re.compile(r"^\d+-\d+$"))
    expect(page.locator("#range-from")).not_to_have_value("1")
    page.click("#range-trajectories")
    expect(page.locator("#steps .step.active")).to_be_visible()


def test_trajectories_replay_group_and_compare(page, server, finished_job):
    login(page, server)
    page.goto(f"{server.url}/#/jobs/{finished_job}/trajectories?step=1")
    expect(page.locator('#steps .step.active[data-step="1"]')).to_be_visible()
    expect(page.locator('#steps .step[data-step="1"] .reward-spread')).to_contain_text("reward ")
    stored = server.call("GET", f"/v1/jobs/{finished_job}/trajectories", params={"step": 1})
    n = stored["total"]
    assert n >= 4  # 2 prompts × n_rollouts
    rows = page.locator("#traj-table tr[data-rid]")
    expect(rows).to_have_count(n)
    expect(page.locator("#traj-count")).to_have_text(f"{n} trajectories match")
    group_size = sum(1 for t in stored["items"] if t["sample_index"] == 0)
    first = rows.first.get_attribute("data-rid")

    # Replay: messages, rewards per function, token view coloured by log-prob.
    rows.first.locator("a.open-traj").click()
    replay = page.locator("#replay")
    expect(replay).to_have_attribute("data-rid", first)
    expect(replay.locator('.msg[data-role="user"]')).to_have_count(1)
    expect(replay.locator('.msg[data-role="assistant"]').first).to_be_visible()
    expect(page.locator("#reward-table")).to_contain_text("exact")
    sampled = page.locator("#token-view .tokens .tok:not(.ctx)")
    assert sampled.count() > 0
    assert "background" in (sampled.first.get_attribute("style") or "")
    # Token strings come decoded from the server (?tokens=decoded), so the prompt reads as text.
    expect(page.locator("#token-view")).not_to_contain_text("token text not available")
    context = "".join(page.locator("#token-view .tokens .tok.ctx").all_inner_texts())
    user = replay.locator('.msg[data-role="user"] .msg-text').inner_text()
    assert user in context
    page.locator("#token-view").scroll_into_view_if_needed()
    shot(page, "trajectory-tokens")
    expect(page.locator("#traj-table")).to_be_visible()
    shot(page, "trajectory-replay")

    # Group view: the rollouts of that prompt side by side.
    rows.first.locator("button.open-group").click()
    group = page.locator("#group-view")
    expect(group.locator(".side-by-side .col")).to_have_count(group_size)
    expect(group).to_contain_text("reward mean")
    expect(page.locator("#traj-table")).to_be_visible()
    shot(page, "trajectory-group")

    # Compare two trajectories, then switch the baseline.
    page.locator("#traj-table tr[data-rid] input.pick").nth(0).check()
    page.locator("#traj-table tr[data-rid] input.pick").nth(group_size).check()
    expect(page.locator("#compare-btn")).to_be_enabled()
    page.click("#compare-btn")
    cmp = page.locator("#compare-view")
    expect(cmp.locator(".side-by-side .col")).to_have_count(2)
    expect(cmp).to_have_attribute("data-base", first)
    expect(page.locator("#compare-table")).to_contain_text("reward exact")
    page.locator('#compare-table [data-test="set-baseline"]').click()
    expect(page.locator("#compare-view")).not_to_have_attribute("data-base", first)
    expect(page.locator("#traj-table")).to_be_visible()
    shot(page, "trajectory-compare")

    # The prompt filter runs on the server; the list asks for light summaries only.
    other = next(t for t in stored["items"] if t["sample_index"] != 0)
    prompt = next(m["content"] for m in other["messages"] if m["role"] == "user")
    same = sum(
        1
        for t in stored["items"]
        if next(m["content"] for m in t["messages"] if m["role"] == "user") == prompt
    )  # one group of the step's prompts (n - group_size when the step had two)
    page.fill("#f-q", prompt)
    expect(page.locator("#traj-count")).to_have_text(f"{same} trajectories match")
    expect(page.locator("#traj-table tr[data-rid] td.prompt-cell").first).to_have_text(prompt)
    light = server.call(
        "GET",
        f"/v1/jobs/{finished_job}/trajectories",
        params={"step": 1, "fields": "summary", "q": prompt},
    )
    assert light["total"] == same
    assert all("tokens" not in t and t["prompt"] == prompt for t in light["items"])

    # Server-side filters: a reward range that excludes everything leaves no rows.
    page.goto(f"{server.url}/#/jobs/{finished_job}/trajectories?step=1&min_reward=5")
    expect(page.locator("#traj-count")).to_have_text("0 trajectories match")


def test_outputs_marks_the_best_checkpoint(page, server, finished_job):
    login(page, server)
    page.goto(f"{server.url}/#/jobs/{finished_job}/outputs")
    ckpts = server.call("GET", f"/v1/jobs/{finished_job}/checkpoints")["checkpoints"]
    expect(page.locator("#checkpoints tr[data-ckpt]")).to_have_count(len(ckpts))
    expect(page.locator("#checkpoints .best-mark")).to_have_count(1)
    shot(page, "job-outputs")


def test_log_tail_and_page(page, server, finished_job):
    full = server.call("GET", f"/v1/jobs/{finished_job}/logs", params={"lines": 100000})["logs"]
    tail = server.call("GET", f"/v1/jobs/{finished_job}/logs", params={"offset": -3})
    assert tail["logs"] == full[-3:] and tail["next_offset"] == len(full) + 1
    login(page, server)
    page.goto(f"{server.url}/#/jobs/{finished_job}/logs")
    expect(page.locator("#log-count")).to_have_text(f"{len(full)} lines")
    expect(page.locator("#log-live")).to_have_text("job succeeded")
    expect(page.locator("#log-lines .log-line").last).to_have_text(full[-1])


@pytest.mark.slow  # a whole job, 10-20 s: CI's default run is at its time budget
def test_live_log_grows_and_cancel_from_the_page(page, server, tiny_model_dir, tmp_path):
    from console_harness import submit_calc_job

    job_id = submit_calc_job(
        server,
        tmp_path,
        tiny_model_dir,
        name="calc-running",
        train_rows=40,
        n_epochs=50,
        save_strategy="no",
    )
    server.wait(job_id, {"RUNNING"}, timeout=120)
    server.wait_log_lines(job_id, 3)
    login(page, server)
    page.goto(f"{server.url}/#/jobs/{job_id}/logs")
    expect(page.locator("#log-live")).to_have_text("● live")
    lines = page.locator("#log-lines .log-line")
    expect(lines.first).to_be_visible()
    before = lines.count()
    # New step lines arrive through the follow long-poll without reloading the page.
    # (a locator, not wait_for_function: the console's CSP forbids the eval that one uses)
    expect(lines.nth(before)).to_be_attached(timeout=120_000)
    page.fill("#log-search", "step ")
    expect(page.locator("#log-count")).to_contain_text("lines match")
    expect(page.locator("#log-lines mark").first).to_have_text("step ")
    shot(page, "job-logs")
    page.fill("#log-search", "")

    # The jobs list shows the running job's progress next to the finished one.
    page.click("a.nav:has-text('Jobs')")
    running = page.locator(f'#jobs-table tr[data-job="{job_id}"]')
    expect(running.locator(".badge")).to_have_text("RUNNING")
    expect(running.locator('[data-test="cancel"]')).to_be_visible()
    # Auto-refresh: the row's progress moves without a reload.
    expect(running.locator(".progress-text")).to_have_text(
        re.compile(r"^[1-9]\d* / \d+$"), timeout=120_000
    )
    shot(page, "jobs")
    running.locator("a.job-link").click()

    page.click("#cancel-job")
    page.click('[data-test="dialog-confirm"]')
    expect(page.locator(".job-head .badge")).to_have_text("CANCELED", timeout=30_000)
    assert server.job(job_id)["status"] == "CANCELED"
    expect(page.locator("#cancel-job")).to_have_count(0)


def test_a_step_of_10000_trajectories_pages_and_filters_on_the_server(page, server, finished_job):
    import json
    import random

    from rltune.trainer.sink import FileSink

    job_dir = server.home / "server" / "jobs" / finished_job
    base = [json.loads(x) for x in (job_dir / "trajectories" / "step_000001.jsonl").open()]
    rng = random.Random(0)
    rewards = [rng.random() for _ in range(10_000)]

    def records():
        for i in range(10_000):
            r = dict(base[i % len(base)])
            r.update(
                rollout_id=f"big-{i:05d}",
                sample_index=i // 8,
                reward=rewards[i],
                status="failed" if i % 50 == 0 else "success",
            )
            yield r

    sink = FileSink(job_dir)  # the trainer's own writer
    sink.trajectories(99, records())
    sink.close()
    login(page, server)
    page.goto(f"{server.url}/#/jobs/{finished_job}/trajectories?step=99")
    expect(page.locator("#traj-count")).to_have_text("10000 trajectories match", timeout=30_000)
    expect(page.locator("#traj-table tr[data-rid]")).to_have_count(50)  # one page, not 10,000
    expect(page.locator("#traj-page")).to_have_text("page 1 of 200")
    page.select_option("#f-status", "failed")
    expect(page.locator("#traj-count")).to_have_text("200 trajectories match", timeout=30_000)
    page.goto(f"{server.url}/#/jobs/{finished_job}/trajectories?step=99&min_reward=0.5&page=3")
    expected = sum(1 for r in rewards if r >= 0.5)
    expect(page.locator("#traj-count")).to_have_text(f"{expected} trajectories match")
    expect(page.locator("#traj-table tr[data-rid]")).to_have_count(50)
    shown = page.locator("#traj-table tr[data-rid] td.num:nth-child(5)").all_inner_texts()
    assert len(shown) == 50 and all(float(x) >= 0.5 for x in shown), shown
    page.locator("#traj-table tr[data-rid] a.open-traj").first.click()
    expect(page.locator("#replay")).to_be_visible(timeout=30_000)
    page.locator("#traj-table tr[data-rid] button.open-group").first.click()
    expect(page.locator("#group-view .side-by-side .col")).to_have_count(8, timeout=30_000)


def test_another_workspace_sees_none_of_these_jobs(page, server, finished_job):
    other = server.call("POST", "/v1/keys", json={"name": "guest", "workspace": "guests"})
    login(page, server, key=other["api_key"])
    expect(page.locator("#workspace")).to_have_text("workspace guests")
    expect(page.locator("#jobs-table")).to_contain_text("No jobs.")
    page.goto(f"{server.url}/#/jobs/{finished_job}/details")
    expect(page.locator(".error-box")).to_contain_text(f"no job '{finished_job}'")
    # Revoking the key signs the page out at its next call.
    gone = httpx.delete(
        f"{server.url}/v1/keys/{other['key_id']}",
        headers={"Authorization": f"Bearer {other['api_key']}"},
    )
    assert gone.status_code == 200, gone.text
    page.click("a.nav:has-text('Jobs')")
    expect(page.locator(".login-error")).to_contain_text("no longer accepted")


def test_trace_waterfall_links_each_span_to_its_message(page, server, finished_job):
    """The replay's waterfall: the rollout's spans from the trainer, the workers and the
    gateway (stored with the trajectory, no collector); an LLM span jumps to its message."""
    login(page, server)
    page.goto(f"{server.url}/#/jobs/{finished_job}/trajectories?step=1")
    page.locator("#traj-table tr[data-rid]").first.locator("a.open-traj").click()
    waterfall = page.locator("#waterfall")
    expect(waterfall).to_be_visible()
    for name in ("rollout", "invoke_agentic_rl", "generate", "reward exact"):
        expect(waterfall.locator(f'.span-row[data-span="{name}"]').first).to_be_visible()
    services = waterfall.locator(".span-label .muted").all_inner_texts()
    assert {"rltune-trainer", "rltune-function-rollout", "rltune-function-reward"} <= {
        s.strip() for s in services}
    chat = waterfall.locator('.span-row[data-span^="chat"]').first
    target = chat.get_attribute("data-link")
    assert target and target.startswith("msg-")
    expect(chat.locator(".span-info")).to_contain_text("ms")
    chat.click()
    message = page.locator(f"#{target}")
    expect(message).to_have_class(re.compile(r"\bspan-linked\b"))
    expect(message).to_have_attribute("data-role", "assistant")
    waterfall.scroll_into_view_if_needed()
    shot(page, "trajectory-trace")
