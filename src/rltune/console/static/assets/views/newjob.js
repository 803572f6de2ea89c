// New job (#/jobs/new): pick uploaded data files and registered functions, fill the
// hyper-parameters (a form made from the server's list, GET /v1/hyperparameters: each
// knob's type, default, range and description), submit (POST /v1/jobs). Only the values the
// user typed are sent; every other knob keeps its default. The server validates the job and
// its answer names the field at fault.
import { api } from "../api.js";
import { errorBox, h, mount } from "../dom.js";
import { go } from "../router.js";

const FIRST_KNOBS = 16; // the cloud's hyper-parameters come first; the rest fold away

/** A knob's input: a select for choices and booleans, a number box, else text. */
function knobInput(k) {
  const id = `hp-${k.name}`;
  const title = [k.description, k.minimum !== null && k.minimum !== undefined ? `min ${k.minimum}` : "", k.maximum !== null && k.maximum !== undefined ? `max ${k.maximum}` : ""]
    .filter(Boolean)
    .join(" · ");
  const dflt = k.default === null || k.default === undefined ? "unset" : String(k.default);
  if (k.type === "choice" || k.type === "boolean") {
    const opts = k.type === "boolean" ? [true, false] : k.choices;
    return h(
      "select",
      { id, "data-knob": k.name, title },
      h("option", { value: "" }, `default (${dflt})`),
      opts.map((c) => h("option", { value: JSON.stringify(c) }, String(c))),
    );
  }
  const number = k.type === "integer" || k.type === "number";
  return h("input", {
    id,
    "data-knob": k.name,
    type: number ? "number" : "text",
    step: k.type === "integer" ? "1" : "any",
    min: k.minimum ?? undefined,
    max: k.maximum ?? undefined,
    placeholder: dflt,
    title,
    class: "narrow-wide",
  });
}

/** The value typed into a knob's input, or undefined when left at its default. */
export function knobValue(k, el) {
  const raw = el.value.trim();
  if (raw === "") return undefined;
  if (k.type === "choice" || k.type === "boolean") return JSON.parse(raw);
  if (k.type === "integer" || k.type === "number") return Number(raw);
  if (k.type === "array" || k.type === "object") {
    try {
      return JSON.parse(raw);
    } catch {
      return raw;
    }
  }
  return raw;
}

function checkList(name, items, label) {
  if (!items.length) return h("p", { class: "muted", id: `${name}-none` }, `None yet: ${label}.`);
  return h(
    "div",
    { class: "check-list", id: `${name}-list` },
    items.map((it) => h("label", { class: "check" }, h("input", { type: "checkbox", name, value: it.value }), ` ${it.label}`)),
  );
}

export function renderNewJob(el) {
  const err = h("div", { id: "new-job-error" });
  mount(el, h("div", { class: "crumbs" }, h("a", { href: "#/jobs" }, "Jobs"), " / new job"), h("p", { class: "muted" }, "Loading…"));
  let alive = true;

  (async () => {
    let files;
    let fns;
    let knobs;
    let models;
    try {
      [files, fns, knobs, models] = await Promise.all([
        api.files({ page_size: 500 }).then((r) => r.items || r.data || []),
        api.functions({ page_size: 500 }).then((r) => r.items || []),
        api.hyperparameters().then((r) => r.items || []),
        api.models().then((r) => r.items || []).catch(() => []),
      ]);
    } catch (e) {
      if (alive) mount(el, errorBox(e));
      return;
    }
    if (!alive) return;
    const fileItems = files.map((f) => ({ value: f.file_id || f.id, label: `${f.filename || f.file_name || ""} (${f.file_id || f.id})` }));
    const rollouts = fns.filter((f) => f.type === "rollout");
    const rewards = fns.filter((f) => f.type !== "rollout");
    const name = h("input", { id: "job-name", value: "console-job", size: 30 });
    const model = h("input", { id: "job-model", list: "model-names", size: 50, placeholder: "a model name or directory on the server" });
    const rollout = h(
      "select",
      { id: "job-rollout" },
      h("option", { value: "" }, "built-in single-turn rollout"),
      rollouts.map((f) => h("option", { value: f.entity_id }, `${f.name} (${f.entity_id})`)),
    );
    const inputs = new Map(knobs.map((k) => [k.name, knobInput(k)]));
    const knobRow = (k) => h("tr", { "data-knob-row": k.name }, h("th", { title: k.description }, k.name), h("td", {}, inputs.get(k.name)), h("td", { class: "muted small" }, k.description));
    const submit = async (ev) => {
      ev.preventDefault();
      err.replaceChildren();
      const picked = (n) => [...el.querySelectorAll(`input[name=${n}]:checked`)].map((x) => x.value);
      const hp = {};
      for (const k of knobs) {
        const v = knobValue(k, inputs.get(k.name));
        if (v !== undefined) hp[k.name] = v;
      }
      const byId = new Map(fns.map((f) => [f.entity_id, f]));
      const functions = [];
      if (rollout.value) functions.push({ type: "rollout", name: byId.get(rollout.value).name, entity_id: rollout.value });
      for (const id of picked("reward")) {
        const f = byId.get(id);
        functions.push({ type: f.type, name: f.name, entity_id: id });
      }
      const config = {
        name: name.value.trim() || "console-job",
        model: { name: model.value.trim() },
        datasets: [
          ...picked("training").map((id) => ({ type: "training", file_id: id })),
          ...picked("validation").map((id) => ({ type: "validation", file_id: id })),
        ],
        functions,
        training: { hyper_parameters: hp },
      };
      try {
        const job = await api.createJob(config);
        go(["jobs", job.job_id, "details"]);
      } catch (e) {
        err.append(errorBox(e));
      }
    };
    mount(
      el,
      h("div", { class: "crumbs" }, h("a", { href: "#/jobs" }, "Jobs"), " / new job"),
      h(
        "form",
        { class: "new-job", id: "new-job-form", onsubmit: submit },
        h("h2", {}, "New job"),
        h("section", { class: "card" }, h("h3", {}, "Job"), h("label", {}, "Name ", name), " ", h("label", {}, "Model ", model), h("datalist", { id: "model-names" }, models.map((m) => h("option", { value: m.name })))),
        h(
          "div",
          { class: "cols" },
          h("section", { class: "card" }, h("h3", {}, "Training data"), checkList("training", fileItems, "upload files on the Datasets page")),
          h("section", { class: "card" }, h("h3", {}, "Validation data"), checkList("validation", fileItems, "upload files on the Datasets page")),
          h(
            "section",
            { class: "card" },
            h("h3", {}, "Functions"),
            h("label", {}, "Rollout ", rollout),
            h("h4", {}, "Rewards"),
            checkList("reward", rewards.map((f) => ({ value: f.entity_id, label: `${f.name} · ${f.type} (${f.entity_id})` })), "register functions with `rltune register-functions`"),
          ),
        ),
        h(
          "section",
          { class: "card" },
          h("h3", {}, "Hyper-parameters"),
          h("p", { class: "muted small" }, "Empty fields keep their default (shown greyed; unset ones take the algorithm preset's value or none)."),
          h("table", { class: "kv knobs", id: "knobs" }, knobs.slice(0, FIRST_KNOBS).map(knobRow)),
          h("details", { id: "more-knobs" }, h("summary", {}, `${Math.max(0, knobs.length - FIRST_KNOBS)} more knobs`), h("table", { class: "kv knobs" }, knobs.slice(FIRST_KNOBS).map(knobRow))),
        ),
        err,
        h("div", { class: "row" }, h("button", { class: "btn primary", type: "submit", id: "new-job-submit" }, "Submit job"), h("a", { class: "btn", href: "#/jobs" }, "Cancel")),
      ),
    );
  })();
  return () => {
    alive = false;
  };
}
