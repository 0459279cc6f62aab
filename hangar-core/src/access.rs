//! Who may call, and what they may use: the `auth:` and `profiles:` blocks of the config, and
//! [`Caller`], the identity every request over the control socket carries.
//!
//! The API authenticates (a named key, an OAuth token) and names a [`Caller`]; the supervisor
//! authorizes against the caller's [`Profile`] and records the decision. What operators write
//! and see: `docs/auth.md`; every key: `docs/config.md`, generated from the doc comments here.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Who is calling, as the API authenticated them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    /// A key's name, `oauth:` and a token's subject (see [`Caller::oauth`]), or [`ANONYMOUS`].
    pub identity: String,
    /// The profile naming what the caller may see and do; `None` sees and does everything
    /// (the anonymous caller when no `auth` is configured, and the hangar's own helpers).
    pub profile: Option<String>,
}

/// The identity of every caller when no `auth` is configured (loopback only).
pub const ANONYMOUS: &str = "anonymous";
/// The identity of the hangar's own clients (the prober, the API asking for its settings).
pub const HANGAR: &str = "hangar";
/// Identities no key may take, and no token gets (a token's are always prefixed).
pub const RESERVED_IDENTITIES: [&str; 2] = [ANONYMOUS, HANGAR];
/// What every OAuth caller's identity starts with, and no key's name may: a token whose `sub`
/// is `alice` is `oauth:alice`, never the key named `alice`, and `sub: hangar` is
/// `oauth:hangar`, never the hangar itself.
pub const OAUTH_PREFIX: &str = "oauth:";

impl Caller {
    /// The caller when no `auth` is configured: sees everything, may do everything.
    pub fn anonymous() -> Caller {
        Caller { identity: ANONYMOUS.into(), profile: None }
    }

    /// The hangar's own clients (the prober, the API's own requests): they see everything.
    /// Only peers of the control socket can send it, and that socket serves only a peer that
    /// proved the control key and lies outside every upstream's process tree.
    pub fn hangar() -> Caller {
        Caller { identity: HANGAR.into(), profile: None }
    }

    /// The caller a token names: its subject (`sub`, else `client_id`) under [`OAUTH_PREFIX`],
    /// so no token can take a key's name or a reserved one.
    pub fn oauth(subject: &str, profile: String) -> Caller {
        Caller { identity: format!("{OAUTH_PREFIX}{subject}"), profile: Some(profile) }
    }
}

/// The `auth:` block. Empty (no keys, no OAuth) means no authentication: loopback only, and
/// every caller is [`Caller::anonymous`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Named API keys, each by the hash of its secret; a caller presents the key as a bearer
    /// token. Default: none.
    #[serde(default)]
    pub api_keys: Vec<NamedKey>,
    /// The hangar as an OAuth 2.1 resource server: bearer tokens from this issuer are
    /// accepted. Default: none.
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NamedKey {
    /// The caller's identity: 1 to 64 letters, digits, `_`, `-`, `.` and `@`, unique, not
    /// `anonymous` or `hangar`, not starting with `oauth:`.
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9_.@-]+$"))]
    pub name: String,
    /// `sha256:<64 hex digits>`, the hash of the key (e.g. from `printf %s KEY | sha256sum`);
    /// no two keys share one.
    #[schemars(regex(pattern = "^sha256:[0-9A-Fa-f]{64}$"))]
    pub hash: String,
    /// The profile (a key of `profiles:`) naming what this key's caller sees and may do.
    /// Default: none, so it sees and does everything, as every key did before profiles.
    #[serde(default)]
    pub profile: Option<String>,
}

/// The digest of a key's hash as written in the config or a keys file: `sha256:<64 hex digits>`.
pub fn parse_key_hash(hash: &str) -> Option<[u8; 32]> {
    parse_hex_32(hash.strip_prefix("sha256:")?)
}

/// The 32 bytes that 64 hex digits write (a key's hash, the control key), `None` for anything
/// else.
pub fn parse_hex_32(hex: &str) -> Option<[u8; 32]> {
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
/// (No `:`, so a keys-file line `NAME:sha256:<hex>` splits one way only, and no key's name is
/// ever an OAuth identity.)
pub fn valid_key_name(name: &str) -> bool {
    key_name_problem(name).is_none()
}

/// Why `name` cannot name a key, in words fit for a config error (the name itself is not
/// repeated: the caller names the key by its path).
pub fn key_name_problem(name: &str) -> Option<&'static str> {
    if name.starts_with(OAUTH_PREFIX) {
        return Some("a key's name may not start with `oauth:`: that is where OAuth callers' identities live");
    }
    if RESERVED_IDENTITIES.contains(&name) {
        return Some("`anonymous` and `hangar` are reserved: they name no key and no token");
    }
    let shaped = (1..=64).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'));
    (!shaped).then_some("a key's name is 1 to 64 letters, digits, '_', '-', '.' and '@'")
}

/// `auth.oauth`: the hangar as an OAuth 2.1 resource server (MCP authorization, 2026-07-28).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The authorization server, an https:// URL (http:// only on a loopback host); its
    /// metadata is discovered (RFC 8414, then OIDC discovery).
    pub issuer: String,
    /// The canonical resource URI tokens must be minted for (RFC 8707); default: the MCP
    /// endpoint's URL.
    #[serde(default)]
    pub resource: Option<String>,
    /// The scopes the protected-resource metadata lists. Default: none.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// Scopes every token must carry; one without them is refused (403,
    /// `insufficient_scope`). Default: none.
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// The claim that names the caller's groups, which `profiles` maps to profiles.
    #[serde(default = "OAuthConfig::default_profile_claim")]
    #[schemars(length(min = 1))]
    pub profile_claim: String,
    /// Group → profile (a key of `profiles:`), in order; the first match wins. Default: none.
    #[serde(default)]
    pub profiles: IndexMap<String, String>,
    /// The profile of a valid token with no matching group. Default: none, so such a token
    /// gets 403.
    #[serde(default)]
    pub default_profile: Option<String>,
    /// Where opaque tokens (bearer tokens that are not a JWS) are validated by introspection
    /// (RFC 7662). Default: none, so only JWTs are accepted.
    // Boxed: rarely set, and it would make every `auth:` block, and so every control reply,
    // larger.
    #[serde(default)]
    pub introspection: Option<Box<IntrospectionConfig>>,
    /// How often the issuer's keys are fetched again, in seconds (sooner when its JWKS answer's
    /// `Cache-Control: max-age` says so), so a key the issuer stops publishing stops being
    /// trusted within this time. From 1 to 86400 (a day).
    #[serde(default = "OAuthConfig::default_jwks_refresh_s")]
    #[schemars(range(min = JWKS_REFRESH_RANGE_S.0, max = JWKS_REFRESH_RANGE_S.1))]
    pub jwks_refresh_s: f64,
}

/// `auth.oauth.introspection`: where opaque tokens are introspected, and as which client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionConfig {
    /// The authorization server's introspection endpoint (https; http only on a loopback host).
    pub endpoint: String,
    /// The hangar's client at the authorization server (the endpoint needs client authentication).
    pub client_id: String,
    /// An absolute path to a file holding the client's secret (a trailing newline is dropped):
    /// a secret is never written in the config, and never logged.
    pub client_secret_file: std::path::PathBuf,
}

/// The largest client secret file read.
pub const MAX_SECRET_FILE_BYTES: u64 = 4096;

/// The secret in a client secret file, without its trailing newline; `Err` says why none.
pub fn read_client_secret(path: &std::path::Path) -> Result<String, String> {
    let text = crate::small_file::read_regular(path, MAX_SECRET_FILE_BYTES).map_err(|err| err.to_string())?;
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.is_empty() {
        return Err("the file is empty".into());
    }
    Ok(secret.to_owned())
}

impl OAuthConfig {
    fn default_profile_claim() -> String {
        "groups".into()
    }

    fn default_jwks_refresh_s() -> f64 {
        DEFAULT_JWKS_REFRESH_S
    }

    /// `jwks_refresh_s` as a duration (validated: within [`JWKS_REFRESH_RANGE_S`]).
    pub fn jwks_refresh(&self) -> std::time::Duration {
        let (least, most) = JWKS_REFRESH_RANGE_S;
        let seconds = if self.jwks_refresh_s.is_nan() { DEFAULT_JWKS_REFRESH_S } else { self.jwks_refresh_s };
        std::time::Duration::from_secs_f64(seconds.clamp(least, most))
    }
}

/// `auth.oauth.jwks_refresh_s` by default: five minutes.
pub const DEFAULT_JWKS_REFRESH_S: f64 = 300.0;
/// The values `auth.oauth.jwks_refresh_s` may take: a second to a day.
pub const JWKS_REFRESH_RANGE_S: (f64, f64) = (1.0, 86_400.0);

/// One entry of `profiles:`: what a caller with this profile sees and may do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Globs over server ids; a server outside them does not exist for the caller. Default:
    /// none, so the caller sees no server.
    #[serde(default)]
    pub servers: Vec<String>,
    /// Globs over the tools it may call, on the servers it sees.
    #[serde(default)]
    pub tools: ToolRules,
    /// May start, stop, restart, reload, and read logs and audit. Default: `false`.
    #[serde(default)]
    pub admin: bool,
    /// Rules on its calls, by tool and arguments (`when`, a CEL expression), the first that
    /// matches deciding `allow` or `deny`; none matching allows. Default: none.
    #[serde(default)]
    pub rules: Vec<crate::rules::Rule>,
    /// Quotas for each identity holding the profile: a rate limit on its calls, rate limits per
    /// tool, calls per UTC day. Default: none.
    #[serde(default)]
    pub limits: crate::quotas::ProfileLimits,
    /// May approve or deny the calls waiting for a person (a rule's `then: approve`), anyone's
    /// but its own (unless `approvals.self_approve`). An admin may too. Default: `false`.
    #[serde(default)]
    pub approver: bool,
}

/// Globs over tool names: a tool is allowed when it matches `allow` (default: every tool) and
/// no `deny`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRules {
    /// Globs over tool names a caller may call.
    #[serde(default = "ToolRules::everything")]
    pub allow: Vec<String>,
    /// Globs over tool names refused even when `allow` matches. Default: none.
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

/// A key of `auth.oauth` that cannot be used: its dotted path and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidKey {
    pub key: String,
    pub message: String,
}

/// Checks `auth.oauth` against itself and `profiles`: the issuer is https (plain http only on a
/// loopback host, for local IdPs and tests), the resource an absolute URL without a fragment, and
/// every profile it names exists.
pub fn validate_oauth(oauth: &OAuthConfig, profiles: &Profiles) -> Result<(), InvalidKey> {
    let invalid = |key: &str, message: String| InvalidKey { key: format!("auth.oauth.{key}"), message };
    if !secure_url(&oauth.issuer) {
        return Err(invalid(
            "issuer",
            "expected an https:// URL (http:// only on a loopback host such as 127.0.0.1), e.g. https://idp.example.com".into(),
        ));
    }
    if let Some(resource) = &oauth.resource {
        let parsed = url::Url::parse(resource);
        if !parsed.is_ok_and(|url| url.has_host() && url.fragment().is_none()) {
            return Err(invalid(
                "resource",
                "expected an absolute URL without a fragment, e.g. https://hangar.example.com/mcp".into(),
            ));
        }
    }
    if let Some(introspection) = &oauth.introspection {
        validate_introspection(introspection)
            .map_err(|(key, message)| invalid(&format!("introspection.{key}"), message))?;
    }
    for (group, profile) in &oauth.profiles {
        if !profiles.contains_key(profile) {
            return Err(invalid(&format!("profiles.{group}"), unknown_profile(profile, profiles)));
        }
    }
    if let Some(profile) = &oauth.default_profile
        && !profiles.contains_key(profile)
    {
        return Err(invalid("default_profile", unknown_profile(profile, profiles)));
    }
    if oauth.profile_claim.is_empty() {
        return Err(invalid("profile_claim", "expected the name of a claim, e.g. groups".into()));
    }
    let (least, most) = JWKS_REFRESH_RANGE_S;
    if !(least..=most).contains(&oauth.jwks_refresh_s) {
        return Err(invalid(
            "jwks_refresh_s",
            format!("expected a number of seconds from {least} to {most} (a day), e.g. 300"),
        ));
    }
    Ok(())
}

/// `auth.oauth.introspection`: a secure endpoint, a client, and a readable, non-empty secret
/// file (`Err((key, why))`; the secret itself is never part of a message).
fn validate_introspection(introspection: &IntrospectionConfig) -> Result<(), (&'static str, String)> {
    if !secure_url(&introspection.endpoint) {
        return Err((
            "endpoint",
            "expected an https:// URL (http:// only on a loopback host such as 127.0.0.1), e.g. https://idp.example.com/token/introspection".into(),
        ));
    }
    if introspection.client_id.is_empty() {
        return Err(("client_id", "expected the hangar's client id at the authorization server".into()));
    }
    let path = &introspection.client_secret_file;
    if !path.is_absolute() {
        return Err(("client_secret_file", "expected an absolute path, e.g. /etc/hangar/introspection-secret".into()));
    }
    read_client_secret(path).map(drop).map_err(|why| ("client_secret_file", format!("{}: {why}", path.display())))
}

/// An https URL with a host, or http on a loopback host (local IdPs and tests).
fn secure_url(text: &str) -> bool {
    match url::Url::parse(text) {
        Ok(url) if url.scheme() == "https" && url.host().is_some() => true,
        Ok(url) if url.scheme() == "http" && url.host().is_some_and(|host| is_loopback(&host)) => true,
        _ => false,
    }
}

fn is_loopback(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    }
}

fn unknown_profile(profile: &str, profiles: &Profiles) -> String {
    let known: Vec<&str> = profiles.keys().map(String::as_str).collect();
    if known.is_empty() {
        format!("no profile `{profile}`: `profiles:` defines none")
    } else {
        format!("no profile `{profile}` (profiles: {})", known.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth(issuer: &str) -> OAuthConfig {
        OAuthConfig {
            issuer: issuer.into(),
            resource: None,
            scopes_supported: Vec::new(),
            required_scopes: Vec::new(),
            profile_claim: OAuthConfig::default_profile_claim(),
            profiles: IndexMap::new(),
            default_profile: None,
            introspection: None,
            jwks_refresh_s: DEFAULT_JWKS_REFRESH_S,
        }
    }

    #[test]
    fn jwks_refresh_s_is_a_second_to_a_day() {
        let none = Profiles::default();
        let mut config = oauth("https://idp.example.com");
        assert_eq!(config.jwks_refresh(), std::time::Duration::from_secs(300));
        for good in [1.0, 2.5, 86_400.0] {
            config.jwks_refresh_s = good;
            assert!(validate_oauth(&config, &none).is_ok(), "{good}");
        }
        for bad in [0.0, -5.0, 0.5, 86_401.0, f64::NAN, f64::INFINITY] {
            config.jwks_refresh_s = bad;
            assert_eq!(validate_oauth(&config, &none).unwrap_err().key, "auth.oauth.jwks_refresh_s", "{bad}");
        }
    }

    #[test]
    fn key_names_stay_apart_from_token_identities_and_the_reserved_ones() {
        assert!(valid_key_name("alice") && valid_key_name("ci-bot@x.y"));
        for (bad, why) in
            [("oauth:alice", "oauth:"), ("oauth:", "oauth:"), ("hangar", "reserved"), ("anonymous", "reserved")]
        {
            assert!(key_name_problem(bad).is_some_and(|m| m.contains(why)), "{bad}");
        }
        for bad in ["", "a b", "x:y", &"a".repeat(65)] {
            assert!(!valid_key_name(bad), "{bad}");
        }
        let token = Caller::oauth("hangar", "dev".into());
        assert_eq!(token.identity, "oauth:hangar");
        assert_ne!(token, Caller::hangar());
    }

    #[test]
    fn introspection_needs_a_secure_endpoint_a_client_and_a_secret_file() {
        let dir = std::env::temp_dir().join(format!("hangar-introspection-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("secret");
        std::fs::write(&secret, "s3cret\n").unwrap();
        std::fs::write(dir.join("empty"), "\n").unwrap();
        assert_eq!(read_client_secret(&secret), Ok("s3cret".into()));
        let none = Profiles::default();
        let mut config = oauth("https://idp.example.com");
        let with = |endpoint: &str, client_id: &str, file: std::path::PathBuf| IntrospectionConfig {
            endpoint: endpoint.into(),
            client_id: client_id.into(),
            client_secret_file: file,
        };
        config.introspection = Some(Box::new(with("https://idp.example.com/introspect", "hangar", secret.clone())));
        assert!(validate_oauth(&config, &none).is_ok());
        for (introspection, key) in [
            (with("http://idp.example.com/introspect", "hangar", secret.clone()), "endpoint"),
            (with("https://idp.example.com/introspect", "", secret.clone()), "client_id"),
            (with("https://idp.example.com/introspect", "hangar", "secret".into()), "client_secret_file"),
            (with("https://idp.example.com/introspect", "hangar", dir.join("missing")), "client_secret_file"),
            (with("https://idp.example.com/introspect", "hangar", dir.join("empty")), "client_secret_file"),
        ] {
            config.introspection = Some(Box::new(introspection));
            let err = validate_oauth(&config, &none).unwrap_err();
            assert_eq!(err.key, format!("auth.oauth.introspection.{key}"));
            assert!(!err.message.contains("s3cret"), "{}", err.message);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_issuer_is_https_or_loopback_http() {
        let none = Profiles::default();
        assert!(validate_oauth(&oauth("https://idp.example.com"), &none).is_ok());
        assert!(validate_oauth(&oauth("http://127.0.0.1:4000"), &none).is_ok());
        assert!(validate_oauth(&oauth("http://localhost:4000/realm"), &none).is_ok());
        assert!(validate_oauth(&oauth("http://[::1]:4000"), &none).is_ok());
        for bad in
            ["http://idp.example.com", "idp.example.com", "ftp://idp", "https://", "http://127.0.0.1.example.com"]
        {
            assert_eq!(validate_oauth(&oauth(bad), &none).unwrap_err().key, "auth.oauth.issuer", "{bad}");
        }
    }

    #[test]
    fn the_resource_is_absolute_without_fragment_and_profiles_exist() {
        let mut profiles = Profiles::default();
        profiles.insert("dev".into(), Profile::default());
        let mut config = oauth("https://idp.example.com");
        config.resource = Some("https://hangar.example.com/mcp#x".into());
        assert_eq!(validate_oauth(&config, &profiles).unwrap_err().key, "auth.oauth.resource");
        config.resource = Some("/mcp".into());
        assert_eq!(validate_oauth(&config, &profiles).unwrap_err().key, "auth.oauth.resource");
        config.resource = Some("https://hangar.example.com/mcp".into());
        config.profiles.insert("developers".into(), "dev".into());
        assert!(validate_oauth(&config, &profiles).is_ok());
        config.profiles.insert("ops".into(), "admin".into());
        let err = validate_oauth(&config, &profiles).unwrap_err();
        assert_eq!(err.key, "auth.oauth.profiles.ops");
        assert!(err.message.contains("admin") && err.message.contains("dev"), "{}", err.message);
        config.profiles.shift_remove("ops");
        config.default_profile = Some("nobody".into());
        assert_eq!(validate_oauth(&config, &profiles).unwrap_err().key, "auth.oauth.default_profile");
    }
}
