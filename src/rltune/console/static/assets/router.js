// Hash routes: "#/jobs/ft-1/trajectories?step=3&rid=r-1" -> {parts, query}.

/** Parse "#/a/b?x=1" into {parts: ["a", "b"], query: URLSearchParams}. */
export function parseHash(hash) {
  const [path, qs] = (hash.replace(/^#/, "") || "/jobs").split("?");
  return {
    parts: path.split("/").filter(Boolean).map(decodeURIComponent),
    query: new URLSearchParams(qs || ""),
  };
}

/** Build "#/a/b?x=1" from parts and a plain object of query values (empty ones dropped). */
export function hashOf(parts, query = {}) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== "") qs.set(k, v);
  }
  const q = qs.toString();
  return `#/${parts.map(encodeURIComponent).join("/")}${q ? `?${q}` : ""}`;
}

export function go(parts, query) {
  window.location.hash = hashOf(parts, query);
}
