//! An entry's line: its JSON, exactly as serde_json writes a [`JournalEvent`]. An audit entry,
//! written once for every call, is written here by hand: its keys are fixed text and its
//! values short, and going through serde (an internally tagged enum, flattened beside `id` and
//! `at`, every key escaped byte by byte) cost the writer more than anything else per entry once
//! entries were stored in blocks. Every other kind, and an audit entry this writer does not
//! know the shape of, goes through serde.

use hangar_core::journal::{AuditEntry, CallOutcome, EventParts, Happened};
use serde::Serialize;

/// Appends the line of entry `id`, recorded at `at` (RFC 3339), to `out`.
pub fn write(out: &mut Vec<u8>, id: u64, at: &str, what: &Happened) {
    match what {
        // Its own `id` and `at` are the event's, left unset until read back; set, serde says
        // what they are.
        Happened::Audit(entry) if entry.id == 0 && entry.at.is_empty() => audit(out, id, at, entry),
        _ => serialized(out, &EventParts { id, at, what }),
    }
}

fn audit(out: &mut Vec<u8>, id: u64, at: &str, entry: &AuditEntry) {
    out.extend_from_slice(b"{\"id\":");
    serialized(out, &id);
    out.extend_from_slice(b",\"at\":");
    string(out, at);
    out.extend_from_slice(b",\"kind\":\"audit\",\"identity\":");
    string(out, &entry.identity);
    out.extend_from_slice(b",\"profile\":");
    optional(out, entry.profile.as_deref());
    out.extend_from_slice(b",\"mcp_server\":");
    string(out, &entry.mcp_server);
    out.extend_from_slice(b",\"tool\":");
    optional(out, entry.tool.as_deref());
    out.extend_from_slice(b",\"method\":");
    string(out, &entry.method);
    out.extend_from_slice(match entry.outcome {
        CallOutcome::Ok => b",\"outcome\":\"ok\",\"error_type\":".as_slice(),
        CallOutcome::IsError => b",\"outcome\":\"is_error\",\"error_type\":",
        CallOutcome::Error => b",\"outcome\":\"error\",\"error_type\":",
    });
    optional(out, entry.error_type.as_deref());
    out.extend_from_slice(b",\"duration_ms\":");
    serialized(out, &entry.duration_ms);
    out.extend_from_slice(b",\"bytes_in\":");
    serialized(out, &entry.bytes_in);
    out.extend_from_slice(b",\"bytes_out\":");
    serialized(out, &entry.bytes_out);
    if let Some(arguments) = &entry.arguments {
        out.extend_from_slice(b",\"arguments\":");
        serialized(out, arguments);
    }
    if let Some(trace_id) = &entry.trace_id {
        out.extend_from_slice(b",\"trace_id\":");
        string(out, trace_id);
    }
    if let Some(rule) = &entry.rule {
        out.extend_from_slice(b",\"rule\":");
        string(out, rule);
    }
    if !entry.redacted.is_empty() {
        out.extend_from_slice(b",\"redacted\":");
        serialized(out, &entry.redacted);
    }
    if let Some(approval) = &entry.approval {
        out.extend_from_slice(b",\"approval\":");
        serialized(out, approval);
    }
    out.push(b'}');
}

/// A JSON string: copied as it is when nothing in it needs escaping (the usual case: names,
/// methods, times), else escaped by serde_json.
fn string(out: &mut Vec<u8>, text: &str) {
    if hangar_core::json_size::of_str(text) == text.len() as u64 + 2 {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        serialized(out, text);
    }
}

fn optional(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        Some(text) => string(out, text),
        None => out.extend_from_slice(b"null"),
    }
}

fn serialized<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // A `Vec` takes every write, and these values always serialize: nothing to lose here.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use hangar_core::journal::JournalEvent;
    use serde_json::json;

    use super::*;

    fn entry(outcome: CallOutcome) -> AuditEntry {
        AuditEntry {
            id: 0,
            at: String::new(),
            identity: "anonymous".into(),
            profile: None,
            mcp_server: "math".into(),
            tool: Some("add".into()),
            method: "tools/call".into(),
            outcome,
            error_type: None,
            duration_ms: 0.123_456,
            bytes_in: 16,
            bytes_out: 253,
            arguments: None,
            trace_id: None,
            rule: None,
            redacted: Vec::new(),
            approval: None,
        }
    }

    fn by_serde(id: u64, at: &str, what: &Happened) -> Vec<u8> {
        serde_json::to_vec(&EventParts { id, at, what }).unwrap()
    }

    #[test]
    fn an_audit_line_is_byte_for_byte_what_serde_writes() {
        let at = "2026-12-01T21:30:41.123Z";
        let mut odd = entry(CallOutcome::Error);
        odd.identity = "ci \"bot\"\\ \n\t\u{7} é 😀 \u{202e}".into();
        odd.profile = Some("dev\u{0}".into());
        odd.mcp_server = "a/b".into();
        odd.tool = None;
        odd.error_type = Some("forbidden".into());
        odd.duration_ms = 1.5e300;
        odd.bytes_in = u64::MAX;
        odd.arguments = Some(json!({"z": [1, 2.5, null], "a": "x\"y", "nested": {"kind": "audit"}}));
        odd.trace_id = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
        let mut whole = entry(CallOutcome::IsError);
        whole.duration_ms = 1e-7;
        whole.arguments = Some(json!("sha256:00"));
        whole.rule = Some("profiles.dev.rules[0]".into());
        whole.redacted = vec!["email".into()];
        whole.approval = Some(Box::new(hangar_core::approvals::ApprovalNote {
            id: "apr_1".into(),
            state: hangar_core::approvals::ApprovalState::Approved,
            decided_by: Some("bob \"b\"".into()),
            decided_at: Some(at.into()),
        }));
        for (id, what) in [
            (1, Happened::Audit(entry(CallOutcome::Ok))),
            (u64::MAX, Happened::Audit(odd)),
            (42, Happened::Audit(whole)),
            (7, Happened::Gap { dropped: 3, reason: None }),
            (8, Happened::Drift { mcp_server: "m\"".into(), detail: "d".into() }),
        ] {
            let mut line = Vec::new();
            write(&mut line, id, at, &what);
            assert_eq!(String::from_utf8(line.clone()).unwrap(), String::from_utf8(by_serde(id, at, &what)).unwrap());
            let read: JournalEvent = serde_json::from_slice(&line).unwrap();
            assert_eq!(read.id, id);
        }
    }

    #[test]
    fn an_audit_entry_with_its_own_id_set_goes_through_serde() {
        let mut set = entry(CallOutcome::Ok);
        set.id = 9;
        let what = Happened::Audit(set);
        let mut line = Vec::new();
        write(&mut line, 9, "t", &what);
        assert_eq!(line, by_serde(9, "t", &what));
    }
}
