//! Duplicate mapping keys in YAML text, with the lines of both.
//!
//! `serde_norway` fills a map as it reads, so a key given twice silently keeps its last value
//! (and a repeated struct field is reported at one line only). This pre-pass walks the same text
//! as marked parser events (`saphyr-parser`) and finds the first key repeated in any mapping:
//! block or flow, at any depth, inside sequences too.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser};

/// A key given twice in one mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// The dotted path of the mapping that holds it (`mcp_servers.math.env`), empty at the top.
    pub within: String,
    pub key: String,
    /// 1-based lines of the repeat and of the first occurrence.
    pub line: usize,
    pub first_line: usize,
}

impl DuplicateKey {
    /// The dotted path of the repeated key itself (`mcp_servers.math`).
    pub fn path(&self) -> String {
        join(&self.within, &self.key)
    }
}

/// What a mapping reads next.
enum Next {
    Key,
    /// A key that is a collection (never a config key) is being read.
    ComplexKey,
    /// The value of this key (`None`: a key that cannot be named, an alias or a collection).
    Value(Option<String>),
}

enum Frame {
    Map {
        path: String,
        /// Each key seen so far and the line it was first given on.
        seen: HashMap<String, usize>,
        next: Next,
    },
    Seq {
        path: String,
        index: usize,
    },
}

/// The first repeated key in `text`, if any. Text the parser cannot read yields `None`: the
/// deserializer that reads it next reports the syntax error in its own words.
pub fn find_duplicate(text: &str) -> Option<DuplicateKey> {
    let mut stack: Vec<Frame> = Vec::new();
    for event in Parser::new_from_str(text) {
        let (event, span) = event.ok()?;
        let line = span.start.line();
        match event {
            Event::Scalar(value, ..) => {
                if let Some(Frame::Map { path, seen, next: next @ Next::Key }) = stack.last_mut() {
                    if let Some(&first_line) = seen.get(value.as_ref()) {
                        return Some(DuplicateKey { within: path.clone(), key: value.into_owned(), line, first_line });
                    }
                    seen.insert(value.to_string(), line);
                    *next = Next::Value(Some(value.into_owned()));
                } else {
                    node_done(&mut stack);
                }
            }
            Event::Alias(_) => {
                // An alias as a key cannot be compared by text; as a value it is a whole node.
                match stack.last_mut() {
                    Some(Frame::Map { next: next @ Next::Key, .. }) => *next = Next::Value(None),
                    _ => node_done(&mut stack),
                }
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let path = child_path(&mut stack);
                stack.push(match event {
                    Event::MappingStart(..) => Frame::Map { path, seen: HashMap::new(), next: Next::Key },
                    _ => Frame::Seq { path, index: 0 },
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                node_done(&mut stack);
            }
            Event::DocumentStart(_) => stack.clear(),
            _ => {}
        }
    }
    None
}

/// The path of the node starting now, inside the innermost collection. A collection used as a
/// key (rare, and never a config key) marks the key as read, with no text to compare.
fn child_path(stack: &mut [Frame]) -> String {
    match stack.last_mut() {
        None => String::new(),
        Some(Frame::Map { path, next: Next::Value(Some(key)), .. }) => join(path, key),
        Some(Frame::Map { path, next: next @ Next::Key, .. }) => {
            *next = Next::ComplexKey;
            join(path, "?")
        }
        Some(Frame::Map { path, next: Next::Value(None) | Next::ComplexKey, .. }) => join(path, "?"),
        Some(Frame::Seq { path, index }) => format!("{path}[{index}]"),
    }
}

/// A node just ended inside the innermost collection: a mapping wants its next key, a
/// sequence counts one more item.
fn node_done(stack: &mut [Frame]) {
    match stack.last_mut() {
        // A key that was a collection is followed by its value; a value ends the pair.
        Some(Frame::Map { next, .. }) => {
            *next = if matches!(next, Next::ComplexKey) { Next::Value(None) } else { Next::Key };
        }
        Some(Frame::Seq { index, .. }) => *index += 1,
        None => {}
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dup(text: &str) -> (String, String, usize, usize) {
        let found = find_duplicate(text).unwrap_or_else(|| panic!("no duplicate found in {text:?}"));
        (found.within, found.key, found.line, found.first_line)
    }

    #[test]
    fn a_server_named_twice() {
        let text = "mcp_servers:\n  math:\n    command: [a]\n  echo:\n    command: [b]\n  math:\n    command: [c]\n";
        assert_eq!(dup(text), ("mcp_servers".into(), "math".into(), 6, 2));
    }

    #[test]
    fn at_the_top_level() {
        let text = "mcp_servers: {}\nrecovery: {}\nmcp_servers:\n  x: {command: [a]}\n";
        assert_eq!(dup(text), (String::new(), "mcp_servers".into(), 3, 1));
    }

    #[test]
    fn inside_a_server_its_env_and_nested_maps() {
        let server = "mcp_servers:\n  m:\n    command: [a]\n    idle_ttl_s: 1\n    idle_ttl_s: 2\n";
        assert_eq!(dup(server), ("mcp_servers.m".into(), "idle_ttl_s".into(), 5, 4));
        let env = "mcp_servers:\n  m:\n    command: [a]\n    env:\n      TOKEN: a\n      OTHER: b\n      TOKEN: c\n";
        assert_eq!(dup(env), ("mcp_servers.m.env".into(), "TOKEN".into(), 7, 5));
        let nested = "mcp_servers:\n  m:\n    command: [a]\n    capabilities:\n      tools: {expected_tools: [x]}\n      tools: {}\n";
        assert_eq!(dup(nested), ("mcp_servers.m.capabilities".into(), "tools".into(), 6, 5));
    }

    #[test]
    fn in_flow_mappings_and_inside_sequences() {
        assert_eq!(
            dup("limits: {max_concurrent_calls: 1, max_concurrent_calls: 2}\n"),
            ("limits".into(), "max_concurrent_calls".into(), 1, 1)
        );
        assert_eq!(dup("x:\n  - {a: 1}\n  - {b: 1,\n     b: 2}\n"), ("x[1]".into(), "b".into(), 4, 3));
    }

    #[test]
    fn quoting_does_not_hide_a_repeat() {
        assert_eq!(dup("mcp_servers:\n  math: {}\n  \"math\": {}\n"), ("mcp_servers".into(), "math".into(), 3, 2));
    }

    #[test]
    fn the_same_key_in_different_mappings_is_fine() {
        let text = "mcp_servers:\n  a: {command: [x], env: {K: 1}}\n  b: {command: [x], env: {K: 1}}\nrecovery: {max_retries: 1}\nlimits: {max_retries: 1}\n";
        assert_eq!(find_duplicate(text), None);
        // A key that is also a value, and keys after a nested mapping ends.
        assert_eq!(find_duplicate("a: a\nb:\n  c: 1\nc: 2\n"), None);
        assert_eq!(find_duplicate("a: [1, 2]\nb: {a: 1}\n"), None);
        // A collection as a key, then ordinary keys.
        assert_eq!(find_duplicate("? [a, b]\n: 1\nc: 2\nd: 3\n"), None);
        assert_eq!(dup("? [a, b]\n: 1\nc: 2\nc: 3\n").1, "c");
    }

    #[test]
    fn unreadable_text_is_left_to_the_deserializer() {
        assert_eq!(find_duplicate("a: [\n"), None);
        assert_eq!(find_duplicate(""), None);
    }
}
