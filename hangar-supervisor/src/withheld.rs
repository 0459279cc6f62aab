//! The variables of the supervisor's own environment that no child inherits: each one a
//! credential `{env: NAME}` is read from, and `$CREDENTIALS_DIRECTORY`. A child inherits the rest
//! of the supervisor's environment (its `PATH`, `HOME`...), so without this one upstream's
//! credential would reach every other upstream, boxed ones included. A server's own `env:` may
//! still set such a name: that is the operator giving it on purpose.
//!
//! The list follows the config: set at start and on each accepted reload, read at each spawn.

use std::sync::RwLock;

use hangar_core::config::Config;
use hangar_core::credential::CREDENTIALS_DIRECTORY;
use hangar_core::sync::UnpoisonedRw;

static NAMES: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Withholds from every child started from now on the variables `config`'s credentials name.
pub fn set(config: &Config) {
    let mut names: Vec<String> = config
        .mcp_servers
        .values()
        .flat_map(|server| server.credential_variables().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    names.push(CREDENTIALS_DIRECTORY.to_owned());
    names.sort();
    names.dedup();
    *NAMES.writing() = names;
}

/// The variables withheld now.
pub fn names() -> Vec<String> {
    NAMES.reading().clone()
}
