//! The supervisor's command line.

use std::path::PathBuf;

use clap::Parser;
use hangar_runtime::logging::LogFormat;

use crate::cgroup;

/// Runs the configured MCP servers and serves the hangar's control socket.
#[derive(Parser, Debug)]
#[command(version, about)]
pub struct Args {
    /// The YAML config naming the MCP servers.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The control socket [default: $RUNTIME_DIRECTORY/supervisor.sock, else
    /// $XDG_RUNTIME_DIR/hangar/supervisor.sock, else /tmp/hangar-$USER/supervisor.sock].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Also serve members of this group (a name or a numeric gid) on the control socket, as a
    /// primary or supplementary group: the socket is then owned by the group and mode 0660.
    /// Without it, only the supervisor's own user and root are served.
    #[arg(long, value_name = "NAME|GID")]
    pub socket_group: Option<String>,
    /// The address the API it starts listens on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8000")]
    pub listen: String,
    /// Do not start an API instance (run `hangar-api` yourself, e.g. under systemd).
    #[arg(long)]
    pub no_api: bool,
    /// Do not start the prober (run `hangar-prober` yourself).
    #[arg(long)]
    pub no_prober: bool,
    /// Log format on stderr (also for the helpers it starts) [default: json under Kubernetes
    /// (KUBERNETES_SERVICE_HOST set) when stderr is not a terminal, else human].
    #[arg(long, value_enum, env = "HANGAR_LOG_FORMAT", default_value_t = LogFormat::detected(), hide_default_value = true)]
    pub log_format: LogFormat,
    /// How an upstream's whole subtree is killed: a cgroup v2 of its own where the supervisor's
    /// cgroup is delegated (`cgroup`, e.g. systemd `Delegate=yes`), or the supervisor as
    /// subreaper, an environment marker and a walk of the process tree (`subreaper`); `auto`
    /// picks `cgroup` when it can.
    #[arg(long, value_enum, default_value = "auto")]
    pub kill_mode: cgroup::KillMode,
    /// The `hangar-guardian` binary its guardians run [default: the one beside this binary]. A
    /// static build maps less (`scripts/build-guardian`); one named here that cannot be opened
    /// is refused at start.
    #[arg(long, value_name = "FILE", env = "HANGAR_GUARDIAN")]
    pub guardian: Option<PathBuf>,
    /// Reload whenever the config file changes, as SIGHUP does (checked every second, through
    /// its symlinks: a Kubernetes ConfigMap update swaps a `..data` symlink). A refused config is
    /// logged and the running one stays.
    #[arg(long, env = "HANGAR_WATCH_CONFIG")]
    pub watch_config: bool,
    /// Check the config as a start would, print every problem with its key path, and exit: 0
    /// with none, 78 with any (`hangar check` runs this).
    #[arg(long)]
    pub check: bool,
    /// With --check: print the problems as one JSON object.
    #[arg(long, requires = "check")]
    pub json: bool,
    /// The state directory, over the config's `state_dir` (`hangar run` gives each run its own).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The API instance it starts listens on the socket passed as this process's standard input,
    /// not on --listen (`hangar run` binds it, so no other process can take the port between).
    #[arg(long, conflicts_with = "no_api")]
    pub api_listener_stdin: bool,
    /// An extra API key with no profile (an admin), named `hangar-run`, by its hash
    /// (`sha256:<hex>`): how `hangar run` gives the command it runs a key of its own. Only with
    /// `auth` configured; the config's keys are unchanged.
    #[arg(long, value_name = "HASH")]
    pub run_key_hash: Option<String>,
    /// Stop (as SIGTERM does) when the process that started this one exits, however it exits.
    #[arg(long)]
    pub exit_with_parent: bool,
    /// The private directory (`hangar-run-*`) of the `hangar run` that started this one: removed
    /// at exit if that process is gone by then (it removes it itself otherwise).
    #[arg(long, value_name = "DIR", requires = "exit_with_parent")]
    pub run_dir: Option<PathBuf>,
}
