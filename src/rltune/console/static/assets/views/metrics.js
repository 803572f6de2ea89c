// Job → Metrics: one chart per metric the trainer wrote, grouped the way the clouds group
// them, with smoothing, hover values and a step range (drag on any chart, or type it) that
// shows mean / max / min on every chart. Refreshes while the job runs.
import { api } from "../api.js";
import { lineChart } from "../charts.js";
import { errorBox, h, mount } from "../dom.js";

const GROUPS = [
  ["actor", "Actor"],
  ["critic", "Critic"],
  ["trajectory", "Trajectory"],
  ["trace", "Trace"],
  ["timing", "Timing"],
  ["perf", "Perf"],
  ["fully_async", "Fully async"],
  ["validation", "Validation"],
  ["custom", "Custom reward metrics"],
  ["other", "Other"],
];

/** The group key of a metric name. */
export function groupOf(name) {
  if (/^trace\/(reward_metrics|rollout_metrics)\//.test(name)) return "custom";
  const head = name.split("/")[0];
  if (head === "val" || head === "test") return "validation";
  return GROUPS.some((g) => g[0] === head) ? head : "other";
}

export function renderMetrics(el, ctx) {
  let smoothing = Number(localStorage.getItem("rltune.smoothing") || 0.6);
  let charts = [];
  let range = null;
  let timer = null;
  let alive = true;
  let lastKey = "";

  const slider = h("input", {
    type: "range",
    id: "smoothing",
    min: 0,
    max: 0.95,
    step: 0.05,
    value: smoothing,
    oninput: () => {
      smoothing = Number(slider.value);
      label.textContent = smoothing.toFixed(2);
      localStorage.setItem("rltune.smoothing", String(smoothing));
      for (const c of charts) c.setSmoothing?.(smoothing);
    },
  });
  const label = h("span", { class: "muted" }, smoothing.toFixed(2));
  const from = h("input", { type: "number", id: "range-from", placeholder: "from step", class: "narrow" });
  const to = h("input", { type: "number", id: "range-to", placeholder: "to step", class: "narrow" });
  const filter = h("input", { type: "search", id: "metric-filter", placeholder: "filter metrics", oninput: () => draw(last) });
  // Like the clouds' consoles: from a suspicious step range straight to its trajectories.
  const toTraj = h("a", { id: "range-trajectories", class: "small", hidden: true }, "");
  const showLink = () => {
    toTraj.hidden = false;
    toTraj.href = `#/jobs/${encodeURIComponent(ctx.jobId)}/trajectories?step=${Math.max(1, range[0])}`;
    toTraj.textContent = `trajectories of steps ${range[0]}–${range[1]} →`;
  };
  const applyRange = () => {
    if (from.value === "" || to.value === "") return;
    range = [Number(from.value), Number(to.value)];
    for (const c of charts) c.selectRange?.(...range);
    showLink();
  };
  const body = h("div", { id: "metric-groups" });
  mount(
    el,
    h(
      "div",
      { class: "toolbar" },
      h("label", {}, "Smoothing ", slider, " ", label),
      h("label", {}, "Steps ", from, " – ", to),
      h("button", { class: "btn small", id: "apply-range", onclick: applyRange }, "Show mean / max / min"),
      toTraj,
      filter,
    ),
    body,
  );
  body.addEventListener("rangeselect", (ev) => {
    range = ev.detail;
    from.value = range[0];
    to.value = range[1];
    for (const c of charts) if (c !== ev.target) c.selectRange?.(...range);
    showLink();
  });

  let last = null;
  function draw(data) {
    if (!data) return;
    last = data;
    const q = filter.value.trim().toLowerCase();
    const names = Object.keys(data.series || {}).filter((n) => !q || n.toLowerCase().includes(q)).sort();
    for (const c of charts) c.destroy?.();
    charts = [];
    if (!names.length) {
      mount(body, h("p", { class: "muted" }, "No metrics yet."));
      return;
    }
    const sections = GROUPS.map(([key, title]) => {
      const mine = names.filter((n) => groupOf(n) === key);
      if (!mine.length) return null;
      return h(
        "section",
        { class: "metric-group", "data-group": key },
        h("h3", {}, `${title} `, h("span", { class: "muted small" }, `(${mine.length})`)),
        h(
          "div",
          { class: "chart-grid" },
          mine.map((n) => {
            const c = lineChart({ title: n, points: data.series[n], smoothing, markers: data.alerts || [] });
            charts.push(c);
            return c;
          }),
        ),
      );
    });
    mount(body, sections);
    if (range) for (const c of charts) c.selectRange?.(...range);
  }

  async function load() {
    try {
      const data = await api.metrics(ctx.jobId);
      // The training doctor's alerts mark the charts at their steps.
      data.alerts = (await api.alerts(ctx.jobId).catch(() => ({ alerts: [] }))).alerts;
      if (!alive) return;
      // Redraw only when something changed (keeps hover and selection stable on refresh).
      const key = Object.entries(data.series || {}).map(([k, v]) => `${k}:${v.length}`).join(",") + `|${data.alerts.length}`;
      if (key !== lastKey) {
        lastKey = key;
        draw(data);
      }
    } catch (e) {
      if (alive) mount(body, errorBox(e));
    }
    if (alive && ctx.job && ["PENDING", "RUNNING"].includes(ctx.job.status)) timer = setTimeout(load, 5000);
  }
  load();
  return () => {
    alive = false;
    clearTimeout(timer);
    for (const c of charts) c.destroy?.();
  };
}
