// Functions: registered entities, loaded instances, and a test call of an instance with a
// JSON input (the same body the trainer would send).
import { api } from "../api.js";
import { errorBox, fmtTime, h, mount, statusBadge, toEpoch } from "../dom.js";

// Starting inputs for the test box, in the wire format the trainer sends (rltune.sdk.data).
const EXAMPLES = {
  rollout: {
    messages: [{ role: "user", content: "What is 2 + 3?" }],
    rollout_extra: { solution: "5" },
    model_resource: { model_name: "policy", base_url: "http://127.0.0.1:8000/v1", api_key: "sk-…" },
  },
  reward: {
    agent_output: { messages: [{ role: "assistant", content: "### ANSWER: 5 ###" }] },
    ground_truth: "5",
  },
  group_reward: {
    agent_outputs: [
      { messages: [{ role: "assistant", content: "### ANSWER: 5 ###" }] },
      { messages: [{ role: "assistant", content: "6" }] },
    ],
    ground_truth: "5",
  },
};

export function renderFunctions(el) {
  const ents = h("div", { id: "function-list" }, h("p", { class: "muted" }, "Loading…"));
  const insts = h("div", { id: "instance-list" });
  const tester = h("div", { id: "function-test" });
  mount(el, h("h2", {}, "Functions"), h("section", { class: "card" }, h("h3", {}, "Entities"), ents), h("section", { class: "card" }, h("h3", {}, "Instances"), insts), tester);

  function openTest(inst) {
    const input = h("textarea", { id: "test-input", rows: 10, class: "mono" }, JSON.stringify(EXAMPLES[inst.type] || EXAMPLES.reward, null, 2));
    const result = h("div", { id: "test-result" });
    const run = async () => {
      let body;
      try {
        body = JSON.parse(input.value);
      } catch (e) {
        mount(result, errorBox(`The input is not valid JSON: ${e.message}. Fix it and run again.`));
        return;
      }
      mount(result, h("p", { class: "muted" }, "Running…"));
      try {
        const res = await api.testInstance(inst.instance_id, body);
        mount(result, h("div", {}, statusBadge(res.status), h("span", { class: "muted" }, ` ${res.seconds ?? ""} s`)), h("pre", { class: "mono" }, JSON.stringify(res.output, null, 2)));
      } catch (e) {
        mount(result, errorBox(e));
      }
    };
    mount(tester, h("section", { class: "card" }, h("h3", {}, `Test ${inst.instance_id} (${inst.type})`), input, h("button", { class: "btn primary", id: "run-test", onclick: run }, "Run"), result));
  }

  api
    .functions({ page_size: 200 })
    .then((res) => {
      const items = res.items || [];
      mount(
        ents,
        items.length
          ? h(
              "table",
              { class: "grid-table" },
              h("tr", {}, ["entity", "type", "name", "classpath", "size", "created"].map((c) => h("th", {}, c))),
              items.map((f) => h("tr", {}, h("td", { class: "mono" }, f.entity_id), h("td", {}, f.type), h("td", {}, f.name), h("td", { class: "mono small" }, f.classpath), h("td", { class: "num" }, f.archive_size ?? "–"), h("td", { class: "small" }, fmtTime(toEpoch(f.created_at))))),
            )
          : h("p", { class: "muted" }, "No functions registered. Register one with `rltune functions register`."),
      );
    })
    .catch((e) => mount(ents, errorBox(e)));
  api
    .instances({ page_size: 200 })
    .then((res) => {
      const items = res.items || [];
      mount(
        insts,
        items.length
          ? h(
              "table",
              { class: "grid-table" },
              h("tr", {}, ["instance", "entity", "type", "status", "created", ""].map((c) => h("th", {}, c))),
              items.map((i) => h("tr", {}, h("td", { class: "mono" }, i.instance_id), h("td", { class: "mono" }, i.entity_id), h("td", {}, i.type), h("td", {}, statusBadge(i.status)), h("td", { class: "small" }, fmtTime(toEpoch(i.created_at))), h("td", {}, i.status === "active" ? h("button", { class: "btn small", onclick: () => openTest(i) }, "Test") : null))),
            )
          : h("p", { class: "muted" }, "No loaded instances."),
      );
    })
    .catch((e) => mount(insts, errorBox(e)));
}
