// Console shell: login with an API key, header navigation, and a hash router
// (#/jobs, #/jobs/<id>/<tab>?..., #/functions, #/datasets, #/models, #/audit). Each view is
// `render(container, route) -> cleanup` so timers and long polls stop when the user leaves.
import { api, auth } from "./api.js";
import { renderAudit } from "./views/audit.js";
import { errorBox, h, mount } from "./dom.js";
import { parseHash } from "./router.js";
import { renderCompare } from "./views/compare.js";
import { renderDatasets } from "./views/datasets.js";
import { renderFunctions } from "./views/functions.js";
import { renderJob } from "./views/job.js";
import { renderJobs } from "./views/jobs.js";
import { renderModels } from "./views/models.js";
import { renderNewJob } from "./views/newjob.js";
import { renderPlayground } from "./views/playground.js";

const root = document.getElementById("app");
let cleanup = null;
let who = null;

function loginPage(message) {
  const input = h("input", {
    type: "password",
    id: "api-key",
    placeholder: "API key (rk-…)",
    autocomplete: "off",
    size: 40,
  });
  const err = h("div", { class: "login-error", role: "alert" }, message || "");
  const submit = async (ev) => {
    ev.preventDefault();
    const key = input.value.trim();
    if (!key) {
      err.textContent = "Enter an API key.";
      return;
    }
    try {
      who = await api.whoami(key);
      auth.key = key;
      route(); // stays on the deep link the user opened, if any
    } catch (e) {
      err.textContent =
        e.status === 401
          ? "This key was refused: it is unknown or revoked. The admin key is in $RLTUNE_HOME/server/admin.key."
          : `Could not reach the server: ${e.message}`;
    }
  };
  return h(
    "div",
    { class: "login" },
    h(
      "form",
      { class: "login-card", onsubmit: submit },
      h("h1", {}, "rltune console"),
      h("p", { class: "muted" }, "Sign in with an API key. Everything you see is scoped to the key's workspace."),
      input,
      h("button", { class: "btn primary", type: "submit", id: "login-btn" }, "Sign in"),
      err,
    ),
  );
}

function header(active) {
  const link = (href, label, name) =>
    h("a", { href, class: active === name ? "nav active" : "nav" }, label);
  return h(
    "header",
    { class: "top" },
    h("a", { class: "brand", href: "#/jobs" }, "rltune"),
    link("#/jobs", "Jobs", "jobs"),
    link("#/compare", "Compare", "compare"),
    link("#/functions", "Functions", "functions"),
    link("#/datasets", "Datasets", "datasets"),
    link("#/models", "Models", "models"),
    link("#/audit", "Audit", "audit"),
    h("span", { class: "grow" }),
    h("span", { class: "muted", id: "workspace" }, who ? `workspace ${who.workspace}` : ""),
    h(
      "button",
      {
        class: "btn small",
        id: "logout",
        onclick: () => {
          auth.key = "";
          who = null;
          route();
        },
      },
      "Sign out",
    ),
  );
}

async function route() {
  if (cleanup) {
    cleanup();
    cleanup = null;
  }
  if (!auth.key) {
    mount(root, loginPage());
    return;
  }
  if (!who) {
    try {
      who = await api.whoami();
    } catch (e) {
      if (e.status === 401) return; // onUnauthorized already showed the login page
      mount(root, errorBox(e));
      return;
    }
  }
  const r = parseHash(window.location.hash);
  const section = r.parts[0] || "jobs";
  const main = h("main", { class: "content" });
  mount(root, header(section), main);
  try {
    if (section === "jobs" && r.parts[1] === "new") cleanup = renderNewJob(main, r);
    else if (section === "jobs" && r.parts[1]) cleanup = renderJob(main, r);
    else if (section === "compare") cleanup = renderCompare(main, r);
    else if (section === "functions") cleanup = renderFunctions(main, r);
    else if (section === "datasets") cleanup = renderDatasets(main, r);
    else if (section === "models") cleanup = renderModels(main, r);
    else if (section === "playground") cleanup = renderPlayground(main, r);
    else if (section === "audit") cleanup = renderAudit(main, r);
    else cleanup = renderJobs(main, r);
  } catch (e) {
    mount(main, errorBox(e));
  }
}

auth.onUnauthorized = () => {
  auth.key = "";
  who = null;
  if (cleanup) cleanup();
  cleanup = null;
  mount(root, loginPage("Your key is no longer accepted; sign in again."));
};

window.addEventListener("hashchange", route);
route();
