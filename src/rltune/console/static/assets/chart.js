// SVG charts written for the console: a line chart with smoothing, hover values and a
// step-range selection (mean / max / min), a sparkline, and a small histogram. Our own code
// keeps the package offline and tiny; the charts only need a few hundred points each.
import { fmtNum, h, stats } from "./dom.js";

const W = 460;
const H = 220;
const PAD = { l: 52, r: 12, t: 10, b: 26 };
const COLORS = ["#2f6fde", "#e0692b", "#2a9d5c", "#a34fd1", "#c9a227", "#d43b5c"];

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

/** "Nice" tick values covering [lo, hi]. */
export function ticks(lo, hi, count = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push(Number(v.toFixed(12)));
  }
  return out;
}

function extent(series) {
  let x0 = Infinity;
  let x1 = -Infinity;
  let y0 = Infinity;
  let y1 = -Infinity;
  for (const s of series) {
    for (const [x, y] of s.points) {
      if (y === null || !Number.isFinite(y)) continue;
      x0 = Math.min(x0, x);
      x1 = Math.max(x1, x);
      y0 = Math.min(y0, y);
      y1 = Math.max(y1, y);
    }
  }
  if (x0 === Infinity) return null;
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) {
    const d = Math.abs(y0) * 0.1 || 1;
    y0 -= d;
    y1 += d;
  }
  const pad = (y1 - y0) * 0.05;
  return { x0, x1, y0: y0 - pad, y1: y1 + pad };
}

function pathOf(points, sx, sy) {
  let d = "";
  let pen = false;
  for (const [x, y] of points) {
    if (y === null || !Number.isFinite(y)) {
      pen = false;
      continue;
    }
    d += `${pen ? "L" : "M"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`;
    pen = true;
  }
  return d;
}

/**
 * A line chart card.
 *   lineChart({title, series: [{name, points: [[step, value], ...]}], smoothing, markers})
 * ``markers`` ([{step, code, title}]: the training doctor's alerts) draw a dashed line with the
 * code at their steps.
 * Returns an element with `.setSmoothing(w)`. Hovering shows the values at the nearest step;
 * dragging selects a step range and shows mean / max / min of the raw values in it
 * (double-click clears the selection).
 */
export function lineChart({ title, series, smoothing = 0, markers = [] }) {
  const card = h("div", { class: "chart", "data-metric": title });
  const info = h("div", { class: "chart-info muted" }, " ");
  const svg = h("svg:svg", { viewBox: `0 0 ${W} ${H}`, class: "chart-svg", role: "img", "aria-label": title });
  card.append(h("div", { class: "chart-title" }, title), svg, info);
  const ext = extent(series);
  if (!ext) {
    info.textContent = "no data";
    return card;
  }
  const sx = (x) => PAD.l + ((x - ext.x0) / (ext.x1 - ext.x0)) * (W - PAD.l - PAD.r);
  const sy = (y) => H - PAD.b - ((y - ext.y0) / (ext.y1 - ext.y0)) * (H - PAD.t - PAD.b);
  const invX = (px) => ext.x0 + ((px - PAD.l) / (W - PAD.l - PAD.r)) * (ext.x1 - ext.x0);

  const axes = h("svg:g", { class: "axes" });
  for (const v of ticks(ext.y0, ext.y1, 4)) {
    axes.append(
      h("svg:line", { x1: PAD.l, x2: W - PAD.r, y1: sy(v), y2: sy(v), class: "grid" }),
      h("svg:text", { x: PAD.l - 4, y: sy(v) + 3, "text-anchor": "end" }, fmtNum(v, 3)),
    );
  }
  for (const v of ticks(ext.x0, ext.x1, 5).filter((t) => Number.isInteger(t))) {
    axes.append(h("svg:text", { x: sx(v), y: H - 8, "text-anchor": "middle" }, String(v)));
  }
  const sel = h("svg:rect", { class: "sel", y: PAD.t, height: H - PAD.t - PAD.b, width: 0, x: 0 });
  const lines = h("svg:g", {});
  const cursor = h("svg:line", { class: "cursor", y1: PAD.t, y2: H - PAD.b, visibility: "hidden" });
  svg.append(axes, sel, lines, cursor);
  for (const m of markers) {
    if (m.step < ext.x0 || m.step > ext.x1) continue;
    svg.append(
      h(
        "svg:g",
        { class: "alert-marker", "data-code": m.code, "data-step": String(m.step) },
        h("svg:line", { x1: sx(m.step), x2: sx(m.step), y1: PAD.t, y2: H - PAD.b, class: "alert-line" }),
        h("svg:text", { x: sx(m.step) + 2, y: PAD.t + 8, class: "alert-code" }, m.code),
        h("svg:title", {}, `step ${m.step}: ${m.code} ${m.title}`),
      ),
    );
  }

  const draw = (weight) => {
    lines.replaceChildren();
    series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      const ys = smooth(s.points.map((p) => p[1]), weight);
      const sm = s.points.map((p, j) => [p[0], ys[j]]);
      if (weight) {
        lines.append(h("svg:path", { d: pathOf(s.points, sx, sy), class: "raw", stroke: color }));
      }
      lines.append(h("svg:path", { d: pathOf(sm, sx, sy), class: "line", stroke: color }));
      if (s.points.length <= 300) {
        for (const [x, y] of s.points) {
          if (y === null || !Number.isFinite(y)) continue;
          lines.append(h("svg:circle", { cx: sx(x), cy: sy(y), r: 2.2, class: "pt", fill: color }));
        }
      }
    });
  };
  draw(smoothing);
  card.setSmoothing = (w) => {
    smoothing = w;
    draw(w);
  };

  // Hover and range selection work in SVG user units, whatever the rendered size.
  const toUser = (ev) => {
    const r = svg.getBoundingClientRect();
    return ((ev.clientX - r.left) / r.width) * W;
  };
  const nearest = (x) => {
    let best = null;
    for (const [px] of series[0].points) {
      if (best === null || Math.abs(px - x) < Math.abs(best - x)) best = px;
    }
    return best;
  };
  let dragFrom = null;
  let range = null;
  const showRange = () => {
    if (!range) return;
    const [a, b] = range;
    const parts = series.map((s) => {
      const st = stats(s.points.filter(([x]) => x >= a && x <= b).map((p) => p[1]));
      const name = series.length > 1 ? `${s.name} ` : "";
      return `${name}steps ${a}–${b}: mean ${fmtNum(st.mean)} · max ${fmtNum(st.max)} · min ${fmtNum(st.min)}`;
    });
    info.textContent = parts.join(" | ");
    info.dataset.range = `${a}-${b}`;
  };
  svg.addEventListener("mousedown", (ev) => {
    dragFrom = toUser(ev);
    ev.preventDefault();
  });
  svg.addEventListener("mousemove", (ev) => {
    const ux = toUser(ev);
    const step = nearest(invX(ux));
    cursor.setAttribute("x1", sx(step));
    cursor.setAttribute("x2", sx(step));
    cursor.setAttribute("visibility", "visible");
    if (dragFrom !== null) {
      const [l, r] = [Math.min(dragFrom, ux), Math.max(dragFrom, ux)];
      sel.setAttribute("x", l);
      sel.setAttribute("width", r - l);
      return;
    }
    const ys = series.map((s) => {
      const sm = smooth(s.points.map((p) => p[1]), smoothing);
      const j = s.points.findIndex((p) => p[0] === step);
      if (j < 0) return null;
      const raw = fmtNum(s.points[j][1]);
      const name = series.length > 1 ? `${s.name}: ` : "";
      return smoothing ? `${name}${raw} (smoothed ${fmtNum(sm[j])})` : `${name}${raw}`;
    });
    info.textContent = `step ${step}: ${ys.filter(Boolean).join(" · ")}`;
    info.dataset.hover = String(step);
  });
  svg.addEventListener("mouseleave", () => {
    cursor.setAttribute("visibility", "hidden");
    if (range) showRange();
  });
  window.addEventListener("mouseup", (ev) => {
    if (dragFrom === null) return;
    const ux = toUser(ev);
    const a = invX(Math.min(dragFrom, ux));
    const b = invX(Math.max(dragFrom, ux));
    dragFrom = null;
    if (Math.abs(sx(b) - sx(a)) < 4) return; // a click, not a drag
    range = [Math.ceil(a), Math.floor(b)];
    showRange();
    card.dispatchEvent(new CustomEvent("rangeselect", { detail: range, bubbles: true }));
  });
  svg.addEventListener("dblclick", () => {
    range = null;
    sel.setAttribute("width", 0);
    info.textContent = " ";
    delete info.dataset.range;
  });
  /** Select a step range programmatically (tests and the "steps" inputs use it). */
  card.selectRange = (a, b) => {
    range = [a, b];
    sel.setAttribute("x", sx(a));
    sel.setAttribute("width", Math.max(0, sx(b) - sx(a)));
    showRange();
  };
  return card;
}

/** A tiny line of values (job list). */
export function sparkline(values, { width = 90, height = 22 } = {}) {
  const v = values.filter((x) => Number.isFinite(x));
  const svg = h("svg:svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "spark" });
  if (v.length < 2) return svg;
  const lo = Math.min(...v);
  const hi = Math.max(...v);
  const sy = (y) => height - 2 - ((y - lo) / (hi - lo || 1)) * (height - 4);
  const sx = (i) => (i / (v.length - 1)) * (width - 2) + 1;
  svg.append(h("svg:path", { d: v.map((y, i) => `${i ? "L" : "M"}${sx(i)},${sy(y)}`).join(""), class: "line" }));
  return svg;
}

/**
 * A small histogram of values (reward distribution of a step).
 * bins: [{lo, hi, count}] computed here when given raw values.
 */
export function histogram(bins, { width = 160, height = 36 } = {}) {
  const svg = h("svg:svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "hist" });
  if (!bins.length) return svg;
  const top = Math.max(...bins.map((b) => b.count)) || 1;
  const bw = width / bins.length;
  bins.forEach((b, i) => {
    const bh = (b.count / top) * (height - 2);
    svg.append(
      h(
        "svg:rect",
        { x: i * bw + 0.5, y: height - bh, width: Math.max(1, bw - 1), height: bh, class: "bar" },
        h("svg:title", {}, `${fmtNum(b.lo, 3)} – ${fmtNum(b.hi, 3)}: ${b.count}`),
      ),
    );
  });
  return svg;
}

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
