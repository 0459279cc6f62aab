//! Every upstream and helper the supervisor starts is started here: in its own process group,
//! pipes as asked, and nothing else inherited by accident. (The guardians, the `hangar-guardian`
//! binary started before any child, are started by `guardian.rs`.)
//!
//! This is the only module of the hangar allowed `unsafe`: a few system calls have to happen in
//! the child between fork and exec ([`PreExec`]), where only async-signal-safe calls are allowed.
//!
//! What keeps an upstream's descendants from outliving the hangar or its own stop (invariant 3):
//! - the supervisor is the child subreaper of them all (`reaper.rs`); upstreams are not, in
//!   either kill mode, so what an upstream orphans (a shell's background job, a double fork,
//!   `setsid`) is reparented to the supervisor, which reaps it when it exits: no zombie piles up
//!   below an upstream that never waits for children it did not start;
//! - each upstream is started with `HANGAR_UPSTREAM=<supervisor pid>-<its start>-<spawn number>`
//!   in its environment (`proctree::MARKER`), which all it starts inherits: without cgroups, that
//!   is how the supervisor tells which upstream an orphan it adopted belongs to
//!   (`lineage::owner_of`), keeps it while that upstream runs and kills it with it;
//! - where the supervisor's cgroup v2 is delegated, each upstream runs in a cgroup of its own
//!   (`cgroup.rs`), joined before exec, killed whole with `cgroup.kill`; an orphan belongs to the
//!   upstream whose cgroup it is in;
//! - `subtree.rs` kills an upstream's subtree (parent links, its adopted orphans, its cgroup) on
//!   stop, restart and exit;
//! - each child announces its pid to the guardians (`guardian.rs`) before exec, so a supervisor
//!   SIGKILLed at any point, even mid-spawn, leaves guardians that know every upstream;
//! - upstreams get no lethal parent-death signal while a guardian keeps watch: they must still
//!   be alive when the guardian walks their subtrees. Helpers (the API, the prober) and, without
//!   a guardian, upstreams too get `PR_SET_PDEATHSIG` = SIGKILL. That signal fires when the
//!   *thread* that forked exits, so spawns happen only on long-lived threads (never inside
//!   `spawn_blocking`);
//! - under systemd, `KillMode=control-group` kills whatever is left in the unit's cgroup.
//!
//! Every child drops the supervisor's ambient capabilities (`AmbientCapabilities=` under
//! systemd, for `sandbox.user`), which would otherwise survive its exec.
//!
//! Nothing but its stdio crosses a child's exec: every descriptor the supervisor makes is
//! close-on-exec (std and tokio make theirs so; the guardians' copies of each child's pipes are
//! `F_DUPFD_CLOEXEC`), and each child marks everything above 2 close-on-exec before exec
//! (`close_range`), so even a descriptor the supervisor inherited or a library leaked stays
//! behind. Without that, every upstream held the pipes of every upstream started before it:
//! a box could write calls into another's stdin, and a stop by closing stdin went unseen.
//!
//! A sandboxed upstream ([`Confinement`], built before the fork by `sandbox.rs`) then, in this
//! order: enters its namespaces (a network namespace of its own for `network: none`, a mount
//! namespace for its private `/tmp` and to hide the hangar's places) and mounts that `/tmp` and
//! an empty read-only tmpfs over the control socket's directory and the state directory, takes
//! its rlimits, sets `no_new_privs`, drops every capability it does not keep from its bounding
//! set, drops to its user (`setgroups`, `setgid`, `setuid`), restricts itself with its Landlock
//! ruleset (after the mounts: a Landlocked process may not mount), leaves only the capabilities
//! it keeps (`sandbox.capabilities`, none by default) in its effective, permitted and
//! inheritable sets (ambient, for another user than root), sets the parent-death signal again
//! (a change of credentials clears it), and installs its seccomp filter last, so the deny-list
//! cannot stop the steps before it. Without root the namespaces come with a user namespace,
//! entered after the change of user instead (inside a new user namespace no other user is
//! mapped), its own ids mapped to themselves, then the mounts.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStringExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::signal::Signal;
use tokio::process::{Child, Command};

use crate::{cgroup, children, guardian, kernel_limits, lineage, proctree};

/// The number of the next upstream spawn (its instance, named by its environment marker).
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// How the child's standard streams are wired.
pub enum Pipes {
    /// stdin, stdout and stderr piped to the supervisor (an upstream MCP server).
    All,
    /// stdout and stderr piped to the supervisor's log, no stdin (an upstream serving HTTP).
    Output,
    /// Inherit stdout and stderr, no stdin (a helper process such as the API).
    Inherit,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// An upstream MCP server: marked in its environment, in its own cgroup where there are cgroups.
    Upstream,
    /// The hangar's own helper (API, prober): killed with the supervisor by the kernel.
    Helper,
}

/// Starts an upstream `program args...` with extra `env`, in a new process group (see the
/// module's notes for everything else it sets up).
pub fn spawn<I, S>(program: &OsStr, args: I, env: &[(String, String)], pipes: Pipes) -> io::Result<Child>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    spawn_as(Role::Upstream, program, args, env, (pipes, None), None)
}

/// Starts an upstream as [`spawn`] does, confined as `confinement` says.
pub fn spawn_confined<I, S>(
    program: &OsStr,
    args: I,
    env: &[(String, String)],
    pipes: Pipes,
    confinement: Confinement,
) -> io::Result<Child>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    spawn_as(Role::Upstream, program, args, env, (pipes, None), Some(confinement))
}

/// What a sandboxed child does to itself between fork and exec, every part prepared before the
/// fork (`sandbox.rs`): only plain data and an open descriptor cross it.
#[derive(Default)]
pub struct Confinement {
    /// `CLONE_NEW*` flags to `unshare`; 0 for none. With `CLONE_NEWUSER` (the hangar is not
    /// root), after the change of user; else before it (as root, for CAP_SYS_ADMIN). Mounts
    /// (`private_tmp`) follow it.
    pub namespaces: libc::c_int,
    /// Resource limits (soft and hard alike). Memory and process limits are added here only as
    /// the fallback where the upstream has no cgroup.
    pub rlimits: Vec<(nix::sys::resource::Resource, u64)>,
    /// The memory and process limits its cgroups hold (`kernel_limits.rs`), set up before the fork.
    pub limits: kernel_limits::Limits,
    /// A Landlock ruleset to restrict itself with.
    pub landlock: Option<std::os::fd::OwnedFd>,
    /// The user and group to become, with no supplementary groups.
    pub identity: Option<Identity>,
    /// A seccomp BPF program, installed last.
    pub seccomp: Option<Vec<libc::sock_filter>>,
    /// With `CLONE_NEWUSER`: its own ids mapped to themselves, so it is still itself inside.
    pub id_map: Option<IdMap>,
    /// With `CLONE_NEWNS`: its own `/tmp`.
    pub private_tmp: Option<PrivateTmp>,
    /// With `CLONE_NEWNS`: directories covered by an empty read-only tmpfs (the control
    /// socket's, the state directory), after the private `/tmp`.
    pub hidden: Vec<CString>,
    /// The capabilities it keeps; every other one is dropped before exec.
    pub capabilities: Option<Capabilities>,
}

/// What of the capability sets a box keeps (`sandbox.capabilities`).
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    /// The capabilities kept, a bit per number.
    pub keep: u64,
    /// The highest capability number this kernel knows (`/proc/sys/kernel/cap_last_cap`).
    pub last: u32,
}

/// The lines written to `/proc/self/uid_map` and `gid_map` (`"ID ID 1\n"`).
pub struct IdMap {
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
}

/// A private directory bound onto `/tmp` in a mount namespace of its own, with what of the
/// host's `/tmp` its rules grant bound into it first (mount points made before the fork).
pub struct PrivateTmp {
    /// Parents before children.
    pub binds: Vec<Bind>,
    /// The directory that becomes `/tmp`.
    pub tmp: CString,
}

pub struct Bind {
    pub source: CString,
    pub target: CString,
    /// Remount read-only, keeping these flags of the source's mount (`MS_NOSUID`, `MS_NODEV`,
    /// `MS_NOEXEC`: a user namespace may not clear them).
    pub read_only: Option<libc::c_ulong>,
}

#[derive(Debug, Clone, Copy)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
}

/// Starts one of the hangar's helpers (its stdout and stderr inherited); `stdin`, if given, is
/// its standard input (the API's listening socket, `--api-listener-stdin`), else none.
pub fn spawn_helper<I, S>(program: &OsStr, args: I, stdin: Option<std::os::fd::OwnedFd>) -> io::Result<Child>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    spawn_as(Role::Helper, program, args, &[], (Pipes::Inherit, stdin), None)
}

fn spawn_as<I, S>(
    role: Role,
    program: &OsStr,
    args: I,
    env: &[(String, String)],
    (pipes, stdin): (Pipes, Option<std::os::fd::OwnedFd>),
    confinement: Option<Confinement>,
) -> io::Result<Child>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(program);
    // Before the configured `env`, which may set such a name on purpose.
    for withheld in crate::withheld::names() {
        command.env_remove(withheld);
    }
    command.args(args).envs(env.iter().map(|(k, v)| (k, v))).process_group(0).kill_on_drop(false);
    // systemd's handshakes are the supervisor's own: no child may answer them in its name.
    for inherited in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"] {
        command.env_remove(inherited);
    }
    match pipes {
        Pipes::All => command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()),
        Pipes::Output => command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()),
        Pipes::Inherit => command.stdin(Stdio::null()).stdout(Stdio::inherit()).stderr(Stdio::inherit()),
    };
    if let Some(stdin) = stdin {
        command.stdin(Stdio::from(stdin));
    }
    let instance = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
    if role == Role::Upstream {
        // Set last, so a configured `env` cannot override it. Not a secret: a spawn number.
        command.env(proctree::MARKER, lineage::marker(instance));
    }
    // Its cgroup v2 (kill mode) and the groups holding its limits (`kernel_limits.rs`).
    let groups = match role {
        Role::Upstream => kernel_limits::create(&confinement.as_ref().map(|c| c.limits).unwrap_or_default())?,
        Role::Helper => kernel_limits::Groups::default(),
    };
    for dir in &groups.dirs {
        // Before anything runs in it: a supervisor killed from here on leaves it to the guardian.
        guardian::watch_cgroup(dir);
    }
    let cgroup_joins = groups
        .dirs
        .iter()
        .map(|dir| CString::new(cgroup::join_file(dir).into_os_string().into_vec()).map_err(io::Error::other))
        .collect::<io::Result<Vec<_>>>();
    let cgroup_joins = match cgroup_joins {
        Ok(procs) => procs,
        Err(err) => {
            remove_groups(&groups.dirs);
            return Err(err);
        }
    };
    // Registered under the lock the orphan sweep takes, so the new child is never swept; the
    // guardian's pipe held still so the child can write to it before exec.
    let mut own = children::own();
    let announce = guardian::announce();
    let setup = PreExec {
        supervisor: std::process::id(),
        cgroup_joins,
        guardians: announce.fds(),
        lethal_parent_death: role == Role::Helper || !guardian::running(),
        confinement,
    };
    setup.install(&mut command);
    let spawned = command.spawn();
    let pid = spawned.as_ref().ok().and_then(Child::id);
    if let Some(pid) = pid {
        own.insert(pid);
        if role == Role::Upstream {
            // Before the sweep can run again: what it orphans from its first instant is its own.
            lineage::register(pid, groups.dirs.clone(), instance);
        }
    }
    drop(announce);
    drop(own);
    match (spawned, pid) {
        (Ok(child), Some(pid)) => {
            guardian::watch(pid, pipe_copies(&child));
            Ok(child)
        }
        (spawned, _) => {
            remove_groups(&groups.dirs);
            spawned
        }
    }
}

/// Empties and removes the groups of a spawn that failed.
fn remove_groups(dirs: &[std::path::PathBuf]) {
    for dir in dirs {
        cgroup::kill_and_remove(dir, std::time::Duration::from_secs(1));
        guardian::forget_cgroup(dir);
    }
}

/// Kills whatever is left of a reaped helper's process group and tells the guardian it is gone.
pub fn reap_group(pgid: u32) {
    proctree::signal_group(pgid, Signal::SIGKILL);
    guardian::forget(pgid);
    children::disown(pgid);
}

/// Copies of the supervisor's ends of a child's pipes, for the guardian to hold. Close-on-exec
/// (`F_DUPFD_CLOEXEC`), like every descriptor the supervisor makes: a copy that survived exec
/// would hand this child's stdin and output to every child started after it.
fn pipe_copies(child: &Child) -> Vec<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd;
    let stdin = child.stdin.as_ref().map(|pipe| pipe.as_fd().try_clone_to_owned());
    let stdout = child.stdout.as_ref().map(|pipe| pipe.as_fd().try_clone_to_owned());
    let stderr = child.stderr.as_ref().map(|pipe| pipe.as_fd().try_clone_to_owned());
    [stdin, stdout, stderr].into_iter().flatten().filter_map(Result::ok).collect()
}

/// What the child does to itself between fork and exec.
struct PreExec {
    /// The supervisor's pid: the child must still be its child once set up.
    supervisor: u32,
    /// The file each of its groups is joined through (its cgroup v2's `cgroup.procs`, the v1
    /// groups' `tasks`: `cgroup::join_file`), before exec.
    cgroup_joins: Vec<CString>,
    /// The guardians' sockets, to announce `+PID` on.
    guardians: [Option<RawFd>; guardian::GUARDIANS],
    /// SIGKILL when the supervisor's forking thread dies.
    lethal_parent_death: bool,
    /// The sandbox, for a sandboxed upstream.
    confinement: Option<Confinement>,
}

impl PreExec {
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    fn install(self, command: &mut Command) {
        // SAFETY: the closure runs in the forked child before exec and calls only
        // async-signal-safe functions (prctl, open, write, close, send, getpid, getppid,
        // close_range, and for a sandbox unshare, mount, setrlimit, setgroups, setgid, setuid,
        // capget, capset, geteuid and the raw landlock and seccomp system calls; getrlimit and
        // fcntl on a kernel without close_range) on memory prepared before the fork; it
        // allocates nothing and takes no locks.
        unsafe {
            command.pre_exec(move || {
                // Limits hook: join every group (cgroup v2, v1 memory and pids) before anything of
                // the upstream runs; "0" moves the writer itself. Forked, the child is one thread,
                // so a v1 group's `tasks` (one thread) moves the whole process, without the global
                // lock (and its RCU grace period, ~10 ms) a write to `cgroup.procs` takes.
                for join in &self.cgroup_joins {
                    write_file(join, b"0")?;
                }
                // The supervisor's ambient capabilities must not reach any child's program.
                let clear = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
                if libc::prctl(libc::PR_CAP_AMBIENT, clear, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                let (line, len) = announcement(libc::getpid() as u32);
                for fd in self.guardians.iter().flatten() {
                    // MSG_NOSIGNAL: a guardian that just died must not take this child with it;
                    // its replacement gets the pid from the supervisor.
                    libc::send(*fd, line.as_ptr().cast(), len, libc::MSG_NOSIGNAL);
                }
                if let Some(confinement) = &self.confinement {
                    confinement.apply()?;
                }
                // After any change of identity, which clears it.
                if self.lethal_parent_death
                    && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // The supervisor may have died since the fork: then nobody would stop this child.
                if libc::getppid() as u32 != self.supervisor {
                    // A raw errno: it allocates nothing, and only the errno crosses back to the
                    // parent anyway.
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                // Nothing but its stdio crosses exec, whatever this process holds: after the last
                // use of the guardians' sockets and the Landlock ruleset. Close-on-exec, not
                // closed: std reports a failed exec through a close-on-exec pipe of its own.
                cloexec_above_stdio();
                if let Some(program) = self.confinement.as_ref().and_then(|c| c.seccomp.as_ref()) {
                    // Last: nothing after it but exec.
                    let filter = libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr().cast_mut() };
                    let flags: libc::c_uint = 0;
                    if libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, &raw const filter) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn install(self, _command: &mut Command) {}
}

impl Confinement {
    /// Namespaces and the private `/tmp`, rlimits, no_new_privs, the user, Landlock: in the
    /// child, before exec (the seccomp filter is installed by the caller, last). Only system
    /// calls on memory prepared before the fork (no allocation, no locks).
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    fn apply(&self) -> io::Result<()> {
        let unshare_late = self.namespaces & libc::CLONE_NEWUSER != 0;
        // SAFETY: called only in the forked child before exec (PreExec::install); each call is a
        // plain system call on values owned by `self`, which was built before the fork.
        unsafe {
            // As root: before the change of user, which drops CAP_SYS_ADMIN.
            if self.namespaces != 0 && !unshare_late {
                check(libc::unshare(self.namespaces).into())?;
                self.mount_private_tmp()?;
                self.hide()?;
            }
            for (resource, value) in &self.rlimits {
                nix::sys::resource::setrlimit(*resource, *value, *value).map_err(io::Error::from)?;
            }
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into())?;
            if let Some(caps) = &self.capabilities {
                // While CAP_SETPCAP is still effective (a change of user clears the effective set).
                drop_bounding(caps);
                // A capability it keeps must survive the change of user, to be made ambient.
                if self.identity.is_some() && caps.keep != 0 {
                    check(libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0).into())?;
                }
            }
            if let Some(Identity { uid, gid }) = self.identity {
                check(libc::setgroups(0, std::ptr::null()).into())?;
                check(libc::setgid(gid).into())?;
                check(libc::setuid(uid).into())?;
            }
            // Without root the user namespace gives the right to the others; after the change of
            // user, since inside it no other user is mapped.
            if unshare_late {
                check(libc::unshare(self.namespaces).into())?;
                if let Some(map) = &self.id_map {
                    // A change of user made /proc/self root's; exec makes it dumpable again anyway.
                    check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0).into())?;
                    write_file(c"/proc/self/setgroups", b"deny")?;
                    write_file(c"/proc/self/uid_map", &map.uid_map)?;
                    write_file(c"/proc/self/gid_map", &map.gid_map)?;
                }
                self.mount_private_tmp()?;
                self.hide()?;
            }
            // After the mounts: a Landlocked process may not mount.
            if let Some(ruleset) = &self.landlock {
                use std::os::fd::AsRawFd;
                let flags: libc::c_uint = 0;
                check(libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), flags))?;
            }
            if let Some(caps) = &self.capabilities {
                // In a user namespace of its own it holds CAP_SETPCAP there only now.
                if unshare_late {
                    drop_bounding(caps);
                }
                keep_only(caps)?;
            }
        }
        Ok(())
    }

    /// Covers each of `hidden` with an empty, read-only tmpfs in its mount namespace. One it
    /// cannot reach (ENOENT: not there, or under its private `/tmp`; EACCES: not passable for
    /// it) is hidden already.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    fn hide(&self) -> io::Result<()> {
        if self.hidden.is_empty() {
            return Ok(());
        }
        let none = std::ptr::null();
        // SAFETY: as `apply`. Nothing mounted here may reach the host's mount table.
        check(unsafe { libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_SLAVE, none.cast()) }.into())?;
        let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        for path in &self.hidden {
            // SAFETY: as `apply`: a plain system call on C strings built before the fork.
            let mounted = unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    path.as_ptr(),
                    c"tmpfs".as_ptr(),
                    flags,
                    c"mode=0555,size=4k,nr_inodes=2".as_ptr().cast(),
                )
            };
            if mounted != 0 {
                let error = io::Error::last_os_error();
                if !matches!(error.raw_os_error(), Some(libc::ENOENT | libc::EACCES)) {
                    return Err(error);
                }
            }
        }
        Ok(())
    }

    /// Binds what stays visible into the private tmp, then it onto `/tmp` (recursively, so
    /// those binds come along), with nothing propagating back to the host.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    fn mount_private_tmp(&self) -> io::Result<()> {
        let Some(private) = &self.private_tmp else { return Ok(()) };
        let none = std::ptr::null();
        // SAFETY: as `apply`: plain system calls on C strings built before the fork.
        unsafe {
            // Nothing mounted here may reach the host, where removing the private directory
            // would then reach into what is bound in it.
            check(libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_SLAVE, none.cast()).into())?;
            for bind in &private.binds {
                let (source, target) = (bind.source.as_ptr(), bind.target.as_ptr());
                check(libc::mount(source, target, none, libc::MS_BIND | libc::MS_REC, none.cast()).into())?;
                if let Some(kept) = bind.read_only {
                    let flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | kept;
                    check(libc::mount(none, target, none, flags, none.cast()).into())?;
                }
            }
            let flags = libc::MS_BIND | libc::MS_REC;
            check(libc::mount(private.tmp.as_ptr(), c"/tmp".as_ptr(), none, flags, none.cast()).into())?;
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    fn apply(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Drops every capability but the kept ones from the bounding set, so exec can give back none
/// of them (root's program gets its bounding set). Without CAP_SETPCAP (a hangar without root,
/// before its user namespace) the kernel refuses, and there is nothing to give back anyway.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn drop_bounding(caps: &Capabilities) {
    for cap in 0..=caps.last.min(63) {
        if caps.keep & (1 << cap) == 0 {
            // SAFETY: prctl on plain integers, async-signal-safe.
            if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
                return;
            }
        }
    }
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`; version 3 takes two (capabilities 0-31 and 32-63).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Leaves only the kept capabilities in its effective, permitted and inheritable sets, and
/// (another user than root) raises them ambient, so they survive exec; the rest are gone for
/// good. What it does not hold it cannot keep (`sandbox.rs` refuses such a start first).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn keep_only(caps: &Capabilities) -> io::Result<()> {
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = CapHeader { version: VERSION_3, pid: 0 };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget and capset on a header and two data structs alive for the calls; prctl on
    // plain integers; all async-signal-safe.
    unsafe {
        check(libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()))?;
        let permitted = u64::from(data[0].permitted) | u64::from(data[1].permitted) << 32;
        let kept = caps.keep & permitted;
        for (half, set) in data.iter_mut().enumerate() {
            let bits = (kept >> (32 * half)) as u32;
            *set = CapData { effective: bits, permitted: bits, inheritable: bits };
        }
        check(libc::syscall(libc::SYS_capset, &raw const header, data.as_ptr()))?;
        if kept != 0 && libc::geteuid() != 0 {
            for cap in (0..64).filter(|cap| kept & (1 << cap) != 0) {
                let raise = libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong;
                check(libc::prctl(libc::PR_CAP_AMBIENT, raise, cap as libc::c_ulong, 0, 0).into())?;
            }
        }
    }
    Ok(())
}

/// Marks every descriptor above 2 close-on-exec (`close_range`, Linux 5.11; on an older kernel
/// one `fcntl` each, up to the open-file limit).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn cloexec_above_stdio() {
    // SAFETY: close_range, getrlimit and fcntl on plain integers and a stack struct;
    // async-signal-safe.
    unsafe {
        let flags = libc::CLOSE_RANGE_CLOEXEC as libc::c_long;
        if libc::syscall(libc::SYS_close_range, 3 as libc::c_long, libc::c_long::from(u32::MAX), flags) == 0 {
            return;
        }
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) == 0 {
            limit.rlim_cur.min(1 << 20)
        } else {
            1 << 16
        };
        for fd in 3..top as libc::c_int {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn cloexec_above_stdio() {}

fn check(result: libc::c_long) -> io::Result<()> {
    if result == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Writes `bytes` to the file at `path` in one `write` (a cgroup's join file, an id map).
#[allow(unsafe_code)]
fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open, write and close on a C string and a slice alive for the call; async-signal-safe.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written != bytes.len() as isize {
            return Err(error);
        }
    }
    Ok(())
}

/// `+PID` in a stack buffer (no allocation between fork and exec): the buffer and its length.
fn announcement(pid: u32) -> ([u8; 11], usize) {
    let mut digits = [0u8; 10];
    let mut n = pid;
    let mut count = 0;
    loop {
        digits[count] = b'0' + (n % 10) as u8;
        count += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut line = [0u8; 11];
    line[0] = b'+';
    for i in 0..count {
        line[1 + i] = digits[count - 1 - i];
    }
    (line, count + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_announcement_is_a_plus_and_the_pid() {
        for pid in [0, 7, 42, 4_194_304, u32::MAX] {
            let (line, len) = announcement(pid);
            assert_eq!(std::str::from_utf8(&line[..len]).unwrap(), format!("+{pid}"));
        }
    }
}
