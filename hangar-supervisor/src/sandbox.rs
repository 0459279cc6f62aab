//! Everything a sandboxed spawn needs, built before the fork (`spawn.rs` only applies it): the
//! program resolved through `PATH`, the Landlock ruleset, the seccomp program, the user's ids,
//! the private `$HOME` and `/tmp` (its mount points made), the namespaces to enter and the
//! rlimits, the capabilities it keeps, and the hangar's places to hide. Also the judgement
//! of what the kernel can enforce: with `require: true` (the default) anything missing refuses
//! the start in the hangar's words; with `require: false` the server runs weaker and its
//! details say what is missing (`SandboxInEffect::fallbacks`).
//!
//! A box never reaches the hangar itself:
//! - the control socket's directory and the state directory (given at start, [`protect`]) are
//!   covered by an empty read-only mount in its mount namespace (Landlock does not govern a
//!   Unix socket's `connect`, nor `stat`); every box of a root hangar gets a mount namespace,
//!   without root where user namespaces are allowed. A config whose `filesystem` grants cover
//!   either, or lie inside the state directory, is refused at start and at reload
//!   ([`check_grants`]); so is one covering a credential file or `$CREDENTIALS_DIRECTORY`;
//! - the seccomp filter answers EPERM to `prlimit64`, `get/setpriority`, `sched_set*` and
//!   `ioprio_*` aimed at any process but itself ([`OWN_PROCESS_ONLY`]), and Landlock's scopes
//!   (ABI 6) keep its signals inside its sandbox; without them its details say what is left;
//! - it keeps no capability but those `sandbox.capabilities` names.
//!
//! No `unsafe` here: what runs between fork and exec is in `spawn.rs`.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use hangar_core::sandbox::{Network, Sandbox, SandboxInEffect, Syscalls};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, NetPort, RestrictSelf,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, path_beneath_rules,
};
use nix::sys::resource::Resource;

use crate::kernel_limits;
use crate::spawn::{Bind, Capabilities, Confinement, IdMap, Identity, PrivateTmp};

/// Caps the Landlock ABI the hangar believes the kernel has (never raises it). For tests that
/// show how a kernel lacking a feature is handled; unset in production.
pub const TEST_LANDLOCK_ABI_ENV: &str = "HANGAR_TEST_LANDLOCK_ABI_MAX";

/// Makes the hangar believe unprivileged user namespaces are forbidden, as their sysctls can
/// say. For tests; unset in production.
pub const TEST_NO_USER_NAMESPACES_ENV: &str = "HANGAR_TEST_NO_USER_NAMESPACES";

/// Devices every program expects to open.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/full"];

/// Programs that run a script named by their first argument: that script's directory is
/// readable too, like the program's own.
const INTERPRETERS: &[&str] =
    &["node", "nodejs", "python", "python3", "bash", "sh", "dash", "perl", "ruby", "deno", "bun"];

/// A start of a sandboxed program, prepared.
pub struct Prepared {
    /// The program as found through `PATH`, absolute.
    pub program: PathBuf,
    /// `HOME` and `TMPDIR` when the file system is private.
    pub env: Vec<(String, String)>,
    /// Said with a failed spawn: what its namespaces need from the system.
    pub namespaces_need: Option<String>,
    /// Said with a spawn the kernel refused to run (EACCES) under its Landlock rules: what
    /// those rules let it read.
    pub landlock_refusal: Option<String>,
    pub confinement: Confinement,
    pub in_effect: SandboxInEffect,
    /// Removed when the last holder lets go (the process's record).
    pub private_dir: Option<PrivateDir>,
}

/// Prepares `command` to run in `sandbox`, or says in the hangar's words why it cannot; `path`
/// is the `PATH` the config gives the child, if it gives one.
pub fn prepare(id: &str, sandbox: &Sandbox, command: &[String], path: Option<&str>) -> Result<Prepared, String> {
    let (program, args) = command.split_first().ok_or("no command")?;
    let path_var = path.map(str::to_owned).or_else(|| std::env::var("PATH").ok()).unwrap_or_default();
    let resolved = resolve(program, &path_var).ok_or_else(|| format!("`{program}` was not found in PATH"))?;
    let mut in_effect = SandboxInEffect::default();
    let mut confinement = Confinement::default();

    let identity = match &sandbox.user {
        Some(user) => Some(identity(user, sandbox.filesystem.private)?),
        None => None,
    };
    if let Some((who, ids)) = &identity {
        in_effect.enforced.push(format!("user: {who}, no supplementary groups"));
        in_effect.user = Some(who.clone());
        confinement.identity = Some(*ids);
    }
    let ids = identity.as_ref().map(|(_, ids)| *ids);
    let own = command_paths(&resolved, args, &path_var);

    let private_dir = if sandbox.filesystem.private { Some(PrivateDir::create(id)?) } else { None };
    let mut child_env = Vec::new();
    let mut private = Vec::new();
    if let Some(dir) = &private_dir {
        confinement.private_tmp = private_tmp(dir, sandbox, &own, &mut in_effect)?;
        let tmpdir = if confinement.private_tmp.is_some() { "/tmp".into() } else { dir.tmp().display().to_string() };
        child_env.push(("HOME".to_owned(), dir.home().display().to_string()));
        child_env.push(("TMPDIR".to_owned(), tmpdir));
        in_effect.home = Some(dir.home());
        private.push(dir.path());
        if confinement.private_tmp.is_some() {
            // Inside, /tmp/x is reached through this directory (the root of its mount), never
            // through the private directory above it.
            private.push(dir.tmp());
        }
    }

    let abi = believed_landlock_abi();
    in_effect.landlock_abi = (abi > 0).then_some(abi as u32);
    confinement.landlock = landlock_ruleset(sandbox, abi, &own, &private, &mut in_effect)?;
    // Only now, after its mount points are made in it and its Landlock rules have opened it:
    // once the sandbox's user's (0700), a hangar without root cannot reach inside, and a rule
    // whose path cannot be opened would be left out.
    if let Some(dir) = &private_dir {
        dir.give_to(ids)?;
    }

    let namespaces_need = namespaces(sandbox, ids, &mut confinement, &mut in_effect);
    let landlock_refusal = confinement.landlock.is_some().then(|| landlock_refusal(sandbox));
    confinement.capabilities = Some(capabilities(sandbox, &mut in_effect)?);

    for (key, resource, value) in [
        ("max_open_files", Resource::RLIMIT_NOFILE, sandbox.max_open_files),
        ("cpu_seconds", Resource::RLIMIT_CPU, sandbox.cpu_seconds),
    ] {
        if let Some(value) = value {
            confinement.rlimits.push((resource, value));
            in_effect.enforced.push(format!("{key}: {value} ({resource:?})"));
        }
    }
    // k-limits: memory_mb and max_processes are held by the upstream's cgroup (v2, else v1,
    // created by `spawn.rs` from `confinement.limits`); where there is none, their RLIMIT_AS /
    // RLIMIT_NPROC fallback goes into `confinement.rlimits`, and `in_effect` says which.
    confinement.limits = kernel_limits::Limits::from(sandbox);
    confinement.rlimits.extend(kernel_limits::fallback_rlimits(&confinement.limits));
    let limits = kernel_limits::report(&confinement.limits);
    in_effect.enforced.extend(limits.enforced);
    in_effect.fallbacks.extend(limits.fallbacks);

    if sandbox.syscalls == Syscalls::Default {
        match seccomp_program() {
            Ok(program) => {
                confinement.seccomp = Some(program.clone());
                in_effect.enforced.push(format!(
                    "syscalls: {} dangerous system calls answered EPERM (seccomp)",
                    DENIED_SYSCALLS.len()
                ));
                in_effect.enforced.push(format!(
                    "other processes: {} answered EPERM unless aimed at itself (seccomp), so it cannot re-limit, renice or reschedule the supervisor or anyone else",
                    OWN_PROCESS_ONLY.iter().map(|(name, _, _)| *name).collect::<Vec<_>>().join(", ")
                ));
            }
            Err(why) if sandbox.require => return Err(format!("its `syscalls` filter cannot be built: {why}")),
            Err(why) => in_effect.fallbacks.push(format!("syscalls: not filtered ({why}; require: false)")),
        }
    }
    if confinement.seccomp.is_none() {
        in_effect.fallbacks.push(
            "other processes: not fenced without the `syscalls` filter: it may re-limit, renice and reschedule any process its user may, the supervisor's included"
                .into(),
        );
    }
    in_effect.enforced.push("no_new_privs: set (no setuid or file capabilities gain privileges)".into());
    Ok(Prepared {
        program: resolved,
        env: child_env,
        namespaces_need,
        landlock_refusal,
        confinement,
        in_effect,
        private_dir,
    })
}

/// What a spawn the kernel refused to run (EACCES) under Landlock rules says: the program's
/// own directories are always readable, so it is its interpreter or loader, a library, or a
/// directory on the way that `filesystem.read` leaves out.
fn landlock_refusal(sandbox: &Sandbox) -> String {
    let read: Vec<String> = sandbox.filesystem.read.iter().map(|path| path.display().to_string()).collect();
    format!(
        "the kernel refused to run it under its Landlock rules: its interpreter or dynamic loader, or a library it needs, is not readable under `filesystem.read` ({}); grant where they live, usually /usr and /lib",
        if read.is_empty() { "nothing".to_owned() } else { read.join(", ") }
    )
}

/// The capabilities it keeps (`sandbox.capabilities`; none by default), checked against what
/// the hangar holds: it cannot give what it does not have.
fn capabilities(sandbox: &Sandbox, in_effect: &mut SandboxInEffect) -> Result<Capabilities, String> {
    let keep = sandbox.capability_mask();
    let held = effective_capabilities();
    let missing: Vec<&str> = sandbox
        .capabilities
        .iter()
        .filter(|name| hangar_core::sandbox::capability_number(name).is_some_and(|n| held & (1 << n) == 0))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "its sandbox keeps {}, which the hangar does not hold itself (run it as root, or give it them: AmbientCapabilities= under systemd)",
            missing.join(", ")
        ));
    }
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
        .unwrap_or(hangar_core::sandbox::CAPABILITIES.len() as u32 - 1);
    let kept = if sandbox.capabilities.is_empty() { "none".to_owned() } else { sandbox.capabilities.join(", ") };
    in_effect.enforced.push(format!(
        "capabilities: {kept} (every other one dropped from its bounding, ambient, inheritable, permitted and effective sets before exec)"
    ));
    Ok(Capabilities { keep, last })
}

/// The namespaces it enters (a network namespace for `network: none`, a mount namespace for its
/// private /tmp); without root, in a user namespace of its own with its own ids mapped in it (so it
/// is still itself, not the overflow uid). Gives what they need from the system, to be said if
/// the spawn fails.
fn namespaces(
    sandbox: &Sandbox,
    ids: Option<Identity>,
    confinement: &mut Confinement,
    in_effect: &mut SandboxInEffect,
) -> Option<String> {
    let mut needing = Vec::new();
    if sandbox.network == Network::None {
        confinement.namespaces = libc::CLONE_NEWNET;
        needing.push("`network: none`");
        in_effect.enforced.push("network: none (a network namespace of its own, with no interface up)".into());
    }
    if confinement.private_tmp.is_some() {
        confinement.namespaces |= libc::CLONE_NEWNS;
        needing.push("its private /tmp");
    }
    let root = nix::unistd::geteuid().is_root();
    // The hangar's own places: under its private /tmp they are not there at all; elsewhere an
    // empty mount covers each, in a mount namespace of its own (without root, in a user
    // namespace, where the system allows one).
    let private_tmp = confinement.private_tmp.is_some();
    let places = protected(None);
    let to_cover: Vec<&PathBuf> = places
        .iter()
        .map(|(_, place, _)| place)
        .filter(|place| !(private_tmp && place.starts_with("/tmp")) && place.is_dir() && *place != Path::new("/"))
        .collect();
    // Not where this box would need a namespace for nothing else, and cannot have one: a
    // container's root often lacks CAP_SYS_ADMIN (21), which a box asking for none never needed.
    let forbidden = match (root, confinement.namespaces != 0) {
        (_, true) => None,
        (true, false) => (effective_capabilities() & (1 << 21) == 0)
            .then(|| "the hangar runs as root without CAP_SYS_ADMIN (as in a container)".to_owned()),
        (false, false) => {
            user_namespaces_forbidden().map(|why| format!("without root that takes a user namespace, and {why}"))
        }
    };
    match forbidden {
        _ if places.is_empty() => {}
        None => {
            if !to_cover.is_empty() {
                confinement.namespaces |= libc::CLONE_NEWNS;
                confinement.hidden = to_cover.iter().filter_map(|place| c_path(place).ok()).collect();
                needing.push("hiding the hangar's control socket, state_dir and credentials key");
            }
            in_effect.enforced.push(
                "the control socket's directory, state_dir and the stored credentials' key: out of its reach (an empty read-only mount over each in its mount namespace, or its private /tmp)"
                    .into(),
            );
        }
        Some(why) => in_effect.fallbacks.push(format!(
            "the control socket's directory, state_dir and the stored credentials' key: not hidden (it would take a mount namespace, and {why}); Landlock still keeps their contents from it"
        )),
    }
    if needing.is_empty() {
        return None;
    }
    if !root {
        // A user namespace gives the right to make the others.
        confinement.namespaces |= libc::CLONE_NEWUSER;
        let uid = ids.map_or(nix::unistd::geteuid().as_raw(), |ids| ids.uid);
        let gid = ids.map_or(nix::unistd::getegid().as_raw(), |ids| ids.gid);
        confinement.id_map = Some(IdMap {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        });
    }
    let takes = if root {
        "takes CAP_SYS_ADMIN"
    } else {
        "without root takes an unprivileged user namespace, which some systems and container runtimes forbid"
    };
    let needs = if needing.len() > 1 { "each need" } else { "needs" };
    Some(format!("{} {needs} a namespace of its own, which {takes}", needing.join(" and ")))
}

/// The hangar's own places no box may reach, each with what it is and whether a grant inside
/// it is refused too: the control socket's directory (a grant beside the socket is harmless:
/// a box is kept out of the directory anyway), the state directory (everything in it is the
/// hangar's) and the directory of `credentials.key_file` (the key of every stored credential),
/// as given at start (`main.rs`).
static PROTECTED: OnceLock<Vec<(&'static str, PathBuf, bool)>> = OnceLock::new();

/// Records the control socket's path and the state directory (at start, before any spawn):
/// every box's `filesystem` grants are checked against them, and each box is kept out of them.
pub fn protect(socket: &Path, state_dir: &Path, key_file: Option<&Path>) {
    let socket_dir = socket.parent().unwrap_or(Path::new("/"));
    let mut places = vec![
        ("the control socket's directory", resolve_path(socket_dir), false),
        ("state_dir", resolve_path(state_dir), true),
    ];
    if let Some(key_dir) = key_file.and_then(Path::parent) {
        places.push(("credentials.key_file's directory", resolve_path(key_dir), true));
    }
    let _ = PROTECTED.set(places);
}

/// The protected places, plus a (reloaded) config's `state_dir` when it names another.
fn protected(state_dir: Option<&Path>) -> Vec<(&'static str, PathBuf, bool)> {
    let mut places = PROTECTED.get().cloned().unwrap_or_default();
    if let Some(dir) = state_dir.map(resolve_path)
        && !places.iter().any(|(_, place, _)| *place == dir)
    {
        places.push(("state_dir", dir, true));
    }
    places
}

/// Refuses a config whose sandboxes' grants would open the control socket's directory, the
/// state directory or a credential file to a box (at start: exit 78; on reload: the reload is
/// refused).
pub fn check_grants(config: &hangar_core::config::Config) -> Result<(), hangar_core::config::KeyError> {
    let mut places = protected(config.state_dir.as_deref());
    places.extend(credential_places(config));
    config.check_grants(&places, resolve_path)
}

/// Where the config's secrets are read from: each credential file, each OAuth client's
/// `secret_file`, and the whole of `$CREDENTIALS_DIRECTORY`. A box reaches none of them (a server
/// gets its own credential in its environment, never by reading the file), so no grant may cover
/// them.
fn credential_places(config: &hangar_core::config::Config) -> Vec<(&'static str, PathBuf, bool)> {
    let directory = hangar_core::credential::credentials_directory();
    let mut places: Vec<(&'static str, PathBuf, bool)> = config
        .mcp_servers
        .values()
        .flat_map(|server| server.secret_paths(directory.as_deref()))
        .map(|path| ("a credential file", resolve_path(&path), false))
        .collect();
    places.extend(directory.map(|dir| ("$CREDENTIALS_DIRECTORY", resolve_path(&dir), true)));
    places
}

/// A path as the kernel reaches it: made absolute, its symbolic links followed as far as it
/// exists (a place not made yet, such as a state directory, keeps the rest as written).
fn resolve_path(path: &Path) -> PathBuf {
    let absolute = absolute(path);
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(real, |path, part| path.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// The kernel's Landlock ABI (0: none), capped by [`TEST_LANDLOCK_ABI_ENV`]. Probed once,
/// without restricting the supervisor.
fn believed_landlock_abi() -> i32 {
    static KERNEL: OnceLock<i32> = OnceLock::new();
    let kernel = *KERNEL.get_or_init(|| match RestrictSelf::default().no_new_privs(false).apply() {
        Ok(status) => match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => effective_abi as i32,
            _ => 0,
        },
        Err(_) => 0,
    });
    let cap = std::env::var(TEST_LANDLOCK_ABI_ENV).ok().and_then(|v| v.parse::<i32>().ok());
    cap.map_or(kernel, |cap| kernel.min(cap.max(0)))
}

/// The Landlock ruleset for the file system and TCP ports; `None` when Landlock is missing
/// and `require: false` allows running without it.
fn landlock_ruleset(
    sandbox: &Sandbox,
    abi_number: i32,
    own: &[PathBuf],
    private: &[PathBuf],
    in_effect: &mut SandboxInEffect,
) -> Result<Option<OwnedFd>, String> {
    let ports = match &sandbox.network {
        Network::Ports { tcp_connect, tcp_bind } => Some((tcp_connect, tcp_bind)),
        _ => None,
    };
    if abi_number < 1 {
        let missing = "this kernel offers no Landlock (not built in, or not enabled at boot: `lsm=...,landlock`)";
        if sandbox.require {
            return Err(format!(
                "its sandbox's `filesystem` rules need Landlock, and {missing}; set `sandbox.require: false` to run it without them"
            ));
        }
        in_effect.fallbacks.push(format!("filesystem: not restricted: {missing} (require: false)"));
        in_effect.fallbacks.push(unscoped_signals(sandbox, abi_number));
        if ports.is_some() {
            in_effect.fallbacks.push("network: TCP ports not restricted: no Landlock (require: false)".into());
        }
        return Ok(None);
    }
    let abi = ABI::from(abi_number);
    let net_rules = ports.is_some() && abi_number >= 4;
    if ports.is_some() && !net_rules {
        let missing = format!("TCP port rules need Landlock ABI 4, and this kernel offers ABI {abi_number}");
        if sandbox.require {
            return Err(format!(
                "its sandbox's `network: {{tcp_connect, tcp_bind}}` cannot be enforced: {missing}; set `sandbox.require: false` to run it without them"
            ));
        }
        in_effect.fallbacks.push(format!("network: TCP ports not restricted: {missing} (require: false)"));
    }
    let failed = |err: landlock::RulesetError| format!("its Landlock rules could not be built: {err}");
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    ruleset = ruleset.handle_access(AccessFs::from_all(abi)).map_err(failed)?;
    if net_rules {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp).map_err(failed)?;
    }
    let scoped = abi_number >= 6;
    if scoped {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(failed)?;
    }
    let read_only = AccessFs::from_read(abi);
    let read_write = AccessFs::from_all(abi);
    let devices: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::WriteFile;
    let writable: Vec<PathBuf> = sandbox.filesystem.write.iter().chain(private).cloned().collect();
    let mut created = ruleset
        .create()
        .map_err(failed)?
        .add_rules(path_beneath_rules(&sandbox.filesystem.read, read_only))
        .and_then(|r| r.add_rules(path_beneath_rules(own, read_only)))
        .and_then(|r| r.add_rules(path_beneath_rules(["/proc"], read_only)))
        .and_then(|r| r.add_rules(path_beneath_rules(DEVICES, devices)))
        .and_then(|r| r.add_rules(path_beneath_rules(&writable, read_write)))
        .map_err(failed)?;
    if let Some((connect, bind)) = ports.filter(|_| net_rules) {
        for port in connect {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp)).map_err(failed)?;
        }
        for port in bind {
            created = created.add_rule(NetPort::new(*port, AccessNet::BindTcp)).map_err(failed)?;
        }
        in_effect.enforced.push(format!(
            "network: TCP connect only to ports {connect:?}, bind only on {bind:?} (Landlock ABI {abi_number}); UDP and Unix sockets not restricted"
        ));
    }
    in_effect.enforced.push(format!(
        "filesystem: Landlock ABI {abi_number}: read {} paths, write {} paths, plus its own program's {}",
        sandbox.filesystem.read.len(),
        writable.len(),
        own.len()
    ));
    if scoped {
        in_effect.enforced.push("signals and abstract Unix sockets: only within its sandbox (Landlock)".into());
    } else {
        in_effect.fallbacks.push(unscoped_signals(sandbox, abi_number));
    }
    let fd: Option<OwnedFd> = created.into();
    fd.map(Some).ok_or_else(|| "its Landlock ruleset was not created".to_owned())
}

/// What is left of the signal fence without Landlock's scopes (ABI 6, Linux 6.12): only the
/// kernel's own permission check, which lets a process signal every process of its user.
fn unscoped_signals(sandbox: &Sandbox, abi_number: i32) -> String {
    let who = match &sandbox.user {
        Some(user) => format!("as `{user}` it may signal only that user's processes"),
        None => "running as the hangar's own user, it may signal the supervisor and every process of that user".into(),
    };
    format!(
        "signals: not scoped to its sandbox (that takes Landlock ABI 6; this kernel offers ABI {abi_number}): {who}"
    )
}

/// The program's own directories: where it was found and where its links lead, its `#!`
/// interpreter's, the script an interpreter runs, and the package or venv root around them.
fn command_paths(program: &Path, args: &[String], path_var: &str) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    add_program_dirs(program, &mut paths);
    if let Some(interpreter) = shebang(program, path_var) {
        add_program_dirs(&interpreter, &mut paths);
    }
    let name = program.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let runs_script = INTERPRETERS.contains(&name) || name.starts_with("python3.");
    if runs_script
        && let Some(script) = args.iter().find(|a| !a.starts_with('-')).map(Path::new)
        && script.is_file()
    {
        add_program_dirs(&absolute(script), &mut paths);
    }
    paths.sort();
    paths.dedup();
    paths
}

fn add_program_dirs(file: &Path, paths: &mut Vec<PathBuf>) {
    let canonical = std::fs::canonicalize(file).ok();
    for path in [Some(file.to_path_buf()), canonical].into_iter().flatten() {
        let Some(dir) = path.parent() else { continue };
        paths.push(dir.to_path_buf());
        // A venv's `bin`: its pyvenv.cfg and lib are beside it.
        if dir.file_name().is_some_and(|n| n == "bin")
            && let Some(root) = dir.parent()
            && root.join("pyvenv.cfg").is_file()
        {
            paths.push(root.to_path_buf());
        }
        // A package under node_modules: its dependencies are anywhere below the outermost one.
        let mut outermost = None;
        for ancestor in dir.ancestors() {
            if ancestor.file_name().is_some_and(|n| n == "node_modules") {
                outermost = Some(ancestor);
            }
        }
        if let Some(modules) = outermost {
            paths.push(modules.to_path_buf());
        }
    }
}

/// The interpreter a `#!` script names (`/usr/bin/env NAME` resolved through `PATH`).
fn shebang(program: &Path, path_var: &str) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).and_then(|mut f| f.read(&mut head)).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = std::str::from_utf8(line.split(|b| *b == b'\n').next()?).ok()?;
    let mut words = line.split_whitespace();
    let interpreter = words.next()?;
    if interpreter.ends_with("/env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        return resolve(name, path_var);
    }
    Some(PathBuf::from(interpreter))
}

/// `name` as `execvp` would find it: a path as given (made absolute), else the first
/// executable file of that name in `path_var`.
pub fn resolve(name: &str, path_var: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let path = absolute(Path::new(name));
        return path.is_file().then_some(path);
    }
    std::env::split_paths(path_var).map(|dir| absolute(&dir.join(name))).find(|candidate| {
        std::fs::metadata(candidate).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The user to run as, looked up now (no lookups after the fork), with how it reads.
fn identity(user: &str, private: bool) -> Result<(String, Identity), String> {
    let found = match user.parse::<u32>() {
        Ok(uid) => nix::unistd::User::from_uid(uid.into()),
        Err(_) => nix::unistd::User::from_name(user),
    };
    let found = match found {
        Ok(Some(found)) => found,
        Ok(None) => return Err(format!("its sandbox's user `{user}` does not exist")),
        Err(err) => return Err(format!("its sandbox's user `{user}` could not be looked up: {err}")),
    };
    let ids = Identity { uid: found.uid.as_raw(), gid: found.gid.as_raw() };
    if ids.uid != nix::unistd::geteuid().as_raw() && !nix::unistd::geteuid().is_root() {
        let missing = missing_capabilities(effective_capabilities(), private);
        if !missing.is_empty() {
            return Err(format!(
                "its sandbox's user `{user}` needs the hangar to run as root or with {} (missing {}; AmbientCapabilities= under systemd)",
                needed_capabilities(private).join(", "),
                missing.join(", ")
            ));
        }
    }
    Ok((format!("{} (uid {}, gid {})", found.name, ids.uid, ids.gid), ids))
}

/// What becoming another user takes: CAP_SETUID (7) and CAP_SETGID (6); with a private
/// `$HOME`, CAP_CHOWN (0) too, to give that user its directories.
fn needed_capabilities(private: bool) -> Vec<&'static str> {
    let mut needed = vec!["CAP_SETUID", "CAP_SETGID"];
    if private {
        needed.push("CAP_CHOWN");
    }
    needed
}

/// The capabilities of [`needed_capabilities`] not in the `effective` set.
fn missing_capabilities(effective: u64, private: bool) -> Vec<&'static str> {
    let bit = |name: &str| match name {
        "CAP_SETUID" => 7,
        "CAP_SETGID" => 6,
        _ => 0, // CAP_CHOWN
    };
    needed_capabilities(private).into_iter().filter(|name| effective & (1 << bit(name)) == 0).collect()
}

/// The supervisor's effective capability set (`CapEff:` of `/proc/self/status`; none if unread).
fn effective_capabilities() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0)
}

/// System calls no MCP server needs and a sandbox escape would: debugging other processes,
/// mounts and namespaces, kernel modules and BPF, keyrings, rebooting and swapping, raw handles.
const DENIED_SYSCALLS: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_setns,
    libc::SYS_unshare,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_syslog,
    libc::SYS_vhangup,
];

/// An argument (by index) that must hold a value.
type MustBe = (u8, u64);

/// System calls that may reach another process, allowed only aimed at itself: each with the
/// arguments that must hold these values (`pid` 0: the caller), else EPERM. Without this a box
/// running as the hangar's user (or root) could lower the supervisor's open-file limit, kill it
/// with an `RLIMIT_CPU` of 0, renice it or starve it. The read-only `sched_get*` stay open (a
/// thread's own tid is how runtimes ask); signals are Landlock's to scope (ABI 6).
const OWN_PROCESS_ONLY: &[(&str, libc::c_long, &[MustBe])] = &[
    ("prlimit64", libc::SYS_prlimit64, &[(0, 0)]),
    // (PRIO_PROCESS, 0): PRIO_USER 0 would be every process of its user.
    ("getpriority", libc::SYS_getpriority, &[(0, 0), (1, 0)]),
    ("setpriority", libc::SYS_setpriority, &[(0, 0), (1, 0)]),
    ("sched_setattr", libc::SYS_sched_setattr, &[(0, 0)]),
    ("sched_setscheduler", libc::SYS_sched_setscheduler, &[(0, 0)]),
    ("sched_setparam", libc::SYS_sched_setparam, &[(0, 0)]),
    ("sched_setaffinity", libc::SYS_sched_setaffinity, &[(0, 0)]),
    // (IOPRIO_WHO_PROCESS, 0).
    ("ioprio_set", libc::SYS_ioprio_set, &[(0, 1), (1, 0)]),
    ("ioprio_get", libc::SYS_ioprio_get, &[(0, 1), (1, 0)]),
];

/// The deny-list as a BPF program for this machine's architecture, compiled once.
fn seccomp_program() -> Result<&'static Vec<libc::sock_filter>, String> {
    static PROGRAM: OnceLock<Result<Vec<libc::sock_filter>, String>> = OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            let arch = seccompiler::TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
            // `c_long` is not i64 on every target.
            #[allow(clippy::useless_conversion)]
            let mut rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> =
                DENIED_SYSCALLS.iter().map(|nr| (i64::from(*nr), Vec::new())).collect();
            // Any one argument off its value matches a rule, and a match is answered EPERM.
            for (_, nr, must) in OWN_PROCESS_ONLY {
                let off = must
                    .iter()
                    .map(|(arg, value)| {
                        use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
                        let condition = SeccompCondition::new(*arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, *value)?;
                        SeccompRule::new(vec![condition])
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.to_string())?;
                #[allow(clippy::useless_conversion)]
                rules.insert(i64::from(*nr), off);
            }
            let filter = seccompiler::SeccompFilter::new(
                rules,
                seccompiler::SeccompAction::Allow,
                seccompiler::SeccompAction::Errno(libc::EPERM as u32),
                arch,
            )
            .map_err(|e| e.to_string())?;
            let program: seccompiler::BpfProgram =
                filter.try_into().map_err(|e: seccompiler::BackendError| e.to_string())?;
            Ok(program.iter().map(|f| libc::sock_filter { code: f.code, jt: f.jt, jf: f.jf, k: f.k }).collect())
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Its private `/tmp` (a mount namespace binds the private tmp onto it), unless its rules grant
/// `/tmp` itself, or (`require: false`) the system forbids the namespace.
fn private_tmp(
    dir: &PrivateDir,
    sandbox: &Sandbox,
    own: &[PathBuf],
    in_effect: &mut SandboxInEffect,
) -> Result<Option<PrivateTmp>, String> {
    let fs = &sandbox.filesystem;
    if fs.read.iter().chain(&fs.write).any(|path| path == Path::new("/tmp")) {
        in_effect
            .fallbacks
            .push("/tmp: the host's, not private: `filesystem` grants /tmp itself ($TMPDIR private)".into());
        return Ok(None);
    }
    if !nix::unistd::geteuid().is_root()
        && let Some(why) = user_namespaces_forbidden()
    {
        if sandbox.require {
            return Err(format!(
                "its private /tmp needs a mount namespace, which without root takes a user namespace, and {why}; set `filesystem.private: false` or `sandbox.require: false` to run it without"
            ));
        }
        in_effect.fallbacks.push(format!(
            "/tmp: not private, the host's refused by Landlock ($TMPDIR private): {why} (require: false)"
        ));
        return Ok(None);
    }
    let binds = tmp_binds(dir, fs, own)?;
    in_effect.enforced.push(format!(
        "/tmp: private, empty at each start (a mount namespace of its own; {} granted paths under the host's /tmp kept in it)",
        binds.len()
    ));
    Ok(Some(PrivateTmp { binds, tmp: c_path(&dir.tmp())? }))
}

/// Why this system forbids an unprivileged user namespace, where its sysctls say so (AppArmor's
/// restriction or a container's seccomp profile show only when the child tries).
fn user_namespaces_forbidden() -> Option<String> {
    if std::env::var_os(TEST_NO_USER_NAMESPACES_ENV).is_some() {
        return Some(format!("{TEST_NO_USER_NAMESPACES_ENV} is set"));
    }
    ["/proc/sys/user/max_user_namespaces", "/proc/sys/kernel/unprivileged_userns_clone"].into_iter().find_map(|file| {
        let value = std::fs::read_to_string(file).ok()?;
        let name = file.trim_start_matches("/proc/sys/").replace('/', ".");
        (value.trim() == "0").then(|| format!("this system forbids them ({name} is 0)"))
    })
}

/// What of the host's `/tmp` stays visible in the private one: each path its rules grant under
/// it (`read`, `write`, its own program's, its private `$HOME`), bound onto a mount point made
/// now in the private tmp. Read-only where no write rule covers it: inside, the private tmp's
/// write rule covers everything below `/tmp`, and Landlock adds up the rules along a path.
fn tmp_binds(dir: &PrivateDir, fs: &hangar_core::sandbox::Filesystem, own: &[PathBuf]) -> Result<Vec<Bind>, String> {
    let tmp = Path::new("/tmp");
    let home = dir.home();
    let mut visible: Vec<&Path> = fs.read.iter().chain(&fs.write).chain(own).map(PathBuf::as_path).collect();
    visible.push(&home);
    visible.retain(|path| path.starts_with(tmp) && *path != tmp);
    visible.sort();
    visible.dedup();
    let writable = |path: &Path| path.starts_with(dir.path()) || fs.write.iter().any(|w| path.starts_with(w));
    let mut binds = Vec::new();
    for source in visible {
        // One that does not exist has no Landlock rule either.
        let Ok(meta) = std::fs::metadata(source) else { continue };
        let target = dir.tmp().join(source.strip_prefix(tmp).unwrap_or(source));
        make_mount_point(&dir.tmp(), &target, meta.is_dir()).map_err(|err| {
            format!("its private /tmp could not be made (a mount point for {}): {err}", source.display())
        })?;
        let read_only = (!writable(source)).then(|| kept_mount_flags(source));
        binds.push(Bind { source: c_path(source)?, target: c_path(&target)?, read_only });
    }
    Ok(binds)
}

/// `target` and the directories between `root` and it (0755, passable by the sandbox's user);
/// an empty file where a file is to be bound.
fn make_mount_point(root: &Path, target: &Path, is_dir: bool) -> std::io::Result<()> {
    let relative = target.strip_prefix(root).map_err(std::io::Error::other)?;
    let mut path = root.to_path_buf();
    let mut components = relative.components().peekable();
    while let Some(component) = components.next() {
        path.push(component);
        if components.peek().is_none() && !is_dir {
            std::fs::File::create(&path)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
        } else if !path.is_dir() {
            std::fs::create_dir(&path)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(())
}

/// The flags of `path`'s mount that a read-only remount must keep (a user namespace may not
/// clear them).
fn kept_mount_flags(path: &Path) -> libc::c_ulong {
    use nix::sys::statvfs::{FsFlags, statvfs};
    let flags = statvfs(path).map(|stat| stat.flags()).unwrap_or(FsFlags::empty());
    [(FsFlags::ST_NOSUID, libc::MS_NOSUID), (FsFlags::ST_NODEV, libc::MS_NODEV), (FsFlags::ST_NOEXEC, libc::MS_NOEXEC)]
        .into_iter()
        .filter(|(st, _)| flags.contains(*st))
        .fold(0, |kept, (_, ms)| kept | ms)
}

fn c_path(path: &Path) -> Result<CString, String> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| format!("{} has a NUL byte", path.display()))
}

/// A start's private `$HOME` and `/tmp`: `<tmp>/hangar-sandbox-<supervisor pid>/<id>-<n>`,
/// owned by the sandbox's user, mode 0700 (the parent 0711: passable, not listable). Removed
/// when dropped.
pub struct PrivateDir(PathBuf);

/// Where this supervisor keeps its sandboxes' private directories.
fn private_base() -> PathBuf {
    std::env::temp_dir().join(format!("hangar-sandbox-{}", std::process::id()))
}

/// Removes every private directory this supervisor made; at exit, once no upstream is left.
pub fn remove_private_dirs() {
    remove_private(&private_base());
}

fn home_failed(err: std::io::Error) -> String {
    format!("its private $HOME could not be made: {err}")
}

/// Removes a private directory, taking it back first if it is another user's ([`reclaim`]).
fn remove_private(dir: &Path) {
    if std::fs::remove_dir_all(dir).is_err() {
        reclaim(dir);
        let _ = std::fs::remove_dir_all(dir);
    }
}

impl PrivateDir {
    fn create(id: &str) -> Result<PrivateDir, String> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let base = private_base();
        match std::fs::create_dir(&base) {
            Ok(()) => std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o711)).map_err(home_failed)?,
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(home_failed(err)),
        }
        let dir = base.join(format!("{id}-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        let private = PrivateDir(dir);
        for path in [private.path(), private.home(), private.tmp()] {
            std::fs::create_dir(&path).map_err(home_failed)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).map_err(home_failed)?;
        }
        Ok(private)
    }

    /// Hands its directories to the sandbox's user.
    fn give_to(&self, owner: Option<Identity>) -> Result<(), String> {
        let Some(Identity { uid, gid }) = owner else { return Ok(()) };
        // Its own directory last: once that user's (0700), a hangar without root (CAP_CHOWN but
        // no CAP_DAC_OVERRIDE, as the systemd unit runs it) can no longer reach inside.
        for path in [self.home(), self.tmp(), self.path()] {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(home_failed)?;
        }
        Ok(())
    }

    pub fn path(&self) -> PathBuf {
        self.0.clone()
    }
    fn home(&self) -> PathBuf {
        self.0.join("home")
    }
    fn tmp(&self) -> PathBuf {
        self.0.join("tmp")
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        // On a thread of its own: a server may have left many files, and this runs on the runtime.
        let dir = std::mem::take(&mut self.0);
        let _ = std::thread::Builder::new().name("sandbox-cleanup".into()).spawn(move || {
            remove_private(&dir);
        });
    }
}

/// Makes `dir` and every directory below it the hangar's own again (mode 0700), so it can be
/// removed when it is another user's and the hangar has no root (CAP_CHOWN, no
/// CAP_DAC_OVERRIDE, as the systemd unit runs it). `lchown`, and only real directories are
/// descended into, so a link the server left leads nowhere. Its processes are gone by then (the
/// record holding the directory outlives them).
fn reclaim(dir: &Path) {
    let (uid, gid) = (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
    if std::os::unix::fs::lchown(dir, Some(uid), Some(gid)).is_err()
        || std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).is_err()
    {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            reclaim(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_found_through_path_and_its_directories_are_readable() {
        let sh = resolve("sh", "/nonexistent:/usr/bin:/bin").unwrap();
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{sh:?}");
        assert_eq!(resolve("no-such-program-here", "/usr/bin"), None);
        let paths = command_paths(&sh, &[], "/usr/bin");
        assert!(paths.contains(&sh.parent().unwrap().to_path_buf()), "{paths:?}");
    }

    #[test]
    fn a_script_run_by_an_interpreter_is_readable_too() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("server.py");
        std::fs::write(&script, "print()").unwrap();
        let python = resolve("python3", "/usr/bin:/bin").unwrap();
        let paths = command_paths(&python, &["-u".into(), script.display().to_string()], "/usr/bin");
        assert!(paths.iter().any(|p| p == &std::fs::canonicalize(dir.path()).unwrap()), "{paths:?}");
    }

    #[test]
    fn a_shebang_names_its_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("tool");
        std::fs::write(&script, "#!/usr/bin/env -S sh -e\necho\n").unwrap();
        assert_eq!(shebang(&script, "/usr/bin:/bin"), resolve("sh", "/usr/bin:/bin"));
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(shebang(&script, ""), Some(PathBuf::from("/bin/sh")));
    }

    #[test]
    fn another_user_needs_setuid_setgid_and_for_a_private_home_chown() {
        let (chown, setgid, setuid) = (1 << 0, 1 << 6, 1 << 7);
        assert_eq!(missing_capabilities(setuid | setgid | chown, true), Vec::<&str>::new());
        assert_eq!(missing_capabilities(setuid | setgid, true), ["CAP_CHOWN"]);
        assert_eq!(missing_capabilities(setuid | setgid, false), Vec::<&str>::new());
        assert_eq!(missing_capabilities(chown, false), ["CAP_SETUID", "CAP_SETGID"]);
    }

    #[test]
    fn what_is_granted_under_tmp_is_kept_in_a_private_tmp_read_only_unless_written() {
        let granted = tempfile::tempdir_in("/tmp").unwrap();
        let at = |name: &str| granted.path().join(name);
        std::fs::create_dir_all(at("read/write")).unwrap();
        std::fs::write(at("file"), "").unwrap();
        let fs = hangar_core::sandbox::Filesystem {
            read: vec!["/usr".into(), at("read"), at("file"), at("missing")],
            write: vec![at("read/write")],
            private: true,
        };
        let dir = PrivateDir::create("unit").unwrap();
        let binds = tmp_binds(&dir, &fs, &[]).unwrap();
        let seen: Vec<(PathBuf, bool)> =
            binds.iter().map(|b| (PathBuf::from(b.source.to_str().unwrap()), b.read_only.is_some())).collect();
        // Parents before children; nothing outside /tmp or missing; the private $HOME writable.
        let mut expected = vec![(at("file"), true), (at("read"), true), (at("read/write"), false)];
        if dir.home().starts_with("/tmp") {
            expected.push((dir.home(), false));
        }
        expected.sort();
        assert_eq!(seen, expected);
        let inside = |path: &Path| dir.tmp().join(path.strip_prefix("/tmp").unwrap());
        assert!(inside(&at("file")).is_file() && inside(&at("read/write")).is_dir());
        assert!(!inside(&at("missing")).exists());
        drop(dir);
        remove_private_dirs();
    }

    #[test]
    fn the_deny_list_compiles_for_this_machine() {
        assert!(seccomp_program().unwrap().len() > DENIED_SYSCALLS.len());
    }
}
