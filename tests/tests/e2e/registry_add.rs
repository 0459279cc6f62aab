//! Setting up servers from elsewhere: `hangar add` from an MCP Registry (a local fake one,
//! Python's standard library serving the official shapes from `tests/fixtures/registry/`),
//! `hangar search` through its pages, and `hangar import` of the three client config shapes.
//! Each writes into a config with comments, which the real supervisor then loads.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hangar_core::config::{Config, Mode};
use hangar_tests::{Background, Hangar, bin, python, repo_root};

/// The fake registry on a port of its own, killed when dropped.
struct Registry {
    _process: Background,
    url: String,
}

impl Registry {
    fn start() -> Registry {
        let script = repo_root().join("tests/fixtures/registry/fake_registry.py");
        let mut child = Command::new(python())
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the fake registry");
        let stdout = child.stdout.take().expect("stdout");
        let process = Background { child };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let url = rx.recv_timeout(Duration::from_secs(30)).expect("the fake registry prints its URL");
        assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
        Registry { _process: process, url: url.trim().to_owned() }
    }
}

/// `PATH` with the runners this host has: `uvx` in the tools' venv, `npx` beside Node.
fn runners_path() -> String {
    format!("{}:/usr/local/bin:/usr/bin:/bin", repo_root().join(".tools/venv/bin").display())
}

/// Runs `hangar args...` without a terminal, `PATH` set to `path`.
fn hangar(args: &[&str], path: &str) -> Output {
    Command::new(bin("hangar"))
        .args(args)
        .env("PATH", path)
        .env_remove("HANGAR_REGISTRY")
        .env_remove("HANGAR_URL")
        .stdin(Stdio::null())
        .output()
        .expect("run hangar")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The output of a run that must succeed.
fn ok(output: Output) -> String {
    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "hangar failed: {:?}\n{said}", output.status);
    text(&output.stdout)
}

/// The stderr of a run that must fail with `code`.
fn fails(output: Output, code: i32) -> String {
    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(code), "{said}");
    text(&output.stderr)
}

const START: &str =
    "# the team's hangar\nmcp_servers:\n  math:   # our own\n    command: [\"{fake}\", \"--tools\", \"add\"]\n";

/// A fake registry, and a config with comments in a directory of its own.
struct Story {
    registry: Registry,
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Story {
    fn new() -> Story {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("hangar.yaml");
        std::fs::write(&config, START).unwrap();
        Story { registry: Registry::start(), dir, config }
    }

    fn config(&self) -> &str {
        self.config.to_str().unwrap()
    }

    /// `hangar add args... --config C --registry R`, the runners on `PATH`.
    fn add(&self, args: &[&str]) -> Output {
        self.add_on(args, &runners_path())
    }

    fn add_on(&self, args: &[&str], path: &str) -> Output {
        let common = ["--config", self.config(), "--registry", &self.registry.url];
        hangar(&[&["add"], args, &common[..]].concat(), path)
    }

    fn written(&self) -> String {
        std::fs::read_to_string(&self.config).unwrap()
    }

    /// A file holding `secret`, as `--secret NAME=@FILE` names it.
    fn secret(&self, name: &str, secret: &str) -> String {
        let file = self.dir.path().join(name);
        std::fs::write(&file, format!("{secret}\n")).unwrap();
        format!("{name}=@{}", file.display())
    }
}

#[test]
fn add_pins_a_pypi_and_an_npm_package_that_this_host_can_run() {
    let story = Story::new();
    let said = ok(story.add(&["io.github.modelcontextprotocol/server-time", "--no-start"]));
    assert!(
        said.contains("added server-time (io.github.modelcontextprotocol/server-time 2026.10.19, the pypi package mcp-server-time@2026.10.19 through uvx)"),
        "{said}"
    );
    let written = story.written();
    assert!(written.starts_with(START), "the comments and the server before stay: {written}");
    assert!(
        written.contains("    command: [\"uvx\", \"mcp-server-time==2026.10.19\", \"--local-timezone\", \"UTC\"]\n"),
        "{written}"
    );

    let filesystem = "io.github.modelcontextprotocol/server-filesystem";
    let files =
        [filesystem, "--set", "allowed_dir=/srv/a", "--set", "allowed_dir=/srv/b", "--id", "files", "--no-start"];
    ok(story.add(&files));
    let old =
        [filesystem, "--version", "2026.1.14", "--set", "allowed_dir=/srv/old", "--id", "files-old", "--no-start"];
    ok(story.add(&old));
    let loaded = Config::parse(&story.written()).expect("the config loads");
    assert_eq!(loaded.mcp_servers.keys().collect::<Vec<_>>(), ["math", "server-time", "files", "files-old"]);
    assert_eq!(
        loaded.mcp_servers["files"].command,
        ["npx", "-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "/srv/a", "/srv/b"]
    );
    assert_eq!(loaded.mcp_servers["files-old"].command[2], "@modelcontextprotocol/server-filesystem@2026.1.14");

    // The same id again is refused, the file untouched.
    let before = story.written();
    let err = fails(story.add(&old), 65);
    assert!(err.contains("has a server `files-old` already"), "{err}");
    // A required value nobody gave, and no terminal to ask on: named, exit 64.
    let err = fails(story.add(&[filesystem, "--id", "x"]), 64);
    assert!(err.contains("no value for allowed_dir"), "{err}");
    // Without uvx on PATH, the PyPI package cannot run here.
    let err = fails(story.add_on(&["io.github.modelcontextprotocol/server-time", "--id", "t2"], "/nonexistent"), 69);
    assert!(err.contains("needs `uvx`, which is not on PATH"), "{err}");
    assert_eq!(story.written(), before);

    // The real supervisor loads what was written.
    let hangar = Hangar::start(&story.written());
    let list = hangar.get("/api/mcp_servers");
    let servers = list.body["mcp_servers"].as_array().unwrap();
    let ids: Vec<&str> = servers.iter().filter_map(|s| s["mcp_server_id"].as_str()).collect();
    assert_eq!(ids, ["math", "server-time", "files", "files-old"], "{}", list.text);
}

#[test]
fn add_starts_the_new_server_once_and_pins_its_tools() {
    let story = Story::new();
    // The registry's remote is a real server (the Python SDK's) on a port of this test's.
    let port = hangar_tests::free_port();
    let server = Command::new(python())
        .arg(repo_root().join("tests/fixtures/py_http_server.py"))
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the Python SDK's server");
    let _server = Background { child: server };
    hangar_tests::poll("the server to listen", Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok().map(|_| ())
    });
    let nobody = "http://127.0.0.1:9";
    let port_value = format!("port={port}");
    let said = ok(story.add(&["org.example/local-adder", "--set", &port_value, "--url", nobody]));
    assert!(said.contains("local-adder: ready in"), "{said}");
    assert!(said.contains("pinned 2 tools of local-adder"), "{said}");
    assert!(said.contains(&format!("no hangar answers at {nobody}")), "{said}");
    let loaded = Config::parse(&story.written()).expect("the config loads");
    let pinned = loaded.mcp_servers["local-adder"].capabilities.tools.pinned.clone().unwrap_or_default();
    assert_eq!(pinned.keys().map(String::as_str).collect::<Vec<_>>(), ["add", "shout"], "{}", story.written());
    assert!(story.written().starts_with(START), "the comments stay");

    // A server that cannot start stays added, and the command says why (exit 69).
    let refused = format!("port={}", hangar_tests::free_port());
    let err = fails(story.add(&["org.example/local-adder", "--set", &refused, "--id", "gone", "--url", nobody]), 69);
    assert!(err.contains("gone was added to") && err.contains("but did not start"), "{err}");
    assert!(Config::parse(&story.written()).expect("loads").mcp_servers.contains_key("gone"));
}

#[test]
fn a_remote_secret_header_is_written_as_a_file_never_its_value() {
    let story = Story::new();
    let err = fails(story.add(&["com.example/weather-remote"]), 64);
    assert!(err.contains("no value for X-API-Key") && err.contains("--secret"), "{err}");
    let err = fails(story.add(&["com.example/weather-remote", "--set", "X-API-Key=wx-secret-7f3a"]), 64);
    assert!(err.contains("X-API-Key is a secret"), "{err}");
    assert_eq!(story.written(), START);

    let secret = story.secret("X-API-Key", "wx-secret-7f3a");
    ok(story.add(&["com.example/weather-remote", "--secret", &secret, "--set", "region=us", "--no-start"]));
    let written = story.written();
    assert!(!written.contains("wx-secret-7f3a"), "{written}");
    let file = story.dir.path().join("X-API-Key");
    assert!(written.contains(&format!("X-API-Key: {{file: \"{}\"}}", file.display())), "{written}");
    let loaded = Config::parse(&written).unwrap();
    let weather = &loaded.mcp_servers["weather-remote"];
    assert_eq!(weather.mode, Mode::Remote, "streamable HTTP over the SSE remote listed first");
    assert_eq!(weather.endpoint.as_deref(), Some("https://us.weather.example.com/mcp"));
    // What the registry said reaches the config as data, its escape kept as text.
    let description = "com.example/weather-remote 3.1.0: Weather \u{1b}[31mforecasts\u{1b}[0m, hosted";
    assert_eq!(weather.description.as_deref(), Some(description));
}

#[test]
fn deleted_is_refused_deprecated_warned_and_a_wrong_digest_refused() {
    let story = Story::new();
    let err = fails(story.add(&["com.example/old-notes"]), 1);
    assert!(err.contains("com.example/old-notes 0.9.0 is deleted in the registry (malicious package)"), "{err}");
    let err = fails(story.add(&["com.example/weather-bundle"]), 65);
    assert!(err.contains("its sha256 is 4ee8c173f3f0f0c621ae22dae44d9bfd902d97a1f9f7f5fec423aadeb51121cc"), "{err}");
    assert!(
        err.contains("the registry says fe333e598595000ae021bd27117db32ec69af6987f507ba7a63c90638ff633ce"),
        "{err}"
    );
    // The same file vouched for: checked, but not yet unpacked, so not added.
    let err = fails(story.add(&["com.example/weather-bundle-signed"]), 69);
    assert!(err.contains("(its digest matches): the hangar does not unpack bundles yet"), "{err}");
    let err = fails(story.add(&["com.example/nope"]), 1);
    assert!(err.contains("HTTP 404") && err.contains("Server not found"), "{err}");
    assert_eq!(story.written(), START, "nothing written");

    let secret = story.secret("SEARCH_TOKEN", "tok");
    let output = story.add(&["com.example/legacy-search", "--secret", &secret, "--no-start"]);
    let warned = text(&output.stderr);
    ok(output);
    let warning = "warning: com.example/legacy-search 2.0.0 is deprecated in the registry: use com.example/search";
    assert!(warned.contains(warning), "{warned}");
    let loaded = Config::parse(&story.written()).unwrap();
    let search = &loaded.mcp_servers["legacy-search"];
    assert_eq!(search.command, ["npx", "-y", "@example/legacy-search@2.0.0"]);
    assert_eq!(search.env["SEARCH_REGION"].value(), "eu");
    assert!(matches!(search.env["SEARCH_TOKEN"], hangar_core::credential::EnvValue::Credential(_)));
}

#[test]
fn search_follows_every_page_and_shows_registry_text_visibly() {
    let story = Story::new();
    let url = story.registry.url.as_str();
    let path = runners_path();
    let table = ok(hangar(&["search", "com.example", "--registry", url], &path));
    let names: Vec<&str> = table.lines().skip(1).filter_map(|line| line.split_whitespace().next()).collect();
    let expected = [
        "com.example/weather-remote",
        "com.example/weather-bundle",
        "com.example/weather-bundle-signed",
        "com.example/legacy-search",
    ];
    assert_eq!(names, expected, "two pages of two: {table}");
    assert!(table.lines().next().unwrap().starts_with("NAME"), "{table}");
    assert!(table.contains("deprecated") && !table.contains("old-notes"), "{table}");
    assert!(table.contains("Weather \\x1b[31mforecasts") && !table.contains('\u{1b}'), "{table}");

    let lines = ok(hangar(&["--json", "search", "filesystem", "--registry", url], &path));
    let found: Vec<hangar_tests::serde_json::Value> =
        lines.lines().map(|l| hangar_tests::serde_json::from_str(l).unwrap()).collect();
    assert_eq!(found.len(), 1, "{lines}");
    assert_eq!(found[0]["version"], "2026.8.31");
    let none = ok(hangar(&["search", "zzz", "--registry", url], &path));
    assert!(none.contains("no server in") && none.contains("matches `zzz`"), "{none}");
    let err = fails(hangar(&["search", "x", "--registry", "http://127.0.0.1:9"], &path), 69);
    assert!(err.contains("cannot reach the registry"), "{err}");
}

#[test]
fn a_server_json_file_works_offline() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hangar.yaml");
    std::fs::write(&config, START).unwrap();
    let file = repo_root().join("tests/fixtures/registry/server.json");
    // Nothing listens on the registry's port: the file is all there is.
    let offline = [
        "add",
        "--from-file",
        file.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--registry",
        "http://127.0.0.1:9",
    ];
    let err = fails(hangar(&offline, &runners_path()), 64);
    assert!(err.contains("no value for TZ_LOG"), "{err}");
    let err = fails(hangar(&[&offline[..], &["--set", "TZ_LOG=loud"]].concat(), &runners_path()), 64);
    assert!(err.contains("TZ_LOG is one of: info, debug"), "{err}");
    let values = ["--set", "TZ_LOG=debug", "--set", "local-timezone=Europe/Paris", "--no-start"];
    ok(hangar(&[&offline[..], &values].concat(), &runners_path()));
    let loaded = Config::parse(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let time = &loaded.mcp_servers["server-time"];
    assert_eq!(time.command, ["uvx", "mcp-server-time==2026.10.19", "--local-timezone", "Europe/Paris"]);
    assert_eq!(time.env["TZ_LOG"].value(), "debug");
}

#[test]
fn import_reads_the_three_client_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hangar.yaml");
    std::fs::write(&config, START).unwrap();
    let c = config.to_str().unwrap();
    let path = runners_path();
    let read = |path: &Path| std::fs::read_to_string(path).unwrap();

    let claude = dir.path().join("claude_desktop_config.json");
    std::fs::write(&claude, r#"{"mcpServers": {"desk-files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me"],
        "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "LOG": "info"}}}}"#).unwrap();
    let said = ok(hangar(&["import", "--from", claude.to_str().unwrap(), "--config", c], &path));
    assert!(said.contains("imported 1 server (mcpServers)") && said.contains("desk-files"), "{said}");

    let project = dir.path().join(".mcp.json");
    std::fs::write(&project, r#"{"mcpServers": {
        "api": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer sk-live-000111", "X-Org": "${ORG_ID}"}},
        "tool": {"type": "stdio", "command": "python3", "args": ["tool.py"]}}}"#).unwrap();
    let said = ok(hangar(&["import", "--from", project.to_str().unwrap(), "--config", c], &path));
    assert!(said.contains("set API_AUTHORIZATION in the hangar's environment"), "{said}");
    assert!(!said.contains("sk-live-000111"), "{said}");

    let vscode = dir.path().join("work/.vscode");
    std::fs::create_dir_all(&vscode).unwrap();
    let mcp = vscode.join("mcp.json");
    std::fs::write(&mcp, r#"{"inputs": [{"type": "promptString", "id": "gh-token", "password": true}],
        "servers": {"gh": {"type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${input:gh-token}"}},
                    "local": {"type": "stdio", "command": "node", "args": ["${workspaceFolder}/server.js"]}}}"#).unwrap();
    ok(hangar(&["import", "--from", mcp.to_str().unwrap(), "--config", c, "--server", "local"], &path));

    let written = read(&config);
    assert!(written.starts_with(START), "{written}");
    assert!(!written.contains("sk-live-000111"), "a header's value is never copied: {written}");
    let loaded = Config::parse(&written).unwrap();
    assert_eq!(loaded.mcp_servers.keys().collect::<Vec<_>>(), ["math", "desk-files", "api", "tool", "local"]);
    assert_eq!(loaded.mcp_servers["local"].command, ["node", &format!("{}/work/server.js", dir.path().display())]);
    assert_eq!(loaded.mcp_servers["api"].mode, Mode::Remote);
    assert!(written.contains("Authorization: {env: \"API_AUTHORIZATION\", prefix: \"Bearer \"}"), "{written}");
    assert!(
        written.contains("X-Org: {env: \"ORG_ID\"}") && written.contains("GITHUB_TOKEN: {env: \"GITHUB_TOKEN\"}"),
        "{written}"
    );

    // Again: the ids are taken, nothing is written.
    let err = fails(hangar(&["import", "--from", claude.to_str().unwrap(), "--config", c], &path), 65);
    assert!(err.contains("has a server `desk-files` already"), "{err}");
    let err = fails(hangar(&["import", "--from", mcp.to_str().unwrap(), "--config", c, "--server", "nope"], &path), 64);
    assert!(err.contains("has no server nope"), "{err}");
    assert_eq!(read(&config), written);
}
