// The status page's first script (work.js, the second, shows latency, clients, server facts,
// the playground and the audit rows behind the chart's errors). Everything it shows comes from /api with the credential the
// operator entered (kept in this tab's sessionStorage). It follows GET /api/events (Server-Sent
// Events, read with fetch so the credential travels in a header) and asks for a list again only
// when the stream (re)connects or reports a reload or a gap. Every text from the API is set with
// textContent, never parsed as HTML: tool descriptions and log lines are an upstream's words.
// For a server where each caller connects their own upstream account (`auth.oauth.per: user`),
// a row shows the caller's own connection (GET /api/credentials, in the page's words only) and
// a Connect button: POST /oauth/connect/{server}, then on to the URL the hangar answers.
// Calls waiting for a person's approval (GET /api/approvals) are listed above the servers, live
// (asked again on each `approval` event), with Approve and Deny buttons for those who may decide.
// The calls in flight (GET /api/calls: server, tool, caller, how long) are asked for every
// second while the tab is visible and the stream is live.
"use strict";

const CREDENTIAL_KEY = "hangar.credential";
const LOG_LINES = 200;
const LOG_EVERY_MS = 2000;
const AUDIT_LIMIT = 20;
const RATE_MINUTES = 60;
/// Counters and the chart are fetched again at most this often while events arrive.
const COUNTS_AT_MOST_EVERY_MS = 5000;
/// The chart's window moves on by itself once a minute.
const CHART_EVERY_MS = 60000;
const RECONNECT_FIRST_MS = 1000;
const RECONNECT_MAX_MS = 30000;
/// The decided approvals shown below the pending ones.
const RECENT_APPROVALS = 10;
/// How often the calls in flight are asked for while the tab is visible.
const IN_FLIGHT_EVERY_MS = 1000;

const $ = (id) => document.getElementById(id);

/// One server's card and what the page knows of it.
class ServerView {
  constructor(id) {
    this.id = id;
    this.summary = null;
    this.calls = null;
    this.failures = null;
    this.lastChange = null;
    this.open = false;
    this.logTimer = null;
    this.refreshing = null;
    this.auditEntries = null;
    this.auth = null;
    this.connection = null;
    const node = $("server-template").content.firstElementChild.cloneNode(true);
    this.node = node;
    node.dataset.server = id;
    const panelId = "panel-" + ServerView.count++;
    this.part("panel").id = panelId;
    const toggle = this.part("toggle");
    toggle.setAttribute("aria-controls", panelId);
    this.part("name").textContent = id;
    toggle.addEventListener("click", () => this.setOpen(!this.open));
  }

  part(name) {
    return this.node.querySelector("." + name);
  }

  /// Shows `summary` (an entry of GET /api/mcp_servers).
  show(summary) {
    this.summary = summary;
    this.node.dataset.state = summary.state;
    const state = this.part("state");
    state.textContent = summary.state;
    state.dataset.state = summary.state;
    this.part("mode").textContent = summary.mode;
    this.part("tools-count").textContent = String(summary.tools_count);
    this.showInstances(summary.instances || []);
    this.showDead(summary.dead);
    if (summary.last_change) {
      this.lastChange = summary.last_change;
    } else if (!this.lastChange && summary.dead) {
      this.lastChange = { at: summary.dead.since, from: null, to: "dead" };
    }
    this.showLastChange();
    this.showActions();
  }

  /// The dead record as the API gave it: its reason, and its note (how it ended and how it is
  /// revived, in the words every surface uses), both verbatim; and when a retry is allowed
  /// (counted down by `tick`).
  showDead(dead) {
    const box = this.part("dead");
    box.hidden = !dead;
    const retry = this.part("retry");
    if (!dead) {
      delete retry.dataset.at;
      return;
    }
    this.part("dead-reason").textContent = dead.reason;
    this.part("dead-note").textContent = dead.note;
    if (dead.retry_allowed_at) {
      retry.dataset.at = dead.retry_allowed_at;
    } else {
      delete retry.dataset.at;
      retry.textContent = "";
    }
    tickOne(retry);
  }

  /// An isolated server's instances the caller may see (its own; all of them for an admin):
  /// name, owner, state and process, one line each.
  showInstances(instances) {
    const box = this.part("instances");
    box.hidden = instances.length === 0;
    const items = instances.map((instance) => {
      const item = document.createElement("li");
      item.dataset.instance = instance.instance;
      item.dataset.state = instance.state;
      const pid = instance.pid ? ", pid " + instance.pid : "";
      item.textContent = instance.instance + " (" + instance.identity + "): " + instance.state + pid;
      return item;
    });
    this.part("instance-list").replaceChildren(...items);
  }

  showCounts() {
    this.part("calls").textContent = this.calls === null ? "–" : String(this.calls);
    this.part("failures").textContent = this.failures === null ? "–" : String(this.failures);
  }

  showLastChange() {
    const cell = this.part("last-change");
    const change = this.lastChange;
    if (!change) {
      cell.textContent = "–";
      return;
    }
    cell.replaceChildren(
      document.createTextNode(change.from ? change.from + " → " + change.to + ", " : change.to + " since "),
      timeElement(change.at),
    );
  }

  /// Start, stop and restart, for admins only (the supervisor says who is one).
  showActions() {
    const actions = this.part("actions");
    if (!session.admin) {
      actions.replaceChildren();
      return;
    }
    if (actions.childElementCount) return;
    for (const action of ["start", "stop", "restart"]) {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.action = action;
      button.textContent = action[0].toUpperCase() + action.slice(1);
      button.setAttribute("aria-label", button.textContent + " " + this.id);
      button.addEventListener("click", () => this.act(action));
      actions.append(button);
    }
  }

  /// Whether each caller connects their own account here (`auth.oauth.per: user`): its details
  /// say `oauth`, and its checks use no credential of the hangar's own.
  perUser() {
    return Boolean(this.auth && this.auth.kind === "oauth" && this.auth.checks === "reachability only");
  }

  /// Its `auth` (how the hangar proves itself to its upstream), from its details.
  async loadAuth() {
    const details = await apiJson("/api/mcp_servers/" + encodeURIComponent(this.id));
    this.auth = details.auth || null;
  }

  /// The caller's own connection here (an entry of GET /api/credentials, or null) and a Connect
  /// button, on a per-user server only. Only the page's words and the entry's flags and expiry:
  /// its issuer and scopes are the upstream's.
  showConnection(connection) {
    this.connection = connection;
    const box = this.part("connection");
    const slot = this.part("connect-slot");
    if (!this.perUser()) {
      box.hidden = true;
      slot.replaceChildren();
      return;
    }
    box.hidden = false;
    const state = this.part("connection-state");
    if (!connection) {
      box.dataset.connected = "no";
      state.textContent = "not connected";
    } else if (!connection.usable) {
      box.dataset.connected = "unusable";
      state.textContent = "connected, but the hangar's key no longer opens it";
    } else {
      box.dataset.connected = "yes";
      if (connection.refreshable) {
        state.textContent = "connected (renewed as needed)";
      } else if (connection.expires_at) {
        state.replaceChildren(document.createTextNode("connected until "), timeElement(connection.expires_at));
      } else {
        state.textContent = "connected";
      }
    }
    let button = slot.querySelector("button");
    if (!button) {
      button = document.createElement("button");
      button.type = "button";
      button.className = "connect";
      button.addEventListener("click", () => this.connect());
      slot.append(button);
    }
    button.textContent = connection ? "Connect again" : "Connect";
    button.setAttribute("aria-label", button.textContent + ": your account at " + this.id);
  }

  /// Has the hangar mint a connect flow for this caller, then goes where it answers (its
  /// /oauth/connect, which sends this browser on to the upstream's sign-in).
  async connect() {
    const button = this.part("connect-slot").querySelector("button");
    const result = this.part("action-result");
    button.disabled = true;
    delete result.dataset.failed;
    result.textContent = "connect: asking the hangar…";
    try {
      const answer = await apiJson("/oauth/connect/" + encodeURIComponent(this.id), { method: "POST" });
      const url = new URL(answer.url, location.href);
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("the hangar answered no web address");
      result.textContent = "connect: on to the sign-in…";
      location.assign(url.href);
    } catch (err) {
      result.dataset.failed = "";
      result.textContent = "connect refused: " + err.message;
      button.disabled = false;
    }
  }

  async act(action) {
    const buttons = [...this.part("actions").querySelectorAll("button")];
    const result = this.part("action-result");
    buttons.forEach((b) => (b.disabled = true));
    delete result.dataset.failed;
    result.textContent = action + ": sent…";
    try {
      const steps = action === "restart" ? ["stop", "start"] : [action];
      for (const step of steps) {
        await apiJson("/api/mcp_servers/" + encodeURIComponent(this.id) + "/" + step, { method: "POST" });
      }
      result.textContent = action + ": done";
    } catch (err) {
      result.dataset.failed = "";
      result.textContent = action + " refused: " + err.message;
    } finally {
      buttons.forEach((b) => (b.disabled = false));
    }
  }

  setOpen(open) {
    this.open = open;
    this.part("toggle").setAttribute("aria-expanded", String(open));
    this.part("panel").hidden = !open;
    clearTimeout(this.logTimer);
    if (open) {
      this.loadTools();
      this.loadAudit();
      this.followLogs();
      openWork(this);
    }
  }

  async loadTools() {
    const box = this.part("tools");
    try {
      const { tools } = await apiJson("/api/mcp_servers/" + encodeURIComponent(this.id) + "/tools");
      if (!tools.length) {
        box.replaceChildren(muted("No tools known yet (a server declares them once it runs)."));
        return;
      }
      box.replaceChildren(...tools.map(toolElement));
    } catch (err) {
      box.replaceChildren(muted("Tools unavailable: " + err.message));
    }
  }

  /// The log tail, asked again every 2 s while the panel is open (and the tab is shown).
  async followLogs() {
    if (document.hidden) {
      this.logTimer = setTimeout(() => this.followLogs(), LOG_EVERY_MS);
      return;
    }
    const pre = this.part("log");
    const follow = this.part("follow");
    try {
      const { logs } = await apiJson(
        "/api/mcp_servers/" + encodeURIComponent(this.id) + "/logs?lines=" + LOG_LINES,
      );
      const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
      pre.textContent = logs.length
        ? logs.map((line) => line.recorded_at + " " + line.stream + " " + line.content).join("\n")
        : "(nothing logged)";
      if (atBottom) pre.scrollTop = pre.scrollHeight;
      follow.textContent = "(following)";
    } catch (err) {
      pre.textContent = "Log unavailable: " + err.message;
      follow.textContent = "";
      // Refused (not an admin, or gone): asking again would only be refused again.
      if (err.status === 403 || err.status === 404) return;
    }
    if (this.open) this.logTimer = setTimeout(() => this.followLogs(), LOG_EVERY_MS);
  }

  async loadAudit() {
    const box = this.part("audit");
    try {
      const query = "?mcp_server=" + encodeURIComponent(this.id) + "&limit=" + AUDIT_LIMIT;
      const page = await apiJson("/api/audit" + query);
      this.auditEntries = page.entries.slice(-AUDIT_LIMIT);
      this.showAudit();
    } catch (err) {
      this.auditEntries = null;
      box.replaceChildren(muted("Audit unavailable: " + err.message));
    }
  }

  /// A live audit entry for this server, added while the panel shows the list.
  addAudit(entry) {
    if (!this.open || !this.auditEntries) return;
    this.auditEntries.push(entry);
    this.auditEntries = this.auditEntries.slice(-AUDIT_LIMIT);
    this.showAudit();
  }

  showAudit() {
    const box = this.part("audit");
    if (!this.auditEntries.length) {
      box.replaceChildren(muted("No calls recorded."));
      return;
    }
    const rows = [...this.auditEntries].reverse().map((entry) =>
      row([
        timeElement(entry.at),
        entry.identity + (entry.profile ? " (" + entry.profile + ")" : ""),
        entry.tool || entry.method,
        [entry.outcome + (entry.error_type ? ": " + entry.error_type : ""), "outcome-" + entry.outcome],
        Math.round(entry.duration_ms) + " ms",
        [policyOf(entry), "policy"],
      ]),
    );
    box.replaceChildren(table(["When", "Who", "Tool or method", "Outcome", "Took", "Policy"], rows));
  }
}
ServerView.count = 0;

/// What the page knows of the session: who the caller is, and the event stream's position.
const session = { admin: false, approver: false, identity: null, lastEventId: null, streamAbort: null };
const views = new Map();
let reconnectDelay = RECONNECT_FIRST_MS;
let countsTimer = null;
let countsAskedAt = 0;

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function credential() {
  return sessionStorage.getItem(CREDENTIAL_KEY);
}

/// A request to this hangar's API with the tab's credential; a 401 asks for a credential.
async function api(path, options = {}) {
  const headers = new Headers(options.headers || {});
  const secret = credential();
  if (secret) headers.set("Authorization", "Bearer " + secret);
  if (!headers.has("Accept")) headers.set("Accept", "application/json");
  // The cross-site guard wants every state-changing request to say it is JSON.
  if (options.method === "POST") headers.set("Content-Type", "application/json");
  const response = await fetch(path, { ...options, headers, cache: "no-store", credentials: "omit" });
  if (response.status === 401) {
    askForCredential(secret ? "That credential was not accepted." : "");
    throw new ApiError(401, "a credential is needed");
  }
  return response;
}

async function apiJson(path, options) {
  const response = await api(path, options);
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const message = body && body.error && body.error.message;
    throw new ApiError(response.status, message || "HTTP " + response.status);
  }
  return body;
}

async function apiText(path) {
  const response = await api(path, { headers: { Accept: "text/plain" } });
  if (!response.ok) throw new ApiError(response.status, "HTTP " + response.status);
  return response.text();
}

function askForCredential(message) {
  stopStream();
  setLink("refused", "Not signed in");
  $("signin").hidden = false;
  $("signin-error").textContent = message;
  $("credential").focus();
}

function setLink(state, text) {
  const link = $("link");
  link.dataset.link = state;
  link.textContent = text;
}

function announce(text) {
  const line = document.createElement("p");
  line.textContent = text;
  const announcer = $("announcer");
  announcer.append(line);
  while (announcer.childElementCount > 5) announcer.firstElementChild.remove();
}

// ---- the server list -------------------------------------------------------------------------

/// Asks for the list once, and for the counters; called on (re)connect, reloads and gaps.
async function refreshList() {
  const { mcp_servers: list } = await apiJson("/api/mcp_servers");
  const seen = new Set();
  const ul = $("servers");
  for (const summary of list) {
    seen.add(summary.mcp_server_id);
    let view = views.get(summary.mcp_server_id);
    if (!view) {
      view = new ServerView(summary.mcp_server_id);
      views.set(summary.mcp_server_id, view);
    }
    view.show(summary);
    ul.append(view.node); // in the API's (config) order
  }
  for (const [id, view] of views) {
    if (!seen.has(id)) {
      view.setOpen(false);
      view.node.remove();
      views.delete(id);
    }
  }
  showSummary();
  refreshCounts();
  loadConnections().catch((err) => showNotice("Connections unavailable: " + err.message));
  loadApprovals().catch((err) => showNotice("Approvals unavailable: " + err.message));
  loadInFlight().catch((err) => showNotice("Calls in flight unavailable: " + err.message));
}

/// Each server's `auth` (its details); then, where any server takes per-user connections, the
/// caller's own connections, one per row (a usable one first).
async function loadConnections() {
  const shown = [...views.values()];
  await Promise.all(shown.map((view) => view.loadAuth().catch(() => {})));
  const mine = shown.some((view) => view.perUser()) ? (await apiJson("/api/credentials")).credentials : [];
  for (const view of shown) {
    const found = mine.filter((connection) => connection.mcp_server === view.id);
    view.showConnection(found.find((connection) => connection.usable) || found[0] || null);
  }
}

function showSummary() {
  const counts = {};
  for (const view of views.values()) counts[view.summary.state] = (counts[view.summary.state] || 0) + 1;
  const parts = Object.entries(counts).map(([state, n]) => n + " " + state);
  $("summary").textContent = views.size
    ? views.size + (views.size === 1 ? " server: " : " servers: ") + parts.join(", ")
    : "No servers are visible to this credential.";
}

/// Calls and failures per server from /metrics (one request for all of them: the supervisor's
/// own counters), and the chart; at most once per COUNTS_AT_MOST_EVERY_MS.
function refreshCounts() {
  const wait = countsAskedAt + COUNTS_AT_MOST_EVERY_MS - Date.now();
  if (wait > 0) {
    if (!countsTimer) countsTimer = setTimeout(() => ((countsTimer = null), refreshCounts()), wait);
    return;
  }
  countsAskedAt = Date.now();
  loadCounts().catch((err) => showNotice("Counters unavailable: " + err.message));
  loadChart().catch((err) => showChartError(err));
  loadCallStats().catch((err) => showNotice("Latency unavailable: " + err.message));
  loadClients().catch((err) => showNotice("Clients unavailable: " + err.message));
}

async function loadCounts() {
  const text = await apiText("/metrics");
  const calls = samples(text, "hangar_tool_calls_total");
  const errors = samples(text, "hangar_tool_call_errors_total");
  for (const [id, view] of views) {
    view.calls = calls.get(id) ?? null;
    view.failures = errors.get(id) ?? null;
    view.showCounts();
  }
}

/// The per-server values of one Prometheus counter: `name{mcp_server="id"} value` lines.
function samples(text, name) {
  const found = new Map();
  const prefix = name + '{mcp_server="';
  for (const line of text.split("\n")) {
    if (!line.startsWith(prefix)) continue;
    const end = line.indexOf('"}', prefix.length);
    if (end < 0) continue;
    const id = line.slice(prefix.length, end).replace(/\\(.)/g, "$1");
    const value = Number(line.slice(end + 2).trim());
    if (Number.isFinite(value)) found.set(id, value);
  }
  return found;
}

function showNotice(text) {
  $("notice").textContent = text;
}

// ---- the event stream ------------------------------------------------------------------------

function stopStream() {
  if (session.streamAbort) session.streamAbort.abort();
  session.streamAbort = null;
}

/// Follows GET /api/events until it ends, then reconnects with Last-Event-ID after a backoff.
async function follow() {
  stopStream();
  const abort = new AbortController();
  session.streamAbort = abort;
  setLink("connecting", "Connecting…");
  let failure = null;
  try {
    const headers = { Accept: "text/event-stream" };
    if (session.lastEventId !== null) headers["Last-Event-ID"] = session.lastEventId;
    const response = await api("/api/events", { headers, signal: abort.signal });
    if (!response.ok || !response.body) {
      const body = await response.json().catch(() => null);
      // Without the stream the page still shows the list as it is now, once per attempt.
      await refreshList();
      throw new ApiError(response.status, (body && body.error && body.error.message) || "HTTP " + response.status);
    }
    setLink("live", "Live");
    reconnectDelay = RECONNECT_FIRST_MS;
    showNotice("");
    await refreshList();
    await readEvents(response.body, abort.signal);
  } catch (err) {
    if (abort.signal.aborted || err.status === 401) return;
    failure = err;
  }
  if (abort.signal.aborted) return;
  const seconds = Math.round(reconnectDelay / 1000);
  setLink("retrying", (failure ? "Disconnected (" + failure.message + ")" : "Disconnected") + "; retrying in " + seconds + " s");
  setTimeout(() => {
    if (session.streamAbort === abort) follow();
  }, reconnectDelay);
  reconnectDelay = Math.min(reconnectDelay * 2, RECONNECT_MAX_MS);
}

/// Reads an event stream: lines end in LF, CRLF or CR; an empty line ends an event.
async function readEvents(body, signal) {
  const reader = body.getReader();
  signal.addEventListener("abort", () => reader.cancel().catch(() => {}));
  const decoder = new TextDecoder();
  let buffer = "";
  let event = { id: null, kind: "message", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    for (;;) {
      const match = /\r\n|\r|\n/.exec(buffer);
      // A CR at the very end may be the first half of a CRLF still on its way.
      if (!match || (match[0] === "\r" && match.index === buffer.length - 1)) break;
      const line = buffer.slice(0, match.index);
      buffer = buffer.slice(match.index + match[0].length);
      if (line === "") {
        if (event.data.length) dispatch(event);
        event = { id: null, kind: "message", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue; // a comment: keep-alive
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let text = colon < 0 ? "" : line.slice(colon + 1);
      if (text.startsWith(" ")) text = text.slice(1);
      if (field === "data") event.data.push(text);
      else if (field === "event") event.kind = text;
      else if (field === "id" && !text.includes("\0")) event.id = text;
    }
  }
}

function dispatch(event) {
  if (event.id !== null) session.lastEventId = event.id;
  let data;
  try {
    data = JSON.parse(event.data.join("\n"));
  } catch {
    return;
  }
  switch (event.kind) {
    case "state":
      onState(data);
      break;
    case "audit":
      onAudit(data);
      break;
    case "reload":
    case "gap":
      refreshList().catch((err) => showNotice("List unavailable: " + err.message));
      break;
    case "action":
    case "drift":
      onAction(data, event.kind);
      break;
    case "approval":
      onApproval(data.approval);
      break;
  }
}

/// A state change: the row follows it at once, then its summary is asked for again (tool
/// count, mode) with one request for that server.
function onState(change) {
  // An instance's change (`<server>@<label>`) shows under its server.
  const [server, instance] = change.mcp_server_id.split("@");
  if (instance !== undefined) {
    const owner = views.get(server);
    if (owner) refreshServerSoon(owner);
    return;
  }
  const view = views.get(change.mcp_server_id);
  if (!view) {
    refreshList().catch((err) => showNotice("List unavailable: " + err.message));
    return;
  }
  view.lastChange = { at: change.at, from: change.from, to: change.to };
  view.show({ ...view.summary, state: change.to, alive: change.to !== "dead" && change.to !== "cold", dead: change.dead });
  showSummary();
  announce(change.mcp_server_id + " is now " + change.to + (change.dead ? " (" + change.dead.reason + ")" : ""));
  refreshServerSoon(view);
  if (view.open && change.to === "ready") view.loadTools();
  refreshCounts();
}

/// One request for the server's summary after a burst of its changes (a replay after a
/// reconnection may bring many at once).
function refreshServerSoon(view) {
  if (view.refreshing) return;
  view.refreshing = setTimeout(() => {
    view.refreshing = null;
    refreshServer(view);
  }, 250);
}

async function refreshServer(view) {
  try {
    const details = await apiJson("/api/mcp_servers/" + encodeURIComponent(view.id));
    view.show({
      ...view.summary,
      state: details.state,
      mode: details.mode,
      alive: details.alive,
      tools_count: details.tools.length,
      dead: details.dead,
      instances: details.instances || [],
    });
    view.auth = details.auth || null;
    view.showConnection(view.connection);
    showSummary();
  } catch (err) {
    if (err.status === 404) refreshList().catch(() => {});
  }
}

function onAudit(entry) {
  const view = views.get(entry.mcp_server);
  if (view) view.addAudit(entry);
  refreshCounts();
}

function onAction(data, kind) {
  const text =
    kind === "drift"
      ? data.mcp_server + ": " + data.detail
      : data.mcp_server + ": " + data.action + " by " + data.identity;
  announce(text);
}

/// What policy did to an audited call: the rule that decided it, the approval it waited for,
/// what redaction took out of its answer (by name: the entry never holds a value).
function policyOf(entry) {
  const parts = [];
  if (entry.rule) parts.push("rule " + entry.rule);
  if (entry.approval) {
    parts.push(entry.approval.state + (entry.approval.decided_by ? " by " + entry.approval.decided_by : ""));
  }
  if (entry.redacted && entry.redacted.length) parts.push("redacted: " + entry.redacted.join(", "));
  return parts.join("; ");
}

// ---- calls in flight -------------------------------------------------------------------------

/// The tool calls running upstream now, the longest running first (the caller's own; an
/// admin's: all).
async function loadInFlight() {
  const { calls } = await apiJson("/api/calls");
  $("in-flight-summary").textContent =
    calls.length === 0 ? "No call is running." : calls.length + (calls.length === 1 ? " call is" : " calls are") + " running.";
  const rows = calls.map((call) => {
    const tr = row([
      call.mcp_server + "/" + call.tool,
      call.identity,
      timeElement(call.started_at),
      [call.elapsed_ms < 1000 ? call.elapsed_ms + " ms" : duration(Math.floor(call.elapsed_ms / 1000)), "elapsed"],
    ]);
    tr.dataset.server = call.mcp_server;
    return tr;
  });
  $("in-flight-list").replaceChildren(...(rows.length ? [table(["Call", "Caller", "Started", "Running for"], rows)] : []));
}

// ---- approvals -------------------------------------------------------------------------------

let approvalsTimer = null;

/// An approval was asked for or decided: the list is asked for again (once per burst).
function onApproval(approval) {
  if (approval && approval.state === "pending") {
    announce(approval.identity + "'s call of " + approval.mcp_server + "/" + approval.tool + " waits for approval");
  }
  if (approvalsTimer) return;
  approvalsTimer = setTimeout(() => {
    approvalsTimer = null;
    loadApprovals().catch((err) => showNotice("Approvals unavailable: " + err.message));
  }, 150);
}

/// The pending approvals (oldest first), then the last few decided; hidden when there are none.
async function loadApprovals() {
  const { approvals } = await apiJson("/api/approvals");
  const pending = approvals.filter((a) => a.state === "pending");
  const recent = approvals.filter((a) => a.state !== "pending").slice(0, RECENT_APPROVALS);
  const section = $("approvals");
  section.hidden = pending.length === 0 && recent.length === 0;
  $("approvals-summary").textContent =
    pending.length === 0
      ? "No call waits for approval."
      : pending.length + (pending.length === 1 ? " call waits" : " calls wait") + " for approval.";
  const rows = [...pending, ...recent].map(approvalRow);
  $("approvals-list").replaceChildren(
    table(["Call", "Caller", "Arguments", "Rule", "State", "Until / by", ""], rows),
  );
}

function approvalRow(approval) {
  const tr = row([
    approval.mcp_server + "/" + approval.tool,
    approval.identity,
    approvalArguments(approval),
    approval.reason || approval.rule,
    [approval.state + (approval.outcome ? " (" + approval.outcome + ")" : ""), "approval-state"],
    approval.decided_by
      ? approval.decided_by
      : approval.state === "pending"
        ? timeElement(approval.expires_at)
        : "",
    approvalActions(approval),
  ]);
  tr.dataset.approval = approval.id;
  tr.dataset.state = approval.state;
  return tr;
}

function approvalArguments(approval) {
  if (approval.arguments === undefined) return muted(approval.arguments_sha256.slice(0, 19) + "…");
  const code = document.createElement("code");
  code.className = "arguments";
  code.textContent = JSON.stringify(approval.arguments);
  code.title = approval.arguments_sha256;
  return code;
}

/// Approve and Deny for a pending approval, to those who may decide; not on their own call
/// (the hangar refuses that unless `approvals.self_approve`, and says so).
function approvalActions(approval) {
  const cell = document.createElement("span");
  cell.className = "approval-actions";
  if (approval.state !== "pending" || !session.approver) return cell;
  for (const [verb, label] of [
    ["approve", "Approve"],
    ["deny", "Deny"],
  ]) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = verb;
    button.textContent = label;
    button.setAttribute("aria-label", label + " " + approval.identity + "'s call of " + approval.mcp_server + "/" + approval.tool);
    button.addEventListener("click", () => decideApproval(approval, verb, cell));
    cell.append(button);
  }
  return cell;
}

async function decideApproval(approval, verb, cell) {
  for (const button of cell.querySelectorAll("button")) button.disabled = true;
  const result = $("approvals-result");
  try {
    const decided = await apiJson("/api/approvals/" + encodeURIComponent(approval.id) + "/" + verb, { method: "POST" });
    result.textContent = decided.identity + "'s call of " + decided.mcp_server + "/" + decided.tool + ": " + decided.state + ".";
  } catch (err) {
    result.textContent = "Not decided: " + err.message;
  }
  await loadApprovals().catch((err) => showNotice("Approvals unavailable: " + err.message));
}

// ---- the chart -------------------------------------------------------------------------------

const SVG = "http://www.w3.org/2000/svg";

function svg(name, attributes) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  return node;
}

async function loadChart() {
  const { minutes } = await apiJson("/api/audit/rates?minutes=" + RATE_MINUTES);
  drawChart(minutes);
}

function showChartError(err) {
  $("chart").replaceChildren();
  $("chart-text").textContent = "Chart unavailable: " + err.message;
}

/// Bars per minute, calls behind errors, oldest on the left.
function drawChart(minutes) {
  const width = 600;
  const height = 120;
  const bottom = height - 1;
  const top = 2;
  const max = Math.max(1, ...minutes.map((m) => m.calls));
  const slot = width / Math.max(minutes.length, RATE_MINUTES);
  const scale = (n) => ((bottom - top) * n) / max;
  const totalCalls = minutes.reduce((sum, m) => sum + m.calls, 0);
  const totalErrors = minutes.reduce((sum, m) => sum + m.errors, 0);
  const summary = totalCalls + " calls and " + totalErrors + " errors in the last hour";
  const chart = svg("svg", { viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": summary, preserveAspectRatio: "none" });
  const title = svg("title", {});
  title.textContent = summary;
  chart.append(title, svg("line", { class: "axis", x1: 0, y1: bottom, x2: width, y2: bottom, "vector-effect": "non-scaling-stroke" }));
  minutes.forEach((minute, i) => {
    const x = width - (minutes.length - i) * slot;
    for (const [kind, n] of [["calls", minute.calls], ["errors", minute.errors]]) {
      if (!n) continue;
      const bar = svg("rect", { class: kind, x: x + 0.5, width: Math.max(slot - 1, 1), y: bottom - scale(n), height: scale(n) });
      const tip = svg("title", {});
      tip.textContent = formatTime(minute.at) + ": " + minute.calls + " calls, " + minute.errors + " errors";
      bar.append(tip);
      // An error bar opens the audit rows behind it (as its button below the chart does).
      if (kind === "errors") bar.addEventListener("click", () => showErrorRows(minute.at));
      chart.append(bar);
    }
  });
  $("chart").replaceChildren(chart);
  $("chart-peak").textContent = "top: " + max + " calls/min";
  const text = $("chart-text");
  const calls = document.createElement("span");
  calls.className = "legend-calls";
  calls.textContent = totalCalls + " calls";
  const errors = document.createElement("span");
  errors.className = "legend-errors";
  errors.textContent = totalErrors + " errors";
  text.replaceChildren(calls, document.createTextNode(" and "), errors, document.createTextNode(" in the last hour."));
  showErrorMinutes(minutes);
}

// ---- small builders --------------------------------------------------------------------------

function formatTime(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleTimeString();
}

function timeElement(iso) {
  const time = document.createElement("time");
  time.dateTime = iso;
  time.title = iso;
  time.textContent = formatTime(iso);
  return time;
}

function muted(text) {
  const p = document.createElement("p");
  p.className = "muted";
  p.textContent = text;
  return p;
}

function toolElement(tool) {
  const details = document.createElement("details");
  details.className = "tool";
  const summary = document.createElement("summary");
  const name = document.createElement("code");
  name.textContent = tool.name;
  summary.append(name);
  if (tool.description) {
    const description = document.createElement("span");
    description.className = "description";
    description.textContent = " – " + tool.description;
    summary.append(description);
  }
  const schema = document.createElement("pre");
  schema.textContent = JSON.stringify(tool.inputSchema, null, 2);
  details.append(summary, schema);
  return details;
}

/// A table row; a cell is a text, a node, or [text, class].
function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    const td = document.createElement("td");
    if (Array.isArray(cell)) {
      td.textContent = cell[0];
      td.className = cell[1];
    } else if (cell instanceof Node) {
      td.append(cell);
    } else {
      td.textContent = cell;
    }
    tr.append(td);
  }
  return tr;
}

function table(headings, rows) {
  const wrap = document.createElement("div");
  wrap.className = "table-wrap";
  const t = document.createElement("table");
  t.className = "entries";
  const head = document.createElement("tr");
  for (const heading of headings) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = heading;
    head.append(th);
  }
  const thead = document.createElement("thead");
  thead.append(head);
  const tbody = document.createElement("tbody");
  tbody.append(...rows);
  t.append(thead, tbody);
  wrap.append(t);
  return wrap;
}

// ---- the countdown ---------------------------------------------------------------------------

/// Retry countdowns, once a second: "retry allowed in 4 s", then "retry allowed now".
function tick() {
  document.querySelectorAll(".retry[data-at]").forEach(tickOne);
}

function tickOne(node) {
  const at = node.dataset.at;
  if (!at) return;
  const left = Math.ceil((Date.parse(at) - Date.now()) / 1000);
  node.textContent = left > 0 ? "Retry allowed in " + duration(left) + "." : "Retry allowed now.";
  node.title = at;
}

function duration(seconds) {
  if (seconds < 90) return seconds + " s";
  const minutes = Math.floor(seconds / 60);
  if (minutes < 90) return minutes + " min " + (seconds % 60) + " s";
  return Math.floor(minutes / 60) + " h " + (minutes % 60) + " min";
}

// ---- start -----------------------------------------------------------------------------------

/// Who is calling: the supervisor decides whether this credential may act.
async function signIn() {
  try {
    const me = await apiJson("/api/whoami");
    session.admin = me.admin;
    session.approver = me.approver;
    session.identity = me.identity;
    $("signin").hidden = true;
    $("forget").hidden = !credential();
    $("who").textContent =
      "Signed in as " + me.identity + (me.profile ? " (profile " + me.profile + ")" : "") + (me.admin ? ", admin" : ", read-only");
    for (const view of views.values()) view.showActions();
    follow();
  } catch (err) {
    if (err.status !== 401) {
      setLink("retrying", "Unavailable (" + err.message + ")");
      setTimeout(signIn, reconnectDelay);
      reconnectDelay = Math.min(reconnectDelay * 2, RECONNECT_MAX_MS);
    }
  }
}

function start() {
  $("signin-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("credential").value.trim();
    if (!value) {
      $("signin-error").textContent = "Enter an API key or a bearer token.";
      return;
    }
    sessionStorage.setItem(CREDENTIAL_KEY, value);
    $("credential").value = "";
    signIn();
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(CREDENTIAL_KEY);
    location.reload();
  });
  setInterval(tick, 1000);
  setInterval(() => {
    if (session.streamAbort && !document.hidden) refreshCounts();
  }, CHART_EVERY_MS);
  setInterval(() => {
    if (session.streamAbort && !document.hidden) loadInFlight().catch(() => {});
  }, IN_FLIGHT_EVERY_MS);
  signIn();
}

start();
