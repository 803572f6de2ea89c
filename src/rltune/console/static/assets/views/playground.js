// Playground: chat with a deployed model through the job server (the workspace key; the
// browser never holds a deployment key), tools included; every sampled token is coloured by
// its log-prob as in the trajectory token view. The default tool is the calc template's
// calculator, exactly as the demo agent was trained with it (small models notice any change).
import { api } from "../api.js";
import { errorBox, fmtNum, h, mount } from "../dom.js";
import { logprobColor } from "./replay.js";

const CALCULATOR = [
  {
    type: "function",
    function: {
      name: "calculator",
      description: "Evaluate an arithmetic expression with + - * / and parentheses.",
      parameters: {
        type: "object",
        properties: { expression: { type: "string", description: "for example 37 * 4" } },
        required: ["expression"],
      },
    },
  },
];

/** Token spans of a response's logprobs ({content: [{token, logprob}]}). */
export function tokenSpans(logprobs) {
  const items = (logprobs && logprobs.content) || [];
  return h(
    "div",
    { class: "tokens playground-tokens" },
    items.map((t) =>
      h("span", { class: "tok", style: { background: logprobColor(t.logprob) }, title: `logprob ${fmtNum(t.logprob, 4)} · p ${fmtNum(Math.exp(t.logprob), 3)}` }, t.token),
    ),
  );
}

export function renderPlayground(el, route) {
  const depId = route.parts[1];
  const messages = [];
  const log = h("div", { id: "chat-log", class: "chat-log token-view" });
  const model = h("select", { id: "chat-model" });
  const system = h("textarea", { id: "chat-system", rows: 2, class: "mono", placeholder: "system prompt (optional)" });
  const tools = h("textarea", { id: "chat-tools", rows: 4, class: "mono" }, JSON.stringify(CALCULATOR));
  const input = h("textarea", { id: "chat-input", rows: 2, placeholder: "Your message, or the tool's result after a tool call" });
  const temp = h("input", { id: "chat-temperature", type: "number", value: 0, step: 0.1, min: 0, max: 2, style: { width: "5em" } });
  const err = h("div", { id: "chat-error" });
  const reset = h("button", { class: "btn", type: "button", id: "chat-reset", onclick: () => {
    messages.length = 0;
    mount(log);
    mount(err);
  } }, "New chat");
  const head = h("div", { class: "muted" }, `Deployment ${depId}`);

  api
    .deployment(depId)
    .then((d) => {
      mount(model, d.models.map((m) => h("option", { value: m }, m)));
      mount(head, `Deployment ${depId} · `, d.status, ` · ${d.base_url || ""}`);
    })
    .catch((e) => mount(err, errorBox(e)));

  function show(msg, logprobs) {
    const calls = (msg.tool_calls || []).map((c) => h("div", { class: "mono small tool-call" }, `→ ${c.function.name}(${c.function.arguments})`));
    log.append(
      h(
        "div",
        { class: `chat-msg role-${msg.role}` },
        h("strong", {}, msg.role, " "),
        msg.content ? h("span", {}, msg.content) : null,
        calls,
        logprobs ? tokenSpans(logprobs) : null,
      ),
    );
  }

  const send = async (ev) => {
    ev.preventDefault();
    mount(err);
    let toolList;
    try {
      toolList = tools.value.trim() ? JSON.parse(tools.value) : undefined;
    } catch (e) {
      mount(err, errorBox(`The tools are not valid JSON: ${e.message}`));
      return;
    }
    const last = messages[messages.length - 1];
    const text = input.value.trim();
    if (last && last.role === "assistant" && (last.tool_calls || []).length) {
      const msg = { role: "tool", tool_call_id: last.tool_calls[0].id, content: text };
      messages.push(msg);
      show(msg);
    } else if (text) {
      if (!messages.length && system.value.trim()) messages.push({ role: "system", content: system.value.trim() });
      const msg = { role: "user", content: text };
      messages.push(msg);
      show(msg);
    } else return;
    input.value = "";
    try {
      const res = await api.chat(depId, {
        model: model.value,
        messages,
        tools: toolList,
        temperature: Number(temp.value),
        max_tokens: 128,
        logprobs: true,
      });
      const choice = res.choices[0];
      const msg = { role: "assistant", content: choice.message.content || "" };
      if (choice.message.tool_calls) msg.tool_calls = choice.message.tool_calls;
      messages.push(msg);
      show(msg, choice.logprobs);
    } catch (e) {
      mount(err, errorBox(e));
    }
  };
  mount(
    el,
    h("h2", {}, "Playground"),
    head,
    h("section", { class: "card" }, h("label", {}, "model ", model), " temperature ", temp, h("div", { class: "muted small" }, "System prompt"), system, h("div", { class: "muted small" }, "Tools (OpenAI JSON, empty for none)"), tools),
    h("section", { class: "card" }, log, h("form", { id: "chat-form", onsubmit: send }, input, h("button", { class: "btn primary", type: "submit", id: "chat-send" }, "Send"), " ", reset), err),
  );
  return () => {};
}
