// Job → Logs: the tail of the training log, live follow of a running job (long polls on
// GET /logs?follow=true), and a search that filters and highlights the loaded lines.
import { api } from "../api.js";
import { debounce, errorBox, h, mount } from "../dom.js";

const KEEP = 5000; // lines kept in the page; older ones scroll out
const TAIL = 1000;
const FN_TAG = / \[fn [^\]]+\] /;

export function renderLogs(el, ctx) {
  let lines = [];
  let next = 1;
  let alive = true;
  let ctrl = null;
  const out = h("pre", { class: "log", id: "log-lines" });
  const search = h("input", { type: "search", id: "log-search", placeholder: "search the log", oninput: debounce(() => draw(), 200) });
  const follow = h("input", { type: "checkbox", id: "log-follow", checked: true });
  // The functions' own output (print / logging of rollouts and rewards) is tagged "[fn name id]".
  const fnOnly = h("input", { type: "checkbox", id: "log-fn-only", onchange: () => draw() });
  const count = h("span", { class: "muted small", id: "log-count" });
  const live = h("span", { class: "muted small", id: "log-live" });
  mount(
    el,
    h("div", { class: "toolbar" }, search, h("label", { class: "muted" }, follow, " follow"), h("label", { class: "muted" }, fnOnly, " function output only"), live, h("span", { class: "grow" }), count),
    out,
  );

  function draw() {
    const term = search.value.trim().toLowerCase();
    const base = fnOnly.checked ? lines.filter((l) => FN_TAG.test(l)) : lines;
    const shown = term ? base.filter((l) => l.toLowerCase().includes(term)) : base;
    out.replaceChildren(
      ...shown.map((l) => {
        const lvl = / (ERROR|WARNING|WARN) /.exec(l);
        const cls = ["log-line", lvl ? `lvl-${lvl[1].toLowerCase()}` : "", FN_TAG.test(l) ? "log-fn" : ""];
        const div = h("div", { class: cls.filter(Boolean).join(" ") });
        if (!term) div.textContent = l;
        else {
          const i = l.toLowerCase().indexOf(term);
          div.append(l.slice(0, i), h("mark", {}, l.slice(i, i + term.length)), l.slice(i + term.length));
        }
        return div;
      }),
    );
    count.textContent = shown.length !== lines.length ? `${shown.length} of ${lines.length} lines match` : `${lines.length} lines`;
    if (follow.checked && !term) out.scrollTop = out.scrollHeight;
  }

  function add(res) {
    lines = lines.concat(res.logs || []);
    if (lines.length > KEEP) lines = lines.slice(-KEEP);
    next = res.next_offset ?? next + (res.logs || []).length;
    draw();
  }

  async function tail() {
    // The tail: ask for the last lines (offset=-N); a server without that reads from line 1.
    try {
      add(await api.logs(ctx.jobId, { offset: -TAIL, lines: TAIL }));
    } catch (e) {
      if (e.status !== 422 && e.status !== 400) throw e;
      let res;
      do {
        res = await api.logs(ctx.jobId, { offset: next, lines: 2000 });
        add(res);
      } while (alive && (res.logs || []).length === 2000);
    }
  }

  async function followLoop() {
    while (alive) {
      const job = ctx.job || {};
      if (!["PENDING", "RUNNING"].includes(job.status)) {
        live.textContent = `job ${String(job.status || "").toLowerCase()}`;
        return;
      }
      if (!follow.checked) {
        live.textContent = "paused";
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      live.textContent = "● live";
      ctrl = new AbortController();
      try {
        const res = await api.logs(ctx.jobId, { offset: next, lines: 1000, follow: true, wait: 20 }, ctrl.signal);
        if (!alive) return;
        add(res);
        if (res.status) ctx.job = { ...job, status: res.status };
        if (res.finished && !(res.logs || []).length) return followLoop();
      } catch (e) {
        if (!alive) return;
        out.after(errorBox(e));
        await new Promise((r) => setTimeout(r, 3000));
      }
    }
  }

  tail()
    .then(followLoop)
    .catch((e) => alive && out.before(errorBox(e)));
  return () => {
    alive = false;
    if (ctrl) ctrl.abort();
  };
}
