//! The pending connect flows of the per-user authorization-code flow, in memory (every API
//! instance asks this supervisor, so one place holds them all).
//!
//! A flow is minted for one identity and one server ([`Flows::mint`]) and lives a short while
//! ([`FLOW_LIFETIME`]); an identity holds at most [`MAX_PER_IDENTITY`] at once (minting another
//! drops its oldest). The first browser that opens it claims it with its binding
//! ([`Flows::claim`]); the flow is then given its single-use `state`, PKCE verifier and the
//! authorization server's details ([`Flows::opened`]). The callback finds it by `state` and uses
//! it up ([`Flows::finish`]), whatever follows. Nothing here is logged; a flow's `Debug` shows
//! no secret.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hangar_core::sync::Unpoisoned;
use hangar_core::time::now_ms;

use super::registration::Client;

/// How long a minted flow may wait to be finished.
pub const FLOW_LIFETIME: Duration = Duration::from_secs(600);
/// The most flows one identity holds at once.
pub const MAX_PER_IDENTITY: usize = 5;
/// The most flows held at once, all identities together.
const MAX_FLOWS: usize = 10_000;

/// What the authorization server's side of an opened flow needs.
#[derive(Clone)]
pub struct Opened {
    /// The single-use `state` sent with the authorization request.
    pub state: String,
    /// The PKCE S256 verifier, sent with the code only.
    pub verifier: String,
    /// The authorization server's `issuer`, which the callback's `iss` must be.
    pub issuer: String,
    /// Whether the authorization server says it sends `iss` (RFC 9207): then it must.
    pub iss_expected: bool,
    /// The upstream's canonical URI (RFC 8707 `resource`).
    pub resource: String,
    pub token_endpoint: String,
    pub client: Client,
    pub scopes: Vec<String>,
    /// Where the browser was sent.
    pub authorize_url: String,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened").field("issuer", &self.issuer).field("resource", &self.resource).finish_non_exhaustive()
    }
}

struct Pending {
    identity: String,
    mcp_server: String,
    minted: Instant,
    /// Its place in the order flows were minted.
    seq: u64,
    /// The binding of the browser that opened it first.
    binding: Option<String>,
    opened: Option<Opened>,
}

/// What [`Flows::claim`] found.
#[derive(Debug)]
pub enum Claim {
    /// The flow is this browser's now (or was, and never got as far as the authorization
    /// server): open it for `identity`.
    New { identity: String },
    /// This browser opened it before: send it to the same place again.
    Again { authorize_url: String },
}

/// Why a flow step was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    #[error("this connect link is unknown, expired or already used: ask for a new one")]
    Unknown,
    #[error("this connect link was opened in another browser first: ask for a new one")]
    OtherBrowser,
    #[error("too many connect flows are pending: try again in a few minutes")]
    TooMany,
}

/// A finished flow: whose it was and what its callback needs.
pub struct Finished {
    pub identity: String,
    pub mcp_server: String,
    /// The binding of the browser that opened it.
    pub binding: String,
    pub opened: Opened,
}

#[derive(Default)]
struct Inner {
    /// By flow id (the connect URL's `flow`).
    pending: HashMap<String, Pending>,
    /// Flow ids by `state`.
    by_state: HashMap<String, String>,
    /// How many flows were minted.
    minted: u64,
}

/// Every pending flow.
#[derive(Default)]
pub struct Flows {
    inner: Mutex<Inner>,
}

impl Flows {
    /// A new flow for `identity` on `mcp_server`: its id, and when it expires (ms since the
    /// epoch).
    pub fn mint(&self, identity: &str, mcp_server: &str) -> Result<(String, u64), FlowError> {
        let mut inner = self.inner.locked();
        inner.purge();
        let mut own: Vec<(u64, String)> = inner
            .pending
            .iter()
            .filter(|(_, flow)| flow.identity == identity)
            .map(|(id, flow)| (flow.seq, id.clone()))
            .collect();
        own.sort();
        while own.len() >= MAX_PER_IDENTITY {
            let (_, oldest) = own.remove(0);
            inner.remove(&oldest);
        }
        if inner.pending.len() >= MAX_FLOWS {
            return Err(FlowError::TooMany);
        }
        let id = random();
        inner.minted += 1;
        let pending = Pending {
            identity: identity.to_owned(),
            mcp_server: mcp_server.to_owned(),
            minted: Instant::now(),
            seq: inner.minted,
            binding: None,
            opened: None,
        };
        inner.pending.insert(id.clone(), pending);
        Ok((id, now_ms() + FLOW_LIFETIME.as_millis() as u64))
    }

    /// The browser bound by `binding` opened flow `flow` of `mcp_server`: the first one claims
    /// it; any other is refused.
    pub fn claim(&self, flow: &str, mcp_server: &str, binding: &str) -> Result<Claim, FlowError> {
        let mut inner = self.inner.locked();
        inner.purge();
        let pending = inner.pending.get_mut(flow).filter(|p| p.mcp_server == mcp_server).ok_or(FlowError::Unknown)?;
        match (&pending.binding, &pending.opened) {
            (None, _) => {
                pending.binding = Some(binding.to_owned());
                Ok(Claim::New { identity: pending.identity.clone() })
            }
            (Some(bound), _) if !same(bound, binding) => Err(FlowError::OtherBrowser),
            (Some(_), Some(opened)) => Ok(Claim::Again { authorize_url: opened.authorize_url.clone() }),
            (Some(_), None) => Ok(Claim::New { identity: pending.identity.clone() }),
        }
    }

    /// Flow `flow` was sent to the authorization server with `opened`.
    pub fn opened(&self, flow: &str, opened: Opened) -> Result<(), FlowError> {
        let mut inner = self.inner.locked();
        let pending = inner.pending.get_mut(flow).ok_or(FlowError::Unknown)?;
        let state = opened.state.clone();
        if let Some(old) = pending.opened.replace(opened) {
            inner.by_state.remove(&old.state);
        }
        inner.by_state.insert(state, flow.to_owned());
        Ok(())
    }

    /// The flow whose `state` this is, used up.
    pub fn finish(&self, state: &str) -> Result<Finished, FlowError> {
        let mut inner = self.inner.locked();
        inner.purge();
        let flow = inner.by_state.get(state).cloned().ok_or(FlowError::Unknown)?;
        let pending = inner.remove(&flow).ok_or(FlowError::Unknown)?;
        match (pending.binding, pending.opened) {
            (Some(binding), Some(opened)) => {
                Ok(Finished { identity: pending.identity, mcp_server: pending.mcp_server, binding, opened })
            }
            _ => Err(FlowError::Unknown),
        }
    }
}

impl Inner {
    fn remove(&mut self, flow: &str) -> Option<Pending> {
        let pending = self.pending.remove(flow)?;
        if let Some(opened) = &pending.opened {
            self.by_state.remove(&opened.state);
        }
        Some(pending)
    }

    /// Drops the expired flows.
    fn purge(&mut self) {
        let expired: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, flow)| flow.minted.elapsed() >= FLOW_LIFETIME)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.remove(&id);
        }
    }
}

/// 256 random bits, URL-safe.
pub fn random() -> String {
    oauth2::CsrfToken::new_random_len(32).secret().clone()
}

/// Whether `a` and `b` are equal, compared in time that does not depend on where they differ.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened(state: &str) -> Opened {
        Opened {
            state: state.into(),
            verifier: "v".into(),
            issuer: "https://as".into(),
            iss_expected: true,
            resource: "https://mcp".into(),
            token_endpoint: "https://as/token".into(),
            client: Client { id: "c".into(), secret: None, redirect_uri: "https://h/oauth/callback".into() },
            scopes: Vec::new(),
            authorize_url: "https://as/auth?x".into(),
        }
    }

    #[test]
    fn a_flow_is_its_first_browsers_and_used_once() {
        let flows = Flows::default();
        let (id, _) = flows.mint("alice", "linear").unwrap();
        assert!(matches!(flows.claim(&id, "other", "b1"), Err(FlowError::Unknown)));
        assert!(matches!(flows.claim(&id, "linear", "b1"), Ok(Claim::New { identity }) if identity == "alice"));
        flows.opened(&id, opened("s1")).unwrap();
        assert!(matches!(flows.claim(&id, "linear", "b2"), Err(FlowError::OtherBrowser)));
        assert!(matches!(flows.claim(&id, "linear", "b1"), Ok(Claim::Again { .. })));
        assert!(matches!(flows.finish("nope"), Err(FlowError::Unknown)));
        let finished = flows.finish("s1").unwrap();
        assert_eq!((finished.identity.as_str(), finished.binding.as_str()), ("alice", "b1"));
        assert!(matches!(flows.finish("s1"), Err(FlowError::Unknown)), "used up");
        assert!(matches!(flows.claim(&id, "linear", "b1"), Err(FlowError::Unknown)));
    }

    #[test]
    fn an_identity_holds_a_few_flows_and_its_oldest_go_first() {
        let flows = Flows::default();
        let ids: Vec<String> = (0..MAX_PER_IDENTITY + 2).map(|_| flows.mint("alice", "linear").unwrap().0).collect();
        let (bobs, _) = flows.mint("bob", "linear").unwrap();
        assert!(matches!(flows.claim(&ids[0], "linear", "b"), Err(FlowError::Unknown)));
        assert!(matches!(flows.claim(&ids[1], "linear", "b"), Err(FlowError::Unknown)));
        assert!(matches!(flows.claim(&ids[2], "linear", "b"), Ok(Claim::New { .. })));
        assert!(matches!(flows.claim(&bobs, "linear", "b"), Ok(Claim::New { identity }) if identity == "bob"));
        assert_ne!(random(), random());
    }
}
