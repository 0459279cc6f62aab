//! Every problem of a config, not only the first: what `hangar check` reports (through
//! `hangar-supervisor --check`, which adds what only a running system can tell).
//!
//! Loading a config stops at its first problem. To find the next, the part that problem is in
//! is set aside and the rest is loaded again, with exactly the checks a start makes
//! ([`Config::parse`], then every credential read): a server (`mcp_servers.<id>`) is left out, a
//! profile is emptied (so the keys naming it still name one), anything else at the top level
//! is left to its default. Each problem is reported once, at its key path, in the words a start
//! would use. A problem in the YAML itself (not YAML, a key given twice, nesting too deep)
//! leaves nothing to go on, and is the only one reported.
//!
//! What is left once every problem is set aside is returned too, for the checks only the
//! supervisor can make (the kernel's sandbox support, ports, grants over its own paths).

use serde_norway::{Mapping, Value};

use crate::config::Config;
use crate::credential::Sources;
use crate::key_error::KeyError;

/// The most problems reported; past them, the rest is not looked for.
pub const MAX_PROBLEMS: usize = 100;

/// A config's problems, and what loads once they are set aside.
#[derive(Debug)]
pub struct Checked {
    pub problems: Vec<KeyError>,
    /// The config without the parts that have problems; `None` when nothing could be loaded.
    pub config: Option<Config>,
}

/// Every problem of config `text`, its credentials read from `sources`.
pub fn check(text: &str, sources: &Sources<'_>) -> Checked {
    let load = |text: &str| {
        let mut config = Config::parse(text)?;
        config.resolve_credentials(sources)?;
        Ok::<_, KeyError>(config)
    };
    let mut problems = Vec::new();
    let first = match load(text) {
        Ok(config) => return Checked { problems, config: Some(config) },
        Err(first) => first,
    };
    // Read as plain YAML to set parts aside; YAML that does not read so has its one problem.
    let Ok(mut value) = serde_norway::from_str::<Value>(text) else {
        return Checked { problems: vec![first], config: None };
    };
    let mut problem = first;
    loop {
        let set_aside = set_aside(&mut value, &problem);
        problems.push(problem);
        if !set_aside || problems.len() >= MAX_PROBLEMS {
            return Checked { problems, config: None };
        }
        let Ok(reduced) = serde_norway::to_string(&value) else { return Checked { problems, config: None } };
        match load(&reduced) {
            Ok(config) => return Checked { problems, config: Some(config) },
            // The same problem again: setting its part aside did not help; nothing more to learn.
            Err(next) if problems.iter().any(|p| p.key == next.key && p.message == next.message) => {
                return Checked { problems, config: None };
            }
            // Found in the text with parts set aside: its line and column are not the file's.
            Err(next) => problem = KeyError { message: without_position(&next.message), ..next },
        }
    }
}

/// `message` without the ` at line N column M` the YAML reader adds.
fn without_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at)
            if message[at + 9..].split(" column ").all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            message[..at].to_owned()
        }
        _ => message.to_owned(),
    }
}

/// Sets aside the part of `value` that `problem` is in; whether anything changed.
fn set_aside(value: &mut Value, problem: &KeyError) -> bool {
    let Some(top) = value.as_mapping_mut() else { return false };
    let key = problem.key.as_str();
    if key == "(top level)" {
        // `unknown field `name`, expected ...`: that key goes.
        let unknown = problem.message.strip_prefix("unknown field `").and_then(|rest| rest.split_once('`'));
        return unknown.is_some_and(|(name, _)| top.remove(name).is_some());
    }
    for (section, empty) in [("mcp_servers", false), ("profiles", true)] {
        let Some(rest) = key.strip_prefix(section).and_then(|rest| rest.strip_prefix('.')) else { continue };
        let Some(Value::Mapping(entries)) = top.get_mut(section) else { break };
        if let Some(name) = entry_named(entries, rest) {
            if empty {
                entries.insert(Value::String(name), Value::Mapping(Mapping::new()));
            } else {
                entries.remove(name.as_str());
            }
            return true;
        }
        break;
    }
    let first = key.split(['.', '[']).next().unwrap_or_default();
    top.remove(first).is_some()
}

/// The entry of `entries` that the key path `rest` (after `section.`) is in: the longest name
/// it starts with (a name may hold dots).
fn entry_named(entries: &Mapping, rest: &str) -> Option<String> {
    entries
        .keys()
        .filter_map(Value::as_str)
        .filter(|name| rest == *name || rest.starts_with(&format!("{name}.")) || rest.starts_with(&format!("{name}[")))
        .max_by_key(|name| name.len())
        .map(str::to_owned)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn check_text(text: &str) -> Checked {
        let sources = Sources { var: &|_| None, credentials_directory: None };
        check(text, &sources)
    }

    fn keys(checked: &Checked) -> Vec<&str> {
        checked.problems.iter().map(|p| p.key.as_str()).collect()
    }

    #[test]
    fn a_good_config_has_no_problems() {
        let checked = check_text("mcp_servers:\n  math: {command: [fake]}\n");
        assert!(checked.problems.is_empty());
        assert_eq!(checked.config.unwrap().mcp_servers.len(), 1);
    }

    #[test]
    fn every_problem_is_found_each_at_its_key_path() {
        let text = r#"
tool_access: {mode: sideways}
profiles:
  dev:
    servers: [math]
    rules:
      - {tool: "*", when: "args.(", then: deny}
auth:
  api_keys:
    - {name: alice, hash: "sha256:0000000000000000000000000000000000000000000000000000000000000000", profile: dev}
mcp_servers:
  math: {command: [fake], comand: [typo]}
  web: {mode: remote}
  notes.v2: {command: [notes], env: {TOKEN: {env: NOT_SET_ANYWHERE}}}
  fine: {command: [fake]}
"#;
        let checked = check_text(text);
        let found = keys(&checked);
        assert!(found.contains(&"mcp_servers.math.comand"), "{found:?}");
        assert!(found.contains(&"mcp_servers.web.endpoint"), "{found:?}");
        assert!(found.iter().any(|k| k.starts_with("mcp_servers.notes.v2.env.TOKEN")), "{found:?}");
        assert!(found.contains(&"profiles.dev.rules[0].when"), "{found:?}");
        assert!(found.iter().any(|k| k.starts_with("tool_access")), "{found:?}");
        assert_eq!(found.len(), 5, "each once: {:?}", checked.problems);
        // What is left loads: the good server, alice's key and her (emptied) profile.
        let config = checked.config.unwrap();
        assert_eq!(config.mcp_servers.keys().collect::<Vec<_>>(), ["fine"]);
        assert_eq!(config.auth.api_keys.len(), 1);
    }

    #[test]
    fn an_unknown_top_level_key_is_one_problem_among_others() {
        let checked = check_text("mcp_server: {}\nmcp_servers:\n  a: {mode: remote}\n");
        assert_eq!(keys(&checked), ["mcp_server", "mcp_servers.a.endpoint"], "{:?}", checked.problems);
    }

    #[test]
    fn positions_in_the_reduced_text_are_not_given_as_the_files() {
        let checked = check_text("tool_access: {mode: x}\nmcp_servers:\n  a: {command: [f], comand: [g]}\n");
        assert!(checked.problems[0].message.contains("at line 1"), "{:?}", checked.problems);
        assert!(!checked.problems[1].message.contains(" at line "), "{:?}", checked.problems);
        assert_eq!(without_position("bad at line 3 column 7"), "bad");
        assert_eq!(without_position("bad at line three"), "bad at line three");
    }

    #[test]
    fn a_problem_of_the_yaml_itself_is_the_only_one() {
        let checked = check_text("mcp_servers:\n  a: {command: [x]}\n  a: {command: [y]}\n");
        assert_eq!(checked.problems.len(), 1, "{:?}", checked.problems);
        assert!(checked.config.is_none());
        let checked = check_text("mcp_servers: [unclosed\n");
        assert_eq!(checked.problems.len(), 1);
    }
}
