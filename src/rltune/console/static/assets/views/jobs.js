// Jobs list: status, model, algorithm, progress, latest reward with a sparkline, created and
// duration; status filter and name search; cancel / delete with confirmation; auto-refresh.
import { api } from "../api.js";
import { sparkline } from "../charts.js";
import {
  confirmDialog,
  errorBox,
  fmtDuration,
  fmtNum,
  fmtTime,
  h,
  mount,
  progressOf,
  statusBadge,
  toEpoch,
} from "../dom.js";

const ACTIVE = new Set(["PENDING", "RUNNING"]);
const PAGE = 20;
const REFRESH_MS = 4000;

export function durationOf(job, now = Date.now() / 1000) {
  const start = toEpoch(job.started_at);
  if (!start) return null;
  const end = toEpoch(job.finished_at) || (job.status === "RUNNING" ? now : null);
  return end ? end - start : null;
}

export function renderJobs(el) {
  const state = { page: 1, status: "", q: "", auto: true };
  const sparks = new Map(); // job_id -> {step, values}
  const table = h("div", { class: "table-wrap" });
  const pager = h("div", { class: "pager" });
  let timer = null;
  let alive = true;

  const statusSel = h(
    "select",
    { id: "status-filter", onchange: () => ((state.status = statusSel.value), (state.page = 1), load()) },
    ["", "PENDING", "RUNNING", "SUCCEEDED", "STOPPED", "FAILED", "CANCELED"].map((s) =>
      h("option", { value: s }, s || "all statuses"),
    ),
  );
  const search = h("input", {
    type: "search",
    id: "job-search",
    placeholder: "filter by id, name, model, project or tag",
    oninput: () => ((state.q = search.value.trim().toLowerCase()), draw(lastPage)),
  });
  const auto = h("input", {
    type: "checkbox",
    id: "auto-refresh",
    checked: true,
    onchange: () => (state.auto = auto.checked),
  });
  mount(
    el,
    h(
      "div",
      { class: "toolbar" },
      h("h2", {}, "Jobs"),
      statusSel,
      search,
      h("label", { class: "muted" }, auto, " auto-refresh"),
      h("button", { class: "btn small", onclick: () => load() }, "Refresh"),
      h("a", { class: "btn small primary", id: "new-job", href: "#/jobs/new" }, "New job"),
    ),
    table,
    pager,
  );

  let lastPage = null;

  async function spark(job) {
    const step = `${job.status}:${progressOf(job).step}`;
    const cached = sparks.get(job.job_id);
    if (cached && cached.step === step) return cached.values;
    try {
      const m = await api.metrics(job.job_id, { names: "critic/rewards/mean" });
      const values = ((m.series || {})["critic/rewards/mean"] || []).map((p) => p[1]);
      sparks.set(job.job_id, { step, values });
      return values;
    } catch {
      return [];
    }
  }

  async function act(job, what) {
    const verb = what === "cancel" ? "Cancel" : "Delete";
    const ok = await confirmDialog(
      `${verb} job ${job.job_id}${job.job_name ? ` (${job.job_name})` : ""}?` +
        (what === "delete" ? " Its logs, trajectories and checkpoints are removed." : ""),
      verb,
    );
    if (!ok) return;
    try {
      if (what === "cancel") await api.cancelJob(job.job_id);
      else await api.deleteJob(job.job_id);
    } catch (e) {
      table.prepend(errorBox(e));
      return;
    }
    load();
  }

  // Ark's job metadata: "project · key=value, …"
  function metaText(job) {
    const tags = Object.entries(job.tags || {}).map(([k, v]) => `${k}=${v}`).join(", ");
    return [job.project, tags].filter(Boolean).join(" · ");
  }

  function row(job) {
    const p = progressOf(job);
    const total = p.total || 0;
    const pct = total ? Math.min(100, (100 * (p.step || 0)) / total) : 0;
    const sparkCell = h("td", { class: "spark-cell" });
    spark(job).then((v) => sparkCell.replaceChildren(sparkline(v)));
    const reward = job.latest_reward ?? p.reward;
    return h(
      "tr",
      { "data-job": job.job_id, "data-status": job.status },
      h(
        "td",
        {},
        h("a", { href: `#/jobs/${encodeURIComponent(job.job_id)}/details`, class: "job-link" }, job.job_id),
        job.job_name ? h("div", { class: "muted small" }, job.job_name) : null,
        metaText(job) ? h("div", { class: "muted small", "data-test": "job-meta" }, metaText(job)) : null,
      ),
      h("td", {}, statusBadge(job.status)),
      h("td", {}, job.model || "–"),
      h("td", {}, job.algorithm || "–"),
      h(
        "td",
        {},
        h("div", { class: "progress" }, h("div", { class: "bar", style: { width: `${pct}%` } })),
        h("span", { class: "small muted progress-text" }, total ? `${p.step || 0} / ${total}` : "–"),
      ),
      h("td", { class: "num" }, fmtNum(reward)),
      sparkCell,
      h("td", { class: "small" }, fmtTime(toEpoch(job.created_at))),
      h("td", { class: "small" }, fmtDuration(durationOf(job))),
      h(
        "td",
        { class: "actions" },
        ACTIVE.has(job.status)
          ? h("button", { class: "btn small", "data-test": "cancel", onclick: () => act(job, "cancel") }, "Cancel")
          : h("button", { class: "btn small danger", "data-test": "delete", onclick: () => act(job, "delete") }, "Delete"),
      ),
    );
  }

  function draw(page) {
    if (!page) return;
    const items = page.items.filter(
      (j) =>
        !state.q ||
        [j.job_id, j.job_name, j.model, metaText(j)].some(
          (v) => v && String(v).toLowerCase().includes(state.q),
        ),
    );
    mount(
      table,
      h(
        "table",
        { class: "grid-table", id: "jobs-table" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Job", "Status", "Model", "Algorithm", "Progress", "Reward", "Trend", "Created", "Duration", ""].map(
              (c) => h("th", {}, c),
            ),
          ),
        ),
        h("tbody", {}, items.length ? items.map(row) : h("tr", {}, h("td", { colspan: 10, class: "muted" }, "No jobs."))),
      ),
    );
    const pages = Math.max(1, Math.ceil(page.total / PAGE));
    mount(
      pager,
      h("button", { class: "btn small", disabled: state.page <= 1, onclick: () => (state.page--, load()) }, "‹ Prev"),
      h("span", { class: "muted" }, ` page ${state.page} of ${pages} · ${page.total} jobs `),
      h("button", { class: "btn small", disabled: state.page >= pages, onclick: () => (state.page++, load()) }, "Next ›"),
    );
  }

  async function load() {
    clearTimeout(timer);
    try {
      const page = await api.jobs({ page_no: state.page, page_size: PAGE, status: state.status });
      if (!alive) return;
      lastPage = page;
      draw(page);
    } catch (e) {
      if (alive) mount(table, errorBox(e));
    }
    if (alive) {
      timer = setTimeout(function tick() {
        if (state.auto) load();
        else timer = setTimeout(tick, REFRESH_MS);
      }, REFRESH_MS);
    }
  }
  load();
  return () => {
    alive = false;
    clearTimeout(timer);
  };
}
