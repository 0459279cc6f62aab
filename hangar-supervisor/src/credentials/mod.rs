//! Credentials the hangar presents to upstreams that want them.
//!
//! [`discovery`] finds an upstream's authorization server the way the MCP authorization spec
//! asks of a client (RFC 9728 protected-resource metadata, then RFC 8414 / OpenID Connect
//! authorization-server metadata); [`shared_token`] holds the one access token a `per: shared`
//! server's calls carry, got with the client-credentials grant and renewed ahead of expiry in a
//! single flight, and kept sealed in the stored credentials (`crate::vault`), so it outlives a
//! restart. [`exchange`] exchanges the token a caller came with ([`subjects`]) for one meant for
//! a `token_exchange` server (RFC 8693), cached per identity, in one flight per identity.
//! Secrets and tokens are never logged, and never leave this module but as the
//! `Authorization` header of a request to the upstream they were issued for (a caller's own
//! token goes to the token endpoint that exchanges it, never upstream).

pub mod bearer;
pub mod discovery;
pub mod exchange;
pub mod flows;
pub mod registration;
pub mod shared_token;
pub mod subjects;
pub mod token_requests;
pub mod user_tokens;
