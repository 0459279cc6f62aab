//! `--run-key-hash`: the key `hangar run` gives the command it runs, an admin key named
//! [`NAME`] added to the config's `auth.api_keys` at start and at every reload (the config file
//! is not touched). Only with `auth` configured: without it, no key is needed.

use std::sync::OnceLock;

use hangar_core::access::{AuthConfig, NamedKey, parse_key_hash};
use hangar_core::config::Config;

/// The identity of the run's key.
pub const NAME: &str = "hangar-run";

static KEY: OnceLock<NamedKey> = OnceLock::new();

/// Takes the key's hash, once, at start; refused when it is not a hash or its name is taken.
pub fn set(hash: &str, config: &Config) -> Result<(), String> {
    if parse_key_hash(hash).is_none() {
        return Err("--run-key-hash: expected sha256:<64 hex digits>".into());
    }
    if config.auth.api_keys.iter().any(|key| key.name == NAME) {
        return Err(format!("auth.api_keys: the name `{NAME}` is taken by `hangar run`'s own key: rename that key"));
    }
    let _ = KEY.set(NamedKey { name: NAME.into(), hash: hash.to_owned(), profile: None });
    Ok(())
}

/// `auth` with the run's key among its keys (when there is one, `auth` is configured, and no
/// key of the config has its name).
pub fn with_run_key(auth: &AuthConfig) -> AuthConfig {
    let mut auth = auth.clone();
    if let Some(key) = KEY.get()
        && auth.is_configured()
        && !auth.api_keys.iter().any(|k| k.name == NAME || k.hash.eq_ignore_ascii_case(&key.hash))
    {
        auth.api_keys.push(key.clone());
    }
    auth
}
