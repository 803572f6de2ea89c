// Datasets: the workspace's JSONL files, upload with the validation errors shown by line,
// and a preview of the first rows.
import { api } from "../api.js";
import { confirmDialog, errorBox, fmtTime, h, mount, toEpoch } from "../dom.js";

const PREVIEW_ROWS = 20;

/** Lines of a JSONL text that are not a JSON object: [{line, message}] (1-based lines). */
export function jsonlProblems(text) {
  const out = [];
  text.split("\n").forEach((raw, i) => {
    if (!raw.trim()) return;
    try {
      const v = JSON.parse(raw);
      if (typeof v !== "object" || v === null || Array.isArray(v)) out.push({ line: i + 1, message: "a row must be a JSON object" });
    } catch (e) {
      out.push({ line: i + 1, message: e.message });
    }
  });
  return out;
}

export function renderDatasets(el) {
  const list = h("div", { id: "file-list" }, h("p", { class: "muted" }, "Loading…"));
  const preview = h("div", { id: "file-preview" });
  const uploadMsg = h("div", { id: "upload-result" });
  const picker = h("input", { type: "file", id: "upload-file", accept: ".jsonl,.json,application/jsonl" });

  async function upload() {
    const f = picker.files[0];
    if (!f) {
      mount(uploadMsg, errorBox("Choose a .jsonl file first."));
      return;
    }
    const text = await f.text();
    const problems = jsonlProblems(text);
    if (problems.length) {
      mount(
        uploadMsg,
        h(
          "div",
          { class: "error-box", role: "alert" },
          h("b", {}, `${f.name}: ${problems.length} invalid line(s); nothing was uploaded. Fix them and upload again.`),
          h("ul", { class: "problems" }, problems.slice(0, 50).map((p) => h("li", {}, `${f.name}:${p.line}: ${p.message}`))),
        ),
      );
      return;
    }
    mount(uploadMsg, h("p", { class: "muted" }, "Uploading…"));
    try {
      const file = await api.uploadFile(f.name, await f.arrayBuffer());
      mount(uploadMsg, h("p", { class: "ok" }, `Uploaded ${file.filename} as ${file.file_id} (${file.rows} rows).`));
      load();
    } catch (e) {
      // The server checks the rows too (fields, types); its `where` names file:line.
      mount(uploadMsg, errorBox(e));
    }
  }

  async function show(file) {
    mount(preview, h("p", { class: "muted" }, "Loading…"));
    try {
      const text = await api.fileContent(file.file_id);
      const rows = text.split("\n").filter((l) => l.trim()).slice(0, PREVIEW_ROWS);
      mount(preview, h("section", { class: "card" }, h("h3", {}, `${file.filename} — first ${rows.length} of ${file.rows ?? "?"} rows`), h("ol", { class: "preview mono" }, rows.map((r) => h("li", {}, r)))));
    } catch (e) {
      mount(preview, errorBox(e));
    }
  }

  async function remove(file) {
    if (!(await confirmDialog(`Delete ${file.filename} (${file.file_id})?`, "Delete"))) return;
    try {
      await api.deleteFile(file.file_id);
      load();
    } catch (e) {
      mount(uploadMsg, errorBox(e));
    }
  }

  async function load() {
    try {
      const items = (await api.files({ page_size: 200 })).items || [];
      mount(
        list,
        items.length
          ? h(
              "table",
              { class: "grid-table" },
              h("tr", {}, ["file", "name", "rows", "bytes", "created", ""].map((c) => h("th", {}, c))),
              items.map((f) =>
                h("tr", { "data-file": f.file_id }, h("td", { class: "mono" }, f.file_id), h("td", {}, f.filename), h("td", { class: "num" }, f.rows ?? "–"), h("td", { class: "num" }, f.bytes), h("td", { class: "small" }, fmtTime(toEpoch(f.created_at))), h("td", {}, h("button", { class: "btn small", onclick: () => show(f) }, "Preview"), " ", h("button", { class: "btn small danger", onclick: () => remove(f) }, "Delete"))),
              ),
            )
          : h("p", { class: "muted" }, "No datasets uploaded."),
      );
    } catch (e) {
      mount(list, errorBox(e));
    }
  }

  mount(el, h("h2", {}, "Datasets"), h("section", { class: "card" }, h("h3", {}, "Upload"), picker, " ", h("button", { class: "btn primary", id: "upload-btn", onclick: upload }, "Upload"), uploadMsg), h("section", { class: "card" }, list), preview);
  load();
}
