//! The command line: global flags and one subcommand.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// The hangar's command-line client: status, logs and lifecycle of its MCP servers.
#[derive(Debug, Parser)]
#[command(name = "hangar", version)]
pub struct Cli {
    /// The hangar's API.
    #[arg(long, global = true, env = "HANGAR_URL", default_value = "http://127.0.0.1:8000")]
    pub url: String,

    /// Sent as `X-API-Key` when set.
    #[arg(long, global = true, value_name = "KEY", env = "HANGAR_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// Print the API's JSON instead of text (one object a line with -f).
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// A decision on a pending approval.
#[derive(Debug, Subcommand)]
pub enum Decide {
    /// Release the waiting call: it runs, once.
    Approve {
        /// The approval's id (`apr_...`), as `hangar approvals` lists it.
        id: String,
    },
    /// Refuse the waiting call (`forbidden`).
    Deny {
        /// The approval's id (`apr_...`), as `hangar approvals` lists it.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Every server: state, mode, tools, health and why it is dead.
    Status,
    /// What a server printed (its stderr), oldest first.
    Logs {
        /// The server's name.
        name: String,
        /// How many lines to show first (1..=1000).
        #[arg(short = 'n', long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=1000))]
        lines: u16,
        /// Keep printing new lines until interrupted.
        #[arg(short, long)]
        follow: bool,
    },
    /// Start a server (and wait for its handshake).
    Start {
        /// The server's name.
        name: String,
    },
    /// Stop a server.
    Stop {
        /// The server's name.
        name: String,
    },
    /// Stop a server, then start it.
    Restart {
        /// The server's name.
        name: String,
    },
    /// Connect your own account at a server whose upstream signs in each user (`auth.oauth.per:
    /// user`): prints a URL to open in any browser, and until when it works.
    Connect {
        /// The server's name.
        name: String,
    },
    /// Calls waiting for a person's approval (a rule's `then: approve`), and those decided
    /// lately; with `approve ID` or `deny ID`, decide one (an admin or a profile with
    /// `approver: true`).
    Approvals {
        #[command(subcommand)]
        decide: Option<Decide>,
    },
    /// Run a command (a test suite) against a hangar of its own: every server started and
    /// ready first, `HANGAR_URL`, `HANGAR_MCP_URL`, `HANGAR_API_KEY` and `HANGAR_MCP_CONFIG`
    /// exported to it, nothing left behind after. Exits with the command's status; 69 when a
    /// server is not ready (the command is not run), 78 for a config that does not load.
    Run {
        /// The hangar's config.
        #[arg(long, value_name = "FILE", default_value = "hangar.yaml")]
        config: PathBuf,
        /// Start only this server (repeat for more); default: every one.
        #[arg(long = "server", value_name = "NAME")]
        servers: Vec<String>,
        /// Keep the audit trail (JSON lines), each server's log and the journal here.
        #[arg(long, value_name = "DIR")]
        keep: Option<PathBuf>,
        /// Write a JUnit report here: one test case per server, ready or dead with its reason.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Check a config as the supervisor would load it, printing every problem with its key
    /// path (exit 0 or 78); with --start, also start each server once (exit 69 if one is not
    /// ready). A lint for CI; --json for machines.
    Check {
        /// The config to check.
        #[arg(long, value_name = "FILE", default_value = "hangar.yaml")]
        config: PathBuf,
        /// Also start each server once: ready or dead, its tools, its start time.
        #[arg(long)]
        start: bool,
    },
    /// Ask the hangar to reload its config.
    Reload,
    /// The audit trail: who called what, and how it ended (newest last); with -f, what comes next.
    Audit {
        /// Start after this cursor (a `next` the API gave); without it, the newest entries.
        #[arg(long, value_name = "CURSOR")]
        since: Option<u64>,
        /// At most this many entries a page (1..=1000).
        #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
        limit: Option<u16>,
        /// Only this identity's calls.
        #[arg(long, value_name = "ID")]
        identity: Option<String>,
        /// Only calls to this server.
        #[arg(long, value_name = "NAME")]
        mcp_server: Option<String>,
        /// Only this outcome: ok, is_error, error, or an error type (forbidden, timeout, ...).
        #[arg(long)]
        outcome: Option<String>,
        /// Keep printing new entries until interrupted.
        #[arg(short, long)]
        follow: bool,
    },
    /// Print the `pinned:` block (capabilities.tools.pinned) of a running server's current tools,
    /// ready to paste; with --write, put it into the config file in place, comments kept.
    Pin {
        /// The server's name.
        name: String,
        /// Write the pins into the file given by --config (then `hangar reload` applies them).
        #[arg(long, requires = "config")]
        write: bool,
        /// The hangar's config file, for --write (the API does not know where it is).
        #[arg(long, value_name = "PATH", requires = "write")]
        config: Option<PathBuf>,
    },
    /// Add the servers of another MCP client's config (`.mcp.json`, `claude_desktop_config.json`,
    /// VS Code's `mcp.json`) to the hangar's config, comments kept: variables become `{env: NAME}`
    /// references, and a header's value is never copied.
    Import {
        /// The client's config file.
        #[arg(long, value_name = "FILE")]
        from: PathBuf,
        /// The hangar's config file (created when missing).
        #[arg(long, value_name = "PATH")]
        config: PathBuf,
        /// Only this server of the file (repeatable). Default: every one.
        #[arg(long = "server", value_name = "NAME")]
        servers: Vec<String>,
    },
    /// Add a server from an MCP Registry to the hangar's config, comments kept: a remote, or a
    /// package this host can run (npx, uvx, dnx) pinned to its version.
    Add {
        /// The server's name in the registry, e.g. `io.github.modelcontextprotocol/server-filesystem`
        /// (optional with --from-file).
        #[arg(value_name = "NAME", required_unless_present = "from_file")]
        name: Option<String>,
        /// The hangar's config file (created when missing).
        #[arg(long, value_name = "PATH")]
        config: PathBuf,
        /// The registry (its API is `/v0.1/servers`): the official one, a sub-registry or a mirror.
        #[arg(long, value_name = "URL", env = "HANGAR_REGISTRY", default_value = crate::registry::DEFAULT_REGISTRY)]
        registry: String,
        /// The version to add.
        #[arg(long, value_name = "VERSION", default_value = "latest")]
        version: String,
        /// A value the server asks for: an environment variable, an argument (by its name or
        /// value hint), a header or a URL variable (repeatable; a repeated argument may be given
        /// more than once).
        #[arg(long = "set", value_name = "NAME=VALUE", allow_hyphen_values = true)]
        set: Vec<String>,
        /// A secret the server asks for, as the file holding it: written as `{file: FILE}`, never
        /// the value (repeatable).
        #[arg(long = "secret", value_name = "NAME=@FILE", allow_hyphen_values = true)]
        secret: Vec<String>,
        /// Read the server.json from this file instead of asking a registry (works offline).
        #[arg(long, value_name = "FILE")]
        from_file: Option<PathBuf>,
        /// The server's id in the config. Default: the last part of its name.
        #[arg(long, value_name = "ID")]
        id: Option<String>,
        /// Only write the config: do not start the server to pin its tools (for now, always so).
        #[arg(long)]
        no_start: bool,
    },
    /// Search an MCP Registry: each server whose name holds TEXT, newest version, every page.
    Search {
        /// Text the server's name holds.
        text: String,
        /// The registry (its API is `/v0.1/servers`).
        #[arg(long, value_name = "URL", env = "HANGAR_REGISTRY", default_value = crate::registry::DEFAULT_REGISTRY)]
        registry: String,
    },
}
