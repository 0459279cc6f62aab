//! Who may call, and what they may use: the `auth:` and `profiles:` blocks of the config, and
//! [`Caller`], the identity every request over the control socket carries.
//!
//! The API authenticates (a named key, an OAuth token) and names a [`Caller`]; the supervisor
//! authorizes against the caller's [`Profile`] and records the decision. See issue 13 and
//! `shared/surfaces.md` ("Added surfaces and keys").

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Who is calling, as the API authenticated them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    /// A key's name, a token's subject, or [`ANONYMOUS`].
    pub identity: String,
    /// The profile naming what the caller may see and do; `None` sees and does everything
    /// (the anonymous caller when no `auth` is configured, and the hangar's own helpers).
    pub profile: Option<String>,
}

/// The identity of every caller when no `auth` is configured (loopback only).
pub const ANONYMOUS: &str = "anonymous";
/// The identity of the hangar's own clients (the prober, the API asking for its settings).
pub const HANGAR: &str = "hangar";
/// Identities no key may take.
pub const RESERVED_IDENTITIES: [&str; 2] = [ANONYMOUS, HANGAR];

impl Caller {
    /// The caller when no `auth` is configured: sees everything, may do everything.
    pub fn anonymous() -> Caller {
        Caller { identity: ANONYMOUS.into(), profile: None }
    }

    /// The hangar's own clients (the prober, the API's own requests): they see everything.
    /// Only peers of the control socket can send it, and that socket admits only the
    /// supervisor's user (and `--socket-group`).
    pub fn hangar() -> Caller {
        Caller { identity: HANGAR.into(), profile: None }
    }
}

/// The `auth:` block. Empty (no keys, no OAuth) means no authentication: loopback only, and
/// every caller is [`Caller::anonymous`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    #[serde(default)]
    pub api_keys: Vec<NamedKey>,
    #[serde(default)]
    pub oauth: Option<OAuthConfig>,
}

impl AuthConfig {
    /// Whether any authentication is configured (then nothing is anonymous but the health
    /// probes and the protected-resource metadata).
    pub fn is_configured(&self) -> bool {
        !self.api_keys.is_empty() || self.oauth.is_some()
    }
}

/// One API key, by the hash of its secret: its name is the caller's identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedKey {
    pub name: String,
    /// `sha256:<64 hex digits>`.
    pub hash: String,
    /// `None`: sees and does everything, as every key did before profiles.
    #[serde(default)]
    pub profile: Option<String>,
}

/// The digest of a key's hash as written in the config or a keys file: `sha256:<64 hex digits>`.
pub fn parse_key_hash(hash: &str) -> Option<[u8; 32]> {
    let hex = hash.strip_prefix("sha256:")?;
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Whether `name` may name a key: 1 to 64 letters, digits, `_`, `-`, `.` and `@`, not reserved.
/// (No `:`, so a keys-file line `NAME:sha256:<hex>` splits one way only.)
pub fn valid_key_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'))
        && !RESERVED_IDENTITIES.contains(&name)
}

/// `auth.oauth`: the hangar as an OAuth 2.1 resource server (MCP authorization, 2026-07-28).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The authorization server; its metadata is discovered (RFC 8414, then OIDC discovery).
    pub issuer: String,
    /// The canonical resource URI tokens must be minted for (RFC 8707); default: the MCP
    /// endpoint's URL.
    #[serde(default)]
    pub resource: Option<String>,
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// The claim that names the caller's groups.
    #[serde(default = "OAuthConfig::default_profile_claim")]
    pub profile_claim: String,
    /// Group → profile, in order; the first match wins.
    #[serde(default)]
    pub profiles: IndexMap<String, String>,
    /// The profile of a valid token with no matching group; `None`: such a token gets 403.
    #[serde(default)]
    pub default_profile: Option<String>,
    /// Opaque tokens are validated by introspection (RFC 7662) at this endpoint, when given.
    #[serde(default)]
    pub introspection_endpoint: Option<String>,
}

impl OAuthConfig {
    fn default_profile_claim() -> String {
        "groups".into()
    }
}

/// One entry of `profiles:`: what a caller with this profile sees and may do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Globs over server ids; a server outside them does not exist for the caller.
    #[serde(default)]
    pub servers: Vec<String>,
    #[serde(default)]
    pub tools: ToolRules,
    /// May start, stop, restart, reload, and read logs and audit.
    #[serde(default)]
    pub admin: bool,
}

/// Globs over tool names: a tool is allowed when it matches `allow` (default: every tool) and
/// no `deny`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRules {
    #[serde(default = "ToolRules::everything")]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

impl ToolRules {
    fn everything() -> Vec<String> {
        vec!["*".into()]
    }
}

impl Default for ToolRules {
    fn default() -> ToolRules {
        ToolRules { allow: ToolRules::everything(), deny: Vec::new() }
    }
}

/// The `profiles:` block, in config order.
pub type Profiles = IndexMap<String, Profile>;
