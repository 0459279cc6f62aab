//! This API instance as one hangar of a fleet behind one Service (`cluster:` in the config,
//! learned from the supervisor): a request whose id another hangar minted is forwarded to that
//! hangar (`forward.rs`), which `ids.rs` finds from the id's sealed owner tag
//! (`hangar_core::cluster`). Without `cluster:` nothing here does anything.

mod deferred;
mod forward;
pub mod ids;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use hangar_core::cluster::{Cluster, ClusterConfig};
use hangar_core::sync::UnpoisonedRw;

pub use deferred::defer;
pub use forward::route;

/// How long a forward waits to connect to the owner before it says the owner is unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a forward waits for the owner's answer head, connecting included. The owner sends one
/// within `deferred::DEFER_AFTER` (1 s) whatever the answer, a deferred one when the answer takes
/// longer: past this the owner is frozen (stopped, or its host accepts but never answers), and
/// the client is told to retry.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a forward waits for the next bytes of the owner's answer, a deferred head included:
/// 45 s. The owner writes at least every `streamed::keep_alive()` (15 s: a deferred head's
/// newline, an event stream's comment), so three of those without a byte is a frozen owner.
/// A test shortens both at once with `HANGAR_TEST_KEEP_ALIVE_S` (`streamed::TEST_KEEP_ALIVE_ENV`;
/// unset in production), so a healthy quiet stream is never taken for a frozen one.
fn idle_timeout() -> Duration {
    3 * crate::streamed::keep_alive()
}
/// Probes of a forwarded connection, so a vanished owner ends a long stream too.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// The fleet as this instance knows it: `None` until (and unless) the supervisor names one.
#[derive(Clone, Default)]
pub struct Fleet(Arc<RwLock<Option<Arc<Member>>>>);

/// This hangar in its fleet, and the client that reaches the others.
pub struct Member {
    pub cluster: Cluster,
    client: reqwest::Client,
}

impl Fleet {
    pub fn current(&self) -> Option<Arc<Member>> {
        self.0.reading().clone()
    }

    /// Learns the supervisor's `cluster:` block (its `advertise` already expanded). The secret
    /// is read here, from the file the block names; an unreadable one leaves this instance on
    /// its own, loudly.
    pub fn learn(&self, config: Option<&ClusterConfig>) {
        let member = config.and_then(|config| match Member::open(config) {
            Ok(member) => Some(Arc::new(member)),
            Err(err) => {
                tracing::error!(key = %err.key, error = %err.message, "cannot join the fleet; serving on our own");
                None
            }
        });
        if let Some(member) = &member {
            tracing::info!(
                advertise = member.cluster.advertise(),
                "one hangar of a fleet: forwarding to the owners of ids"
            );
        }
        *self.0.writing() = member;
    }
}

impl Member {
    fn open(config: &ClusterConfig) -> Result<Member, hangar_core::config::KeyError> {
        // The supervisor sent the expanded URL: nothing is left to expand.
        let cluster = Cluster::open(config, |_| None)?;
        Ok(Member { cluster, client: client() })
    }
}

#[cfg(test)]
impl Fleet {
    /// A fleet this instance has joined as `cluster`.
    pub fn joined(cluster: Cluster) -> Fleet {
        Fleet(Arc::new(RwLock::new(Some(Arc::new(Member { cluster, client: client() })))))
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_keepalive(KEEPALIVE)
        .redirect(reqwest::redirect::Policy::none())
        // The owner is a pod address: no proxy from the environment stands in between.
        .no_proxy()
        .build()
        .unwrap_or_default()
}
