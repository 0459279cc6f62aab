//! `hangar-supervisor`: owns every upstream MCP server and serves the control socket.
//!
//! This file only parses arguments and wires the pieces together; see `ARCHITECTURE.md`.
#![deny(unsafe_code)]

mod args;
mod calls;
mod cgroup;
mod cgroup_v1;
mod check_config;
mod children;
mod config_watch;
mod containment;
mod control;
mod control_key;
mod credentials;
#[cfg(test)]
mod docs_page;
mod guardian;
mod hangar;
mod helpers;
mod journal;
mod kernel_limits;
mod lifetime;
mod limits;
mod lineage;
mod listeners;
mod logs;
mod loose_credentials;
mod notify;
mod owned_file;
mod peer;
mod proctree;
mod quotas;
mod reaper;
mod redactor;
mod refusals;
mod requests;
mod run_key;
mod sandbox;
mod server;
mod sessions;
mod shutdown;
mod spawn;
mod subtree;
mod task_book;
mod upstream;
mod vault;
mod withheld;

use std::process::ExitCode;

use hangar_core::config::Config;
use hangar_runtime::exit::{EX_CONFIG, Exit, run_main};
use hangar_runtime::logging;

use crate::args::Args;

fn main() -> ExitCode {
    run_main("hangar-supervisor", || {
        let args: Args = hangar_runtime::args::parse()?;
        logging::init(args.log_format);
        if args.check {
            // Every problem is printed: the exit code says the rest.
            return if check_config::run(&args) { Ok(()) } else { Err(Exit::quiet(EX_CONFIG)) };
        }
        let parent = args.exit_with_parent.then(lifetime::exit_with_parent);
        let mut config = Config::load(&args.config).map_err(|err| Exit::new(EX_CONFIG, err))?;
        if let Some(state_dir) = &args.state_dir {
            config.state_dir = Some(state_dir.clone());
        }
        if let Some(hash) = &args.run_key_hash {
            run_key::set(hash, &config).map_err(|err| Exit::new(EX_CONFIG, err))?;
        }
        // Before any child: none inherits a variable a credential is read from.
        withheld::set(&config);
        loose_credentials::warn(&config);
        // No box may reach the control socket's directory or the state directory: known now, so
        // every sandbox is checked against them (and kept out of them at each spawn).
        let socket = args.socket.clone().unwrap_or_else(hangar_core::paths::default_socket_path);
        let state_dir = config
            .state_dir
            .clone()
            .unwrap_or_else(|| hangar_core::journal::default_state_dir(|name| std::env::var(name).ok()));
        sandbox::protect(&socket, &state_dir, config.credentials.key_file.as_deref());
        sandbox::check_grants(&config)
            .map_err(|err| Exit::new(EX_CONFIG, format!("{}: {err}", args.config.display())))?;
        // Resolved once at start: an unknown group is a configuration mistake, not a runtime one.
        let socket_group = args
            .socket_group
            .as_deref()
            .map(control::SocketGroup::resolve)
            .transpose()
            .map_err(|err| Exit::new(EX_CONFIG, err))?;
        let guardian = containment::start(args.kill_mode, args.log_format, args.guardian.as_deref())?;
        let runtime = hangar_runtime::runtime::start()?;
        let run_dir = args.run_dir.clone();
        let outcome = runtime.block_on(lifetime::run(args, config, socket_group));
        drop(runtime);
        // Every upstream is gone by now: their private homes go too.
        sandbox::remove_private_dirs();
        containment::release(guardian);
        if let (Some(parent), Some(dir)) = (parent, &run_dir) {
            lifetime::remove_run_dir(parent, dir);
        }
        outcome
    })
}
