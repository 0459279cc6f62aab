//! The generated config reference, `docs/hangar.schema.json` and `docs/config.md`, is what the
//! config types say today; every config in the repository is valid under both the schema and
//! the loader; and schema and loader refuse the same mistakes.
//!
//! A stale file fails the test with the one command that writes it again
//! (`hangar_core::config_reference::UPDATE_COMMAND`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use hangar_core::config::Config;
use hangar_core::config_reference::{UPDATE_COMMAND, markdown, schema, schema_text};
use serde_json::Value;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Compares `fresh` with the committed `docs/<name>`, or writes it when `HANGAR_UPDATE_DOCS` is
/// set. `Err` names the stale file.
fn ensure(name: &str, fresh: &str) -> Result<(), String> {
    let path = repository().join("docs").join(name);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == fresh {
        return Ok(());
    }
    if std::env::var_os("HANGAR_UPDATE_DOCS").is_some() {
        std::fs::write(&path, fresh).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
        return Ok(());
    }
    Err(format!("docs/{name}"))
}

#[test]
fn the_committed_schema_and_reference_are_up_to_date() {
    let stale: Vec<String> = [("hangar.schema.json", schema_text()), ("config.md", markdown())]
        .iter()
        .filter_map(|(name, fresh)| ensure(name, fresh).err())
        .collect();
    assert!(
        stale.is_empty(),
        "{} {} out of date with the config types. Update with\n\n    {UPDATE_COMMAND}\n\nand commit the result.",
        stale.join(" and "),
        if stale.len() == 1 { "is" } else { "are" }
    );
}

/// The text of every config in the repository, by where it is: the example configs, the test
/// fixtures' configs, and the config the Kubernetes ConfigMap embeds.
fn repository_configs() -> Vec<(String, String)> {
    let root = repository();
    let mut configs = Vec::new();
    for dir in ["examples", "tests/fixtures"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "yaml" || ext == "yml"))
            .collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap();
            configs.push((path.strip_prefix(&root).unwrap().display().to_string(), text));
        }
    }
    let configmap = std::fs::read_to_string(root.join("deploy/kubernetes/configmap.yaml")).unwrap();
    let configmap: Value = serde_norway::from_str(&configmap).unwrap();
    let embedded = configmap["data"]["hangar.yaml"].as_str().expect("the ConfigMap embeds data.hangar.yaml");
    configs.push(("deploy/kubernetes/configmap.yaml: data.hangar.yaml".into(), embedded.to_owned()));
    configs
}

/// The schema's complaints about a config's text (an empty text is an empty mapping, as the
/// loader reads it).
fn schema_errors(validator: &jsonschema::Validator, text: &str) -> Vec<String> {
    let instance: Value = if text.trim().is_empty() {
        Value::Object(Default::default())
    } else {
        match serde_norway::from_str(text) {
            Ok(value) => value,
            Err(err) => return vec![format!("not YAML: {err}")],
        }
    };
    validator.iter_errors(&instance).map(|err| format!("at `{}`: {err}", err.instance_path())).collect()
}

/// What the schema and the loader say of `text`: the schema's complaints, the loader's verdict.
fn judged(validator: &jsonschema::Validator, text: &str) -> (Vec<String>, Result<(), String>) {
    let loaded = Config::parse(text).map(drop).map_err(|err| format!("{}: {}", err.key, err.message));
    (schema_errors(validator, text), loaded)
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&schema()).unwrap()
}

#[test]
fn every_config_in_the_repository_is_valid_under_the_schema_and_loads() {
    let validator = validator();
    let configs = repository_configs();
    assert!(configs.iter().any(|(at, _)| at == "examples/hangar.yaml"), "{configs:?}");
    for (at, text) in &configs {
        let errors = schema_errors(&validator, text);
        assert!(errors.is_empty(), "{at} does not match docs/hangar.schema.json:\n{}", errors.join("\n"));
        if let Err(err) = Config::parse(text) {
            panic!("{at} does not load: {}: {}", err.key, err.message);
        }
    }
}

#[test]
fn every_example_config_names_the_schema_for_editors() {
    for (at, text) in repository_configs().iter().filter(|(at, _)| at.starts_with("examples/")) {
        assert!(
            text.starts_with("# yaml-language-server: $schema=../docs/hangar.schema.json\n"),
            "{at} should start with the yaml-language-server line naming ../docs/hangar.schema.json"
        );
    }
}

#[test]
fn the_schema_and_the_loader_accept_the_same_forms() {
    let validator = validator();
    let accepted = [
        "",
        "providers: {a: {command: [x]}}",
        "mcp_servers: {a: {command: [x], sandbox: strict}}",
        "mcp_servers: {a: {command: [x], sandbox: none}}",
        "mcp_servers: {a: {command: [x], sandbox: {preset: strict, memory_mb: null, network: any}}}",
        "sandbox_defaults: {network: {tcp_connect: [443]}, capabilities: [net_bind_service]}",
        "mcp_servers: {a: {mode: remote, endpoint: 'https://example.com/mcp'}}",
        "mcp_servers: {a: {mode: http, command: [x], args: [y], endpoint: 'http://127.0.0.1:1/mcp'}}",
        "mcp_servers: {a: {mode: subprocess, command: [x], endpoint: null}}",
        "tool_access: {mode: front_door, names: always_qualified, sessions: {idle_ttl_s: 0.5}}",
        "auth: {api_keys: [{name: ci, hash: 'sha256:0000000000000000000000000000000000000000000000000000000000000000'}]}",
        "limits: {max_concurrent_calls: 0, rate_limit: {calls_per_s: 0.5}}",
        "mcp_servers: {a: {mode: remote, endpoint: 'https://x.example/mcp', auth: {headers: {A: {file: /t, prefix: 'B '}}}}}",
        "mcp_servers: {a: {command: [x], env: {P: text, N: 3, T: {env: TOKEN}}}}",
    ];
    for text in accepted {
        let (schema, loader) = judged(&validator, text);
        assert_eq!((schema.as_slice(), loader.as_ref().err()), (&[][..], None), "{text:?} is refused");
    }
}

#[test]
fn the_schema_and_the_loader_refuse_the_same_mistakes() {
    let validator = validator();
    let refused = [
        // An unknown key, at the top and deep in a block.
        "mcp_server: {}",
        "mcp_servers: {a: {command: [x], comand: [y]}}",
        "mcp_servers: {a: {command: [x], sandbox: {filesystem: {reed: [/usr]}}}}",
        "tool_access: {sessions: {ttl: 3}}",
        // A wrong type.
        "mcp_servers: {a: {command: x}}",
        "mcp_servers: {a: {command: [x], idle_ttl_s: soon}}",
        "audit: {enabled: maybe}",
        // A word that is not one of the key's.
        "tool_access: {mode: open}",
        "mcp_servers: {a: {command: [x], sandbox: lax}}",
        "sandbox_defaults: {network: some}",
        // Out of bounds.
        "tasks: {max_per_identity: 0}",
        "shutdown: {grace_s: 3601}",
        "audit: {max_argument_bytes: 10}",
        "mcp_servers: {a: {command: [x], health_check_interval_s: 0}}",
        "sandbox_defaults: {memory_mb: 8}",
        "sandbox_defaults: {network: {tcp_bind: [0]}}",
        "recovery: {max_retries: 4294967296}",
        // A malformed name.
        "mcp_servers: {'-a': {command: [x]}}",
        "auth: {api_keys: [{name: ci, hash: 'md5:00'}]}",
        // What a server's mode needs, or refuses.
        "mcp_servers: {a: {}}",
        "mcp_servers: {a: {args: [y]}}",
        // Credentials: never inline, only where they can be used.
        "mcp_servers: {a: {mode: remote, endpoint: 'https://x.example/mcp', auth: {headers: {A: inline}}}}",
        "mcp_servers: {a: {mode: remote, endpoint: 'https://x.example/mcp', auth: {headers: {A: {file: /t, env: T}}}}}",
        "mcp_servers: {a: {mode: remote, endpoint: 'https://x.example/mcp', env: {T: {env: T}}}}",
        "mcp_servers: {a: {command: [x], auth: {headers: {A: {env: T}}}}}",
        "mcp_servers: {a: {command: [x], env: {T: {path: /t}}}}",
        "mcp_servers: {a: {command: [x], endpoint: 'http://127.0.0.1:1/mcp'}}",
        "mcp_servers: {a: {mode: http, endpoint: 'http://127.0.0.1:1/mcp'}}",
        "mcp_servers: {a: {mode: remote}}",
        "mcp_servers: {a: {mode: remote, endpoint: 'https://example.com/mcp', command: [x]}}",
        "mcp_servers: {a: {mode: remote, endpoint: 'https://example.com/mcp', sandbox: none}}",
        // A required key left out.
        "cluster: {advertise: 'http://a:8000'}",
        "limits: {rate_limit: {burst: 3}}",
    ];
    for text in refused {
        let (schema, loader) = judged(&validator, text);
        assert!(!schema.is_empty() && loader.is_err(), "{text:?}: the schema says {schema:?}, the loader {loader:?}");
    }
}
