//! What the deserializer does not check in YAML text: a key given twice, nesting too deep, and
//! aliases that expand it far past its size.
//!
//! `serde_norway` fills a map as it reads, so a key given twice silently keeps its last value
//! (and a repeated struct field is reported at one line only). Its parser also takes time
//! quadratic in the nesting depth (100,000 nested `[` froze it for minutes), and it copies an
//! aliased node at every alias, so a small file whose aliases repeat a long string or each other
//! ("billion laughs") would fill the memory. This pre-pass walks the same text as marked parser
//! events (`saphyr-parser`), in linear time and without expanding anything, and finds the first
//! key repeated in any mapping (block or flow, at any depth, inside sequences too), the first
//! collection nested deeper than [`MAX_DEPTH`], and the point where the text, aliases expanded,
//! passes [`MAX_EXPANDED_BYTES`].

use std::collections::HashMap;

use saphyr_parser::{Event, Parser};

/// The deepest nesting of collections a config may use (a real one uses about six levels).
pub const MAX_DEPTH: usize = 64;

/// The most the config text may amount to with every alias replaced by what it names.
pub const MAX_EXPANDED_BYTES: u64 = 8 << 20;

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

/// Why the text is refused before it is deserialized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Duplicate(DuplicateKey),
    /// A collection at 1-based `line` opens nesting level [`MAX_DEPTH`] + 1.
    TooDeep {
        line: usize,
    },
    /// At 1-based `line`, an alias takes the expanded text past [`MAX_EXPANDED_BYTES`].
    ExpandsTooFar {
        line: usize,
    },
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

/// The first repeated key in `text`, if any (see [`find_problem`]).
pub fn find_duplicate(text: &str) -> Option<DuplicateKey> {
    match find_problem(text)? {
        Problem::Duplicate(duplicate) => Some(duplicate),
        _ => None,
    }
}

/// The first problem in `text`, if any. Text the parser cannot read yields `None`: the
/// deserializer that reads it next reports the syntax error in its own words.
pub fn find_problem(text: &str) -> Option<Problem> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut size = Expansion::default();
    for event in Parser::new_from_str(text) {
        let (event, span) = match event {
            Ok(event) => event,
            // The scanner's own bound on flow nesting (`[[[...`), met before any deep event.
            Err(err) if err.info() == "recursion limit exceeded" => {
                return Some(Problem::TooDeep { line: err.marker().line() });
            }
            Err(_) => return None,
        };
        let line = span.start.line();
        if !size.add(&event, stack.len()) {
            return Some(Problem::ExpandsTooFar { line });
        }
        match event {
            Event::Scalar(value, ..) => {
                if let Some(Frame::Map { path, seen, next: next @ Next::Key }) = stack.last_mut() {
                    if let Some(&first_line) = seen.get(value.as_ref()) {
                        let key = value.into_owned();
                        return Some(Problem::Duplicate(DuplicateKey { within: path.clone(), key, line, first_line }));
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
                if stack.len() >= MAX_DEPTH {
                    return Some(Problem::TooDeep { line });
                }
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

/// The size of the text with its aliases expanded, counted without expanding them: each
/// anchored node's expanded size is noted when it ends, and each alias adds that size.
#[derive(Default)]
struct Expansion {
    total: u64,
    /// The expanded size of each anchor's node, by anchor id.
    anchored: HashMap<usize, u64>,
    /// For each open collection: its anchor id (0: none) and the total when it began.
    open: Vec<(usize, u64)>,
}

impl Expansion {
    /// Counts `event` (`depth`: collections open before it); `false` once past the limit.
    fn add(&mut self, event: &Event<'_>, depth: usize) -> bool {
        match event {
            Event::Scalar(value, _, anchor, _) => {
                let size = value.len() as u64 + 1;
                self.total = self.total.saturating_add(size);
                if *anchor != 0 {
                    self.anchored.insert(*anchor, size);
                }
            }
            Event::Alias(anchor) => {
                let size = self.anchored.get(anchor).copied().unwrap_or(1);
                self.total = self.total.saturating_add(size);
            }
            Event::MappingStart(anchor, _) | Event::SequenceStart(anchor, _) => {
                self.total = self.total.saturating_add(1);
                self.open.truncate(depth);
                self.open.push((*anchor, self.total - 1));
            }
            Event::MappingEnd | Event::SequenceEnd => {
                if let Some((anchor, began)) = self.open.pop()
                    && anchor != 0
                {
                    self.anchored.insert(anchor, self.total - began);
                }
            }
            _ => {}
        }
        self.total <= MAX_EXPANDED_BYTES
    }
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

    #[test]
    fn nesting_past_the_limit_is_refused_in_block_and_flow_style() {
        // The top mapping is the first level.
        let ok = format!("x: {}1{}\n", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        assert_eq!(find_problem(&ok), None);
        let flow = format!("a: 1\nx: {}1{}\n", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(find_problem(&flow), Some(Problem::TooDeep { line: 2 }));
        let scanner_bound = format!("x: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(find_problem(&scanner_bound), Some(Problem::TooDeep { line: 1 }));
        let block: String = (0..=MAX_DEPTH).map(|depth| format!("{}k:\n", " ".repeat(depth))).collect();
        assert_eq!(
            find_problem(&format!("{block}{}1\n", " ".repeat(MAX_DEPTH + 1))),
            Some(Problem::TooDeep { line: 65 })
        );
    }

    #[test]
    fn aliases_may_repeat_a_node_but_not_multiply_the_text() {
        let shared = "common: &env {A: '1', B: '2'}\nmcp_servers:\n  a: {command: [x], env: *env}\n  b: {command: [x], env: *env}\n";
        assert_eq!(find_problem(shared), None);
        // Nested anchors: each level is nine of the one before.
        let mut laughs = String::from("l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for level in 1..10 {
            let before = format!("*l{}", level - 1);
            laughs.push_str(&format!("l{level}: &l{level} [{}]\n", vec![before; 9].join(", ")));
        }
        assert_eq!(find_problem(&laughs), Some(Problem::ExpandsTooFar { line: 7 }));
        // One long scalar, aliased many times.
        let long = format!("s: &s {}\nx: [{}]\n", "x".repeat(100_000), vec!["*s"; 100].join(", "));
        assert_eq!(find_problem(&long), Some(Problem::ExpandsTooFar { line: 2 }));
    }
}
