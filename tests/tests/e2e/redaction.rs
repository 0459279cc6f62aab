//! A configured env value never reaches any surface, not even in part: lines are redacted whole
//! before they are cut, wherever the value sits in them.

use std::time::Duration;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, poll};

const SECRET: &str = "sk-live-0f1e2d3c4b5a69788796a5b4c3d2e1f0";

/// Every 8-byte window of the secret that `text` contains.
fn fragments(text: &str) -> Vec<&'static str> {
    (0..=SECRET.len() - 8).map(|i| &SECRET[i..i + 8]).filter(|w| text.contains(w)).collect()
}

#[test]
fn a_secret_straddling_the_4_kib_cut_or_ending_a_line_leaves_no_fragment() {
    // Each `offset:tail` line is `offset` p's, the secret, `tail` q's, printed on stdout (not
    // JSON, so logged, cut at 4 KiB) and on stderr. 4080 straddles the cut; 4056 ends exactly on
    // it; 4057 ends one byte past it; 9000 ends a line far past it; 0 starts a short one.
    let hangar = Hangar::start(&format!(
        r#"
mcp_servers:
  leaky:
    env: {{TOKEN: {SECRET}}}
    command:
      - sh
      - -c
      - |
        pad() {{ head -c "$2" /dev/zero | tr '\0' "$1"; }}
        for spec in 4080:200 4056:0 4057:0 9000:0 0:10; do
          line="$(pad p ${{spec%:*}})$TOKEN$(pad q ${{spec#*:}})"
          echo "$line"; echo "$line" >&2
        done
        echo stdout-done; echo stderr-done >&2
        exec "$0" --tools add
      - "{{fake}}"
"#
    ));
    hangar.tool_ok("hangar_start", json!({"mcp_server": "leaky"}));
    let logs = poll("both streams' lines in the log", Duration::from_secs(10), || {
        let logs = hangar.get("/api/mcp_servers/leaky/logs?lines=1000");
        (logs.text.contains("stdout-done") && logs.text.contains("stderr-done")).then_some(logs)
    });
    let lines = logs.body["logs"].as_array().unwrap();
    let content = |stream: &str| -> Vec<String> {
        let of_stream = lines.iter().filter(|l| l["stream"] == stream);
        of_stream.map(|l| l["content"].as_str().unwrap().to_owned()).collect()
    };
    let (p, q) = (|n| "p".repeat(n), |n| "q".repeat(n));
    assert_eq!(
        content("stdout"),
        [
            format!("{}[redacted]{} [cut: 4320 bytes in all]", p(4080), q(6)),
            format!("{}[redacted]", p(4056)),
            format!("{}[redacted]", p(4057)),
            format!("{} [cut: {} bytes in all]", p(4096), 9000 + SECRET.len()),
            format!("[redacted]{}", q(10)),
            "stdout-done".into(),
        ],
        "stdout lines are redacted whole, then cut"
    );
    // On stderr a line over 4 KiB is skipped whole (nothing of it kept); the rest are redacted.
    let stderr = content("stderr");
    for expected in [format!("{}[redacted]", p(4056)), format!("[redacted]{}", q(10))] {
        assert!(stderr.contains(&expected), "{expected:.20}... missing from {stderr:?}");
    }
    let skipped = stderr.iter().filter(|l| l.starts_with("[hangar] skipped a")).count();
    assert_eq!(skipped, 3, "{stderr:?}");

    // The server works, and every surface read so far, the hangar's own log included, is clean.
    assert_eq!(hangar.call("leaky", "add", json!({"a": 1, "b": 2})), Some(json!({"result": 3})));
    hangar.details("leaky");
    hangar.get("/api/mcp_servers");
    hangar.tool_ok("hangar_status", json!({}));
    hangar.metrics();
    for body in hangar.bodies() {
        assert!(fragments(&body).is_empty(), "a body carries {:?}: {body:.300}", fragments(&body));
    }
    let own = hangar.log();
    assert!(fragments(&own).is_empty(), "the hangar's own log carries {:?}", fragments(&own));
}
