//! The key what a server remembers across restarts is saved under (`journal::Remembered`'s
//! `config_hash`): the SHA-256 of a canonical JSON text of the config fields that what is
//! remembered depends on. Equal keys, the same server: its dead record, backoff and catalog
//! still hold. A different key makes the memory stale, which costs one discovery.
//!
//! In the key: what the server is (its mode, command, endpoint, the names of the variables its
//! environment sets and of the headers its `auth.headers` sends, its sandbox), what judges it (the expected and pinned tools and their
//! enforcement, which make it `capability_blocked`; the handshake timeout, which makes it
//! `start_failed`) and how it backs off (its resolved recovery policy). Not in the key: the
//! environment's and the headers' values, which are secrets (a rotated token is the same server), and what only
//! tunes a running server (descriptions, health checks, idle stop, limits, names). The text is
//! built from these fields alone, maps sorted, never from a type's `Debug`, so neither a secret
//! nor a redacting `Debug` can move it.

use std::collections::{BTreeMap, BTreeSet};

use hangar_core::config::{EnforcementMode, Mode, RecoveryPolicy, ServerConfig};
use hangar_core::sandbox::Sandbox;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Bumped when what the key covers changes meaning, so older memories are not taken for new.
const VERSION: u32 = 1;

/// The fields the key is the digest of, in a fixed order.
#[derive(Serialize)]
struct Keyed<'a> {
    version: u32,
    mode: Mode,
    command: &'a [String],
    endpoint: Option<&'a str>,
    /// The names of the variables set, sorted; never their values.
    env: BTreeSet<&'a str>,
    /// The names of the headers `auth.headers` sends, sorted; never their values (absent when
    /// none, so the keys of servers without them are as they were).
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    auth_headers: BTreeSet<&'a str>,
    sandbox: Option<&'a Sandbox>,
    enforcement_mode: EnforcementMode,
    expected_tools: Option<BTreeSet<&'a str>>,
    pinned: Option<BTreeMap<&'a str, &'a str>>,
    handshake_timeout_s: f64,
    recovery: Recovery,
}

/// The resolved recovery policy, durations in seconds.
#[derive(Serialize)]
struct Recovery {
    max_retries: u32,
    initial_backoff_s: f64,
    backoff_multiplier: f64,
    max_backoff_s: f64,
}

/// The canonical text the key is the digest of.
fn canonical(config: &ServerConfig, policy: &RecoveryPolicy) -> String {
    let tools = &config.capabilities.tools;
    let keyed = Keyed {
        version: VERSION,
        mode: config.mode,
        command: &config.command,
        endpoint: config.endpoint.as_deref(),
        env: config.env.keys().map(String::as_str).collect(),
        auth_headers: config.auth_headers().map(|(name, _)| name).collect(),
        sandbox: config.sandbox(),
        enforcement_mode: config.capabilities.enforcement_mode,
        expected_tools: tools.expected_tools.as_ref().map(|names| names.iter().map(String::as_str).collect()),
        pinned: tools.pinned.as_ref().map(|pins| pins.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()),
        handshake_timeout_s: config.handshake_timeout_s,
        recovery: Recovery {
            max_retries: policy.max_retries,
            initial_backoff_s: policy.initial_backoff.as_secs_f64(),
            backoff_multiplier: policy.backoff_multiplier,
            max_backoff_s: policy.max_backoff.as_secs_f64(),
        },
    };
    // Serializing these fields cannot fail: every map key is a string, every float finite.
    serde_json::to_string(&keyed).unwrap_or_default()
}

/// The key of a server's memory: lowercase hex of the SHA-256 of [`canonical`].
pub(super) fn memory_key(config: &ServerConfig, policy: &RecoveryPolicy) -> String {
    let digest = Sha256::digest(canonical(config, policy).as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::config::Config;

    fn server_config(yaml: &str) -> (ServerConfig, RecoveryPolicy) {
        let config = Config::parse(yaml).unwrap();
        let server = config.mcp_servers["a"].clone();
        let policy = server.recovery.resolve(&config.recovery);
        (server, policy)
    }

    fn key(yaml: &str) -> String {
        let (config, policy) = server_config(yaml);
        memory_key(&config, &policy)
    }

    const BASE: &str = "mcp_servers:\n  a:\n    command: [x, --flag]\n    env: {TOKEN: secret-value, B: b}\n";

    #[test]
    fn the_key_is_the_digest_of_the_canonical_text_and_no_debug() {
        // Every byte of the key comes from this text: no `Debug` output, so a changed or
        // redacting `Debug` of the config's types cannot move it, and no value of the env.
        let text = r#"{"version":1,"mode":"subprocess","command":["x","--flag"],"endpoint":null,"env":["B","TOKEN"],"sandbox":null,"enforcement_mode":"block","expected_tools":null,"pinned":null,"handshake_timeout_s":10.0,"recovery":{"max_retries":3,"initial_backoff_s":5.0,"backoff_multiplier":2.0,"max_backoff_s":60.0}}"#;
        let (config, policy) = server_config(BASE);
        assert_eq!(canonical(&config, &policy), text);
        let digest: String = Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(memory_key(&config, &policy), digest);
        assert!(!text.contains("secret"));
    }

    #[test]
    fn a_secret_or_what_only_tunes_a_server_keeps_the_key_and_a_changed_command_does_not() {
        let base = key(BASE);
        for same in [
            "mcp_servers:\n  a:\n    command: [x, --flag]\n    env: {TOKEN: rotated, B: other}\n",
            "mcp_servers:\n  a:\n    command: [x, --flag]\n    env: {B: b, TOKEN: secret-value}\n",
            "mcp_servers:\n  a:\n    command: [x]\n    args: [--flag]\n    env: {TOKEN: s, B: b}\n",
            "mcp_servers:\n  a:\n    command: [x, --flag]\n    env: {TOKEN: s, B: b}\n    description: d\n    idle_ttl_s: 5\n",
        ] {
            assert_eq!(key(same), base, "{same}");
        }
        for changed in [
            "mcp_servers:\n  a:\n    command: [y, --flag]\n    env: {TOKEN: secret-value, B: b}\n",
            "mcp_servers:\n  a:\n    command: [x, --flag]\n    env: {TOKEN: secret-value}\n",
            "recovery: {max_retries: 9}\nmcp_servers:\n  a:\n    command: [x, --flag]\n    env: {TOKEN: secret-value, B: b}\n",
            "mcp_servers:\n  a:\n    command: [x, --flag]\n    env: {TOKEN: s, B: b}\n    capabilities: {tools: {expected_tools: [add]}}\n",
            "mcp_servers:\n  a:\n    command: [x, --flag]\n    env: {TOKEN: s, B: b}\n    sandbox: strict\n",
        ] {
            assert_ne!(key(changed), base, "{changed}");
        }
        assert_eq!(base.len(), 64);
    }

    #[test]
    fn a_credentials_bytes_never_move_the_key_but_its_header_name_does() {
        let remote = |header: &str, token: &'static str| {
            let yaml = format!(
                "mcp_servers:\n  a:\n    mode: remote\n    endpoint: 'https://x.example/mcp'\n    auth: {{headers: {{{header}: {{env: T}}}}}}\n"
            );
            let mut config = Config::parse(&yaml).unwrap();
            let var: &'static dyn Fn(&str) -> Option<String> = Box::leak(Box::new(move |_: &str| Some(token.into())));
            config.resolve_credentials(&hangar_core::credential::Sources { var, credentials_directory: None }).unwrap();
            let server = config.mcp_servers["a"].clone();
            let text = canonical(&server, &server.recovery.resolve(&config.recovery));
            assert!(!text.contains(token), "{text}");
            memory_key(&server, &server.recovery.resolve(&config.recovery))
        };
        assert_eq!(remote("Authorization", "token-one"), remote("Authorization", "token-two"));
        assert_ne!(remote("Authorization", "token-one"), remote("X-Api-Key", "token-one"));
    }
}
