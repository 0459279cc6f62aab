//! The page `GET /api/audit` answers, as the API writes it and the CLI reads it.
//!
//! It is the supervisor's [`AuditPage`] with its cursor written as a decimal string: a JSON
//! number past 2^53 loses digits in JavaScript, and a cursor must come back exactly as given.
//! The entries' type is a parameter so that a client may keep each entry as the JSON it came as
//! (the CLI shows an entry a newer hangar wrote, which its [`AuditEntry`] cannot read, as sent).

use serde::{Deserialize, Serialize};

use crate::journal::{AuditEntry, AuditPage};

/// `GET /api/audit` (`format=json`): `{"entries": [...], "next": "<cursor>"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestAuditPage<E = AuditEntry> {
    pub entries: Vec<E>,
    /// The cursor to ask `since=` for what comes next, written as a string.
    #[serde(with = "decimal")]
    pub next: u64,
}

impl From<AuditPage> for RestAuditPage {
    fn from(page: AuditPage) -> Self {
        RestAuditPage { entries: page.entries, next: page.next }
    }
}

/// A `u64` as a decimal string on the wire.
mod decimal {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(value)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(|_| D::Error::custom("the cursor is not a whole number"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn the_cursor_is_a_string_and_reads_back_exactly() {
        let page = RestAuditPage::from(AuditPage { entries: Vec::new(), next: u64::MAX });
        let wire = serde_json::to_value(&page).unwrap();
        assert_eq!(wire, json!({"entries": [], "next": "18446744073709551615"}));
        assert_eq!(serde_json::from_value::<RestAuditPage>(wire).unwrap(), page);
    }

    #[test]
    fn a_cursor_that_is_not_a_whole_number_is_refused() {
        for next in [json!(7), json!("-1"), json!("7x"), json!(null)] {
            let page = json!({"entries": [], "next": next});
            assert!(serde_json::from_value::<RestAuditPage<Value>>(page).is_err(), "{next}");
        }
    }
}
