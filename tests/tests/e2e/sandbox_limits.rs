//! `sandbox.memory_mb` and `sandbox.max_processes`, held by the kernel (a cgroup per upstream:
//! v2 where the hangar's cgroup is delegated, else v1 groups; CI's machines offer v1). Each
//! attempt is real, made from inside the upstream by the sandbox probe
//! (`tests/fixtures/sandbox_probe.py`):
//! - allocating and touching 2 GiB under `memory_mb: 256` gets the upstream killed by the OOM
//!   killer, and it reads `dead`/`crashed`, "out of memory (memory_mb: 256)", the same on REST,
//!   MCP, `hangar status` and in the journal;
//! - a fork bomb is held at `max_processes` (the probe reports the refusal and reaps what it got)
//!   while the server keeps serving;
//! - once stopped, nothing of the upstream's groups is left: no process (an escaped double fork
//!   included) and no group; nor once the supervisor is SIGKILLed (its guardians empty and
//!   remove the groups);
//! - the empty groups of a hangar killed whole (guardians, upstream and supervisor SIGKILLed) are
//!   removed when the next hangar starts; a running hangar's groups are kept, an empty one too.

use std::path::PathBuf;
use std::time::Duration;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, alive, children_named, poll, sigkill};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::how_it_ended::{entry, hangar_status};
use crate::journal_audit::{journal_of, wait_for};

/// Every probe with its one limit; the file system's default rules, and `/var/tmp` writable for
/// its escapee's pid file (this story is about limits only; no grant may cover the test's
/// directory, which holds the hangar's socket and state).
const CONFIG: &str = r#"
mcp_servers:
  hog:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: {memory_mb: 256, filesystem: {write: ["/var/tmp"], private: false}, syscalls: none}
  bomb:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: {max_processes: 16, filesystem: {write: ["/var/tmp"], private: false}, syscalls: none}
"#;

/// Where the probe's escapee writes its pid: a directory of this test's own under `/var/tmp`.
fn escape_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("hangar-limits-").tempdir_in("/var/tmp").unwrap()
}

const OUT_OF_MEMORY: &str = "its process ran out of memory (memory_mb: 256), so the kernel killed it (SIGKILL)";

#[test]
fn an_upstream_over_its_memory_is_killed_and_reads_out_of_memory_everywhere() {
    let (hangar, _, groups) = started_in_groups("hog");
    let in_effect = hangar.details("hog")["sandbox"]["in_effect"].clone();
    let enforced = in_effect["enforced"].to_string();
    assert!(enforced.contains("memory_mb: 256 (cgroup v"), "the details say what holds the limit: {in_effect}");

    // 2 GiB, each page touched: far past 256 MiB.
    assert_eq!(hangar.call("hog", "allocate", json!({"mb": 2048})), None, "the allocation never completes");
    poll("hog to read dead", Duration::from_secs(15), || (hangar.details("hog")["state"] == "dead").then_some(()));

    let dead = hangar.details("hog")["dead"].clone();
    assert_eq!((dead["reason"].as_str(), dead["detail"].as_str()), (Some("crashed"), Some(OUT_OF_MEMORY)), "{dead}");
    let listed = hangar.get("/api/mcp_servers").body;
    let status = hangar.tool_ok("hangar_status", json!({}));
    let surfaces = [
        ("GET /api/mcp_servers", entry(&listed, "mcp_server_id", "hog")["dead"].clone()),
        ("hangar_details", hangar.tool_ok("hangar_details", json!({"mcp_server": "hog"}))["dead"].clone()),
        ("hangar_list", entry(&hangar.tool_ok("hangar_list", json!({})), "mcp_server_id", "hog")["dead"].clone()),
        ("hangar_status", entry(&status, "id", "hog")["dead"].clone()),
    ];
    for (surface, object) in &surfaces {
        assert_eq!(object, &dead, "{surface}");
    }
    let note = entry(&status, "id", "hog")["note"].as_str().unwrap_or_default().to_owned();
    assert!(note.ends_with(&format!("; {OUT_OF_MEMORY}")), "hangar_status's note: {note}");
    let table = hangar_status(&hangar.base);
    let row = table.lines().find(|line| line.starts_with("hog")).unwrap_or_default();
    assert!(row.ends_with(&format!("; {OUT_OF_MEMORY}")), "hangar status: {table}");
    let recorded = wait_for(&journal_of(&hangar), "the death in the journal", |entries| {
        entries.iter().rev().find(|e| e["kind"] == "state" && e["mcp_server_id"] == "hog" && e["to"] == "dead").cloned()
    });
    assert_eq!(recorded["dead"], dead, "the journal (and /api/events, which streams it)");

    // Its groups went with it.
    poll("hog's groups to be removed", Duration::from_secs(10), || {
        groups.iter().all(|dir| !dir.exists()).then_some(())
    });
}

#[test]
fn a_fork_bomb_is_held_at_max_processes_and_nothing_of_its_group_outlives_a_stop() {
    let (hangar, pid, groups) = started_in_groups("bomb");

    let report = hangar.call("bomb", "fork_bomb", json!({"n": 1000})).expect("the probe answers");
    assert_eq!((&report["ok"], &report["refused"]["errno"]), (&json!(false), &json!("EAGAIN")), "{report}");
    let forked = report["forked"].as_u64().unwrap_or(u64::MAX);
    assert!(forked < 16, "held below max_processes (the probe itself counts): {report}");
    // Refused, not killed: it keeps serving, and can do it again.
    assert_eq!(hangar.details("bomb")["state"], "ready");
    let again = hangar.call("bomb", "fork_bomb", json!({"n": 1000})).expect("still serving");
    assert_eq!(again["forked"], report["forked"], "its children were reaped: {again}");

    // A descendant that escaped its session and parent stays in the group, and goes with it.
    let escapes = escape_dir();
    let escaped = hangar.call("bomb", "escape", json!({"dir": escapes.path().display().to_string()}));
    let escaped = escaped.and_then(|e| e["pid"].as_u64()).expect("the probe escapes") as u32;
    assert_eq!(groups_of(escaped), groups, "the escapee is still in bomb's groups");
    let members = members_of(&groups);
    assert!(members.contains(&pid) && members.contains(&escaped), "{members:?}");

    hangar.tool_ok("hangar_stop", json!({"mcp_server": "bomb"}));
    poll("bomb's group to be emptied and removed", Duration::from_secs(10), || {
        (groups.iter().all(|dir| !dir.exists()) && members.iter().all(|pid| !alive(*pid))).then_some(())
    });
}

#[test]
fn a_sigkilled_supervisor_leaves_nothing_of_a_limited_upstreams_groups() {
    let (hangar, pid, groups) = started_in_groups("bomb");
    let escapes = escape_dir();
    let escaped = hangar.call("bomb", "escape", json!({"dir": escapes.path().display().to_string()}));
    let escaped = escaped.and_then(|e| e["pid"].as_u64()).expect("the probe escapes") as u32;
    sigkill(hangar.pid());
    poll("the guardians to empty and remove bomb's groups", Duration::from_secs(15), || {
        (groups.iter().all(|dir| !dir.exists()) && !alive(pid) && !alive(escaped)).then_some(())
    });
}

#[test]
fn the_empty_groups_of_a_hangar_killed_whole_are_removed_at_the_next_start_and_a_running_hangars_kept() {
    // Killed whole: stopped first, so no keeper starts a new guardian; then its guardians, its
    // upstream and itself, so nobody is left to empty and remove its groups.
    let (killed, upstream, stale) = started_in_groups("bomb");
    let supervisor = killed.pid();
    let guardians = children_named(supervisor, "hangar-guardian");
    assert!(!guardians.is_empty(), "the hangar has guardians");
    signal(supervisor, Signal::SIGSTOP);
    for pid in guardians.iter().copied().chain([upstream, supervisor]) {
        sigkill(pid);
    }
    poll("the killed hangar to be gone", Duration::from_secs(10), || {
        guardians.iter().chain([&upstream, &supervisor]).all(|pid| !alive(*pid)).then_some(())
    });
    // Its groups are left behind now: nobody is left to remove them. (Not asserted: a hangar that
    // another story starts meanwhile may already remove them, as the next one does below.)

    // A running hangar's groups are kept, an empty one too (as between a group's creation and its
    // child joining it).
    let (running, running_upstream, kept) = started_in_groups("bomb");
    let owner = format!("{}-{}", running.pid(), start_time(running.pid()));
    let empty: Vec<PathBuf> =
        kept.iter().map(|dir| dir.with_file_name(format!("hangar-upstream-{owner}-999999"))).collect();
    for dir in &empty {
        std::fs::create_dir(dir).expect("an empty group of the running hangar");
    }

    let next = Hangar::start(CONFIG);
    poll("the next hangar to remove the stale groups", Duration::from_secs(10), || {
        stale.iter().all(|dir| !dir.exists()).then_some(())
    });
    assert!(kept.iter().chain(&empty).all(|dir| dir.exists()), "the running hangar's groups are kept");
    assert_eq!(groups_of(running_upstream), kept);
    assert_eq!(running.details("bomb")["state"], "ready");
    for dir in &empty {
        let _ = std::fs::remove_dir(dir);
    }
    drop(next);
}

/// A process's start time (`/proc/<pid>/stat` field 22), as the supervisor names its groups.
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields = stat.rsplit_once(") ").map(|(_, rest)| rest.split(' ').collect::<Vec<_>>()).unwrap_or_default();
    fields.get(19).and_then(|start| start.parse().ok()).unwrap_or_else(|| panic!("the start time of {pid}: {stat}"))
}

/// A hangar on [`CONFIG`] with `id` started: its pid and the groups it runs in (some, or the
/// story fails: without a group nothing holds its limits).
fn started_in_groups(id: &str) -> (Hangar, u32, Vec<PathBuf>) {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": id}));
    let pid = pid_of(&hangar, id);
    let groups = groups_of(pid);
    assert!(!groups.is_empty(), "{id} runs in a group of its own: {}", membership(pid));
    (hangar, pid, groups)
}

/// The upstream's pid, from its details.
fn pid_of(hangar: &Hangar, id: &str) -> u32 {
    let details = hangar.details(id);
    details["meta"]["pid"].as_u64().unwrap_or_else(|| panic!("{id} has a pid: {details}")) as u32
}

fn signal(pid: u32, signal: Signal) {
    kill(Pid::from_raw(pid as i32), signal).expect("the process can be signalled");
}

/// `/proc/<pid>/cgroup`.
fn membership(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default()
}

/// The directories of the hangar's groups (v1 `hangar-upstream-N`, v2 `upstream-N`) a process is in.
fn groups_of(pid: u32) -> Vec<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut groups: Vec<PathBuf> = membership(pid)
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            let last = path.rsplit('/').next()?;
            if !(last.starts_with("hangar-upstream-") || last.starts_with("upstream-")) {
                return None;
            }
            let mount = mountinfo.lines().find_map(|mount| {
                let (fields, fs) = mount.split_once(" - ")?;
                let mut fs = fs.split_whitespace();
                let (kind, options) = (fs.next()?, fs.nth(1)?);
                let ours = match controllers {
                    "" => kind == "cgroup2",
                    _ => kind == "cgroup" && controllers.split(',').all(|c| options.split(',').any(|o| o == c)),
                };
                ours.then(|| fields.split_whitespace().nth(4).map(PathBuf::from))?
            })?;
            Some(mount.join(path.trim_start_matches('/')))
        })
        .collect();
    groups.sort();
    groups
}

/// Every pid the groups list.
fn members_of(groups: &[PathBuf]) -> Vec<u32> {
    groups
        .iter()
        .flat_map(|dir| {
            std::fs::read_to_string(dir.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}
