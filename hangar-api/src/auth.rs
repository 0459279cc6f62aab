//! API keys: every route but the health probes needs one, when keys are configured.
//!
//! Keys are configured as SHA-256 hashes (`--api-keys FILE`, one `sha256:<hex>` a line, `#`
//! comments), so the file holds nothing a reader could use. A client sends its key as
//! `X-API-Key: <key>` or `Authorization: Bearer <key>`. Keys are never logged.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hangar_runtime::exit::{EX_CONFIG, Sysexit};
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// The largest keys file read: some thousands of keys.
const MAX_KEYS_FILE_BYTES: u64 = 1 << 20;

/// The hashes of the keys that may use the API.
#[derive(Debug, Clone, Default)]
pub struct ApiKeys {
    hashes: Arc<Vec<[u8; 32]>>,
}

#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error("{path}: cannot read the API keys: {source}")]
    Read { path: String, source: hangar_core::small_file::SmallFileError },
    #[error(
        "{path}:{line}: expected `sha256:<64 hex digits>` (the hash of a key, e.g. from `printf %s KEY | sha256sum`)"
    )]
    Malformed { path: String, line: usize },
}

/// A key file that cannot be used is a configuration mistake.
impl Sysexit for KeysError {
    fn exit_code(&self) -> u8 {
        EX_CONFIG
    }
}

impl ApiKeys {
    pub fn load(path: &Path) -> Result<ApiKeys, KeysError> {
        let shown = path.display().to_string();
        // A regular file only: `/dev/zero` filled the memory, a FIFO held the start for good.
        let text = hangar_core::small_file::read_regular(path, MAX_KEYS_FILE_BYTES)
            .map_err(|source| KeysError::Read { path: shown.clone(), source })?;
        ApiKeys::parse(&text).map_err(|line| KeysError::Malformed { path: shown, line })
    }

    /// Parses the file's text; `Err(line number)` on a bad line.
    fn parse(text: &str) -> Result<ApiKeys, usize> {
        let mut hashes = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let hex = line.strip_prefix("sha256:").ok_or(n + 1)?;
            hashes.push(decode_hex(hex).ok_or(n + 1)?);
        }
        Ok(ApiKeys { hashes: Arc::new(hashes) })
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    fn accepts(&self, key: &str) -> bool {
        let hash: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        // Every configured hash is compared in full, so timing says nothing about which matched.
        self.hashes.iter().fold(false, |found, known| found | constant_time_eq(known, &hash))
    }
}

fn decode_hex(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// What the key check needs: the keys, and `auth.oauth` (asked of the supervisor).
#[derive(Clone)]
pub struct Gate {
    pub keys: ApiKeys,
    pub oauth: crate::oauth::Settings,
}

/// Refuses a request without a valid key or, with `auth.oauth`, a valid token (401 or 403, the
/// error envelope; with OAuth a `WWW-Authenticate` challenge). Health probes and the
/// protected-resource metadata stay open, so load balancers, systemd and OAuth clients need no
/// credential. A token's caller goes into the request's extensions.
pub async fn require_key(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let open = path == "/health/live"
        || path == "/health/ready"
        || path == crate::oauth::METADATA_PATH
        || path == crate::oauth::METADATA_PATH_MCP;
    if open {
        return next.run(request).await;
    }
    let headers = request.headers();
    let api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim);
    let bearer =
        headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer ")).map(str::trim);
    if !gate.keys.is_empty() && api_key.or(bearer).is_some_and(|key| gate.keys.accepts(key)) {
        return next.run(request).await;
    }
    let oauth = match gate.oauth.get().await {
        Ok(oauth) => oauth,
        // With keys configured, refuse as before; with none, nothing says who may call yet.
        Err(_) if !gate.keys.is_empty() => None,
        Err(unknown) => return crate::body::refuse_unread(request, crate::oauth::unknown_settings(unknown)).await,
    };
    let response = match oauth {
        None if gate.keys.is_empty() => return next.run(request).await,
        None => {
            let refusal = match api_key.or(bearer) {
                Some(_) => "the API key is not valid",
                None => "an API key is required: send it as X-API-Key or Authorization: Bearer",
            };
            ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized", refusal).into_response()
        }
        Some(oauth) => {
            let outcome = match bearer {
                Some(token) => oauth.authenticate(token).await,
                None => Err(crate::oauth::Refusal::Missing),
            };
            match outcome {
                Ok(caller) => {
                    tracing::debug!(identity = %caller.identity, profile = ?caller.profile, "token accepted");
                    request.extensions_mut().insert(caller);
                    return next.run(request).await;
                }
                Err(refusal) => {
                    // The class of the refusal only, at debug (a flood of bad tokens must not flood the log).
                    tracing::debug!(?refusal, "token refused");
                    crate::oauth::challenge(&oauth, refusal)
                }
            }
        }
    };
    crate::body::refuse_unread(request, response).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hashes_and_names_the_bad_line() {
        let keys = ApiKeys::parse(
            "# ops\n\nsha256:9e1ea4e8d2e5b1bbcd8b3a8ed2a7b1c1bf2fce40c9a2bbc0c53e0d3e9a0d8e1c # alice\n",
        )
        .unwrap();
        assert!(!keys.is_empty());
        assert_eq!(ApiKeys::parse("sha256:abc\n").unwrap_err(), 1);
        assert_eq!(ApiKeys::parse("# x\nplain-key\n").unwrap_err(), 2, "a plain key is refused: only hashes");
    }

    #[test]
    fn accepts_exactly_the_keys_whose_hash_is_configured() {
        let hash: [u8; 32] = Sha256::digest(b"secret-key").into();
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        let keys = ApiKeys::parse(&format!("sha256:{hex}\n")).unwrap();
        assert!(keys.accepts("secret-key"));
        assert!(!keys.accepts("secret-kez"));
        assert!(!keys.accepts(""));
    }
}
