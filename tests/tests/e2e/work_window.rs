//! A window that shows the work (issue 35 §5): latency and counts per server and tool
//! (`GET /api/calls/stats`, `/metrics`), who is connected (`GET /api/clients`), what each server
//! is configured with and its process (its details), its prompts and resources, the admins'
//! playground, and the audit rows behind the chart's errors (`GET /api/audit?from=&to=`), on the
//! API and on the status page in Chromium. Each identity sees only its own clients; a secret
//! env value never shows.

use fantoccini::Client;
use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, api_keys_yaml, node, server_everything};

use crate::browser::{click, eventually, in_browser, text};
use crate::status_page::{row, sign_in};
use crate::tasks::mcp;

/// The env value math is given: no surface may show it.
const SECRET: &str = "s3cret-env-value-4242";
/// ops is an admin; dev and other hold the profile `dev`.
const KEYS: [(&str, &str, Option<&str>); 3] = [
    ("ops", "admin-window-0123456789", None),
    ("dev", "dev-window-0123456789", Some("dev")),
    ("other", "other-window-0123456789", Some("dev")),
];
const ADMIN: &str = KEYS[0].1;
const DEV: &str = KEYS[1].1;
const OTHER: &str = KEYS[2].1;

fn hangar() -> Hangar {
    Hangar::start(&format!(
        r#"
tool_access: {{mode: front_door}}
{keys}profiles:
  dev: {{servers: [math, everything]}}
mcp_servers:
  math:
    command: ["{{fake}}", "--tools", "add,echo,fail"]
    env: {{MATH_TOKEN: "{SECRET}"}}
    limits: {{max_concurrent_calls: 7}}
  everything:
    command: ["{node}", "{everything}"]
"#,
        keys = api_keys_yaml(&KEYS),
        node = node().display(),
        everything = server_everything().display(),
    ))
}

/// `tool` of `math` called through `hangar_call` as `key`; the call's own result.
fn call(hangar: &Hangar, key: &str, tool: &str, arguments: Value) -> Value {
    let calls = json!({"calls": [{"mcp_server": "math", "tool": tool, "arguments": arguments}]});
    let (status, answer) =
        mcp(&hangar.base, key, "tools/call", json!({"name": "hangar_call", "arguments": calls}), false);
    assert_eq!(status, 200, "{answer}");
    answer["result"]["structuredContent"]["results"][0].clone()
}

fn get(hangar: &Hangar, key: &str, path: &str) -> (u16, Value, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent.get(format!("{}{path}", hangar.base)).header("X-API-Key", key).call().expect("GET");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null), text)
}

fn some_calls(hangar: &Hangar) {
    for i in 0..5 {
        assert_eq!(call(hangar, DEV, "add", json!({"a": i, "b": 1}))["success"], true);
    }
    // A tool's own error: an answer (`is_error`), counted by the chart as a failure.
    call(hangar, DEV, "fail", json!({}));
    call(hangar, OTHER, "echo", json!({"hello": "there"}));
}

#[test]
fn latency_clients_and_facts_are_shown_each_identity_its_own() {
    let hangar = hangar();
    some_calls(&hangar);

    // Latency and counts over the last hour, per server and tool.
    let (status, stats, _) = get(&hangar, DEV, "/api/calls/stats");
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["window_s"], 3600);
    let math = stats["mcp_servers"].as_array().unwrap().iter().find(|s| s["mcp_server"] == "math").unwrap();
    assert_eq!(math["latency"]["calls"], 7, "{math}");
    let (p50, p95) = (math["latency"]["p50_ms"].as_f64().unwrap(), math["latency"]["p95_ms"].as_f64().unwrap());
    assert!(p50 > 0.0 && p95 >= p50, "{math}");
    let add = math["tools"].as_array().unwrap().iter().find(|t| t["tool"] == "add").unwrap();
    assert_eq!((add["latency"]["calls"].as_u64(), add["latency"]["errors"].as_u64()), (Some(5), Some(0)));
    assert_eq!(math["tools"][0]["tool"], "add", "the most called first");

    // /metrics: a histogram per server and tool.
    let (_, _, metrics) = get(&hangar, ADMIN, "/metrics");
    assert!(
        metrics.contains("hangar_mcp_tool_call_duration_seconds_count{mcp_server=\"math\",tool=\"add\"} 5\n"),
        "{metrics}"
    );
    assert!(metrics.contains("hangar_mcp_tool_call_errors_total{mcp_server=\"math\",tool=\"fail\"} 0\n"), "{metrics}");

    // Who is connected: a legacy session of other's, with its client's name; each sees its own.
    let session = legacy_session(&hangar, OTHER);
    assert!(!session.is_empty());
    let (_, everyone, _) = get(&hangar, ADMIN, "/api/clients");
    let sessions = everyone["sessions"].as_array().unwrap();
    let theirs = sessions.iter().find(|s| s["identity"] == "other").expect("other's session");
    assert_eq!(theirs["client"], "hangar-tests 0", "{theirs}");
    assert!(
        theirs["session"].as_str().unwrap().ends_with('…') && !theirs["session"].as_str().unwrap().contains(&session)
    );
    let dev = everyone["identities"].as_array().unwrap().iter().find(|t| t["identity"] == "dev").unwrap();
    assert_eq!((dev["calls"].as_u64(), dev["profile"].as_str()), (Some(6), Some("dev")), "{dev}");
    let (_, mine, _) = get(&hangar, DEV, "/api/clients");
    let identities: Vec<&str> =
        mine["identities"].as_array().unwrap().iter().filter_map(|t| t["identity"].as_str()).collect();
    assert_eq!(identities, ["dev"], "dev sees only itself: {mine}");
    assert!(mine["sessions"].as_array().unwrap().is_empty(), "not other's session: {mine}");

    // What math is configured with, and its process; never the env value.
    let (_, details, text) = get(&hangar, DEV, "/api/mcp_servers/math");
    assert!(!text.contains(SECRET), "{text}");
    let config = &details["config"];
    assert_eq!(config["env"], json!(["MATH_TOKEN"]));
    assert_eq!((config["max_concurrent_calls"].as_u64(), config["arguments"].as_u64()), (Some(7), Some(2)));
    assert!(details["meta"]["program"].as_str().unwrap().ends_with("hangar-upstream-fake"), "{details}");
    assert_eq!(config["expose_as"], "math");
    let process = &details["process"];
    assert_eq!(process["pid"], details["meta"]["pid"]);
    assert!(process["rss_bytes"].as_u64().unwrap() > 0 && process["threads"].as_u64().unwrap() >= 1, "{process}");

    // Its prompts and resources, beside its tools.
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let start = agent
        .post(format!("{}/api/mcp_servers/everything/start", hangar.base))
        .header("X-API-Key", ADMIN)
        .header("Content-Type", "application/json")
        .send_empty()
        .expect("start");
    assert_eq!(start.status().as_u16(), 200);
    let (status, prompts, _) = get(&hangar, DEV, "/api/mcp_servers/everything/prompts");
    assert_eq!(status, 200, "{prompts}");
    assert!(!prompts["prompts"].as_array().unwrap().is_empty(), "{prompts}");
    let (_, resources, _) = get(&hangar, DEV, "/api/mcp_servers/everything/resources");
    assert!(!resources["resources"].as_array().unwrap().is_empty(), "{resources}");
    let (_, none, _) = get(&hangar, DEV, "/api/mcp_servers/math/prompts");
    assert_eq!(none, json!({"prompts": []}), "the fake declares no prompts");

    // The audit rows of a time range: the failed call is in its minute, and in no later one.
    let (_, all, _) = get(&hangar, ADMIN, "/api/audit?outcome=is_error");
    let failed = &all["entries"][0];
    let at = failed["at"].as_str().unwrap();
    let minute = format!("{}:00Z", &at[..16]);
    let within = format!("/api/audit?outcome=is_error&from={minute}&to={}", plus_minute(&minute));
    let (status, page, _) = get(&hangar, ADMIN, &within);
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["entries"].as_array().unwrap().len(), 1, "{page}");
    assert_eq!(page["entries"][0]["tool"], "fail");
    let (_, later, _) = get(&hangar, ADMIN, &format!("/api/audit?outcome=is_error&from={}", plus_minute(&minute)));
    assert!(later["entries"].as_array().unwrap().is_empty(), "{later}");
    let (status, refused, _) = get(&hangar, ADMIN, "/api/audit?from=yesterday");
    assert_eq!((status, refused["error"]["code"].as_str()), (400, Some("InvalidArgument")), "{refused}");
    // Another identity's failure is not in dev's range, even asked by time.
    let (_, others, _) = get(&hangar, OTHER, &within);
    assert!(others["entries"].as_array().unwrap().is_empty(), "{others}");
}

/// `minute` (RFC 3339) plus one minute.
fn plus_minute(minute: &str) -> String {
    let at = hangar_core::time::parse_millis(minute).unwrap() + 60_000;
    hangar_core::time::rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(at))
}

/// A legacy (2025-11-25) session opened as `key`, by a client that names itself; its id.
fn legacy_session(hangar: &Hangar, key: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "hangar-tests", "version": "0"},
    }});
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let response = agent
        .post(format!("{}/mcp", hangar.base))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("X-API-Key", key)
        .send(body.to_string().as_bytes())
        .expect("initialize");
    assert_eq!(response.status().as_u16(), 200);
    response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).expect("a session id").to_owned()
}

#[test]
fn the_page_shows_latency_clients_facts_a_playground_call_and_the_rows_behind_an_error() {
    let hangar = hangar();
    some_calls(&hangar);
    let base = hangar.base.clone();
    in_browser(async |browser: &Client| {
        sign_in(browser, &format!("{base}/"), ADMIN).await;
        let latency = eventually("math's p50 and p95", || async {
            text(browser, &row("math", ".latency")).await.filter(|t| t.contains("ms"))
        })
        .await;
        assert!(latency.contains(" / "), "{latency}");
        let dev = eventually("dev among the identities", || async {
            text(browser, "#clients-identities tr[data-identity=\"dev\"]").await
        })
        .await;
        assert!(dev.contains("dev (dev)"), "{dev}");

        // math's panel: calls by tool, its config and process, never the env value.
        click(browser, &row("math", ".toggle")).await;
        let add = eventually("add's row", || async {
            text(browser, &row("math", ".tool-stats tr[data-tool=\"add\"]")).await
        })
        .await;
        assert!(add.starts_with("add5"), "{add}");
        let env = eventually("the env names", || async {
            text(browser, &row("math", ".config-facts [data-fact=\"env\"] dd")).await
        })
        .await;
        assert_eq!(env, "MATH_TOKEN");
        let rss = eventually("its memory", || async {
            text(browser, &row("math", ".process-facts [data-fact=\"rss\"] dd")).await
        })
        .await;
        assert!(rss.ends_with("MiB"), "{rss}");
        let page = browser.source().await.unwrap();
        assert!(!page.contains(SECRET));

        // The playground: add 20 and 22 from the form built from its schema.
        let tool = row("math", ".try-tool");
        eventually("the playground", || async { text(browser, &format!("{tool} option[value=\"add\"]")).await }).await;
        browser
            .execute(
                "const s = document.querySelector(arguments[0]); s.value = 'add'; s.onchange();",
                vec![json!(tool)],
            )
            .await
            .unwrap();
        for (name, value) in [("a", "20"), ("b", "22")] {
            let input = row("math", &format!(".try-fields [data-name=\"{name}\"]"));
            click(browser, &input).await;
            let element = browser.find(fantoccini::Locator::Css(&input)).await.unwrap();
            element.send_keys(value).await.unwrap();
        }
        click(browser, &row("math", ".try-call")).await;
        let result = eventually("the playground's result", || async {
            text(browser, &row("math", ".try-result")).await.filter(|t| !t.is_empty())
        })
        .await;
        assert!(result.contains("\"42\""), "{result}");
        assert_eq!(text(browser, &row("math", ".try-status")).await.as_deref(), Some("Done."));

        // The chart's failures link to their audit rows.
        click(browser, "#error-minutes .error-minute").await;
        let failed =
            eventually("the failed call's row", || async { text(browser, "#error-rows-list tr[data-audit]").await })
                .await;
        assert!(failed.contains("math/fail") && failed.contains("dev"), "{failed}");
    });
    // The playground's call is audited as the admin's, like any other.
    let (_, audit, _) = get(&hangar, ADMIN, "/api/audit?identity=ops");
    let calls: Vec<&Value> = audit["entries"].as_array().unwrap().iter().filter(|e| e["tool"] == "add").collect();
    assert_eq!(calls.len(), 1, "{audit}");
}
