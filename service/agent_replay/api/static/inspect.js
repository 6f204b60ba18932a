// The run inspector: a client of the public /v1 API, no build step, no other origin.
//
// Safety: nothing from the log is ever parsed as HTML. Every string reaches the page as a
// text node (textContent, createTextNode); the Markdown renderer builds elements itself and
// only ever sets text and whitelisted link targets. The page's CSP allows this script alone.
"use strict";

const KEY_STORAGE = "agent-replay.key";
const PAGE_EVENTS = 1000;
const LIST_REFRESH_MS = 2000;

// -- small DOM helpers -------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
function main() { return document.getElementById("main"); }
function when(iso) { return iso ? new Date(iso).toLocaleString() : "—"; }
function seconds(ms) { return ms === null || ms === undefined ? "—" : `${(ms / 1000).toFixed(1)} s`; }
function runHref(id) { return `/inspect/runs/${encodeURIComponent(id)}`; }
function threadHref(id) { return `/inspect/threads/${encodeURIComponent(id)}`; }
function apiRun(id) { return `/v1/runs/${encodeURIComponent(id)}`; }
function pretty(value) {
  if (typeof value === "string") return value;
  try { return JSON.stringify(value, null, 2); } catch { return String(value); }
}
function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

// -- credentials and requests --------------------------------------------------------------

function authHeaders(extra) {
  const key = sessionStorage.getItem(KEY_STORAGE);
  return key ? { ...extra, Authorization: `Bearer ${key}` } : { ...(extra || {}) };
}

let asking = null;
function askKey(message) {
  if (asking) return asking;
  const dialog = document.getElementById("key-dialog");
  const input = document.getElementById("key-input");
  const note = dialog.querySelector("p");
  if (message) note.textContent = message;
  input.value = "";
  asking = new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      const value = input.value.trim();
      if (value) sessionStorage.setItem(KEY_STORAGE, value);
      asking = null;
      resolve(Boolean(value));
    }, { once: true });
  });
  dialog.showModal();
  input.focus();
  return asking;
}

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function request(path, options = {}) {
  for (;;) {
    const response = await fetch(path, { ...options, headers: authHeaders(options.headers) });
    if (response.status === 401 || response.status === 403) {
      const stored = sessionStorage.getItem(KEY_STORAGE);
      if (stored) sessionStorage.removeItem(KEY_STORAGE);
      const given = await askKey(stored ? "That key or token was refused; try another." : undefined);
      if (!given) throw new ApiError(response.status, "unauthorized", "no credentials given");
      continue;
    }
    if (!response.ok) {
      let code = "http_error", message = `HTTP ${response.status}`;
      try { const body = await response.json(); code = body.error.code; message = body.error.message; } catch {}
      throw new ApiError(response.status, code, message);
    }
    return response;
  }
}

async function api(path) { return (await request(path)).json(); }

function showError(where, error) {
  where.append(h("p", { class: "notice bad", role: "alert" },
    `${error.message}${error.code ? ` (${error.code})` : ""}`));
}

// A link to an API download: a plain link when no key is needed, else fetched with the key.
function download(label, path, filename) {
  return h("a", {
    href: path, download: filename,
    onclick: async (event) => {
      if (!sessionStorage.getItem(KEY_STORAGE)) return;
      event.preventDefault();
      const blob = await (await request(path)).blob();
      const url = URL.createObjectURL(blob);
      const a = h("a", { href: url, download: filename });
      document.body.append(a); a.click(); a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    },
  }, label);
}

// -- Markdown, rendered safely ---------------------------------------------------------------

const SAFE_LINK = /^(https?:|mailto:)/i;

function inline(text) {
  const out = [];
  const pattern = /(`+)([\s\S]*?)\1|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|\[([^\]]+)\]\(([^)\s]+)\)/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) out.push(document.createTextNode(text.slice(last, match.index)));
    if (match[1]) out.push(h("code", { text: match[2] }));
    else if (match[3] || match[4]) out.push(h("strong", {}, inline(match[3] || match[4])));
    else if (match[5] || match[6]) out.push(h("em", {}, inline(match[5] || match[6])));
    else if (match[7]) {
      const target = match[8];
      out.push(SAFE_LINK.test(target)
        ? h("a", { href: target, rel: "noopener noreferrer nofollow", target: "_blank" }, inline(match[7]))
        : document.createTextNode(match[0]));
    }
    last = match.index + match[0].length;
  }
  if (last < text.length) out.push(document.createTextNode(text.slice(last)));
  return out;
}

function markdown(source) {
  const root = h("div", { class: "md" });
  const lines = String(source).replace(/\r\n?/g, "\n").split("\n");
  let paragraph = [];
  let list = null;
  const flush = () => {
    if (paragraph.length) root.append(h("p", {}, inline(paragraph.join("\n"))));
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)\s*$/);
    if (fence) {
      flush(); list = null;
      const body = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) body.push(lines[i]);
      root.append(h("pre", {}, h("code", { text: body.join("\n") })));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      flush(); list = null;
      root.append(h(`h${Math.min(6, heading[1].length + 2)}`, {}, inline(heading[2])));
      continue;
    }
    const item = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
    if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      if (!list || list.ordered !== ordered) {
        list = { ordered, node: h(ordered ? "ol" : "ul") };
        root.append(list.node);
      }
      list.node.append(h("li", {}, inline(item[2])));
      continue;
    }
    const quote = line.match(/^>\s?(.*)$/);
    if (quote) { flush(); list = null; root.append(h("blockquote", {}, inline(quote[1]))); continue; }
    if (!line.trim()) { flush(); list = null; continue; }
    list = null;
    paragraph.push(line);
  }
  flush();
  return root;
}

// -- UIMessage parts -------------------------------------------------------------------------

function leaves(value, path, out) {
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    for (const [key, child] of entries) {
      leaves(child, `${path}/${String(key).replace(/~/g, "~0").replace(/\//g, "~1")}`, out);
    }
  } else {
    out.push([path, value]);
  }
  return out;
}

function pathLabel(path) {
  return path ? path.slice(1).replace(/~1/g, "/").replace(/~0/g, "~") : "value";
}

function argRow(path) {
  return h("div", { class: "arg", "data-path": path },
    h("div", { class: "path mono", text: pathLabel(path) }),
    h("pre", { class: "value" }));
}

function argsBox(part, decoded) {
  const box = h("div", { class: "args" });
  if (decoded && decoded.size) {
    // What the typewriter decoder made of the streamed arguments (from the service).
    for (const [path, value] of decoded) {
      const row = argRow(path);
      row.querySelector("pre").textContent = value.text !== undefined ? value.text : JSON.stringify(value.value);
      box.append(row);
    }
    return box;
  }
  const input = part.input;
  if (input !== undefined && input !== null && typeof input === "object") {
    for (const [path, value] of leaves(input, "", [])) {
      const row = argRow(path);
      row.querySelector("pre").textContent = typeof value === "string" ? value : JSON.stringify(value);
      box.append(row);
    }
  } else if (input !== undefined && input !== null) {
    const row = argRow("");
    row.querySelector("pre").textContent = typeof input === "string" ? input : JSON.stringify(input);
    box.append(row);
  } else if (part.arguments) {
    box.append(h("pre", { class: "raw-args", text: String(part.arguments) }));
  }
  return box;
}

function toolCard(part, argsOf) {
  const card = h("section", {
    class: `card tool-call state-${part.state || "unknown"}`, "data-tool-call-id": part.id,
    "aria-label": `tool call ${part.name || ""}`,
  },
  h("div", { class: "head" },
    h("span", { class: "name", text: part.name || "tool" }),
    h("span", { class: "state", text: part.state || "" }),
    h("span", { class: "muted mono", text: part.id || "" })),
  argsBox(part, argsOf ? argsOf(part.id) : null));
  if (part.approval && part.approval.needsApproval) {
    card.append(h("p", { class: "notice" }, "Waiting for approval",
      part.approval.approved === true ? ": approved" : part.approval.approved === false ? ": denied" : ""));
  }
  if (part.output !== undefined) {
    card.append(h("div", { class: "path", text: "output" }), h("pre", { class: "output", text: pretty(part.output) }));
  }
  return card;
}

function renderPart(part, argsOf) {
  switch (part.type) {
    case "text": {
      const node = markdown(part.content || "");
      node.dataset.kind = "text";
      node.source = part.content || "";
      return node;
    }
    case "thinking":
      return h("details", { class: "thinking" }, h("summary", { text: "Thinking" }), markdown(part.content || ""));
    case "tool-call":
      return toolCard(part, argsOf);
    case "tool-result":
      return h("section", { class: `card tool-result state-${part.state || ""}${part.error ? " error" : ""}`, "data-result-for": part.toolCallId },
        h("div", { class: "head" }, h("span", { class: "name", text: "result" }),
          h("span", { class: "state", text: part.state || "" }), h("span", { class: "muted mono", text: part.toolCallId || "" })),
        h("pre", { class: "output", text: pretty(part.content) }),
        part.error ? h("p", { class: "error-box", text: pretty(part.error) }) : null);
    case "structured-output":
      return h("section", { class: `card structured${part.error ? " error" : ""}` },
        h("div", { class: "head" }, h("span", { class: "name", text: "structured output" }),
          h("span", { class: "state", text: part.status || "" })),
        h("pre", { class: "output", text: pretty(part.data !== undefined ? part.data : part.partial !== undefined ? part.partial : part.raw) }),
        part.error ? h("p", { class: "error-box", text: pretty(part.error) }) : null);
    default:
      return h("section", { class: "card" }, h("div", { class: "head" }, h("span", { class: "name", text: part.type || "part" })),
        h("pre", { text: pretty(part) }));
  }
}

function renderMessages(messages, argsOf) {
  const list = h("div", { class: "conversation" });
  for (const message of messages) {
    const parts = h("div", { class: "parts" });
    for (const part of message.parts || []) parts.append(renderPart(part, argsOf));
    list.append(h("article", { class: `message ${message.role}`, "data-message-id": message.id },
      h("div", { class: "role", text: message.role }), parts));
  }
  if (!messages.length) list.append(h("p", { class: "muted", text: "No messages yet." }));
  return list;
}

function progressOf(events, upto) {
  const bars = new Map();
  for (const e of events) {
    if (e.seq > upto || e.type !== "CUSTOM" || !e.chunk || typeof e.chunk.value !== "object" || !e.chunk.value) continue;
    const v = e.chunk.value;
    let value = null, max = 1;
    if (typeof v.progress === "number") { value = v.progress; max = v.progress > 1 ? 100 : 1; }
    else if (typeof v.current === "number" && typeof v.total === "number") { value = v.current; max = v.total; }
    else if (typeof v.done === "number" && typeof v.total === "number") { value = v.done; max = v.total; }
    if (value !== null) bars.set(String(e.chunk.name || "progress"), { value, max, label: v.message || v.label || "" });
  }
  const box = h("div", { class: "progress-list" });
  for (const [name, bar] of bars) {
    box.append(h("div", { class: "progress" },
      h("label", {}, `${name}${bar.label ? `: ${bar.label}` : ""} (${Math.round((bar.value / (bar.max || 1)) * 100)}%)`),
      h("progress", { value: bar.value, max: bar.max || 1 })));
  }
  return box;
}

// -- the run list ----------------------------------------------------------------------------

const FILTERS = [
  ["thread_id", "Thread", "text"], ["agent", "Agent", "text"], ["status", "Status", "select"],
  ["tool", "Tool name", "text"], ["has_error", "Has error", "bool"], ["error_code", "Error code", "text"],
  ["redacted", "Redacted", "bool"],
  ["created_after", "Created after", "datetime-local"], ["created_before", "Created before", "datetime-local"],
];

function filterForm(params) {
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter runs" });
  for (const [name, label, kind] of FILTERS) {
    const id = `f-${name}`;
    let field;
    if (kind === "select") {
      field = h("select", { id, name },
        ["", "running", "finished", "error", "cancelled", "interrupted"].map((v) => h("option", { value: v, text: v || "any" })));
    } else if (kind === "bool") {
      field = h("select", { id, name }, [["", "any"], ["true", "yes"], ["false", "no"]].map(([v, t]) => h("option", { value: v, text: t })));
    } else {
      field = h("input", { id, name, type: kind, step: kind === "datetime-local" ? "1" : null });
    }
    field.value = params.get(name) || "";
    form.append(h("div", {}, h("label", { for: id, text: label }), field));
  }
  form.append(h("div", { class: "row" }, h("button", { type: "submit", text: "Filter" }),
    h("a", { href: "/inspect", text: "Clear" })));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const [name] of FILTERS) {
      const value = form.elements[name].value.trim();
      if (value) next.set(name, value);
    }
    location.assign(`/inspect${next.toString() ? `?${next}` : ""}`);
  });
  return form;
}

// A run ended by a RUN_ERROR shows its code with its status: "cancelled (abandoned)".
function statusText(run) { return run.error_code ? `${run.status} (${run.error_code})` : run.status; }

// A run's hash chain as GET .../verify answers it: intact, or where it was altered.
function integrityText(v) {
  if (v.ok) return `intact (${v.events} events)`;
  return v.first_bad_seq === null ? `not verified (${v.reason})` : `altered at seq ${v.first_bad_seq} (${v.reason})`;
}
function integrityInto(node, v) {
  node.className = `integrity ${v.ok ? "intact" : "altered"}`;
  node.textContent = integrityText(v);
  node.title = v.head ? `head ${v.head}` : "";
}

function runRow(run) {
  const usage = run.usage && run.usage.totalTokens !== null && run.usage.totalTokens !== undefined ? run.usage.totalTokens : "—";
  return h("tr", { "data-run-id": run.run_id },
    h("td", {}, h("a", { href: runHref(run.run_id), class: "mono", text: run.run_id })),
    h("td", {}, run.thread_id ? h("a", { href: threadHref(run.thread_id), class: "mono", text: run.thread_id }) : "—"),
    h("td", { text: run.agent || "—" }),
    h("td", { class: `status status-${run.status}`, text: statusText(run) }),
    h("td", { class: "events", text: String(run.event_count) }),
    h("td", { text: when(run.created_at) }),
    h("td", { class: "duration", text: seconds(run.duration_ms) }),
    h("td", { class: "wrap", text: (run.tool_names || []).join(", ") || "—" }),
    h("td", { text: String(usage) }),
    h("td", { class: "wrap", text: run.error || "" }));
}

async function listPage() {
  const params = new URLSearchParams(location.search);
  document.title = "Runs · agent-replay inspector";
  const root = clear(main());
  root.append(h("h1", { text: "Runs" }), filterForm(params));
  const query = new URLSearchParams();
  for (const [name] of FILTERS) if (params.get(name)) query.set(name, params.get(name));
  if (params.get("cursor")) query.set("cursor", params.get("cursor"));
  query.set("limit", "50");
  const tableBody = h("tbody");
  const status = h("p", { class: "muted", "aria-live": "polite" });
  const pager = h("div", { class: "pager row" });
  root.append(status, h("div", { class: "table-wrap" }, h("table", {},
    h("caption", { class: "muted", text: "Newest first" }),
    h("thead", {}, h("tr", {}, ["Run", "Thread", "Agent", "Status", "Events", "Started", "Duration", "Tools", "Tokens", "Error"].map((t) => h("th", { scope: "col", text: t })))),
    tableBody)), pager);
  let page;
  try { page = await api(`/v1/runs?${query}`); } catch (error) { showError(root, error); return; }
  const draw = (runs) => { clear(tableBody); for (const run of runs) tableBody.append(runRow(run)); };
  draw(page.runs);
  status.textContent = page.runs.length ? `${page.runs.length} runs on this page` : "No runs match.";
  if (params.get("cursor")) {
    const first = new URLSearchParams(params); first.delete("cursor");
    pager.append(h("a", { href: `/inspect${first.toString() ? `?${first}` : ""}`, text: "← First page" }));
  }
  if (page.next_cursor) {
    const next = new URLSearchParams(params); next.set("cursor", page.next_cursor);
    pager.append(h("a", { href: `/inspect?${next}`, rel: "next", text: "Older runs →" }));
  }
  // Running runs update in place (status, events, duration) while any is running.
  const refresh = async () => {
    if (!page.runs.some((r) => r.status === "running")) return;
    try { page = await api(`/v1/runs?${query}`); draw(page.runs); } catch {}
    setTimeout(refresh, LIST_REFRESH_MS);
  };
  setTimeout(refresh, LIST_REFRESH_MS);
}

// -- one run ---------------------------------------------------------------------------------

function sizeOf(chunk) { return new TextEncoder().encode(JSON.stringify(chunk)).length; }

async function exactChunk(runId, seq) {
  // The events page splices the stored text in as is: cut it out of the body unparsed.
  const body = await (await request(`${apiRun(runId)}/events?after=${seq - 1}&limit=1`)).text();
  const start = body.indexOf('","chunk":');
  const end = body.lastIndexOf('}],"next_after":');
  return start >= 0 && end > start ? body.slice(start + 10, end) : body;
}

function parseSse(buffer, onFrame) {
  // Frames end with a blank line; what is left is an incomplete frame.
  const blocks = buffer.split(/\r?\n\r?\n/);
  const rest = blocks.pop();
  for (const block of blocks) {
    let id = null, event = null; const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "id") id = value; else if (field === "data") data.push(value);
      else if (field === "event") event = value;
    }
    if (data.length) onFrame(id, data.join("\n"), event);
  }
  return rest;
}

class RunView {
  constructor(runId) {
    this.runId = runId;
    this.events = [];
    this.cursor = 0;
    this.at = null;
    this.snapshotSeq = 0;
    this.abort = null;
    this.following = false;
    this.resyncing = false;
    this.resyncAgain = false;
    this.pieces = new Map();
    this.resync = debounce(() => this.refreshConversation(), 150);
    this.fillTimes = debounce(() => this.loadTimes(), 700);
  }

  async start() {
    const root = clear(main());
    try {
      this.run = await api(apiRun(this.runId));
    } catch (error) { showError(root, error); return; }
    document.title = `${this.runId} · agent-replay inspector`;
    const asked = new URLSearchParams(location.search).get("at");
    if (asked !== null && /^\d+$/.test(asked)) this.at = Number(asked);
    // Everything comes through the decoded stream, from the first event: the timeline,
    // and the decoder's pieces for every tool call, so no argument is parsed here.
    this.catchingUp = true;
    this.target = this.run.last_seq;
    this.layout(root);
    this.follow();
    this.verify();
  }

  async verify() {
    // Checked by the server from one snapshot; a live run's answer is as of that moment.
    this.integrity.className = "integrity muted";
    this.integrity.textContent = "checking…";
    try {
      integrityInto(this.integrity, await api(`${apiRun(this.runId)}/verify`));
    } catch (error) {
      this.integrity.className = "integrity muted";
      this.integrity.textContent = `could not check: ${error.message}`;
    }
  }

  caughtUp() {
    this.catchingUp = false;
    if (this.at !== null && this.at >= this.cursor && !this.run.closed) this.at = null;
    if (this.at !== null) this.at = Math.min(this.at, this.cursor);
    this.drawHeader();
    this.drawTravel();
    this.refreshConversation();
    this.fillTimes();
  }

  argsOf(callId, upto) {
    const fold = new Map();
    for (const [seq, pieces] of this.pieces.get(callId) || []) {
      if (seq > upto) break;
      for (const piece of pieces) {
        if (piece.text !== undefined) {
          const prior = fold.get(piece.path);
          fold.set(piece.path, { text: (prior && prior.text !== undefined ? prior.text : "") + piece.text });
        } else {
          fold.set(piece.path, { value: piece.value });
        }
      }
    }
    return fold;
  }

  async loadTimes() {
    for (;;) {
      const untimed = this.events.find((e) => !e.received_at);
      if (!untimed) return;
      let page;
      try {
        page = await api(`${apiRun(this.runId)}/events?after=${untimed.seq - 1}&limit=${PAGE_EVENTS}`);
      } catch { return; }
      if (!page.events.length) return;
      const bySeq = new Map(page.events.map((e) => [e.seq, e.received_at]));
      for (const e of this.events) if (!e.received_at && bySeq.has(e.seq)) { e.received_at = bySeq.get(e.seq); this.updateRow(e); }
    }
  }

  layout(root) {
    this.integrity = h("span", { class: "integrity muted", role: "status", text: "not checked" });
    this.verifyButton = h("button", { type: "button", class: "ghost verify", text: "Verify", onclick: () => this.verify() });
    this.header = h("section", { class: "panel", "aria-label": "Run" });
    this.liveBadge = h("span", { class: "live off", role: "status", "aria-live": "polite" });
    this.slider = h("input", { type: "range", id: "at", min: "0", "aria-describedby": "at-label" });
    this.sliderLabel = h("label", { id: "at-label", for: "at" });
    this.slider.addEventListener("input", () => this.travel(Number(this.slider.value)));
    const latest = h("button", { type: "button", class: "ghost", text: "Latest", onclick: () => this.travel(this.cursor) });
    this.progress = h("div", {});
    this.conversation = h("div", { "aria-live": "off" });
    this.timeline = h("ol", { "aria-label": "Events" });
    this.timeline.addEventListener("keydown", (event) => this.timelineKeys(event));
    root.append(
      h("h1", {}, "Run ", h("span", { class: "mono", text: this.runId }), " ", this.liveBadge),
      this.header,
      h("div", { class: "travel", role: "group", "aria-label": "Time travel" }, this.sliderLabel, this.slider, latest),
      h("div", { class: "run-layout" },
        h("section", { "aria-label": "Conversation" }, h("h2", { text: "Conversation" }), this.progress, this.conversation),
        h("section", { "aria-label": "Event timeline" }, h("h2", { text: "Events" }),
          h("p", { class: "muted", text: "Select an event to see the chunk exactly as stored (j / k move)." }),
          h("div", { class: "timeline" }, this.timeline))));
    this.drawHeader();
    this.drawTravel();
  }

  drawHeader() {
    const run = this.run;
    const usage = run.usage ? Object.entries(run.usage).filter(([, v]) => v !== null).map(([k, v]) => `${k} ${v}`).join(", ") : "—";
    const dur = run.closed_at && run.created_at ? seconds(new Date(run.closed_at) - new Date(run.created_at)) : "—";
    const facts = [
      ["Status", h("span", { class: `status status-${run.status}`, text: statusText(run) })],
      ["Thread", run.thread_id ? h("a", { href: threadHref(run.thread_id), class: "mono", text: run.thread_id }) : "—"],
      ["Agent", run.agent || "—"],
      ["Seqs", this.cursor ? `1–${this.cursor}` : "none yet"],
      ["Created", when(run.created_at)], ["Closed", when(run.closed_at)], ["Duration", dur],
      ["Usage", usage], ["Tools", (run.tool_names || []).join(", ") || "—"],
      ["Integrity", h("span", {}, this.integrity, " ", this.verifyButton)],
    ];
    if (run.error) facts.push(["Error", h("span", { class: "status status-error", text: run.error })]);
    const redacted = Object.entries(run.redactions || {});
    if (redacted.length) facts.push(["Redacted", redacted.map(([rule, n]) => `${rule} ${n}`).join(", ")]);
    const links = h("p", { class: "links" },
      download("Export (JSON Lines)", `${apiRun(this.runId)}/export`, `${this.runId}.jsonl`),
      download("Transcript (Markdown)", `${apiRun(this.runId)}/transcript?format=markdown`, `${this.runId}.md`),
      download("Transcript (HTML)", `${apiRun(this.runId)}/transcript?format=html`, `${this.runId}.html`),
      run.thread_id ? h("a", { href: threadHref(run.thread_id), text: "Thread" }) : null);
    clear(this.header).append(h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", { text: k }), h("dd", {}, v)])), links);
  }

  drawTravel() {
    const upto = this.at === null ? this.cursor : this.at;
    this.slider.max = String(this.cursor);
    this.slider.value = String(upto);
    this.slider.setAttribute("aria-valuetext", `seq ${upto} of ${this.cursor}`);
    this.sliderLabel.textContent = this.at === null ? `Latest (seq ${this.cursor})` : `As of seq ${this.at} of ${this.cursor}`;
    for (const li of this.timeline.children) li.classList.toggle("future", Number(li.dataset.seq) > upto);
    const live = this.following && !this.run.closed;
    this.liveBadge.className = `live ${this.retrying ? "retry" : live ? "on" : "off"}`;
    this.liveBadge.textContent = this.retrying ? "reconnecting…"
      : this.catchingUp ? "loading…"
      : live ? (this.at === null ? "live" : "live (viewing the past)")
      : this.run.closed ? "closed" : "open";
  }

  travel(seq) {
    this.at = seq >= this.cursor ? null : seq;
    const url = new URL(location.href);
    if (this.at === null) url.searchParams.delete("at"); else url.searchParams.set("at", String(this.at));
    history.replaceState(null, "", url);
    this.drawTravel();
    this.resync();
  }

  row(e) {
    const raw = h("pre", { class: "raw", hidden: true });
    const button = h("button", { type: "button", "aria-expanded": "false", "data-seq": e.seq },
      h("span", { class: "seq mono", text: String(e.seq) }),
      h("span", { class: "type mono", text: e.type }),
      h("span", { class: "meta", text: `${e.received_at ? new Date(e.received_at).toLocaleTimeString() : "…"} · ${e.size} B` }));
    button.addEventListener("click", async () => {
      const open = button.getAttribute("aria-expanded") !== "true";
      button.setAttribute("aria-expanded", String(open));
      raw.hidden = !open;
      if (open && !raw.dataset.loaded) {
        raw.textContent = "…";
        try { raw.textContent = await exactChunk(this.runId, e.seq); raw.dataset.loaded = "1"; }
        catch (error) { raw.textContent = error.message; }
      }
    });
    return h("li", { "data-seq": e.seq }, button, raw);
  }

  updateRow(e) {
    const li = this.timeline.querySelector(`li[data-seq="${e.seq}"] .meta`);
    if (li) li.textContent = `${new Date(e.received_at).toLocaleTimeString()} · ${e.size} B`;
  }

  timelineKeys(event) {
    if (event.key !== "j" && event.key !== "k") return;
    const buttons = [...this.timeline.querySelectorAll("li:not(.future) > button")];
    const index = buttons.indexOf(document.activeElement);
    const next = buttons[Math.max(0, Math.min(buttons.length - 1, index + (event.key === "j" ? 1 : -1)))];
    if (next) { next.focus(); event.preventDefault(); }
  }

  async refreshConversation() {
    if (this.resyncing) { this.resyncAgain = true; return; }
    this.resyncing = true;
    try {
      const upto = this.at === null ? this.cursor : this.at;
      const body = await api(`${apiRun(this.runId)}/messages?at=${upto}`);
      this.snapshotSeq = body.seq;
      clear(this.conversation).append(renderMessages(body.messages, (id) => this.argsOf(id, body.seq)));
      // RUN_ERROR is no message part: say it where the conversation stops.
      for (const e of this.events) {
        if (e.seq > body.seq) break;
        if (e.type === "RUN_ERROR") {
          const c = e.chunk || {};
          this.conversation.append(h("p", { class: "error-box", role: "note" },
            `Run error: ${c.message || (c.error && c.error.message) || "error"}${c.code ? ` (${c.code})` : ""}`));
        }
      }
      clear(this.progress).append(progressOf(this.events, upto));
      if (this.at === null) {
        // Events that arrived while the snapshot was read are laid on top of it.
        for (const e of this.events) if (e.seq > this.snapshotSeq) this.applyLive(e);
      }
    } catch (error) {
      showError(this.conversation, error);
    } finally {
      this.resyncing = false;
      if (this.resyncAgain) { this.resyncAgain = false; this.resync(); }
    }
  }

  // One live event onto the rendered snapshot: text and decoded arguments in place,
  // anything structural by re-reading the projection (debounced).
  applyLive(e) {
    const chunk = e.chunk || {};
    if (e.type === "TEXT_MESSAGE_CONTENT" && typeof chunk.delta === "string") {
      const message = this.conversation.querySelector(`[data-message-id="${CSS.escape(String(chunk.messageId))}"] .parts`);
      if (!message) { this.resync(); return; }
      let part = message.lastElementChild;
      if (!part || part.dataset.kind !== "text") {
        part = markdown(""); part.dataset.kind = "text"; part.source = ""; message.append(part);
      }
      part.source += chunk.delta;
      const fresh = markdown(part.source); fresh.dataset.kind = "text"; fresh.source = part.source;
      part.replaceWith(fresh);
    } else if (e.type === "TOOL_CALL_ARGS" && e.decoded) {
      const card = this.conversation.querySelector(`[data-tool-call-id="${CSS.escape(String(e.decoded.toolCallId))}"]`);
      if (!card) { this.resync(); return; }
      const box = card.querySelector(".args");
      const raw = box.querySelector(".raw-args"); if (raw) raw.remove();
      for (const piece of e.decoded.pieces || []) {
        let row = box.querySelector(`[data-path="${CSS.escape(piece.path)}"]`);
        if (!row) { row = argRow(piece.path); box.append(row); }
        const pre = row.querySelector("pre");
        if (piece.text !== undefined) pre.append(document.createTextNode(piece.text));
        else pre.textContent = JSON.stringify(piece.value);
      }
    } else if (e.type !== "TEXT_MESSAGE_CONTENT" && e.type !== "TOOL_CALL_ARGS") {
      this.resync();
    }
  }

  onEvent(frame, rows) {
    if (frame.seq <= this.cursor) return;  // never twice, whatever arrives
    const e = { seq: frame.seq, type: frame.chunk && frame.chunk.type, received_at: null, size: sizeOf(frame.chunk), chunk: frame.chunk, decoded: frame.decoded };
    this.events.push(e);
    this.cursor = e.seq;
    if (e.decoded && e.decoded.pieces && e.decoded.pieces.length) {
      const id = String(e.decoded.toolCallId);
      if (!this.pieces.has(id)) this.pieces.set(id, []);
      this.pieces.get(id).push([e.seq, e.decoded.pieces]);
    }
    rows.append(this.row(e));
    if (this.catchingUp) return;
    if (this.at === null) {
      this.applyLive(e);
      if (e.type === "CUSTOM") clear(this.progress).append(progressOf(this.events, this.cursor));
    }
    this.fillTimes();
  }

  async follow() {
    this.following = true;
    let delay = 250;
    while (this.following) {
      this.abort = new AbortController();
      let ended = false;
      try {
        const response = await request(`${apiRun(this.runId)}/stream?view=decoded`, {
          headers: { "Last-Event-ID": String(this.cursor), Accept: "text/event-stream" },
          signal: this.abort.signal,
        });
        this.retrying = false; this.drawTravel(); delay = 250;
        if (response.status !== 204) {
          const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
          let buffer = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            const rows = document.createDocumentFragment();
            buffer = parseSse(buffer + value, (id, data) => this.onEvent(JSON.parse(data), rows));
            if (rows.childNodes.length) {
              this.timeline.append(rows);
              if (this.catchingUp && this.cursor >= this.target) this.caughtUp();
              this.drawTravel(); this.drawCount();
            }
          }
        }
        ended = true;
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) { this.following = false; break; }
        this.retrying = true; this.drawTravel();
      }
      if (ended) {
        try {
          this.run = await api(apiRun(this.runId));
          if (this.run.closed && this.cursor >= this.run.last_seq) {
            this.following = false;
            if (this.catchingUp) this.caughtUp();
            else { this.drawHeader(); this.drawTravel(); this.resync(); this.fillTimes(); }
            break;
          }
        } catch { this.retrying = true; this.drawTravel(); }
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 4000);
    }
    this.drawTravel();
  }

  drawCount() {
    const seqs = this.header.querySelectorAll("dd")[3];
    if (seqs) seqs.textContent = this.cursor ? `1–${this.cursor}` : "none yet";
  }
}

// -- a thread --------------------------------------------------------------------------------

function threadRunItem(run) {
  return h("li", { "data-run-id": run.run_id },
    h("a", { href: runHref(run.run_id), class: "mono", text: run.run_id }), " ",
    h("span", { class: `status status-${run.status}`, text: statusText(run) }),
    // A listing's run has its event_count; a run read alone, its last_seq (the same number).
    h("span", { class: "muted", text: ` · ${when(run.created_at)} · ${run.event_count ?? run.last_seq} events ` }),
    h("span", { class: "integrity" }));  // filled by "Verify thread"
}

async function threadPage(threadId) {
  document.title = `${threadId} · agent-replay inspector`;
  const root = clear(main());
  root.append(h("h1", {}, "Thread ", h("span", { class: "mono", text: threadId })));
  try {
    const runs = [];
    let cursor = null;
    do {
      const query = new URLSearchParams({ thread_id: threadId, limit: "500" });
      if (cursor) query.set("cursor", cursor);
      const page = await api(`/v1/runs?${query}`);
      runs.push(...page.runs);
      cursor = page.next_cursor;
    } while (cursor);
    runs.reverse();
    const path = `/v1/threads/${encodeURIComponent(threadId)}`;
    const summary = h("p", { class: "verify-summary", role: "status" });
    const verify = h("button", { type: "button", class: "ghost", id: "verify-thread", text: "Verify thread", onclick: async () => {
      verify.disabled = true;
      summary.textContent = "checking…";
      try {
        const answer = await api(`${path}/verify`);
        const altered = answer.runs.filter((v) => !v.ok).length;
        summary.className = `verify-summary ${answer.ok ? "intact" : "altered"}`;
        summary.textContent = answer.ok ? `All ${answer.runs.length} runs intact.`
          : `${altered} of ${answer.runs.length} runs not intact.`;
        // Rows are looked up when the answer comes: the list grows while the page follows.
        for (const v of answer.runs) {
          const state = [...root.querySelectorAll("ol.runs li")].find((li) => li.dataset.runId === v.run_id);
          if (state) integrityInto(state.querySelector(".integrity"), v);
        }
      } catch (error) {
        summary.textContent = `could not check: ${error.message}`;
      } finally { verify.disabled = false; }
    } });
    root.append(h("p", { class: "links" },
      download("Transcript (Markdown)", `${path}/transcript?format=markdown`, `${threadId}.md`),
      download("Transcript (HTML)", `${path}/transcript?format=html`, `${threadId}.html`), " ", verify), summary);
    const heading = h("h2", { text: `Runs, in order (${runs.length})` });
    const list = h("ol", { class: "runs" }, runs.map(threadRunItem));
    const transcript = h("div", { class: "thread-transcript" });
    root.append(heading, list, h("h2", { text: "Transcript" }), transcript);
    const drawTranscript = async () => {
      const body = await api(`${path}/messages`);
      clear(transcript).append(renderMessages(body.messages));
    };
    await drawTranscript();
    new ThreadView(threadId, runs, list, heading, drawTranscript).follow();
  } catch (error) {
    showError(root, error);
  }
}

// The thread's stream, from the end of its last listed run: each run made later is
// announced (added to the list at once), and a run's end (its RUN_FINISHED or RUN_ERROR,
// or the next run's announcement) redraws its row and the transcript. Resumed after a
// drop from the last id seen, a thread cursor (`<run_id>:<seq>` entries joined by `~`).
class ThreadView {
  constructor(threadId, runs, list, heading, drawTranscript) {
    this.threadId = threadId;
    this.list = list;
    this.heading = heading;
    this.drawTranscript = drawTranscript;
    this.count = runs.length;
    const last = runs[runs.length - 1];
    this.current = last ? last.run_id : null;
    this.cursor = last ? `${last.run_id}:${last.event_count}` : "-1";
  }

  async redraw(runId) {
    const item = this.list.querySelector(`li[data-run-id="${CSS.escape(runId)}"]`);
    const run = await api(apiRun(runId));
    if (item) item.replaceWith(threadRunItem(run));
    else { this.list.append(threadRunItem(run)); this.count += 1; }
    this.heading.textContent = `Runs, in order (${this.count})`;
  }

  async follow() {
    const path = `/v1/threads/${encodeURIComponent(this.threadId)}/stream?types=RUN_FINISHED,RUN_ERROR`;
    let delay = 250;
    for (;;) {
      try {
        const response = await request(path, {
          headers: { "Last-Event-ID": this.cursor, Accept: "text/event-stream" },
        });
        delay = 250;
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          const changed = [];
          buffer = parseSse(buffer + value, (id, data, event) => {
            if (id) this.cursor = id;
            // The id's first entry is the frame's own run (`<run_id>:<seq>`; the other
            // runs followed side by side come after it, each after a `~`).
            const own = id ? id.split("~")[0] : null;
            const runId = own ? own.slice(0, own.lastIndexOf(":")) : null;
            if (event === "run") {
              if (this.current) changed.push(this.current);
              this.current = JSON.parse(data).run_id;
              changed.push(this.current);
            } else if (runId) {
              changed.push(runId);
            }
          });
          for (const runId of new Set(changed)) await this.redraw(runId);
          if (changed.length) await this.drawTranscript();
        }
      } catch (error) {
        if (error instanceof ApiError && error.status < 500) return;
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 4000);
    }
  }
}

// -- routing ---------------------------------------------------------------------------------

function crumbs(...items) {
  const node = clear(document.getElementById("crumbs"));
  for (const item of items) node.append(" / ", item);
}

async function route() {
  const keyButton = document.getElementById("key-button");
  keyButton.hidden = false;
  keyButton.addEventListener("click", async () => { if (await askKey()) location.reload(); });
  document.getElementById("key-forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORAGE);
    document.getElementById("key-dialog").close();
  });
  const path = location.pathname;
  let match;
  if ((match = path.match(/^\/inspect\/runs\/([^/]+)\/?$/))) {
    const runId = decodeURIComponent(match[1]);
    crumbs(h("a", { href: "/inspect", text: "runs" }), h("span", { class: "mono", text: runId }));
    await new RunView(runId).start();
  } else if ((match = path.match(/^\/inspect\/threads\/([^/]+)\/?$/))) {
    const threadId = decodeURIComponent(match[1]);
    crumbs(h("a", { href: "/inspect", text: "runs" }), h("span", { class: "mono", text: `thread ${threadId}` }));
    await threadPage(threadId);
  } else {
    crumbs(h("span", { text: "runs" }));
    await listPage();
  }
}

route();
