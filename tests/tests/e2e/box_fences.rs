//! A box is a box (issue 29): what a boxed upstream could once do to the hangar itself, driven
//! from inside the box by the box probe (`tests/fixtures/box_probe.py`), each seen to fail:
//! - it held every earlier upstream's stdio pipes: every upstream, boxed or not, now holds
//!   only its own three, a box's writes to any other descriptor number reach nobody, and
//!   stopping the first of three upstreams ends by its stdin closing, not by the grace's signal;
//! - it re-limited, reniced, rescheduled and signalled the supervisor: all refused, for a root
//!   hangar's box and a non-root one's, and the supervisor starts servers afterwards;
//! - a root hangar's box kept every capability and read a sibling's secret from its environ:
//!   it now holds none but those its config names, and reads nothing of the sibling;
//! - it reached the control socket and the state directory by name: both are hidden from it,
//!   and a sandbox whose grants cover them is refused at load and at reload;
//! - a box that cannot read its program's loader was told about namespaces: it is told about
//!   its Landlock rules.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, poll, supervisor_exit};

use crate::sandbox::{assert_refused, attempt, refused_start};

/// The upstream's pid, from its details.
fn pid_of(hangar: &Hangar, id: &str) -> u32 {
    let details = hangar.details(id);
    details["meta"]["pid"].as_u64().unwrap_or_else(|| panic!("{id} has a pid: {details}")) as u32
}

/// Every descriptor a process holds, with what it leads to.
fn descriptors(pid: u32) -> Vec<(u32, String)> {
    let mut fds: Vec<(u32, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap_or_else(|err| panic!("/proc/{pid}/fd: {err}"))
        .flatten()
        .filter_map(|entry| {
            let fd = entry.file_name().to_string_lossy().parse().ok()?;
            let target = std::fs::read_link(entry.path()).ok()?;
            Some((fd, target.display().to_string()))
        })
        .collect();
    fds.sort();
    fds
}

const PIPES: &str = r#"
mcp_servers:
  first:
    command: ["/usr/bin/python3", "{fixtures}/box_probe.py", "--note", "{dir}/first.ended"]
  second:
    command: ["/usr/bin/python3", "{fixtures}/box_probe.py"]
  boxed:
    command: ["/usr/bin/python3", "{fixtures}/box_probe.py"]
    sandbox: strict
"#;

#[test]
fn every_upstream_holds_only_its_own_pipes_and_a_box_writes_into_no_other() {
    let hangar = Hangar::start(PIPES);
    for id in ["first", "second", "boxed"] {
        hangar.tool_ok("hangar_start", json!({"mcp_server": id}));
    }
    let mut pipes = Vec::new();
    for id in ["first", "second", "boxed"] {
        let fds = descriptors(pid_of(&hangar, id));
        let numbers: Vec<u32> = fds.iter().map(|(fd, _)| *fd).collect();
        assert_eq!(numbers, [0, 1, 2], "{id} holds descriptors beyond its stdio: {fds:?}");
        assert!(fds.iter().all(|(_, target)| target.starts_with("pipe:")), "{id}: {fds:?}");
        pipes.extend(fds.into_iter().map(|(_, target)| target));
    }
    let mut distinct = pipes.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), pipes.len(), "two upstreams share a pipe: {pipes:?}");

    // A call written into any descriptor the box holds beyond its stdio reaches no upstream.
    let injected = hangar.path("injected");
    let call = json!({"jsonrpc": "2.0", "id": 4242, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": injected.display().to_string()}}});
    let wrote = attempt(&hangar, "boxed", "write_fds", json!({"line": format!("{call}\n"), "upto": 1024}));
    // Each neighbour answers a call after the injected one would have been read.
    for id in ["first", "second"] {
        assert_eq!(attempt(&hangar, id, "whoami", json!({}))["ok"], true, "{id}");
    }
    assert!(!injected.exists(), "the box drove another upstream through an inherited pipe: {wrote}");
    assert_eq!(wrote["took"], json!([]), "the box holds descriptors it can write to: {wrote}");

    // Stopping the first of three is seen at once: it ends on its stdin's end, which no later
    // upstream holds open, not on the signal the hangar sends once the grace (2 s) has passed.
    hangar.tool_ok("hangar_stop", json!({"mcp_server": "first"}));
    let ended = hangar.path("first.ended");
    let how = poll("the first upstream to note how it ended", Duration::from_secs(10), || {
        std::fs::read_to_string(&ended).ok().filter(|how| !how.is_empty())
    });
    assert_eq!(how, "stdin", "the first upstream did not see its stdin close");
}

/// What `/proc/<pid>/limits` says of one limit (soft and hard).
fn limit(pid: u32, name: &str) -> String {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    limits.lines().find(|line| line.starts_with(name)).unwrap_or_default().to_owned()
}

/// A process's nice value (`/proc/<pid>/stat` field 19).
fn nice(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ").and_then(|(_, rest)| rest.split(' ').nth(16)).unwrap_or_default().to_owned()
}

const SUPERVISOR_TARGETS: &str = r#"
mcp_servers:
  boxed:
    command: ["/usr/bin/python3", "{fixtures}/box_probe.py"]
    sandbox: strict
  later:
    command: ["{fake}", "--tools", "add"]
"#;

/// From inside `hangar`'s strict box: read and set the supervisor's limits, priority,
/// scheduling and I/O priority, and signal it. Each is refused; its own stay its own to set.
fn attack_the_supervisor(hangar: &Hangar, who: &str) {
    let supervisor = hangar.pid();
    let (files, cpu, niceness) =
        (limit(supervisor, "Max open files"), limit(supervisor, "Max cpu time"), nice(supervisor));
    let (rlimit_nofile, rlimit_cpu) = (7, 0);
    let tries = [
        ("prlimit", json!({"pid": supervisor, "resource": rlimit_nofile})),
        ("prlimit", json!({"pid": supervisor, "resource": rlimit_nofile, "limit": [12, 12]})),
        ("prlimit", json!({"pid": supervisor, "resource": rlimit_cpu, "limit": [0, 0]})),
        ("priority", json!({"pid": supervisor, "value": 19})),
        ("sched", json!({"pid": supervisor})),
        ("ioprio", json!({"pid": supervisor})),
        ("signal", json!({"pid": supervisor, "sig": 0})),
        ("signal", json!({"pid": supervisor, "sig": 18})),
    ];
    for (tool, arguments) in tries {
        let report = attempt(hangar, "boxed", tool, arguments.clone());
        assert_eq!(report["ok"], false, "{who}: {tool}({arguments}) reached the supervisor: {report}");
        for (step, outcome) in report.as_object().into_iter().flatten() {
            if let Some(errno) = outcome.get("errno") {
                assert!(
                    ["EPERM", "EACCES"].contains(&errno.as_str().unwrap_or_default()),
                    "{who}: {tool}.{step}: {report}"
                );
            }
        }
        if report.get("errno").is_some() {
            assert_refused(&report, &["EPERM", "EACCES"], &format!("{who}: {tool}"));
        }
    }
    assert_eq!(limit(supervisor, "Max open files"), files, "{who}");
    assert_eq!(limit(supervisor, "Max cpu time"), cpu, "{who}");
    assert_eq!(nice(supervisor), niceness, "{who}");
    // Its own are still its own (pid 0: itself).
    let own = attempt(hangar, "boxed", "prlimit", json!({"pid": 0, "resource": rlimit_nofile, "limit": [64, 64]}));
    assert_eq!(own["ok"], true, "{who}: {own}");
    let own = attempt(hangar, "boxed", "priority", json!({"pid": 0, "value": 5}));
    assert_eq!(own["ok"], true, "{who}: {own}");
    // And the supervisor is well: it starts servers.
    hangar.tool_ok("hangar_start", json!({"mcp_server": "later"}));
    assert_eq!(hangar.details("later")["state"], "ready", "{who}");
    let enforced = hangar.details("boxed")["sandbox"]["in_effect"]["enforced"].to_string();
    for word in ["prlimit64", "setpriority", "signals"] {
        assert!(enforced.contains(word), "{who}: {word} not in {enforced}");
    }
}

#[test]
fn a_box_cannot_relimit_renice_reschedule_or_signal_the_supervisor() {
    attack_the_supervisor(&Hangar::start(SUPERVISOR_TARGETS), "a root hangar's box");
    attack_the_supervisor(&Hangar::start_as_user(SUPERVISOR_TARGETS, 4242, 4242), "a non-root hangar's box");
}

#[test]
fn without_landlock_scopes_a_box_is_told_what_is_left_of_the_signal_fence() {
    // The hangar is made to believe the kernel has Landlock ABI 5, before signal scoping.
    let hangar = Hangar::start_with_env(SUPERVISOR_TARGETS, &[], &[("HANGAR_TEST_LANDLOCK_ABI_MAX", "5")]);
    assert_eq!(attempt(&hangar, "boxed", "whoami", json!({}))["ok"], true);
    let in_effect = hangar.details("boxed")["sandbox"]["in_effect"].clone();
    let fallbacks = in_effect["fallbacks"].to_string();
    assert!(fallbacks.contains("signals: not scoped") && fallbacks.contains("ABI 5"), "{in_effect}");
    assert!(fallbacks.contains("may signal the supervisor"), "{in_effect}");
    assert!(!in_effect["enforced"].to_string().contains("signals and abstract"), "{in_effect}");
}

#[test]
fn a_root_hangars_box_holds_no_capability_it_was_not_given_and_reads_no_siblings_secret() {
    let secret = format!("sibling-secret-{}", std::process::id());
    let config = format!(
        r#"
mcp_servers:
  boxed:
    command: ["/usr/bin/python3", "{{fixtures}}/box_probe.py"]
    sandbox: strict
  low_port:
    command: ["/usr/bin/python3", "{{fixtures}}/box_probe.py"]
    sandbox: {{preset: strict, capabilities: [CAP_NET_BIND_SERVICE]}}
  low_port_as_nobody:
    command: ["/usr/bin/python3", "{{fixtures}}/box_probe.py"]
    sandbox: {{preset: strict, user: nobody, capabilities: [net_bind_service]}}
  sibling:
    command: ["{{fake}}", "--tools", "add"]
    env: {{SIBLING_SECRET: "{secret}"}}
"#
    );
    let hangar = Hangar::start_reachable(&config);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "sibling"}));
    let sibling = pid_of(&hangar, "sibling");

    let caps = attempt(&hangar, "boxed", "caps", json!({}))["caps"].clone();
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(caps[set], "0000000000000000", "{set} of a strict box: {caps}");
    }
    let environ = format!("/proc/{sibling}/environ");
    let read = attempt(&hangar, "boxed", "grep_file", json!({"path": environ, "needle": secret}));
    assert_ne!(read["found"], true, "the box read its sibling's secret");
    assert_refused(&read, &["EACCES", "EPERM"], "the sibling's environ");
    // Nor the supervisor's (the harness gives it HANGAR_LOG).
    let environ = format!("/proc/{}/environ", hangar.pid());
    let read = attempt(&hangar, "boxed", "grep_file", json!({"path": environ, "needle": "HANGAR_LOG"}));
    assert_refused(&read, &["EACCES", "EPERM"], "the supervisor's environ");
    assert_refused(
        &attempt(&hangar, "boxed", "bind", json!({"port": 80})),
        &["EACCES"],
        "a low port without the capability",
    );
    let in_effect = hangar.details("boxed")["sandbox"]["in_effect"].clone();
    assert!(in_effect["enforced"].to_string().contains("capabilities: none"), "{in_effect}");

    // Named in its config: that one and no other, as root or as another user.
    let net_bind_service = "0000000000000400";
    for id in ["low_port", "low_port_as_nobody"] {
        let caps = attempt(&hangar, id, "caps", json!({}))["caps"].clone();
        for set in ["CapPrm", "CapEff"] {
            assert_eq!(caps[set], net_bind_service, "{id}: {set}: {caps}");
        }
        assert_eq!(attempt(&hangar, id, "bind", json!({"port": 80}))["ok"], true, "{id}");
        let in_effect = hangar.details(id)["sandbox"]["in_effect"].clone();
        assert!(in_effect["enforced"].to_string().contains("capabilities: CAP_NET_BIND_SERVICE"), "{in_effect}");
    }
}

#[test]
fn an_unknown_capability_is_refused_at_load_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hangar.yaml");
    std::fs::write(
        &config,
        "mcp_servers:\n  boxed:\n    command: [x]\n    sandbox: {preset: strict, capabilities: [CAP_NET_BIND_SERVICE, CAP_EVERYTHING]}\n",
    )
    .unwrap();
    let socket = dir.path().join("supervisor.sock");
    let (code, stderr) =
        supervisor_exit(&[OsStr::new("--config"), config.as_os_str(), OsStr::new("--socket"), socket.as_os_str()], &[]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("mcp_servers.boxed.sandbox.capabilities[1]"), "{stderr}");
}

/// A 0700 directory outside `/tmp` (where a box's private `/tmp` would hide it anyway), as
/// systemd's `RuntimeDirectory=` and `StateDirectory=` make them.
pub(crate) fn outside_tmp(base: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix("hangar-box-fences-").tempdir_in(base).unwrap()
}

/// A hangar (as `user`, when given) on a strict box, its socket and state outside `/tmp` in
/// 0700 directories of its own; the directories are returned with it.
fn hangar_with_its_places_outside_tmp(user: Option<u32>) -> (Hangar, tempfile::TempDir, tempfile::TempDir) {
    let (run, state) = (outside_tmp("/run"), outside_tmp("/var/tmp"));
    let config = format!(
        r#"
state_dir: "{state_dir}"
mcp_servers:
  boxed:
    command: ["/usr/bin/python3", "{{fixtures}}/box_probe.py"]
    sandbox: strict
"#,
        state_dir = state.path().join("state").display()
    );
    let socket = run.path().join("supervisor.sock").display().to_string();
    let hangar = match user {
        Some(uid) => {
            for dir in [run.path(), state.path()] {
                std::os::unix::fs::chown(dir, Some(uid), Some(uid)).unwrap();
            }
            Hangar::start_as_user_with_args(&config, uid, uid, &["--socket", &socket])
        }
        None => Hangar::start_with(&config, &["--socket", &socket]),
    };
    (hangar, run, state)
}

/// From inside the strict box: the control socket (connect, stat), the journal and its lock,
/// and a listing of either directory. Nothing is there.
fn assert_hidden(hangar: &Hangar, run: &Path, state_dir: &Path, who: &str) {
    let socket = run.join("supervisor.sock");
    let journal = state_dir.join("journal.sqlite");
    assert!(socket.exists() && journal.exists(), "{who}: the socket and journal are where the test put them");
    let at = |path: &Path| path.display().to_string();
    let connect = attempt(hangar, "boxed", "connect_unix", json!({"path": at(&socket)}));
    assert_refused(&connect, &["ENOENT"], &format!("{who}: the control socket, by name"));
    // Nor through the supervisor's own root, where it is not hidden.
    let through = format!("/proc/{}/root{}", hangar.pid(), at(&socket));
    let connect = attempt(hangar, "boxed", "connect_unix", json!({"path": through}));
    assert_refused(&connect, &["EACCES", "EPERM"], &format!("{who}: the control socket, through /proc"));
    for hidden in [&socket, &journal, &state_dir.join("journal.lock")] {
        let seen = attempt(hangar, "boxed", "stat", json!({"path": at(hidden)}));
        assert_refused(&seen, &["ENOENT"], &format!("{who}: {}", at(hidden)));
    }
    for dir in [run, state_dir] {
        let listed = attempt(hangar, "boxed", "list_dir", json!({"path": at(dir)}));
        assert!(listed["ok"] == false || listed["entries"] == json!([]), "{who}: {}: {listed}", dir.display());
    }
    let enforced = hangar.details("boxed")["sandbox"]["in_effect"]["enforced"].to_string();
    assert!(enforced.contains("control socket"), "{who}: {enforced}");
}

#[test]
fn the_control_socket_and_state_dir_are_hidden_from_a_box_and_grants_covering_them_refused() {
    let (rootless, run, state) = hangar_with_its_places_outside_tmp(Some(4242));
    assert_hidden(&rootless, run.path(), &state.path().join("state"), "a non-root hangar's box");
    drop(rootless);
    let (hangar, run, state) = hangar_with_its_places_outside_tmp(None);
    assert_hidden(&hangar, run.path(), &state.path().join("state"), "a root hangar's box");

    // A grant that covers either is refused: at reload (the running config stays) ...
    let socket = run.path().join("supervisor.sock");
    let written = std::fs::read_to_string(hangar.path("hangar.yaml")).unwrap();
    for grant in [run.path().to_path_buf(), PathBuf::from("/"), state.path().to_path_buf()] {
        let covering = written.replace(
            "sandbox: strict",
            &format!("sandbox: {{preset: strict, filesystem: {{read: [/usr, /lib, \"{}\"]}}}}", grant.display()),
        );
        std::fs::write(hangar.path("hangar.yaml"), &covering).unwrap();
        let reload = hangar.post("/api/config/reload", None);
        assert_ne!(reload.status, 200, "a grant of {} was reloaded: {}", grant.display(), reload.text);
        assert!(reload.text.contains("mcp_servers.boxed.sandbox.filesystem.read[2]"), "{}", reload.text);
        // ... and at start (78).
        let (code, stderr) = supervisor_exit(
            &[
                OsStr::new("--config"),
                hangar.path("hangar.yaml").as_os_str(),
                OsStr::new("--socket"),
                socket.as_os_str(),
            ],
            &[],
        );
        assert_eq!(code, Some(78), "{stderr}");
        assert!(stderr.contains("mcp_servers.boxed.sandbox.filesystem.read[2]"), "{stderr}");
    }
    std::fs::write(hangar.path("hangar.yaml"), &written).unwrap();
    assert_eq!(attempt(&hangar, "boxed", "whoami", json!({}))["ok"], true, "the running config stayed");
}

#[test]
fn a_box_that_cannot_read_its_programs_loader_is_told_about_its_landlock_rules() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  no_usr:
    command: ["/usr/bin/python3", "{fixtures}/box_probe.py"]
    sandbox: {preset: strict, filesystem: {read: [/etc/ld.so.cache]}}
"#,
    );
    let why = refused_start(&hangar, "no_usr");
    assert!(!why.contains("CAP_SYS_ADMIN") && !why.contains("namespace"), "a misleading hint: {why}");
    assert!(why.contains("Landlock") && why.contains("filesystem.read"), "{why}");
    let details: Value = hangar.details("no_usr");
    assert_eq!(details["dead"]["reason"], "start_failed", "{details}");
}
