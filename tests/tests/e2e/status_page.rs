//! The status page in a real browser: Debian's Chromium, driven through chromedriver
//! (WebDriver) with `fantoccini`. An admin signs in with a key, sees every server, starts one
//! from the page, watches its row turn `dead` (`crashed`) when its process is SIGKILLed, told in
//! the dead record's own note (the words every surface uses), without
//! reloading the page (and a screen reader is told), restarts it from the page once the countdown
//! allows, and opens its panel from the keyboard; a profile without `admin` sees the same servers
//! and no buttons. An OAuth access token signs in the same way as a key. When the API dies under
//! the page, the page reconnects and the change it missed is replayed (`Last-Event-ID`). The page
//! runs under its strict Content-Security-Policy throughout: any violation the browser reports
//! fails the test. A screenshot is left at `target/status-page.png`.
//!
//! The browser is `crate::browser`'s: Chromium and chromedriver come from `scripts/setup-tools`;
//! without them the test fails (it never skips), saying so.

use fantoccini::key::Key;
use fantoccini::{Client, Locator};
use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, key_hash, read_pid, sigkill};

use crate::browser::{WAIT, attribute, click, eventually, in_browser, screenshot, text};

const ADMIN_KEY: &str = "alice-page-s3cret";
const VIEWER_KEY: &str = "viewer-page-s3cret";

/// `victim` is killed and restarted; `steady` and `idle` stay as they are. The backoff after a
/// crash is short, so the restart is allowed soon.
const CONFIG: &str = r#"
recovery: {initial_backoff_s: 1, max_backoff_s: 1}
auth:
  api_keys:
    - {name: alice, hash: "{admin}", profile: admin}
    - {name: viewer, hash: "{viewer}", profile: viewer}
profiles:
  admin: {servers: ["*"], admin: true}
  viewer: {servers: ["*"]}
mcp_servers:
  steady: {command: ["{fake}", "--tools", "add,echo"]}
  victim: {command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/victim.pid"]}
  idle: {command: ["{fake}", "--tools", "echo"]}
"#;

/// One server and no authentication (on loopback everyone is then the anonymous admin).
const CONFIG_OPEN: &str = r#"
mcp_servers:
  victim: {command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/victim.pid"]}
"#;

const SERVERS: [&str; 3] = ["steady", "victim", "idle"];

/// The policy every file of the page is served under.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

#[test]
fn an_admin_watches_a_crash_and_restarts_from_the_page_and_a_viewer_sees_no_buttons() {
    let hangar =
        Hangar::start(&CONFIG.replace("{admin}", &key_hash(ADMIN_KEY)).replace("{viewer}", &key_hash(VIEWER_KEY)));
    let page = hangar.get("/");
    assert_eq!(page.status, 200, "the page loads without a credential: {}", page.text);
    assert_eq!(page.header("content-security-policy"), Some(POLICY));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(hangar.get("/api/mcp_servers").status, 401, "the data needs a credential");
    // The supervisor says who may act; the page shows buttons by it.
    let admin = api_get(&hangar, ADMIN_KEY, "/api/whoami");
    assert_eq!(admin, json!({"identity": "alice", "profile": "admin", "admin": true, "approver": true}));
    let viewer = api_get(&hangar, VIEWER_KEY, "/api/whoami");
    assert_eq!(viewer, json!({"identity": "viewer", "profile": "viewer", "admin": false, "approver": false}));

    in_browser(async |browser| story(&hangar, browser).await);
}

/// With OAuth, the operator pastes an access token instead of a key: the page sends it as the
/// bearer, and the token's profile decides what it shows.
#[test]
fn a_bearer_token_from_the_issuer_signs_in_to_the_page() {
    let idp = super::oauth::Idp::start(hangar_tests::free_port());
    let hangar = Hangar::start(&super::oauth::config(&idp.url));
    let token = idp.token("admin-bot", "mcp", &format!("{}/mcp", hangar.base));
    in_browser(async |browser| {
        sign_in(browser, &format!("{}/", hangar.base), &token).await;
        wait_for_state(browser, "math", "cold").await;
        let who = text(browser, "#who").await.unwrap();
        assert!(who.contains("admin-bot") && who.contains("admin"), "{who}");
        click(browser, &row("math", "button[data-action=\"start\"]")).await;
        wait_for_state(browser, "math", "ready").await;
    });
}

/// The API goes away under the page (SIGKILL; the supervisor starts it again on the same port):
/// the page reconnects by itself with `Last-Event-ID`, and the state change made while it was
/// gone arrives as an event replayed from the journal (its row names the transition, which only
/// an event carries), all without a reload.
#[test]
fn the_page_reconnects_and_replays_what_it_missed() {
    let port = hangar_tests::free_port();
    let hangar = Hangar::start_on(CONFIG_OPEN, &format!("127.0.0.1:{port}")).unwrap();
    in_browser(async |browser| {
        browser.goto(&format!("{}/", hangar.base)).await.unwrap();
        wait_for_link(browser, "live").await;
        browser.execute("window.hangarTestMark = 'not reloaded';", vec![]).await.unwrap();
        click(browser, &row("victim", "button[data-action=\"start\"]")).await;
        wait_for_state(browser, "victim", "ready").await;

        let api = hangar_tests::children_named(hangar.pid(), "hangar-api");
        assert_eq!(api.len(), 1, "one API: {api:?}");
        sigkill(api[0]);
        sigkill(read_pid(&hangar.path("victim.pid")));
        wait_for_state(browser, "victim", "dead").await;
        wait_for_link(browser, "live").await;
        let change = text(browser, &row("victim", ".last-change")).await.unwrap();
        assert!(change.starts_with("ready → dead"), "the missed event was replayed: {change}");
        let mark = browser.execute("return window.hangarTestMark;", vec![]).await.unwrap();
        assert_eq!(mark, json!("not reloaded"));
    });
}

async fn story(hangar: &Hangar, browser: &Client) {
    let url = format!("{}/", hangar.base);

    // An admin signs in with a key, once; the page shows every server.
    sign_in(browser, &url, ADMIN_KEY).await;
    for server in SERVERS {
        let state = row(server, ".state");
        eventually(&format!("the row of {server}"), || text(browser, &state)).await;
    }
    wait_for_link(browser, "live").await;
    assert!(text(browser, "#who").await.unwrap().contains("admin"));

    // Any script or style the policy blocks from here on fails the test.
    browser
        .execute(
            "window.hangarTestViolations = []; window.hangarTestMark = 'not reloaded';
             document.addEventListener('securitypolicyviolation',
               (e) => window.hangarTestViolations.push(e.violatedDirective + ' ' + e.blockedURI));",
            vec![],
        )
        .await
        .unwrap();

    // Started from the page.
    click(browser, &row("victim", "button[data-action=\"start\"]")).await;
    wait_for_state(browser, "victim", "ready").await;
    let pid = read_pid(&hangar.path("victim.pid"));

    // SIGKILLed: the row turns dead (crashed) as the event arrives, with no reload.
    sigkill(pid);
    wait_for_state(browser, "victim", "dead").await;
    assert_eq!(text(browser, &row("victim", ".dead-reason")).await.as_deref(), Some("crashed"));
    let mark = browser.execute("return window.hangarTestMark;", vec![]).await.unwrap();
    assert_eq!(mark, json!("not reloaded"), "the row changed without a reload");
    let announced = text(browser, "#announcer").await.unwrap_or_default();
    assert!(announced.contains("victim is now dead (crashed)"), "screen readers are told: {announced}");
    let details = api_get(hangar, ADMIN_KEY, "/api/mcp_servers/victim");
    assert_eq!(details["dead"]["reason"], "crashed", "the supervisor agrees: {details}");
    // How it is revived, in the words every surface uses (the dead object's note), not the page's.
    let note = eventually("the page to show the dead record's note", || async {
        text(browser, &row("victim", ".dead-note")).await.filter(|note| !note.is_empty())
    })
    .await;
    assert_eq!(Some(note.as_str()), details["dead"]["note"].as_str(), "the API's words: {details}");

    // Restarted from the page once its backoff allows (the page counts it down).
    eventually("the retry countdown to reach now", || async {
        let retry = text(browser, &row("victim", ".retry")).await?;
        retry.contains("now").then_some(())
    })
    .await;
    click(browser, &row("victim", "button[data-action=\"restart\"]")).await;
    wait_for_state(browser, "victim", "ready").await;
    assert_eq!(api_get(hangar, ADMIN_KEY, "/api/mcp_servers/victim")["state"], "ready");

    // Its panel, opened from the keyboard: its tools with their schemas, its log tail, and the
    // audit trail of what the page just did (the admin's start, stop and start again).
    let toggle = browser.find(Locator::Css(&row("victim", ".toggle"))).await.unwrap();
    toggle.send_keys(&Key::Enter).await.unwrap();
    let expanded = attribute(browser, &row("victim", ".toggle"), "aria-expanded").await;
    assert_eq!(expanded.as_deref(), Some("true"), "Enter on the server's name opens its panel");
    eventually("victim's tools in its panel", || async {
        let tools = text(browser, &row("victim", ".tools")).await?;
        (tools.contains("add") && tools.contains("\"type\"")).then_some(())
    })
    .await;
    eventually("victim's audit entries in its panel", || async {
        let audit = text(browser, &row("victim", ".audit")).await?;
        (audit.contains("alice") && audit.contains("start")).then_some(())
    })
    .await;
    eventually("victim's log tail in its panel", || async {
        let log = text(browser, &row("victim", ".log")).await?;
        (!log.is_empty() && !log.contains("unavailable")).then_some(())
    })
    .await;
    let violations = browser.execute("return window.hangarTestViolations;", vec![]).await.unwrap();
    assert_eq!(violations, json!([]), "the page broke its own Content-Security-Policy");
    screenshot(browser, "status-page").await;

    // A profile without admin: the same servers, no buttons.
    browser.execute("sessionStorage.clear();", vec![]).await.unwrap();
    sign_in(browser, &url, VIEWER_KEY).await;
    for server in SERVERS {
        let state = row(server, ".state");
        eventually(&format!("the viewer's row of {server}"), || text(browser, &state)).await;
    }
    assert!(text(browser, "#who").await.unwrap().contains("read-only"));
    let buttons = browser.find_all(Locator::Css("button[data-action]")).await.unwrap();
    assert!(buttons.is_empty(), "a viewer sees {} action buttons", buttons.len());
}

/// Opens the page and enters `credential` (a key or a token) in its sign-in form.
pub(crate) async fn sign_in(browser: &Client, url: &str, credential: &str) {
    browser.goto(url).await.unwrap();
    eventually("the sign-in form", || async {
        let hidden = browser.execute("return document.getElementById('signin').hidden;", vec![]).await.ok()?;
        (hidden == json!(false)).then_some(())
    })
    .await;
    browser.find(Locator::Id("credential")).await.unwrap().send_keys(credential).await.unwrap();
    click(browser, "#signin-form button[type=\"submit\"]").await;
    eventually("the page to say who signed in", || async {
        text(browser, "#who").await.filter(|who| who.starts_with("Signed in as"))
    })
    .await;
}

/// A CSS selector inside the row of `server`.
pub(crate) fn row(server: &str, inside: &str) -> String {
    format!("li[data-server=\"{server}\"] {inside}")
}

/// Until the page's link to the event stream is in `state` (`live`, `retrying`...).
async fn wait_for_link(browser: &Client, state: &str) {
    eventually(&format!("the event stream to be {state}"), || async {
        (attribute(browser, "#link", "data-link").await? == state).then_some(())
    })
    .await;
}

async fn wait_for_state(browser: &Client, server: &str, state: &str) {
    eventually(&format!("{server} to show {state}"), || async {
        let shown = text(browser, &row(server, ".state")).await?;
        (shown == state).then_some(())
    })
    .await;
}

/// GET `path` with `key`, its JSON body (200 expected).
fn api_get(hangar: &Hangar, key: &str, path: &str) -> Value {
    let agent: ureq::Agent =
        ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(WAIT)).build().into();
    let mut response = agent.get(format!("{}{path}", hangar.base)).header("X-API-Key", key).call().unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    assert_eq!(response.status().as_u16(), 200, "GET {path}: {text}");
    hangar_tests::serde_json::from_str(&text).unwrap()
}
