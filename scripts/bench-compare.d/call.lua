-- wrk script: posts one MCP tools/call (2026-07-28 wire, every header the guard and the wire want;
-- or in a legacy session, with its id) over keep-alive connections, and checks EVERY answer: HTTP 200, the echoed text in the result,
-- no `"isError": true` (and for hangar_call no `"success": false`). It prints one JSON line,
-- prefixed `wrk-result `, with the figures in hangar-bench's field names and the check counts;
-- scripts/bench-compare and scripts/bench-wrk read it and fail on any failed or unchecked answer.
--
--   wrk ... -s call.lua URL -- hangar_call SERVER TOOL TEXT [TOKEN]   (the gateway tool, one call)
--   wrk ... -s call.lua URL -- front_door SERVER TOOL TEXT [TOKEN]    (the upstream's tool by name)
--   wrk ... -s call.lua URL -- legacy SERVER TOOL TEXT SESSION [TOKEN] (the same, in a 2025-11-25
--                                                                       session: helpers.py opens it)
--
-- TOKEN, when given, is sent as `Authorization: Bearer TOKEN` (an API key or an access token).
--
-- TOOL is an echo tool (the fake's `echo`): it is called with {"text": TEXT} and must answer
-- {"text": TEXT} as its structuredContent. TEXT is letters and digits only (no escaping needed).

local threads = {}

-- Runs in the main Lua state once per thread, before the run: kept to sum the counts in done().
function setup(thread)
  table.insert(threads, thread)
end

local function usage(why)
  io.stderr:write("call.lua: " .. why .. "\n" ..
    "usage: wrk ... -s call.lua URL -- hangar_call|front_door SERVER TOOL TEXT [TOKEN]\n" ..
    "       wrk ... -s call.lua URL -- legacy SERVER TOOL TEXT SESSION [TOKEN]\n")
  os.exit(64)
end

-- Per thread: builds the request and the patterns its answers must (not) match.
function init(args)
  local kind, server, tool, text, token = args[1], args[2], args[3], args[4], args[5]
  local session
  if kind == "legacy" then
    session, token = args[5], args[6]
    if not (session and session:match("^[%w-]+$")) then usage("legacy needs a session id") end
  end
  if not text then usage("four arguments expected") end
  for _, word in ipairs({ server, tool }) do
    if not word:match("^[%w_.-]+$") then usage("not a plain name: " .. word) end
  end
  -- It goes into a Lua pattern below as it is.
  if not text:match("^%w+$") then usage("TEXT must be letters and digits: " .. text) end
  local meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
    '"io.modelcontextprotocol/clientCapabilities":{}}'
  local echo_args = '{"text":"' .. text .. '"}'
  local name, arguments
  if kind == "hangar_call" then
    name = "hangar_call"
    arguments = '{"calls":[{"mcp_server":"' .. server .. '","tool":"' .. tool .. '","arguments":' .. echo_args .. '}]}'
  elseif kind == "front_door" or kind == "legacy" then
    name = tool
    arguments = echo_args
  else
    usage("unknown kind: " .. kind)
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  if session then
    wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
    wrk.headers["Mcp-Session-Id"] = session
    meta = '"_meta":{}'
  else
    wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
    wrk.headers["Mcp-Method"] = "tools/call"
    wrk.headers["Mcp-Name"] = name
  end
  if token then
    if not token:match("^[%w._~+/=-]+$") then usage("TOKEN is not a bearer token's characters") end
    wrk.headers["Authorization"] = "Bearer " .. token
  end
  wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' .. name ..
    '","arguments":' .. arguments .. ',' .. meta .. '}}'

  -- The echoed result as it appears unescaped in the answer (hangar_call: inside the batch's
  -- structuredContent), whatever the spacing: a key, and what must follow it.
  expected = { '"structuredContent"', '^%s*:%s*{%s*"text"%s*:%s*"' .. text .. '"%s*}' }
  forbidden = { { '"isError"', '^%s*:%s*true' } }
  if kind == "hangar_call" then
    table.insert(forbidden, { '"success"', '^%s*:%s*false' })
  end
  checked, failed, first_failure = 0, 0, ""
end

-- Whether `body` holds key[1] (a plain string) followed at once by the anchored pattern key[2].
-- The key is found by a plain search and the pattern tried only where it ends. Searched with the
-- pattern from every position, a `hangar_call` answer (1 KiB) cost wrk 32 µs of CPU per call
-- against 20 this way, taken from the two cores the hangar runs on.
local function holds(body, key)
  local from = 1
  while true do
    local _, last = body:find(key[1], from, true)
    if not last then return false end
    if body:find(key[2], last + 1) then return true end
    from = last + 1
  end
end

function response(status, headers, body)
  checked = checked + 1
  local ok = status == 200 and holds(body, expected)
  if ok then
    for _, key in ipairs(forbidden) do
      if holds(body, key) then ok = false end
    end
  end
  if not ok then
    failed = failed + 1
    if first_failure == "" then first_failure = "HTTP " .. status .. ": " .. body:sub(1, 300) end
  end
end

local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

function done(summary, latency, requests)
  local checked_all, failed_all, first = 0, 0, ""
  for _, thread in ipairs(threads) do
    checked_all = checked_all + thread:get("checked")
    failed_all = failed_all + thread:get("failed")
    if first == "" then first = thread:get("first_failure") end
  end
  local errors = summary.errors
  local seconds = summary.duration / 1e6
  io.write(string.format(
    'wrk-result {"count":%d,"errors":%d,"checked":%d,"failed":%d,"calls_per_s":%.1f,' ..
    '"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,"duration_s":%.3f,"first_failure":%s}\n',
    summary.requests, errors.connect + errors.read + errors.write + errors.status + errors.timeout,
    checked_all, failed_all, summary.requests / seconds,
    latency:percentile(50) / 1e3, latency:percentile(90) / 1e3, latency:percentile(99) / 1e3,
    latency.max / 1e3, seconds, json_string(first)))
end
