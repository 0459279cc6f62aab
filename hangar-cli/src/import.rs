//! `hangar import --from FILE --config F`: the servers of another MCP client's config written
//! into the hangar's, comments kept.
//!
//! Three shapes are read:
//! - `mcpServers` (Claude Code's `.mcp.json`, Claude Desktop's `claude_desktop_config.json`):
//!   `{command, args, env}` (stdio; `type: stdio` optional), or `{type: http, url, headers}`;
//!   `${VAR}` and `${VAR:-default}` refer to the environment;
//! - `servers` (VS Code's `mcp.json`): `type` `stdio` or `http` with the same keys; `${env:VAR}`
//!   refers to the environment, `${input:ID}` to a value VS Code prompts for,
//!   `${workspaceFolder}` and `${userHome}` to those folders.
//!
//! A stdio server becomes `command: [command, args...]` with its `env`; an HTTP one a `remote`
//! server with `auth.headers`. A value that refers to a variable (`"Bearer ${TOKEN}"`) becomes a
//! reference, `{env: TOKEN, prefix: "Bearer "}`; a header's literal value is never copied: the
//! header reads a variable named after the server and header, which the user is told to set.
//! The legacy SSE transport, a variable inside `command` or `args`, and keys the hangar has no
//! place for (`cwd`, `envFile`) are refused, naming the server and key. Nothing is written
//! unless every server imported can be.

use std::path::{Path, PathBuf};

use hangar_core::server_edit::{EnvEntry, Reach, Reference, ServerEntry};
use hangar_core::terminal::visible;
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;

use crate::install::header_variable;
use crate::setup::{self, SetupError};

/// The largest client config read.
const MAX_SOURCE_BYTES: u64 = 4 * 1024 * 1024;

/// Which client's shape a file has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `mcpServers`: Claude Code's `.mcp.json` and Claude Desktop's config.
    McpServers,
    /// `servers`: VS Code's `mcp.json`.
    VsCode,
}

/// The servers of a client's config, and what the user must know (variables to set).
#[derive(Debug)]
pub struct Imported {
    pub shape: Shape,
    pub servers: Vec<(String, ServerEntry)>,
    /// The names the file gives them (an id is the name, made a valid server id).
    pub names: Vec<String>,
    pub notes: Vec<String>,
}

pub fn run(from: &Path, config: &Path, only: &[String]) -> Result<(), SetupError> {
    let text = hangar_core::small_file::read_regular(from, MAX_SOURCE_BYTES)
        .map_err(|e| SetupError::Source { path: from.to_owned(), reason: e.to_string() })?;
    let folders = Folders { workspace: workspace_of(from), home: std::env::var_os("HOME").map(PathBuf::from) };
    let mut imported = parse(&text, &folders, only).map_err(|err| match err {
        ParseError::File(reason) => SetupError::Source { path: from.to_owned(), reason },
        ParseError::Server { server, reason } => SetupError::Unmappable { server, reason },
    })?;
    if let Some(name) = only.iter().find(|name| !imported.names.contains(*name)) {
        return Err(SetupError::Usage(format!("{} has no server {name}", from.display())));
    }
    if imported.servers.is_empty() {
        return Err(SetupError::Source { path: from.to_owned(), reason: "it names no server".into() });
    }
    setup::add_to_config(config, &imported.servers)?;
    let ids: Vec<&str> = imported.servers.iter().map(|(id, _)| id.as_str()).collect();
    let shape = match imported.shape {
        Shape::McpServers => "mcpServers",
        Shape::VsCode => "VS Code's servers",
    };
    let done = format!("imported {} ({shape}) into {}: {}", plural(ids.len()), config.display(), ids.join(", "));
    setup::print(&visible(&done))?;
    imported.notes.push("`hangar reload` loads them into a running hangar".into());
    for note in &imported.notes {
        setup::print(&visible(&format!("  {note}")))?;
    }
    Ok(())
}

fn plural(count: usize) -> String {
    if count == 1 { "1 server".into() } else { format!("{count} servers") }
}

/// What `${workspaceFolder}` and `${userHome}` stand for.
pub struct Folders {
    pub workspace: Option<PathBuf>,
    pub home: Option<PathBuf>,
}

/// The workspace of a VS Code `mcp.json`: the folder holding its `.vscode`, else its own folder.
fn workspace_of(file: &Path) -> Option<PathBuf> {
    let dir = std::path::absolute(file).ok()?.parent()?.to_path_buf();
    if dir.file_name().is_some_and(|name| name == ".vscode") { dir.parent().map(Path::to_path_buf) } else { Some(dir) }
}

#[derive(Debug, PartialEq)]
pub enum ParseError {
    File(String),
    Server { server: String, reason: String },
}

/// A client's config, its servers in the file's order.
#[derive(Deserialize)]
struct File {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<IndexMap<String, Server>>,
    servers: Option<IndexMap<String, Server>>,
}

/// One server as a client writes it (each key checked when read).
#[derive(Deserialize)]
struct Server {
    #[serde(rename = "type")]
    kind: Option<Value>,
    command: Option<Value>,
    args: Option<Vec<Value>>,
    env: Option<IndexMap<String, Value>>,
    url: Option<Value>,
    headers: Option<IndexMap<String, Value>>,
    cwd: Option<Value>,
    #[serde(rename = "envFile")]
    env_file: Option<Value>,
}

/// The servers of `text` (only those named in `only`, when it is not empty).
pub fn parse(text: &str, folders: &Folders, only: &[String]) -> Result<Imported, ParseError> {
    let file: File = serde_json::from_str(text).map_err(|e| ParseError::File(format!("not a client's config: {e}")))?;
    let (shape, servers) = match (file.mcp_servers, file.servers) {
        (Some(servers), _) => (Shape::McpServers, servers),
        (None, Some(servers)) => (Shape::VsCode, servers),
        (None, None) => {
            return Err(ParseError::File(
                "neither `mcpServers` (.mcp.json, claude_desktop_config.json) nor `servers` (VS Code's mcp.json)"
                    .into(),
            ));
        }
    };
    let mut imported = Imported { shape, servers: Vec::new(), names: Vec::new(), notes: Vec::new() };
    for (name, server) in servers {
        if !only.is_empty() && !only.contains(&name) {
            continue;
        }
        let id = crate::setup::server_id(&name);
        if id != name {
            imported
                .notes
                .push(format!("`{name}` is imported as `{id}`: a server id holds letters, digits, '_', '-' and '.'"));
        }
        let entry = Reader { shape, folders, id: &id, notes: &mut imported.notes }
            .server(&server)
            .map_err(|reason| ParseError::Server { server: name.clone(), reason })?;
        imported.servers.push((id, entry));
        imported.names.push(name);
    }
    Ok(imported)
}

/// Reads one server of the file.
struct Reader<'a> {
    shape: Shape,
    folders: &'a Folders,
    id: &'a str,
    notes: &'a mut Vec<String>,
}

/// A value with its variable references read.
enum Text {
    Plain(String),
    /// `prefix${VAR}`: the prefix, and the variable of the hangar's environment.
    Variable {
        prefix: String,
        variable: String,
    },
}

impl Reader<'_> {
    fn server(&mut self, server: &Server) -> Result<ServerEntry, String> {
        for (key, value) in [("cwd", &server.cwd), ("envFile", &server.env_file)] {
            if value.is_some() {
                return Err(format!(
                    "`{key}`: the hangar has no such setting; drop it from the file, or leave this server out (--server)"
                ));
            }
        }
        let kind = match server.kind.as_ref().map(|t| t.as_str().ok_or("`type` is not text")).transpose()? {
            Some(kind) => kind,
            None if server.url.is_some() => "http",
            None => "stdio",
        };
        match kind {
            "stdio" => self.stdio(server),
            "http" | "streamable-http" | "streamableHttp" => self.http(server),
            "sse" => Err(
                "the legacy SSE transport, which the hangar does not speak (does the server serve streamable HTTP?)"
                    .into(),
            ),
            other => Err(format!("`type: {other}` is not stdio or http")),
        }
    }

    fn stdio(&mut self, server: &Server) -> Result<ServerEntry, String> {
        let program = server.command.as_ref().and_then(Value::as_str).filter(|c| !c.is_empty());
        let program = program.ok_or("a stdio server needs `command`, a program")?;
        let mut command = vec![self.fixed("command", program)?];
        if let Some(args) = &server.args {
            for arg in args {
                let arg = arg.as_str().ok_or("`args` holds something other than text")?;
                command.push(self.fixed("args", arg)?);
            }
        }
        let mut env = IndexMap::new();
        if let Some(values) = &server.env {
            for (name, value) in values {
                let value = match value {
                    Value::String(text) => text.clone(),
                    Value::Number(_) | Value::Bool(_) => value.to_string(),
                    _ => return Err(format!("`env.{name}` is not text")),
                };
                let entry = match self.text(&format!("env.{name}"), &value)? {
                    Text::Plain(text) => EnvEntry::Text(text),
                    Text::Variable { prefix, variable } => {
                        EnvEntry::Reference(Reference::env(&variable).with_prefix(&prefix))
                    }
                };
                env.insert(name.clone(), entry);
            }
        }
        Ok(ServerEntry { description: None, reach: Reach::Subprocess { command }, env, headers: IndexMap::new() })
    }

    fn http(&mut self, server: &Server) -> Result<ServerEntry, String> {
        let url = server.url.as_ref().and_then(Value::as_str).ok_or("an http server needs `url`")?;
        let endpoint = self.fixed("url", url)?;
        if server.env.as_ref().is_some_and(|env| !env.is_empty()) {
            return Err("`env` on an http server: a remote server is not spawned".into());
        }
        let mut headers = IndexMap::new();
        if let Some(values) = &server.headers {
            for (name, value) in values {
                let value = value.as_str().ok_or_else(|| format!("`headers.{name}` is not text"))?;
                let reference = match self.text(&format!("headers.{name}"), value)? {
                    Text::Variable { prefix, variable } => Reference::env(&variable).with_prefix(&prefix),
                    Text::Plain(literal) => {
                        // The value itself never reaches the config: a variable holds it.
                        let variable = header_variable(self.id, name);
                        let (prefix, said) = match literal.split_once(' ') {
                            Some((scheme, _)) if matches!(scheme, "Bearer" | "Basic" | "Token") => {
                                (format!("{scheme} "), format!("the {name} header's value after `{scheme} `"))
                            }
                            _ => (String::new(), format!("the {name} header's value")),
                        };
                        self.notes.push(format!(
                            "{}: set {variable} in the hangar's environment to {said} (it was in the file)",
                            self.id
                        ));
                        Reference::env(&variable).with_prefix(&prefix)
                    }
                };
                headers.insert(name.clone(), reference);
            }
        }
        Ok(ServerEntry { description: None, reach: Reach::Remote { endpoint }, env: IndexMap::new(), headers })
    }

    /// Text that must not refer to the environment (a command, an argument, a URL): the
    /// folders are filled in, a variable refused.
    fn fixed(&mut self, key: &str, value: &str) -> Result<String, String> {
        match self.text(key, value)? {
            Text::Plain(text) => Ok(text),
            Text::Variable { variable, .. } => Err(format!(
                "`{key}` refers to ${{{variable}}}: the hangar runs a fixed command and URL; write the value, or pass it in env"
            )),
        }
    }

    /// `value` with its references read: the folders filled in, at most one variable, at its end.
    fn text(&mut self, key: &str, value: &str) -> Result<Text, String> {
        let mut plain = String::new();
        let mut rest = value;
        while let Some(open) = rest.find("${") {
            let close = rest[open..].find('}').map(|i| open + i).ok_or_else(|| format!("`{key}`: an unclosed ${{"))?;
            let reference = &rest[open + 2..close];
            plain.push_str(&rest[..open]);
            rest = &rest[close + 1..];
            if let Some(folder) = self.folder(reference) {
                plain.push_str(&folder.ok_or_else(|| format!("`{key}`: ${{{reference}}} is not known here"))?);
                continue;
            }
            let variable = self.variable(key, reference)?;
            if rest.contains("${") || !rest.is_empty() {
                return Err(format!("`{key}`: a variable must end the value (the hangar reads it with a prefix only)"));
            }
            return Ok(Text::Variable { prefix: plain, variable });
        }
        plain.push_str(rest);
        Ok(Text::Plain(plain))
    }

    /// `${workspaceFolder}` and `${userHome}` (VS Code's), known or not.
    fn folder(&self, reference: &str) -> Option<Option<String>> {
        let folder = match (self.shape, reference) {
            (Shape::VsCode, "workspaceFolder") => &self.folders.workspace,
            (Shape::VsCode, "userHome") => &self.folders.home,
            _ => return None,
        };
        Some(folder.as_ref().map(|path| path.to_string_lossy().into_owned()))
    }

    /// The environment variable a reference reads.
    fn variable(&mut self, key: &str, reference: &str) -> Result<String, String> {
        let valid = |name: &str| {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        };
        let name = match self.shape {
            Shape::VsCode => {
                if let Some(name) = reference.strip_prefix("env:") {
                    name.to_owned()
                } else if let Some(input) = reference.strip_prefix("input:") {
                    // VS Code asks for an input; the hangar reads a variable named after it.
                    let name: String = input
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' })
                        .collect();
                    self.notes.push(format!(
                        "{}: set {name} in the hangar's environment (VS Code's input `{input}`)",
                        self.id
                    ));
                    name
                } else {
                    return Err(format!("`{key}`: ${{{reference}}} is not a variable the hangar can read"));
                }
            }
            Shape::McpServers => match reference.split_once(":-") {
                Some((name, _)) => {
                    self.notes.push(format!("{}: `{key}` reads {name}; its default is not kept, so set it", self.id));
                    name.to_owned()
                }
                None => reference.to_owned(),
            },
        };
        if !valid(&name) {
            return Err(format!("`{key}`: ${{{reference}}} is not a variable name"));
        }
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use hangar_core::config::Config;
    use hangar_core::server_edit::{Source, with_servers};

    use super::*;

    fn folders() -> Folders {
        Folders { workspace: Some("/work/project".into()), home: Some("/home/me".into()) }
    }

    fn parsed(text: &str) -> Imported {
        parse(text, &folders(), &[]).unwrap()
    }

    fn failure(text: &str) -> (String, String) {
        match parse(text, &folders(), &[]).unwrap_err() {
            ParseError::Server { server, reason } => (server, reason),
            ParseError::File(reason) => (String::new(), reason),
        }
    }

    /// The entries written into an empty config, parsed as the hangar loads it.
    fn loaded(imported: &Imported) -> (String, Config) {
        let text = with_servers("# mine\n", &imported.servers).unwrap();
        let config = Config::parse(&text).unwrap();
        (text, config)
    }

    #[test]
    fn claude_desktop_stdio_with_env() {
        let file = r#"{"mcpServers": {
            "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]},
            "github": {"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"],
                       "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}", "LOG": "info", "N": 3}}},
            "globalShortcut": ""}"#;
        let imported = parsed(file);
        assert_eq!(imported.shape, Shape::McpServers);
        let (text, config) = loaded(&imported);
        assert!(text.starts_with("# mine\nmcp_servers:\n  filesystem:\n"), "{text}");
        assert_eq!(config.mcp_servers["filesystem"].command[3], "/Users/me/Desktop");
        let github = &imported.servers[1].1;
        assert_eq!(github.env["GITHUB_PERSONAL_ACCESS_TOKEN"], EnvEntry::Reference(Reference::env("GITHUB_TOKEN")));
        assert_eq!(github.env["LOG"], EnvEntry::Text("info".into()));
        assert_eq!(github.env["N"], EnvEntry::Text("3".into()));
        assert!(text.contains("GITHUB_PERSONAL_ACCESS_TOKEN: {env: \"GITHUB_TOKEN\"}"), "{text}");
    }

    #[test]
    fn claude_code_http_headers_become_references_never_values() {
        let file = r#"{"mcpServers": {
            "api": {"type": "http", "url": "https://api.example.com/mcp",
                    "headers": {"Authorization": "Bearer ${API_TOKEN}", "X-Team": "${TEAM:-core}",
                                "X-Api-Key": "sk-literal-secret-123", "X-Auth": "Bearer literal-tok-456"}},
            "local": {"type": "stdio", "command": "python", "args": ["server.py"]}}}"#;
        let imported = parsed(file);
        let (text, config) = loaded(&imported);
        assert!(!text.contains("sk-literal-secret-123") && !text.contains("literal-tok-456"), "{text}");
        assert!(!imported.notes.join("\n").contains("literal"), "{:?}", imported.notes);
        let api = &config.mcp_servers["api"];
        assert_eq!(api.endpoint.as_deref(), Some("https://api.example.com/mcp"));
        let headers = &imported.servers[0].1.headers;
        assert_eq!(headers["Authorization"], Reference::env("API_TOKEN").with_prefix("Bearer "));
        assert_eq!(headers["X-Team"], Reference::env("TEAM"));
        assert_eq!(headers["X-Api-Key"].source, Source::Env("API_X_API_KEY".into()));
        assert_eq!(headers["X-Auth"], Reference::env("API_X_AUTH").with_prefix("Bearer "));
        let notes = imported.notes.join("\n");
        assert!(
            notes.contains("set API_X_API_KEY") && notes.contains("set API_X_AUTH") && notes.contains("TEAM"),
            "{notes}"
        );
    }

    #[test]
    fn vs_code_servers_inputs_and_folders() {
        let file = r#"{"inputs": [{"type": "promptString", "id": "perplexity-key", "description": "Key", "password": true}],
            "servers": {
              "perplexity": {"type": "stdio", "command": "npx", "args": ["-y", "server-perplexity-ask"],
                             "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}", "HOME_DIR": "${env:HOME}"}},
              "files": {"type": "stdio", "command": "node", "args": ["${workspaceFolder}/server.js", "${userHome}/data"]},
              "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
                         "headers": {"Authorization": "Bearer ${input:github_token}"}}}}"#;
        let imported = parsed(file);
        assert_eq!(imported.shape, Shape::VsCode);
        let (_, config) = loaded(&imported);
        assert_eq!(config.mcp_servers["files"].command, ["node", "/work/project/server.js", "/home/me/data"]);
        let perplexity = &imported.servers[0].1;
        assert_eq!(perplexity.env["PERPLEXITY_API_KEY"], EnvEntry::Reference(Reference::env("PERPLEXITY_KEY")));
        assert_eq!(perplexity.env["HOME_DIR"], EnvEntry::Reference(Reference::env("HOME")));
        assert_eq!(
            imported.servers[2].1.headers["Authorization"],
            Reference::env("GITHUB_TOKEN").with_prefix("Bearer ")
        );
        assert!(imported.notes.iter().any(|n| n.contains("set PERPLEXITY_KEY")), "{:?}", imported.notes);
        assert_eq!(config.mcp_servers["github"].mode, hangar_core::config::Mode::Remote);
    }

    #[test]
    fn what_the_hangar_cannot_run_is_refused_by_server_and_key() {
        let (server, reason) = failure(r#"{"mcpServers": {"old": {"type": "sse", "url": "https://x/sse"}}}"#);
        assert_eq!(server, "old");
        assert!(reason.contains("SSE"), "{reason}");
        let (_, reason) = failure(r#"{"mcpServers": {"a": {"command": "x", "args": ["--token", "${TOKEN}"]}}}"#);
        assert!(reason.contains("`args` refers to ${TOKEN}"), "{reason}");
        let (_, reason) = failure(r#"{"mcpServers": {"a": {"command": "x", "env": {"A": "${B}-${C}"}}}}"#);
        assert!(reason.contains("must end the value"), "{reason}");
        let (_, reason) = failure(r#"{"servers": {"a": {"type": "stdio", "command": "x", "envFile": ".env"}}}"#);
        assert!(reason.contains("envFile"), "{reason}");
        let (_, reason) =
            failure(r#"{"servers": {"a": {"type": "stdio", "command": "x", "args": ["${command:pick}"]}}}"#);
        assert!(reason.contains("not a variable the hangar can read"), "{reason}");
        let (_, reason) = failure(r#"{"other": {}}"#);
        assert!(reason.contains("neither"), "{reason}");
        let renamed = parsed(r#"{"servers": {"My Server!": {"type": "stdio", "command": "x"}}}"#);
        assert_eq!(renamed.servers[0].0, "My-Server-");
        assert!(renamed.notes[0].contains("`My Server!` is imported as `My-Server-`"), "{:?}", renamed.notes);
        let only = parse(r#"{"mcpServers": {"a": {"command": "x"}, "b": {"type": "sse"}}}"#, &folders(), &["a".into()]);
        assert_eq!(only.unwrap().servers.len(), 1, "--server leaves the others out");
    }

    #[test]
    fn the_workspace_is_the_folder_holding_dot_vscode() {
        assert_eq!(workspace_of(Path::new("/p/.vscode/mcp.json")), Some(PathBuf::from("/p")));
        assert_eq!(workspace_of(Path::new("/p/mcp.json")), Some(PathBuf::from("/p")));
    }
}
