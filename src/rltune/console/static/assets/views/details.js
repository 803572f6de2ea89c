// Job → Details: status timeline, error, datasets, functions and the full config as YAML.
import { fmtDuration, fmtTime, h, mount, statusBadge, toEpoch } from "../dom.js";

function timeline(job) {
  const created = toEpoch(job.created_at);
  const started = toEpoch(job.started_at);
  const finished = toEpoch(job.finished_at);
  const ev = [["Created", created, "PENDING"]];
  if (started) ev.push(["Started", started, "RUNNING"]);
  if (finished) ev.push([job.status.charAt(0) + job.status.slice(1).toLowerCase(), finished, job.status]);
  if (job.resume_from) ev.push([`Resumed from ${job.resume_from}`, null, "PENDING"]);
  return h(
    "ol",
    { class: "timeline", id: "status-timeline" },
    ev.map(([label, t, st], i) =>
      h(
        "li",
        {},
        statusBadge(st),
        ` ${label} `,
        h("span", { class: "muted" }, fmtTime(t)),
        i > 0 && t && ev[i - 1][1] ? h("span", { class: "muted small" }, ` (+${fmtDuration(t - ev[i - 1][1])})`) : null,
      ),
    ),
  );
}

function kv(rows) {
  return h(
    "table",
    { class: "kv" },
    rows.filter((r) => r[1] !== undefined).map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, v ?? "–"))),
  );
}

export function renderDetails(el, ctx) {
  const draw = (job) => {
    const cfg = job.config || {};
    const datasets = cfg.datasets || [];
    const functions = cfg.functions || [];
    const hp = (cfg.training || {}).hyper_parameters || {};
    mount(
      el,
      h(
        "div",
        { class: "cols" },
        h(
          "section",
          { class: "card" },
          h("h3", {}, "Status"),
          timeline(job),
          job.error ? h("pre", { class: "error-box", id: "job-error" }, job.error) : null,
          kv([
            ["Job id", job.job_id],
            ["Model", job.model],
            ["Algorithm", job.algorithm || hp.algorithm],
            ["Training type", job.training_type],
            ["Batch × rollouts", hp.batch_size ? `${hp.batch_size} × ${hp.n_rollouts}` : undefined],
            ["Checkpoints", job.checkpoints],
          ]),
          h("h3", {}, "Datasets"),
          datasets.length
            ? h(
                "ul",
                { id: "datasets" },
                datasets.map((d) => h("li", {}, h("b", {}, d.type || "dataset"), " ", d.file_id || d.file_name || "")),
              )
            : h("p", { class: "muted" }, [...(job.training_file_ids || []), ...(job.validation_file_ids || [])].join(", ") || "none"),
          h("h3", {}, "Functions"),
          functions.length
            ? h(
                "table",
                { class: "grid-table", id: "functions" },
                h("tr", {}, ["type", "name", "function", "weight"].map((c) => h("th", {}, c))),
                functions.map((f) =>
                  h(
                    "tr",
                    {},
                    h("td", {}, f.type),
                    h("td", {}, f.name),
                    h("td", {}, f.entity_id || f.instance_id || (f.fcmodel || {}).classpath || "–"),
                    h("td", {}, f.weight ?? "–"),
                  ),
                ),
              )
            : h("p", { class: "muted" }, "none (built-in single-turn rollout)"),
        ),
        h(
          "section",
          { class: "card grow" },
          h("h3", {}, "Configuration"),
          h("pre", { class: "yaml", id: "config-yaml" }, job.config_yaml || JSON.stringify(cfg, null, 2)),
        ),
      ),
    );
  };
  draw(ctx.job);
  ctx.onJob.push(draw);
}
