//! What the audit trail keeps of a call's arguments under `audit.arguments: full`: the
//! arguments with secrets redacted, cut at `audit.max_argument_bytes`.
//!
//! Redacted (each value replaced by `[redacted]` before anything is stored):
//! - the value of every member, at any depth, whose name contains `password`, `passwd`,
//!   `secret`, `token`, `apikey` or `authorization`, compared case-insensitively with `-` and `_`
//!   left out (so `db_password`, `client_secret`, `access_token`, `X-Api-Key` and `apiKey` count;
//!   so do `max_tokens` and its like, whose loss the trail can afford);
//! - every configured `env` value of any server (of [`MIN_SECRET_BYTES`] or more), wherever it
//!   appears in a string or a member's name, as a whole or inside a longer text.
//!
//! What is left is kept whole while its JSON text fits `max_argument_bytes`; a longer text is cut
//! there (on a character boundary) and kept as a string ending in a marker that says how long
//! the arguments were, so one caller's megabytes cannot fill the journal.

use serde_json::{Map, Value};

use crate::redactor::Redactor;

pub use crate::redactor::REDACTED;
/// The shortest env value matched inside the arguments: shorter ones (`1`, `on`) would redact
/// every argument that happens to hold them, and are no secret.
pub const MIN_SECRET_BYTES: usize = 4;
/// What a member's name contains, lower-cased without `-` and `_`, when its value is a secret.
const SECRET_NAMES: [&str; 6] = ["password", "passwd", "secret", "token", "apikey", "authorization"];

/// The secrets every audit entry's arguments are cleaned of: the configured env values and
/// credentials.
#[derive(Debug, Default, Clone)]
pub struct Secrets {
    values: Redactor,
}

impl Secrets {
    /// The env values and credentials of every server in `config`.
    pub fn of(config: &hangar_core::config::Config) -> Secrets {
        let values: Vec<String> = config.mcp_servers.values().flat_map(|server| server.secrets()).collect();
        Secrets::from_values(values)
    }

    /// `values` of at least [`MIN_SECRET_BYTES`], as one redactor (overlapping ones redacted as
    /// one span, so no part of either survives).
    fn from_values<S: AsRef<str>>(values: impl IntoIterator<Item = S>) -> Secrets {
        let mut values: Vec<String> =
            values.into_iter().map(|v| v.as_ref().to_owned()).filter(|v| v.len() >= MIN_SECRET_BYTES).collect();
        values.sort();
        values.dedup();
        Secrets { values: Redactor::new("audit", &values) }
    }

    fn clean(&self, text: &str) -> String {
        self.values.redact(text.as_bytes())
    }
}

/// Whether a member named `name` holds a secret.
pub fn secret_name(name: &str) -> bool {
    let folded: String = name.chars().filter(|c| *c != '-' && *c != '_').flat_map(char::to_lowercase).collect();
    SECRET_NAMES.iter().any(|secret| folded.contains(secret))
}

/// `arguments` as the audit trail keeps them: secrets redacted, cut at `max_bytes`.
pub fn kept(arguments: &Value, secrets: &Secrets, max_bytes: usize) -> Value {
    let clean = redacted(arguments, secrets);
    let text = clean.to_string();
    if text.len() <= max_bytes {
        return clean;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Value::String(format!("{}… [cut: {} bytes, audit.max_argument_bytes is {max_bytes}]", &text[..end], text.len()))
}

fn redacted(value: &Value, secrets: &Secrets) -> Value {
    match value {
        Value::String(text) => Value::String(secrets.clean(text)),
        Value::Array(items) => Value::Array(items.iter().map(|item| redacted(item, secrets)).collect()),
        Value::Object(members) => {
            let mut out = Map::with_capacity(members.len());
            for (name, member) in members {
                let member =
                    if secret_name(name) { Value::String(REDACTED.to_owned()) } else { redacted(member, secrets) };
                out.insert(secrets.clean(name), member);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn secrets(values: &[&str]) -> Secrets {
        Secrets::from_values(values)
    }

    #[test]
    fn secret_names_at_any_depth_and_env_values_anywhere_are_redacted() {
        let arguments = json!({
            "query": "select 1",
            "Password": "hunter2",
            "nested": [{"db": {"API_KEY": {"deep": 1}, "x-api-key": "k", "Authorization": "Bearer abc"}}],
            "note": "the key is sk-live-1234 and again sk-live-1234",
            "sk-live-1234": "as a name",
            "count": 3,
        });
        let kept = kept(&arguments, &secrets(&["sk-live-1234"]), 4096);
        assert_eq!(
            kept,
            json!({
                "query": "select 1",
                "Password": REDACTED,
                "nested": [{"db": {"API_KEY": REDACTED, "x-api-key": REDACTED, "Authorization": REDACTED}}],
                "note": "the key is [redacted] and again [redacted]",
                "[redacted]": "as a name",
                "count": 3,
            })
        );
        for name in ["db_password", "clientSecret", "access_token", "apiKey", "TOKEN"] {
            assert!(secret_name(name), "{name}");
        }
        for name in ["path", "query", "key", "author"] {
            assert!(!secret_name(name), "{name}");
        }
    }

    #[test]
    fn long_arguments_are_cut_with_a_marker_after_redaction() {
        let arguments = json!({"token": "t".repeat(10_000), "body": "é".repeat(5_000)});
        let kept = kept(&arguments, &Secrets::default(), 100);
        let text = kept.as_str().unwrap();
        assert!(text.starts_with(r#"{"body":"éé"#), "{text}");
        let whole = redacted(&arguments, &Secrets::default()).to_string().len();
        assert!(text.ends_with(&format!("[cut: {whole} bytes, audit.max_argument_bytes is 100]")), "{text}");
        assert!(!text.contains("ttt"), "redacted before the cut");
        let small = json!({"a": 1});
        assert_eq!(super::kept(&small, &Secrets::default(), 100), small);
    }
}
