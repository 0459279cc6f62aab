//! The end-to-end harness: start a real hangar from a YAML string, talk to it over REST and MCP
//! exactly as a user would, keep every response body read, and kill any process on demand.
//!
//! Every wait is a bounded poll for a condition ([`poll`]); nothing sleeps blindly. Every port
//! is chosen by the kernel (the API binds port 0 and prints the address it got), so two test
//! runs never meet.
//!
//! A test the machine cannot run says so through [`skip`], which fails it under `CI=true` unless
//! `HANGAR_TEST_SKIP` names it. With `HANGAR_TEST_TIMES` set, each test's wall time is recorded
//! (`timing.rs`) for the time per story file `scripts/test` reports.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::missing_panics_doc)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hangar_core::sync::Unpoisoned;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

pub use serde_json;

mod reachable;
mod skip;
mod timing;
pub use reachable::Reachable;
pub use skip::{SKIP_VAR, skip};
pub use timing::TIMES_VAR;

/// The fake upstream's default sentinel: no read surface may ever repeat it.
pub const SENTINEL: &str = "HANGAR-FAKE-SENTINEL-0xC0FFEE";

/// The modern MCP revision.
pub const MODERN: &str = "2026-07-28";

/// A built binary of the workspace. The test command builds them all first (`scripts/test`).
/// `hangar-guardian` is the static build installs ship (`scripts/build-guardian`, which
/// scripts/test runs; required under `CI`), else the glibc one beside the supervisor.
pub fn bin(name: &str) -> PathBuf {
    timing::note();
    // target/<profile>/deps/<this test> -> target/<profile>/<name>
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(Path::parent).expect("target directory");
    if name == "hangar-guardian" {
        let profile = dir.file_name().expect("a profile directory");
        let target = format!("{}-unknown-linux-musl", std::env::consts::ARCH);
        let built = dir.parent().expect("target directory").join(target).join(profile).join(name);
        if built.exists() {
            return built;
        }
        assert!(std::env::var_os("CI").is_none(), "{} is not built; scripts/test builds it", built.display());
    }
    let path = dir.join(name);
    assert!(path.exists(), "{} is not built; run `cargo build --workspace --bins` (scripts/test does)", path.display());
    path
}

/// The repository's root (the tests crate sits one level below it).
pub fn repo_root() -> PathBuf {
    timing::note();
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("repo root").to_path_buf()
}

/// The Python with the `mcp` package that `scripts/setup-tools` installs.
pub fn python() -> PathBuf {
    let python = repo_root().join(".tools/venv/bin/python");
    assert!(python.exists(), "{} is missing; run scripts/setup-tools (scripts/test does)", python.display());
    python
}

/// A loopback port nobody answers on, for a server that cannot bind port 0 (a managed HTTP
/// upstream's endpoint is configured before it starts), checked by the same preflight the hangar
/// uses: a test never runs against a held port.
///
/// It is taken below the kernel's ephemeral range (`ip_local_port_range`), which every bind to
/// port 0 and every outgoing connection on the machine draws from: otherwise, between the moment
/// a port is chosen and the moment its server binds it (or between a stop and the next start),
/// another test's API could be given the same port, and the next start would find it held. Never
/// the same port twice in one test process.
pub fn free_port() -> u16 {
    timing::note();
    static TAKEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const LOWEST: u16 = 15_000;
    let span = ephemeral_low.saturating_sub(LOWEST);
    let mut taken = TAKEN.locked();
    for attempt in 0..400u64 {
        let port = if span >= 1000 {
            // A different start per process and attempt, so test binaries run side by side
            // rarely try the same ports.
            use std::hash::BuildHasher;
            let draw = std::collections::hash_map::RandomState::new().hash_one((std::process::id(), attempt));
            LOWEST + (draw % u64::from(span)) as u16
        } else {
            // An unusual range leaves no room below it: let the kernel choose.
            match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
                Ok(addr) => addr.port(),
                Err(_) => continue,
            }
        };
        let bindable = std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
        if bindable
            && !taken.contains(&port)
            && hangar_core::preflight::check_free(&format!("http://localhost:{port}/")).is_ok()
        {
            taken.push(port);
            return port;
        }
    }
    panic!("no free loopback port after 400 tries");
}

/// A child process killed (SIGKILL) and reaped when dropped: leftovers and fixtures a test runs.
pub struct Background {
    pub child: Child,
}

/// For a `hangar-supervisor` run directly: a state directory of its own (`STATE_DIRECTORY`)
/// beside its `--socket` (in the test's temp dir), so parallel tests never share a journal.
fn own_state_dir(program: &Path, args: &[&str], command: &mut Command) {
    if program.file_name().is_some_and(|name| name == "hangar-supervisor")
        && let Some(socket) = args.iter().position(|a| *a == "--socket").and_then(|i| args.get(i + 1))
    {
        command.env("STATE_DIRECTORY", format!("{socket}.state"));
    }
}

impl Background {
    /// Runs `program args...`, and waits (bounded) until it prints a line containing `ready_marker`.
    pub fn start(program: &Path, args: &[&str], ready_marker: &str) -> Background {
        let mut command = Command::new(program);
        own_state_dir(program, args, &mut command);
        let mut child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {}: {err}", program.display()));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        let marker = ready_marker.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains(&marker) {
                    let _ = tx.send(());
                }
            }
        });
        let background = Background { child };
        if rx.recv_timeout(Duration::from_secs(20)).is_err() {
            panic!("{} never said {ready_marker:?}", program.display());
        }
        background
    }

    /// Runs a command that does not announce itself; the caller polls for what it needs.
    pub fn spawn(program: &Path, args: &[&str]) -> Background {
        let mut command = Command::new(program);
        own_state_dir(program, args, &mut command);
        let child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {}: {err}", program.display()));
        Background { child }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Another `hangar-api` on a running hangar's socket (e.g. one with `--api-keys`), killed and
/// reaped when dropped.
pub struct ExtraApi {
    child: Child,
    /// `127.0.0.1:PORT`
    pub addr: String,
}

impl Drop for ExtraApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address (`127.0.0.1:PORT`) a `hangar-api` child prints on its first line, `hangar-api
/// listening on http://ADDRESS`, waiting (bounded) for it. Takes the child's piped stdout.
pub fn api_listening_address(child: &mut Child) -> String {
    let stdout = child.stdout.take().expect("the API's stdout is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(20)).expect("no listening line");
    line.trim().strip_prefix("hangar-api listening on http://").unwrap_or_else(|| panic!("{line:?}")).to_owned()
}

/// Polls `check` every 20 ms until it returns `Some`, or panics naming `what` after `limit`.
pub fn poll<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    timing::note();
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state letter follows the command name in parentheses.
    stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z'))
}

/// The live children of `parent` whose command line contains `name`.
pub fn children_named(parent: u32, name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat.rsplit_once(") ").and_then(|(_, rest)| rest.split(' ').nth(1)?.parse::<u32>().ok());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains(name) && alive(*pid)
        })
        .collect()
}

/// A `/proc/<pid>/status` memory field in KiB: `VmRSS` (resident now) or `VmHWM` (the peak
/// resident size since the process started).
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let value = status.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?;
    value.trim().strip_suffix("kB")?.trim().parse().ok()
}

/// SIGKILLs one process.
pub fn sigkill(pid: u32) {
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
}

/// A process frozen with SIGSTOP (its sockets still accept connections: the kernel completes
/// them) until this is dropped, which sends SIGCONT, so a failing test leaves nothing stopped.
pub struct Frozen(Pid);

impl Frozen {
    /// Stops `pid`, waiting until it is stopped (`T` in `/proc/<pid>/stat`).
    pub fn stop(pid: u32) -> Frozen {
        let frozen = Frozen(Pid::from_raw(pid as i32));
        kill(frozen.0, Signal::SIGSTOP).unwrap();
        poll(&format!("process {pid} to stop"), Duration::from_secs(10), || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('T')).then_some(())
        });
        frozen
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGCONT);
    }
}

/// Reads a pid file written by the fake (`--pid-file`), waiting for it to appear.
pub fn read_pid(path: &Path) -> u32 {
    poll(&format!("pid file {}", path.display()), Duration::from_secs(10), || {
        std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok())
    })
}

/// A response: status and parsed JSON body (`Value::Null` when the body is not JSON).
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub text: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A running hangar: supervisor, prober and API, on a temp socket and a kernel-chosen port.
pub struct Hangar {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    supervisor: Child,
    agent: ureq::Agent,
    bodies: Arc<Mutex<Vec<String>>>,
    exited: Option<ExitStatus>,
    /// The copies another user runs, kept while the hangar runs (see [`Reachable`]).
    reachable: Option<Reachable>,
}

impl Hangar {
    /// Starts a hangar on `yaml`, in which `{fake}` stands for the fake upstream's path and
    /// `{dir}` for the test's temp directory. Returns once `/health/ready` answers 200.
    pub fn start(yaml: &str) -> Hangar {
        Hangar::start_with(yaml, &[])
    }

    /// Starts a hangar whose API listens on `listen` (e.g. `127.0.0.1:PORT`), after the port
    /// preflight: a held port is refused, and nothing runs against it.
    pub fn start_on(yaml: &str, listen: &str) -> Result<Hangar, hangar_core::preflight::PreflightError> {
        hangar_core::preflight::check_free_addr(listen)?;
        Ok(Hangar::start_with(yaml, &["--listen", listen]))
    }

    pub fn start_with(yaml: &str, extra_args: &[&str]) -> Hangar {
        Hangar::start_with_env(yaml, extra_args, &[])
    }

    /// As [`Hangar::start`], with `{fake}` and `{fixtures}` standing for copies every user can
    /// reach ([`Reachable`]): for a config whose boxes run as another user (`sandbox.user`),
    /// wherever the clone lives (a 0700 home included). The fixtures' copies lie outside `/tmp`,
    /// so a box's private `/tmp` does not show them.
    pub fn start_reachable(yaml: &str) -> Hangar {
        let reachable = Reachable::get();
        let dir = Hangar::write_config(&reachable.fill(yaml));
        Hangar::launch(dir, &[], &[], None, Some(reachable))
    }

    /// As [`Hangar::start_with`], with `env` set for the supervisor (and the helpers it starts).
    pub fn start_with_env(yaml: &str, extra_args: &[&str], env: &[(&str, &str)]) -> Hangar {
        let dir = Hangar::write_config(yaml);
        Hangar::launch(dir, extra_args, env, None, None)
    }

    /// As [`Hangar::start`], with the supervisor (and so everything it starts) running as the
    /// unprivileged `uid`/`gid` (`setpriv`, no supplementary groups): how a hangar without root
    /// behaves. Its temp dir is handed to that user, so its journal, socket and config are its own;
    /// the binaries it runs and `{fake}` and `{fixtures}` are copies that user can reach
    /// ([`Reachable`]), wherever the clone lives.
    pub fn start_as_user(yaml: &str, uid: u32, gid: u32) -> Hangar {
        Hangar::start_as_user_with_env(yaml, uid, gid, &[])
    }

    /// As [`Hangar::start_as_user`], with `env` set for the supervisor.
    pub fn start_as_user_with_env(yaml: &str, uid: u32, gid: u32, env: &[(&str, &str)]) -> Hangar {
        Hangar::start_as_user_with(yaml, uid, gid, &[], env, "")
    }

    /// As [`Hangar::start_as_user`], keeping `caps` (setpriv's names, e.g. `setuid,setgid`) as
    /// ambient capabilities: how the shipped systemd unit runs it (`User=hangar`,
    /// `AmbientCapabilities=`).
    pub fn start_as_user_with_caps(yaml: &str, uid: u32, gid: u32, caps: &str) -> Hangar {
        Hangar::start_as_user_with(yaml, uid, gid, &[], &[], caps)
    }

    /// As [`Hangar::start_as_user`], with `extra_args` for the supervisor (`--socket PATH` in a
    /// directory the user may write, say).
    pub fn start_as_user_with_args(yaml: &str, uid: u32, gid: u32, extra_args: &[&str]) -> Hangar {
        Hangar::start_as_user_with(yaml, uid, gid, extra_args, &[], "")
    }

    fn start_as_user_with(
        yaml: &str,
        uid: u32,
        gid: u32,
        extra_args: &[&str],
        env: &[(&str, &str)],
        caps: &str,
    ) -> Hangar {
        let reachable = Reachable::get();
        let dir = Hangar::write_config(&reachable.fill(yaml));
        for path in [dir.path().to_path_buf(), dir.path().join("hangar.yaml")] {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid)).expect("hand the temp dir to the user");
        }
        Hangar::launch(dir, extra_args, env, Some((uid, gid, caps)), Some(reachable))
    }

    /// A temp dir holding `yaml` as `hangar.yaml`, its placeholders filled in.
    fn write_config(yaml: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("hangar.yaml");
        let yaml = yaml
            .replace("{fake}", &bin("hangar-upstream-fake").display().to_string())
            .replace("{fixtures}", &repo_root().join("tests/fixtures").display().to_string());
        let yaml =
            if yaml.contains("{python}") { yaml.replace("{python}", &python().display().to_string()) } else { yaml };
        let yaml = yaml.replace("{dir}", &dir.path().display().to_string());
        std::fs::write(&config, yaml).expect("write config");
        dir
    }

    /// Runs a hangar on the config already in `dir` (`hangar.yaml`), keeping its journal there;
    /// as `user` (uid, gid) when given, its binaries then taken from `reachable`.
    fn launch(
        dir: tempfile::TempDir,
        extra_args: &[&str],
        env: &[(&str, &str)],
        user: Option<(u32, u32, &str)>,
        reachable: Option<Reachable>,
    ) -> Hangar {
        let config = dir.path().join("hangar.yaml");
        // `--socket PATH` among the extra arguments puts the control socket there instead.
        let named = extra_args.iter().position(|arg| *arg == "--socket").and_then(|at| extra_args.get(at + 1));
        let socket = named.map_or_else(|| dir.path().join("supervisor.sock"), PathBuf::from);
        let log =
            std::fs::File::options().create(true).append(true).open(dir.path().join("hangar.log")).expect("log file");
        let mut command = match user {
            // setpriv execs the supervisor: the child's pid is the supervisor's.
            Some((uid, gid, caps)) => {
                let mut command = Command::new("setpriv");
                command.arg(format!("--reuid={uid}")).arg(format!("--regid={gid}")).arg("--clear-groups");
                if !caps.is_empty() {
                    let raised = caps.split(',').map(|cap| format!("+{cap}")).collect::<Vec<_>>().join(",");
                    command.arg(format!("--inh-caps={raised}")).arg(format!("--ambient-caps={raised}"));
                }
                let reachable = reachable.as_ref().expect("a hangar run as another user runs reachable copies");
                // Its helpers beside it, where it looks for them.
                for helper in ["hangar-api", "hangar-prober", "hangar-guardian"] {
                    reachable.bin(helper);
                }
                command.arg("--").arg(reachable.bin("hangar-supervisor")).env("HOME", dir.path());
                command
            }
            None => {
                let mut command = Command::new(bin("hangar-supervisor"));
                command.arg("--guardian").arg(bin("hangar-guardian"));
                command
            }
        };
        let mut supervisor = command
            .arg("--config")
            .arg(&config)
            .args(if named.is_some() { Vec::new() } else { vec![std::ffi::OsStr::new("--socket"), socket.as_os_str()] })
            .args(if extra_args.contains(&"--listen") { &[][..] } else { &["--listen", "127.0.0.1:0"][..] })
            .args(extra_args)
            .env("HANGAR_LOG", "info,hangar=debug")
            // Each hangar keeps its journal in its own temp dir.
            .env("STATE_DIRECTORY", dir.path().join("state"))
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn hangar-supervisor");
        // The API inherits the supervisor's stdout and prints the address it bound.
        let stdout = supervisor.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("hangar-api listening on ") {
                    let _ = tx.send(addr.trim().to_string());
                }
            }
        });
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let mut hangar = Hangar {
            base: String::new(),
            dir,
            socket,
            supervisor,
            agent,
            bodies: Arc::default(),
            exited: None,
            reachable,
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(base) => hangar.base = base,
            Err(_) => panic!("the API never said where it listens; log:\n{}", hangar.log()),
        }
        poll("/health/ready", Duration::from_secs(30), || (hangar.get("/health/ready").status == 200).then_some(()));
        hangar
    }

    /// The supervisor's pid.
    pub fn pid(&self) -> u32 {
        self.supervisor.id()
    }

    /// A path inside the test's temp dir.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Everything the hangar's processes logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("hangar.log")).unwrap_or_default()
    }

    /// Every response body read through this harness so far.
    pub fn bodies(&self) -> Vec<String> {
        self.bodies.lock().unwrap().clone()
    }

    /// Asserts that no body read so far contains `needle`.
    pub fn assert_no_body_contains(&self, needle: &str) {
        for body in self.bodies() {
            assert!(!body.contains(needle), "a read surface leaked {needle:?}: {body}");
        }
    }

    pub fn get(&self, path: &str) -> Response {
        self.record(self.agent.get(&format!("{}{path}", self.base)).call())
    }

    pub fn delete(&self, path: &str) -> Response {
        self.record(self.agent.delete(&format!("{}{path}", self.base)).call())
    }

    pub fn post(&self, path: &str, body: Option<&Value>) -> Response {
        let request = self.agent.post(&format!("{}{path}", self.base));
        self.record(match body {
            Some(body) => request.send_json(body),
            // The API's cross-site guard refuses a POST that does not say it is JSON, body or not.
            None => request.header("Content-Type", "application/json").send_empty(),
        })
    }

    /// Sends raw bytes to `path` with the given headers.
    pub fn post_raw(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
        let mut request = self.agent.post(&format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.record(request.send(body))
    }

    /// A modern (2026-07-28) JSON-RPC request to `/mcp`, with every header it needs.
    pub fn mcp(&self, method: &str, params: Value) -> Response {
        self.mcp_with(method, params, json!({}), &[])
    }

    /// As [`Hangar::mcp`], with `meta_extra`'s keys added to the request's `_meta` and
    /// `extra_headers` sent too.
    pub fn mcp_with(
        &self,
        method: &str,
        mut params: Value,
        meta_extra: Value,
        extra_headers: &[(&str, &str)],
    ) -> Response {
        if params.is_null() {
            params = json!({});
        }
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "hangar-tests", "version": "0"},
        });
        if let Value::Object(extra) = meta_extra {
            for (key, value) in extra {
                params["_meta"][key] = value;
            }
        }
        // Mcp-Name mirrors what the method names: a resource's uri, else a tool's or prompt's name.
        let named = if method == "resources/read" { params.get("uri") } else { params.get("name") };
        let name = named.and_then(Value::as_str).map(str::to_owned);
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", method),
        ];
        if let Some(name) = &name {
            headers.push(("Mcp-Name", name.as_str()));
        }
        headers.extend_from_slice(extra_headers);
        self.post_raw("/mcp", &headers, body.to_string().as_bytes())
    }

    /// `initialize` of a legacy (2025-11-25) session on the hangar's own API, as a client that
    /// can be asked (sampling, elicitation); the session id.
    pub fn legacy_session(&self) -> String {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"sampling": {}, "elicitation": {}},
            "clientInfo": {"name": "hangar-tests", "version": "0"},
        }});
        let headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
        let answer = self.post_raw("/mcp", &headers, body.to_string().as_bytes());
        answer.header("mcp-session-id").expect("a session id").to_owned()
    }

    /// A legacy (2025-11-25) JSON-RPC request to `/mcp` in `session` (see
    /// [`Hangar::legacy_session`]).
    pub fn legacy(&self, session: &str, method: &str, params: Value) -> Response {
        let headers = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", session),
        ];
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.post_raw("/mcp", &headers, body.to_string().as_bytes())
    }

    /// How many `notifications/cancelled` the upstream `server` has received (the fake logs
    /// each), from its logs.
    pub fn cancellations(&self, server: &str) -> usize {
        cancellations_in(&self.get(&format!("/api/mcp_servers/{server}/logs?lines=1000")).body)
    }

    /// Sends a modern `tools/call` of `tool` (a `sleep` for a minute) on a connection of its own
    /// and returns the open stream, unread: the call stays in flight until the stream is dropped
    /// (which cancels it upstream). `meta_extra` joins the request's `_meta`.
    pub fn open_sleep_call(&self, tool: &str, meta_extra: Value) -> std::net::TcpStream {
        use std::io::Write as _;
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        if let (Some(meta), Some(extra)) = (meta.as_object_mut(), meta_extra.as_object()) {
            meta.extend(extra.clone());
        }
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": tool, "arguments": {"ms": 60000}, "_meta": meta}})
        .to_string();
        let addr = self.base.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(addr).expect("connect to the API");
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send the call");
        stream
    }

    /// Calls a hangar tool over MCP; returns the tool result (`content`, `structuredContent`, `isError`).
    pub fn tool(&self, name: &str, arguments: Value) -> Value {
        let response = self.mcp("tools/call", json!({"name": name, "arguments": arguments}));
        assert_eq!(response.status, 200, "tools/call {name}: {}", response.text);
        let result = response.body.get("result").cloned();
        result.unwrap_or_else(|| panic!("tools/call {name} answered no result: {}", response.text))
    }

    /// The `structuredContent` of a hangar tool that must succeed.
    pub fn tool_ok(&self, name: &str, arguments: Value) -> Value {
        let result = self.tool(name, arguments);
        assert_eq!(result["isError"], json!(false), "{name} failed: {result}");
        let structured = result["structuredContent"].clone();
        // The text content carries the same JSON.
        let text = result["content"][0]["text"].as_str().expect("text content");
        assert_eq!(serde_json::from_str::<Value>(text).expect("text is JSON"), structured);
        structured
    }

    /// `GET /metrics` as text, asserting 200.
    pub fn metrics(&self) -> String {
        let response = self.get("/metrics");
        assert_eq!(response.status, 200, "{}", response.text);
        response.text
    }

    /// The value of one sample in `/metrics`, e.g. `hangar_mcp_server_state{mcp_server="m"}`.
    pub fn metric(&self, sample: &str) -> Option<f64> {
        self.metrics().lines().find_map(|line| line.strip_prefix(sample)?.trim().parse().ok())
    }

    /// The error of a one-call `hangar_call` that must fail: (`error_type`, `error`).
    pub fn call_error(&self, server: &str, tool: &str, arguments: Value) -> (String, String) {
        let batch = self
            .tool_ok("hangar_call", json!({"calls": [{"mcp_server": server, "tool": tool, "arguments": arguments}]}));
        let result = &batch["results"][0];
        assert_eq!(result["success"], false, "expected {server}/{tool} to fail: {batch}");
        (result["error_type"].as_str().unwrap_or_default().into(), result["error"].as_str().unwrap_or_default().into())
    }

    /// The `structuredContent` of a one-call `hangar_call`'s result, or `None` if the call failed.
    pub fn call(&self, server: &str, tool: &str, arguments: Value) -> Option<Value> {
        let batch = self
            .tool_ok("hangar_call", json!({"calls": [{"mcp_server": server, "tool": tool, "arguments": arguments}]}));
        let result = &batch["results"][0];
        (result["success"] == true).then(|| result["result"]["structuredContent"].clone())
    }

    /// `GET /api/mcp_servers/{id}` body, asserting 200.
    pub fn details(&self, id: &str) -> Value {
        let response = self.get(&format!("/api/mcp_servers/{id}"));
        assert_eq!(response.status, 200, "{}", response.text);
        response.body
    }

    /// Starts another `hangar-api` on this hangar's socket with `args` (it listens on a port the
    /// kernel picks) and waits, bounded, until its `/health/ready` answers 200.
    pub fn extra_api(&self, args: &[&std::ffi::OsStr]) -> ExtraApi {
        let mut child = Command::new(bin("hangar-api"))
            .arg("--socket")
            .arg(&self.socket)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn hangar-api");
        let addr = api_listening_address(&mut child);
        let api = ExtraApi { child, addr };
        poll("the extra API to be ready", Duration::from_secs(10), || {
            raw_http(&api.addr, &format!("GET /health/ready HTTP/1.1\r\nHost: {}\r\n", api.addr), b"")
                .ok()
                .filter(|(status, _)| *status == 200)
        });
        api
    }

    /// Sends SIGTERM and waits (bounded) for the supervisor to exit.
    pub fn terminate(&mut self) -> ExitStatus {
        if let Some(status) = self.exited {
            return status;
        }
        let _ = kill(Pid::from_raw(self.supervisor.id() as i32), Signal::SIGTERM);
        let status = poll("the supervisor to exit after SIGTERM", Duration::from_secs(30), || {
            self.supervisor.try_wait().ok().flatten()
        });
        self.exited = Some(status);
        status
    }

    /// `hangar_start` of a dead server once its backoff lets it (an explicit start inside the
    /// backoff is refused with `retry_later`, saying when): the tool result of the start that ran.
    pub fn start_after_backoff(&self, id: &str) -> Value {
        poll(&format!("a start of {id} after its backoff"), Duration::from_secs(30), || {
            let answer = self.tool("hangar_start", json!({"mcp_server": id}));
            (answer["structuredContent"]["error_type"] != "retry_later").then_some(answer)
        })
    }

    fn record(&self, result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Response {
        let mut response = result.unwrap_or_else(|err| panic!("HTTP request failed: {err}"));
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned()))
            .collect();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        self.bodies.lock().unwrap().push(text.clone());
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Response { status, headers, body, text }
    }
}

impl Hangar {
    /// A 2026-07-28 `subscriptions/listen` asking for tool-list changes, as `key` (when given),
    /// answered 200; its event stream, unread. The stream is given `limit` in all.
    pub fn listen_for_tool_changes(&self, key: Option<&str>, limit: Duration) -> impl std::io::Read + Send + 'static {
        let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(limit)).build().into();
        let mut request = agent
            .post(format!("{}/mcp", self.base))
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", MODERN)
            .header("Mcp-Method", "subscriptions/listen");
        if let Some(key) = key {
            request = request.header("Authorization", format!("Bearer {key}"));
        }
        let response = request
            .send_json(json!({
                "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                "params": {
                    "notifications": {"toolsListChanged": true},
                    "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}},
                },
            }))
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response.into_body().into_reader()
    }
}

impl Hangar {
    /// Ends the supervisor with `signal` (SIGTERM: an orderly stop; SIGKILL: no goodbye) and
    /// starts a new one in the same directory, on the same config and the same journal (its
    /// API on a new port). The log goes on in the same file.
    pub fn restart(self, signal: Signal, extra_args: &[&str]) -> Hangar {
        self.restart_after(signal, extra_args, |_| {})
    }

    /// As [`Hangar::restart`], with `meanwhile` run on the hangar's directory while no
    /// supervisor runs (to leave its state as another release would have).
    pub fn restart_after(mut self, signal: Signal, extra_args: &[&str], meanwhile: impl FnOnce(&Path)) -> Hangar {
        let _ = kill(Pid::from_raw(self.supervisor.id() as i32), signal);
        let status =
            poll("the supervisor to exit", Duration::from_secs(30), || self.supervisor.try_wait().ok().flatten());
        self.exited = Some(status);
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir"));
        // Its config may name the copies: they stay for the next supervisor.
        let reachable = self.reachable.take();
        drop(self);
        meanwhile(dir.path());
        Hangar::launch(dir, extra_args, &[], None, reachable)
    }
}

impl Drop for Hangar {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = kill(Pid::from_raw(self.supervisor.id() as i32), Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.supervisor.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.supervisor.kill();
            let _ = self.supervisor.wait();
        }
    }
}

/// The Node.js that runs npm-installed servers: the Node 22 `scripts/setup-tools` installs into
/// `.tools/node22`, else the first `node` on `PATH`.
pub fn node() -> PathBuf {
    let local = repo_root().join(".tools/node22/node_modules/.bin/node");
    if local.exists() {
        return local;
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join("node")).find(|path| path.is_file()))
        .expect("no Node.js: run scripts/setup-tools (scripts/test does) or put `node` on PATH")
}

/// The entry point of `@modelcontextprotocol/server-everything`, which `scripts/setup-clients`
/// installs into `.tools/everything`.
pub fn server_everything() -> PathBuf {
    let script =
        repo_root().join(".tools/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(script.exists(), "{} is missing; run scripts/setup-clients", script.display());
    script
}

/// The entry point of `@modelcontextprotocol/server-filesystem`, which `scripts/setup-clients`
/// installs into `.tools/server-filesystem`.
pub fn server_filesystem() -> PathBuf {
    let script =
        repo_root().join(".tools/server-filesystem/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(script.exists(), "{} is missing; run scripts/setup-clients", script.display());
    script
}

/// The directory of one MCP Apps example server of `@modelcontextprotocol/ext-apps`
/// (`server-basic-vanillajs`, `server-basic-preact`), which `scripts/setup-clients` installs
/// into `.tools/ext-apps`: its `dist/index.js` runs it (`--stdio`), and its `dist/mcp-app.html`
/// is the app it serves.
pub fn ext_apps_server(name: &str) -> PathBuf {
    let dir = repo_root().join(".tools/ext-apps/node_modules/@modelcontextprotocol").join(name);
    assert!(dir.join("dist/index.js").exists(), "{} is missing; run scripts/setup-clients", dir.display());
    dir
}

/// One raw HTTP/1.1 exchange on a fresh connection to `addr` (`127.0.0.1:PORT`), for headers no
/// client library sends as given (a foreign `Host`, none at all): writes `head` (the request line
/// and headers, each line ending in CRLF), `Content-Length` and `Connection: close`, then `body`,
/// and reads until the server closes (10 s read timeout). Gives the status and the rest of the
/// answer (headers and body) as text; `Err` when the connection fails, e.g. is reset.
pub fn raw_http(addr: &str, head: &str, body: &[u8]) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(format!("{head}Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()).as_bytes())?;
    stream.write_all(body)?;
    let mut answer = Vec::new();
    if let Err(err) = stream.read_to_end(&mut answer) {
        // A timeout after a head (an event stream that stays open) still answers with its head.
        if answer.is_empty() || !matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) {
            return Err(err);
        }
    }
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not an HTTP answer: {text:.200}"))
    })?;
    Ok((status, text))
}

/// How many `notifications/cancelled` an upstream's logs (the body of
/// `/api/mcp_servers/ID/logs`) show the fake received.
pub fn cancellations_in(logs: &Value) -> usize {
    logs["logs"].as_array().map_or(0, |lines| {
        lines.iter().filter(|l| l["content"].as_str().is_some_and(|c| c.contains("cancelled request"))).count()
    })
}

/// One legacy (2025-11-25) JSON-RPC POST to `/mcp` on `addr` over [`raw_http`], in `session` when
/// given, with `bearer` as `Authorization: Bearer` when given: the status and the whole answer
/// (head and body).
pub fn legacy_post(
    addr: &str,
    bearer: Option<&str>,
    session: Option<&str>,
    id: u64,
    method: &str,
    params: Value,
) -> (u16, String) {
    let session = session.map(|s| format!("Mcp-Session-Id: {s}\r\n")).unwrap_or_default();
    let bearer = bearer.map(|key| format!("Authorization: Bearer {key}\r\n")).unwrap_or_default();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{session}{bearer}"
    );
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    raw_http(addr, &head, body.to_string().as_bytes()).expect("the API answers")
}

/// Runs `hangar-supervisor args...` (without helpers: `--no-api --no-prober` are added) and
/// returns its exit code and stderr. One still running after a bounded wait (it started, or froze)
/// is killed and reads `None`, so a test of a refusal fails instead of hanging.
pub fn supervisor_exit(args: &[&std::ffi::OsStr], env: &[(&str, Option<&str>)]) -> (Option<i32>, String) {
    let stderr = tempfile::NamedTempFile::new().expect("stderr file");
    let mut command = Command::new(bin("hangar-supervisor"));
    command.args(args).args(["--no-api", "--no-prober"]);
    // A state directory of its own, unless the test names one.
    let state = tempfile::tempdir().expect("state dir");
    command.env("STATE_DIRECTORY", state.path());
    for (key, value) in env {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr.reopen().expect("stderr file"))
        .spawn()
        .expect("spawn hangar-supervisor");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            _ if Instant::now() >= deadline => break None,
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    (status.and_then(|s| s.code()), std::fs::read_to_string(stderr.path()).unwrap_or_default())
}

/// An `auth:` block of API keys, each `(name, key, profile)` (no profile: an admin), for a
/// config's YAML.
pub fn api_keys_yaml(keys: &[(&str, &str, Option<&str>)]) -> String {
    let mut yaml = String::from("auth:\n  api_keys:\n");
    for (name, key, profile) in keys {
        let profile = profile.map_or_else(String::new, |p| format!(", profile: {p}"));
        yaml.push_str(&format!("    - {{name: {name}, hash: \"{}\"{profile}}}\n", key_hash(key)));
    }
    yaml
}

/// The hash an operator configures for `key`: `sha256:<hex>` of its bytes, made with
/// `sha256sum` as the docs tell operators to.
pub fn key_hash(key: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum (coreutils) runs");
    child.stdin.take().expect("stdin").write_all(key.as_bytes()).expect("write to sha256sum");
    let out = child.wait_with_output().expect("sha256sum answers");
    format!("sha256:{}", String::from_utf8_lossy(&out.stdout).split_whitespace().next().expect("a digest"))
}

/// Runs the Python script `tests/fixtures/<script>` with `args` in the tools' venv (bounded,
/// 120 s) and parses the last line it prints as JSON; a failure shows its stderr and the
/// hangar's log.
pub fn python_json(hangar: &Hangar, script: &str, args: &[&str]) -> Value {
    fixture_json(&python(), hangar, script, args)
}

/// As [`python_json`], for a Node script (the tools' Node).
pub fn node_json(hangar: &Hangar, script: &str, args: &[&str]) -> Value {
    fixture_json(&node(), hangar, script, args)
}

fn fixture_json(program: &Path, hangar: &Hangar, script: &str, args: &[&str]) -> Value {
    use std::io::Read;
    let mut child = Command::new(program)
        .arg(repo_root().join("tests/fixtures").join(script))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("run {script}: {err}"));
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let status =
        poll(&format!("{script} {args:?} to finish"), Duration::from_secs(120), || child.try_wait().ok().flatten());
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    assert!(status.success(), "{script} {args:?} failed ({status}):\n{stderr}\nhangar log:\n{}", hangar.log());
    let line = stdout.lines().rfind(|line| !line.trim().is_empty()).unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|err| panic!("{script} {args:?} printed no JSON ({err}): {stdout}"))
}

/// A config with server-everything over streamable HTTP (a legacy upstream) as `everything`,
/// on loopback `port` only (`tests/fixtures/loopback_only.cjs`), behind the front door.
pub fn everything_over_http(port: u16) -> String {
    format!(
        r#"
tool_access: {{mode: front_door}}
mcp_servers:
  everything:
    mode: http
    command: ["{node}", "--require", "{preload}", "{everything}", "streamableHttp"]
    env: {{PORT: "{port}"}}
    endpoint: http://127.0.0.1:{port}/mcp
    handshake_timeout_s: 30
"#,
        node = node().display(),
        preload = repo_root().join("tests/fixtures/loopback_only.cjs").display(),
        everything = server_everything().display(),
    )
}
