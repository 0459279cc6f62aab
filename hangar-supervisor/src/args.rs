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
    /// Reload whenever the config file changes, as SIGHUP does (checked every second, through
    /// its symlinks: a Kubernetes ConfigMap update swaps a `..data` symlink). A refused config is
    /// logged and the running one stays.
    #[arg(long, env = "HANGAR_WATCH_CONFIG")]
    pub watch_config: bool,
}
