// Compare runs: pick jobs and metrics, one chart per metric with a curve per job
// (charts.js's overlayChart, on the vendored uPlot), the doctor's alerts as markers at their steps,
// and the picked curves as CSV. The choice lives in the hash (#/compare?jobs=a,b&metrics=m),
// so a comparison is a link.
import { api } from "../api.js";
import { overlayChart } from "../charts.js";
import { errorBox, h, mount, statusBadge } from "../dom.js";
import { hashOf } from "../router.js";

const DEFAULT_METRICS = ["critic/rewards/mean", "validation/data/reward/mean@1"];
const MAX_JOBS = 100;

function csvCell(v) {
  const s = v === null || v === undefined ? "" : String(v);
  return /[",\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** The curves as CSV, one row per point: job_id,job_name,metric,step,value. */
export function toCsv(jobs, metrics, data) {
  const lines = ["job_id,job_name,metric,step,value"];
  for (const metric of metrics) {
    for (const job of jobs) {
      for (const [step, value] of data[job.job_id]?.series?.[metric] || []) {
        lines.push([job.job_id, job.job_name || "", metric, step, value].map(csvCell).join(","));
      }
    }
  }
  return `${lines.join("\n")}\n`;
}

export function renderCompare(el, route) {
  const q = route.query;
  const picked = new Set((q.get("jobs") || "").split(",").filter(Boolean));
  const metrics = new Set((q.get("metrics") || "").split(",").filter(Boolean));
  const data = {}; // job_id -> {series, names, alerts}
  let jobs = [];
  let charts = [];
  let alive = true;

  const jobList = h("div", { class: "compare-jobs", id: "compare-jobs" }, h("p", { class: "muted" }, "Loading jobs…"));
  const metricFilter = h("input", { type: "search", id: "compare-metric-filter", placeholder: "filter metrics", oninput: () => drawMetricList() });
  const metricList = h("div", { class: "compare-metrics", id: "compare-metrics" });
  const csvBtn = h("button", { class: "btn small", id: "compare-csv", disabled: true, onclick: () => exportCsv() }, "Export CSV");
  const chartGrid = h("div", { class: "chart-grid", id: "compare-charts" });
  mount(
    el,
    h("div", { class: "toolbar" }, h("h2", {}, "Compare runs"), csvBtn),
    h(
      "div",
      { class: "compare-pickers" },
      h("section", { class: "card" }, h("h3", {}, "Jobs"), jobList),
      h("section", { class: "card" }, h("h3", {}, "Metrics"), metricFilter, metricList),
    ),
    chartGrid,
  );

  // in the order they were picked (the first is the first colour)
  const chosenJobs = () => [...picked].map((id) => jobs.find((j) => j.job_id === id)).filter(Boolean);

  function syncHash() {
    const hash = hashOf(["compare"], { jobs: [...picked].join(","), metrics: [...metrics].join(",") });
    if (window.location.hash !== hash) history.replaceState(null, "", hash);
  }

  function drawJobList() {
    if (!jobs.length) {
      mount(jobList, h("p", { class: "muted" }, "No jobs yet."));
      return;
    }
    mount(
      jobList,
      h(
        "table",
        { class: "table compact" },
        h("tbody", {}, jobs.map((j) =>
          h(
            "tr",
            { "data-job": j.job_id },
            h("td", {}, h("input", {
              type: "checkbox",
              class: "compare-job",
              "data-job": j.job_id,
              checked: picked.has(j.job_id),
              onchange: (ev) => toggleJob(j.job_id, ev.target.checked),
            })),
            h("td", {}, j.job_id, j.job_name ? h("div", { class: "muted small" }, j.job_name) : null),
            h("td", {}, statusBadge(j.status)),
          ),
        )),
      ),
    );
  }

  function allNames() {
    const names = new Set();
    for (const j of chosenJobs()) for (const n of data[j.job_id]?.names || []) names.add(n);
    return [...names].sort();
  }

  function drawMetricList() {
    const names = allNames();
    const f = metricFilter.value.trim().toLowerCase();
    const shown = names.filter((n) => !f || n.toLowerCase().includes(f) || metrics.has(n));
    if (!names.length) {
      mount(metricList, h("p", { class: "muted" }, picked.size ? "Loading metrics…" : "Pick jobs first."));
      return;
    }
    mount(
      metricList,
      shown.map((n) =>
        h(
          "label",
          { class: "compare-metric" },
          h("input", {
            type: "checkbox",
            class: "compare-metric-box",
            "data-metric": n,
            checked: metrics.has(n),
            onchange: (ev) => {
              if (ev.target.checked) metrics.add(n);
              else metrics.delete(n);
              drawCharts();
            },
          }),
          " ",
          n,
        ),
      ),
    );
  }

  function drawCharts() {
    syncHash();
    for (const c of charts) c.destroy();
    charts = [];
    const chosen = chosenJobs();
    csvBtn.disabled = !(chosen.length && metrics.size);
    if (!chosen.length || !metrics.size) {
      mount(chartGrid, h("p", { class: "muted" }, "Pick one or more jobs and metrics to overlay their curves."));
      return;
    }
    if (chosen.some((j) => !data[j.job_id])) {
      mount(chartGrid, h("p", { class: "muted" }, "Loading…"));
      return;
    }
    charts = [...metrics].sort().map((m) => overlayChart(m, chosen, data));
    mount(chartGrid, charts.map((c) => c.card));
  }

  async function loadJob(id) {
    if (data[id]) return;
    const [m, a] = await Promise.all([
      api.metrics(id),
      api.alerts(id).catch(() => ({ alerts: [] })),
    ]);
    data[id] = { series: m.series || {}, names: m.names || Object.keys(m.series || {}), alerts: a.alerts || [] };
  }

  async function toggleJob(id, on) {
    if (on) picked.add(id);
    else picked.delete(id);
    if (on && !metrics.size) for (const d of DEFAULT_METRICS) metrics.add(d);
    drawMetricList();
    drawCharts();
    try {
      await loadJob(id);
    } catch (e) {
      if (alive) chartGrid.prepend(errorBox(e));
      return;
    }
    if (!alive) return;
    drawMetricList();
    drawCharts();
  }

  function exportCsv() {
    const csv = toCsv(chosenJobs(), [...metrics].sort(), data);
    const a = h("a", {
      href: URL.createObjectURL(new Blob([csv], { type: "text/csv" })),
      download: `rltune-compare-${chosenJobs().map((j) => j.job_id).join("_").slice(0, 120)}.csv`,
    });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }

  (async () => {
    try {
      const page = await api.jobs({ page_no: 1, page_size: MAX_JOBS });
      if (!alive) return;
      jobs = page.items || [];
      drawJobList();
      await Promise.all([...picked].filter((id) => jobs.some((j) => j.job_id === id)).map(loadJob));
      if (!alive) return;
      if (picked.size && !metrics.size) for (const d of DEFAULT_METRICS) metrics.add(d);
      drawMetricList();
      drawCharts();
    } catch (e) {
      if (alive) mount(jobList, errorBox(e));
    }
  })();
  drawMetricList();
  drawCharts();
  return () => {
    alive = false;
    for (const c of charts) c.destroy();
  };
}
