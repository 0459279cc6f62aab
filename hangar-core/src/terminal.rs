//! Text that meets a terminal: what a client or an upstream chose (tool names, identities,
//! upstream output) shown so that it can neither drive the terminal nor forge a line.
//!
//! A terminal obeys escape sequences: a tool name holding `ESC ] 0 ; ... BEL` retitles an
//! operator's window, `ESC [ 2 J` clears it, and a newline inside one field of a table starts a
//! line of the attacker's own. So every printing path of the hangar (the `hangar` CLI's tables,
//! lines and errors; the processes' human-format logs) shows such text through [`visible`], which
//! writes each control character as an escape a person can read and no terminal acts on:
//! - `\n`, `\r` and `\t` as those two characters, so no field holds a line break;
//! - every other C0 control (U+0000..U+001F) and DEL (U+007F) as `\xNN`: ESC is `\x1b`, BEL
//!   `\x07`;
//! - the C1 controls (U+0080..U+009F; some terminals take U+009B as CSI) and the bidirectional
//!   marks and overrides that reorder what a reader sees (U+061C, U+200E, U+200F,
//!   U+202A..U+202E, U+2066..U+2069) as `\u{XXXX}`.
//!
//! A backslash is left as it is, so a name that spells `\x1b` itself reads the same as one that
//! held an ESC: the reader is told what the bytes were, never driven by them. JSON printed to a
//! terminal goes through [`visible_json`], which keeps it JSON of the same value.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is shown escaped: a control character, or a mark that reorders text.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every control character (and bidirectional mark) written as a visible escape;
/// unchanged, and not copied, when it holds none.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => shown.push_str("\\n"),
            '\r' => shown.push_str("\\r"),
            '\t' => shown.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(shown, "\\x{:02x}", c as u32);
            }
            c if hidden(c) => {
                let _ = write!(shown, "\\u{{{:04x}}}", c as u32);
            }
            c => shown.push(c),
        }
    }
    Cow::Owned(shown)
}

/// A JSON text as it may be printed to a terminal: every control character and bidirectional
/// mark the serializer left raw (DEL, C1 controls, the marks; JSON escapes only C0 inside
/// strings) becomes a `\uXXXX` escape, so the text stays JSON of the same value. Raw C0 outside
/// strings is whitespace between tokens (a pretty-printed answer's line breaks) and stays.
pub fn visible_json(text: &str) -> Cow<'_, str> {
    let needs = |c: char| hidden(c) && !matches!(c, '\n' | '\r' | '\t');
    if !text.chars().any(needs) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs(c) {
            let _ = write!(shown, "\\u{:04x}", c as u32);
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVIL: &str = "evil\u{1b}]0;OWNED\u{7}\u{1b}[2J\nFAKE ... rm -rf ok";

    #[test]
    fn plain_text_is_not_copied() {
        assert!(matches!(visible("math__add é 日本"), Cow::Borrowed("math__add é 日本")));
        assert!(matches!(visible_json(r#"{"a":"é"}"#), Cow::Borrowed(_)));
    }

    #[test]
    fn an_escape_sequence_and_a_forged_line_are_shown_not_obeyed() {
        let shown = visible(EVIL);
        assert_eq!(shown, "evil\\x1b]0;OWNED\\x07\\x1b[2J\\nFAKE ... rm -rf ok");
        assert!(!shown.chars().any(char::is_control));
    }

    #[test]
    fn every_class_of_control_has_its_escape() {
        assert_eq!(visible("a\tb\r\n\u{0}\u{7f}"), "a\\tb\\r\\n\\x00\\x7f");
        assert_eq!(visible("x\u{9b}31m\u{85}"), "x\\u{009b}31m\\u{0085}");
        assert_eq!(visible("abc\u{202e}fed\u{2066}\u{200f}"), "abc\\u{202e}fed\\u{2066}\\u{200f}");
    }

    #[test]
    fn json_stays_json_of_the_same_value() {
        let value = serde_json::json!({"tool": format!("{EVIL}\u{7f}\u{9b}2J\u{202e}")});
        let text = value.to_string();
        let shown = visible_json(&text);
        assert!(!shown.chars().any(hidden), "{shown}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&shown).unwrap(), value);
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&visible_json(&pretty)).unwrap(), value);
        assert!(visible_json(&pretty).contains('\n'), "whitespace between tokens stays");
    }
}
