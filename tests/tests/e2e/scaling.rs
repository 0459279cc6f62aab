//! Several API instances against one supervisor: the same answers from each, one killed
//! leaves the others serving, and a restarted supervisor is found again by every instance
//! without restarting them.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hangar_tests::serde_json::Value;
use hangar_tests::{api_listening_address, bin, poll, sigkill};

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn supervisor(config: &Path, socket: &Path) -> Proc {
    let child = Command::new(bin("hangar-supervisor"))
        .arg("--config")
        .arg(config)
        .arg("--socket")
        .arg(socket)
        .args(["--no-api", "--no-prober"])
        .env("STATE_DIRECTORY", socket.with_extension("state"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    poll("the control socket", Duration::from_secs(10), || socket.exists().then_some(()));
    Proc(child)
}

/// An API on a kernel-chosen port; returns it and its base URL.
fn api(socket: &Path) -> (Proc, String) {
    let mut child = Command::new(bin("hangar-api"))
        .arg("--socket")
        .arg(socket)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://{}", api_listening_address(&mut child));
    (Proc(child), base)
}

fn get(base: &str, path: &str) -> Option<(u16, Value)> {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent.get(&format!("{base}{path}")).call().ok()?;
    let status = response.status().as_u16();
    Some((status, response.body_mut().read_json().unwrap_or(Value::Null)))
}

#[test]
fn instances_agree_survive_each_other_and_follow_a_restarted_supervisor() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hangar.yaml");
    let fake = bin("hangar-upstream-fake");
    std::fs::write(
        &config,
        format!("mcp_servers:\n  math:\n    command: [\"{}\", \"--tools\", \"add\"]\n", fake.display()),
    )
    .unwrap();
    let socket = dir.path().join("s.sock");
    let first_supervisor = supervisor(&config, &socket);
    let apis: Vec<(Proc, String)> = (0..3).map(|_| api(&socket)).collect();
    for (_, base) in &apis {
        poll("every instance to be ready", Duration::from_secs(10), || {
            (get(base, "/health/ready")?.0 == 200).then_some(())
        });
    }

    // Started through one instance, seen the same through all.
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let started = agent
        .post(&format!("{}/api/mcp_servers/math/start", apis[0].1))
        .header("Content-Type", "application/json")
        .send_empty()
        .unwrap();
    assert_eq!(started.status().as_u16(), 200);
    let answers: Vec<Value> = apis.iter().map(|(_, base)| get(base, "/api/mcp_servers/math").unwrap().1).collect();
    assert_eq!(answers[0]["state"], "ready");
    assert!(answers.iter().all(|a| a == &answers[0]), "{answers:?}");

    // Kill one: the others serve on.
    let mut apis = apis;
    let (killed, killed_base) = apis.remove(0);
    sigkill(killed.0.id());
    drop(killed);
    assert!(get(&killed_base, "/health/live").is_none(), "the killed one is gone");
    for (_, base) in &apis {
        assert_eq!(get(base, "/api/mcp_servers").map(|r| r.0), Some(200));
    }

    // Restart the supervisor: the remaining instances reconnect by themselves.
    sigkill(first_supervisor.0.id());
    drop(first_supervisor);
    for (_, base) in &apis {
        poll("an instance to notice the supervisor is gone", Duration::from_secs(10), || {
            (get(base, "/health/ready")?.0 == 503).then_some(())
        });
        assert_eq!(get(base, "/api/mcp_servers").map(|r| r.0), Some(503), "answers 503 meanwhile, at once");
    }
    let _second_supervisor = supervisor(&config, &socket);
    for (_, base) in &apis {
        poll("an instance to reconnect", Duration::from_secs(15), || {
            (get(base, "/health/ready")?.0 == 200).then_some(())
        });
        let (status, body) = get(base, "/api/mcp_servers/math").unwrap();
        assert_eq!((status, body["state"].as_str()), (200, Some("cold")), "the new supervisor's state");
    }
}

#[test]
fn a_sigkilled_api_helper_is_restarted_on_the_same_address() {
    let port = hangar_tests::free_port();
    let hangar =
        hangar_tests::Hangar::start_on("mcp_servers: {}\n", &format!("127.0.0.1:{port}")).expect("a free port");
    let api = poll("the API helper process", Duration::from_secs(10), || {
        hangar_tests::children_named(hangar.pid(), "hangar-api").pop()
    });
    sigkill(api);
    let again = poll("a new API helper", Duration::from_secs(15), || {
        hangar_tests::children_named(hangar.pid(), "hangar-api").into_iter().find(|pid| *pid != api)
    });
    assert_ne!(again, api);
    poll("the restarted API to serve on the same address", Duration::from_secs(15), || {
        (get(&hangar.base, "/health/ready")?.0 == 200).then_some(())
    });
}
