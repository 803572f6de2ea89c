// Job → Outputs: the checkpoints with their validation reward; the best one is marked.
import { api } from "../api.js";
import { errorBox, fmtNum, fmtTime, h, mount, toEpoch } from "../dom.js";

/** "Publish as model": a checkpoint (best preselected) and a name -> POST .../publish. */
function publishForm(jobId, ckpts, best) {
  const pick = h(
    "select",
    { id: "publish-ckpt" },
    ckpts.map((c) => h("option", { value: String(c.step), selected: c === (best || ckpts[ckpts.length - 1]) }, `${c.name}${c === best ? " (best)" : ""}`)),
  );
  const name = h("input", { id: "publish-name", placeholder: "model name", size: 24, autocomplete: "off" });
  const status = h("span", { class: "small", id: "publish-status", role: "status" });
  const submit = async (ev) => {
    ev.preventDefault();
    status.textContent = "Publishing…";
    try {
      const m = await api.publish(jobId, name.value.trim(), Number(pick.value));
      mount(status, "Published ", h("a", { href: "#/models", id: "published-link" }, m.name), ` (${m.checkpoint}).`);
    } catch (e) {
      status.textContent = e.message;
      status.className = "small error";
    }
  };
  return h(
    "form",
    { class: "publish-form", id: "publish-form", onsubmit: submit },
    h("strong", {}, "Publish as model "),
    pick,
    " ",
    name,
    " ",
    h("button", { class: "btn primary small", type: "submit", id: "publish-btn" }, "Publish"),
    " ",
    status,
  );
}

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
        publishForm(ctx.jobId, ckpts, best),
        h("p", { class: "muted small" }, "Or from a shell: ", h("code", {}, `rltune models publish ${ctx.jobId} --checkpoint ${best ? best.step : "best"} --name NAME`)),
      );
    })
    .catch((e) => mount(el, errorBox(e)));
}
