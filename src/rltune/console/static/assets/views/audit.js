// Audit: the workspace's state-changing calls, newest first (GET /v1/audit); the admin key
// sees every workspace. Records never hold a body or a secret, only ids.
import { api } from "../api.js";
import { errorBox, fmtTime, h, mount } from "../dom.js";

const PAGE_SIZE = 50;

export function renderAudit(el) {
  const list = h("div", { id: "audit-list" }, h("p", { class: "muted" }, "Loading…"));
  const pager = h("div", { id: "audit-pager", class: "muted" });
  mount(el, h("h2", {}, "Audit log"), h("section", { class: "card" }, list, pager));
  let pageNo = 1;

  function load() {
    api
      .audit({ page_no: pageNo, page_size: PAGE_SIZE })
      .then((res) => {
        const items = res.items || [];
        mount(
          list,
          items.length
            ? h(
                "table",
                { class: "grid-table" },
                h("tr", {}, ["time", "workspace", "key", "action", "target", "status", "outcome"].map((c) => h("th", {}, c))),
                items.map((e) =>
                  h(
                    "tr",
                    { "data-audit": e.audit_id },
                    h("td", { class: "small" }, fmtTime(e.time)),
                    h("td", {}, e.workspace),
                    h("td", { class: "mono small" }, e.key_id),
                    h("td", { class: "mono" }, e.action),
                    h("td", { class: "mono small" }, e.target ?? "–"),
                    h("td", { class: "num" }, String(e.status_code)),
                    h("td", { class: e.outcome === "ok" ? "ok" : "bad" }, e.outcome),
                  ),
                ),
              )
            : h("p", { class: "muted" }, "No state-changing calls recorded yet."),
        );
        const pages = Math.max(1, Math.ceil(res.total / PAGE_SIZE));
        const go = (n) => () => {
          pageNo = n;
          load();
        };
        mount(
          pager,
          h("span", {}, `${res.total} record(s), page ${pageNo} of ${pages} `),
          pageNo > 1 ? h("button", { class: "btn small", onclick: go(pageNo - 1) }, "Newer") : null,
          pageNo < pages ? h("button", { class: "btn small", onclick: go(pageNo + 1) }, "Older") : null,
        );
      })
      .catch((e) => mount(list, errorBox(e)));
  }
  load();
}
