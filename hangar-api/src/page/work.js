// The status page's second script: the work the hangar does, beside page.js's servers and
// events. It uses page.js's helpers (apiJson, api, row, table, muted, timeElement, views,
// session), which every script of the page shares.
// - Latency: p50 and p95 of the last hour per server (a fact on each row) and per tool (in the
//   panel), from GET /api/calls/stats, asked again with the counters.
// - Connected clients: open sessions and identities with their traffic (GET /api/clients; the
//   caller's own, or everyone's for an admin).
// - A server's panel: what its config says (program, endpoint, env names, limits, sandbox,
//   prefix, isolation) and its process (pid, memory, CPU, restarts, protocol) from its details,
//   and its prompts and resources while it runs.
// - The playground, for admins: a form from a tool's input schema; the call goes through /mcp
//   as `hangar_call`, so it is judged, limited and audited as any other call.
// - Error truth: each minute of the chart with failures links to the audit rows behind it
//   (GET /api/audit with from and to; `error` and `is_error` outcomes both count as failures).
// Every text from the API is set with textContent: descriptions, names and results are an
// upstream's (or a client's) words.
"use strict";

const STATS_PATH = "/api/calls/stats";
const ERROR_ROWS = 100;
const MODERN = "2026-07-28";

let callStats = new Map();

// ---- latency ---------------------------------------------------------------------------------

/// Each server's and tool's calls of the last hour; the rows and open panels show them.
async function loadCallStats() {
  const { mcp_servers: servers } = await apiJson(STATS_PATH);
  callStats = new Map(servers.map((stats) => [stats.mcp_server, stats]));
  for (const view of views.values()) {
    showLatency(view);
    if (view.open) showToolStats(view);
  }
}

function ms(value) {
  if (value === null || value === undefined) return "–";
  return value < 10 ? value.toFixed(2) + " ms" : Math.round(value) + " ms";
}

function showLatency(view) {
  const stats = callStats.get(view.id);
  const cell = view.part("latency");
  cell.textContent = stats && stats.latency.calls ? ms(stats.latency.p50_ms) + " / " + ms(stats.latency.p95_ms) : "–";
}

function showToolStats(view) {
  const box = view.part("tool-stats");
  const stats = callStats.get(view.id);
  if (!stats || !stats.tools.length) {
    box.replaceChildren(muted("No calls in the last hour."));
    return;
  }
  const rows = stats.tools.map((tool) => {
    const { calls, errors, p50_ms: p50, p95_ms: p95 } = tool.latency;
    const tr = row([tool.tool, String(calls), [String(errors), errors ? "outcome-error" : "count"], ms(p50), ms(p95)]);
    tr.dataset.tool = tool.tool;
    return tr;
  });
  box.replaceChildren(table(["Tool", "Calls", "Errors", "p50", "p95"], rows));
}

// ---- connected clients -----------------------------------------------------------------------

async function loadClients() {
  const { sessions, identities } = await apiJson("/api/clients");
  const plural = (n, one, many) => n + " " + (n === 1 ? one : many);
  $("clients-summary").textContent =
    plural(identities.length, "identity", "identities") + " seen, " + plural(sessions.length, "session", "sessions") + " open.";
  const sessionRows = sessions.map((s) => {
    const tr = row([
      [s.session, "session-id"],
      s.identity,
      s.client || "–",
      s.protocol_version,
      timeElement(s.opened_at),
      timeElement(s.last_used_at),
      String(s.requests),
      s.streaming ? "yes" : "no",
    ]);
    tr.dataset.identity = s.identity;
    return tr;
  });
  $("clients-sessions").replaceChildren(
    sessionRows.length
      ? table(["Session", "Identity", "Client", "Protocol", "Opened", "Last used", "Requests", "Stream"], sessionRows)
      : muted("No session is open (a 2026-07-28 client needs none)."),
  );
  const identityRows = identities.map((t) => {
    const tr = row([
      t.identity + (t.profile ? " (" + t.profile + ")" : ""),
      String(t.requests),
      String(t.calls),
      [String(t.errors), t.errors ? "outcome-error" : "count"],
      String(t.sessions),
      timeElement(t.first_seen),
      timeElement(t.last_seen),
    ]);
    tr.dataset.identity = t.identity;
    return tr;
  });
  $("clients-identities").replaceChildren(
    identityRows.length
      ? table(["Identity", "Requests", "Calls", "Errors", "Sessions", "First seen", "Last seen"], identityRows)
      : muted("Nobody has called yet."),
  );
}

// ---- a server's panel ------------------------------------------------------------------------

/// The panel opened: its latency by tool, config and process, prompts and resources, and for
/// an admin the playground.
function openWork(view) {
  showToolStats(view);
  loadFacts(view);
}

async function loadFacts(view) {
  try {
    const details = await apiJson("/api/mcp_servers/" + encodeURIComponent(view.id));
    showConfigFacts(view, details);
    showProcessFacts(view, details);
    const running = details.state === "ready" || details.state === "degraded";
    for (const kind of ["prompts", "resources"]) {
      if (running) {
        loadListed(view, kind);
      } else {
        view.part(kind).replaceChildren(muted("Shown while it runs."));
      }
    }
    setUpPlayground(view, details.tools || []);
  } catch (err) {
    view.part("config-facts").replaceChildren(muted("Details unavailable: " + err.message));
  }
}

/// Fills `dl` with [label, value, key] facts; an empty value is left out.
function showFacts(dl, facts) {
  const items = facts
    .filter(([, value]) => value !== null && value !== undefined && value !== "")
    .map(([label, value, key]) => {
      const div = document.createElement("div");
      div.dataset.fact = key;
      const dt = document.createElement("dt");
      dt.textContent = label;
      const dd = document.createElement("dd");
      if (value instanceof Node) dd.append(value);
      else dd.textContent = String(value);
      div.append(dt, dd);
      return div;
    });
  dl.replaceChildren(...items);
}

function showConfigFacts(view, details) {
  const config = details.config || {};
  const meta = details.meta || {};
  const command = meta.program
    ? meta.program + (config.arguments ? " (+" + config.arguments + (config.arguments === 1 ? " argument)" : " arguments)") : "")
    : null;
  const limits = [
    config.max_concurrent_calls ? config.max_concurrent_calls + " at once" : "no concurrency limit",
    config.rate_limit ? config.rate_limit.calls_per_s + " calls/s" + (config.rate_limit.burst ? ", burst " + config.rate_limit.burst : "") : null,
  ].filter(Boolean).join("; ");
  showFacts(view.part("config-facts"), [
    ["Mode", details.mode, "mode"],
    ["Command", command, "command"],
    ["Endpoint", config.endpoint, "endpoint"],
    ["Environment", config.env ? (config.env.length ? config.env.join(", ") : "none set") : null, "env"],
    ["Sandbox", sandboxText(details.sandbox), "sandbox"],
    ["Limits", limits, "limits"],
    ["Exposed as", config.expose_as ? config.expose_as + "__…" : null, "expose_as"],
    ["Isolation", details.isolation || "shared", "isolation"],
    ["Upstream auth", details.auth ? details.auth.kind : null, "auth"],
    ["Idle stop", meta.idle_ttl_s ? meta.idle_ttl_s + " s unused" : "never", "idle_ttl"],
    ["Handshake timeout", config.handshake_timeout_s ? config.handshake_timeout_s + " s" : null, "handshake"],
  ]);
}

function sandboxText(sandbox) {
  if (!sandbox) return "none";
  const effect = sandbox.in_effect;
  if (!effect) return "configured (in effect once it starts)";
  const parts = [...effect.enforced];
  if (effect.user) parts.push("as " + effect.user);
  if (effect.fallbacks.length) parts.push("weaker: " + effect.fallbacks.join("; "));
  return parts.join("; ") || "configured";
}

function showProcessFacts(view, details) {
  const meta = details.meta || {};
  const process = details.process;
  const dl = view.part("process-facts");
  if (!process && !meta.pid) {
    showFacts(dl, [["Process", "not running", "state"], ["Restarts", meta.restarts, "restarts"]]);
    return;
  }
  const protocol = meta.protocol_version ? meta.protocol_version + (meta.protocol_era ? " (" + meta.protocol_era + ")" : "") : null;
  showFacts(dl, [
    ["PID", process ? process.pid : meta.pid, "pid"],
    ["Started", meta.started_at ? timeElement(meta.started_at) : null, "started"],
    ["Restarts", meta.restarts, "restarts"],
    ["Memory (RSS)", process ? (process.rss_bytes / 1048576).toFixed(1) + " MiB" : null, "rss"],
    ["CPU time", process ? process.cpu_s.toFixed(2) + " s" : null, "cpu"],
    ["Threads", process ? process.threads : null, "threads"],
    ["Protocol", protocol, "protocol"],
  ]);
}

/// Its prompts or resources as it lists them (the first page).
async function loadListed(view, kind) {
  const box = view.part(kind);
  try {
    const answer = await apiJson("/api/mcp_servers/" + encodeURIComponent(view.id) + "/" + kind);
    const items = answer[kind] || [];
    if (!items.length) {
      box.replaceChildren(muted(kind === "prompts" ? "No prompts." : "No resources."));
      return;
    }
    const rows = items.map((item) =>
      kind === "prompts"
        ? row([item.name || "", item.description || "", (item.arguments || []).map((a) => a.name).join(", ")])
        : row([item.uri || "", item.name || "", item.mimeType || ""]),
    );
    const headings = kind === "prompts" ? ["Name", "Description", "Arguments"] : ["URI", "Name", "Type"];
    box.replaceChildren(table(headings, rows));
  } catch (err) {
    box.replaceChildren(muted((kind === "prompts" ? "Prompts" : "Resources") + " unavailable: " + err.message));
  }
}

// ---- the playground --------------------------------------------------------------------------

/// For an admin: a tool to pick and a form from its input schema.
function setUpPlayground(view, tools) {
  const part = view.node.querySelector(".playground");
  part.hidden = !session.admin || tools.length === 0;
  if (part.hidden) return;
  const select = view.part("try-tool");
  const chosen = select.value;
  select.replaceChildren(
    ...tools.map((tool) => {
      const option = document.createElement("option");
      option.value = tool.name;
      option.textContent = tool.name;
      return option;
    }),
  );
  if (tools.some((tool) => tool.name === chosen)) select.value = chosen;
  const form = view.part("try-form");
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  const fields = () => buildFields(view, byName.get(select.value));
  select.onchange = fields;
  form.onsubmit = (event) => {
    event.preventDefault();
    tryTool(view, byName.get(select.value));
  };
  fields();
}

/// One input per property of the schema: text, number, a checkbox, a list for an enum, and
/// JSON for anything else; a schema without properties gets one JSON box for all arguments.
function buildFields(view, tool) {
  const box = view.part("try-fields");
  const schema = (tool && tool.inputSchema) || {};
  const properties = schema.properties && typeof schema.properties === "object" ? schema.properties : null;
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  if (!properties || Object.keys(properties).length === 0) {
    box.replaceChildren(field("Arguments (JSON)", jsonInput("{}"), { name: "", kind: "all" }));
    return;
  }
  box.replaceChildren(
    ...Object.entries(properties).map(([name, property]) => {
      const type = property && property.type;
      let input;
      let kind = "json";
      if (Array.isArray(property.enum)) {
        input = document.createElement("select");
        for (const value of property.enum) {
          const option = document.createElement("option");
          option.value = JSON.stringify(value);
          option.textContent = String(value);
          input.append(option);
        }
        kind = "enum";
      } else if (type === "string") {
        input = document.createElement("input");
        input.type = "text";
        kind = "string";
      } else if (type === "number" || type === "integer") {
        input = document.createElement("input");
        input.type = "number";
        if (type === "integer") input.step = "1";
        kind = type;
      } else if (type === "boolean") {
        input = document.createElement("input");
        input.type = "checkbox";
        kind = "boolean";
      } else {
        input = jsonInput(type === "array" ? "[]" : "{}");
      }
      const label = name + (required.has(name) ? " (required)" : "") + (property.description ? " – " + property.description : "");
      return field(label, input, { name, kind, required: required.has(name) });
    }),
  );
}

function jsonInput(initial) {
  const input = document.createElement("textarea");
  input.rows = 3;
  input.value = initial;
  return input;
}

function field(text, input, { name, kind, required }) {
  const label = document.createElement("label");
  label.className = "try-field";
  input.dataset.name = name;
  input.dataset.kind = kind;
  if (required) input.dataset.required = "";
  const caption = document.createElement("span");
  caption.textContent = text;
  label.append(caption, input);
  return label;
}

/// The arguments the form says, or an error naming the field that does not parse.
function formArguments(view) {
  const args = {};
  for (const input of view.part("try-fields").querySelectorAll("[data-kind]")) {
    const { name, kind } = input.dataset;
    const value = input.type === "checkbox" ? input.checked : input.value;
    if (kind === "boolean") {
      args[name] = value;
    } else if (kind === "string") {
      if (value !== "" || "required" in input.dataset) args[name] = value;
    } else if (kind === "number" || kind === "integer") {
      if (value === "") continue;
      const number = Number(value);
      if (!Number.isFinite(number)) throw new Error(name + " is not a number");
      args[name] = number;
    } else if (kind === "enum") {
      args[name] = JSON.parse(value);
    } else {
      let parsed;
      try {
        parsed = JSON.parse(value || "null");
      } catch {
        throw new Error((name || "the arguments") + " is not valid JSON");
      }
      if (kind === "all") return parsed || {};
      if (parsed !== null) args[name] = parsed;
    }
  }
  return args;
}

/// Calls `tool` through /mcp as `hangar_call` (a 2026-07-28 request), and shows its result.
async function tryTool(view, tool) {
  const status = view.part("try-status");
  const out = view.part("try-result");
  const button = view.part("try-call");
  let args;
  try {
    args = formArguments(view);
  } catch (err) {
    status.textContent = err.message;
    return;
  }
  button.disabled = true;
  status.textContent = "Calling " + tool.name + "…";
  out.hidden = true;
  const meta = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": { name: "hangar-status-page", version: "1" },
  };
  const calls = [{ mcp_server: view.id, tool: tool.name, arguments: args }];
  const body = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "hangar_call", arguments: { calls }, _meta: meta } };
  try {
    const response = await api("/mcp", {
      method: "POST",
      headers: {
        Accept: "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "hangar_call",
      },
      body: JSON.stringify(body),
    });
    const answer = rpcAnswer(await response.text(), response.headers.get("Content-Type") || "");
    if (!answer) throw new Error("HTTP " + response.status + ", no answer");
    if (answer.error) throw new Error(answer.error.message || "refused");
    const structured = answer.result && answer.result.structuredContent;
    const result = structured && Array.isArray(structured.results) ? structured.results[0] : answer.result;
    status.textContent = result && result.success === false ? "The call failed." : "Done.";
    out.dataset.success = String(!(result && result.success === false));
    out.textContent = JSON.stringify(result, null, 2);
    out.hidden = false;
  } catch (err) {
    status.textContent = "Refused: " + err.message;
  } finally {
    button.disabled = false;
  }
}

/// The JSON-RPC answer with id 1: the body itself, or the event of a Server-Sent Events stream
/// that carries it.
function rpcAnswer(text, type) {
  if (!type.startsWith("text/event-stream")) {
    try {
      return JSON.parse(text);
    } catch {
      return null;
    }
  }
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:")) continue;
    try {
      const message = JSON.parse(line.slice(5));
      if (message.id === 1) return message;
    } catch {
      // Not this one.
    }
  }
  return null;
}

// ---- the audit rows behind the chart's errors -------------------------------------------------

/// A button for each minute of the chart with failures.
function showErrorMinutes(minutes) {
  const box = $("error-minutes");
  const failing = minutes.filter((minute) => minute.errors > 0);
  if (!failing.length) {
    box.replaceChildren();
    return;
  }
  const label = document.createElement("span");
  label.textContent = "Failures at: ";
  const buttons = failing.map((minute) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "error-minute quiet";
    button.dataset.at = minute.at;
    button.textContent = formatTime(minute.at) + " (" + minute.errors + ")";
    button.setAttribute("aria-label", "Show the " + minute.errors + " failed calls at " + formatTime(minute.at));
    button.addEventListener("click", () => showErrorRows(minute.at));
    return button;
  });
  box.replaceChildren(label, ...buttons);
}

/// The failed calls of the minute starting at `at` (as the chart counts them: errors and
/// `isError` results), from the audit trail.
async function showErrorRows(at) {
  const box = $("error-rows");
  const list = $("error-rows-list");
  box.hidden = false;
  $("error-rows-title").textContent = "Failed calls at " + formatTime(at);
  const from = new Date(at);
  const to = new Date(from.getTime() + 60000);
  const range = "&from=" + encodeURIComponent(from.toISOString()) + "&to=" + encodeURIComponent(to.toISOString());
  try {
    const pages = await Promise.all(
      ["error", "is_error"].map((outcome) => apiJson("/api/audit?outcome=" + outcome + range + "&limit=" + ERROR_ROWS)),
    );
    const entries = pages.flatMap((page) => page.entries).sort((a, b) => a.id - b.id);
    if (!entries.length) {
      list.replaceChildren(muted("No failed call of that minute is in the audit trail (it may be off, or kept shorter)."));
      return;
    }
    const rows = entries.map((entry) => {
      const tr = row([
        timeElement(entry.at),
        entry.identity,
        entry.mcp_server + "/" + (entry.tool || entry.method),
        [entry.outcome + (entry.error_type ? ": " + entry.error_type : ""), "outcome-" + entry.outcome],
        Math.round(entry.duration_ms) + " ms",
        entry.trace_id || "–",
      ]);
      tr.dataset.audit = String(entry.id);
      return tr;
    });
    list.replaceChildren(table(["When", "Who", "Call", "Outcome", "Took", "Trace"], rows));
  } catch (err) {
    list.replaceChildren(muted("Audit unavailable: " + err.message));
  }
}
