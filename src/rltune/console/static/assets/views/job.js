// One job: a header (id, status, progress, cancel) kept fresh while the job is active, and
// the tabs Details · Metrics · Trajectories · Logs · Outputs.
import { api } from "../api.js";
import { confirmDialog, errorBox, h, mount, progressOf, statusBadge } from "../dom.js";
import { renderDetails } from "./details.js";
import { jobActions } from "./jobops.js";
import { renderLogs } from "./logs.js";
import { renderMetrics } from "./metrics.js";
import { renderOutputs } from "./outputs.js";
import { renderTrajectories } from "./trajectories.js";

const TABS = [
  ["details", "Details", renderDetails],
  ["metrics", "Metrics", renderMetrics],
  ["trajectories", "Trajectories", renderTrajectories],
  ["logs", "Logs", renderLogs],
  ["outputs", "Outputs", renderOutputs],
];
const ACTIVE = new Set(["PENDING", "RUNNING"]);

export function renderJob(el, route) {
  const jobId = route.parts[1];
  const tab = TABS.find((t) => t[0] === route.parts[2]) || TABS[0];
  const head = h("div", { class: "job-head" });
  const body = h("div", { class: "tab-body", id: `tab-${tab[0]}` });
  const alertsPanel = h("section", { class: "alerts-panel", id: "alerts-panel", hidden: true });
  const tabs = h(
    "nav",
    { class: "tabs" },
    TABS.map(([name, label]) =>
      h(
        "a",
        {
          href: `#/jobs/${encodeURIComponent(jobId)}/${name}`,
          class: name === tab[0] ? "tab active" : "tab",
          "data-tab": name,
        },
        label,
      ),
    ),
  );
  mount(el, h("div", { class: "crumbs" }, h("a", { href: "#/jobs" }, "Jobs"), " / ", jobId), head, alertsPanel, tabs, body);

  let alive = true;
  let timer = null;
  let inner = null;
  const ctx = { jobId, job: null, query: route.query, onJob: [] };

  async function cancel() {
    if (!(await confirmDialog(`Cancel job ${jobId}? Saved checkpoints stay.`, "Cancel job"))) return;
    try {
      ctx.job = await api.cancelJob(jobId);
      drawHead();
    } catch (e) {
      head.append(errorBox(e));
    }
  }

  function drawHead() {
    const job = ctx.job;
    const p = progressOf(job);
    mount(
      head,
      h("h2", {}, job.job_name || job.job_id, " ", statusBadge(job.status)),
      h(
        "div",
        { class: "muted" },
        `${job.job_id} · ${job.model || "model ?"} · ${job.algorithm || ""}`,
        p.total ? ` · step ${p.step || 0} / ${p.total}` : "",
      ),
      ACTIVE.has(job.status)
        ? h("button", { class: "btn danger small", id: "cancel-job", onclick: cancel }, "Cancel job")
        : null,
      jobActions(job, { onJob: changed, onError: (e) => head.append(errorBox(e)) }),
    );
  }

  // After stop / resume: show the answer, and keep polling while the job is active.
  function changed(job) {
    ctx.job = job;
    drawHead();
    clearTimeout(timer);
    if (alive && ACTIVE.has(job.status)) timer = setTimeout(poll, 1000);
  }

  // The training doctor's alerts: what looks wrong, the evidence, and the first fix to try.
  async function drawAlerts() {
    let alerts = [];
    try {
      alerts = (await api.alerts(jobId)).alerts || [];
    } catch (e) {
      return;
    }
    if (!alive) return;
    alertsPanel.hidden = !alerts.length;
    const evidence = (ev) =>
      Object.entries(ev)
        .filter(([k]) => k !== "steps")
        .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)
        .join(", ");
    mount(
      alertsPanel,
      h("h3", {}, `Doctor: ${alerts.length} alert${alerts.length === 1 ? "" : "s"}`),
      h(
        "ul",
        { class: "alerts" },
        alerts.map((a) =>
          h(
            "li",
            { class: "alert", "data-code": a.code, "data-step": String(a.step) },
            h("strong", {}, `step ${a.step} · ${a.code}`),
            ` ${a.title} `,
            h("span", { class: "muted small" }, `(${evidence(a.evidence)})`),
            h("div", { class: "small" }, `→ ${a.advice}`),
          ),
        ),
      ),
    );
  }

  async function poll() {
    try {
      ctx.job = await api.job(jobId);
    } catch (e) {
      if (alive) mount(head, errorBox(e));
      return;
    }
    if (!alive) return;
    drawHead();
    drawAlerts();
    if (!inner) inner = tab[2](body, ctx) || (() => {});
    for (const fn of ctx.onJob) fn(ctx.job);
    if (ACTIVE.has(ctx.job.status)) timer = setTimeout(poll, 3000);
  }
  poll();
  return () => {
    alive = false;
    clearTimeout(timer);
    if (inner) inner();
  };
}
