// Every chart of the console, on the vendored uPlot (assets/vendor/uplot): a job's metric
// chart (smoothing, hover values, a step range with mean / max / min, the doctor's alerts as
// markers), the overlay of several jobs' curves (Compare runs), the job list's sparkline and a
// step's reward histogram. The data helpers (smoothing, aligning series, bins) are pure.
import { fmtNum, h, stats } from "./dom.js";
import uPlot from "./vendor/uplot/uPlot.esm.js";

export const COLORS = ["#2f6fde", "#e0692b", "#2a9d5c", "#a34fd1", "#c9a227", "#d43b5c"];
const WIDTH = 460;
const HEIGHT = 220;
const STEP_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];
const MAX_POINTS = 300; // draw a dot per step up to this many steps

/** Tensorboard-style debiased exponential moving average; weight in [0, 1). */
export function smooth(values, weight) {
  if (!weight) return values.slice();
  const out = [];
  let last = 0;
  let n = 0;
  for (const v of values) {
    if (v === null || !Number.isFinite(v)) {
      out.push(null);
      continue;
    }
    last = last * weight + (1 - weight) * v;
    n += 1;
    out.push(last / (1 - weight ** n));
  }
  return out;
}

/** Rows of x = the union of the series' steps and one y column per series (null where a
 * series has no value at that step): uPlot's aligned data. */
export function alignSeries(seriesList) {
  const steps = [...new Set(seriesList.flatMap((pts) => pts.map((p) => p[0])))].sort((a, b) => a - b);
  const index = new Map(steps.map((s, i) => [s, i]));
  const ys = seriesList.map((pts) => {
    const col = new Array(steps.length).fill(null);
    for (const [s, v] of pts) col[index.get(s)] = Number.isFinite(v) ? v : null;
    return col;
  });
  return [steps, ...ys];
}

/** ``nbins`` equal bins over the finite values: [{lo, hi, count}]. */
export function binValues(values, nbins = 10) {
  const v = values.filter((x) => Number.isFinite(x));
  if (!v.length) return [];
  const lo = Math.min(...v);
  const hi = Math.max(...v);
  if (hi === lo) return [{ lo, hi, count: v.length }];
  const step = (hi - lo) / nbins;
  const bins = Array.from({ length: nbins }, (_, i) => ({ lo: lo + i * step, hi: lo + (i + 1) * step, count: 0 }));
  for (const x of v) bins[Math.min(nbins - 1, Math.floor((x - lo) / step))].count += 1;
  return bins;
}

/** A y range with a margin: 5% of the span, or ±10% (±1 at 0) around a constant. A span
 * within rounding of its values (a smoothed constant: 0.9999999999999999 to 1.0000000000000002)
 * is a constant: uPlot cannot tick it. */
export function padRange(lo, hi) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [0, 1];
  if (hi - lo <= 1e-9 * Math.max(Math.abs(lo), Math.abs(hi))) {
    const d = Math.abs(lo) * 0.1 || 1;
    return [lo - d, hi + d];
  }
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

/** The doctor's alerts over a chart: a dashed line at each alert's step with its code (in
 * ``m.color`` when given), elements over the plot so they carry the hover text and follow
 * zoom. ``place(u)`` runs after every redraw (uPlot's draw hook). */
function alertLayer(markers) {
  const layer = h("div", { class: "alert-layer" });
  const place = (u) => {
    if (layer.parentNode !== u.over) u.over.append(layer);
    const shown = markers.filter((m) => m.step >= u.scales.x.min && m.step <= u.scales.x.max);
    layer.replaceChildren(
      ...shown.map((m) =>
        h(
          "div",
          {
            class: "alert-marker",
            "data-code": m.code,
            "data-step": String(m.step),
            ...(m.job ? { "data-job": m.job } : {}),
            title: `${m.job ? `${m.job} ` : ""}step ${m.step}: ${m.code} ${m.title}`,
            style: { left: `${u.valToPos(m.step, "x")}px`, ...(m.color ? { borderColor: m.color, color: m.color } : {}) },
          },
          h("span", { class: "alert-code" }, m.code),
        ),
      ),
    );
  };
  return place;
}

/** Draws ``opts`` with ``data`` into ``host`` at the host's width once it is laid out, and
 * again whenever that width changes. Returns a handle whose ``u`` is the uPlot (null until
 * the first draw) and ``destroy()``. */
function plotInto(host, opts, data, onReady) {
  const handle = { u: null, destroy() {} };
  const draw = () => {
    const width = Math.max(200, Math.floor(host.clientWidth) || opts.width);
    if (handle.u) {
      if (Math.abs(handle.u.width - width) > 1) handle.u.setSize({ width, height: opts.height });
      return;
    }
    handle.u = new uPlot({ ...opts, width }, data, host);
    onReady?.(handle.u);
  };
  const seen = new ResizeObserver(() => host.isConnected && draw());
  seen.observe(host);
  handle.destroy = () => {
    seen.disconnect();
    handle.u?.destroy();
  };
  return handle;
}

/**
 * A job's metric chart card.
 *   lineChart({title, points: [[step, value], ...], smoothing, markers})
 * ``markers`` ([{step, code, title}]: the training doctor's alerts) draw a dashed line with the
 * code at their steps. Returns the card element with ``.setSmoothing(w)`` and
 * ``.selectRange(a, b)``. Hovering shows the values at the nearest step; dragging selects a
 * step range, shows mean / max / min of the raw values in it and sends a ``rangeselect`` event
 * (double-click clears the selection).
 */
export function lineChart({ title, points: all, smoothing = 0, markers = [] }) {
  const card = h("div", { class: "chart", "data-metric": title });
  const info = h("div", { class: "chart-info muted" }, " ");
  const host = h("div", { class: "uplot-host" });
  card.append(h("div", { class: "chart-title" }, title), host, info);
  const points = (all || []).filter(([, y]) => y !== null && Number.isFinite(y));
  if (!points.length) {
    info.textContent = "no data";
    return card;
  }
  const xs = points.map((p) => p[0]);
  const raw = points.map((p) => p[1]);
  const color = COLORS[0];
  let range = null;
  let weight = smoothing;
  let dragging = false; // a selection is the user's only when it starts with a press on the plot

  const showRange = () => {
    const [a, b] = range;
    const st = stats(points.filter(([x]) => x >= a && x <= b).map((p) => p[1]));
    info.textContent = `steps ${a}–${b}: mean ${fmtNum(st.mean)} · max ${fmtNum(st.max)} · min ${fmtNum(st.min)}`;
    info.dataset.range = `${a}-${b}`;
  };
  const showHover = (u) => {
    const i = u.cursor.idx;
    if (i === null || i === undefined) {
      delete info.dataset.hover;
      if (range) showRange();
      return;
    }
    const sm = u.data[2][i];
    info.textContent = `step ${xs[i]}: ${fmtNum(raw[i])}${weight ? ` (smoothed ${fmtNum(sm)})` : ""}`;
    info.dataset.hover = String(xs[i]);
  };
  const fromSelect = (u) => {
    if (!dragging) return; // uPlot re-applies a selection after a resize, too
    dragging = false;
    if (u.select.width < 4) return; // a click, not a drag
    const a = Math.ceil(u.posToVal(u.select.left, "x"));
    const b = Math.floor(u.posToVal(u.select.left + u.select.width, "x"));
    if (b < a) return;
    range = [a, b];
    showRange();
    card.dispatchEvent(new CustomEvent("rangeselect", { detail: range, bubbles: true }));
  };
  const place = alertLayer(markers);
  const opts = {
    width: WIDTH,
    height: HEIGHT,
    scales: { x: { time: false }, y: { range: (u, lo, hi) => padRange(lo, hi) } },
    axes: [{ incrs: STEP_INCRS }, { size: 52, values: (u, vals) => vals.map((v) => fmtNum(v, 3)) }],
    legend: { show: false },
    cursor: { drag: { x: true, y: false, setScale: false } },
    hooks: { draw: [place], setCursor: [showHover], setSelect: [fromSelect] },
    series: [
      {},
      { label: "raw", stroke: color, width: 1, alpha: 0.3, show: Boolean(weight), points: { show: false } },
      { label: title, stroke: color, width: 1.8, points: { show: xs.length <= MAX_POINTS, size: 4, fill: color } },
    ],
  };
  const plot = plotInto(host, opts, [xs, raw, smooth(raw, weight)], (u) => {
    card.uplot = u;
    u.over.addEventListener("mousedown", () => {
      dragging = true;
    });
    u.over.addEventListener("dblclick", () => {
      range = null;
      u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
      info.textContent = " ";
      delete info.dataset.range;
    });
    if (range) card.selectRange(...range);
  });
  card.setSmoothing = (w) => {
    weight = w;
    if (!plot.u) return;
    plot.u.setSeries(1, { show: Boolean(w) });
    plot.u.setData([xs, raw, smooth(raw, w)], false);
    plot.u.redraw();
  };
  /** Select a step range programmatically (the "steps" inputs and the other charts use it). */
  card.selectRange = (a, b) => {
    range = [a, b];
    showRange();
    const u = plot.u;
    if (!u) return;
    const left = u.valToPos(Math.max(a, xs[0]), "x");
    const right = u.valToPos(Math.min(b, xs[xs.length - 1]), "x");
    u.setSelect({ left, top: 0, width: Math.max(0, right - left), height: u.over.clientHeight }, false);
  };
  card.destroy = plot.destroy;
  return card;
}

/** One chart of ``metric`` with a curve per job (``jobs``: [{job_id, job_name}], ``data``:
 * job_id -> {series, alerts}) and the jobs' alerts as markers in the job's colour; drag to
 * zoom, double-click to reset. Returns {card, destroy}. */
export function overlayChart(metric, jobs, data) {
  const card = h("div", { class: "chart compare-chart", "data-metric": metric });
  const info = h("div", { class: "chart-info muted" }, " ");
  const host = h("div", { class: "uplot-host" });
  card.append(h("div", { class: "chart-title" }, metric), host, info);
  const shown = jobs.filter((j) => (data[j.job_id]?.series?.[metric] || []).length);
  if (!shown.length) {
    info.textContent = "no data for these jobs";
    return { card, destroy() {} };
  }
  const aligned = alignSeries(shown.map((j) => data[j.job_id].series[metric]));
  const markers = shown.flatMap((j, i) =>
    (data[j.job_id].alerts || []).map((a) => ({ ...a, job: j.job_id, color: COLORS[i % COLORS.length] })),
  );
  const opts = {
    width: WIDTH,
    height: HEIGHT,
    scales: { x: { time: false }, y: { range: (u, lo, hi) => padRange(lo, hi) } },
    axes: [{ label: "step", incrs: STEP_INCRS }, { size: 56 }],
    legend: { live: true },
    cursor: { drag: { x: true, y: false } },
    hooks: { draw: [alertLayer(markers)] },
    series: [
      { label: "step", value: (u, v) => (v === null || v === undefined ? "–" : String(v)) },
      ...shown.map((j, i) => ({
        label: j.job_name ? `${j.job_name} (${j.job_id})` : j.job_id,
        stroke: COLORS[i % COLORS.length],
        width: 1.5,
        spanGaps: true,
        points: { show: aligned[0].length <= MAX_POINTS },
        value: (u, v) => fmtNum(v),
      })),
    ],
  };
  const plot = plotInto(host, opts, aligned);
  info.textContent = `${shown.length} job${shown.length === 1 ? "" : "s"} · drag to zoom, double-click to reset`;
  return { card, destroy: plot.destroy };
}

/** A tiny line of values, no axes (the job list's reward trend). */
export function sparkline(values, { width = 90, height = 22 } = {}) {
  const v = values.filter((x) => Number.isFinite(x));
  const host = h("div", { class: "spark", style: { width: `${width}px`, height: `${height}px` } });
  if (v.length < 2) return host;
  host.dataset.points = String(v.length);
  const opts = {
    width,
    height,
    scales: { x: { time: false } },
    axes: [{ show: false }, { show: false }],
    legend: { show: false },
    cursor: { show: false },
    padding: [2, 1, 2, 1],
    series: [{}, { stroke: COLORS[0], width: 1.5, points: { show: false } }],
  };
  host.uplot = new uPlot(opts, [v.map((_, i) => i), v], host);
  return host;
}

/** A small bar chart of ``bins`` ([{lo, hi, count}], e.g. from ``binValues``): the reward
 * distribution of a step; the host's title lists every bin. */
export function histogram(bins, { width = 160, height = 36 } = {}) {
  const host = h("div", { class: "hist", style: { width: `${width}px`, height: `${height}px` } });
  if (!bins.length) return host;
  host.title = bins.map((b) => `${fmtNum(b.lo, 3)} – ${fmtNum(b.hi, 3)}: ${b.count}`).join("\n");
  host.dataset.bins = String(bins.length);
  const opts = {
    width,
    height,
    scales: { x: { time: false, range: [-0.5, bins.length - 0.5] }, y: { range: (u, lo, hi) => [0, hi || 1] } },
    axes: [{ show: false }, { show: false }],
    legend: { show: false },
    cursor: { show: false },
    padding: [1, 0, 0, 0],
    series: [{}, { fill: "#7aa3ec", stroke: "#7aa3ec", paths: uPlot.paths.bars({ size: [0.9, Infinity] }), points: { show: false } }],
  };
  host.uplot = new uPlot(opts, [bins.map((_, i) => i), bins.map((b) => b.count)], host);
  return host;
}
