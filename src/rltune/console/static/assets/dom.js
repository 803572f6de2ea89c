// Small DOM helpers and formatters shared by every view (no framework: the console is a
// handful of pages, and plain modules keep it offline and build-free).

/** h("div", {class: "x", onclick: fn}, child, [children], "text") -> Element */
export function h(tag, attrs, ...children) {
  const svg = tag.startsWith("svg:");
  const el = svg
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "value" && !svg) el.value = v;
    else if (k === "checked" && !svg) el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replace the children of `el`. */
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function fmtNum(v, digits = 4) {
  if (v === undefined || v === null || Number.isNaN(v)) return "–";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
  return String(Number(v.toFixed(digits)));
}

export function fmtTime(t) {
  if (!t) return "–";
  const d = typeof t === "number" ? new Date(t * 1000) : new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function fmtDuration(seconds) {
  if (seconds === undefined || seconds === null || seconds < 0) return "–";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

/** Seconds since epoch from a number (s) or an ISO string; null when absent. */
export function toEpoch(t) {
  if (t === undefined || t === null || t === "") return null;
  if (typeof t === "number") return t > 1e12 ? t / 1000 : t;
  const ms = Date.parse(t);
  return Number.isNaN(ms) ? null : ms / 1000;
}

export function statusBadge(status) {
  const s = String(status || "UNKNOWN").toUpperCase();
  return h("span", { class: `badge st-${s.toLowerCase()}`, "data-status": s }, s);
}

/** A modal confirmation; resolves true when the user confirms. */
export function confirmDialog(message, confirmLabel = "Confirm") {
  return new Promise((resolve) => {
    const close = (ok) => {
      overlay.remove();
      resolve(ok);
    };
    const overlay = h(
      "div",
      { class: "overlay", role: "dialog", "aria-modal": "true" },
      h(
        "div",
        { class: "dialog" },
        h("p", {}, message),
        h(
          "div",
          { class: "row end" },
          h("button", { class: "btn", onclick: () => close(false), "data-test": "dialog-cancel" }, "Cancel"),
          h(
            "button",
            { class: "btn danger", onclick: () => close(true), "data-test": "dialog-confirm" },
            confirmLabel,
          ),
        ),
      ),
    );
    document.body.append(overlay);
  });
}

export function errorBox(err) {
  const msg = err && err.message ? err.message : String(err);
  return h("div", { class: "error-box", role: "alert" }, msg);
}

/** Debounce a function (for search boxes that filter server-side). */
export function debounce(fn, ms = 300) {
  let t = null;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
}

export function stats(values) {
  const v = values.filter((x) => typeof x === "number" && Number.isFinite(x));
  if (!v.length) return { mean: null, max: null, min: null, n: 0 };
  let sum = 0;
  let max = -Infinity;
  let min = Infinity;
  for (const x of v) {
    sum += x;
    if (x > max) max = x;
    if (x < min) min = x;
  }
  return { mean: sum / v.length, max, min, n: v.length };
}

/**
 * {step, total} of a job's progress. The trainer's final progress record says `steps`
 * (no `step` / `total_steps`), so a finished job counts as steps / steps.
 */
export function progressOf(job) {
  const p = (job && job.progress) || {};
  const step = p.step ?? p.steps ?? null;
  const total = p.total_steps ?? (p.state === "finished" ? p.steps : null) ?? null;
  return { step, total, reward: p.reward ?? p.final_reward ?? null };
}
