//! A credential the config names but never holds: `{file: PATH}` or `{env: NAME}`, with an
//! optional `prefix` (`"Bearer "`) put before what is read. Inline text where a credential is
//! expected is refused, without repeating it: a token pasted into `hangar.yaml` would be in
//! every copy and backup of the file.
//!
//! A relative `file` is read under `$CREDENTIALS_DIRECTORY`, where systemd's `LoadCredential=`
//! puts a service's credentials; without that variable a relative path is refused. Files are
//! read with [`crate::small_file`] (regular file only, size-capped), when the config is loaded:
//! at start and on each reload, so a rotated file takes effect on `hangar reload`. One line
//! break ending the file is not part of the value (`echo TOKEN > file` writes one).
//!
//! What was read is a [`Secret`]: its `Debug` says nothing of it, and it is compared (a reload
//! sees a changed credential as a changed server) but never serialized.

use std::path::{Component, Path, PathBuf};

use schemars::JsonSchema;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// The largest credential file read, in bytes: a token or a key, not a data set.
pub const MAX_CREDENTIAL_BYTES: u64 = 64 * 1024;

/// The variable systemd sets to the directory of a service's credentials (`LoadCredential=`).
pub const CREDENTIALS_DIRECTORY: &str = "CREDENTIALS_DIRECTORY";

/// Why inline text is refused where a credential is expected; the text itself is never repeated.
const INLINE: &str =
    "a credential is never inline text: give `{file: PATH}` or `{env: NAME}` (with an optional `prefix`)";

/// The bytes of a credential, once read. Its `Debug` is `Secret(<redacted>)`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret of `text` (an inbound token the API validated, a token got for an upstream).
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret's text, for the one place that sends it (a header, a child's environment).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A secret crosses the control socket as its text (the socket is the supervisor's own, 0600);
/// it is never logged, since its `Debug` shows nothing.
impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Secret, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

/// `{file: PATH}` or `{env: NAME}`, with an optional `prefix`: where a credential is read from.
/// Inline text is refused.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("anyOf" = [{"required": ["file"]}, {"required": ["env"]}], "not" = {"required": ["file", "env"]}))]
pub struct Credential {
    /// A file holding the credential: an absolute path, or one relative to
    /// `$CREDENTIALS_DIRECTORY` (systemd's `LoadCredential=`). Read at start and on each reload;
    /// one line break ending it is dropped.
    #[schemars(length(min = 1))]
    pub file: Option<PathBuf>,
    /// A variable of the hangar's own environment holding the credential.
    #[schemars(length(min = 1))]
    pub env: Option<String>,
    /// Text put before what is read, e.g. `"Bearer "`. Default: none.
    pub prefix: Option<String>,
    /// What was read, prefix included; empty until [`Credential::resolve`].
    #[serde(skip)]
    value: Secret,
    /// What was read, without the prefix (what logs and audit are cleaned of).
    #[serde(skip)]
    bare: Secret,
}

/// A credential's fields as written; checked into a [`Credential`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    file: Option<PathBuf>,
    env: Option<String>,
    prefix: Option<String>,
}

impl Fields {
    fn checked<E: de::Error>(self) -> Result<Credential, E> {
        match (&self.file, &self.env) {
            (Some(_), Some(_)) | (None, None) => {
                Err(E::custom("give exactly one of `file` or `env` (with an optional `prefix`)"))
            }
            (Some(file), None) if file.as_os_str().is_empty() => Err(E::custom("`file` is empty")),
            (None, Some(env)) if env.is_empty() || env.contains(['=', '\0']) => {
                Err(E::custom("`env` is not a valid environment variable name"))
            }
            _ => Ok(Credential {
                file: self.file,
                env: self.env,
                prefix: self.prefix,
                value: Secret::default(),
                bare: Secret::default(),
            }),
        }
    }
}

/// Reads a credential as a map; any scalar is inline text, refused without being repeated.
struct CredentialVisitor;

impl<'de> Visitor<'de> for CredentialVisitor {
    type Value = Credential;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("`{file: PATH}` or `{env: NAME}`")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Credential, A::Error> {
        Fields::deserialize(de::value::MapAccessDeserializer::new(map))?.checked()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Credential, E> {
        Err(E::custom(INLINE))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Credential, E> {
        Err(E::custom(INLINE))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Credential, E> {
        Err(E::custom(INLINE))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Credential, E> {
        Err(E::custom(INLINE))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Credential, E> {
        Err(E::custom(INLINE))
    }
}

impl<'de> Deserialize<'de> for Credential {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CredentialVisitor)
    }
}

/// Where credentials are read from: the hangar's environment and its credentials directory.
pub struct Sources<'a> {
    /// A variable of the hangar's environment, if set (and UTF-8).
    pub var: &'a dyn Fn(&str) -> Option<String>,
    /// `$CREDENTIALS_DIRECTORY`, if set.
    pub credentials_directory: Option<PathBuf>,
}

impl Sources<'_> {
    /// The running process's environment.
    pub fn of_process() -> Sources<'static> {
        Sources { var: &|name| std::env::var(name).ok(), credentials_directory: credentials_directory() }
    }
}

/// Why a credential could not be read: the key under the credential (`file` or `env`) and the
/// message, which never holds the credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub key: &'static str,
    pub message: String,
}

impl Credential {
    /// Reads the credential from `sources`: its value is then the prefix and what was read.
    pub fn resolve(&mut self, sources: &Sources<'_>) -> Result<(), Unreadable> {
        let bare = match (&self.file, &self.env) {
            (Some(file), _) => read_file(file, sources)?,
            (None, Some(name)) => (sources.var)(name).ok_or_else(|| Unreadable {
                key: "env",
                message: format!("the hangar's environment has no `{name}` (or it is not UTF-8)"),
            })?,
            (None, None) => return Err(Unreadable { key: "file", message: "no source".into() }),
        };
        let key = if self.file.is_some() { "file" } else { "env" };
        if bare.is_empty() {
            return Err(Unreadable { key, message: "the credential is empty".into() });
        }
        if bare.contains('\0') {
            return Err(Unreadable { key, message: "the credential holds a NUL byte".into() });
        }
        self.value = Secret(format!("{}{bare}", self.prefix.as_deref().unwrap_or_default()));
        self.bare = Secret(bare);
        Ok(())
    }

    /// The prefix and what was read (empty before [`Credential::resolve`]).
    pub fn value(&self) -> &Secret {
        &self.value
    }

    /// What was read, without the prefix: the part logs and audit entries are cleaned of.
    pub fn bare(&self) -> &Secret {
        &self.bare
    }

    /// Where it is read from, in words that hold no secret (`file /etc/x`, `env TOKEN`).
    pub fn source(&self) -> String {
        match (&self.file, &self.env) {
            (Some(file), _) => format!("file {}", file.display()),
            (None, Some(name)) => format!("env {name}"),
            (None, None) => "nothing".into(),
        }
    }
}

/// `$CREDENTIALS_DIRECTORY` of this process, if set and not empty.
pub fn credentials_directory() -> Option<PathBuf> {
    std::env::var_os(CREDENTIALS_DIRECTORY).filter(|dir| !dir.is_empty()).map(PathBuf::from)
}

/// Where the file `file` names is: itself when absolute, else under `credentials_directory`
/// (`None` without it).
pub fn file_path(file: &Path, credentials_directory: Option<&Path>) -> Option<PathBuf> {
    if file.is_absolute() { Some(file.to_path_buf()) } else { credentials_directory.map(|dir| dir.join(file)) }
}

/// The text of a credential file, one final line break dropped.
fn read_file(file: &Path, sources: &Sources<'_>) -> Result<String, Unreadable> {
    let unreadable = |message: String| Unreadable { key: "file", message };
    let path = if file.is_absolute() {
        file.to_path_buf()
    } else {
        let Some(dir) = &sources.credentials_directory else {
            return Err(unreadable(format!(
                "`{}` is relative, so it is read under ${CREDENTIALS_DIRECTORY} (systemd's LoadCredential=), which is not set; give an absolute path",
                file.display()
            )));
        };
        if file.components().any(|part| !matches!(part, Component::Normal(_) | Component::CurDir)) {
            return Err(unreadable(format!(
                "`{}` leaves ${CREDENTIALS_DIRECTORY}: a relative path names a file under it",
                file.display()
            )));
        }
        dir.join(file)
    };
    let text = crate::small_file::read_regular(&path, MAX_CREDENTIAL_BYTES)
        .map_err(|err| unreadable(format!("cannot read {}: {err}", path.display())))?;
    let text = text.strip_suffix('\n').map_or(text.as_str(), |t| t.strip_suffix('\r').unwrap_or(t));
    Ok(text.to_owned())
}

/// A value of a server's `env:`: plain text, as it always was, or a [`Credential`].
#[derive(Clone, PartialEq)]
pub enum EnvValue {
    /// The value itself (a number or boolean is written as text).
    Text(String),
    /// A credential read from a file or the hangar's environment.
    Credential(Credential),
}

impl JsonSchema for EnvValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "EnvValue".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let credential = generator.subschema_for::<Credential>();
        schemars::json_schema!({
            "description": "The value itself (text; a number or boolean is taken as its text), or a credential: `{file: PATH}` or `{env: NAME}`, with an optional `prefix`.",
            "anyOf": [{"type": ["string", "number", "boolean"]}, credential]
        })
    }
}

impl EnvValue {
    /// The value the child's environment gets.
    pub fn value(&self) -> &str {
        match self {
            EnvValue::Text(text) => text,
            EnvValue::Credential(credential) => credential.value().expose(),
        }
    }
}

impl std::fmt::Debug for EnvValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Env values are secrets as far as logs are concerned, plain ones too.
        match self {
            EnvValue::Text(_) => f.write_str("Text(<redacted>)"),
            EnvValue::Credential(credential) => credential.fmt(f),
        }
    }
}

/// Reads an env value: a map is a credential, a scalar is text.
struct EnvValueVisitor;

impl<'de> Visitor<'de> for EnvValueVisitor {
    type Value = EnvValue;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("text, or `{file: PATH}` or `{env: NAME}`")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<EnvValue, A::Error> {
        CredentialVisitor.visit_map(map).map(EnvValue::Credential)
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<EnvValue, E> {
        Ok(EnvValue::Text(text.to_owned()))
    }
    fn visit_i64<E: de::Error>(self, number: i64) -> Result<EnvValue, E> {
        Ok(EnvValue::Text(number.to_string()))
    }
    fn visit_u64<E: de::Error>(self, number: u64) -> Result<EnvValue, E> {
        Ok(EnvValue::Text(number.to_string()))
    }
    fn visit_f64<E: de::Error>(self, number: f64) -> Result<EnvValue, E> {
        Ok(EnvValue::Text(number.to_string()))
    }
    fn visit_bool<E: de::Error>(self, value: bool) -> Result<EnvValue, E> {
        Ok(EnvValue::Text(value.to_string()))
    }
}

impl<'de> Deserialize<'de> for EnvValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(EnvValueVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Credential, String> {
        serde_norway::from_str(yaml).map_err(|err| err.to_string())
    }

    fn sources(dir: Option<&Path>) -> Sources<'static> {
        Sources {
            var: &|name| (name == "TOKEN").then(|| "from-env".to_owned()),
            credentials_directory: dir.map(Path::to_path_buf),
        }
    }

    #[test]
    fn inline_text_is_refused_without_being_repeated() {
        for yaml in ["hunter2-secret", "12345678", "true"] {
            let err = parse(yaml).unwrap_err();
            assert!(err.contains("never inline"), "{err}");
            assert!(!err.contains(yaml), "{err}");
        }
        assert!(parse("{file: /x, env: Y}").unwrap_err().contains("exactly one"));
        assert!(parse("{prefix: 'Bearer '}").unwrap_err().contains("exactly one"));
        assert!(parse("{file: /x, value: y}").unwrap_err().contains("unknown field"));
    }

    #[test]
    fn files_and_variables_are_read_with_the_prefix_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "s3cr3t-token\n").unwrap();
        let mut from_file = parse("{file: token, prefix: 'Bearer '}").unwrap();
        from_file.resolve(&sources(Some(dir.path()))).unwrap();
        assert_eq!(from_file.value().expose(), "Bearer s3cr3t-token");
        assert_eq!(from_file.bare().expose(), "s3cr3t-token");
        assert!(!format!("{from_file:?}").contains("s3cr3t"));
        let mut from_env = parse("{env: TOKEN}").unwrap();
        from_env.resolve(&sources(None)).unwrap();
        assert_eq!(from_env.value().expose(), "from-env");
        let mut missing = parse("{env: NOPE}").unwrap();
        assert_eq!(missing.resolve(&sources(None)).unwrap_err().key, "env");
    }

    #[test]
    fn a_relative_file_needs_the_credentials_directory_and_stays_in_it() {
        let mut relative = parse("{file: token}").unwrap();
        let err = relative.resolve(&sources(None)).unwrap_err();
        assert!(err.message.contains("CREDENTIALS_DIRECTORY"), "{}", err.message);
        let mut escaping = parse("{file: ../etc/shadow}").unwrap();
        let err = escaping.resolve(&sources(Some(Path::new("/run/credentials/x")))).unwrap_err();
        assert!(err.message.contains("leaves"), "{}", err.message);
    }

    #[test]
    fn env_values_are_text_or_credentials() {
        let values: indexmap::IndexMap<String, EnvValue> =
            serde_norway::from_str("{A: plain, B: 3, C: {file: /x}}").unwrap();
        assert_eq!(values["A"].value(), "plain");
        assert_eq!(values["B"].value(), "3");
        assert!(matches!(values["C"], EnvValue::Credential(_)));
        assert!(!format!("{values:?}").contains("plain"));
    }
}
