//! A hangar of one's own for a while: what `hangar run` and `hangar check --start` start on a
//! config, each in a private temporary directory (its state directory, control socket and
//! generated files, mode 0700), so any number run at once on one machine without meeting.
//!
//! - **The port.** This process binds the API's socket on a free loopback port itself and hands
//!   the listening socket down (the supervisor's standard input, `--api-listener-stdin`, which
//!   it gives each API instance it starts), so no other process can take the port between a
//!   probe and a bind.
//! - **The key.** With `auth` configured, a random admin key of the run's own (`hangar-run`),
//!   given to the supervisor by its hash only (`--run-key-hash`); the config is not changed.
//! - **Teardown.** [`Ephemeral::stop`] (or dropping it) stops the supervisor with SIGTERM, the
//!   stop in order that takes every upstream and descendant with it, SIGKILL after
//!   [`STOP_WAIT`]. If this process dies first, however it dies, the kernel tells the supervisor
//!   (`--exit-with-parent`), which then stops the same way; the guardians cover a supervisor
//!   killed outright.

use std::fs::File;
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hangar_core::record::{DeadRecord, ServerDetails};
use hangar_core::terminal::visible;
use sha2::{Digest, Sha256};

use crate::client::{Api, segment};
use crate::error::CliError;

/// How long the API may take to answer after the supervisor starts.
const READY_WAIT: Duration = Duration::from_secs(30);
/// How long a stop in order may take before the supervisor is killed.
pub const STOP_WAIT: Duration = Duration::from_secs(30);
/// How many of a failed server's last log lines are shown.
pub const LOG_TAIL: usize = 20;

/// A running hangar of this process's own.
pub struct Ephemeral {
    dir: tempfile::TempDir,
    supervisor: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The run's admin key, when `auth` is configured.
    pub key: Option<String>,
    pub api: Api,
}

/// How one server's start went.
pub struct Started {
    pub id: String,
    pub ready: bool,
    /// The dead record's short form, for one that did not become ready.
    pub dead: Option<String>,
    pub tools: Vec<String>,
    pub took: Duration,
}

impl Ephemeral {
    /// Starts a hangar on `config` and waits until its API answers; `auth` says whether the
    /// config configures authentication (then the run has a key of its own).
    pub fn start(config: &Path, auth: bool) -> Result<Ephemeral, CliError> {
        let dir = private_dir()?;
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|err| setup("cannot bind a loopback port", &err))?;
        let port = listener.local_addr().map_err(|err| setup("cannot read the bound port", &err))?.port();
        let url = format!("http://127.0.0.1:{port}");
        let key = if auth { Some(random_key()?) } else { None };
        let log = File::create(dir.path().join("hangar.log")).map_err(|err| setup("cannot create the log", &err))?;
        let log_err = log.try_clone().map_err(|err| setup("cannot create the log", &err))?;
        let mut command = Command::new(sibling("hangar-supervisor"));
        command
            .arg("--config")
            .arg(config)
            .arg("--socket")
            .arg(dir.path().join("s.sock"))
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .args(["--api-listener-stdin", "--exit-with-parent", "--log-format", "human"])
            .arg("--run-dir")
            .arg(dir.path())
            .stdin(Stdio::from(OwnedFd::from(listener)))
            .stdout(log)
            .stderr(log_err)
            // Its own group: a Ctrl-C at this terminal reaches it only as this run decides.
            .process_group(0);
        if let Some(key) = &key {
            command.arg("--run-key-hash").arg(hash_of(key));
        }
        let supervisor = command.spawn().map_err(|err| setup("cannot start hangar-supervisor", &err))?;
        let api = Api::new(&url, key.clone());
        let mut ephemeral = Ephemeral { dir, supervisor: Some(supervisor), url, key, api };
        ephemeral.wait_until_answering()?;
        Ok(ephemeral)
    }

    /// The run's private directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The supervisor's and API's own log (never an upstream's words: those are its servers' logs).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("hangar.log")).unwrap_or_default()
    }

    /// Until `GET /api/whoami` answers 200, or the supervisor exits (its log then says why).
    fn wait_until_answering(&mut self) -> Result<(), CliError> {
        let deadline = Instant::now() + READY_WAIT;
        loop {
            if let Some(child) = &mut self.supervisor
                && let Ok(Some(status)) = child.try_wait()
            {
                self.supervisor = None;
                return Err(CliError::HangarExited { status: status.code(), log: tail(&self.log(), 30) });
            }
            if self.api.get_raw("/api/whoami").is_ok_and(|answer| answer.status == 200) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(CliError::Local(format!(
                    "the hangar's API did not answer within {} s; its log:\n{}",
                    READY_WAIT.as_secs(),
                    tail(&self.log(), 30)
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every configured server's id, in config order.
    pub fn servers(&self) -> Result<Vec<String>, CliError> {
        let list = self.api.get("/api/mcp_servers")?;
        let servers = list.body["mcp_servers"].as_array().cloned().unwrap_or_default();
        Ok(servers.iter().filter_map(|s| s["mcp_server_id"].as_str().map(str::to_owned)).collect())
    }

    /// Starts each of `ids` (all at once) and waits for each to be ready or dead.
    pub fn start_servers(&self, ids: &[String]) -> Vec<Started> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = ids.iter().map(|id| scope.spawn(move || self.start_one(id))).collect();
            handles.into_iter().zip(ids).map(|(handle, id)| handle.join().unwrap_or_else(|_| failed(id))).collect()
        })
    }

    fn start_one(&self, id: &str) -> Started {
        let began = Instant::now();
        let answer = self.api.post_raw(&format!("/api/mcp_servers/{}/start", segment(id)));
        let took = began.elapsed();
        let details = self.details(id);
        let ready = answer.as_ref().is_ok_and(|a| a.status < 400)
            && details.as_ref().is_some_and(|d| d.state == hangar_core::lifecycle::State::Ready);
        let dead = match (&details, &answer) {
            (Some(ServerDetails { dead: Some(dead), .. }), _) => Some(short(dead)),
            _ if ready => None,
            (_, Ok(answer)) => Some(answer.body["error"]["message"].as_str().unwrap_or("did not start").to_owned()),
            (_, Err(err)) => Some(err.to_string()),
        };
        let tools = details.map(|d| d.tools.into_iter().map(|t| t.name).collect()).unwrap_or_default();
        Started { id: id.to_owned(), ready, dead, tools, took }
    }

    /// One server's record, if it can be read.
    pub fn details(&self, id: &str) -> Option<ServerDetails> {
        let answer = self.api.get(&format!("/api/mcp_servers/{}", segment(id))).ok()?;
        serde_json::from_value(answer.body).ok()
    }

    /// The last `lines` lines `id` printed, shown visibly (an upstream's words on a terminal).
    pub fn log_tail(&self, id: &str, lines: usize) -> Vec<String> {
        let path = format!("/api/mcp_servers/{}/logs?lines={lines}", segment(id));
        let Ok(answer) = self.api.get(&path) else { return Vec::new() };
        let logs = answer.body["logs"].as_array().cloned().unwrap_or_default();
        logs.iter().filter_map(|line| line["content"].as_str()).map(|text| visible(text).into_owned()).collect()
    }

    /// Stops the hangar (SIGTERM, a stop in order; SIGKILL after [`STOP_WAIT`]) and waits for it.
    pub fn stop(&mut self) {
        let Some(mut child) = self.supervisor.take() else { return };
        let group = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + STOP_WAIT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
    }

    /// The state directory (the journal), once stopped.
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }
}

impl Drop for Ephemeral {
    fn drop(&mut self) {
        self.stop();
    }
}

fn failed(id: &str) -> Started {
    Started {
        id: id.to_owned(),
        ready: false,
        dead: Some("its start failed".into()),
        tools: Vec::new(),
        took: Duration::ZERO,
    }
}

fn short(dead: &DeadRecord) -> String {
    dead.short()
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn setup(what: &str, err: &std::io::Error) -> CliError {
    CliError::Local(format!("{what}: {err}"))
}

/// A private directory for the run: under `$XDG_RUNTIME_DIR` when there is one, else the
/// system's temporary directory; 0700, removed when the run ends.
fn private_dir() -> Result<tempfile::TempDir, CliError> {
    let base = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|dir| dir.is_dir());
    let mut builder = tempfile::Builder::new();
    builder.prefix("hangar-run-");
    let made = match base {
        Some(base) => builder.tempdir_in(base),
        None => builder.tempdir(),
    };
    made.map_err(|err| setup("cannot make a private temporary directory", &err))
}

/// 256 random bits, hex: the run's API key.
fn random_key() -> Result<String, CliError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|err| CliError::Local(format!("no randomness for the run's key: {err}")))?;
    Ok(format!("hangar-run-{}", hex(&bytes)))
}

/// `sha256:<hex>` of `key`, as the config writes a key's hash.
fn hash_of(key: &str) -> String {
    format!("sha256:{}", hex(&Sha256::digest(key.as_bytes())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A hangar binary beside this one (cargo and the packages put them together), else on `PATH`.
pub fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(name)))
        .filter(|path| path.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}
