//! Bounding the client input an error message quotes back.
//!
//! Error messages name what the client sent (a method, a tool, a server id, a header value) so
//! that the mistake is easy to find, but a client can send megabytes in any of them. Every
//! message that quotes client input goes through [`bounded`]: short text passes unchanged,
//! longer text is cut at a character boundary and says how long it was.

use std::borrow::Cow;

/// The most bytes of client input one quote keeps. Long enough to recognize a name, short
/// enough that a message stays small however many quotes it holds.
pub const MAX_ECHO_BYTES: usize = 128;

/// `text` as an error message should quote it: unchanged when short, else its first
/// [`MAX_ECHO_BYTES`] bytes (cut at a character boundary), `…` and its full length in bytes.
pub fn bounded(text: &str) -> Cow<'_, str> {
    bounded_to(text, MAX_ECHO_BYTES)
}

/// [`bounded`] with a limit of `max` bytes, for a message that quotes input among its own words
/// (a config error quoting a value of the file).
pub fn bounded_to(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Cow::Owned(format!("{}… ({} bytes)", &text[..cut], text.len()))
}

/// The most bytes of an upstream's error message the front door passes on.
pub const MAX_UPSTREAM_TEXT_BYTES: usize = 1024;

/// An upstream's own error message as the front door may pass it to the client that called it:
/// control characters (and the bidirectional overrides that reorder what a reader sees) are
/// dropped, line breaks and tabs become spaces, and the text is bounded like a quote.
pub fn upstream_text(text: &str) -> String {
    let clean: String = text
        .chars()
        .filter_map(|c| match c {
            '\n' | '\r' | '\t' => Some(' '),
            '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => None,
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect();
    bounded_to(clean.trim(), MAX_UPSTREAM_TEXT_BYTES).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_text_loses_control_characters_and_length() {
        assert_eq!(upstream_text("disk\u{1b}[31m full\nretry\u{7}\u{202E}later\u{0}"), "disk[31m full retrylater");
        let long = upstream_text(&"é".repeat(5000));
        assert!(long.len() < MAX_UPSTREAM_TEXT_BYTES + 32 && long.ends_with("(10000 bytes)"), "{long}");
    }

    #[test]
    fn short_text_passes_unchanged() {
        assert!(matches!(bounded("tools/list"), Cow::Borrowed("tools/list")));
        let exact = "x".repeat(MAX_ECHO_BYTES);
        assert_eq!(bounded(&exact), exact);
    }

    #[test]
    fn long_text_is_cut_and_says_how_long_it_was() {
        let long = "m".repeat(900_000);
        let quoted = bounded(&long);
        assert!(quoted.len() < MAX_ECHO_BYTES + 32, "{} bytes", quoted.len());
        assert!(quoted.starts_with(&"m".repeat(MAX_ECHO_BYTES)));
        assert!(quoted.ends_with("… (900000 bytes)"), "{quoted}");
    }

    #[test]
    fn cuts_only_at_a_character_boundary() {
        // 'é' is two bytes, so byte 128 falls inside one after a one-byte prefix.
        let text = format!("a{}", "é".repeat(200));
        let quoted = bounded(&text);
        assert!(quoted.starts_with('a'));
        assert!(quoted.ends_with("… (401 bytes)"), "{quoted}");
        assert_eq!(quoted.chars().filter(|c| *c == 'é').count(), 63);
    }
}
