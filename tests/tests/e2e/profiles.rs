//! Who is calling, and what they may use: named keys in the config, each with a profile, and
//! the supervisor answering every surface within the caller's view. A server outside the view
//! does not exist for the caller, a tool it denies is `forbidden`, admin actions need an admin,
//! tool-list news follow the view, and front-door names are computed per view.

use std::io::Read;
use std::sync::mpsc;
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, MODERN, key_hash, poll, supervisor_exit};

const DEV: &str = "dev-s3cret";
const CI: &str = "ci-s3cret";
const ADMIN: &str = "alice-s3cret";
const OPS: &str = "ops-from-the-file";

/// `math` and `secret` both serve `add` (and each gains a tool when its flag appears); `github`
/// serves `echo` (as `math` does) and `delete_repo`.
const CONFIG: &str = r#"
tool_access: {mode: front_door}
auth:
  api_keys:
    - {name: dev-key, hash: "{dev}", profile: dev}
    - {name: ci-bot, hash: "{ci}", profile: ci}
    - {name: alice, hash: "{admin}", profile: admin}
profiles:
  dev: {servers: [math, "git*"], tools: {allow: ["*"], deny: ["*delete*"]}}
  ci: {servers: [math], tools: {allow: [add, "hangar_*"]}}
  admin: {servers: ["*"], admin: true}
mcp_servers:
  math: {command: ["{fake}", "--tools", "add,echo", "--alt-tools", "add,echo,mul", "--alt-tools-flag", "{dir}/math-shift"]}
  github: {command: ["{fake}", "--tools", "echo,delete_repo"]}
  secret: {command: ["{fake}", "--tools", "add,echo", "--alt-tools", "add,echo,leak", "--alt-tools-flag", "{dir}/secret-shift"]}
"#;

fn config() -> String {
    CONFIG.replace("{dev}", &key_hash(DEV)).replace("{ci}", &key_hash(CI)).replace("{admin}", &key_hash(ADMIN))
}

/// The hangar as one key.
struct As<'a> {
    base: String,
    key: &'a str,
    agent: ureq::Agent,
}

fn with_key<'a>(hangar: &Hangar, key: &'a str) -> As<'a> {
    at(hangar.base.clone(), key)
}

fn at(base: String, key: &str) -> As<'_> {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    As { base, key, agent }
}

/// (status, body)
type Answer = (u16, Value);

impl As<'_> {
    fn answer(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
        let mut response = response.unwrap();
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap();
        (status, hangar_tests::serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    fn get(&self, path: &str) -> Answer {
        As::answer(self.agent.get(format!("{}{path}", self.base)).header("X-API-Key", self.key).call())
    }

    fn post(&self, path: &str) -> Answer {
        let request = self.agent.post(format!("{}{path}", self.base)).header("X-API-Key", self.key);
        As::answer(request.header("Content-Type", "application/json").send_empty())
    }

    /// A modern `/mcp` request, the key as a bearer token.
    fn mcp(&self, method: &str, mut params: Value) -> Answer {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let mut request = self
            .agent
            .post(format!("{}/mcp", self.base))
            .header("Authorization", format!("Bearer {}", self.key))
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", MODERN)
            .header("Mcp-Method", method);
        if let Some(name) = params.get("name").and_then(Value::as_str) {
            request = request.header("Mcp-Name", name);
        }
        As::answer(request.send_json(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})))
    }

    fn tool(&self, name: &str, arguments: Value) -> Value {
        let (status, body) = self.mcp("tools/call", json!({"name": name, "arguments": arguments}));
        assert_eq!(status, 200, "{name}: {body}");
        body
    }

    /// A hangar tool's structured result.
    fn hangar_tool(&self, name: &str, arguments: Value) -> Value {
        let body = self.tool(name, arguments);
        assert_eq!(body["result"]["isError"], false, "{name}: {body}");
        body["result"]["structuredContent"].clone()
    }

    /// A hangar tool's failure: (error_type, error).
    fn hangar_tool_error(&self, name: &str, arguments: Value) -> (String, String) {
        let body = self.tool(name, arguments);
        assert_eq!(body["result"]["isError"], true, "{name}: {body}");
        let text = body["result"]["content"][0]["text"].as_str().unwrap();
        let error: Value = hangar_tests::serde_json::from_str(text).unwrap();
        (error["error_type"].as_str().unwrap().into(), error["error"].as_str().unwrap().into())
    }

    /// One `hangar_call`'s outcome: Ok(result) or Err((error_type, error)).
    fn hangar_call(&self, server: &str, tool: &str) -> Result<Value, (String, String)> {
        let batch =
            self.hangar_tool("hangar_call", json!({"calls": [{"mcp_server": server, "tool": tool, "arguments": {}}]}));
        let result = &batch["results"][0];
        if result["success"] == true {
            Ok(result["result"].clone())
        } else {
            Err((result["error_type"].as_str().unwrap().into(), result["error"].as_str().unwrap().into()))
        }
    }

    fn rest_ids(&self) -> Vec<String> {
        let (status, body) = self.get("/api/mcp_servers");
        assert_eq!(status, 200, "{body}");
        ids(&body["mcp_servers"], "mcp_server_id")
    }

    /// The upstream tools `tools/list` exposes (the `hangar_*` tools left out).
    fn front_door_names(&self) -> Vec<String> {
        let (status, body) = self.mcp("tools/list", json!({}));
        assert_eq!(status, 200, "{body}");
        ids(&body["result"]["tools"], "name").into_iter().filter(|n| !n.starts_with("hangar_")).collect()
    }
}

fn ids(list: &Value, field: &str) -> Vec<String> {
    list.as_array().unwrap().iter().map(|s| s[field].as_str().unwrap().to_owned()).collect()
}

/// An answer about `id`, with the id blanked out: an unknown server and one outside the view
/// must read the same apart from the id the caller sent.
fn blank(answer: &Answer, id: &str) -> String {
    format!("{} {}", answer.0, answer.1).replace(id, "<id>")
}

#[test]
fn each_key_sees_only_its_view_on_every_surface() {
    let hangar = Hangar::start(&config());
    let (dev, ci, admin) = (with_key(&hangar, DEV), with_key(&hangar, CI), with_key(&hangar, ADMIN));
    assert_eq!(hangar.get("/api/mcp_servers").status, 401, "nothing is anonymous once keys are configured");
    assert_eq!(hangar.get("/health/ready").status, 200, "the probes stay open");

    // REST list, and the MCP tools that list.
    assert_eq!(ci.rest_ids(), ["math"]);
    assert_eq!(dev.rest_ids(), ["math", "github"]);
    assert_eq!(admin.rest_ids(), ["math", "github", "secret"]);
    assert_eq!(ids(&ci.hangar_tool("hangar_list", json!({}))["mcp_servers"], "mcp_server_id"), ["math"]);
    assert_eq!(ids(&dev.hangar_tool("hangar_status", json!({}))["mcp_servers"], "id"), ["math", "github"]);

    let (status, metrics) = ci.get("/metrics");
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    assert_eq!(status, 200);
    assert!(metrics.contains("mcp_server=\"math\"") && !metrics.contains("secret"), "{metrics}");

    // Per-view front-door names: `add` collides only with `secret`, `echo` with `github`.
    assert_eq!(ci.front_door_names(), ["add"], "ci sees math's `add` alone, bare");
    assert_eq!(dev.front_door_names(), ["add", "math__echo", "github__echo"], "delete_repo is denied");
    assert_eq!(
        admin.front_door_names(),
        ["math__add", "math__echo", "github__echo", "delete_repo", "secret__add", "secret__echo"]
    );
    let added = ci.tool("add", json!({"a": 2, "b": 3}));
    assert_eq!(added["result"]["structuredContent"]["result"], 5, "the bare name routes for ci: {added}");

    // Tools of a visible server, as far as the profile allows them.
    assert_eq!(ids(&ci.hangar_tool("hangar_tools", json!({"mcp_server": "math"}))["tools"], "name"), ["add"]);
    let (status, body) = ci.get("/api/mcp_servers/math/tools");
    assert_eq!((status, ids(&body["tools"], "name")), (200, vec!["add".to_owned()]));
    let (_, details) = dev.get("/api/mcp_servers/github");
    assert_eq!(ids(&details["tools"], "name"), ["echo"]);

    // A server outside the view and an unknown one: the same answer on every surface.
    for (surface, forbidden, unknown) in [
        ("REST details", ci.get("/api/mcp_servers/secret"), ci.get("/api/mcp_servers/nosuch")),
        ("REST tools", ci.get("/api/mcp_servers/secret/tools"), ci.get("/api/mcp_servers/nosuch/tools")),
    ] {
        assert_eq!(forbidden.0, 404, "{surface}: {}", forbidden.1);
        assert_eq!(blank(&forbidden, "secret"), blank(&unknown, "nosuch"), "{surface}");
    }
    let forbidden = ci.hangar_tool_error("hangar_details", json!({"mcp_server": "secret"}));
    let unknown = ci.hangar_tool_error("hangar_details", json!({"mcp_server": "nosuch"}));
    assert_eq!(forbidden.0, "not_found");
    assert_eq!((forbidden.0, forbidden.1.replace("secret", "<id>")), (unknown.0, unknown.1.replace("nosuch", "<id>")));
    let forbidden = ci.hangar_call("secret", "add").unwrap_err();
    let unknown = ci.hangar_call("nosuch", "add").unwrap_err();
    assert_eq!((forbidden.0, forbidden.1.replace("secret", "<id>")), (unknown.0, unknown.1.replace("nosuch", "<id>")));
    assert_eq!(
        blank(&ci.mcp("tools/call", json!({"name": "secret__add", "arguments": {}})), "secret__add"),
        blank(&ci.mcp("tools/call", json!({"name": "nosuch__add", "arguments": {}})), "nosuch__add"),
    );

    // A denied tool on a visible server is forbidden, by every way of calling it.
    assert_eq!(ci.hangar_call("math", "echo").unwrap_err().0, "forbidden");
    assert_eq!(dev.hangar_call("github", "delete_repo").unwrap_err().0, "forbidden");
    for name in ["github__delete_repo", "delete_repo"] {
        let called = dev.tool(name, json!({}));
        let text = called.to_string();
        assert!(text.contains("forbidden") && text.contains("outside this caller's profile"), "{name}: {text}");
    }
    assert!(dev.hangar_call("github", "echo").is_ok(), "an allowed tool is called");
    assert!(admin.hangar_call("github", "delete_repo").is_ok(), "the admin may");

    // The decisions are recorded with who asked, never with the key.
    let log = hangar.log();
    assert!(log.lines().any(|l| l.contains("hangar::audit") && l.contains("ci-bot") && l.contains("refused")), "{log}");
    for key in [DEV, CI, ADMIN] {
        assert!(!log.contains(key), "a key reached the logs");
    }
}

#[test]
fn admin_actions_need_an_admin() {
    let hangar = Hangar::start(&config());
    let (dev, ci, admin) = (with_key(&hangar, DEV), with_key(&hangar, CI), with_key(&hangar, ADMIN));
    for (who, key) in [("dev", &dev), ("ci", &ci)] {
        for (path, post) in [
            ("/api/mcp_servers/math/start", true),
            ("/api/mcp_servers/math/stop", true),
            ("/api/config/reload", true),
            ("/api/mcp_servers/math/logs", false),
        ] {
            let (status, body) = if post { key.post(path) } else { key.get(path) };
            assert_eq!((status, body["error"]["code"].as_str()), (403, Some("Forbidden")), "{who} {path}: {body}");
        }
        let (error_type, _) = key.hangar_tool_error("hangar_start", json!({"mcp_server": "math"}));
        assert_eq!(error_type, "forbidden", "{who}");
    }
    // Outside the view the server does not exist, for admin actions too.
    assert_eq!(ci.post("/api/mcp_servers/secret/stop").0, 404);
    let (status, body) = admin.post("/api/mcp_servers/math/start");
    assert_eq!((status, &body["state"]), (200, &json!("ready")), "{body}");
    assert_eq!(admin.get("/api/mcp_servers/math/logs").0, 200);
    assert_eq!(admin.post("/api/mcp_servers/math/stop").0, 200);
    assert_eq!(admin.post("/api/config/reload").0, 200);
}

/// A `subscriptions/listen` stream as `key`; each `notifications/tools/list_changed` it
/// delivers arrives on the channel.
fn tool_changes(hangar: &Hangar, key: &str) -> mpsc::Receiver<()> {
    let mut stream = hangar.listen_for_tool_changes(Some(key), Duration::from_secs(60));
    let (tx, rx) = mpsc::channel();
    let (acknowledged, ready) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        let mut chunk = [0u8; 4096];
        let mut counted = 0;
        while let Ok(n @ 1..) = stream.read(&mut chunk) {
            seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
            if seen.contains("notifications/subscriptions/acknowledged") {
                let _ = acknowledged.send(());
            }
            while seen.matches("notifications/tools/list_changed").count() > counted {
                counted += 1;
                let _ = tx.send(());
            }
        }
    });
    ready.recv_timeout(Duration::from_secs(10)).expect("the subscription is acknowledged");
    rx
}

#[test]
fn tool_list_news_follow_the_view() {
    let hangar = Hangar::start(&config());
    let (ci, admin) = (with_key(&hangar, CI), with_key(&hangar, ADMIN));
    // Both servers running, so each announces its change.
    for id in ["math", "secret"] {
        assert_eq!(admin.post(&format!("/api/mcp_servers/{id}/start")).0, 200);
    }
    let ci_news = tool_changes(&hangar, CI);
    let admin_news = tool_changes(&hangar, ADMIN);

    std::fs::write(hangar.path("secret-shift"), "").unwrap();
    admin_news.recv_timeout(Duration::from_secs(10)).expect("the admin hears of secret's change");
    poll("secret's new tool", Duration::from_secs(10), || {
        ids(&admin.get("/api/mcp_servers/secret/tools").1["tools"], "name").contains(&"leak".to_owned()).then_some(())
    });
    // The stream of a caller who cannot see `secret` stays silent (it would have been told by now).
    assert!(ci_news.recv_timeout(Duration::from_secs(3)).is_err(), "ci was told about a server it cannot see");

    std::fs::write(hangar.path("math-shift"), "").unwrap();
    ci_news.recv_timeout(Duration::from_secs(10)).expect("ci hears of math's change");
    admin_news.recv_timeout(Duration::from_secs(10)).expect("and so does the admin");
    assert_eq!(ci.front_door_names(), ["add"], "mul is outside ci's tools");
}

#[test]
fn a_keys_file_names_its_keys_and_a_second_api_learns_the_config_keys() {
    let hangar = Hangar::start(&config());
    let file = hangar.path("keys");
    let unnamed = "unnamed-s3cret";
    std::fs::write(&file, format!("# ops\nops:{}\n{}\n", key_hash(OPS), key_hash(unnamed))).unwrap();
    let extra = hangar.extra_api(&[std::ffi::OsStr::new("--api-keys"), file.as_os_str()]);
    let base = format!("http://{}", extra.addr);
    // The file's keys see everything (no profile), as every key did before profiles.
    assert_eq!(at(base.clone(), OPS).rest_ids(), ["math", "github", "secret"]);
    assert_eq!(at(base.clone(), unnamed).rest_ids(), ["math", "github", "secret"]);
    // The config's keys work on this API too, with their profiles: one source of truth.
    assert_eq!(at(base.clone(), CI).rest_ids(), ["math"]);
    assert_eq!(at(base.clone(), "wrong").get("/api/mcp_servers").0, 401);
    assert_eq!(at(base.clone(), OPS).post("/api/mcp_servers/github/stop").0, 200, "no profile: admin");
    assert_eq!(at(base, unnamed).post("/api/mcp_servers/math/stop").0, 200);
    // The file key's name is the caller's identity in the record; the unnamed one's is its hash prefix.
    let unnamed_identity = format!("\"{}\"", &key_hash(unnamed)[.."sha256:".len() + 12]);
    let log = hangar.log();
    let audited = |who: &str| log.lines().any(|l| l.contains("hangar::audit") && l.contains(who) && l.contains("stop"));
    assert!(audited("\"ops\"") && audited(&unnamed_identity), "{unnamed_identity}: {log}");
}

#[test]
fn a_reload_brings_new_keys_to_every_api() {
    let hangar = Hangar::start(&config());
    let admin = with_key(&hangar, ADMIN);
    let newcomer = "new-s3cret";
    assert_eq!(with_key(&hangar, newcomer).get("/api/mcp_servers").0, 401);
    let yaml = config()
        .replace(
            "    - {name: alice,",
            &format!("    - {{name: newcomer, hash: \"{}\", profile: ci}}\n    - {{name: alice,", key_hash(newcomer)),
        )
        .replace("{fake}", &hangar_tests::bin("hangar-upstream-fake").display().to_string())
        .replace("{dir}", &hangar.dir.path().display().to_string());
    std::fs::write(hangar.path("hangar.yaml"), yaml).unwrap();
    assert_eq!(admin.post("/api/config/reload").0, 200);
    let listed = poll("the new key accepted", Duration::from_secs(10), || {
        let (status, body) = with_key(&hangar, newcomer).get("/api/mcp_servers");
        (status == 200).then_some(body)
    });
    assert_eq!(ids(&listed["mcp_servers"], "mcp_server_id"), ["math"]);
}

#[test]
fn a_bad_key_or_profile_is_refused_at_start_naming_the_key_path() {
    let dir = tempfile::tempdir().unwrap();
    let good = key_hash(CI);
    for (yaml, key) in [
        (
            format!("auth:\n  api_keys:\n    - {{name: ci, hash: \"{good}\", profile: nope}}\n"),
            "auth.api_keys[0].profile",
        ),
        ("auth:\n  api_keys:\n    - {name: ci, hash: \"sha256:1234\"}\n".to_owned(), "auth.api_keys[0].hash"),
        (
            format!(
                "auth:\n  api_keys:\n    - {{name: ci, hash: \"{good}\"}}\n    - {{name: ci, hash: \"{}\"}}\n",
                key_hash(DEV)
            ),
            "auth.api_keys[1].name",
        ),
        ("profiles:\n  dev: {servers: [\"[oops\"]}\n".to_owned(), "profiles.dev.servers[0]"),
        ("profiles:\n  dev: {tools: {deny: [\"a{b\"]}}\n".to_owned(), "profiles.dev.tools.deny[0]"),
    ] {
        let config = dir.path().join("hangar.yaml");
        std::fs::write(&config, &yaml).unwrap();
        let (code, stderr) = supervisor_exit(&[std::ffi::OsStr::new("--config"), config.as_os_str()], &[]);
        assert_eq!(code, Some(78), "{yaml}\n{stderr}");
        assert!(stderr.contains(key), "{key} not named in: {stderr}");
        assert!(!stderr.contains(CI), "the key leaked: {stderr}");
    }
}

#[test]
fn prompts_and_resources_follow_the_view() {
    let yaml = format!(
        "tool_access: {{mode: front_door}}\nauth:\n  api_keys:\n    - {{name: ci-bot, hash: \"{}\", profile: ci}}\n    - {{name: alice, hash: \"{}\"}}\n\
         profiles:\n  ci: {{servers: [math]}}\nmcp_servers:\n  math: {{command: [\"{{fake}}\", \"--tools\", \"add\"]}}\n  \
         conf: {{command: [\"{{fake}}\", \"--conformance\"]}}\n",
        key_hash(CI),
        key_hash(ADMIN)
    );
    let hangar = Hangar::start(&yaml);
    let (ci, admin) = (with_key(&hangar, CI), with_key(&hangar, ADMIN));
    let listed = |who: &As, method: &str, key: &str| {
        let (status, body) = who.mcp(method, json!({}));
        assert_eq!(status, 200, "{method}: {body}");
        body["result"][key].as_array().map_or(0, Vec::len)
    };
    assert!(listed(&admin, "prompts/list", "prompts") > 0, "the conformance fixtures serve prompts");
    assert!(listed(&admin, "resources/list", "resources") > 0, "and resources");
    assert_eq!(listed(&ci, "prompts/list", "prompts"), 0, "ci cannot see conf");
    assert_eq!(listed(&ci, "resources/list", "resources"), 0);
    let (_, got) = ci.mcp("prompts/get", json!({"name": "test_simple_prompt"}));
    assert!(got.get("error").is_some(), "a prompt of an unseen server is not found: {got}");
    let (_, got) = admin.mcp("prompts/get", json!({"name": "test_simple_prompt"}));
    assert!(got.get("result").is_some(), "{got}");
}
