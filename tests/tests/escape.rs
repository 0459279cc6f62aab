//! No descendant of an upstream outlives the hangar or its own stop, however it regrouped
//! itself: `setsid` (util-linux), a shell's double fork, Python's `setpgid(0, 0)` and a classic
//! fork-setsid-fork daemon. Each story drives the real fault (SIGKILL or SIGTERM of the
//! supervisor, a REST stop, a restart, an upstream that exits by itself, SIGKILLed guardians)
//! and then looks every escaped pid up in `/proc`; and no zombie piles up below an upstream that
//! keeps orphaning processes. Both kill modes: `subreaper` (the supervisor as subreaper, orphans
//! told apart by an environment marker, walks of the process tree) everywhere, and `cgroup` (a
//! cgroup v2 per upstream, `cgroup.kill`) where this machine lets the test create a cgroup to run
//! the supervisor in.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use hangar_core::sync::Unpoisoned;
use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, alive, children_named, poll, read_pid, sigkill};

/// Three upstreams, each leaving sleepers that escaped its process group.
const CONFIG: &str = r#"
mcp_servers:
  sh:
    command: ["sh", "-c", "(setsid sleep 1000 & echo $! > {dir}/sh.setsid); ( (sleep 1000 & echo $! > {dir}/sh.double) & ); exec {fake} --tools add --pid-file {dir}/sh.pid"]
  py:
    command: ["python3", "{fixtures}/escaping_upstream.py", "{dir}", "py", "{fake}", "--tools", "add", "--pid-file", "{dir}/py.pid"]
  crashy:
    command: ["sh", "-c", "(setsid sleep 1000 & echo $! > {dir}/crashy.setsid); exec {fake} --tools add --crash-after 1 --pid-file {dir}/crashy.pid"]
"#;

/// The pid files of each server's process and of what it left behind.
const FILES: [(&str, &[&str]); 3] = [
    ("sh", &["sh.pid", "sh.setsid", "sh.double"]),
    ("py", &["py.pid", "py.pgid", "py.daemon"]),
    ("crashy", &["crashy.pid", "crashy.setsid"]),
];

const WITHIN: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Subreaper,
    Cgroup,
}

/// A started hangar and, in cgroup mode, the cgroup its supervisor runs in.
struct Run {
    hangar: Hangar,
    cgroup: Option<TestCgroup>,
}

impl Run {
    /// Starts the hangar in `mode` (None: cgroups are not available here and the test may skip, see
    /// [`hangar_tests::skip`]; under CI it fails instead).
    fn start(mode: Mode) -> Option<Run> {
        Run::start_config(mode, CONFIG)
    }

    /// Starts the hangar with `config` in `mode` (None: cgroups are not available here).
    fn start_config(mode: Mode, config: &str) -> Option<Run> {
        let _serial = serial();
        match mode {
            Mode::Subreaper => {
                Some(Run { hangar: Hangar::start_with(config, &["--kill-mode", "subreaper"]), cgroup: None })
            }
            Mode::Cgroup => {
                let cgroup = match TestCgroup::create() {
                    Ok(cgroup) => cgroup,
                    Err(why) => {
                        assert!(hangar_tests::skip(&format!("cgroup mode cannot be tested here: {why}")));
                        return None;
                    }
                };
                // The supervisor inherits the cgroup of the process that forks it: this one,
                // moved there just for the spawn (every start in this file is serialized).
                let inside = cgroup.enter();
                let hangar = Hangar::start_with(config, &["--kill-mode", "cgroup"]);
                drop(inside);
                Some(Run { hangar, cgroup: Some(cgroup) })
            }
        }
    }

    /// Starts `ids` and returns every pid each wrote (the process, then what it left behind).
    fn start_servers(&self, ids: &[&str]) -> Vec<u32> {
        ids.iter().flat_map(|id| self.start_server(id)).collect()
    }

    fn start_server(&self, id: &str) -> Vec<u32> {
        let pids = self.start_server_unchecked(id);
        if let Some(cgroup) = &self.cgroup {
            // In cgroup mode, the upstream runs in a cgroup of its own below the supervisor's.
            let membership = std::fs::read_to_string(format!("/proc/{}/cgroup", pids[0])).unwrap();
            let path = membership.lines().find_map(|line| line.strip_prefix("0::")).unwrap().to_owned();
            let leaf = path.rsplit('/').next().unwrap().to_owned();
            assert!(path.contains(&format!("/{}/upstream-", cgroup.name())), "{id} runs in {path}");
            assert!(cgroup.children().contains(&leaf), "{id}: {leaf} is not below the supervisor's cgroup");
        }
        pids
    }

    fn start_server_unchecked(&self, id: &str) -> Vec<u32> {
        let files = FILES.iter().find(|(server, _)| *server == id).map(|(_, files)| *files).unwrap();
        for file in files {
            let _ = std::fs::remove_file(self.hangar.path(file));
        }
        self.hangar.tool_ok("hangar_start", json!({"mcp_server": id}));
        let pids: Vec<u32> = files.iter().map(|file| read_pid(&self.hangar.path(file))).collect();
        for pid in &pids {
            assert!(alive(*pid), "{id}: pid {pid} is not running");
        }
        pids
    }

    /// The supervisor's guardians (there are two), waiting until both run.
    fn guardians(&self) -> Vec<u32> {
        poll("two guardians", WITHIN, || {
            let found = children_named(self.hangar.pid(), "--internal-guardian");
            (found.len() == 2).then_some(found)
        })
    }

    fn stop(&self, id: &str) {
        let response = self.hangar.post_raw(
            &format!("/api/mcp_servers/{id}/stop"),
            &[("Content-Type", "application/json")],
            b"{}",
        );
        assert_eq!(response.status, 200, "{}", response.text);
    }
}

/// Serializes hangar starts in this file: a start in cgroup mode moves this test process.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.locked()
}

fn assert_all_die(pids: &[u32], what: &str, hangar: &Hangar) {
    for pid in pids {
        let limit = WITHIN;
        let deadline = std::time::Instant::now() + limit;
        while alive(*pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "pid {pid} ({}) outlived {what}; log:\n{}",
                command_line(*pid),
                hangar.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn command_line(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw).replace('\0', " ").trim().to_owned()
}

// ---- the supervisor goes ---------------------------------------------------------------------

fn sigkill_of_the_supervisor(mode: Mode) {
    let Some(run) = Run::start(mode) else { return };
    let pids = run.start_servers(&["sh", "py"]);
    sigkill(run.hangar.pid());
    assert_all_die(&pids, "a SIGKILLed supervisor", &run.hangar);
    if let Some(cgroup) = &run.cgroup {
        poll("the guardian to remove the upstreams' cgroups", WITHIN, || cgroup.children().is_empty().then_some(()));
    }
}

#[test]
fn sigkill_of_the_supervisor_leaves_no_descendant() {
    sigkill_of_the_supervisor(Mode::Subreaper);
}

#[test]
fn sigkill_of_the_supervisor_leaves_no_descendant_in_cgroup_mode() {
    sigkill_of_the_supervisor(Mode::Cgroup);
}

fn sigterm_of_the_supervisor(mode: Mode) {
    let Some(mut run) = Run::start(mode) else { return };
    let pids = run.start_servers(&["sh", "py"]);
    let guardians = run.guardians();
    let status = run.hangar.terminate();
    assert_eq!(status.code(), Some(0), "log:\n{}", run.hangar.log());
    assert_all_die(&pids, "a clean shutdown", &run.hangar);
    assert_all_die(&guardians, "a clean shutdown (the guardians)", &run.hangar);
    if let Some(cgroup) = &run.cgroup {
        assert_eq!(cgroup.children(), Vec::<String>::new(), "the supervisor removes the upstreams' cgroups");
    }
}

#[test]
fn sigterm_of_the_supervisor_leaves_no_descendant() {
    sigterm_of_the_supervisor(Mode::Subreaper);
}

#[test]
fn sigterm_of_the_supervisor_leaves_no_descendant_in_cgroup_mode() {
    sigterm_of_the_supervisor(Mode::Cgroup);
}

// ---- one upstream goes -----------------------------------------------------------------------

fn stop_kills_only_that_subtree(mode: Mode) {
    let Some(run) = Run::start(mode) else { return };
    let sh = run.start_server("sh");
    let py = run.start_server("py");
    let cgroups = run.cgroup.as_ref().map(|cgroup| cgroup.children());
    run.stop("py");
    assert_all_die(&py, "a REST stop", &run.hangar);
    assert_eq!(run.hangar.details("py")["state"], "cold");
    // The other server's escaped descendants are not touched.
    for pid in &sh {
        assert!(alive(*pid), "pid {pid} of `sh` died when `py` was stopped");
    }
    if let (Some(before), Some(cgroup)) = (cgroups, run.cgroup.as_ref()) {
        assert_eq!(before.len(), 2, "one cgroup per upstream: {before:?}");
        poll("the stopped upstream's cgroup to be removed", WITHIN, || (cgroup.children().len() == 1).then_some(()));
    }
    run.stop("sh");
    assert_all_die(&sh, "a REST stop", &run.hangar);
}

#[test]
fn a_stopped_upstream_leaves_no_descendant() {
    stop_kills_only_that_subtree(Mode::Subreaper);
}

#[test]
fn a_stopped_upstream_leaves_no_descendant_in_cgroup_mode() {
    stop_kills_only_that_subtree(Mode::Cgroup);
}

#[test]
fn a_restarted_upstream_leaves_no_descendant_of_its_old_process() {
    let Some(run) = Run::start(Mode::Subreaper) else { return };
    let old = run.start_servers(&["sh", "py"]);
    for id in ["sh", "py"] {
        run.stop(id);
    }
    let new = run.start_servers(&["sh", "py"]);
    assert_all_die(&old, "a restart", &run.hangar);
    for pid in &new {
        assert!(alive(*pid), "pid {pid} of the new processes is not running");
    }
}

fn an_upstream_that_exits_by_itself(mode: Mode) {
    let Some(run) = Run::start(mode) else { return };
    let pids = run.start_server("crashy");
    // Its first call is its last: it answers, then exits with code 101, leaving its orphan.
    assert_eq!(run.hangar.call("crashy", "add", json!({"a": 1, "b": 2})), Some(json!({"result": 3})));
    assert_all_die(&pids, "its upstream's own exit", &run.hangar);
    let dead = poll("crashy to read dead", WITHIN, || {
        let details = run.hangar.details("crashy");
        (details["state"] == "dead").then(|| details["dead"].clone())
    });
    assert_eq!(dead["reason"], "crashed");
    // A crash-restart: the call after the backoff starts it again, and kills the new orphan on
    // the next crash just the same.
    for file in ["crashy.pid", "crashy.setsid"] {
        std::fs::remove_file(run.hangar.path(file)).unwrap();
    }
    let restarted = poll("a call to revive crashy", Duration::from_secs(30), || {
        run.hangar.call("crashy", "add", json!({"a": 2, "b": 2}))
    });
    assert_eq!(restarted["result"], 4);
    let again: Vec<u32> = ["crashy.pid", "crashy.setsid"].iter().map(|f| read_pid(&run.hangar.path(f))).collect();
    assert!(again.iter().all(|pid| !pids.contains(pid)), "new processes: {again:?} vs {pids:?}");
    assert_all_die(&again, "its restarted upstream's own exit", &run.hangar);
    poll("crashy to read dead again", WITHIN, || {
        (run.hangar.details("crashy")["dead"]["reason"] == "crashed").then_some(())
    });
}

#[test]
fn an_upstream_that_exits_by_itself_leaves_no_orphan() {
    an_upstream_that_exits_by_itself(Mode::Subreaper);
}

#[test]
fn an_upstream_that_exits_by_itself_leaves_no_orphan_in_cgroup_mode() {
    an_upstream_that_exits_by_itself(Mode::Cgroup);
}

/// A managed HTTP upstream (`mode: http`) that daemonizes: the server listens in a descendant in
/// a session of its own. It is the upstream's own listener, not a stranger's (the check covers
/// the whole subtree, not only the process group), and a stop kills it like any descendant.
#[test]
fn a_managed_http_upstream_serving_from_a_daemonized_descendant_starts_and_stops_whole() {
    let port = hangar_tests::free_port();
    let config = format!(
        r#"
mcp_servers:
  web:
    mode: http
    command: ["sh", "-c", "setsid {{fake}} --http 127.0.0.1:{port} --tools add --pid-file {{dir}}/web.pid & wait"]
    endpoint: http://127.0.0.1:{port}/mcp
"#
    );
    // Started like every hangar here (serialized), so no cgroup-mode start can catch its spawn.
    let run = Run::start_config(Mode::Subreaper, &config).expect("subreaper mode always starts");
    let hangar = &run.hangar;
    for round in 1..=2 {
        let _ = std::fs::remove_file(hangar.path("web.pid"));
        let started = hangar.post_raw("/api/mcp_servers/web/start", &[("Content-Type", "application/json")], b"{}");
        assert_eq!(started.status, 200, "round {round}: {}", started.text);
        let server = read_pid(&hangar.path("web.pid"));
        let pgrp = std::fs::read_to_string(format!("/proc/{server}/stat")).unwrap();
        assert_ne!(
            pgrp.rsplit_once(") ").unwrap().1.split(' ').nth(2),
            Some(hangar.details("web")["meta"]["pid"].to_string().as_str()),
            "the server left the upstream's process group"
        );
        assert_eq!(hangar.call("web", "add", json!({"a": 1, "b": 2})), Some(json!({"result": 3})));
        run.stop("web");
        assert_all_die(&[server], "a REST stop of its managed HTTP upstream", hangar);
    }
}

/// An upstream whose descendants keep orphaning short-lived processes (`(sleep 0.05 &)` in a
/// loop), beside a daemon of its own (`setsid sleep`, its environment kept), one that cleared
/// its environment and left the upstream's process group (`env -i setsid sleep`) and one that
/// cleared its environment but stayed in the group (`env -i sleep`).
const ORPHANER: &str = r#"
mcp_servers:
  orphaner:
    command: ["sh", "-c", "(setsid sleep 1000 & echo $! > {dir}/orphaner.daemon); (env -i setsid sleep 1000 & echo $! > {dir}/orphaner.cleared); (env -i sleep 1000 & echo $! > {dir}/orphaner.grouped); (while :; do (sleep 0.05 &); echo >> {dir}/orphans; sleep 0.01; done) & exec {fake} --tools add --pid-file {dir}/orphaner.pid"]
"#;

/// The orphaner's upstream, daemon and environment-less orphans, once started.
struct Orphaner {
    upstream: u32,
    daemon: u32,
    cleared: u32,
    grouped: u32,
}

impl Run {
    fn start_orphaner(&self) -> Orphaner {
        for file in ["orphaner.pid", "orphaner.daemon", "orphaner.cleared", "orphaner.grouped", "orphans"] {
            let _ = std::fs::remove_file(self.hangar.path(file));
        }
        self.hangar.tool_ok("hangar_start", json!({"mcp_server": "orphaner"}));
        let [upstream, daemon, cleared, grouped] =
            ["orphaner.pid", "orphaner.daemon", "orphaner.cleared", "orphaner.grouped"]
                .map(|file| read_pid(&self.hangar.path(file)));
        Orphaner { upstream, daemon, cleared, grouped }
    }

    /// Lets the orphaner orphan `rounds` batches of processes; after each, no zombie may have
    /// piled up below the upstream or the supervisor, and the upstream still answers.
    fn sample_zombies(&self, orphaner: &Orphaner, rounds: usize) {
        const BATCH: usize = 25;
        let made = || std::fs::read_to_string(self.hangar.path("orphans")).unwrap_or_default().lines().count();
        for round in 1..=rounds {
            let target = made() + BATCH;
            poll("the upstream's descendants to orphan a batch of processes", Duration::from_secs(60), || {
                (made() >= target).then_some(())
            });
            let (below_upstream, below_supervisor) = (zombies_of(orphaner.upstream), zombies_of(self.hangar.pid()));
            let orphaned = made();
            assert!(
                below_upstream < 10,
                "round {round}: {below_upstream} zombies pile up below the upstream after {orphaned} orphans"
            );
            assert!(below_supervisor < 10, "round {round}: {below_supervisor} zombies pile up below the supervisor");
            assert_eq!(
                self.hangar.call("orphaner", "add", json!({"a": round, "b": 1})),
                Some(json!({"result": round + 1})),
                "round {round}: the upstream stopped answering"
            );
        }
    }
}

/// A process's parent, if it runs.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
}

/// How many zombies `parent` has now.
fn zombies_of(parent: u32) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .filter(|stat| {
            let rest = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
            rest.starts_with('Z') && rest.split(' ').nth(1) == Some(parent.to_string().as_str())
        })
        .count()
}

/// Upstreams are no subreapers: their orphans go to the supervisor, which reaps them, so no
/// zombie piles up below an upstream that never reaps what it did not start (it did: one per
/// orphan, for as long as the upstream ran). An orphan of the running upstream (its daemon) is
/// left to run across hundreds of sweeps, and goes with its upstream: on a REST stop, on a
/// restart's stop, and when the supervisor is SIGKILLed. So does one that cleared its
/// environment but stayed in the upstream's process group. One that cleared its environment and
/// left the group cannot be told apart without cgroups: it is killed at once in subreaper mode,
/// and kept in its upstream's cgroup (so killed with it) in cgroup mode.
fn orphans_of_a_running_upstream(mode: Mode) {
    let Some(run) = Run::start_config(mode, ORPHANER) else { return };
    let first = run.start_orphaner();
    run.sample_zombies(&first, 4);
    if mode == Mode::Subreaper {
        assert_all_die(&[first.cleared], "its orphaning with a cleared environment", &run.hangar);
    }
    run.sample_zombies(&first, 1);
    assert!(alive(first.daemon), "the running upstream's daemon was killed; log:\n{}", run.hangar.log());
    assert!(alive(first.grouped), "the orphan in the upstream's group was killed; log:\n{}", run.hangar.log());
    // Both orphans, adopted by the supervisor, were left to run across the sweeps of hundreds of
    // other orphans' deaths.
    for orphan in [first.daemon, first.grouped] {
        assert_eq!(parent_of(orphan), Some(run.hangar.pid()), "pid {orphan} is not the supervisor's");
    }
    run.stop("orphaner");
    assert_all_die(&[first.upstream, first.daemon, first.cleared, first.grouped], "a REST stop", &run.hangar);
    assert_eq!(zombies_of(first.upstream), 0);

    // A restart: the new instance's daemon is its own, left to run; the old one's stays dead.
    let second = run.start_orphaner();
    run.sample_zombies(&second, 2);
    assert!(alive(second.daemon), "the restarted upstream's daemon was killed; log:\n{}", run.hangar.log());
    assert!(!alive(first.daemon));
    run.stop("orphaner");
    assert_all_die(&[second.upstream, second.daemon, second.cleared, second.grouped], "a restart's stop", &run.hangar);

    let third = run.start_orphaner();
    run.sample_zombies(&third, 2);
    assert!(alive(third.daemon), "the daemon was killed; log:\n{}", run.hangar.log());
    assert!(alive(third.grouped), "the orphan in the upstream's group was killed; log:\n{}", run.hangar.log());
    sigkill(run.hangar.pid());
    assert_all_die(
        &[third.upstream, third.daemon, third.cleared, third.grouped],
        "a SIGKILLed supervisor",
        &run.hangar,
    );
}

#[test]
fn orphans_of_a_running_upstream_leave_no_zombies_and_go_with_it() {
    orphans_of_a_running_upstream(Mode::Subreaper);
}

#[test]
fn orphans_of_a_running_upstream_leave_no_zombies_in_cgroup_mode() {
    orphans_of_a_running_upstream(Mode::Cgroup);
}

/// The supervisor SIGKILLed right after its upstream orphaned a daemon, before any sweep could
/// adopt it and tell the guardians: the guardians find it by the marker in its environment.
#[test]
fn an_orphan_not_yet_adopted_when_the_supervisor_dies_goes_too() {
    let Some(run) = Run::start_config(
        Mode::Subreaper,
        r#"
mcp_servers:
  daemonizer:
    command: ["sh", "-c", "(sleep 2; setsid sleep 1000 & echo $! > {dir}/late.daemon) & exec {fake} --tools add --pid-file {dir}/daemonizer.pid"]
"#,
    ) else {
        return;
    };
    run.guardians();
    run.hangar.tool_ok("hangar_start", json!({"mcp_server": "daemonizer"}));
    let upstream = read_pid(&run.hangar.path("daemonizer.pid"));
    let daemon = poll("the daemon", WITHIN, || {
        let text = std::fs::read_to_string(run.hangar.path("late.daemon")).ok()?;
        text.trim().parse::<u32>().ok()
    });
    // Orphaned (its subshell exited): a child of the supervisor, swept only at the next SIGCHLD
    // of the supervisor's own or its backstop, seconds away.
    poll("the daemon to be orphaned to the supervisor", WITHIN, || {
        (parent_of(daemon) == Some(run.hangar.pid())).then_some(())
    });
    sigkill(run.hangar.pid());
    assert_all_die(&[upstream, daemon], "a SIGKILLed supervisor, right after the orphaning", &run.hangar);
}

// ---- the guardian goes -----------------------------------------------------------------------

fn a_killed_guardian_is_replaced(mode: Mode) {
    let Some(run) = Run::start(mode) else { return };
    let pids = run.start_servers(&["sh", "py"]);
    let mut guardians = run.guardians();
    // Twice: the replacement is watched just like the first one.
    for round in 1..=2 {
        let killed = guardians[0];
        sigkill(killed);
        guardians = poll("a new guardian", WITHIN, || {
            let found = children_named(run.hangar.pid(), "--internal-guardian");
            (found.len() == 2 && !found.contains(&killed)).then_some(found)
        });
        let log = run.hangar.log();
        let said = format!("pid={killed}");
        assert!(
            log.lines().any(|l| l.contains("the guardian died") && l.contains(&said) && l.contains("SIGKILL")),
            "round {round}: the guardian's death is not logged with its pid and how it died:\n{log}"
        );
        // Named apart, so `killall hangar-supervisor` or `pkill -f hangar-supervisor` aimed at the
        // supervisor leaves them to do their work.
        for guardian in &guardians {
            // It names itself first thing (until then the kernel calls it after /proc/self/exe).
            poll("the guardian to name itself", WITHIN, || {
                let comm = std::fs::read_to_string(format!("/proc/{guardian}/comm")).unwrap_or_default();
                (comm.trim() == "hangar-guardian").then_some(())
            });
            let command = command_line(*guardian);
            assert!(command.starts_with("hangar-guardian --internal-guardian"), "{command}");
        }
    }
    // A server started after the repair is covered too.
    let later = run.start_server("crashy");
    sigkill(run.hangar.pid());
    assert_all_die(&pids, "a SIGKILLed supervisor after its guardian was replaced", &run.hangar);
    assert_all_die(&later, "a SIGKILLed supervisor after its guardian was replaced", &run.hangar);
    assert_all_die(&guardians, "their work", &run.hangar);
}

#[test]
fn a_killed_guardian_is_logged_and_replaced_and_the_replacement_kills_everything() {
    a_killed_guardian_is_replaced(Mode::Subreaper);
}

#[test]
fn a_killed_guardian_is_logged_and_replaced_in_cgroup_mode() {
    a_killed_guardian_is_replaced(Mode::Cgroup);
}

/// An upstream that dies in the same instant as its supervisor (it set a parent-death signal of
/// its own, as some servers do) leaves its children (here a daemon in a session of its own) to
/// init before a guardian can walk its subtree. The guardians noted them beforehand, and kill
/// them too.
#[test]
fn an_upstream_that_dies_with_its_supervisor_leaves_no_descendant() {
    let run = Run::start_config(
        Mode::Subreaper,
        r#"
mcp_servers:
  pdeath:
    command: ["sh", "-c", "setsid sleep 1000 & echo $! > {dir}/pdeath.setsid; exec python3 -c 'import ctypes, os, sys; ctypes.CDLL(None).prctl(1, 9, 0, 0, 0); os.execv(sys.argv[1], sys.argv[1:])' {fake} --tools add --pid-file {dir}/pdeath.pid"]
"#,
    )
    .expect("subreaper mode always starts");
    let hangar = &run.hangar;
    hangar.tool_ok("hangar_start", json!({"mcp_server": "pdeath"}));
    let pids: Vec<u32> = ["pdeath.pid", "pdeath.setsid"].iter().map(|f| read_pid(&hangar.path(f))).collect();
    assert!(alive(pids[1]), "the daemon runs");
    // Both guardians have noted the daemon (they look every second).
    let guardians = run.guardians();
    poll("both guardians to note the daemon", WITHIN, || {
        let log = hangar.log();
        let noted =
            |guardian: &u32| log.lines().any(|l| l.contains(&format!("guardian={guardian} descendants_noted=1")));
        guardians.iter().all(noted).then_some(())
    });
    sigkill(hangar.pid());
    assert_all_die(&pids, "a SIGKILLed supervisor, with an upstream that died at once", hangar);
}

/// The same, while the upstream's descendants keep orphaning processes, so the guardians are told
/// of adopted orphans (`+PID`, `-PID`) without pause: they still note the upstream's descendants
/// every second. The daemon here cleared its environment, so only that note names it.
#[test]
fn the_guardians_note_descendants_while_orphans_keep_coming() {
    let run = Run::start_config(
        Mode::Subreaper,
        r#"
mcp_servers:
  pdeath:
    command: ["sh", "-c", "env -i setsid sleep 1000 & echo $! > {dir}/pdeath.setsid; (while :; do (sleep 0.05 &); sleep 0.01; done) & exec python3 -c 'import ctypes, os, sys; ctypes.CDLL(None).prctl(1, 9, 0, 0, 0); os.execv(sys.argv[1], sys.argv[1:])' {fake} --tools add --pid-file {dir}/pdeath.pid"]
"#,
    )
    .expect("subreaper mode always starts");
    let hangar = &run.hangar;
    hangar.tool_ok("hangar_start", json!({"mcp_server": "pdeath"}));
    let pids: Vec<u32> = ["pdeath.pid", "pdeath.setsid"].iter().map(|f| read_pid(&hangar.path(f))).collect();
    let guardians = run.guardians();
    // Each guardian notes anew whenever the count changes, which the loop sees to; the second
    // note of each is sure to have been taken after the daemon started.
    poll("both guardians to note the descendants twice", WITHIN, || {
        let log = hangar.log();
        let noted = |guardian: &u32| {
            let said = format!("guardian={guardian} descendants_noted=");
            log.lines().filter(|l| l.contains(&said)).count() >= 2
        };
        guardians.iter().all(noted).then_some(())
    });
    assert!(alive(pids[1]), "the daemon runs");
    sigkill(hangar.pid());
    assert_all_die(&pids, "a SIGKILLed supervisor, with an upstream that died at once", hangar);
}

/// The other order: the supervisor SIGKILLed first. Its guardians, left alone, kill every
/// subtree and exit; so a SIGKILL that would follow for one finds nothing left to do.
#[test]
fn a_supervisor_killed_first_leaves_its_guardians_to_kill_everything_and_go() {
    let Some(run) = Run::start(Mode::Subreaper) else { return };
    let pids = run.start_servers(&["sh", "py"]);
    let guardians = run.guardians();
    sigkill(run.hangar.pid());
    assert_all_die(&pids, "a SIGKILLed supervisor", &run.hangar);
    assert_all_die(&guardians, "their work", &run.hangar);
}

/// A guardian killed and the supervisor at once after it, with no time for the repair: the other
/// guardian does the work.
fn a_guardian_then_the_supervisor_at_once(mode: Mode) {
    let Some(run) = Run::start(mode) else { return };
    let pids = run.start_servers(&["sh", "py"]);
    let guardians = run.guardians();
    sigkill(guardians[0]);
    sigkill(run.hangar.pid());
    assert_all_die(&pids, "a guardian and then the supervisor SIGKILLed at once", &run.hangar);
    assert_all_die(&guardians, "their work", &run.hangar);
}

#[test]
fn a_guardian_then_the_supervisor_killed_at_once_leave_no_descendant() {
    a_guardian_then_the_supervisor_at_once(Mode::Subreaper);
}

#[test]
fn a_guardian_then_the_supervisor_killed_at_once_leave_no_descendant_in_cgroup_mode() {
    a_guardian_then_the_supervisor_at_once(Mode::Cgroup);
}

// ---- a cgroup of the test's own --------------------------------------------------------------

/// A cgroup v2 directory this test created, removed (once empty) when dropped.
struct TestCgroup {
    dir: PathBuf,
    /// Where this test process came from.
    home: PathBuf,
}

impl TestCgroup {
    fn create() -> Result<TestCgroup, String> {
        let (mount, own) = own_cgroup().ok_or("no cgroup2 file system is mounted")?;
        let home = mount.join(own.trim_start_matches('/'));
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = home.join(format!("hangar-test-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        let cgroup = TestCgroup { dir, home };
        if !cgroup.dir.join("cgroup.kill").exists() {
            return Err("cgroup.kill is not available (Linux 5.14 or later)".into());
        }
        std::fs::write(cgroup.dir.join("cgroup.procs"), "0")
            .map_err(|err| format!("cannot move a process into {}: {err}", cgroup.dir.display()))?;
        drop(Inside(&cgroup));
        Ok(cgroup)
    }

    /// Moves this test process into the cgroup until the guard is dropped (on a panic too: the
    /// cgroup is killed when it goes, and this process must not be in it then).
    fn enter(&self) -> Inside<'_> {
        std::fs::write(self.dir.join("cgroup.procs"), std::process::id().to_string()).unwrap();
        Inside(self)
    }

    fn leave(&self) {
        std::fs::write(self.home.join("cgroup.procs"), std::process::id().to_string()).unwrap();
    }

    fn name(&self) -> String {
        self.dir.file_name().unwrap().to_string_lossy().into_owned()
    }

    /// The cgroups the supervisor created in it.
    fn children(&self) -> Vec<String> {
        let entries = std::fs::read_dir(&self.dir).unwrap();
        entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into())
            .collect()
    }
}

/// This test process inside a [`TestCgroup`]; it leaves when dropped.
struct Inside<'a>(&'a TestCgroup);

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // Whatever is left (a supervisor the test did not stop) goes with the cgroup.
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        let deadline = std::time::Instant::now() + WITHIN;
        while std::time::Instant::now() < deadline {
            for child in self.children() {
                let _ = std::fs::remove_dir(self.dir.join(child));
            }
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The cgroup2 mount point and this process's cgroup path in it.
fn own_cgroup() -> Option<(PathBuf, String)> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cgroups.lines().find_map(|line| line.strip_prefix("0::"))?.to_owned();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo.lines().find_map(|line| {
        let (fields, fs) = line.split_once(" - ")?;
        (fs.split_whitespace().next()? == "cgroup2").then(|| fields.split_whitespace().nth(4).map(Path::new))?
    })?;
    Some((mount.to_path_buf(), own))
}
