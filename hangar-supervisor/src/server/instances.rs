//! An isolated server's instances (`isolation: per_identity | per_session`): one full upstream
//! per owner, each a [`Server`] of its own named `<server>@<label>` (`hangar_core::isolation`),
//! with its own process, sandbox, private `$HOME` and `/tmp`, limits, log and lifecycle.
//!
//! The server itself stays what it always was: the hangar's own instance, started only to learn
//! the tools the front door lists (no caller's state reaches it: it is asked nothing on anyone's
//! behalf), and the place its instances are found. A call or request of a caller goes to that
//! caller's instance, made on first use; an instance stops after `idle_ttl_s` like any server,
//! and a stopped one is forgotten. `max_instances` bounds them: past it the least recently used
//! idle one stops to make room, and with none idle the call is refused (`instances_exhausted`).
//!
//! Concurrency: the map is a short-held std mutex; an instance is made and counted under it, so
//! two first calls of one owner share one instance and no two owners pass the bound together.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hangar_core::ipc::{ErrorKind, IpcError};
use hangar_core::isolation::{self, Isolation};
use hangar_core::lifecycle::{State, StopReason};
use hangar_core::record::InstanceSummary;
use hangar_core::sync::Unpoisoned;
use indexmap::IndexMap;

use super::Server;

/// A stopped instance is forgotten once it has been unused this long (not at once: the call that
/// found it may be about to start it).
const FORGET_STOPPED_AFTER: Duration = Duration::from_secs(5);

/// An isolated server's instances by label, least recently used first.
#[derive(Default)]
pub(super) struct Instances {
    by_label: Mutex<IndexMap<String, Arc<Server>>>,
}

/// Whose instance a server is.
#[derive(Debug, Clone)]
pub(super) struct InstanceOf {
    /// The configured server's id.
    pub server: String,
    pub label: String,
    /// The owner's identity, shown to the owner and admins.
    pub identity: String,
}

impl Server {
    pub fn isolation(&self) -> Isolation {
        self.config.isolation
    }

    /// For an instance, the configured server it is an instance of.
    pub fn instance_of(&self) -> Option<&str> {
        self.instance_of.as_ref().map(|of| of.server.as_str())
    }

    /// The server that serves `identity` in `session` (`None`: outside any session): itself
    /// when it is shared, else that owner's instance, made on first use.
    pub fn serving(self: &Arc<Self>, identity: &str, session: Option<&str>) -> Result<Arc<Server>, IpcError> {
        let Some(label) = self.isolation().label(identity, session) else {
            return Ok(self.clone());
        };
        let evicted;
        let instance = {
            let mut by_label = self.instances.by_label.locked();
            if let Some(index) = by_label.get_index_of(&label) {
                // Most recently used last.
                let last = by_label.len() - 1;
                by_label.move_index(index, last);
                let instance = by_label[last].clone();
                instance.lock().last_used = Instant::now();
                return Ok(instance);
            }
            evicted = match by_label.len() >= self.config.max_instances as usize {
                true => Some(self.make_room(&mut by_label)?),
                false => None,
            };
            let instance = self.instance(label.clone(), identity);
            by_label.insert(label, instance.clone());
            instance
        };
        if let Some(evicted) = evicted {
            tracing::info!(mcp_server = %evicted.id, "stopping the least recently used idle instance: max_instances reached");
            tokio::spawn(async move { evicted.stop(StopReason::Idle).await });
        }
        Ok(instance)
    }

    /// Takes the least recently used idle instance out of `by_label`, or refuses.
    fn make_room(&self, by_label: &mut IndexMap<String, Arc<Server>>) -> Result<Arc<Server>, IpcError> {
        let idle = by_label.values().position(|instance| {
            let inner = instance.lock();
            inner.calls_in_flight == 0 && inner.lifecycle.state() != State::Initializing
        });
        match idle.and_then(|index| by_label.shift_remove_index(index)) {
            Some((_, evicted)) => Ok(evicted),
            None => Err(IpcError::new(
                ErrorKind::InstancesExhausted,
                format!(
                    "`{}` runs {} instances (its max_instances), each busy with a call: none can be stopped to start yours; retry when one is done, or raise mcp_servers.{}.max_instances",
                    self.id, self.config.max_instances, self.id
                ),
            )
            .with_details(serde_json::json!({"max_instances": self.config.max_instances}))),
        }
    }

    /// A new instance of this server for the owner labelled `label` (cold: its first call
    /// starts it).
    fn instance(self: &Arc<Self>, label: String, identity: &str) -> Arc<Server> {
        let mut config = self.config.clone();
        config.isolation = Isolation::Shared;
        let id = isolation::instance_id(&self.id, &label);
        let of = InstanceOf { server: self.id.clone(), label, identity: identity.to_owned() };
        Server::build(id, config, self.policy.clone(), self.shared.clone(), Some(of))
    }

    /// Its instances, least recently used first.
    pub fn instances(&self) -> Vec<Arc<Server>> {
        self.instances.by_label.locked().values().cloned().collect()
    }

    /// Its instance labelled `label`, if it has one.
    pub fn instance_labelled(&self, label: &str) -> Option<Arc<Server>> {
        self.instances.by_label.locked().get(label).cloned()
    }

    /// Forgets the instances that stopped and stayed unused a while (an idle stop, a reload's):
    /// their next call makes them again. A dead one is kept, with its backoff.
    pub fn forget_stopped_instances(&self) {
        self.instances.by_label.locked().retain(|_, instance| {
            let inner = instance.lock();
            inner.lifecycle.state() != State::Cold
                || inner.process.is_some()
                || inner.calls_in_flight > 0
                || inner.last_used.elapsed() < FORGET_STOPPED_AFTER
        });
    }

    /// Stops every instance (its server is stopping: a reload, a stop, the shutdown).
    pub(super) async fn stop_instances(&self, reason: StopReason) {
        let instances = std::mem::take(&mut *self.instances.by_label.locked());
        let stops: Vec<_> = instances
            .into_values()
            .map(|instance| tokio::spawn(async move { instance.stop_own(reason).await }))
            .collect();
        for stop in stops {
            let _ = stop.await;
        }
    }

    /// This instance as its server's details list it.
    pub fn instance_summary(&self) -> Option<InstanceSummary> {
        let of = self.instance_of.as_ref()?;
        let inner = self.lock();
        Some(InstanceSummary {
            instance: self.id.clone(),
            identity: of.identity.clone(),
            state: inner.lifecycle.state(),
            alive: inner.process.is_some(),
            pid: inner.meta.pid,
            idle_s: inner.last_used.elapsed().as_secs(),
            dead: inner.lifecycle.dead().map(hangar_core::record::DeadRecord::from),
        })
    }

    /// Whether `identity` in `session` is whom this instance serves (its notifications go to
    /// them alone); true of a shared server, whose news goes by view.
    pub fn serves(&self, identity: &str, session: Option<&str>) -> bool {
        self.instance_of.as_ref().is_none_or(|of| isolation::serves(&of.label, identity, session))
    }
}
