// Trajectory comparison, Volcano Ark's second mode: each trajectory against the one before
// it (in the order they were picked). First a thumbnail of every trajectory (status, reward
// and its change from the previous one, tokens, and a strip of its messages with those that
// differ from the previous trajectory's marked); zooming into one shows it side by side
// with the one before it (the pairwise view: the previous one as the baseline).
import { fmtNum, h, statusBadge } from "../dom.js";
import { compareView, textOf } from "./replay.js";

export const MODES = [
  ["baseline", "Against a baseline"],
  ["previous", "Each vs previous"],
];

/** The mode switch of the comparison (hash query `mode`). */
export function modeSwitch(mode, onMode) {
  const current = mode === "previous" ? "previous" : "baseline";
  return h(
    "div",
    { class: "row compare-modes", id: "compare-modes" },
    h("span", { class: "muted small" }, "Compare: "),
    MODES.map(([m, label]) =>
      h("button", { class: m === current ? "btn small primary" : "btn small", "data-mode": m, onclick: () => onMode(m) }, label),
    ),
  );
}

/** Whether message `i` of `t` differs from the same message of `prev`. */
export function messageDiffers(t, prev, i) {
  const m = (t.messages || [])[i];
  const b = (prev.messages || [])[i];
  if (!m || !b) return true;
  return textOf(b.content) !== textOf(m.content) || JSON.stringify(b.tool_calls || []) !== JSON.stringify(m.tool_calls || []);
}

function change(v, prev) {
  if (!Number.isFinite(v) || !Number.isFinite(prev)) return null;
  const d = v - prev;
  if (d === 0) return h("span", { class: "delta same" }, " ±0");
  return h("span", { class: d > 0 ? "delta up" : "delta down" }, ` ${d > 0 ? "+" : ""}${fmtNum(d, 3)}`);
}

function thumbnail(t, prev, i, onZoom) {
  const msgs = t.messages || [];
  const changed = prev ? msgs.filter((_, j) => messageDiffers(t, prev, j)).length : 0;
  return h(
    "div",
    { class: "thumb", "data-rid": t.rollout_id, "data-index": String(i) },
    h("div", { class: "thumb-head" }, h("b", {}, `#${i + 1}`), " ", t.rollout_id),
    h("div", {}, statusBadge(t.status)),
    h("div", { class: "thumb-reward" }, "reward ", h("b", {}, fmtNum(t.reward)), prev ? change(t.reward, prev.reward) : null),
    h("div", { class: "muted small" }, `${t.response_tokens ?? "–"} response tokens · ${t.num_llm_calls ?? "–"} calls`),
    h(
      "div",
      { class: "strip", title: "messages; outlined: differs from the previous trajectory" },
      msgs.map((m, j) => h("span", { class: `cell role-${m.role}${prev && messageDiffers(t, prev, j) ? " differs" : ""}`, title: `${m.role}: ${textOf(m.content).slice(0, 80)}` })),
    ),
    prev
      ? h("div", { class: "muted small thumb-diff" }, `${changed} of ${msgs.length} messages differ from #${i}`)
      : h("div", { class: "muted small thumb-diff" }, "first: compared by the next one"),
    prev ? h("button", { class: "btn tiny zoom", "data-test": "zoom", onclick: () => onZoom(i) }, `Zoom #${i} → #${i + 1}`) : null,
  );
}

/**
 * Each-vs-previous comparison of 2–10 trajectories. `zoom` (an index ≥ 1, or empty) picks
 * the pair (zoom - 1, zoom) to show side by side; `onZoom(i | "")` changes it.
 */
export function chainView(trajs, zoom, { onZoom } = {}) {
  const z = Number(zoom);
  if (Number.isInteger(z) && z >= 1 && z < trajs.length) {
    const prev = trajs[z - 1];
    const cur = trajs[z];
    return h(
      "div",
      { class: "chain-zoom", id: "chain-zoom", "data-pair": `${z - 1}-${z}` },
      h(
        "div",
        { class: "row" },
        h("button", { class: "btn small", id: "chain-back", onclick: () => onZoom?.("") }, "‹ All thumbnails"),
        h("button", { class: "btn small", id: "chain-prev", disabled: z <= 1, onclick: () => onZoom?.(z - 1) }, "‹ Previous pair"),
        h("b", {}, ` #${z} ${prev.rollout_id} → #${z + 1} ${cur.rollout_id} `),
        h("button", { class: "btn small", id: "chain-next", disabled: z >= trajs.length - 1, onclick: () => onZoom?.(z + 1) }, "Next pair ›"),
      ),
      compareView([prev, cur], prev.rollout_id),
    );
  }
  return h(
    "div",
    { class: "compare chain", id: "chain-view" },
    h("h3", {}, `Each vs previous: ${trajs.length} trajectories`),
    h(
      "div",
      { class: "thumbs" },
      trajs.map((t, i) => thumbnail(t, i > 0 ? trajs[i - 1] : null, i, (k) => onZoom?.(k))),
    ),
  );
}
