//! A running child: reaping it, draining its stderr, following its notices, stopping it.

use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::time::Duration;

use hangar_core::lifecycle::{Event, State};
use nix::sys::signal::Signal;
use tokio::io::BufReader;
use tokio::process::Child;
use tokio::sync::{mpsc, watch};

use hangar_runtime::lines::{Line, read_line};

use super::Server;
use crate::logs::{LogRing, Stream};
use crate::proctree::signal_group;
use crate::upstream::{Notice, Upstream};
use crate::{kernel_limits, subtree};

/// How long a stopping child gets after its stdin closes, and again after SIGTERM.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(2);
/// How long a child whose stdout closed gets to be reaped on its own before the hangar kills it.
pub(super) const EXIT_GRACE: Duration = Duration::from_millis(250);

/// A running upstream: a child (stdio or HTTP) or a remote endpoint (no pid).
#[derive(Clone)]
pub(super) struct Process {
    pub pid: Option<u32>,
    pub upstream: Arc<Upstream>,
    /// Set to a description of how it ended once the child has been reaped; a remote endpoint
    /// keeps its sender in `_remote` so this never fires.
    pub exited: watch::Receiver<Option<String>>,
    pub _remote: Option<Arc<watch::Sender<Option<String>>>>,
    /// A sandboxed child's private $HOME and $TMPDIR, removed once no record of it is left.
    pub _private_dir: Option<Arc<crate::sandbox::PrivateDir>>,
}

impl Server {
    /// Records how the process of `generation` ended; whether to restart it at once (a ready
    /// server that had been stable crashed: its retry is allowed now).
    fn on_exit(&self, generation: u64, how: &str) -> bool {
        let mut inner = self.lock();
        if inner.generation != generation {
            return false;
        }
        inner.process = None;
        inner.meta.pid = None;
        inner.ended = Some(how.to_owned());
        if inner.lifecycle.state() != State::Ready {
            return false;
        }
        tracing::warn!(mcp_server = %self.id, how, "a ready server's process ended");
        let retry_allowed_at = self.next_retry(&mut inner);
        self.transition(&mut inner, Event::Exited { retry_allowed_at: Some(retry_allowed_at) });
        retry_allowed_at <= std::time::SystemTime::now()
    }

    /// The memory and process limits its process is held to (`kernel_limits.rs`).
    pub(super) fn kernel_limits(&self) -> kernel_limits::Limits {
        self.config.sandbox().map(kernel_limits::Limits::from).unwrap_or_default()
    }

    /// Kills the process and everything below it at once; for shutdown after the polite stop
    /// ran out of time.
    pub fn kill_now(&self) {
        if let Some(pid) = self.lock().process.as_ref().and_then(|p| p.pid) {
            subtree::kill(pid);
        }
    }
}

/// Copies what a child prints on `output` (its stderr, or an HTTP server's stdout) into its log.
pub(super) async fn drain_into_log<R: tokio::io::AsyncRead + Unpin>(output: R, stream: Stream, log: Arc<LogRing>) {
    // Small and per upstream (see `upstream::stdio::read_loop`); a flood is read 1 KiB at a time
    // (log lines are short, and a log is no hot path).
    let mut reader = BufReader::with_capacity(1024, output);
    let mut buf = Vec::new();
    loop {
        match read_line(&mut reader, &mut buf, crate::logs::MAX_LINE_BYTES).await {
            Ok(Line::Complete) => log.push(stream, &buf),
            Ok(Line::TooLong(len)) => log.push(stream, format!("[hangar] skipped a {len}-byte line").as_bytes()),
            Ok(Line::Eof) | Err(_) => return,
        }
    }
}

/// Reaps the child, kills whatever it left behind, and tells the server how it ended.
pub(super) async fn watch_exit(
    server: Arc<Server>,
    generation: u64,
    mut child: Child,
    pid: u32,
    upstream: Arc<Upstream>,
    exited: watch::Sender<Option<String>>,
) {
    let (status, killed_because) = tokio::select! {
        status = child.wait() => (status, None),
        // A broken pipe is as fatal as an exit: nothing can reach the server any more.
        () = upstream.wait_closed() => {
            // A dying process closes its stdout a moment before it can be reaped: give it that
            // moment, so a death of its own (or by someone else's signal) is not taken for ours.
            match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
                Ok(status) => (status, None),
                Err(_) => {
                    // Only if it still ran: a process that died by itself closed its stdout by dying.
                    let killed = subtree::kill(pid);
                    (child.wait().await, killed.then_some("closed its stdout"))
                }
            }
        }
    };
    // Read before `reap` removes its groups: a SIGKILL the OOM killer sent reads as out of memory.
    let out_of_memory = killed_because.is_none()
        && status.as_ref().is_ok_and(|status| status.signal() == Some(Signal::SIGKILL as i32))
        && kernel_limits::ran_out_of_memory(pid);
    // Whatever the upstream started goes with it, however it regrouped itself.
    subtree::reap(pid).await;
    let how = match status {
        Ok(_) if out_of_memory => kernel_limits::out_of_memory(server.kernel_limits().memory_mb),
        Ok(status) => crate::proctree::describe_exit(status, killed_because),
        Err(err) => format!("could not be waited for ({err})"),
    };
    let restart = server.on_exit(generation, &how);
    let _ = exited.send(Some(how));
    // A crash after a stable run costs a blink: restarted now, not after a backoff, and the
    // calls that arrive meanwhile join this start instead of failing.
    if restart {
        tracing::info!(mcp_server = %server.id, "restarting at once: it had been up for a while");
        let _ = server.start(super::Cause::Call).await;
    }
}

pub(super) async fn wait_exit(exited: &mut watch::Receiver<Option<String>>) -> String {
    match exited.wait_for(Option::is_some).await {
        Ok(how) => how.clone().unwrap_or_default(),
        Err(_) => "ended".into(),
    }
}

/// A task per running upstream, waiting at rest: the rare re-listing of its tools is boxed, so
/// the waiting task holds a few bytes and not that whole future (3.3 KiB a running upstream).
pub(super) async fn follow_notices(server: Arc<Server>, generation: u64, mut notices: mpsc::UnboundedReceiver<Notice>) {
    while let Some(notice) = notices.recv().await {
        match notice {
            Notice::ToolsChanged => Box::pin(server.on_tools_changed(generation)).await,
            Notice::Oversized => server.protocol_violation(generation),
            Notice::Unsolicited(message) => server.unsolicited(message),
        }
    }
}

/// Close stdin (stdio), wait; SIGTERM the group, wait; SIGKILL the whole subtree, wait until
/// reaped (and `watch_exit` kills whatever it left).
/// With a zero `grace`, straight to SIGKILL.
pub(super) async fn terminate(process: Process, grace: Duration) {
    let reaped = |wait: Duration| {
        let mut exited = process.exited.clone();
        async move { tokio::time::timeout(wait, exited.wait_for(Option::is_some)).await.is_ok() }
    };
    if let Some(pid) = process.pid {
        // The guardian's copy of its stdin would keep it from seeing the close.
        crate::guardian::release(pid);
    }
    let asked = process.upstream.close();
    let Some(pid) = process.pid else { return };
    if !grace.is_zero() {
        if asked && reaped(grace).await {
            return;
        }
        signal_group(pid, Signal::SIGTERM);
        if reaped(grace).await {
            return;
        }
    }
    subtree::kill(pid);
    let _ = reaped(Duration::from_secs(5)).await;
}

impl Server {
    /// An upstream notification outside any request: news for the legacy sessions.
    pub(super) fn unsolicited(&self, message: serde_json::Value) {
        let _ = self.shared.upstream_news.send((self.id.clone(), message));
    }
}
