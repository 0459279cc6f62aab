//! The MCP Registry's read API (`/v0.1/servers`), as the official registry and its mirrors serve
//! it, and the `server.json` shapes it answers with.
//!
//! - `GET /v0.1/servers?search=TEXT&version=latest&cursor=C`: a page of [`ServerResponse`]s and
//!   `metadata.nextCursor`;
//! - `GET /v0.1/servers/{name}/versions/{version|latest}?include_deleted=true`: one
//!   [`ServerResponse`], the registry's `_meta` (`io.modelcontextprotocol.registry/official`:
//!   `status` active, deprecated or deleted) beside the publisher's `server`.
//!
//! Every request has a connect and a total timeout and a bounded body; what the registry says
//! is data, shown only through `hangar_core::terminal::visible`.

use std::time::Duration;

use indexmap::IndexMap;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::client::segment;
use crate::setup::SetupError;

/// The official registry.
pub const DEFAULT_REGISTRY: &str = "https://registry.modelcontextprotocol.io";

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// One answer of the API, whole.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// A package download (an `mcpb` bundle), whole.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// The largest API answer read.
const MAX_ANSWER_BYTES: u64 = 8 * 1024 * 1024;
/// The largest package downloaded to check its digest.
pub const MAX_DOWNLOAD_BYTES: u64 = 512 * 1024 * 1024;

/// One entry of the registry: the publisher's `server.json` and the registry's own metadata.
#[derive(Debug, Clone, Deserialize)]
pub struct ServerResponse {
    pub server: ServerDetail,
    #[serde(rename = "_meta", default)]
    pub meta: ResponseMeta,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResponseMeta {
    #[serde(rename = "io.modelcontextprotocol.registry/official")]
    pub official: Option<Official>,
}

/// `io.modelcontextprotocol.registry/official`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Official {
    /// `active`, `deprecated` or `deleted`.
    pub status: Option<String>,
    pub status_message: Option<String>,
}

impl ServerResponse {
    pub fn status(&self) -> &str {
        self.meta.official.as_ref().and_then(|o| o.status.as_deref()).unwrap_or("active")
    }

    pub fn status_message(&self) -> Option<&str> {
        self.meta.official.as_ref().and_then(|o| o.status_message.as_deref())
    }
}

/// A `server.json`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerDetail {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub packages: Vec<Package>,
    #[serde(default)]
    pub remotes: Vec<Transport>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    /// `npm`, `pypi`, `nuget`, `oci`, `mcpb`, `cargo`, ...
    pub registry_type: String,
    /// A package name, or (`mcpb`) the bundle's URL.
    pub identifier: String,
    pub version: Option<String>,
    pub file_sha256: Option<String>,
    /// `npx`, `uvx`, `dnx`, `docker`, ...
    pub runtime_hint: Option<String>,
    pub transport: Option<Transport>,
    #[serde(default)]
    pub runtime_arguments: Vec<Argument>,
    #[serde(default)]
    pub package_arguments: Vec<Argument>,
    #[serde(default)]
    pub environment_variables: Vec<KeyValueInput>,
}

/// A package's transport (`stdio`, `streamable-http`, `sse`), or a remote.
#[derive(Debug, Clone, Deserialize)]
pub struct Transport {
    #[serde(rename = "type")]
    pub kind: String,
    /// A URL template: `{name}` is replaced by the variable, argument or variable of that name.
    pub url: Option<String>,
    #[serde(default)]
    pub headers: Vec<KeyValueInput>,
    #[serde(default)]
    pub variables: IndexMap<String, Input>,
}

/// A value the user may be asked for.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    pub description: Option<String>,
    #[serde(default)]
    pub is_required: bool,
    pub format: Option<String>,
    /// A fixed value (a template: `{name}` is replaced by `variables[name]`).
    pub value: Option<String>,
    #[serde(default)]
    pub is_secret: bool,
    pub default: Option<String>,
    #[serde(default)]
    pub choices: Vec<String>,
    #[serde(default)]
    pub variables: IndexMap<String, Input>,
}

/// A `positional` or `named` command-line argument.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Argument {
    #[serde(rename = "type")]
    pub kind: String,
    /// A named argument's flag, dashes included (`--port`).
    pub name: Option<String>,
    /// A positional argument's label (`target_dir`).
    pub value_hint: Option<String>,
    #[serde(default)]
    pub is_repeated: bool,
    #[serde(flatten)]
    pub input: Input,
}

/// An environment variable or a header.
#[derive(Debug, Clone, Deserialize)]
pub struct KeyValueInput {
    pub name: String,
    #[serde(flatten)]
    pub input: Input,
}

/// A page of `GET /v0.1/servers`.
#[derive(Debug, Deserialize)]
pub struct ServerList {
    pub servers: Vec<ServerResponse>,
    #[serde(default)]
    pub metadata: ListMetadata,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMetadata {
    pub next_cursor: Option<String>,
}

/// A registry's read API.
pub struct Registry {
    base: String,
    agent: ureq::Agent,
}

impl Registry {
    /// The registry at `url` (`http://` or `https://`, no path beyond its base).
    pub fn new(url: &str) -> Result<Registry, SetupError> {
        let base = url.trim_end_matches('/');
        let rest = base.strip_prefix("https://").or_else(|| base.strip_prefix("http://"));
        if rest.is_none_or(str::is_empty) {
            return Err(SetupError::Usage(format!("--registry {url}: an http:// or https:// URL")));
        }
        let tls = ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::PlatformVerifier).build();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(REQUEST_TIMEOUT))
            .tls_config(tls)
            .user_agent(concat!("hangar/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Registry { base: base.to_owned(), agent })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// One version (`latest` for the newest) of the server `name`, deleted ones included (so
    /// that a deleted one is refused as such, not as unknown).
    pub fn server(&self, name: &str, version: &str) -> Result<ServerResponse, SetupError> {
        let path = format!("/v0.1/servers/{}/versions/{}?include_deleted=true", segment(name), segment(version));
        self.get_json(&path)
    }

    /// One page of the servers whose name holds `search`, newest versions only.
    pub fn page(&self, search: &str, cursor: Option<&str>) -> Result<ServerList, SetupError> {
        let mut path = format!("/v0.1/servers?search={}&version=latest", segment(search));
        if let Some(cursor) = cursor {
            path.push_str(&format!("&cursor={}", segment(cursor)));
        }
        self.get_json(&path)
    }

    fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, SetupError> {
        let url = format!("{}{path}", self.base);
        let unreachable = |err: ureq::Error| SetupError::Unreachable { url: url.clone(), reason: err.to_string() };
        let mut response = self.agent.get(&url).header("Accept", "application/json").call().map_err(unreachable)?;
        let status = response.status().as_u16();
        let text = response.body_mut().with_config().limit(MAX_ANSWER_BYTES).read_to_string().map_err(unreachable)?;
        if status >= 400 {
            let said = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|body| body["error"].as_str().or(body["detail"].as_str()).map(str::to_owned))
                .unwrap_or(text);
            return Err(SetupError::Registry { url, status, text: said.chars().take(300).collect() });
        }
        serde_json::from_str(&text).map_err(|err| SetupError::Protocol { url, reason: err.to_string() })
    }
}

/// Downloads `url` (bounded in size and time) and returns its SHA-256, hex.
pub fn sha256_of(url: &str) -> Result<String, SetupError> {
    use sha2::{Digest, Sha256};
    let registry = Registry::new(url)?;
    let unreachable = |err: ureq::Error| SetupError::Unreachable { url: url.to_owned(), reason: err.to_string() };
    let mut response =
        registry.agent.get(url).config().timeout_global(Some(DOWNLOAD_TIMEOUT)).build().call().map_err(unreachable)?;
    let status = response.status().as_u16();
    if status >= 400 {
        return Err(SetupError::Registry { url: url.to_owned(), status, text: String::new() });
    }
    let bytes = response.body_mut().with_config().limit(MAX_DOWNLOAD_BYTES).read_to_vec().map_err(unreachable)?;
    Ok(Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect())
}

/// A `server.json` from a file: the publisher's shape, or an entry as a registry serves it.
pub fn parse_server_json(text: &str) -> Result<ServerResponse, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if value.get("server").is_some_and(serde_json::Value::is_object) {
        serde_json::from_value(value).map_err(|e| e.to_string())
    } else {
        let server = serde_json::from_value(value).map_err(|e| e.to_string())?;
        Ok(ServerResponse { server, meta: ResponseMeta::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_official_shapes() {
        let entry = r#"{"server": {"$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
            "name": "io.github.x/fs", "description": "Files", "version": "1.2.3",
            "packages": [{"registryType": "npm", "identifier": "@x/fs", "version": "1.2.3", "transport": {"type": "stdio"},
              "packageArguments": [{"type": "positional", "valueHint": "target_dir", "isRequired": true, "isRepeated": true}],
              "environmentVariables": [{"name": "TOKEN", "isSecret": true, "isRequired": true, "description": "a token"}]}],
            "remotes": [{"type": "streamable-http", "url": "https://{region}.x.example/mcp",
              "variables": {"region": {"default": "eu", "choices": ["eu", "us"]}},
              "headers": [{"name": "Authorization", "value": "Bearer {token}", "variables": {"token": {"isSecret": true}}}]}]},
          "_meta": {"io.modelcontextprotocol.registry/official": {"status": "deprecated", "statusMessage": "use fs2", "isLatest": true}}}"#;
        let entry = parse_server_json(entry).unwrap();
        assert_eq!((entry.status(), entry.status_message()), ("deprecated", Some("use fs2")));
        let package = &entry.server.packages[0];
        assert_eq!(package.package_arguments[0].value_hint.as_deref(), Some("target_dir"));
        assert!(package.package_arguments[0].input.is_required && package.package_arguments[0].is_repeated);
        assert!(package.environment_variables[0].input.is_secret);
        let remote = &entry.server.remotes[0];
        assert_eq!(remote.variables["region"].choices, ["eu", "us"]);
        assert!(remote.headers[0].input.variables["token"].is_secret);
        let bare = parse_server_json(r#"{"name": "a/b", "version": "1", "description": "d"}"#).unwrap();
        assert_eq!((bare.server.name.as_str(), bare.status()), ("a/b", "active"));
        assert!(parse_server_json("[1]").is_err());
    }

    #[test]
    fn the_name_is_one_encoded_segment_and_a_wrong_answer_says_which() {
        use hangar_runtime::exit::Sysexit;
        let (url, server) = crate::testing::answer_once("200 OK", r#"{"servers": "not a list"}"#);
        let err = Registry::new(&url).unwrap().server("io.github.x/fs", "1.0.0+b").unwrap_err();
        let head = server.join().unwrap();
        assert!(
            head.starts_with("GET /v0.1/servers/io.github.x%2Ffs/versions/1.0.0%2Bb?include_deleted=true "),
            "{head}"
        );
        assert_eq!(err.exit_code(), 76, "{err}");
        let (url, server) = crate::testing::answer_once("503 Service Unavailable", r#"{"error": "down for upgrade"}"#);
        let err = Registry::new(&url).unwrap().page("file system", Some("c/1")).unwrap_err();
        let head = server.join().unwrap();
        assert!(head.starts_with("GET /v0.1/servers?search=file%20system&version=latest&cursor=c%2F1 "), "{head}");
        assert_eq!((err.exit_code(), err.to_string().contains("down for upgrade")), (69, true), "{err}");
    }

    #[test]
    fn a_registry_url_is_http_or_https() {
        assert!(Registry::new("ftp://x").is_err());
        assert!(Registry::new("https://").is_err());
        assert_eq!(Registry::new("http://127.0.0.1:1/").unwrap().base(), "http://127.0.0.1:1");
    }
}
