// Job → Outputs: the checkpoints with their validation reward; the best one is marked.
import { api } from "../api.js";
import { errorBox, fmtNum, fmtTime, h, mount, toEpoch } from "../dom.js";

/** The checkpoint with the highest validation reward (the latest among equals), or null. */
export function bestCheckpoint(ckpts) {
  let best = null;
  for (const c of ckpts) {
    if (!Number.isFinite(c.validation_reward)) continue;
    if (!best || c.validation_reward >= best.validation_reward) best = c;
  }
  return best;
}

export function renderOutputs(el, ctx) {
  mount(el, h("p", { class: "muted" }, "Loading checkpoints…"));
  api
    .checkpoints(ctx.jobId)
    .then((res) => {
      const ckpts = res.checkpoints || [];
      if (!ckpts.length) {
        mount(el, h("p", { class: "muted" }, "No checkpoints saved (yet)."));
        return;
      }
      const best = bestCheckpoint(ckpts);
      mount(
        el,
        h(
          "table",
          { class: "grid-table", id: "checkpoints" },
          h("tr", {}, ["checkpoint", "step", "validation reward", "saved", "path"].map((c) => h("th", {}, c))),
          ckpts.map((c) =>
            h(
              "tr",
              { "data-ckpt": c.name, class: c === best ? "best" : "" },
              h("td", {}, c.name, c === best ? h("span", { class: "badge st-succeeded best-mark" }, "★ best") : null),
              h("td", { class: "num" }, c.step),
              h("td", { class: "num" }, fmtNum(c.validation_reward)),
              h("td", { class: "small" }, fmtTime(toEpoch(c.created_at))),
              h("td", { class: "small mono" }, c.path || ""),
            ),
          ),
        ),
        h("p", { class: "muted small" }, "Publish a checkpoint as a model with ", h("code", {}, `rltune models publish ${ctx.jobId} --checkpoint ${best ? best.name : "best"}`)),
      );
    })
    .catch((e) => mount(el, errorBox(e)));
}
