//! Stage 1 of the call pipeline: where a call goes. A server's tool by name is looked up in
//! the caller's view; a front-door name is resolved over the tool lists the supervisor holds,
//! as `tools/list` exposed them to that view.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use hangar_core::custom_headers::ParamCheck;
use hangar_core::front_door::Unknown;
use hangar_core::ipc::{CallEra, ErrorKind, IpcError, Reply, Stance, Target};
use hangar_core::policy::View;

use super::park::check_task_support;
use crate::hangar::{Hangar, tool_forbidden};
use crate::server::Server;

/// Where a call went: the server id and tool its audit entry names, and the server and tool
/// found (or why none was).
pub(super) struct Found {
    pub mcp_server: String,
    pub tool: String,
    pub found: Result<(Arc<Server>, String), IpcError>,
}

impl Hangar {
    /// `Request::Resolve`: where a front-door name leads, before a streamed call by it, with
    /// the checks the call would make there (the view's rules on the tool, a Modern client's
    /// task support, the `Mcp-Param-*` headers).
    pub(crate) async fn resolve_name(
        &self,
        view: &View,
        name: &str,
        param_check: Option<Box<ParamCheck>>,
        stance: Option<Stance>,
    ) -> Result<Reply, IpcError> {
        let (server, tool) = self.resolve(view, name).await?;
        if !view.allows_tool(&tool) {
            return Err(tool_forbidden(server.id(), &tool));
        }
        if let Some(stance) = stance.filter(|s| s.era == CallEra::Modern) {
            check_task_support(&server, &tool, stance.tasks.is_some())?;
        }
        if let Some(check) = &param_check {
            server.check_param_headers(&tool, &check.arguments, &check.headers)?;
        }
        Ok(Reply::Resolved { mcp_server: server.id().to_owned(), tool })
    }

    /// Stage 1: the server and tool `target` leads to in `view`.
    pub(super) async fn resolve_target(&self, view: &View, target: &Target) -> Found {
        match target {
            Target::Tool { mcp_server, tool } => {
                let found = self.visible(view, mcp_server).map(|s| (s, tool.clone()));
                Found { mcp_server: mcp_server.clone(), tool: tool.clone(), found }
            }
            Target::Exposed { name } => {
                let found = self.resolve(view, name).await;
                let (mcp_server, tool) = match &found {
                    Ok((server, tool)) => (server.id().to_owned(), tool.clone()),
                    Err(_) => (String::new(), name.clone()),
                };
                Found { mcp_server, tool, found }
            }
        }
    }

    /// The server and tool a front-door name leads to, as `tools/list` exposes them. Servers never
    /// started are discovered first, as the catalog does, so a cold server's tool is found and
    /// a name that discovery makes ambiguous is not guessed. A name that leads nowhere is
    /// refused with the qualified names it is exposed as in the view, if any (it became
    /// ambiguous).
    ///
    /// Names are computed over what `view` sees. A name that leads nowhere in the view but is a
    /// tool the view denies on a server it sees (bare or qualified) is `forbidden`, not unknown;
    /// the caller then checks the tool it leads to. A name no upstream declares, in any
    /// spelling, is unknown: globs judge declared names only.
    pub(crate) async fn resolve(&self, view: &View, name: &str) -> Result<(Arc<Server>, String), IpcError> {
        let unknown = |unknown: Unknown| IpcError::new(ErrorKind::UnknownTool, unknown.message("tool", name));
        if !self.front_door.load(Ordering::SeqCst) {
            return Err(unknown(Unknown::default()));
        }
        let exposed = self.exposed.of(view);
        let mut names = exposed.current(&self.shared, &self.naming(), || self.all());
        if !names.discovered {
            self.discover(view).await;
            names = exposed.rebuilt(&self.shared, &self.naming(), self.all());
        }
        let missing = match names.resolve(name) {
            Ok(found) => return Ok(found),
            Err(missing) => missing,
        };
        // Only a denied name: an allowed one missing from the index is ambiguous, never guessed.
        let naming = self.naming();
        let denied_here = |s: &Arc<Server>| {
            let named = |t: &String| t == name || naming.qualified(s.id(), t) == name;
            s.tool_names().into_iter().find(|t| named(t) && !view.allows_tool(t))
        };
        let denied = self.all_visible(view).into_iter().find_map(|s| denied_here(&s).map(|tool| (s, tool)));
        denied.ok_or_else(|| unknown(missing))
    }
}
