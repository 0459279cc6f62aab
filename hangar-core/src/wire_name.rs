//! The one name a unit enum variant has: the one serde gives it on the wire.
//!
//! Logs, metrics labels and messages use the same name, read back from serde rather than kept in
//! a second table that could drift from the `#[serde(rename...)]` attributes.

use serde::Serialize;

/// The serde name of `value`, a unit variant of an enum (`""` for anything else, which no
/// caller passes: every caller is a fieldless enum's `as_str`).
pub fn of<T: Serialize>(value: &T) -> &'static str {
    serde_variant::to_variant_name(value).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use crate::config::Mode;
    use crate::ipc_error::ErrorKind;
    use crate::lifecycle::{DeadReason, RevivedBy, State, StopReason};

    /// Each `as_str` is the variant's JSON string, for every variant.
    fn same_as_json<T: serde::Serialize>(values: &[T], as_str: impl Fn(&T) -> &'static str) {
        for value in values {
            let name = as_str(value);
            assert!(!name.is_empty());
            assert_eq!(serde_json::to_value(value).ok(), Some(serde_json::Value::from(name)));
        }
    }

    #[test]
    fn as_str_is_the_serde_name() {
        use State::*;
        same_as_json(&[Cold, Initializing, Ready, Degraded, Dead], |s| s.as_str());
        assert_eq!(Initializing.as_str(), "initializing");
        let reasons =
            [DeadReason::GivenUp, DeadReason::Crashed, DeadReason::StartFailed, DeadReason::CapabilityBlocked];
        same_as_json(&reasons, |r| r.as_str());
        assert_eq!(DeadReason::CapabilityBlocked.as_str(), "capability_blocked");
        same_as_json(&[RevivedBy::Start, RevivedBy::CallOrStart], |r| r.as_str());
        let stops = [StopReason::UserRequest, StopReason::Idle, StopReason::Shutdown, StopReason::Reload];
        same_as_json(&stops, |r| r.as_str());
        same_as_json(&[Mode::Subprocess, Mode::Http, Mode::Remote], |m| m.as_str());
        same_as_json(&[ErrorKind::NotFound, ErrorKind::SupervisorUnavailable, ErrorKind::Internal], |k| k.as_str());
        assert_eq!(ErrorKind::SupervisorUnavailable.as_str(), "supervisor_unavailable");
    }
}
