//! Secret values kept out of what the hangar stores and shows: an upstream's log lines
//! (`logs.rs`) and the audit trail's arguments (`hangar/audit_arguments.rs`) are both cleaned
//! by one [`Redactor`].
//!
//! Every occurrence of any value is replaced by [`REDACTED`]. Overlapping or touching
//! occurrences (of one value or of several) are merged into one span first, so no fragment of
//! any of them survives between two replacements. Which values count (how short a value is no
//! secret, whether its JSON-escaped form counts too) is the caller's to say.

use aho_corasick::AhoCorasick;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// The values to replace, compiled once.
#[derive(Clone, Default)]
pub enum Redactor {
    #[default]
    Nothing,
    Secrets(AhoCorasick),
    /// The values could not be compiled into a finder (too large an automaton, in theory):
    /// everything is withheld rather than anything that might carry a value.
    WithholdAll,
}

impl Redactor {
    /// A redactor of `values`; `owner` names whose they are in the error logged if they cannot
    /// be compiled (never the values themselves).
    pub fn new(owner: &str, values: &[String]) -> Redactor {
        if values.is_empty() {
            return Redactor::Nothing;
        }
        match AhoCorasick::new(values) {
            Ok(finder) => Redactor::Secrets(finder),
            Err(err) => {
                tracing::error!(owner, %err, "cannot build the secrets' redactor; withholding everything it cleans");
                Redactor::WithholdAll
            }
        }
    }

    /// `bytes` as text with every occurrence of a secret replaced by [`REDACTED`] (invalid
    /// UTF-8 replaced too).
    pub fn redact(&self, bytes: &[u8]) -> String {
        let finder = match self {
            Redactor::Nothing => return String::from_utf8_lossy(bytes).into_owned(),
            Redactor::WithholdAll => return REDACTED.into(),
            Redactor::Secrets(finder) => finder,
        };
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for found in finder.find_overlapping_iter(bytes) {
            match spans.last_mut() {
                Some(last) if found.start() <= last.1 => last.1 = last.1.max(found.end()),
                _ => spans.push((found.start(), found.end())),
            }
        }
        if spans.is_empty() {
            return String::from_utf8_lossy(bytes).into_owned();
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut at = 0;
        for (start, end) in spans {
            out.extend_from_slice(&bytes[at..start]);
            out.extend_from_slice(REDACTED.as_bytes());
            at = end;
        }
        out.extend_from_slice(&bytes[at..]);
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values.
        f.write_str(match self {
            Redactor::Nothing => "Redactor::Nothing",
            Redactor::Secrets(_) => "Redactor::Secrets(..)",
            Redactor::WithholdAll => "Redactor::WithholdAll",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_and_touching_values_go_as_one_span() {
        let redactor = Redactor::new("test", &["abcd1234".to_owned(), "1234wxyz".to_owned()]);
        assert_eq!(redactor.redact(b"x abcd1234wxyz y"), "x [redacted] y");
        assert_eq!(redactor.redact(b"abcd1234abcd1234 and 1234wxyz"), "[redacted] and [redacted]");
        assert_eq!(Redactor::new("test", &[]).redact(b"plain"), "plain");
    }
}
