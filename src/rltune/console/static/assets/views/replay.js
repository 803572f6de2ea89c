// Trajectory views: the replay of one trajectory (messages, tool calls and results,
// per-function rewards and metrics, advantage, token counts, errors, a token view coloured
// by log-prob), the group view (the n rollouts of one prompt side by side) and the
// comparison of 2–10 trajectories against a chosen baseline.
import { fmtNum, h, stats, statusBadge } from "../dom.js";
import { waterfallView } from "./waterfall.js";

export function textOf(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p === "string" ? p : p.text ?? JSON.stringify(p))).join("");
  return JSON.stringify(content);
}

/** First user message of a trajectory (the prompt), for lists and group headers. */
export function promptOf(t) {
  if (t.prompt) return t.prompt;
  const m = (t.messages || []).find((x) => x.role === "user");
  return m ? textOf(m.content) : "";
}

function prettyArgs(args) {
  if (typeof args !== "string") return JSON.stringify(args, null, 1);
  try {
    return JSON.stringify(JSON.parse(args));
  } catch {
    return args;
  }
}

/** One chat message, with its tool calls or its tool result. */
export function messageView(m, { compact = false, differs = false } = {}) {
  const calls = m.tool_calls || [];
  const text = textOf(m.content);
  return h(
    "div",
    { class: `msg role-${m.role}${differs ? " differs" : ""}`, "data-role": m.role },
    h(
      "div",
      { class: "msg-role" },
      m.role,
      m.role === "tool" && (m.name || m.tool_call_id) ? h("span", { class: "muted small" }, ` ${m.name || ""} ${m.tool_call_id || ""}`) : null,
    ),
    text ? h("div", { class: compact ? "msg-text compact" : "msg-text" }, text) : null,
    m.reasoning_content ? h("details", {}, h("summary", {}, "reasoning"), h("div", { class: "msg-text" }, m.reasoning_content)) : null,
    calls.map((c) =>
      h(
        "div",
        { class: "tool-call" },
        h("span", { class: "tool-name" }, `→ ${(c.function || {}).name || c.name || "tool"}`),
        h("code", {}, prettyArgs((c.function || {}).arguments ?? c.arguments ?? "")),
        c.id ? h("span", { class: "muted small" }, ` ${c.id}`) : null,
      ),
    ),
  );
}

function rewardTable(t) {
  const rewards = t.rewards || {};
  const metrics = t.reward_metrics || {};
  const names = [...new Set([...Object.keys(rewards), ...Object.keys(metrics)])];
  const rows = names.map((n) =>
    h(
      "tr",
      {},
      h("td", {}, n),
      h("td", { class: "num" }, fmtNum(rewards[n])),
      h(
        "td",
        { class: "small" },
        Object.entries(metrics[n] || {}).map(([k, v]) => h("span", { class: "chip" }, `${k} ${fmtNum(v)}`)),
      ),
    ),
  );
  const rm = Object.entries(t.rollout_metrics || {});
  return h(
    "table",
    { class: "grid-table", id: "reward-table" },
    h("tr", {}, h("th", {}, "function"), h("th", {}, "score"), h("th", {}, "reward metrics")),
    rows,
    rm.length
      ? h("tr", {}, h("td", {}, "rollout metrics"), h("td", {}, ""), h("td", { class: "small" }, rm.map(([k, v]) => h("span", { class: "chip" }, `${k} ${fmtNum(v)}`))))
      : null,
  );
}

/** Colour of a sampled token: green when likely, through yellow, to red when unlikely. */
export function logprobColor(lp) {
  const p = Math.exp(Math.max(-20, Math.min(0, lp)));
  const hue = Math.round(120 * p); // 0 red .. 120 green
  return `hsl(${hue}, 75%, 82%)`;
}

/** Tokens of each training row; sampled tokens (loss mask 1) are coloured by log-prob. */
export function tokenView(t) {
  const rows = t.tokens || [];
  if (!rows.length) return h("p", { class: "muted" }, "No tokens were captured for this trajectory.");
  return h(
    "div",
    { class: "token-view", id: "token-view" },
    h(
      "div",
      { class: "muted small legend" },
      "sampled tokens coloured by probability: ",
      [1, 0.5, 0.1, 0.01].map((p) => h("span", { class: "tok", style: { background: logprobColor(Math.log(p)) } }, `p=${p}`)),
      h("span", { class: "tok ctx" }, "context (not trained)"),
      rows.some((r) => r.text) ? null : h("span", {}, " · token text not available from the server: showing ids"),
    ),
    rows.map((row, ri) => {
      const ids = row.input_ids || [];
      const text = row.text || [];
      const mask = row.loss_mask || [];
      const lps = row.logprobs || [];
      let sampled = 0;
      let sum = 0;
      const spans = ids.map((id, i) => {
        const on = mask[i] === 1;
        const label = text[i] !== undefined ? text[i] : `#${id}`;
        if (on) {
          sampled += 1;
          sum += lps[i] || 0;
        }
        return h(
          "span",
          {
            class: on ? "tok" : "tok ctx",
            style: on ? { background: logprobColor(lps[i] ?? 0) } : undefined,
            title: `id ${id}${on ? ` · logprob ${fmtNum(lps[i] ?? 0, 4)} · p ${fmtNum(Math.exp(lps[i] ?? 0), 3)}` : " · context"}`,
          },
          label,
        );
      });
      return h(
        "div",
        { class: "token-row" },
        h("div", { class: "muted small" }, `row ${ri + 1}: ${ids.length} tokens, ${sampled} sampled, mean logprob ${fmtNum(sampled ? sum / sampled : null, 3)}`),
        h("div", { class: "tokens" }, spans),
      );
    }),
  );
}

function facts(t) {
  const f = [
    ["reward", fmtNum(t.reward)],
    ["advantage", fmtNum(t.advantage)],
    ["prompt tokens", t.prompt_tokens],
    ["response tokens", t.response_tokens],
    ["LLM calls", t.num_llm_calls],
    ["attempts", t.attempts],
    ["latency", t.latency_s !== undefined ? `${fmtNum(t.latency_s, 2)} s` : undefined],
    ["template rewrites", t.template_rewrites || undefined],
  ];
  return h(
    "div",
    { class: "facts" },
    statusBadge(t.status),
    f.filter((x) => x[1] !== undefined && x[1] !== null).map(([k, v]) => h("span", { class: "fact", "data-fact": k }, h("b", {}, k), ` ${v}`)),
  );
}

/** Why each failed attempt failed (a retried rollout keeps its earlier attempts' reasons). */
function attemptErrors(t) {
  const errs = t.attempt_errors || [];
  if (!errs.length) return null;
  return h(
    "div",
    { class: "attempt-errors", id: "traj-attempt-errors" },
    errs.map((e, i) => h("pre", { class: "error-box small" }, `attempt ${i + 1} failed: ${e}`)),
  );
}

/** The full replay of one trajectory. */
export function replayView(t) {
  return h(
    "div",
    { class: "replay", id: "replay", "data-rid": t.rollout_id },
    h("h3", {}, `Trajectory ${t.rollout_id}`, h("span", { class: "muted small" }, ` sample ${t.sample_index} · row ${t.row_index ?? "–"} · id ${t.sample_id ?? "–"}`)),
    facts(t),
    t.error ? h("pre", { class: "error-box", id: "traj-error" }, t.error) : null,
    attemptErrors(t),
    rewardTable(t),
    h("h4", {}, "Trace"),
    waterfallView(t),
    h("h4", {}, "Messages"),
    h(
      "div",
      { class: "messages" },
      (t.messages || []).map((m, i) => {
        const el = messageView(m);
        el.id = `msg-${i}`; // the waterfall links its spans here
        return el;
      }),
    ),
    h("h4", {}, "Tokens"),
    tokenView(t),
  );
}

function std(values) {
  const s = stats(values);
  if (!s.n) return null;
  return Math.sqrt(values.reduce((a, x) => a + (x - s.mean) ** 2, 0) / s.n);
}

/** The n rollouts of one prompt side by side (sorted by reward, best first). */
export function groupView(group, { onOpen } = {}) {
  const trajs = [...(group.trajectories || [])].sort((a, b) => (b.reward ?? -Infinity) - (a.reward ?? -Infinity));
  const rewards = trajs.map((t) => t.reward).filter((x) => Number.isFinite(x));
  const s = stats(rewards);
  return h(
    "div",
    { class: "group-view", id: "group-view", "data-sample": group.sample_index },
    h("h3", {}, `Group of sample ${group.sample_index}: ${trajs.length} rollouts`),
    h("div", { class: "muted" }, `reward mean ${fmtNum(s.mean)} · std ${fmtNum(std(rewards))} · max ${fmtNum(s.max)} · min ${fmtNum(s.min)}`),
    trajs[0] ? h("div", { class: "prompt" }, h("b", {}, "Prompt: "), promptOf(trajs[0])) : null,
    h(
      "div",
      { class: "side-by-side" },
      trajs.map((t) =>
        h(
          "div",
          { class: "col", "data-rid": t.rollout_id },
          h("div", { class: "col-head" }, h("a", { href: "javascript:void 0", onclick: () => onOpen?.(t) }, t.rollout_id)),
          facts(t),
          t.error ? h("div", { class: "error-box small" }, t.error) : null,
          (t.messages || []).filter((m) => m.role !== "system" && m.role !== "user").map((m) => messageView(m, { compact: true })),
        ),
      ),
    ),
  );
}

function delta(v, base) {
  if (!Number.isFinite(v) || !Number.isFinite(base) || v === base) return null;
  const d = v - base;
  return h("span", { class: d > 0 ? "delta up" : "delta down" }, ` ${d > 0 ? "+" : ""}${fmtNum(d, 3)}`);
}

/** Compare 2–10 trajectories against a baseline (deltas, and messages that differ marked). */
export function compareView(trajs, baseId, { onBaseline } = {}) {
  const base = trajs.find((t) => t.rollout_id === baseId) || trajs[0];
  const fnames = [...new Set(trajs.flatMap((t) => Object.keys(t.rewards || {})))];
  const fields = [
    ["reward", (t) => t.reward],
    ["advantage", (t) => t.advantage],
    ["response tokens", (t) => t.response_tokens],
    ["prompt tokens", (t) => t.prompt_tokens],
    ["LLM calls", (t) => t.num_llm_calls],
    ["latency s", (t) => t.latency_s],
    ...fnames.map((n) => [`reward ${n}`, (t) => (t.rewards || {})[n]]),
  ];
  const bm = base.messages || [];
  return h(
    "div",
    { class: "compare", id: "compare-view", "data-base": base.rollout_id },
    h("h3", {}, `Comparing ${trajs.length} trajectories · baseline ${base.rollout_id}`),
    h(
      "table",
      { class: "grid-table", id: "compare-table" },
      h(
        "tr",
        {},
        h("th", {}, ""),
        trajs.map((t) =>
          h(
            "th",
            { class: t === base ? "baseline" : "" },
            t.rollout_id,
            " ",
            t === base
              ? h("span", { class: "flag", title: "baseline" }, "⚑ baseline")
              : h("button", { class: "btn tiny", "data-test": "set-baseline", onclick: () => onBaseline?.(t.rollout_id) }, "⚐ set baseline"),
          ),
        ),
      ),
      h("tr", {}, h("td", {}, "status"), trajs.map((t) => h("td", {}, statusBadge(t.status)))),
      fields.map(([label, get]) =>
        h(
          "tr",
          {},
          h("td", {}, label),
          trajs.map((t) => h("td", { class: "num" }, fmtNum(get(t)), t === base ? null : delta(get(t), get(base)))),
        ),
      ),
    ),
    h(
      "div",
      { class: "side-by-side" },
      trajs.map((t) =>
        h(
          "div",
          { class: t === base ? "col baseline" : "col", "data-rid": t.rollout_id },
          h("div", { class: "col-head" }, t.rollout_id),
          (t.messages || []).map((m, i) => {
            const b = bm[i];
            const differs = t !== base && (!b || textOf(b.content) !== textOf(m.content) || JSON.stringify(b.tool_calls || []) !== JSON.stringify(m.tool_calls || []));
            return messageView(m, { compact: true, differs });
          }),
        ),
      ),
    ),
  );
}
