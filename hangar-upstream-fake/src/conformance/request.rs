//! One request as the fixtures see it: which wire it came on, what the client
//! declared for it, and the answer a fixture gives.

use serde_json::{Map, Value, json};

use crate::protocol;

pub const MODERN_VERSION: &str = "2026-07-28";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// JSON-RPC code of "unsupported protocol version" (2026-07-28).
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// JSON-RPC code of "missing required client capability" (2026-07-28).
pub const MISSING_CAPABILITY: i64 = -32021;

/// The wire a request came on. Chosen per request, by the modern `_meta`,
/// because one upstream process is spoken to on both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28: stateless, everything the server may use is in `_meta`.
    Modern,
    /// 2025-11-25 and before: `initialize` and `logging/setLevel` set it up.
    Legacy,
}

/// Log levels, least severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl Level {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "debug" => Self::Debug,
            "info" => Self::Info,
            "notice" => Self::Notice,
            "warning" => Self::Warning,
            "error" => Self::Error,
            "critical" => Self::Critical,
            "alert" => Self::Alert,
            "emergency" => Self::Emergency,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        }
    }
}

/// What a fixture answers: a result (complete or input_required) or a
/// JSON-RPC error.
#[derive(Debug, PartialEq)]
pub enum Answer {
    Result(Value),
    Error { code: i64, message: String, data: Option<Value> },
}

impl Answer {
    pub fn error(code: i64, message: impl Into<String>) -> Self {
        Self::Error { code, message: message.into(), data: None }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::error(protocol::INVALID_PARAMS, message)
    }

    pub fn with_data(self, data: Value) -> Self {
        match self {
            Self::Error { code, message, .. } => Self::Error { code, message, data: Some(data) },
            result => result,
        }
    }

    /// The error for a request that needs a capability the client did not
    /// declare; `requiredCapabilities` is a ClientCapabilities object.
    pub fn missing_capability(capability: &str) -> Self {
        Self::error(MISSING_CAPABILITY, format!("the client did not declare the {capability} capability"))
            .with_data(json!({"requiredCapabilities": {capability: {}}}))
    }
}

/// What the legacy wire set up earlier on this connection.
#[derive(Clone, Debug, Default)]
pub struct LegacySetup {
    /// The `capabilities` the client sent with `initialize`.
    pub capabilities: Value,
    /// Set by `logging/setLevel`; `None` sends every level.
    pub log_level: Option<Level>,
}

#[derive(Debug)]
pub struct Req {
    pub params: Map<String, Value>,
    pub era: Era,
    capabilities: Value,
    /// `None`: no log message may be sent for this request.
    log_level: Option<Level>,
}

impl Req {
    /// Reads the era and the client's declarations from `params`; a modern
    /// request with a bad `_meta` is refused as the 2026-07-28 wire says.
    pub fn new(params: Map<String, Value>, legacy: &LegacySetup) -> Result<Self, Answer> {
        let meta = params.get("_meta").and_then(Value::as_object);
        let Some(version) = meta.and_then(|m| m.get(META_VERSION)) else {
            // Legacy servers send log messages until told a level.
            let log_level = Some(legacy.log_level.unwrap_or(Level::Debug));
            return Ok(Self { params, era: Era::Legacy, capabilities: legacy.capabilities.clone(), log_level });
        };
        let meta = meta.cloned().unwrap_or_default();
        if version.as_str() != Some(MODERN_VERSION) {
            return Err(Answer::error(UNSUPPORTED_VERSION, "unsupported protocol version")
                .with_data(json!({"supported": [MODERN_VERSION], "requested": version})));
        }
        let Some(capabilities) = meta.get(META_CAPABILITIES).filter(|c| c.is_object()).cloned() else {
            return Err(Answer::invalid(format!("_meta lacks {META_CAPABILITIES}")));
        };
        let log_level = match meta.get(META_LOG_LEVEL) {
            None => None,
            Some(level) => match level.as_str().and_then(Level::parse) {
                Some(level) => Some(level),
                None => return Err(Answer::invalid(format!("_meta {META_LOG_LEVEL} is not a log level"))),
            },
        };
        Ok(Self { params, era: Era::Modern, capabilities, log_level })
    }

    pub fn modern(&self) -> bool {
        self.era == Era::Modern
    }

    pub fn has_capability(&self, name: &str) -> bool {
        self.capabilities.get(name).is_some_and(|c| !c.is_null())
    }

    /// Whether the client declared extension `name` (under `capabilities.extensions`).
    pub fn has_extension(&self, name: &str) -> bool {
        self.capabilities.get("extensions").and_then(|e| e.get(name)).is_some_and(|e| !e.is_null())
    }

    /// Whether a log message at `level` may be sent for this request.
    pub fn logs(&self, level: Level) -> bool {
        self.log_level.is_some_and(|min| level >= min)
    }

    pub fn progress_token(&self) -> Option<&Value> {
        self.params.get("_meta").and_then(|m| m.get("progressToken")).filter(|t| t.is_string() || t.is_number())
    }

    /// A string parameter, or the -32602 naming it.
    pub fn str_param(&self, key: &str) -> Result<&str, Answer> {
        self.params.get(key).and_then(Value::as_str).ok_or_else(|| Answer::invalid(format!("missing string {key}")))
    }

    /// `arguments`: absent and null both mean none.
    pub fn arguments(&self) -> Result<Map<String, Value>, Answer> {
        match self.params.get("arguments") {
            None | Some(Value::Null) => Ok(Map::new()),
            Some(Value::Object(args)) => Ok(args.clone()),
            Some(_) => Err(Answer::invalid("arguments must be an object")),
        }
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A modern request with `params` plus the `_meta` entries in `meta`.
    pub fn modern(mut params: Value, meta: Value) -> Req {
        let mut full = json!({
            META_VERSION: MODERN_VERSION,
            META_CAPABILITIES: {"sampling": {}, "elicitation": {}, "roots": {}},
        });
        if let (Some(full), Some(extra)) = (full.as_object_mut(), meta.as_object()) {
            full.extend(extra.clone());
        }
        params["_meta"] = full;
        Req::new(params.as_object().cloned().unwrap_or_default(), &LegacySetup::default()).unwrap()
    }

    pub fn legacy(params: Value, setup: &LegacySetup) -> Req {
        Req::new(params.as_object().cloned().unwrap_or_default(), setup).unwrap()
    }

    fn refused(meta: Value) -> Answer {
        Req::new(json!({"_meta": meta}).as_object().cloned().unwrap_or_default(), &LegacySetup::default()).unwrap_err()
    }

    #[test]
    fn the_modern_meta_decides_the_era() {
        assert_eq!(modern(json!({}), json!({})).era, Era::Modern);
        assert_eq!(legacy(json!({"_meta": {"progressToken": 1}}), &LegacySetup::default()).era, Era::Legacy);
    }

    #[test]
    fn bad_modern_meta_is_refused() {
        let Answer::Error { code, data, .. } = refused(json!({META_VERSION: "1999-01-01", META_CAPABILITIES: {}}))
        else {
            panic!("expected an error");
        };
        assert_eq!(code, UNSUPPORTED_VERSION);
        assert_eq!(data, Some(json!({"supported": ["2026-07-28"], "requested": "1999-01-01"})));
        assert!(matches!(refused(json!({META_VERSION: MODERN_VERSION})), Answer::Error { code: -32602, .. }));
        let bad_level = json!({META_VERSION: MODERN_VERSION, META_CAPABILITIES: {}, META_LOG_LEVEL: "loud"});
        assert!(matches!(refused(bad_level), Answer::Error { code: -32602, .. }));
    }

    #[test]
    fn modern_logs_only_with_a_log_level_legacy_until_told_otherwise() {
        assert!(!modern(json!({}), json!({})).logs(Level::Emergency));
        let req = modern(json!({}), json!({META_LOG_LEVEL: "info"}));
        assert!(req.logs(Level::Info) && !req.logs(Level::Debug));
        assert!(legacy(json!({}), &LegacySetup::default()).logs(Level::Debug));
        let quiet = LegacySetup { log_level: Some(Level::Error), ..LegacySetup::default() };
        assert!(!legacy(json!({}), &quiet).logs(Level::Info));
    }

    #[test]
    fn capabilities_come_from_meta_or_initialize() {
        let req = modern(json!({}), json!({META_CAPABILITIES: {"sampling": {}}}));
        assert!(req.has_capability("sampling") && !req.has_capability("elicitation"));
        let setup = LegacySetup { capabilities: json!({"elicitation": {}}), log_level: None };
        assert!(legacy(json!({}), &setup).has_capability("elicitation"));
        assert!(!legacy(json!({}), &LegacySetup::default()).has_capability("elicitation"));
    }

    #[test]
    fn progress_tokens_and_arguments() {
        let req = legacy(json!({"_meta": {"progressToken": "p-1"}, "arguments": null}), &LegacySetup::default());
        assert_eq!(req.progress_token(), Some(&json!("p-1")));
        assert_eq!(req.arguments(), Ok(Map::new()));
        let req = legacy(json!({"arguments": [1]}), &LegacySetup::default());
        assert!(req.arguments().is_err());
        assert!(req.progress_token().is_none());
    }
}
