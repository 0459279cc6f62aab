//! Processes the suite runs: a whole hangar (supervisor, API, prober) on a temp config, and the
//! resident memory of its own processes read from /proc.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hyper::Method;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::http::{self, Endpoint};

/// The hangar's own binaries (the API, the prober, and the supervisor's two guardian copies,
/// which name themselves `hangar-guardian`): the processes whose memory counts as the hangar's.
/// Everything else under it is an upstream.
const HANGAR_PROGRAMS: [&str; 3] = ["hangar-api", "hangar-prober", "hangar-guardian"];

/// A free loopback port: bound with port 0, read back, released for the hangar to take.
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// A running hangar, stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Hangar {
    child: Child,
    dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT/mcp`
    pub mcp: Endpoint,
    /// When the supervisor was spawned.
    pub launched: Instant,
}

impl Hangar {
    /// Writes `yaml` and spawns the supervisor on it; does not wait for anything.
    pub fn launch(supervisor: &Path, yaml: &str) -> anyhow::Result<Hangar> {
        let dir = tempfile::Builder::new().prefix("hangar-bench-").tempdir()?;
        let config = dir.path().join("hangar.yaml");
        std::fs::write(&config, yaml)?;
        let port = free_port()?;
        let log = std::fs::File::create(dir.path().join("hangar.log"))?;
        let launched = Instant::now();
        let child = Command::new(supervisor)
            .arg("--config")
            .arg(&config)
            .arg("--socket")
            .arg(dir.path().join("supervisor.sock"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            // Its journal in its own directory, gone with it.
            .env("STATE_DIRECTORY", dir.path().join("state"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot run {}", supervisor.display()))?;
        let mcp = Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp"))?;
        Ok(Hangar { child, dir, mcp, launched })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn endpoint(&self, path: &str) -> anyhow::Result<Endpoint> {
        self.mcp.with_path(path)
    }

    /// The end of the hangar's log, for error messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("hangar.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Polls `GET /health/ready` every millisecond until it answers 200; the time since launch.
    pub async fn wait_ready(&mut self, limit: Duration) -> anyhow::Result<Duration> {
        let ready = self.endpoint("/health/ready")?;
        let deadline = self.launched + limit;
        loop {
            if let Ok(answer) = http::once(&ready, Method::GET, &[], bytes::Bytes::new()).await
                && answer.status() == 200
            {
                return Ok(self.launched.elapsed());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("the supervisor exited ({status}) before it was ready; its log ends:\n{}", self.log_tail());
            }
            if Instant::now() > deadline {
                bail!("/health/ready did not answer 200 within {limit:?}; the log ends:\n{}", self.log_tail());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

impl Drop for Hangar {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(i32::MAX));
            let _ = kill(pid, Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Resident memory of a hangar: its own processes, and separately the upstreams it runs.
#[derive(Debug, Default)]
pub struct Footprint {
    /// The supervisor plus its API, prober and guardians, in KiB.
    pub hangar_kib: u64,
    /// Each of those, by program name (the supervisor itself first).
    pub parts: Vec<(String, u64)>,
    pub upstreams: usize,
    /// Every upstream and whatever it spawned, in KiB.
    pub upstream_kib: u64,
}

struct ProcInfo {
    ppid: u32,
    program: String,
    rss_kib: u64,
}

/// Reads every process's parent, program name (argv[0]'s file name) and VmRSS.
fn scan() -> HashMap<u32, ProcInfo> {
    let mut procs = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return procs };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { continue };
        let field = |name: &str| {
            status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.split_whitespace().next()?.parse().ok())
        };
        let Some(ppid) = field("PPid:") else { continue };
        // Kernel threads and zombies have no VmRSS line.
        let rss_kib = field("VmRSS:").unwrap_or(0);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        let program = PathBuf::from(String::from_utf8_lossy(argv0).into_owned())
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        procs.insert(pid, ProcInfo { ppid: u32::try_from(ppid).unwrap_or(0), program, rss_kib });
    }
    procs
}

/// The footprint of the hangar whose supervisor is `supervisor`.
pub fn footprint(supervisor: u32) -> Footprint {
    let procs = scan();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (pid, info) in &procs {
        children.entry(info.ppid).or_default().push(*pid);
    }
    let mut out = Footprint::default();
    if let Some(me) = procs.get(&supervisor) {
        out.hangar_kib += me.rss_kib;
        out.parts.push((me.program.clone(), me.rss_kib));
    }
    let mut direct = children.get(&supervisor).cloned().unwrap_or_default();
    direct.sort_unstable();
    for pid in direct {
        let Some(info) = procs.get(&pid) else { continue };
        if HANGAR_PROGRAMS.contains(&info.program.as_str()) {
            out.hangar_kib += info.rss_kib;
            out.parts.push((info.program.clone(), info.rss_kib));
        } else {
            out.upstreams += 1;
            // The upstream and everything below it.
            let mut stack = vec![pid];
            while let Some(p) = stack.pop() {
                out.upstream_kib += procs.get(&p).map_or(0, |i| i.rss_kib);
                stack.extend(children.get(&p).into_iter().flatten());
            }
        }
    }
    out
}
