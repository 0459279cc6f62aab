//! Writing `capabilities.tools.pinned` into a config file's text, keeping everything else.
//!
//! `hangar pin NAME --write` edits the operator's file in place, so the edit is surgical: the
//! text is read as marked parser events (`saphyr-parser`, as in `yaml_keys.rs`), the server's
//! `capabilities.tools.pinned` value (or the place where it, `tools` or `capabilities` would go)
//! is located by position, and only that span is replaced. Comments, order, quoting and blank
//! lines elsewhere stay as they were (comments inside an old `pinned:` block go with it).
//!
//! An edit is kept only if the new text parses to the same config with the new pins; anything
//! else (a server written in flow style on the path to its pins, an alias or merge key that the
//! edit would reach through, a tag) is refused with the reason, and the file is left alone.

use indexmap::IndexMap;
use saphyr_parser::{Event, Parser, ScalarStyle};

use crate::config::Config;

/// Why the text cannot be edited safely.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinEditError {
    /// The text is not a valid config to begin with.
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
    #[error("the config has no server `{0}`")]
    NoSuchServer(String),
    /// Valid, but written in a way this edit does not handle.
    #[error("cannot edit the config safely: {0}")]
    Unsafe(String),
}

/// `text` with `mcp_servers.<server>.capabilities.tools.pinned` set to `pins`, or why not.
pub fn with_pins(text: &str, server: &str, pins: &IndexMap<String, String>) -> Result<String, PinEditError> {
    let before = Config::parse(text).map_err(|e| PinEditError::Invalid { key: e.key, message: e.message })?;
    if !before.mcp_servers.contains_key(server) {
        return Err(PinEditError::NoSuchServer(server.to_owned()));
    }
    let root = parse_tree(text)?;
    let servers = entry(&root, "mcp_servers").ok_or_else(|| PinEditError::NoSuchServer(server.to_owned()))?;
    let at = format!("mcp_servers.{server}");
    let block = |node: &Node, at: &str| match node.kind {
        Kind::Map { flow: false, .. } => Ok(()),
        _ => Err(PinEditError::Unsafe(format!("`{at}` is not a block mapping (write it one key a line)"))),
    };
    block(servers, "mcp_servers")?;
    let server_node = entry(servers, server).ok_or_else(|| {
        PinEditError::Unsafe(format!("`{at}` is not written under `mcp_servers` as a plain key (an alias or merge?)"))
    })?;
    block(server_node, &at)?;
    let offsets = CharOffsets::new(text);
    let edit = set_path(text, &offsets, server_node, &["capabilities", "tools", "pinned"], pins)?;
    let after_text = format!("{}{}{}", &text[..edit.start], edit.with, &text[edit.end..]);

    let mut expected = before;
    if let Some(config) = expected.mcp_servers.get_mut(server) {
        config.capabilities.tools.pinned = Some(pins.clone());
    }
    let after = Config::parse(&after_text)
        .map_err(|e| PinEditError::Unsafe(format!("the edited text would not parse ({}: {})", e.key, e.message)))?;
    // `Config` is compared by its `Debug` form: every field is `Debug`, not every one `PartialEq`.
    if format!("{after:?}") != format!("{expected:?}") {
        return Err(PinEditError::Unsafe(format!(
            "the edit would change more than `{at}.capabilities.tools.pinned` (an anchor, alias or merge key on the way?)"
        )));
    }
    Ok(after_text)
}

/// The `pinned:` block for `pins`, as `hangar pin` prints it: `pinned:` at column 0, one pin a
/// line below it, indented by two.
pub fn pinned_block(pins: &IndexMap<String, String>) -> String {
    if pins.is_empty() {
        return "pinned: {}\n".into();
    }
    let mut out = String::from("pinned:\n");
    for (name, digest) in pins {
        out.push_str(&format!("  {}: \"{digest}\"\n", yaml_key(name)));
    }
    out
}

/// A YAML node with its place in the text (char indices, as the parser counts).
pub(crate) struct Node {
    pub(crate) kind: Kind,
    pub(crate) start: usize,
    /// Just past its last character (for a block collection: its last descendant's).
    pub(crate) end: usize,
    /// 0-based column of its first character.
    pub(crate) col: usize,
}

pub(crate) enum Kind {
    /// A plain, untagged, unanchored scalar, or any other (`plain: false`).
    Scalar {
        value: String,
        plain: bool,
    },
    /// An alias, an anchored or tagged node: an edit through it could reach elsewhere.
    Opaque,
    Map {
        flow: bool,
        entries: Vec<(Node, Node)>,
    },
    Seq,
}

/// The replacement of `text[start..end]` (byte offsets) with `with`.
struct Edit {
    start: usize,
    end: usize,
    with: String,
}

pub(crate) fn parse_tree(text: &str) -> Result<Node, PinEditError> {
    let chars: Vec<char> = text.chars().collect();
    let mut events = Parser::new_from_str(text).map(|e| e.map_err(|err| PinEditError::Unsafe(err.to_string())));
    loop {
        match events.next() {
            Some(Ok((Event::DocumentStart(_), _))) => break,
            Some(Ok(_)) => {}
            Some(Err(err)) => return Err(err),
            None => return Err(PinEditError::Unsafe("the config is empty".into())),
        }
    }
    let (event, span) = events.next().ok_or_else(|| PinEditError::Unsafe("the config is empty".into()))??;
    node(&chars, &mut events, event, span)
}

/// The node that `event` opens, reading its contents from `events`. The config was validated
/// first, so its nesting is bounded (`yaml_keys::MAX_DEPTH`).
fn node<'a>(
    chars: &[char],
    events: &mut impl Iterator<Item = Result<(Event<'a>, saphyr_parser::Span), PinEditError>>,
    event: Event<'a>,
    span: saphyr_parser::Span,
) -> Result<Node, PinEditError> {
    let start = span.start.index();
    let col = span.start.col();
    let flow = chars.get(start).is_some_and(|c| *c == '{' || *c == '[');
    let next = |events: &mut dyn Iterator<Item = Result<(Event<'a>, saphyr_parser::Span), PinEditError>>| {
        events.next().ok_or_else(|| PinEditError::Unsafe("the config ends early".into()))?
    };
    match event {
        Event::Scalar(value, style, anchor, tag) => {
            let plain = style == ScalarStyle::Plain && anchor == 0 && tag.is_none();
            let kind = if anchor == 0 && tag.is_none() {
                Kind::Scalar { value: value.into_owned(), plain }
            } else {
                Kind::Opaque
            };
            Ok(Node { kind, start, end: span.end.index(), col })
        }
        Event::Alias(_) => Ok(Node { kind: Kind::Opaque, start, end: span.end.index(), col }),
        Event::MappingStart(anchor, tag) => {
            let mut entries = Vec::new();
            let mut end = start;
            loop {
                let (event, span) = next(events)?;
                if let Event::MappingEnd = event {
                    if flow {
                        end = span.start.index() + 1;
                    }
                    break;
                }
                let key = node(chars, events, event, span)?;
                let (event, span) = next(events)?;
                let value = node(chars, events, event, span)?;
                end = end.max(value.end).max(key.end);
                entries.push((key, value));
            }
            let kind = if anchor == 0 && tag.is_none() { Kind::Map { flow, entries } } else { Kind::Opaque };
            Ok(Node { kind, start, end, col })
        }
        Event::SequenceStart(..) => {
            let mut end = start;
            loop {
                let (event, span) = next(events)?;
                if let Event::SequenceEnd = event {
                    if flow {
                        end = span.start.index() + 1;
                    }
                    break;
                }
                end = end.max(node(chars, events, event, span)?.end);
            }
            Ok(Node { kind: Kind::Seq, start, end, col })
        }
        other => Err(PinEditError::Unsafe(format!("unexpected YAML event {other:?}"))),
    }
}

/// The value of `key` in `map`, when `map` is a mapping and `key` a plain key in it.
pub(crate) fn entry<'n>(map: &'n Node, key: &str) -> Option<&'n Node> {
    let Kind::Map { entries, .. } = &map.kind else { return None };
    entries.iter().find(|(k, _)| matches!(&k.kind, Kind::Scalar { value, .. } if value == key)).map(|(_, v)| v)
}

/// The edit that sets `keys` (a path below `map`, a mapping) to `pins`.
fn set_path(
    text: &str,
    at: &CharOffsets,
    map: &Node,
    keys: &[&str],
    pins: &IndexMap<String, String>,
) -> Result<Edit, PinEditError> {
    let Kind::Map { flow, entries } = &map.kind else {
        return Err(PinEditError::Unsafe("a key on the way to `pinned` is not a mapping".into()));
    };
    let (key, rest) = keys.split_first().ok_or_else(|| PinEditError::Unsafe("nothing to set".into()))?;
    if entries.iter().any(|(k, _)| matches!(&k.kind, Kind::Scalar { value, .. } if value == "<<")) {
        return Err(PinEditError::Unsafe("a merge key (`<<`) is on the way to `pinned`".into()));
    }
    let found = entries.iter().find(|(k, _)| matches!(&k.kind, Kind::Scalar { value, .. } if value == key));
    let Some((k, v)) = found else {
        // A new entry.
        return Ok(if *flow {
            let close = at.byte(map.end - 1);
            let comma = if entries.is_empty() { "" } else { ", " };
            Edit { start: close, end: close, with: format!("{comma}{key}: {}", flow_value(rest, pins)) }
        } else {
            let indent = entries.first().map_or(map.col, |(k, _)| k.col);
            let place = line_end(text, at.byte(map.end));
            let newline = if place == text.len() && !text.ends_with('\n') { "\n" } else { "" };
            let body = block_value(rest, pins, indent + 2);
            Edit { start: place, end: place, with: format!("{newline}{}{key}:{body}\n", " ".repeat(indent)) }
        });
    };
    match &v.kind {
        Kind::Map { .. } if !rest.is_empty() => set_path(text, at, v, rest, pins),
        // The value is replaced whole: on its own lines in a block mapping, in place in a flow one.
        Kind::Map { flow: false, entries } => {
            let indent = entries.first().map_or(k.col + 2, |(first, _)| first.col);
            let start = line_end_before_newline(text, at.byte(k.end));
            Ok(Edit { start, end: at.byte(v.end), with: block_value(rest, pins, indent) })
        }
        Kind::Scalar { value, plain: true } if value.is_empty() && !*flow => {
            // `key:` with nothing after it: the value goes on the lines below.
            let start = line_end_before_newline(text, at.byte(k.end));
            Ok(Edit { start, end: start, with: block_value(rest, pins, k.col + 2) })
        }
        Kind::Map { flow: true, .. } | Kind::Scalar { plain: true, .. } if is_null(v) || rest.is_empty() => {
            Ok(Edit { start: at.byte(v.start), end: at.byte(v.end), with: flow_value(rest, pins) })
        }
        _ => Err(PinEditError::Unsafe(format!("`{key}` holds something other than a mapping"))),
    }
}

fn is_null(node: &Node) -> bool {
    matches!(&node.kind, Kind::Scalar { value, plain: true } if matches!(value.as_str(), "" | "~" | "null" | "Null" | "NULL"))
}

/// The value `keys` then `pins` on the lines below a key, each line indented by `indent` more
/// per level (starts with a newline; an empty `pins` is `{}` on a line of its own, so a
/// comment on the key's line stays a comment).
fn block_value(keys: &[&str], pins: &IndexMap<String, String>, indent: usize) -> String {
    match keys.split_first() {
        Some((key, rest)) => format!("\n{}{key}:{}", " ".repeat(indent), block_value(rest, pins, indent + 2)),
        None if pins.is_empty() => format!("\n{}{{}}", " ".repeat(indent)),
        None => pins
            .iter()
            .map(|(name, digest)| format!("\n{}{}: \"{digest}\"", " ".repeat(indent), yaml_key(name)))
            .collect(),
    }
}

/// The same value in flow style, on one line.
fn flow_value(keys: &[&str], pins: &IndexMap<String, String>) -> String {
    match keys.split_first() {
        Some((key, rest)) => format!("{{{key}: {}}}", flow_value(rest, pins)),
        None => {
            let items: Vec<String> =
                pins.iter().map(|(name, digest)| format!("{}: \"{digest}\"", yaml_key(name))).collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// A tool name as a YAML key: plain when that reads back as the same string, else JSON-quoted
/// (a JSON string is a valid YAML double-quoted scalar).
pub(crate) fn yaml_key(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !matches!(
            name.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        );
    if plain { name.to_owned() } else { serde_json::Value::from(name).to_string() }
}

/// The byte offset just past the end of the line holding `byte` (past its newline).
pub(crate) fn line_end(text: &str, byte: usize) -> usize {
    if byte > 0 && text.as_bytes().get(byte - 1) == Some(&b'\n') {
        return byte;
    }
    text[byte..].find('\n').map_or(text.len(), |i| byte + i + 1)
}

/// The byte offset of the newline ending the line holding `byte` (or the text's end).
pub(crate) fn line_end_before_newline(text: &str, byte: usize) -> usize {
    text[byte..].find('\n').map_or(text.len(), |i| byte + i)
}

/// Char indices (what the parser's markers count) to byte offsets.
pub(crate) struct CharOffsets(Vec<usize>);

impl CharOffsets {
    pub(crate) fn new(text: &str) -> Self {
        let mut offsets: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        offsets.push(text.len());
        CharOffsets(offsets)
    }

    pub(crate) fn byte(&self, char_index: usize) -> usize {
        self.0.get(char_index).copied().unwrap_or_else(|| self.0.last().copied().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pins(list: &[(&str, char)]) -> IndexMap<String, String> {
        list.iter().map(|(name, c)| (name.to_string(), format!("sha256:{}", c.to_string().repeat(64)))).collect()
    }

    fn pinned_of(text: &str, server: &str) -> Option<IndexMap<String, String>> {
        Config::parse(text).unwrap().mcp_servers[server].capabilities.tools.pinned.clone()
    }

    #[test]
    fn adds_the_whole_path_to_a_server_without_capabilities_keeping_comments() {
        let text = "# the team's hangar\nmcp_servers:\n  math:  # reviewed 2026-11\n    command: [fake, --tools, add]   # the adder\n  # next one\n  other:\n    command: [x]\n";
        let edited = with_pins(text, "math", &pins(&[("add", 'a'), ("sub", 'b')])).unwrap();
        assert_eq!(
            edited,
            format!(
                "# the team's hangar\nmcp_servers:\n  math:  # reviewed 2026-11\n    command: [fake, --tools, add]   # the adder\n    capabilities:\n      tools:\n        pinned:\n          add: \"sha256:{}\"\n          sub: \"sha256:{}\"\n  # next one\n  other:\n    command: [x]\n",
                "a".repeat(64),
                "b".repeat(64)
            )
        );
        assert_eq!(pinned_of(&edited, "math"), Some(pins(&[("add", 'a'), ("sub", 'b')])));
        assert_eq!(pinned_of(&edited, "other"), None);
    }

    #[test]
    fn replaces_existing_pins_in_place_and_again_to_the_same_text() {
        let text = "mcp_servers:\n  math:\n    command: [x]\n    capabilities:\n      enforcement_mode: alert  # for now\n      tools:\n        expected_tools: [add]\n        pinned:   # reviewed\n          add: \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"\n    env: {A: b}\n";
        let once = with_pins(text, "math", &pins(&[("add", 'c')])).unwrap();
        assert!(once.contains("enforcement_mode: alert  # for now\n"), "{once}");
        assert!(once.contains("        pinned:   # reviewed\n          add: \"sha256:ccc"), "{once}");
        assert!(once.ends_with("\"\n    env: {A: b}\n"), "{once}");
        assert_eq!(pinned_of(&once, "math"), Some(pins(&[("add", 'c')])));
        assert_eq!(with_pins(&once, "math", &pins(&[("add", 'c')])).unwrap(), once, "idempotent");
    }

    #[test]
    fn edits_flow_style_tools_in_place() {
        let text = "mcp_servers:\n  math:\n    command: [x]\n    capabilities:\n      tools: {expected_tools: [add]}  # keep\n";
        let edited = with_pins(text, "math", &pins(&[("add", 'd')])).unwrap();
        assert!(
            edited.contains(&format!(
                "tools: {{expected_tools: [add], pinned: {{add: \"sha256:{}\"}}}}  # keep\n",
                "d".repeat(64)
            )),
            "{edited}"
        );
        let again = with_pins(&edited, "math", &pins(&[("add", 'e')])).unwrap();
        assert_eq!(pinned_of(&again, "math"), Some(pins(&[("add", 'e')])));
        assert!(again.contains("  # keep\n"));
    }

    #[test]
    fn fills_an_empty_key_and_quotes_names_that_need_it() {
        let text = "mcp_servers:\n  m:\n    command: [x]\n    capabilities:\n      tools:\n";
        let edited = with_pins(text, "m", &pins(&[("true", 'a'), ("a b", 'b'), ("ok_name-2", 'c')])).unwrap();
        assert_eq!(pinned_of(&edited, "m"), Some(pins(&[("true", 'a'), ("a b", 'b'), ("ok_name-2", 'c')])));
        assert!(
            edited.contains("\"true\": ") && edited.contains("\"a b\": ") && edited.contains(" ok_name-2: "),
            "{edited}"
        );
    }

    #[test]
    fn a_file_without_a_final_newline_and_an_empty_pin_set() {
        let text = "mcp_servers:\n  m:\n    command: [x]";
        let edited = with_pins(text, "m", &IndexMap::new()).unwrap();
        assert_eq!(
            edited,
            "mcp_servers:\n  m:\n    command: [x]\n    capabilities:\n      tools:\n        pinned:\n          {}\n"
        );
        assert_eq!(pinned_of(&edited, "m"), Some(IndexMap::new()));
    }

    #[test]
    fn refuses_what_it_cannot_edit_safely_and_names_the_reason() {
        let p = pins(&[("add", 'a')]);
        let flow_server = "mcp_servers:\n  m: {command: [x]}\n";
        assert!(
            matches!(with_pins(flow_server, "m", &p), Err(PinEditError::Unsafe(why)) if why.contains("`mcp_servers.m` is not a block mapping"))
        );
        let shared = "mcp_servers:\n  a:\n    command: [x]\n    capabilities: &caps\n      tools: {expected_tools: [add]}\n  b:\n    command: [y]\n    capabilities: *caps\n";
        for server in ["a", "b"] {
            assert!(matches!(with_pins(shared, server, &p), Err(PinEditError::Unsafe(_))), "{server}");
        }
        assert_eq!(with_pins(flow_server, "nope", &p), Err(PinEditError::NoSuchServer("nope".into())));
        assert!(matches!(with_pins("mcp_servers: 3\n", "m", &p), Err(PinEditError::Invalid { .. })));
    }

    #[test]
    fn the_printed_block_is_ready_to_paste() {
        assert_eq!(pinned_block(&pins(&[("add", 'a')])), format!("pinned:\n  add: \"sha256:{}\"\n", "a".repeat(64)));
        assert_eq!(pinned_block(&IndexMap::new()), "pinned: {}\n");
    }

    #[test]
    fn a_server_ending_in_a_block_sequence_and_a_crlf_file() {
        let text = "mcp_servers:\n  m:\n    command:\n      - x\n      - --flag   # why\n\n  n:\n    command: [y]\n";
        let edited = with_pins(text, "m", &pins(&[("add", 'a')])).unwrap();
        assert!(edited.contains("      - --flag   # why\n    capabilities:\n"), "{edited}");
        assert_eq!(pinned_of(&edited, "m"), Some(pins(&[("add", 'a')])));
        let crlf = text.replace('\n', "\r\n");
        assert_eq!(
            pinned_of(&with_pins(&crlf, "n", &pins(&[("add", 'b')])).unwrap(), "n"),
            Some(pins(&[("add", 'b')]))
        );
    }

    #[test]
    fn a_merge_key_on_the_way_is_refused() {
        let text =
            "mcp_servers:\n  a: &base\n    command: [x]\n  b:\n    <<: *base\n    capabilities:\n      tools: {}\n";
        match with_pins(text, "b", &pins(&[("add", 'a')])) {
            Err(PinEditError::Unsafe(_)) | Err(PinEditError::Invalid { .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
