//! The guardian's whole life: follow the socket, keep in view everything it must kill, and once
//! the socket ends (the supervisor exited, however it died) kill it all and exit. What this
//! guarantees, and why, is told with the supervisor's side, `hangar-supervisor/src/guardian.rs`.
//!
//! While it waits, each guardian keeps three records, all cheap at rest whatever the number of
//! upstreams:
//! - the supervisor's children (`kin.rs`), looked at every [`LOOK_EVERY`];
//! - every descendant of each watched process that no watched cgroup holds (`cover.rs`), noted
//!   by pid and start time every [`RECORD_EVERY`] (the walk), down the kernel's lists of
//!   children (or, on a kernel without them, a walk of all of `/proc`), and kept until seen
//!   dead, so one orphaned since stays noted wherever it went;
//! - none of that while no process at all has been born since the last walk and the supervisor
//!   has said nothing since (`births.rs`): then every process that could still reach the
//!   supervisor as an orphan descends from one already watched or noted, and nothing is read
//!   but one line of `/proc/loadavg` a look.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use hangar_guardian::{ARG, NAME, cgroup, proctree};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};

use crate::births;
use crate::cover::Cover;
use crate::kin::{Kin, LOOK_EVERY};
use crate::log;
use crate::socket::{self, Received};
use crate::watched::Watched;

/// How often a guardian notes the descendants of what it watches (the walk).
const RECORD_EVERY: Duration = Duration::from_secs(1);
/// How long a guardian waits for killed cgroups to empty before removing them.
const CGROUP_DRAIN: Duration = Duration::from_secs(2);
/// `EX_USAGE` (sysexits.h), as every hangar binary exits on a usage mistake.
const EX_USAGE: u8 = 64;

pub fn main() -> ExitCode {
    // Signals aimed at the supervisor's process tree (a terminal's Ctrl-C) must not end it
    // early: only the socket's end does. Blocked (not handled), so no unsafe is needed; the
    // guardian is single-threaded, so the mask covers it all.
    let mut blocked = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGPIPE] {
        blocked.add(signal);
    }
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&blocked), None);
    // Its comm, whatever file it was started from (`/proc/self/fd/N`, a renamed copy).
    if let Ok(name) = std::ffi::CString::new(NAME) {
        let _ = nix::sys::prctl::set_name(&name);
    }
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(ARG) {
        eprintln!("{NAME}: started by hangar-supervisor only ({NAME} {ARG} human|json PID:START, its socket on stdin)");
        return ExitCode::from(EX_USAGE);
    }
    log::init(args.get(2).is_some_and(|format| format == "json"));
    // The supervisor as it named itself. Its children are recorded only while it is this
    // guardian's parent and still that very process (`Kin`); one that died before this guardian
    // ran leaves nothing to record, only what it announced (already on the socket) to kill.
    let Some(supervisor) = args.get(3).and_then(|named| proctree::Pinned::parse(named)) else {
        log::error("guardian: started without the supervisor's pid and start time; exiting", &[]);
        return ExitCode::from(EX_USAGE);
    };
    let parent = nix::unistd::getppid().as_raw().unsigned_abs();
    let kin = if parent == supervisor.pid && supervisor.is_running() {
        Kin::new(supervisor)
    } else {
        log::warn(
            "guardian: the supervisor was gone before this guardian ran; killing only what it announced",
            &[("supervisor", supervisor.pid.into()), ("parent", parent.into())],
        );
        Kin::orphaned(supervisor)
    };
    let mut life = Life {
        watched: Watched::default(),
        kin,
        cover: Cover::new(),
        noted: BTreeMap::new(),
        born_at_walk: None,
        said: true,
        last_look: None,
        last_walk: None,
        marked: supervisor.marker_prefix(),
    };
    let mut buf = [0u8; 4096];
    loop {
        life.tick();
        if !socket::message_within(life.until_next()) {
            continue;
        }
        match socket::receive(&mut buf) {
            Received::Message(len, fds) => {
                life.watched.apply(&String::from_utf8_lossy(&buf[..len]), fds);
                life.said = true;
            }
            Received::Nothing => {}
            Received::End => break,
        }
    }
    life.finish();
    ExitCode::SUCCESS
}

struct Life {
    watched: Watched,
    kin: Kin,
    cover: Cover,
    /// The descendants noted, by pid and start time.
    noted: BTreeMap<u32, u64>,
    /// The last pid handed out when the last walk began.
    born_at_walk: Option<u32>,
    /// The supervisor said something since the last walk.
    said: bool,
    last_look: Option<Instant>,
    last_walk: Option<Instant>,
    /// The start of the environment marker of every upstream of this supervisor.
    marked: String,
}

impl Life {
    /// Looks and walks when each is due (both on time even while messages keep coming: orphans
    /// adopted and reaped in a loop), unless nothing was born or said since the last walk.
    fn tick(&mut self) {
        let now = Instant::now();
        let due = |last: Option<Instant>, every: Duration| last.is_none_or(|at| now.duration_since(at) >= every);
        let (look, walk) = (due(self.last_look, LOOK_EVERY), due(self.last_walk, RECORD_EVERY));
        if !look && !walk {
            return;
        }
        self.last_look = Some(now);
        if walk {
            self.last_walk = Some(now);
        }
        // Read before looking: a birth from here on is seen at the next tick.
        let born = births::last_pid();
        if !self.said && born.is_some() && born == self.born_at_walk {
            return;
        }
        // The look first: an orphan adopted since the last walk is recorded before this walk,
        // which no longer finds it below the process it left.
        if self.kin.listed() {
            let fresh = self.kin.look();
            self.log_recorded(fresh);
        }
        if walk {
            self.walk();
            self.born_at_walk = born;
            self.said = false;
        }
    }

    /// How long until the next look or walk is due.
    fn until_next(&self) -> Duration {
        let until =
            |last: Option<Instant>, every: Duration| every.saturating_sub(last.map_or(every, |at| at.elapsed()));
        until(self.last_look, LOOK_EVERY).min(until(self.last_walk, RECORD_EVERY))
    }

    /// Notes the descendants of every watched process and recorded child of the supervisor that
    /// no watched cgroup holds.
    fn walk(&mut self) {
        let procs = if self.kin.listed() { Vec::new() } else { proctree::snapshot() };
        if !self.kin.listed() {
            let fresh = self.kin.walked(&procs);
            self.log_recorded(fresh);
        }
        let watched: BTreeSet<(u32, u64)> = self
            .watched
            .pids
            .iter()
            .map(|(pid, (start, _))| (*pid, *start))
            .chain(self.kin.recorded(&self.watched.guardians))
            .collect();
        self.cover.retain(&watched);
        let roots: Vec<u32> = watched
            .iter()
            .filter(|(pid, start)| !self.cover.holds(*pid, *start, &self.watched.cgroups))
            .map(|(pid, _)| *pid)
            .collect();
        let mut found: BTreeMap<u32, u64> = if self.kin.listed() {
            roots.iter().flat_map(|root| proctree::below_listed(*root)).map(|stat| (stat.pid, stat.start)).collect()
        } else {
            let tree = proctree::Tree::new(&procs);
            let starts: BTreeMap<u32, u64> = procs.iter().map(|p| (p.pid, p.start)).collect();
            roots
                .iter()
                .flat_map(|root| tree.subtree(*root).into_iter().filter(move |pid| pid != root))
                .filter_map(|pid| Some((pid, *starts.get(&pid)?)))
                .collect()
        };
        // Noted before and still alive: orphaned since (out of every subtree), it is still one
        // to kill.
        for (pid, start) in &self.noted {
            if !found.contains_key(pid) && proctree::read(*pid).is_some_and(|s| s.start == *start && s.is_live()) {
                found.insert(*pid, *start);
            }
        }
        // Said whenever what it noted changed (at debug level), so a log shows the walks go on.
        if found != self.noted {
            let fields = [("guardian", std::process::id().into()), ("descendants_noted", found.len().into())];
            log::debug("guardian: noted the upstreams' descendants", &fields);
        }
        self.noted = found;
    }

    /// Logs the supervisor's children just recorded that the supervisor had not announced
    /// (yet): orphans it has not swept, or a child that announces itself in a moment.
    fn log_recorded(&self, fresh: Vec<u32>) {
        if !log::enabled(log::Level::Debug) {
            return;
        }
        let guardian = std::process::id();
        for pid in fresh {
            if pid != guardian && !self.watched.pids.contains_key(&pid) && !self.watched.is_guardian(pid) {
                log::debug(
                    "guardian: recorded a new child of the supervisor",
                    &[("guardian", guardian.into()), ("pid", pid.into())],
                );
            }
        }
    }

    /// Kills everything it watched, noted or recorded, then removes the cgroups.
    fn finish(self) {
        let Life { watched, kin, mut cover, noted, marked, .. } = self;
        let Watched { pids, cgroups, guardians } = watched;
        for dir in &cgroups {
            if let Err(err) = cgroup::kill(dir) {
                warn_cgroup(dir, &err);
            }
        }
        // The supervisor's children it never announced: orphans it had not swept yet, however
        // they hid (an announced one is killed with the rest).
        let unannounced = kin.recorded(&guardians).into_iter().filter(|(pid, _)| !pids.contains_key(pid));
        let announced = pids.iter().map(|(pid, (start, _pipes))| (*pid, *start));
        for (pid, start) in announced.chain(unannounced).collect::<Vec<_>>() {
            // What a killed cgroup holds is gone with it.
            if !cover.holds(pid, start, &cgroups) {
                proctree::kill_tree(pid, Some(start));
            }
        }
        // Those whose upstream died with the supervisor and left them to init.
        for (pid, start) in noted {
            proctree::kill_tree(pid, Some(start));
        }
        // Those still marked as descending from one of its upstreams, wherever they went (an
        // orphan the supervisor adopted but had not yet announced when it died).
        for process in proctree::snapshot() {
            if process.is_live() && proctree::marker_of(process.pid).is_some_and(|marker| marker.starts_with(&marked)) {
                proctree::kill_tree(process.pid, Some(process.start));
            }
        }
        for dir in &cgroups {
            if let Err(err) = cgroup::kill_and_remove(dir, CGROUP_DRAIN) {
                warn_cgroup(dir, &err);
            }
        }
    }
}

fn warn_cgroup(dir: &std::path::Path, err: &cgroup::Error) {
    let (dir, err) = (dir.display().to_string(), err.to_string());
    log::warn(
        "guardian: cannot kill or remove an upstream's cgroup",
        &[("cgroup", dir.as_str().into()), ("error", err.as_str().into())],
    );
}
