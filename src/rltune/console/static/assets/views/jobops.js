// Job operations of the job page's header (Volcano Ark's 停止 / 复制, and resume):
//   Stop   — a RUNNING job ends at its next step boundary with a checkpoint (→ STOPPED);
//   Resume — a FAILED, CANCELED or STOPPED job continues from its latest checkpoint;
//   Copy   — the job's YAML in an editor; the edited config is submitted as a new job
//            (POST /v1/jobs/<id>/copy: masked secrets keep the source's values).
import { api } from "../api.js";
import { confirmDialog, errorBox, h } from "../dom.js";
import { go } from "../router.js";

export const RESUMABLE = new Set(["FAILED", "CANCELED", "STOPPED"]);

/** The Stop / Resume / Copy buttons for `job`; `onJob(job)` gets the job after a change. */
export function jobActions(job, { onJob, onError }) {
  const id = job.job_id;
  const run = async (fn) => {
    try {
      onJob(await fn());
    } catch (e) {
      onError(e);
    }
  };
  const stop = async () => {
    const ok = await confirmDialog(
      `Stop job ${id}? It ends at its next step boundary and saves a checkpoint; you can resume it later.`,
      "Stop job",
    );
    if (ok) run(() => api.stopJob(id));
  };
  const resume = async () => {
    const ok = await confirmDialog(`Resume job ${id} from its latest checkpoint?`, "Resume job");
    if (ok) run(() => api.resumeJob(id));
  };
  const stopping = job.status === "RUNNING" && job.stop_requested_at;
  return [
    job.status === "RUNNING"
      ? h(
          "button",
          { class: "btn small", id: "stop-job", disabled: !!stopping, onclick: stop, title: "end at the next step boundary with a checkpoint" },
          stopping ? "Stopping at the next step…" : "Stop",
        )
      : null,
    RESUMABLE.has(job.status) ? h("button", { class: "btn small primary", id: "resume-job", onclick: resume }, "Resume") : null,
    h("button", { class: "btn small", id: "copy-job", onclick: () => copyEditor(job) }, "Copy"),
  ];
}

/** A modal editor with the job's YAML; Submit creates the copy and opens it. */
export function copyEditor(job) {
  const name = h("input", { id: "copy-name", value: `${job.job_name || job.job_id}-copy`, size: 40 });
  const text = h("textarea", { id: "copy-yaml", rows: 24, spellcheck: "false", class: "yaml-editor" });
  text.value = job.config_yaml || "";
  const err = h("div", { id: "copy-error" });
  const close = () => overlay.remove();
  const submit = async () => {
    err.replaceChildren();
    try {
      const created = await api.copyJob(job.job_id, { config_yaml: text.value, job_name: name.value.trim() || undefined });
      close();
      go(["jobs", created.job_id, "details"]);
    } catch (e) {
      err.append(errorBox(e));
    }
  };
  const overlay = h(
    "div",
    { class: "overlay", role: "dialog", "aria-modal": "true" },
    h(
      "div",
      { class: "dialog wide", id: "copy-dialog" },
      h("h3", {}, `Copy job ${job.job_id}`),
      h("p", { class: "muted small" }, "Edit the configuration, then submit it as a new job. Masked secrets (***) keep the source job's values."),
      h("label", {}, "Name ", name),
      text,
      err,
      h(
        "div",
        { class: "row end" },
        h("button", { class: "btn", onclick: close, "data-test": "copy-cancel" }, "Cancel"),
        h("button", { class: "btn primary", id: "copy-submit", onclick: submit }, "Submit copy"),
      ),
    ),
  );
  document.body.append(overlay);
  text.focus();
  return overlay;
}
