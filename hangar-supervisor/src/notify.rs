//! systemd's notify protocol (`sd_notify(3)`), for `Type=notify` units: `READY=1` once the
//! control socket is up and the config is loaded, `WATCHDOG=1` at half of `WATCHDOG_USEC` while
//! the runtime runs, `RELOADING=1` then `READY=1` around a SIGHUP reload, `STOPPING=1` when
//! shutdown begins.
//!
//! Every call is a no-op without `NOTIFY_SOCKET` (not under systemd, or a test that did not ask),
//! and a failed send is logged, never fatal: the hangar works the same without a service manager.

use std::time::Duration;

use sd_notify::NotifyState;

/// Sends `states` to `$NOTIFY_SOCKET`, if set; a failure is a warning naming `what`.
fn send(what: &str, states: &[NotifyState<'_>]) {
    if let Err(err) = sd_notify::notify(states) {
        tracing::warn!(%err, what, "cannot notify the service manager");
    }
}

/// `READY=1` with a one-line `STATUS=`: startup is done.
pub fn ready(status: &str) {
    send("READY=1", &[NotifyState::Ready, NotifyState::Status(status)]);
}

/// `RELOADING=1`: a config reload is under way; [`ready`] says when it is done.
pub fn reloading() {
    send("RELOADING=1", &[NotifyState::Reloading, NotifyState::Status("reloading the config")]);
}

/// `STOPPING=1`: shutdown has begun (children are being stopped).
pub fn stopping() {
    send("STOPPING=1", &[NotifyState::Stopping, NotifyState::Status("stopping every MCP server")]);
}

/// How often to ping the watchdog: half of `WATCHDOG_USEC`, when the service manager asks for
/// pings from this process (`WATCHDOG_PID` unset or ours). `None` otherwise.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().filter(|timeout| !timeout.is_zero()).map(|timeout| timeout / 2)
}

/// Pings `WATCHDOG=1` every `interval`, for as long as the runtime runs. Being a task on the
/// runtime, it stops pinging when the runtime stalls, which is what the watchdog is for.
pub async fn watchdog(interval: Duration) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        send("WATCHDOG=1", &[NotifyState::Watchdog]);
    }
}
