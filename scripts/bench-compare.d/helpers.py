#!/usr/bin/env python3
"""Helpers for scripts/bench-compare (standard library only; run with the system python3).

  helpers.py free-port
      Prints a free loopback TCP port (bound to port 0, then released).
  helpers.py first-call URL SERVER TOOL ARGS_JSON T0_NS|@T0_FILE TIMEOUT_S
      Polls GET <base>/health/ready and then a hangar_call (MCP 2026-07-28 wire) until one succeeds;
      prints {"ready_s": ..., "first_call_s": ...} measured from T0_NS (time.time_ns() at launch).
  helpers.py rss PID EXCLUDE_NAME
      Prints {"rss_kb", "hwm_kb", "processes": [...]}: VmRSS (and VmHWM) summed over PID and its
      descendants, leaving out processes whose executable is named EXCLUDE_NAME (the upstream).
  helpers.py cpu-busy SECONDS
      Prints the fraction of all CPU time spent busy (not idle or iowait) over SECONDS.
  helpers.py add-row SRC DST KEY=VALUE...
      Appends every JSON line of SRC to DST with the given string fields added.
  helpers.py wrk [--header] [--bearer TOKEN] URL KIND SERVER TOOL TEXT CONNECTIONS SECONDS LABEL [JSON_OUT]
      Runs wrk (one thread, CONNECTIONS keep-alive connections, SECONDS) with call.lua beside this
      file: KIND is hangar_call or front_door, calling TOOL (an echo tool) with {"text": TEXT}, or
      legacy (front_door in a 2025-11-25 session this opens first), and every answer is checked. --bearer sends TOKEN (a key or an access token) as
      `Authorization: Bearer`. Prints a row in hangar-bench's format and wrk's own CPU per call
      (LABEL; its header first with --header) and appends its JSON row (hangar-bench's fields,
      plus checked, failed and generator_cpu_us) to
      JSON_OUT. Exits 1 when wrk fails, an answer failed its check, a socket error or non-2xx
      happened, or not every answer was checked.
  helpers.py wrk-interleaved [--header] KIND SERVER TOOL TEXT CONNECTIONS SECONDS SLICE_MS LABEL JSON_OUT NAME=[KIND=]URL...
      Runs one wrk (as `wrk` does) per NAME=URL, taking turns: one at a time runs, for SLICE_MS a
      turn (the others SIGSTOPped), until each has run SECONDS in all. One row per target (LABEL
      with `{}` replaced by its NAME), its calls/s over its own turns; checked as `wrk` checks.
      A target's own KIND (NAME=KIND=URL) replaces the first one: several paths of one hangar
      taking turns.
  helpers.py auth-report RESULTS_JSONL
      scripts/bench-auth's table (Markdown): per generator and auth (none, key, token), calls/s at
      8 connections and p50 at 8 and at 1, as median [min-max] over rounds; then token/key per
      generator, round by round (each round's token run against the same round's key run).
  helpers.py report RESULTS_JSONL
      Prints the comparison table and appends the ratio rows to RESULTS_JSONL; then the cross-check
      table (ours by hangar-bench and by wrk, with wrk/hangar-bench) and its "agreement" rows.
"""

import http.client
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.parse


def free_port():
    print(_free_port())


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_call(url, server, tool, args_json, t0_ns, timeout_s):
    # "@FILE": the launch time is read from FILE once known, and FILE.polling is created once this
    # helper polls, so the caller launches the gateway only then: Python's own start-up (a
    # tenth of a second or more) is not counted against the gateway.
    t0_file = t0_ns[1:] if t0_ns.startswith("@") else None
    deadline = time.time() + float(timeout_s)
    if t0_file:
        open(t0_file + ".polling", "w").close()

    def launched_ns():
        if t0_file:
            with open(t0_file) as f:
                return int(f.read().strip())
        return int(t0_ns)

    parsed = urllib.parse.urlsplit(url)
    host, port, path = parsed.hostname, parsed.port, parsed.path or "/mcp"
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "hangar_call",
                "arguments": {"calls": [{"mcp_server": server, "tool": tool, "arguments": json.loads(args_json)}]},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
    )
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "hangar_call",
    }
    ready_s, last = None, "nothing answered"
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection(host, port, timeout=30)
            if ready_s is None:
                conn.request("GET", "/health/ready")
                resp = conn.getresponse()
                resp.read()
                if resp.status != 200:
                    last = f"/health/ready answered {resp.status}"
                    conn.close()
                    time.sleep(0.005)
                    continue
                ready_s = (time.time_ns() - launched_ns()) / 1e9
            conn.request("POST", path, body, headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            if resp.status == 200 and b'"success":true' in data:
                first_s = (time.time_ns() - launched_ns()) / 1e9
                print(json.dumps({"ready_s": round(ready_s, 3), "first_call_s": round(first_s, 3)}))
                return
            last = f"hangar_call answered {resp.status}: {data[:300]!r}"
        except OSError as e:
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.005)
    sys.exit(f"no successful hangar_call on {url} within {timeout_s}s (last: {last})")


def _children():
    kids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def rss(pid, exclude_name):
    kids, todo, total, hwm, procs = _children(), [int(pid)], 0, 0, []
    while todo:
        p = todo.pop()
        todo.extend(kids.get(p, []))
        try:
            exe = os.path.basename(os.readlink(f"/proc/{p}/exe"))
            status = _status(p)
        except OSError:
            continue
        if exe == exclude_name:
            continue
        kb = int(status.get("VmRSS", "0 kB").split()[0])
        peak = int(status.get("VmHWM", "0 kB").split()[0])
        total, hwm = total + kb, hwm + peak
        procs.append({"pid": p, "exe": exe, "rss_kb": kb})
    print(json.dumps({"rss_kb": total, "hwm_kb": hwm, "processes": procs}))


def _cpu_times():
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return sum(values), values[3] + values[4]


def cpu_busy(seconds):
    total0, idle0 = _cpu_times()
    time.sleep(float(seconds))
    total1, idle1 = _cpu_times()
    print(round(1 - (idle1 - idle0) / max(1, total1 - total0), 3))


def add_row(src, dst, *pairs):
    extra = dict(pair.split("=", 1) for pair in pairs)
    with open(src) as f, open(dst, "a") as out:
        for line in f:
            if line.strip():
                row = json.loads(line)
                row.update(extra)
                out.write(json.dumps(row) + "\n")


def wrk(*args):
    header, bearer = False, []
    while args and args[0] in ("--header", "--bearer"):
        if args[0] == "--header":
            header, args = True, args[1:]
        else:
            bearer, args = [args[1]], args[2:]
    url, kind, server, tool, text, connections, seconds, label, *json_out = args
    session = [_legacy_session(url, bearer)] if kind == "legacy" else []
    command = _wrk_command(url, kind, server, tool, text, connections, f"{seconds}s", session + bearer)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(command, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = _wrk_row(run.returncode, run.stdout, run.stderr, label)
    # wrk's own CPU per call: it loads the same cores as the hangar, and reading a bigger answer
    # costs it more.
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row["generator_cpu_us"] = round(cpu_s * 1e6 / row["count"], 1) if row["count"] else None
    _record_row(row, label, header, json_out[0] if json_out else None)


def _legacy_session(url, bearer):
    """Opens a legacy session (`initialize` at 2025-11-25, then `notifications/initialized`) and
    returns its id."""
    parts = urllib.parse.urlsplit(url)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer[0]}"
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "wrk", "version": "1"}}
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    conn.request("POST", parts.path, json.dumps(body), headers)
    resp = conn.getresponse()
    answer = resp.read()
    session = resp.getheader("Mcp-Session-Id")
    if resp.status != 200 or not session:
        sys.exit(f"initialize answered {resp.status} without a session: {answer[:300]!r}")
    headers.update({"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
    conn.request("POST", parts.path, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers)
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return session


def static_guardian(bin_dir):
    """The static guardian scripts/build-guardian builds for BIN_DIR's profile (target/<profile>),
    or None when it is not built (the supervisor then runs the glibc one beside it)."""
    target, profile = os.path.split(os.path.abspath(bin_dir))
    built = os.path.join(target, f"{os.uname().machine}-unknown-linux-musl", profile, "hangar-guardian")
    return built if os.path.exists(built) else None


def _wrk_command(url, kind, server, tool, text, connections, duration, bearer=()):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "call.lua")
    command = ["wrk", "-t1", f"-c{int(connections)}", f"-d{duration}", "--latency", "-s", script, url]
    return command + ["--", kind, server, tool, text, *bearer]


def _wrk_row(returncode, stdout, stderr, label):
    line = next((l for l in stdout.splitlines() if l.startswith("wrk-result ")), None)
    if returncode != 0 or line is None:
        sys.exit(f"{label}: wrk failed (exit {returncode}): {stderr.strip() or stdout.strip()}")
    row = json.loads(line[len("wrk-result ") :])
    return {"label": label, "generator": "wrk", **row}


def _record_row(row, label, header, json_out):
    """Prints a wrk row (its header first if asked), appends it to JSON_OUT, and exits 1 on any
    failed, unchecked or errored answer."""
    first_failure = row.pop("first_failure")
    if header:
        names = ("p50_ms", "p90_ms", "p99_ms", "max_ms")
        print(f"{'label':<44} {'count':>8} {'errors':>6} " + " ".join(f"{n:>9}" for n in names) + f" {'calls/s':>10} {'wrk_cpu_us':>10}")
    latencies = " ".join("        -" if row[n] is None else f"{row[n]:>9.3f}" for n in ("p50_ms", "p90_ms", "p99_ms", "max_ms"))
    cpu = row.get("generator_cpu_us")
    cpu = "-" if cpu is None else f"{cpu:.1f}"
    print(f"{label:<44} {row['count']:>8} {row['errors']:>6} {latencies} {row['calls_per_s']:>10.1f} {cpu:>10}")
    if json_out:
        with open(json_out, "a") as out:
            out.write(json.dumps(row) + "\n")
    problems = []
    if row["count"] == 0:
        problems.append("no answer at all")
    if row["failed"]:
        problems.append(f"{row['failed']} answers failed their check, the first: {first_failure}")
    if row["checked"] != row["count"]:
        problems.append(f"{row['checked']} of {row['count']} answers checked")
    if row["errors"]:
        problems.append(f"{row['errors']} socket errors or non-2xx answers")
    if problems:
        sys.exit(f"{label}: " + "; ".join(problems))


def _stopped(pid):
    """Whether process PID is stopped (state T in /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def _turn_target(kind, target):
    """A `wrk-interleaved` target, NAME=URL or NAME=KIND=URL, as (name, kind, url)."""
    name, rest = target.split("=", 1)
    own_kind, _, url = rest.partition("=")
    if not url:
        return name, kind, own_kind
    if own_kind not in ("hangar_call", "front_door", "legacy"):
        sys.exit(f"wrk-interleaved: unknown kind {own_kind!r} in {target!r}")
    return name, own_kind, url


def wrk_interleaved(*args):
    """One wrk per target, taking turns: only one is running at any time, each for SLICE_MS at a
    turn, until each has run SECONDS in all. Every target meets the same spells of the machine's
    noise (a VM's steal comes and goes over seconds), which back-to-back runs do not."""
    header = args[0] == "--header"
    if header:
        args = args[1:]
    kind, server, tool, text, connections, seconds, slice_ms, label_format, json_out, *targets = args
    seconds, slice_s = float(seconds), float(slice_ms) / 1000
    targets = [_turn_target(kind, target) for target in targets]
    runs = []
    for name, own_kind, url in targets:
        session = [_legacy_session(url, [])] if own_kind == "legacy" else []
        # Stopped before wrk is even executed, so no target gets a head start: wrk starts (and
        # connects) within its first turn.
        command = ["sh", "-c", 'kill -STOP $$; exec "$@"', "sh"]
        command += _wrk_command(url, own_kind, server, tool, text, connections, "3600s", session)
        runs.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + 10
    while not all(_stopped(run.pid) for run in runs):
        if time.monotonic() > deadline or any(run.poll() is not None for run in runs):
            sys.exit("wrk-interleaved: a wrk did not reach its start")
        time.sleep(0.001)
    active = [0.0] * len(runs)
    try:
        while min(active) < seconds:
            for i, run in enumerate(runs):
                if active[i] >= seconds:
                    continue
                began = time.monotonic()
                os.kill(run.pid, signal.SIGCONT)
                time.sleep(min(slice_s, seconds - active[i]))
                os.kill(run.pid, signal.SIGSTOP)
                active[i] += time.monotonic() - began
        # SIGINT ends a wrk's run, and it reports; its load thread runs on alone until it
        # notices (a 100 ms timer), which counts as its time too. The signal may land on that
        # thread rather than on the main one, whose sleep it must end: then it is sent again once
        # the load thread has gone (the time after that loads nothing and is not counted).
        outputs = []
        for i, run in enumerate(runs):
            began = time.monotonic()
            os.kill(run.pid, signal.SIGCONT)
            load_ended = None
            while run.poll() is None and time.monotonic() < began + 30:
                try:
                    threads = len(os.listdir(f"/proc/{run.pid}/task"))
                except FileNotFoundError:
                    break
                if load_ended is None and threads == 1:
                    load_ended = time.monotonic()
                os.kill(run.pid, signal.SIGINT)
                time.sleep(0.001 if load_ended is None else 0.05)
            stdout, stderr = run.communicate(timeout=30)
            active[i] += (load_ended or time.monotonic()) - began
            outputs.append((run.returncode, stdout, stderr))
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
    for i, ((name, _, _), (returncode, stdout, stderr)) in enumerate(zip(targets, outputs)):
        label = label_format.replace("{}", name)
        row = _wrk_row(returncode, stdout, stderr, label)
        # wrk's own rate divides by its whole run, turns away included, and its latencies count
        # them too (a request sent before a turn ends is answered in the next): neither is kept.
        row["calls_per_s"] = row["count"] / active[i]
        row.update({name: None for name in ("p50_ms", "p90_ms", "p99_ms", "max_ms")})
        row["duration_s"] = active[i]
        _record_row(row, label, header and i == 0, json_out)


def _fmt(x, unit=""):
    if x is None:
        return "-"
    if isinstance(x, float):
        if abs(x) >= 100:
            return f"{x:,.0f}{unit}"
        if abs(x) >= 10:
            return f"{x:.1f}{unit}"
        if abs(x) >= 1:
            return f"{x:.2f}{unit}"
        return f"{x:.3f}{unit}" if abs(x) >= 0.01 else f"{x:.2g}{unit}"
    return f"{x}{unit}"


def _ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def report(results):
    rows = [json.loads(line) for line in open(results) if line.strip()]

    def find(kind, gateway, workload, generator="hangar-bench"):
        for r in rows:
            if (
                r.get("kind") == kind
                and r.get("gateway") == gateway
                and r.get("workload") == workload
                and r.get("generator", "hangar-bench") == generator
            ):
                return r
        return None

    def bench(gateway, workload, field, generator="hangar-bench"):
        r = find("bench", gateway, workload, generator)
        return None if r is None else float(r[field])

    def meta(gateway, field):
        r = find("meta", gateway, "process")
        return None if r is None or r.get(field) is None else float(r[field])

    # (metric, floor, hangar, mcp-hangar, lower_is_better)
    lines = []
    for workload, title in (
        ("latency", "sequential hangar_call"),
        ("latency-front-door", "sequential front-door tools/call"),
        ("latency-legacy", "sequential, legacy wire"),
    ):
        for q in ("p50", "p90", "p99"):
            lines.append(
                (
                    f"{title} {q} (ms)",
                    bench("floor", "latency", f"{q}_ms") if workload != "latency-legacy" else None,
                    bench("hangar", workload, f"{q}_ms"),
                    bench("mcp-hangar", workload, f"{q}_ms"),
                    True,
                )
            )
    # mcp-hangar (bench() finds no row for it) has no front door: only ours is measured there.
    for title, workload in (
        ("throughput, 8 clients (calls/s)", "throughput"),
        ("front-door tools/call, 8 clients (calls/s)", "throughput-front-door"),
    ):
        for field, metric in (("calls_per_s", title), ("p50_ms", None), ("p99_ms", None)):
            metric = metric or f"  latency under that load {field[:3]} (ms)"
            lines.append(
                (
                    metric,
                    bench("floor", "throughput", field),
                    bench("hangar", workload, field),
                    bench("mcp-hangar", workload, field),
                    field != "calls_per_s",
                )
            )
    # wrk's runs count too, with the answers that failed its check.
    errors = {
        g: sum(
            int(r.get("errors", 0)) + int(r.get("failed", 0))
            for r in rows
            if r.get("kind") == "bench" and r.get("gateway") == g
        )
        for g in ("floor", "hangar", "mcp-hangar")
    }
    lines.append(("errors, all runs", errors["floor"], errors["hangar"], errors["mcp-hangar"], True))
    lines.append(
        ("RSS after warm-up (MiB)", None, meta("hangar", "rss_warm_mb"), meta("mcp-hangar", "rss_warm_mb"), True)
    )
    lines.append(("RSS after load (MiB)", None, meta("hangar", "rss_load_mb"), meta("mcp-hangar", "rss_load_mb"), True))
    lines.append(("launch to /health/ready (s)", None, meta("hangar", "ready_s"), meta("mcp-hangar", "ready_s"), True))
    lines.append(
        ("launch to first hangar_call (s)", None, meta("hangar", "first_call_s"), meta("mcp-hangar", "first_call_s"), True)
    )

    info = next((r for r in rows if r.get("kind") == "run"), {})
    print(
        f"hangar {info.get('hangar_rev', '?')} vs mcp-hangar {info.get('mcp_hangar_version', '?')}"
        f" (event store {'on' if info.get('mcp_hangar_event_store') else 'off'});"
        f" {info.get('cpus', '?')} CPUs; {'quick' if info.get('quick') else 'full'} run {info.get('run', '')}"
    )
    print()
    header = ("metric", "stdio floor", "hangar", "mcp-hangar", "hangar wins by", "hangar/floor", "mcp-hangar/floor")
    table = [header]
    run = next((r.get("run") for r in rows if r.get("run")), None)
    with open(results, "a") as out:
        for metric, floor, ours, theirs, lower in lines:
            # "wins by": mcp-hangar / hangar where lower is better, hangar / mcp-hangar where higher is.
            wins = _ratio(theirs, ours) if lower else _ratio(ours, theirs)
            if metric.startswith("errors"):
                wins = None
            vs_ours, vs_theirs = _ratio(ours, floor), _ratio(theirs, floor)
            table.append(
                (
                    metric,
                    _fmt(floor),
                    _fmt(ours),
                    _fmt(theirs),
                    _fmt(wins, "x"),
                    _fmt(vs_ours, "x"),
                    _fmt(vs_theirs, "x"),
                )
            )
            out.write(
                json.dumps(
                    {
                        "kind": "ratio",
                        "run": run,
                        "metric": metric,
                        "floor": floor,
                        "hangar": ours,
                        "mcp_hangar": theirs,
                        "hangar_advantage": wins,
                        "hangar_over_floor": vs_ours,
                        "mcp_hangar_over_floor": vs_theirs,
                        "lower_is_better": lower,
                    }
                )
                + "\n"
            )
    _print_table(table)
    print()
    print("hangar wins by: mcp-hangar/hangar for times and memory, hangar/mcp-hangar for calls/s.")
    print("x/floor: the gateway's figure over the direct stdio client's (times: how many times slower;")
    print("calls/s: the fraction of the floor's rate the gateway reaches).")
    _cross_check(results, run, bench)


def _cross_check(results, run, bench):
    """The second table: ours measured by hangar-bench and by wrk, and how far the two agree."""
    # (metric, workload, field): p50 on one connection, calls/s on 8.
    metrics = []
    for title, suffix in (("hangar_call", ""), ("front-door tools/call", "-front-door")):
        metrics.append((f"{title} p50, 1 connection (ms)", "latency" + suffix, "p50_ms"))
        metrics.append((f"{title}, 8 connections (calls/s)", "throughput" + suffix, "calls_per_s"))
    table = [("metric (hangar)", "hangar-bench", "wrk", "wrk/hangar-bench")]
    with open(results, "a") as out:
        for metric, workload, field in metrics:
            ours = bench("hangar", workload, field)
            theirs = bench("hangar", workload, field, "wrk")
            agreement = _ratio(theirs, ours)
            table.append((metric, _fmt(ours), _fmt(theirs), _fmt(agreement, "x")))
            row = {"kind": "agreement", "run": run, "metric": metric, "hangar_bench": ours, "wrk": theirs}
            out.write(json.dumps({**row, "wrk_over_hangar_bench": agreement}) + "\n")
        # The front door against hangar_call, by each tool (issue 12's target: calls/s within 5 %,
        # p50 no higher).
        for metric, workload, field in (
            ("front door/hangar_call, calls/s", "throughput", "calls_per_s"),
            ("front door/hangar_call, p50", "latency", "p50_ms"),
        ):
            by_tool = [
                _ratio(bench("hangar", workload + "-front-door", field, g), bench("hangar", workload, field, g))
                for g in ("hangar-bench", "wrk")
            ]
            table.append((metric, _fmt(by_tool[0], "x"), _fmt(by_tool[1], "x"), ""))
            row = {"kind": "agreement", "run": run, "metric": metric, "hangar_bench": by_tool[0], "wrk": by_tool[1]}
            out.write(json.dumps(row) + "\n")
    print()
    _print_table(table)
    print()
    print("wrk: one thread, keep-alive connections, each answer checked for the echoed text; its p50 is")
    print("over a fixed time, hangar-bench's over a fixed count. wrk/hangar-bench near 1.00x: the two agree.")


def _spread(values, digits):
    values = sorted(values)
    if not values:
        return "-"
    median = values[len(values) // 2] if len(values) % 2 else sum(values[len(values) // 2 - 1 : len(values) // 2 + 1]) / 2
    if len(values) == 1:
        return f"{median:,.{digits}f}"
    return f"{median:,.{digits}f} [{values[0]:,.{digits}f}-{values[-1]:,.{digits}f}]"


def auth_report(results):
    rows = [json.loads(line) for line in open(results) if line.strip()]

    def pick(generator, auth, connections):
        found = [r for r in rows if r["generator"] == generator and r["auth"] == auth and r["connections"] == connections]
        return sorted(found, key=lambda r: int(r["round"]))

    generators = ("hangar-bench", "wrk")
    print("| generator | auth | rounds | 8 conns calls/s | 8 conns p50 ms | 1 conn calls/s | 1 conn p50 ms |")
    print("|---|---|---|---:|---:|---:|---:|")
    for generator in generators:
        for auth in ("none", "key", "token"):
            eight, one = pick(generator, auth, "8"), pick(generator, auth, "1")
            if not eight and not one:
                continue
            print(
                f"| {generator} | {auth} | {max(len(eight), len(one))} "
                f"| {_spread([r['calls_per_s'] for r in eight], 0)} | {_spread([r['p50_ms'] for r in eight], 3)} "
                f"| {_spread([r['calls_per_s'] for r in one], 0)} | {_spread([r['p50_ms'] for r in one], 3)} |"
            )
    print()
    print("token/key, round by round (calls/s: below 1.00 is a loss; p50: above 1.00 is slower):")
    print()
    print("| generator | 8 conns calls/s | 8 conns p50 | 1 conn calls/s | 1 conn p50 |")
    print("|---|---:|---:|---:|---:|")
    for generator in generators:
        cells = []
        for connections in ("8", "1"):
            key, token = pick(generator, "key", connections), pick(generator, "token", connections)
            for field in ("calls_per_s", "p50_ms"):
                ratios = [t[field] / k[field] for k, t in zip(key, token) if k[field]]
                cells.append(_spread(ratios, 3) + "x" if ratios else "-")
        print(f"| {generator} | " + " | ".join(cells) + " |")


def _print_table(table):
    widths = [max(len(str(row[i])) for row in table) for i in range(len(table[0]))]
    for n, row in enumerate(table):
        cells = [str(c).ljust(widths[0]) if i == 0 else str(c).rjust(widths[i]) for i, c in enumerate(row)]
        print("  ".join(cells))
        if n == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:] or ["help"]
    handlers = {"free-port": free_port, "first-call": first_call, "rss": rss, "cpu-busy": cpu_busy, "add-row": add_row, "wrk": wrk, "wrk-interleaved": wrk_interleaved, "report": report, "auth-report": auth_report}
    if cmd not in handlers:
        sys.exit(__doc__)
    handlers[cmd](*rest)
