//! Where one upstream connection's `Authorization: Bearer` token comes from: the server's one
//! shared token, or, for a connection that serves one caller, that caller's own (their
//! connected account's token, or one exchanged from the token they came with).

use std::sync::Arc;

use super::exchange::Exchanger;
use super::shared_token::{SharedToken, TokenError};
use super::user_tokens::UserTokens;

/// The token source of one HTTP upstream connection.
#[derive(Clone)]
pub enum Bearer {
    /// `per: shared`: the hangar's own token, for every caller.
    Shared(Arc<SharedToken>),
    /// `per: user`: `identity`'s connected account.
    User { identity: String, tokens: Arc<UserTokens> },
    /// `token_exchange`: a token exchanged from the one `identity` came with.
    Exchange { identity: String, exchanger: Arc<Exchanger> },
}

impl Bearer {
    /// The token held now, if still good (for a notification, which does not wait).
    pub fn current(&self) -> Option<String> {
        match self {
            Bearer::Shared(shared) => shared.current(),
            Bearer::User { identity, tokens } => tokens.current(identity),
            Bearer::Exchange { identity, exchanger } => exchanger.current(identity),
        }
    }

    /// A good token, got or renewed in one flight however many requests wait.
    pub async fn get(&self) -> Result<String, TokenError> {
        match self {
            Bearer::Shared(shared) => shared.get().await,
            Bearer::User { identity, tokens } => tokens.get(identity).await,
            Bearer::Exchange { identity, exchanger } => exchanger.get(identity).await,
        }
    }

    /// The upstream refused `token` (401 `invalid_token`): the next [`Bearer::get`] gets
    /// another (a refresh, a new exchange), if it can.
    pub fn refused(&self, token: &str) {
        match self {
            Bearer::Shared(shared) => shared.refused(token),
            Bearer::User { identity, tokens } => tokens.refused(identity, token),
            Bearer::Exchange { identity, exchanger } => exchanger.refused(identity, token),
        }
    }
}
