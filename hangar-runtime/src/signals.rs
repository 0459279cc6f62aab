//! The signals that stop a hangar process (SIGTERM, SIGINT) and, for the supervisor, reload it
//! (SIGHUP), installed once and awaited as one future.
//!
//! Install them before the process announces itself: whoever sends SIGTERM right after reading
//! the announcement must get a graceful stop, not the signal's default action.

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::exit::{EX_SOFTWARE, Exit};

/// What a signal asks of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Stop: SIGTERM or SIGINT, named.
    Stop(&'static str),
    /// Read the configuration again: SIGHUP.
    Reload,
}

pub struct Signals {
    terminate: Signal,
    interrupt: Signal,
    /// Only where a reload is understood; elsewhere SIGHUP keeps its default action.
    hangup: Option<Signal>,
}

impl Signals {
    /// SIGTERM and SIGINT, which stop the process.
    pub fn stop() -> Result<Signals, Exit> {
        Ok(Signals {
            terminate: install(SignalKind::terminate())?,
            interrupt: install(SignalKind::interrupt())?,
            hangup: None,
        })
    }

    /// SIGTERM and SIGINT, and SIGHUP as a reload.
    pub fn stop_or_reload() -> Result<Signals, Exit> {
        let mut signals = Signals::stop()?;
        signals.hangup = Some(install(SignalKind::hangup())?);
        Ok(signals)
    }

    /// The next signal (never [`Received::Reload`] from [`Signals::stop`]).
    pub async fn next(&mut self) -> Received {
        let hangup = async {
            match &mut self.hangup {
                Some(hangup) => hangup.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.terminate.recv() => Received::Stop("SIGTERM"),
            _ = self.interrupt.recv() => Received::Stop("SIGINT"),
            _ = hangup => Received::Reload,
        }
    }

    /// Resolves on SIGTERM or SIGINT, naming which.
    pub async fn stopped(&mut self) -> &'static str {
        loop {
            if let Received::Stop(name) = self.next().await {
                return name;
            }
        }
    }
}

fn install(kind: SignalKind) -> Result<Signal, Exit> {
    signal(kind).map_err(|err| Exit::new(EX_SOFTWARE, format!("cannot install signal handlers: {err}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn raise(signal: nix::sys::signal::Signal) {
        nix::sys::signal::raise(signal).unwrap();
    }

    // One test for every signal: the handlers are the process's, so tests raising them in
    // parallel would see each other's.
    #[tokio::test]
    async fn each_signal_is_told_apart() {
        let mut signals = Signals::stop_or_reload().unwrap();
        for (signal, expected) in [
            (nix::sys::signal::Signal::SIGHUP, Received::Reload),
            (nix::sys::signal::Signal::SIGTERM, Received::Stop("SIGTERM")),
            (nix::sys::signal::Signal::SIGINT, Received::Stop("SIGINT")),
        ] {
            raise(signal);
            let got = tokio::time::timeout(Duration::from_secs(10), signals.next()).await.unwrap();
            assert_eq!(got, expected, "{signal}");
        }
        let mut stop_only = Signals::stop().unwrap();
        raise(nix::sys::signal::Signal::SIGHUP);
        raise(nix::sys::signal::Signal::SIGTERM);
        let got = tokio::time::timeout(Duration::from_secs(10), stop_only.stopped()).await.unwrap();
        assert_eq!(got, "SIGTERM");
    }
}
