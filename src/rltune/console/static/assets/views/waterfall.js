// The trace of one trajectory as a waterfall: every span the rollout produced, in the
// trainer, the function workers and the gateway (step → rollout → invoke_agentic_rl → chat →
// generate, tools, rewards), a bar per span on a shared time axis, indented by parent.
// LLM spans show tokens and latency, tool spans their arguments and result, reward spans the
// score; clicking a span scrolls to its message in the replay (the k-th LLM call is the
// k-th assistant message, the k-th tool span the k-th tool message) or to the reward table.
import { fmtNum, h } from "../dom.js";

const KIND = (s) => {
  const a = s.attributes || {};
  if (s.name === "generate" || a["gen_ai.span.kind"] === "LLM") return "llm";
  if (a["gen_ai.span.kind"] === "TOOL") return "tool";
  if (a["gen_ai.span.kind"] === "REWARD" || s.service?.startsWith("rltune-function-reward")) return "reward";
  return "other";
};

/** Spans in tree order (depth-first by start time) with their depth. */
export function spanTree(spans) {
  const ids = new Set(spans.map((s) => s.span_id));
  const kids = new Map();
  for (const s of spans) {
    const p = ids.has(s.parent_id) ? s.parent_id : null;
    if (!kids.has(p)) kids.set(p, []);
    kids.get(p).push(s);
  }
  const out = [];
  const walk = (p, depth) => {
    for (const s of (kids.get(p) || []).sort((a, b) => a.start - b.start)) {
      out.push({ span: s, depth });
      walk(s.span_id, depth + 1);
    }
  };
  walk(null, 0);
  return out;
}

/** span_id -> element id of the message (or section) the span belongs to. */
export function messageLinks(spans, messages) {
  const idx = (role) => messages.map((m, i) => (m.role === role ? i : -1)).filter((i) => i >= 0);
  const assistant = idx("assistant");
  const tool = idx("tool");
  const links = {};
  const byStart = (xs) => [...xs].sort((a, b) => a.start - b.start);
  const chats = byStart(spans.filter((s) => s.name.startsWith("chat")));
  chats.forEach((s, k) => { if (assistant[k] !== undefined) links[s.span_id] = `msg-${assistant[k]}`; });
  byStart(spans.filter((s) => s.name === "generate")).forEach((s, k) => {
    const i = assistant[s.attributes?.["rltune.call_index"] ?? k];
    if (i !== undefined) links[s.span_id] = `msg-${i}`;
  });
  byStart(spans.filter((s) => KIND(s) === "tool")).forEach((s, k) => { if (tool[k] !== undefined) links[s.span_id] = `msg-${tool[k]}`; });
  for (const s of spans) if (KIND(s) === "reward") links[s.span_id] = "reward-table";
  return links;
}

function detail(s) {
  const a = s.attributes || {};
  const kind = KIND(s);
  if (kind === "llm") {
    const tin = a["gen_ai.usage.input_tokens"];
    const tout = a["gen_ai.usage.output_tokens"];
    return tin !== undefined || tout !== undefined ? `${tin ?? "–"} → ${tout ?? "–"} tokens` : "";
  }
  if (kind === "tool") return `${a.tool_call_arguments ?? ""} → ${a.tool_call_result ?? ""}`;
  if (kind === "reward" && a["rltune.reward.score"] !== undefined) return `score ${fmtNum(a["rltune.reward.score"])}`;
  return "";
}

function jump(target) {
  const el = document.getElementById(target);
  if (!el) return;
  el.scrollIntoView({ block: "center" });
  document.querySelectorAll(".span-linked").forEach((x) => x.classList.remove("span-linked"));
  el.classList.add("span-linked");
}

/** The waterfall of a trajectory's spans (``t.spans``), or a note when it has none. */
export function waterfallView(t) {
  const spans = t.spans || [];
  if (!spans.length) {
    return h("p", { class: "muted", id: "waterfall-empty" }, "No trace stored for this trajectory (tracing off with ENABLE_TRAJECTORY=false, or spans sent to an OTLP endpoint).");
  }
  const t0 = Math.min(...spans.map((s) => s.start));
  const total = Math.max(1e-6, Math.max(...spans.map((s) => s.end)) - t0);
  const links = messageLinks(spans, t.messages || []);
  return h(
    "div",
    { class: "waterfall", id: "waterfall" },
    h("div", { class: "muted small" }, `${spans.length} spans · ${fmtNum(total * 1000, 1)} ms · trace ${spans[0].trace_id.slice(0, 12)}… · click a span to see its message`),
    spanTree(spans).map(({ span: s, depth }) => {
      const left = ((s.start - t0) / total) * 100;
      const width = Math.max(0.3, ((s.end - s.start) / total) * 100);
      const link = links[s.span_id];
      return h(
        "div",
        {
          class: `span-row kind-${KIND(s)}${s.status === "ERROR" ? " span-error" : ""}${link ? " linked" : ""}`,
          "data-span": s.name,
          "data-link": link,
          title: `${s.name} · ${s.service || ""} · ${fmtNum((s.end - s.start) * 1000, 1)} ms${s.error ? ` · ${s.error}` : ""}`,
          onclick: link ? () => jump(link) : undefined,
        },
        h("div", { class: "span-label", style: { paddingLeft: `${depth * 12}px` } }, s.name, h("span", { class: "muted small" }, ` ${s.service || ""}`)),
        h(
          "div",
          { class: "span-track" },
          h("div", { class: "span-bar", style: { left: `${left}%`, width: `${width}%` } }),
        ),
        h("div", { class: "span-info small" }, `${fmtNum((s.end - s.start) * 1000, 1)} ms `, h("span", { class: "muted" }, detail(s))),
      );
    }),
  );
}
