//! Quotas per identity (`profiles.<name>.limits`): alice and bob hold the same profile and each
//! has their own buckets. Alice's third `add` in a minute is refused by the tool's quota and her
//! next calls by the profile's rate, each refusal `rate_limited` naming the key it hit, with a
//! `Retry-After`; bob's calls go on. Her daily quota is counted from the journal: it holds
//! across two API instances and across a restart of the supervisor.

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, key_hash, raw_http};
use nix::sys::signal::Signal;

const ALICE: &str = "alice-quota-0123456789";
const BOB: &str = "bob-quota-0123456789";

fn hangar(limits: &str) -> Hangar {
    Hangar::start(&format!(
        "tool_access: {{mode: front_door}}\n\
         auth:\n  api_keys:\n    - {{name: alice, hash: \"{}\", profile: ci}}\n    - {{name: bob, hash: \"{}\", profile: ci}}\n\
         profiles:\n  ci:\n    servers: [math]\n    limits: {limits}\n\
         mcp_servers:\n  math:\n    command: [\"{{fake}}\", \"--tools\", \"add,echo\"]\n",
        key_hash(ALICE),
        key_hash(BOB),
    ))
}

/// A 2026-07-28 front-door `tools/call` of `name` as `key`, at the API on `addr`: the status,
/// the head and the body.
pub(crate) fn call(addr: &str, key: &str, name: &str, arguments: Value) -> (u16, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": name, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}},
    }});
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {name}\r\nAuthorization: Bearer {key}\r\n"
    );
    raw_http(addr, &head, body.to_string().as_bytes()).expect("the API answers")
}

fn addr(hangar: &Hangar) -> String {
    hangar.base.trim_start_matches("http://").to_owned()
}

fn ok(answer: &(u16, String)) -> bool {
    answer.0 == 200 && !answer.1.contains("\"error\"") && !answer.1.contains("\"isError\":true")
}

/// The answer was refused by the quota at `key`, saying when to retry.
fn refused_by(answer: &(u16, String), key: &str) {
    let (_, text) = answer;
    assert!(text.contains("rate_limited") && text.contains(key), "refused by {key}: {text}");
    assert!(text.to_ascii_lowercase().contains("retry-after:") || text.contains("retry in"), "{text}");
}

#[test]
fn each_identity_has_its_own_rate_and_tool_quotas_and_a_refusal_names_its_key() {
    let hangar = hangar("{rate_limit: {calls_per_s: 0.01, burst: 4}, tools: {\"math__add\": {calls_per_minute: 2}}}");
    let addr = addr(&hangar);
    let add = json!({"a": 1, "b": 2});
    assert!(ok(&call(&addr, ALICE, "add", add.clone())));
    assert!(ok(&call(&addr, ALICE, "add", add.clone())));
    refused_by(&call(&addr, ALICE, "add", add.clone()), "profiles.ci.limits.tools.math__add");
    // Bob's own buckets are full.
    assert!(ok(&call(&addr, BOB, "add", add.clone())));
    // Alice's profile-wide rate: 4 at once, 2 spent on add (the refused one spent nothing).
    assert!(ok(&call(&addr, ALICE, "echo", json!({"x": 1}))));
    assert!(ok(&call(&addr, ALICE, "echo", json!({"x": 2}))));
    refused_by(&call(&addr, ALICE, "echo", json!({"x": 3})), "profiles.ci.limits.rate_limit");
    assert!(ok(&call(&addr, BOB, "echo", json!({"x": 1}))));
}

#[test]
fn a_daily_quota_holds_across_api_instances_and_a_restart() {
    let hangar = hangar("{daily_calls: 3}");
    let first = addr(&hangar);
    let other = hangar.extra_api(&[]);
    assert!(ok(&call(&first, ALICE, "echo", json!({"n": 1}))));
    assert!(ok(&call(&other.addr, ALICE, "echo", json!({"n": 2}))));
    drop(other);
    // The journal has the day's calls; a new supervisor counts them.
    let hangar = hangar.restart(Signal::SIGTERM, &[]);
    let addr = addr(&hangar);
    assert!(ok(&call(&addr, ALICE, "echo", json!({"n": 3}))));
    refused_by(&call(&addr, ALICE, "echo", json!({"n": 4})), "profiles.ci.limits.daily_calls");
    assert!(ok(&call(&addr, BOB, "echo", json!({"n": 1}))), "bob's day is his own");
}
