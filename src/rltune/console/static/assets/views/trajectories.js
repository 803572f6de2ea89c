// Job → Trajectories: the steps with their reward distribution; the trajectories of one
// step, filtered and paged by the server (a step may hold 10,000); and, chosen by the hash
// query, the replay of one, the group of one prompt, or a comparison of 2–10 (against a
// baseline, or each against the one before it: views/compare_chain.js).
// All state lives in the hash (#/jobs/<id>/trajectories?step=3&page=2&status=failed&rid=…)
// so every view can be linked and the browser's back button works.
import { api } from "../api.js";
import { binValues, histogram } from "../charts.js";
import { debounce, errorBox, fmtNum, h, mount, statusBadge } from "../dom.js";
import { go } from "../router.js";
import { chainView, modeSwitch } from "./compare_chain.js";
import { compareView, groupView, promptOf, replayView } from "./replay.js";

const PAGE = 50;
const FILTERS = ["min_reward", "max_reward", "status", "sample_index", "q"];
const picked = new Map(); // job_id -> Set of "step:rollout_id" chosen for comparison

export function renderTrajectories(el, ctx) {
  const q = Object.fromEntries(ctx.query.entries());
  const setQuery = (changes) => {
    const next = { ...q, ...changes };
    go(["jobs", ctx.jobId, "trajectories"], next);
  };
  const sel = picked.get(ctx.jobId) || new Set();
  picked.set(ctx.jobId, sel);

  const stepsBox = h("aside", { class: "steps", id: "steps" }, h("p", { class: "muted" }, "Loading steps…"));
  const listBox = h("div", { class: "traj-list", id: "traj-list" });
  const detail = h("div", { class: "traj-detail", id: "traj-detail" });
  mount(el, h("div", { class: "traj-layout" }, stepsBox, h("div", { class: "grow" }, listBox, detail)));

  let alive = true;
  const cleanups = [];

  // Reward spread per step: the server's step stats when it has them, else the trainer's
  // critic/rewards/{mean,min,max} metrics (cheap: no trajectory file is read for them).
  async function rewardStats() {
    try {
      const names = ["mean", "min", "max"].map((k) => `critic/rewards/${k}`);
      const m = await api.metrics(ctx.jobId, { names: names.join(",") });
      const out = new Map();
      for (const [i, k] of ["mean", "min", "max"].entries()) {
        for (const [step, v] of (m.series || {})[names[i]] || []) {
          out.set(step, { ...(out.get(step) || {}), [k]: v });
        }
      }
      return out;
    } catch {
      return new Map();
    }
  }

  function spreadBar(st, lo, hi) {
    // min..max as a bar and the mean as a tick, on the job's whole reward range.
    const w = 150;
    const x = (v) => (hi > lo ? ((v - lo) / (hi - lo)) * (w - 4) + 2 : w / 2);
    return h(
      "svg:svg",
      { width: w, height: 10, class: "spread", viewBox: `0 0 ${w} 10` },
      h("svg:rect", { x: 0, y: 4, width: w, height: 2, fill: "#eef0f4" }),
      h("svg:rect", { x: x(st.min), y: 2, width: Math.max(2, x(st.max) - x(st.min)), height: 6, fill: "#9dbbf0", rx: 2 }),
      h("svg:rect", { x: x(st.mean) - 1, y: 0, width: 2, height: 10, fill: "#1f4fb0" }),
    );
  }

  async function loadSteps() {
    let steps;
    let spread;
    try {
      [steps, spread] = await Promise.all([api.trajSteps(ctx.jobId).then((r) => r.steps || []), rewardStats()]);
    } catch (e) {
      mount(stepsBox, errorBox(e));
      return;
    }
    if (!alive) return;
    if (!steps.length) {
      mount(stepsBox, h("p", { class: "muted" }, "No trajectories yet."));
      mount(listBox);
      return;
    }
    const all = [...spread.values()];
    const lo = Math.min(...all.map((s) => s.min ?? Infinity));
    const hi = Math.max(...all.map((s) => s.max ?? -Infinity));
    const step = q.step !== undefined ? Number(q.step) : steps[steps.length - 1].step;
    mount(
      stepsBox,
      h("div", { class: "muted small" }, `${steps.length} steps`),
      steps.map((s) => {
        const st = s.reward_mean !== undefined ? { mean: s.reward_mean, min: s.reward_min, max: s.reward_max } : spread.get(s.step);
        return h(
          "a",
          {
            class: s.step === step ? "step active" : "step",
            "data-step": s.step,
            href: "javascript:void 0",
            onclick: () => setQuery({ step: s.step, page: 1, rid: "", group: "", compare: "", base: "" }),
          },
          h("div", {}, h("b", {}, `step ${s.step}`), h("span", { class: "muted small" }, ` ${s.count} traj.`)),
          st && st.mean !== undefined
            ? h("div", { class: "muted small reward-spread" }, `reward ${fmtNum(st.mean, 3)} [${fmtNum(st.min, 3)}, ${fmtNum(st.max, 3)}]${s.failed ? ` · ${s.failed} failed` : ""}`)
            : null,
          s.histogram ? histogram(s.histogram, { width: 150, height: 24 }) : st && Number.isFinite(st.min) && Number.isFinite(lo) ? spreadBar(st, lo, hi) : null,
        );
      }),
    );
    loadList(step);
    loadDetail(step);
  }

  function filterBar(step) {
    const input = (name, attrs) =>
      h("input", {
        id: `f-${name}`,
        value: q[name] || "",
        ...attrs,
        onchange: (ev) => setQuery({ [name]: ev.target.value, page: 1 }),
      });
    const search = input("q", { type: "search", placeholder: "prompt contains…" });
    search.addEventListener("input", debounce(() => setQuery({ q: search.value, page: 1 }), 500));
    return h(
      "div",
      { class: "toolbar" },
      h("b", {}, `Step ${step}`),
      h("label", {}, "reward ", input("min_reward", { type: "number", step: "any", class: "narrow", placeholder: "min" }), " – ", input("max_reward", { type: "number", step: "any", class: "narrow", placeholder: "max" })),
      h(
        "select",
        { id: "f-status", onchange: (ev) => setQuery({ status: ev.target.value, page: 1 }) },
        ["", "success", "failed"].map((s) => h("option", { value: s, selected: (q.status || "") === s }, s || "any status")),
      ),
      input("sample_index", { type: "number", class: "narrow", placeholder: "sample" }),
      search,
      FILTERS.some((f) => q[f]) ? h("button", { class: "btn small", onclick: () => setQuery(Object.fromEntries(FILTERS.map((f) => [f, ""]))) }, "Clear filters") : null,
    );
  }

  async function loadList(step) {
    const page = Number(q.page || 1);
    const params = { step, page_no: page, page_size: PAGE, fields: "summary" };
    for (const f of FILTERS) if (q[f] !== undefined && q[f] !== "") params[f] = q[f];
    mount(listBox, filterBar(step), h("p", { class: "muted" }, "Loading…"));
    let res;
    try {
      res = await api.trajectories(ctx.jobId, params);
    } catch (e) {
      mount(listBox, filterBar(step), errorBox(e));
      return;
    }
    if (!alive) return;
    const items = res.items || [];
    const rewards = items.map((t) => t.reward).filter((x) => Number.isFinite(x));
    const fnames = [...new Set(items.flatMap((t) => Object.keys(t.rewards || {})))];
    const key = (t) => `${step}:${t.rollout_id}`;
    const compareBtn = h("button", { class: "btn small primary", id: "compare-btn", onclick: () => {
      const chosen = [...sel].filter((k) => k.startsWith(`${step}:`)).map((k) => k.slice(String(step).length + 1));
      setQuery({ compare: chosen.join(","), base: chosen[0], zoom: "", rid: "", group: "" });
    } });
    const updateCompare = () => {
      const n = [...sel].filter((k) => k.startsWith(`${step}:`)).length;
      compareBtn.textContent = `Compare selected (${n})`;
      compareBtn.disabled = n < 2 || n > 10;
      compareBtn.title = n > 10 ? "compare at most 10 trajectories" : "choose 2–10 trajectories";
    };
    updateCompare();
    const pages = Math.max(1, Math.ceil((res.total || 0) / PAGE));
    mount(
      listBox,
      filterBar(step),
      h(
        "div",
        { class: "row" },
        h("span", { class: "muted", id: "traj-count" }, `${res.total ?? items.length} trajectories match`),
        rewards.length ? h("span", { class: "muted small" }, " · rewards on this page: ", histogram(binValues(rewards), { width: 120, height: 20 })) : null,
        h("span", { class: "grow" }),
        compareBtn,
      ),
      h(
        "table",
        { class: "grid-table clickable", id: "traj-table" },
        h("tr", {}, ["", "rollout", "sample", "status", "reward", "advantage", ...fnames, "tokens", "calls", "prompt", ""].map((c) => h("th", {}, c))),
        items.map((t) =>
          h(
            "tr",
            { "data-rid": t.rollout_id, class: q.rid === t.rollout_id ? "selected" : "" },
            h("td", {}, h("input", { type: "checkbox", class: "pick", checked: sel.has(key(t)), onclick: (ev) => ev.stopPropagation(), onchange: (ev) => {
              if (ev.target.checked) sel.add(key(t));
              else sel.delete(key(t));
              updateCompare();
            } })),
            h("td", {}, h("a", { href: "javascript:void 0", class: "open-traj", onclick: () => setQuery({ rid: t.rollout_id, group: "", compare: "" }) }, t.rollout_id)),
            h("td", {}, t.sample_index),
            h("td", {}, statusBadge(t.status)),
            h("td", { class: "num" }, fmtNum(t.reward)),
            h("td", { class: "num" }, fmtNum(t.advantage)),
            fnames.map((n) => h("td", { class: "num" }, fmtNum((t.rewards || {})[n]))),
            h("td", { class: "num small" }, `${t.prompt_tokens ?? "–"} / ${t.response_tokens ?? "–"}`),
            h("td", { class: "num" }, t.num_llm_calls ?? "–"),
            h("td", { class: "prompt-cell small" }, promptOf(t).slice(0, 80)),
            h("td", {}, h("button", { class: "btn tiny open-group", onclick: () => setQuery({ group: t.sample_index, rid: "", compare: "" }) }, "group")),
          ),
        ),
      ),
      h(
        "div",
        { class: "pager" },
        h("button", { class: "btn small", disabled: page <= 1, onclick: () => setQuery({ page: page - 1 }) }, "‹ Prev"),
        h("span", { class: "muted", id: "traj-page" }, ` page ${page} of ${pages} `),
        h("button", { class: "btn small", disabled: page >= pages, onclick: () => setQuery({ page: page + 1 }) }, "Next ›"),
      ),
    );
  }

  async function loadDetail(step) {
    try {
      if (q.rid) {
        const t = await api.trajectory(ctx.jobId, step, q.rid);
        if (alive) mount(detail, replayView(t));
      } else if (q.group !== undefined && q.group !== "") {
        const res = await api.groups(ctx.jobId, step, q.group);
        const group = (res.groups || []).find((g) => String(g.sample_index) === String(q.group));
        if (!alive) return;
        mount(detail, group ? groupView(group, { onOpen: (t) => setQuery({ rid: t.rollout_id, group: "" }) }) : h("p", { class: "muted" }, `No group ${q.group} at step ${step}.`));
      } else if (q.compare) {
        const ids = q.compare.split(",").filter(Boolean).slice(0, 10);
        if (ids.length < 2) {
          mount(detail, errorBox("Choose at least 2 trajectories to compare."));
          return;
        }
        const trajs = await Promise.all(ids.map((rid) => api.trajectory(ctx.jobId, step, rid)));
        if (!alive) return;
        const onMode = (mode) => setQuery({ mode: mode === "previous" ? mode : "", zoom: "" });
        mount(
          detail,
          modeSwitch(q.mode, onMode),
          q.mode === "previous"
            ? chainView(trajs, q.zoom, { onZoom: (i) => setQuery({ zoom: i }) })
            : compareView(trajs, q.base, { onBaseline: (rid) => setQuery({ base: rid }) }),
        );
      } else {
        mount(detail);
      }
    } catch (e) {
      if (alive) mount(detail, errorBox(e));
    }
    if (alive && (q.rid || q.group || q.compare)) detail.scrollIntoView({ block: "start" });
  }

  loadSteps();
  return () => {
    alive = false;
    for (const c of cleanups) c();
  };
}
