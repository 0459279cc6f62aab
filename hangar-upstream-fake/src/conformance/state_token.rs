//! Integrity-protected `requestState` for the input_required fixtures: the
//! client must echo it unchanged, and a tampered one must be refused.
//!
//! The tag is SipHash keyed with random per-process keys (std's
//! `RandomState`). That is not a cryptographic MAC, but it is all a test
//! fixture needs: nobody can guess the keys, so any edit to the state is
//! caught. A restarted upstream no longer accepts old states, which is what
//! a real server with a rotated key does too.

use std::hash::BuildHasher;

#[derive(Debug, Default)]
pub struct Signer {
    keys: std::collections::hash_map::RandomState,
}

impl Signer {
    fn tag(&self, tool: &str, round: u32) -> u64 {
        self.keys.hash_one((tool, round))
    }

    /// The state for `tool` after `round` rounds: `<round>.<tag>`.
    pub fn issue(&self, tool: &str, round: u32) -> String {
        format!("{round}.{:016x}", self.tag(tool, round))
    }

    /// The round a state stands for, if this process issued it for `tool`.
    pub fn verify(&self, tool: &str, state: &str) -> Option<u32> {
        let (round, tag) = state.split_once('.')?;
        // Only our exact spelling: no signs, no leading zeros, 16 hex digits.
        let round: u32 = round.parse().ok().filter(|r: &u32| r.to_string() == round)?;
        (tag.len() == 16 && tag == format!("{:016x}", self.tag(tool, round))).then_some(round)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_states_verify_for_their_tool_only() {
        let s = Signer::default();
        let state = s.issue("tool_a", 2);
        assert_eq!(s.verify("tool_a", &state), Some(2));
        assert_eq!(s.verify("tool_b", &state), None);
        assert_ne!(s.issue("tool_a", 1), state);
    }

    #[test]
    fn tampered_or_foreign_states_are_refused() {
        let s = Signer::default();
        let state = s.issue("t", 1);
        assert_eq!(s.verify("t", &format!("{state}-TAMPERED")), None);
        assert_eq!(s.verify("t", &state.replacen('1', "2", 1)), None);
        assert_eq!(s.verify("t", &format!("0{state}")), None);
        assert_eq!(s.verify("t", &Signer::default().issue("t", 1)), None);
        assert_eq!(s.verify("t", ""), None);
    }
}
