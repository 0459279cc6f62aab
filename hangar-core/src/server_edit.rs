//! Adding `mcp_servers.<id>` entries to a config file's text, keeping everything else: what
//! `hangar import` and `hangar add` write.
//!
//! Like [`crate::pin_edit`] (whose parser it reads the text with), the edit is surgical: the new
//! entries are inserted after the last entry of the `mcp_servers:` block mapping, at its
//! indentation (or a `mcp_servers:` block is appended when the file has none), so comments, order
//! and quoting elsewhere stay as they were. An id that exists is refused, and the edit is kept
//! only when the new text parses to the old config plus exactly the new servers.
//!
//! An entry is written in block style, every string JSON-quoted (a JSON string is a valid YAML
//! double-quoted scalar), so text from a registry or another client's file can never become YAML
//! structure. A credential is written as a reference, `{file: PATH}` or `{env: NAME}`, never its
//! value.

use std::path::PathBuf;

use indexmap::IndexMap;

use crate::config::Config;
use crate::pin_edit::{self, CharOffsets, Kind, Node, PinEditError};

/// Why the entries cannot be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerEditError {
    /// The text is not a valid config to begin with.
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
    /// The config has a server of that id already.
    #[error("the config has a server `{0}` already (choose another id)")]
    Exists(String),
    /// Two new entries share an id.
    #[error("two servers to add are both named `{0}`")]
    Twice(String),
    /// Valid, but written in a way this edit does not handle, or the new entry is refused.
    #[error("cannot add to the config safely: {0}")]
    Unsafe(String),
}

/// Where a credential is read from: what the config holds instead of the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `{file: PATH}`: an absolute path (a relative one is read under `$CREDENTIALS_DIRECTORY`).
    File(PathBuf),
    /// `{env: NAME}`: a variable of the hangar's own environment.
    Env(String),
}

/// A credential reference with an optional prefix (`"Bearer "`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub source: Source,
    pub prefix: Option<String>,
}

impl Reference {
    pub fn env(name: &str) -> Reference {
        Reference { source: Source::Env(name.to_owned()), prefix: None }
    }

    pub fn file(path: impl Into<PathBuf>) -> Reference {
        Reference { source: Source::File(path.into()), prefix: None }
    }

    /// The same reference with `prefix` put before what is read (none when empty).
    pub fn with_prefix(mut self, prefix: &str) -> Reference {
        self.prefix = (!prefix.is_empty()).then(|| prefix.to_owned());
        self
    }
}

/// A value of a server's `env:`: text, or a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvEntry {
    Text(String),
    Reference(Reference),
}

/// How the new server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// A stdio child: `command: [program, arg, ...]`.
    Subprocess { command: Vec<String> },
    /// A managed child serving MCP over HTTP at `endpoint`.
    Http { command: Vec<String>, endpoint: String },
    /// Not spawned: only the endpoint.
    Remote { endpoint: String },
}

/// One `mcp_servers.<id>` entry to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerEntry {
    pub description: Option<String>,
    pub reach: Reach,
    pub env: IndexMap<String, EnvEntry>,
    /// `auth.headers`: header name to a reference (never a value).
    pub headers: IndexMap<String, Reference>,
}

impl ServerEntry {
    /// The entry as block YAML: `<id>:` at column `indent`, its keys two further in.
    pub fn yaml(&self, id: &str, indent: usize) -> String {
        let pad = " ".repeat(indent + 2);
        let mut out = format!("{}{}:\n", " ".repeat(indent), pin_edit::yaml_key(id));
        if let Some(description) = &self.description {
            out.push_str(&format!("{pad}description: {}\n", quoted(description)));
        }
        let list = |items: &[String]| format!("[{}]", items.iter().map(|s| quoted(s)).collect::<Vec<_>>().join(", "));
        match &self.reach {
            Reach::Subprocess { command } => out.push_str(&format!("{pad}command: {}\n", list(command))),
            Reach::Http { command, endpoint } => {
                out.push_str(&format!("{pad}mode: http\n{pad}command: {}\n", list(command)));
                out.push_str(&format!("{pad}endpoint: {}\n", quoted(endpoint)));
            }
            Reach::Remote { endpoint } => {
                out.push_str(&format!("{pad}mode: remote\n{pad}endpoint: {}\n", quoted(endpoint)));
            }
        }
        if !self.env.is_empty() {
            out.push_str(&format!("{pad}env:\n"));
            for (name, value) in &self.env {
                let value = match value {
                    EnvEntry::Text(text) => quoted(text),
                    EnvEntry::Reference(reference) => reference_yaml(reference),
                };
                out.push_str(&format!("{pad}  {}: {value}\n", pin_edit::yaml_key(name)));
            }
        }
        if !self.headers.is_empty() {
            out.push_str(&format!("{pad}auth:\n{pad}  headers:\n"));
            for (name, reference) in &self.headers {
                out.push_str(&format!("{pad}    {}: {}\n", pin_edit::yaml_key(name), reference_yaml(reference)));
            }
        }
        out
    }
}

/// A string as a YAML double-quoted scalar (JSON's quoting, which YAML reads the same).
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

fn reference_yaml(reference: &Reference) -> String {
    let source = match &reference.source {
        Source::File(path) => format!("file: {}", quoted(&path.to_string_lossy())),
        Source::Env(name) => format!("env: {}", quoted(name)),
    };
    match &reference.prefix {
        Some(prefix) => format!("{{{source}, prefix: {}}}", quoted(prefix)),
        None => format!("{{{source}}}"),
    }
}

/// `text` with `servers` added under `mcp_servers:`, in order, or why not.
pub fn with_servers(text: &str, servers: &[(String, ServerEntry)]) -> Result<String, ServerEditError> {
    let before = Config::parse(text).map_err(|e| ServerEditError::Invalid { key: e.key, message: e.message })?;
    for (i, (id, _)) in servers.iter().enumerate() {
        if before.mcp_servers.contains_key(id) {
            return Err(ServerEditError::Exists(id.clone()));
        }
        if servers[..i].iter().any(|(other, _)| other == id) {
            return Err(ServerEditError::Twice(id.clone()));
        }
        if !crate::config::valid_server_id(id) {
            return Err(ServerEditError::Unsafe(format!(
                "`{id}` is not a server id: 1 to 64 characters of letters, digits, '_', '-' and '.', starting with a letter or digit"
            )));
        }
    }
    let after_text = inserted(text, servers)?;
    let mut after = Config::parse(&after_text)
        .map_err(|e| ServerEditError::Unsafe(format!("the edited text would not parse ({}: {})", e.key, e.message)))?;
    for (id, entry) in servers {
        let added = after.mcp_servers.shift_remove(id).ok_or_else(|| {
            ServerEditError::Unsafe(format!("`mcp_servers.{id}` is not where the edit put it (an alias or merge?)"))
        })?;
        // The entry on its own must read the same: nothing around it changed what it says.
        let alone = Config::parse(&format!("mcp_servers:\n{}", entry.yaml(id, 2)))
            .map_err(|e| ServerEditError::Unsafe(format!("the new entry is not valid ({}: {})", e.key, e.message)))?;
        if format!("{:?}", alone.mcp_servers.get(id)) != format!("{:?}", Some(&added)) {
            return Err(ServerEditError::Unsafe(format!("`mcp_servers.{id}` would not read as written")));
        }
    }
    // `Config` is compared by its `Debug` form: every field is `Debug`, not every one `PartialEq`.
    if format!("{after:?}") != format!("{before:?}") {
        return Err(ServerEditError::Unsafe("the edit would change more than the new servers".into()));
    }
    Ok(after_text)
}

/// The text with the entries inserted (unchecked).
fn inserted(text: &str, servers: &[(String, ServerEntry)]) -> Result<String, ServerEditError> {
    let new_entries = |indent: usize| servers.iter().map(|(id, entry)| entry.yaml(id, indent)).collect::<String>();
    let unsafe_edit = |e: PinEditError| ServerEditError::Unsafe(e.to_string());
    let appended = |text: &str| {
        let newline = if text.is_empty() || text.ends_with('\n') { "" } else { "\n" };
        format!("{text}{newline}mcp_servers:\n{}", new_entries(2))
    };
    if !has_document(text) {
        return Ok(appended(text));
    }
    let root = pin_edit::parse_tree(text).map_err(unsafe_edit)?;
    let Some(servers_node) = pin_edit::entry(&root, "mcp_servers") else {
        if matches!(root.kind, Kind::Map { flow: false, .. }) {
            return Ok(appended(text));
        }
        return Err(ServerEditError::Unsafe("the config's top level is not a block mapping".into()));
    };
    let at = CharOffsets::new(text);
    let key =
        mcp_servers_key(&root).ok_or_else(|| ServerEditError::Unsafe("`mcp_servers` is not a plain key".into()))?;
    match &servers_node.kind {
        Kind::Map { flow: false, entries } => {
            let indent = entries.first().map_or(key.col + 2, |(k, _)| k.col);
            let place = pin_edit::line_end(text, at.byte(servers_node.end));
            let newline = if place == text.len() && !text.ends_with('\n') { "\n" } else { "" };
            Ok(format!("{}{newline}{}{}", &text[..place], new_entries(indent), &text[place..]))
        }
        Kind::Map { flow: true, entries } if entries.is_empty() => {
            // `mcp_servers: {}`: the braces go, the entries follow the key's line.
            let (start, end) = (at.byte(servers_node.start), at.byte(servers_node.end));
            let before = text[..start].trim_end_matches(' ');
            let without = format!("{before}{}", &text[end..]);
            let place = pin_edit::line_end(&without, before.len());
            let newline = if place == without.len() && !without.ends_with('\n') { "\n" } else { "" };
            Ok(format!("{}{newline}{}{}", &without[..place], new_entries(key.col + 2), &without[place..]))
        }
        _ => Err(ServerEditError::Unsafe(
            "`mcp_servers` is not a block mapping (write it one key a line, or `mcp_servers: {}`)".into(),
        )),
    }
}

/// The `mcp_servers` key node of the top-level mapping.
fn mcp_servers_key(root: &Node) -> Option<&Node> {
    let Kind::Map { entries, .. } = &root.kind else { return None };
    entries.iter().map(|(k, _)| k).find(|k| matches!(&k.kind, Kind::Scalar { value, .. } if value == "mcp_servers"))
}

/// Whether `text` holds anything but blank lines and comments.
fn has_document(text: &str) -> bool {
    text.lines().map(str::trim).any(|line| !line.is_empty() && !line.starts_with('#') && line != "---")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(command: &[&str]) -> ServerEntry {
        ServerEntry {
            description: None,
            reach: Reach::Subprocess { command: command.iter().map(|s| s.to_string()).collect() },
            env: IndexMap::new(),
            headers: IndexMap::new(),
        }
    }

    fn remote() -> ServerEntry {
        ServerEntry {
            description: Some("a \"remote\"\nwith: yaml # in it".into()),
            reach: Reach::Remote { endpoint: "https://mcp.example.com/mcp".into() },
            env: IndexMap::new(),
            headers: [("Authorization".to_string(), Reference::env("EXAMPLE_TOKEN").with_prefix("Bearer "))].into(),
        }
    }

    fn one(id: &str, entry: ServerEntry) -> Vec<(String, ServerEntry)> {
        vec![(id.to_owned(), entry)]
    }

    #[test]
    fn appends_after_the_last_server_keeping_comments() {
        let text = "# the team's hangar\nmcp_servers:\n  math:   # reviewed\n    command: [fake]  # the adder\n  # the end\nlimits: {}\n";
        let mut entry = stdio(&["npx", "-y", "@x/y@1.0.0", "/srv/data"]);
        entry.env.insert("LOG".into(), EnvEntry::Text("info".into()));
        entry.env.insert("KEY".into(), EnvEntry::Reference(Reference::file("/etc/hangar/key")));
        let edited = with_servers(text, &one("files", entry)).unwrap();
        assert_eq!(
            edited,
            "# the team's hangar\nmcp_servers:\n  math:   # reviewed\n    command: [fake]  # the adder\n  files:\n    command: [\"npx\", \"-y\", \"@x/y@1.0.0\", \"/srv/data\"]\n    env:\n      LOG: \"info\"\n      KEY: {file: \"/etc/hangar/key\"}\n  # the end\nlimits: {}\n"
        );
        let config = Config::parse(&edited).unwrap();
        assert_eq!(config.mcp_servers.keys().collect::<Vec<_>>(), ["math", "files"]);
        assert_eq!(config.mcp_servers["files"].command, ["npx", "-y", "@x/y@1.0.0", "/srv/data"]);
    }

    #[test]
    fn a_remote_with_header_references_and_hostile_text_stays_data() {
        let edited = with_servers("mcp_servers:\n    deep:\n        command: [x]\n", &one("far", remote())).unwrap();
        assert!(edited.contains("\n    far:\n      description: "), "{edited}");
        let config = Config::parse(&edited).unwrap();
        let far = &config.mcp_servers["far"];
        assert_eq!(far.description.as_deref(), Some("a \"remote\"\nwith: yaml # in it"));
        assert!(edited.contains("Authorization: {env: \"EXAMPLE_TOKEN\", prefix: \"Bearer \"}"), "{edited}");
    }

    #[test]
    fn a_file_without_servers_gets_the_block() {
        for text in ["", "# only a comment", "limits:\n  max_concurrent_calls: 4\n", "state_dir: /var/x"] {
            let edited = with_servers(text, &one("t", stdio(&["x"]))).unwrap();
            assert!(edited.starts_with(text), "{edited}");
            assert!(edited.ends_with("mcp_servers:\n  t:\n    command: [\"x\"]\n"), "{edited}");
            assert_eq!(Config::parse(&edited).unwrap().mcp_servers.len(), 1);
        }
    }

    #[test]
    fn an_empty_servers_key_is_filled() {
        for text in ["mcp_servers: {}\nlimits: {}\n", "mcp_servers: {}  # none yet\n", "mcp_servers: {}"] {
            let edited = with_servers(text, &one("t", stdio(&["x"]))).unwrap();
            assert_eq!(Config::parse(&edited).unwrap().mcp_servers.len(), 1, "{text:?} -> {edited:?}");
        }
        let edited = with_servers("mcp_servers: {}  # none yet\n", &one("t", stdio(&["x"]))).unwrap();
        assert_eq!(edited, "mcp_servers:  # none yet\n  t:\n    command: [\"x\"]\n");
        let edited = with_servers("mcp_servers:     {} #é\n", &one("t", stdio(&["x"]))).unwrap();
        assert_eq!(edited, "mcp_servers: #é\n  t:\n    command: [\"x\"]\n");
    }

    #[test]
    fn two_at_once_in_order_and_odd_ids_quoted() {
        let servers = vec![("true".to_string(), stdio(&["a"])), ("1.5".to_string(), stdio(&["b"]))];
        let edited = with_servers("mcp_servers:\n  m:\n    command: [x]\n", &servers).unwrap();
        let config = Config::parse(&edited).unwrap();
        assert_eq!(config.mcp_servers.keys().collect::<Vec<_>>(), ["m", "true", "1.5"]);
    }

    #[test]
    fn refuses_an_existing_id_a_bad_id_and_what_it_cannot_edit() {
        let text = "mcp_servers:\n  m:\n    command: [x]\n";
        assert_eq!(with_servers(text, &one("m", stdio(&["y"]))), Err(ServerEditError::Exists("m".into())));
        let twice = vec![("a".to_string(), stdio(&["y"])), ("a".to_string(), stdio(&["z"]))];
        assert_eq!(with_servers(text, &twice), Err(ServerEditError::Twice("a".into())));
        assert!(matches!(with_servers(text, &one("a/b", stdio(&["y"]))), Err(ServerEditError::Unsafe(_))));
        let flow = "mcp_servers: {m: {command: [x]}}\n";
        assert!(matches!(with_servers(flow, &one("n", stdio(&["y"]))), Err(ServerEditError::Unsafe(_))));
        assert!(matches!(
            with_servers("mcp_servers: 3\n", &one("n", stdio(&["y"]))),
            Err(ServerEditError::Invalid { .. })
        ));
        // A remote with env is not a valid server: refused, the text untouched.
        let mut bad = remote();
        bad.env.insert("A".into(), EnvEntry::Text("b".into()));
        assert!(matches!(with_servers(text, &one("n", bad)), Err(ServerEditError::Unsafe(_))));
    }

    #[test]
    fn crlf_and_no_final_newline() {
        let edited = with_servers("mcp_servers:\r\n  m:\r\n    command: [x]", &one("n", stdio(&["y"]))).unwrap();
        assert_eq!(Config::parse(&edited).unwrap().mcp_servers.keys().collect::<Vec<_>>(), ["m", "n"]);
    }
}
