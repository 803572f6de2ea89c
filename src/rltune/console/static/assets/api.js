// The console's only door to the job server: REST calls with the user's API key
// (docs/rest-api.md). A 401 sends the user back to the login page.

const KEY = "rltune.apiKey";

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    const where = e.where ? ` (at ${e.where})` : "";
    const hint = e.hint ? ` — ${e.hint}` : "";
    super(`${e.message || `HTTP ${status}`}${where}${hint}`);
    this.status = status;
    this.code = e.code;
    this.where = e.where;
  }
}

export const auth = {
  get key() {
    return localStorage.getItem(KEY) || "";
  },
  set key(v) {
    if (v) localStorage.setItem(KEY, v);
    else localStorage.removeItem(KEY);
  },
  onUnauthorized: () => {},
};

function url(path, params) {
  const u = new URL(path, window.location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    if (v === undefined || v === null || v === "") continue;
    u.searchParams.set(k, v);
  }
  return u;
}

/** Fetch JSON from the server; throws ApiError with the server's message, where and hint. */
export async function call(method, path, { params, body, raw, signal, key } = {}) {
  const headers = { Authorization: `Bearer ${key ?? auth.key}` };
  let payload;
  if (raw !== undefined) {
    payload = raw;
    headers["Content-Type"] = "application/octet-stream";
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers["Content-Type"] = "application/json";
  }
  const res = await fetch(url(path, params), { method, headers, body: payload, signal });
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!res.ok) {
    if (res.status === 401 && key === undefined) auth.onUnauthorized();
    throw new ApiError(res.status, data);
  }
  return data;
}

const enc = encodeURIComponent;

// One function per route, so a change of the REST API touches this table only.
export const api = {
  whoami: (key) => call("GET", "/v1/whoami", { key }),
  jobs: (params) => call("GET", "/v1/jobs", { params }),
  job: (id) => call("GET", `/v1/jobs/${enc(id)}`),
  cancelJob: (id) => call("POST", `/v1/jobs/${enc(id)}/cancel`),
  // job operations (views/jobops.js, views/newjob.js)
  stopJob: (id) => call("POST", `/v1/jobs/${enc(id)}/stop`),
  resumeJob: (id, checkpoint) => call("POST", `/v1/jobs/${enc(id)}/resume`, { body: { checkpoint } }),
  copyJob: (id, body) => call("POST", `/v1/jobs/${enc(id)}/copy`, { body }),
  createJob: (config) => call("POST", "/v1/jobs", { body: { config } }),
  hyperparameters: () => call("GET", "/v1/hyperparameters"),
  deleteJob: (id) => call("DELETE", `/v1/jobs/${enc(id)}`),
  metrics: (id, params) => call("GET", `/v1/jobs/${enc(id)}/metrics`, { params }),
  alerts: (id) => call("GET", `/v1/jobs/${enc(id)}/alerts`),
  logs: (id, params, signal) => call("GET", `/v1/jobs/${enc(id)}/logs`, { params, signal }),
  checkpoints: (id) => call("GET", `/v1/jobs/${enc(id)}/checkpoints`),
  trajSteps: (id) => call("GET", `/v1/jobs/${enc(id)}/trajectories/steps`),
  trajectories: (id, params) => call("GET", `/v1/jobs/${enc(id)}/trajectories`, { params }),
  trajectory: (id, step, rid) =>
    call("GET", `/v1/jobs/${enc(id)}/trajectories/${step}/${enc(rid)}`, {
      params: { tokens: "decoded" },
    }),
  groups: (id, step, sampleIndex) =>
    call("GET", `/v1/jobs/${enc(id)}/trajectories/${step}/groups`, {
      params: { sample_index: sampleIndex },
    }),
  files: (params) => call("GET", "/v1/files", { params }),
  fileContent: async (id) => {
    const res = await fetch(url(`/v1/files/${enc(id)}/content`), {
      headers: { Authorization: `Bearer ${auth.key}` },
    });
    if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => null));
    return res.text();
  },
  uploadFile: (filename, bytes) =>
    call("POST", "/v1/files", { params: { filename, purpose: "fine-tune" }, raw: bytes }),
  deleteFile: (id) => call("DELETE", `/v1/files/${enc(id)}`),
  functions: (params) => call("GET", "/v1/functions", { params }),
  instances: (params) => call("GET", "/v1/instances", { params }),
  testInstance: (id, input) => call("POST", `/v1/instances/${enc(id)}/test`, { body: { input } }),
  // model lifecycle: published models, deployments, evaluations
  models: () => call("GET", "/v1/models"),
  publish: (jobId, name, checkpoint) =>
    call("POST", `/v1/jobs/${enc(jobId)}/publish`, { body: { name, checkpoint } }),
  deleteModel: (name) => call("DELETE", `/v1/models/${enc(name)}`),
  deployments: () => call("GET", "/v1/deployments"),
  deployment: (id) => call("GET", `/v1/deployments/${enc(id)}`),
  deploy: (models) => call("POST", "/v1/deployments", { body: { models } }),
  stopDeployment: (id) => call("POST", `/v1/deployments/${enc(id)}/stop`),
  deleteDeployment: (id) => call("DELETE", `/v1/deployments/${enc(id)}`),
  chat: (id, body) => call("POST", `/v1/deployments/${enc(id)}/chat/completions`, { body }),
  evaluations: () => call("GET", "/v1/evaluations"),
  evaluation: (id) => call("GET", `/v1/evaluations/${enc(id)}`),
  evaluate: (body) => call("POST", "/v1/evaluations", { body }),
  // the audit log of state-changing calls (views/audit.js)
  audit: (params) => call("GET", "/v1/audit", { params }),
};
