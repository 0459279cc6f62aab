//! `redaction:`: secrets and personal data kept out of what upstreams return (tool results,
//! resource contents, prompt texts), on every surface alike.
//!
//! Built-in detectors ([`Detector`]) and the config's own `patterns` are compiled once, at load
//! (a pattern that does not compile refuses the config at its key path). A result is scanned by
//! its string values, keys left alone: one [`RegexSet`] pass tells whether any string holds
//! anything (the usual answer: no, and nothing is copied); only a string that does is rewritten.
//! With `action: mask` each finding becomes `[REDACTED:<name>]`; with `drop_call` the whole
//! result is withheld. What was found is told by name only ([`Redacted::found`]), never by value.

use std::collections::BTreeSet;

use regex::{Regex, RegexSet};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::key_error::KeyError;

/// `redaction:` as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedactionConfig {
    /// Built-in detectors to run. Default: none (redaction off unless `patterns` are given).
    #[serde(default)]
    pub detect: Vec<Detector>,
    /// Patterns of your own: a `name` (letters, digits, `_`) and a `regex` (Rust syntax,
    /// at most 1024 bytes).
    #[serde(default)]
    pub patterns: Vec<Pattern>,
    /// What a finding does: `mask` replaces it with `[REDACTED:<name>]`; `drop_call` withholds
    /// the whole result (the call is refused, `forbidden`). Default: `mask`.
    #[serde(default)]
    pub action: Action,
}

/// A built-in detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Detector {
    /// AWS access key ids (`AKIA…`, `ASIA…`).
    AwsAccessKey,
    /// GitHub tokens (`ghp_…`, `gho_…`, `ghu_…`, `ghs_…`, `ghr_…`, `github_pat_…`).
    GithubToken,
    /// PEM private keys, from `-----BEGIN … PRIVATE KEY-----` to its end.
    PrivateKey,
    /// JSON Web Tokens (three base64url parts, the first two JSON objects).
    Jwt,
    /// E-mail addresses.
    Email,
    /// Payment card numbers (13 to 19 digits, spaces or dashes between, passing the Luhn check).
    CreditCard,
}

impl Detector {
    pub fn as_str(self) -> &'static str {
        crate::wire_name::of(&self)
    }

    fn regex(self) -> &'static str {
        match self {
            Detector::AwsAccessKey => r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
            Detector::GithubToken => r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
            Detector::PrivateKey => {
                r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)"
            }
            Detector::Jwt => r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
            Detector::Email => r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
            Detector::CreditCard => r"\b\d(?:[ -]?\d){12,18}\b",
        }
    }
}

/// A pattern of the config's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pattern {
    #[schemars(regex(pattern = r"^[A-Za-z0-9_]{1,64}$"))]
    pub name: String,
    #[schemars(length(min = 1, max = 1024))]
    pub regex: String,
}

/// What a finding does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    #[default]
    Mask,
    DropCall,
}

/// The detectors and patterns, compiled.
#[derive(Debug, Default)]
pub struct Redaction {
    /// Whether any string holds a finding, in one pass.
    any: Option<RegexSet>,
    each: Vec<Finder>,
    action: Action,
}

#[derive(Debug)]
struct Finder {
    name: String,
    regex: Regex,
    /// Card numbers: only those passing the Luhn check.
    luhn: bool,
}

/// What redaction did to one result.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Redacted {
    /// The names of what was found (detectors and patterns), in order; empty: nothing.
    pub found: BTreeSet<String>,
    /// With `drop_call`, and something found: the result must not be returned.
    pub withheld: bool,
}

impl Redaction {
    /// Compiles `redaction:`; a pattern that does not compile is an error at its key path.
    pub fn compile(config: &RedactionConfig) -> Result<Redaction, KeyError> {
        let mut each = Vec::new();
        let detectors: BTreeSet<Detector> = config.detect.iter().copied().collect();
        for detector in detectors {
            let regex = Regex::new(detector.regex()).map_err(|err| KeyError {
                key: "redaction.detect".into(),
                message: format!("{}: {err}", detector.as_str()),
            })?;
            each.push(Finder { name: detector.as_str().into(), regex, luhn: detector == Detector::CreditCard });
        }
        for (n, pattern) in config.patterns.iter().enumerate() {
            let at = |key: &str| format!("redaction.patterns[{n}].{key}");
            let valid_name = !pattern.name.is_empty()
                && pattern.name.len() <= 64
                && pattern.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid_name {
                return Err(KeyError { key: at("name"), message: "1 to 64 letters, digits or `_`".into() });
            }
            if pattern.regex.len() > 1024 {
                return Err(KeyError { key: at("regex"), message: "at most 1024 bytes".into() });
            }
            let regex = Regex::new(&pattern.regex)
                .map_err(|err| KeyError { key: at("regex"), message: format!("not a valid regex: {err}") })?;
            each.push(Finder { name: pattern.name.clone(), regex, luhn: false });
        }
        let any = match each.is_empty() {
            true => None,
            false => Some(RegexSet::new(each.iter().map(|f| f.regex.as_str())).map_err(|err| KeyError {
                key: "redaction".into(),
                message: format!("the patterns do not compile together: {err}"),
            })?),
        };
        Ok(Redaction { any, each, action: config.action })
    }

    /// Withholds every answer that holds any text: what stands in for a `redaction:` that could
    /// not be compiled (never the case for a loaded config, which was checked), so that a
    /// redaction asked for never fails open.
    pub fn refusing() -> Redaction {
        let any = RegexSet::new(["(?s)."]).ok();
        let each = Regex::new("(?s).+").ok().map(|regex| Finder { name: "unchecked".into(), regex, luhn: false });
        Redaction { any, each: each.into_iter().collect(), action: Action::DropCall }
    }

    pub fn is_on(&self) -> bool {
        self.any.is_some()
    }

    /// Redacts every string value of `value` in place (keys left alone).
    pub fn apply(&self, value: &mut Value) -> Redacted {
        let mut redacted = Redacted::default();
        if let Some(any) = &self.any {
            self.walk(any, value, &mut redacted.found);
        }
        redacted.withheld = self.action == Action::DropCall && !redacted.found.is_empty();
        redacted
    }

    fn walk(&self, any: &RegexSet, value: &mut Value, found: &mut BTreeSet<String>) {
        match value {
            Value::String(text) => {
                if any.is_match(text) {
                    self.mask(text, found);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.walk(any, item, found)),
            Value::Object(map) => map.values_mut().for_each(|item| self.walk(any, item, found)),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    fn mask(&self, text: &mut String, found: &mut BTreeSet<String>) {
        for finder in &self.each {
            let mut hit = false;
            let replaced = finder.regex.replace_all(text, |found: &regex::Captures<'_>| {
                let whole = found.get(0).map_or("", |m| m.as_str());
                if finder.luhn && !luhn(whole) {
                    return whole.to_owned();
                }
                hit = true;
                format!("[REDACTED:{}]", finder.name)
            });
            if hit {
                *text = replaced.into_owned();
                found.insert(finder.name.clone());
            }
        }
    }
}

/// The Luhn check of the digits in `text`.
fn luhn(text: &str) -> bool {
    let digits: Vec<u32> = text.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| if !i.is_multiple_of(2) { if d * 2 > 9 { d * 2 - 9 } else { d * 2 } } else { d })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn compiled(yaml: &str) -> Result<Redaction, KeyError> {
        Redaction::compile(&serde_norway::from_str(yaml).unwrap())
    }

    const ALL: &str = "detect: [aws_access_key, github_token, private_key, jwt, email, credit_card]\npatterns: [{name: internal_id, regex: 'ACME-[0-9]{8}'}]";

    #[test]
    fn each_detector_masks_its_kind_by_name_and_leaves_the_rest() {
        let redaction = compiled(ALL).unwrap();
        let mut result = json!({
            "content": [{"type": "text", "text": "key AKIAIOSFODNN7EXAMPLE for alice@example.com, ticket ACME-12345678"}],
            "structuredContent": {"token": "ghp_0123456789abcdefghijABCDEFGHIJ012345", "n": 4111, "card": "4111 1111 1111 1111",
                                  "not_a_card": "4111 1111 1111 1112", "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln",
                                  "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----"},
            "AKIAIOSFODNN7EXAMPLE": "keys are left alone",
        });
        let redacted = redaction.apply(&mut result);
        assert_eq!(
            result["content"][0]["text"],
            "key [REDACTED:aws_access_key] for [REDACTED:email], ticket [REDACTED:internal_id]"
        );
        let s = &result["structuredContent"];
        assert_eq!(s["token"], "[REDACTED:github_token]");
        assert_eq!(s["card"], "[REDACTED:credit_card]");
        assert_eq!(s["not_a_card"], "4111 1111 1111 1112", "no Luhn, no card");
        assert_eq!(s["jwt"], "[REDACTED:jwt]");
        assert_eq!(s["pem"], "[REDACTED:private_key]");
        assert_eq!(s["n"], 4111);
        assert_eq!(result["AKIAIOSFODNN7EXAMPLE"], "keys are left alone");
        let found: Vec<&str> = redacted.found.iter().map(String::as_str).collect();
        assert_eq!(
            found,
            ["aws_access_key", "credit_card", "email", "github_token", "internal_id", "jwt", "private_key"]
        );
        assert!(!redacted.withheld);
    }

    #[test]
    fn nothing_found_changes_nothing_and_drop_call_withholds_a_finding() {
        let redaction = compiled(ALL).unwrap();
        let mut clean = json!({"content": [{"type": "text", "text": "5"}]});
        assert_eq!(redaction.apply(&mut clean), Redacted::default());
        assert_eq!(clean, json!({"content": [{"type": "text", "text": "5"}]}));
        let dropping = compiled("detect: [email]\naction: drop_call").unwrap();
        let mut result = json!({"text": "bob@example.org"});
        assert!(dropping.apply(&mut result).withheld);
        assert!(!compiled("{}").unwrap().is_on(), "off by default");
    }

    #[test]
    fn a_bad_pattern_is_refused_at_its_key_path() {
        assert_eq!(compiled("patterns: [{name: x, regex: '(['}]").unwrap_err().key, "redaction.patterns[0].regex");
        assert_eq!(compiled("patterns: [{name: 'a b', regex: x}]").unwrap_err().key, "redaction.patterns[0].name");
    }
}
