//! After `hangar add` (unless `--no-start`): the new server started once in a hangar of its
//! own ([`Ephemeral`], as `hangar run` starts one), its tools pinned into the config as
//! `hangar pin --write` pins them, and a hangar running at `--url` told to reload. A server that
//! does not start stays in the config, and the command says why (its dead reason and log tail)
//! and exits 69.

use std::path::Path;

use hangar_core::terminal::visible;

use crate::client::Api;
use crate::ephemeral::{Ephemeral, LOG_TAIL};
use crate::error::CliError;

pub fn run(config: &Path, id: &str, running: &Api) -> Result<(), CliError> {
    let auth = hangar_core::config::Config::load(config).is_ok_and(|c| c.auth.is_configured());
    let hangar = Ephemeral::start(config, auth)?;
    let Some(started) = hangar.start_servers(&[id.to_owned()]).pop() else {
        return Err(CliError::NotReady(format!("{id} could not be started")));
    };
    if !started.ready {
        let mut report = vec![format!(
            "{} was added to {} but did not start: {}",
            visible(id),
            config.display(),
            visible(started.dead.as_deref().unwrap_or("not ready"))
        )];
        report.extend(hangar.log_tail(id, LOG_TAIL).iter().map(|line| format!("  | {line}")));
        report.push(format!("fix its entry, then `hangar check --start --config {}`", config.display()));
        return Err(CliError::NotReady(report.join("\n")));
    }
    crate::emit(&visible(&format!(
        "{id}: ready in {} ms ({} tools: {})",
        started.took.as_millis(),
        started.tools.len(),
        started.tools.join(", ")
    )))?;
    crate::pin::run(&hangar.api, id, Some(config), false)?;
    drop(hangar);
    let said = match crate::actions::reload(running) {
        Ok(_) => format!("the hangar at {} reloaded: it serves {id} now", running.base()),
        Err(CliError::Unreachable { .. }) => {
            format!("no hangar answers at {}: it serves {id} once started on this config", running.base())
        }
        Err(err) => format!("the hangar at {} did not reload ({err}): `hangar reload` when it can", running.base()),
    };
    crate::emit(&visible(&said))
}
