// Models: published models (deploy, delete), deployments (status, endpoint, playground, stop)
// and evaluations (base vs tuned, mean@1 and pass@k per prompt and in total).
import { api } from "../api.js";
import { confirmDialog, errorBox, fmtNum, fmtTime, h, mount, statusBadge, toEpoch } from "../dom.js";

const LIVE = new Set(["STARTING", "RUNNING"]);

export function renderModels(el) {
  const models = h("div", { id: "model-list" }, h("p", { class: "muted" }, "Loading…"));
  const deps = h("div", { id: "deployment-list" });
  const evals = h("div", { id: "evaluation-list" });
  const note = h("div", { id: "models-note" });
  mount(
    el,
    h("h2", {}, "Models"),
    note,
    h("section", { class: "card" }, h("h3", {}, "Published models"), models),
    h("section", { class: "card" }, h("h3", {}, "Deployments"), deps),
    h("section", { class: "card" }, h("h3", {}, "Evaluations"), evalForm(note, refresh), evals),
  );
  let timer = null;
  let stopped = false;

  async function refresh() {
    try {
      const [m, d, e] = await Promise.all([api.models(), api.deployments(), api.evaluations()]);
      mount(models, modelTable(m.items || [], note, refresh));
      mount(deps, depTable(d.items || [], note, refresh));
      mount(evals, evalTable(e.items || []));
      const busy = (d.items || []).some((x) => x.status === "STARTING") || (e.items || []).some((x) => x.status === "RUNNING");
      clearTimeout(timer);
      if (!stopped) timer = setTimeout(refresh, busy ? 1000 : 5000);
    } catch (err) {
      mount(models, errorBox(err));
    }
  }
  refresh();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

function modelTable(items, note, refresh) {
  if (!items.length) return h("p", { class: "muted" }, "No published models. Publish a checkpoint from a job's Outputs tab.");
  const deploy = async (name) => {
    try {
      const dep = await api.deploy([name]);
      mount(note, h("div", { class: "card", id: "new-key" }, `Deployment ${dep.deployment_id} starting. Its API key (shown once): `, h("code", { class: "mono", id: "deployment-key" }, dep.api_key)));
      refresh();
    } catch (e) {
      mount(note, errorBox(e));
    }
  };
  const remove = async (name) => {
    if (!(await confirmDialog(`Delete model ${name} and its files?`, "Delete"))) return;
    try {
      await api.deleteModel(name);
      refresh();
    } catch (e) {
      mount(note, errorBox(e));
    }
  };
  return h(
    "table",
    { class: "grid-table", id: "models-table" },
    h("tr", {}, ["name", "source job", "checkpoint", "validation reward", "base model", "kind", "published", ""].map((c) => h("th", {}, c))),
    items.map((m) =>
      h(
        "tr",
        { "data-model": m.name },
        h("td", {}, h("strong", {}, m.name), m.auto ? h("span", { class: "muted small" }, " auto") : null),
        h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(m.source_job)}/outputs` }, m.source_job)),
        h("td", {}, m.checkpoint),
        h("td", { class: "num" }, fmtNum(m.validation_reward)),
        h("td", { class: "small mono" }, m.base_model),
        h("td", {}, m.kind),
        h("td", { class: "small" }, fmtTime(toEpoch(m.created_at))),
        h("td", {}, h("button", { class: "btn small primary deploy-btn", onclick: () => deploy(m.name) }, "Deploy"), " ", h("button", { class: "btn small danger", onclick: () => remove(m.name) }, "Delete")),
      ),
    ),
  );
}

function depTable(items, note, refresh) {
  if (!items.length) return h("p", { class: "muted" }, "No deployments.");
  const act = (fn) => async () => {
    try {
      await fn();
      refresh();
    } catch (e) {
      mount(note, errorBox(e));
    }
  };
  return h(
    "table",
    { class: "grid-table", id: "deployments-table" },
    h("tr", {}, ["deployment", "models", "status", "endpoint", "started", ""].map((c) => h("th", {}, c))),
    items.map((d) =>
      h(
        "tr",
        { "data-deployment": d.deployment_id },
        h("td", { class: "mono" }, d.deployment_id),
        h("td", {}, d.models.join(", ")),
        h("td", {}, statusBadge(d.status), d.error ? h("div", { class: "small muted" }, d.error) : null),
        h("td", { class: "small mono" }, d.base_url || ""),
        h("td", { class: "small" }, fmtTime(toEpoch(d.started_at))),
        h(
          "td",
          {},
          d.status === "RUNNING" ? h("a", { class: "btn small primary playground-link", href: `#/playground/${encodeURIComponent(d.deployment_id)}` }, "Playground") : null,
          " ",
          LIVE.has(d.status) ? h("button", { class: "btn small", onclick: act(() => api.stopDeployment(d.deployment_id)) }, "Stop") : h("button", { class: "btn small danger", onclick: act(() => api.deleteDeployment(d.deployment_id)) }, "Delete"),
        ),
      ),
    ),
  );
}

function evalForm(note, refresh) {
  const job = h("input", { id: "eval-job", placeholder: "job id (its rollout, rewards, validation set)", size: 34 });
  const models = h("input", { id: "eval-models", value: "base", size: 30, title: "comma-separated: base and published names" });
  const n = h("input", { id: "eval-n", type: "number", value: 4, min: 1, max: 64, style: { width: "4em" } });
  const k = h("input", { id: "eval-k", type: "number", value: 2, min: 1, max: 64, style: { width: "4em" } });
  const submit = async (ev) => {
    ev.preventDefault();
    try {
      const names = models.value.split(",").map((s) => s.trim()).filter(Boolean);
      await api.evaluate({ job_id: job.value.trim(), models: names, n: Number(n.value), k: Number(k.value) });
      refresh();
    } catch (e) {
      mount(note, errorBox(e));
    }
  };
  return h("form", { class: "row", id: "eval-form", onsubmit: submit }, job, " models ", models, " n ", n, " k ", k, " ", h("button", { class: "btn small primary", type: "submit" }, "Evaluate"));
}

function evalTable(items) {
  if (!items.length) return h("p", { class: "muted" }, "No evaluations.");
  const detail = h("div", { id: "evaluation-detail" });
  const open = async (id) => {
    try {
      mount(detail, evalDetail(await api.evaluation(id)));
    } catch (e) {
      mount(detail, errorBox(e));
    }
  };
  return h(
    "div",
    {},
    h(
      "table",
      { class: "grid-table", id: "evaluations-table" },
      h("tr", {}, ["evaluation", "job", "status", "models (mean@1 / pass@k)", ""].map((c) => h("th", {}, c))),
      items.map((e) =>
        h(
          "tr",
          { "data-evaluation": e.evaluation_id },
          h("td", { class: "mono" }, e.evaluation_id),
          h("td", {}, e.job_id),
          h("td", {}, statusBadge(e.status), e.error ? h("div", { class: "small muted" }, e.error) : null),
          h("td", {}, e.models.map((m) => {
            const s = (e.summary || {})[m];
            return h("div", { class: "small" }, `${m}: ${s ? `${fmtNum(s["mean@1"], 3)} / ${fmtNum(s["pass@k"], 3)}` : "…"}`);
          })),
          h("td", {}, e.status === "SUCCEEDED" ? h("button", { class: "btn small eval-open", onclick: () => open(e.evaluation_id) }, "Side by side") : null),
        ),
      ),
    ),
    detail,
  );
}

/** Base vs tuned: totals, then every prompt with each model's mean@1 and pass@k. */
export function evalDetail(ev) {
  const res = ev.result;
  if (!res) return h("p", { class: "muted" }, "No result yet.");
  const names = res.models.map((m) => m.model);
  return h(
    "div",
    { class: "card" },
    h("h3", {}, `${ev.evaluation_id}: ${res.prompts} prompts × ${res.n} samples, pass@${res.k} (reward ≥ ${res.threshold})`),
    h(
      "table",
      { class: "grid-table", id: "eval-totals" },
      h("tr", {}, h("th", {}, "model"), h("th", {}, "mean@1"), h("th", {}, `pass@${res.k}`), h("th", {}, "failed samples")),
      res.models.map((m) => h("tr", { "data-model": m.model }, h("td", {}, m.model), h("td", { class: "num mean1" }, fmtNum(m["mean@1"], 3)), h("td", { class: "num" }, fmtNum(m["pass@k"], 3)), h("td", { class: "num" }, m.failed))),
    ),
    h(
      "table",
      { class: "grid-table", id: "eval-prompts" },
      h("tr", {}, h("th", {}, "prompt"), names.map((n) => h("th", {}, `${n} mean@1 / pass@${res.k}`))),
      res.per_prompt.map((p) =>
        h("tr", {}, h("td", { class: "small" }, p.prompt), names.map((n) => h("td", { class: "num" }, `${fmtNum(p.models[n]["mean@1"], 2)} / ${fmtNum(p.models[n]["pass@k"], 2)}`))),
      ),
    ),
  );
}
