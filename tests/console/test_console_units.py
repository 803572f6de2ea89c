"""The console's pure functions (smoothing, bins, grouping, best checkpoint, JSONL checks,
routes, progress, colours), run in the real browser as the page runs them."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def js(page, server):
    page.goto(server.url + "/")

    def run(module: str, body: str):
        return page.evaluate(
            f"async () => {{ const m = await import('/console/{module}'); return {body}; }}"
        )

    return run


def test_smoothing_is_debiased_and_keeps_gaps(js):
    assert js("charts.js", "m.smooth([2, 2, 2], 0.9)") == pytest.approx([2, 2, 2])
    assert js("charts.js", "m.smooth([1, 3], 0)") == [1, 3]
    out = js("charts.js", "m.smooth([0, null, 10], 0.5)")
    assert out[1] is None and 0 < out[2] < 10


def test_y_range_pads_a_constant_and_a_span(js):
    assert js("charts.js", "m.padRange(0, 0)") == [-1, 1]
    assert js("charts.js", "m.padRange(2, 2)") == pytest.approx([1.8, 2.2])
    assert js("charts.js", "m.padRange(0, 10)") == pytest.approx([-0.5, 10.5])
    # a smoothed constant differs from itself by rounding: still a constant, one that ticks
    assert js("charts.js", "m.padRange(0.9999999999999999, 1.0000000000000002)") == \
        pytest.approx([0.9, 1.1])
    assert js("charts.js", "m.padRange(null, null)") == [0, 1]


def test_a_smoothed_constant_metric_draws(js):
    # 19 steps of 1.0 smoothed at 0.6: the curve differs from 1 by rounding only (a nano run's
    # trace/success_rate/agent); the page fixture fails the test on any JavaScript error
    out = js("charts.js", """(async () => {
        const pts = Array.from({length: 19}, (_, i) => [i + 1, 1.0]);
        const c = m.lineChart({title: 'c', points: pts, smoothing: 0.6});
        c.style.width = '400px'; document.body.append(c);
        for (let i = 0; i < 50 && !c.uplot; i++) await new Promise((ok) => setTimeout(ok, 20));
        await new Promise((ok) => setTimeout(ok, 50));
        const y = c.uplot.scales.y;
        return [c.querySelectorAll('canvas').length, y.min < 1, y.max > 1];
    })()""")
    assert out == [1, True, True]


def test_sparkline_and_histogram_draw_on_a_canvas(js):
    out = js("charts.js", """(() => {
        const s = m.sparkline([0.1, 0.4, NaN, 0.3]);
        const b = m.histogram(m.binValues([0, 0.1, 0.5, 1, 1], 4));
        document.body.append(s, b);
        return [s.querySelectorAll('canvas').length, s.dataset.points,
                b.querySelectorAll('canvas').length, b.uplot.data[1], b.title.split('\\n').length];
    })()""")
    assert out == [1, "3", 1, [2, 0, 1, 2], 4]
    assert js("charts.js", "m.sparkline([1]).querySelectorAll('canvas').length") == 0


def test_bins(js):
    bins = js("charts.js", "m.binValues([0, 0.1, 0.5, 1, 1], 4)")
    assert [b["count"] for b in bins] == [2, 0, 1, 2]


def test_metric_groups_follow_the_clouds(js):
    names = [
        "actor/pg_loss",
        "critic/rewards/mean",
        "trajectory/response_length/mean",
        "trace/num_llm_calls/mean",
        "timing/s/step",
        "perf/throughput",
        "fully_async/staleness/mean",
        "validation/data/reward/mean@1",
        "trace/reward_metrics/exact/correct/mean",
        "trace/rollout_metrics/tool_calls/avg",
        "train/dropped_rollouts",
    ]
    got = js("views/metrics.js", f"{names!r}.map(m.groupOf)")
    assert got == [
        "actor",
        "critic",
        "trajectory",
        "trace",
        "timing",
        "perf",
        "fully_async",
        "validation",
        "custom",
        "custom",
        "other",
    ]


def test_best_checkpoint_is_the_highest_validation_reward_latest_on_ties(js):
    ck = (
        '[{"name":"a","validation_reward":0.5},{"name":"b","validation_reward":0.7},'
        '{"name":"c","validation_reward":0.7},{"name":"d","validation_reward":null}]'
    )
    assert js("views/outputs.js", f"m.bestCheckpoint({ck}).name") == "c"
    none = "m.bestCheckpoint([{name: 'x', validation_reward: null}])"
    assert js("views/outputs.js", none) is None


def test_jsonl_problems_name_each_bad_line(js):
    text = '{"a": 1}\n\n{bad\n"str"\n{"b": 2}'
    probs = js("views/datasets.js", f"m.jsonlProblems({json.dumps(text)})")
    assert [p["line"] for p in probs] == [3, 4]
    assert "JSON object" in probs[1]["message"]


def test_routes_round_trip_and_progress(js):
    h = js("router.js", "m.hashOf(['jobs', 'ft-1', 'trajectories'], {step: 3, q: 'a b', rid: ''})")
    assert h == "#/jobs/ft-1/trajectories?step=3&q=a+b"
    back = js("router.js", f"(r => [r.parts, r.query.get('q')])(m.parseHash({h!r}))")
    assert back == [["jobs", "ft-1", "trajectories"], "a b"]
    done = js("dom.js", "m.progressOf({progress: {steps: 6, state: 'finished'}})")
    assert done == {"step": 6, "total": 6, "reward": None}
    running = js("dom.js", "m.progressOf({progress: {step: 2, total_steps: 6, reward: 0.5}})")
    assert running == {"step": 2, "total": 6, "reward": 0.5}


def test_logprob_colours_run_from_green_to_red(js):
    assert js("views/replay.js", "m.logprobColor(0)") == "hsl(120, 75%, 82%)"
    assert js("views/replay.js", "m.logprobColor(-30)") == "hsl(0, 75%, 82%)"


def test_evaluation_side_by_side_and_playground_tokens(js):
    ev = {"evaluation_id": "ev-1", "result": {
        "n": 4, "k": 2, "threshold": 1.0, "prompts": 2,
        "models": [{"model": "base", "mean@1": 0.25, "pass@k": 0.5, "failed": 0},
                   {"model": "tuned", "mean@1": 0.75, "pass@k": 1.0, "failed": 1}],
        "per_prompt": [{"row_index": i, "prompt": f"q{i}", "models": {
            "base": {"mean@1": 0.25, "pass@k": 0.5}, "tuned": {"mean@1": 0.75, "pass@k": 1}}}
            for i in range(2)]}}
    out = js("views/models.js", f"""(() => {{
        const el = m.evalDetail({json.dumps(ev)});
        return [...el.querySelectorAll('#eval-totals .mean1')].map((td) => td.textContent)
          .concat([String(el.querySelectorAll('#eval-prompts tr').length)]); }})()""")
    assert out[:2] == ["0.25", "0.75"] and out[2] == "3"  # header + 2 prompts
    spans = js("views/playground.js", """(() => {
        const el = m.tokenSpans({content: [{token: 'a', logprob: 0}, {token: 'b', logprob: -5}]});
        return [...el.querySelectorAll('.tok')].map((s) => [s.textContent, s.style.background]);
    })()""")
    assert [t for t, _ in spans] == ["a", "b"] and spans[0][1] != spans[1][1]


def test_compare_aligns_jobs_on_their_steps_and_quotes_csv(js):
    aligned = js("charts.js", "m.alignSeries([[[1, 0.5], [3, 0.7]], [[2, 0.1], [3, NaN]]])")
    assert aligned == [[1, 2, 3], [0.5, None, 0.7], [None, 0.1, None]]
    csv = js("views/compare.js", """m.toCsv(
        [{job_id: "ft-a", job_name: 'say "hi", ok'}, {job_id: "ft-b"}], ["r"],
        {"ft-a": {series: {r: [[1, 0.5]]}}, "ft-b": {series: {r: [[1, 0.25], [2, 1]]}}})""")
    assert csv.splitlines() == ["job_id,job_name,metric,step,value",
                                'ft-a,"say ""hi"", ok",r,1,0.5', "ft-b,,r,1,0.25", "ft-b,,r,2,1"]


def test_a_replay_shows_why_each_failed_attempt_failed(js):
    t = {"rollout_id": "r.a1", "sample_index": 0, "status": "success", "attempts": 2,
         "attempt_errors": ["RuntimeError: tool down"], "messages": [], "tokens": []}
    text = js("views/replay.js", f"m.replayView({json.dumps(t)})"
                                 ".querySelector('#traj-attempt-errors').textContent")
    assert text == "attempt 1 failed: RuntimeError: tool down"
