//! The front door's names, resolved where the tool lists live: an index of every exposed name
//! (`hangar_core::front_door`), rebuilt on the first lookup after any server's tool list, or the
//! set of servers, changed. There is one index per view ([`ByView`]), built over the servers
//! and tools that view sees, so a collision a caller cannot see does not rename its tools.
//!
//! Staleness: `Shared::tools_generation` is bumped by the one function that changes a server's
//! tools (`Server::set_tools`) before it announces the change, and by a reload before it
//! returns. An index is kept only while the generation it was built at is current, so a call
//! made after an announcement never routes on the name it replaced.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

use hangar_core::front_door::{Index, Naming, Unknown};
use hangar_core::policy::View;
use hangar_core::sync::UnpoisonedRw;

use crate::server::{Server, Shared};

/// One [`ExposedNames`] per profile (and one for the all-seeing view), cleared by a reload
/// (profiles may have changed).
#[derive(Default)]
pub struct ByView {
    views: RwLock<HashMap<Option<String>, Arc<ExposedNames>>>,
}

impl ByView {
    /// The names as `view` sees them.
    pub fn of(&self, view: &View) -> Arc<ExposedNames> {
        let key = view.profile().map(str::to_owned);
        if let Some(names) = self.views.reading().get(&key) {
            return names.clone();
        }
        let mut views = self.views.writing();
        views.entry(key).or_insert_with(|| Arc::new(ExposedNames::new(view.clone()))).clone()
    }

    pub fn clear(&self) {
        self.views.writing().clear();
    }
}

/// The index last built for one view, shared by every lookup until the tool lists change.
pub struct ExposedNames {
    view: View,
    built: RwLock<Option<Arc<Built>>>,
}

impl Default for ExposedNames {
    fn default() -> Self {
        ExposedNames::new(View::All)
    }
}

/// One index and the servers its positions refer to.
pub struct Built {
    generation: u64,
    index: Index,
    servers: Vec<Arc<Server>>,
    /// Every server had been started at least once when this was built (so its tools are known).
    pub discovered: bool,
}

impl Built {
    /// The server `name` leads to, and that server's own name for the tool; else the qualified
    /// names it is exposed as.
    pub fn resolve(&self, name: &str) -> Result<(Arc<Server>, String), Unknown> {
        let (at, tool) = self.index.resolve(name)?;
        Ok((self.servers.get(at).ok_or_else(Unknown::default)?.clone(), tool.to_owned()))
    }
}

impl ExposedNames {
    pub fn new(view: View) -> Self {
        ExposedNames { view, built: RwLock::new(None) }
    }

    /// The index for the current tool lists of `servers` (in config order), named by `naming`:
    /// the one built before if nothing changed since, else a new one. (`naming` changes only
    /// with a reload, which moves the generation on.)
    pub fn current(&self, shared: &Shared, naming: &Naming, servers: impl FnOnce() -> Vec<Arc<Server>>) -> Arc<Built> {
        let generation = shared.tools_generation.load(Ordering::SeqCst);
        if let Some(built) = self.built.reading().as_ref()
            && built.generation == generation
        {
            return built.clone();
        }
        self.rebuild(generation, naming, servers())
    }

    /// Builds the index anew, whatever the generation says (after servers were started to learn
    /// their tools, which may have changed none of them).
    pub fn rebuilt(&self, shared: &Shared, naming: &Naming, servers: Vec<Arc<Server>>) -> Arc<Built> {
        self.rebuild(shared.tools_generation.load(Ordering::SeqCst), naming, servers)
    }

    /// The generation is read before the tool lists: a change racing this build bumps it past
    /// the one recorded here, so the next lookup builds again.
    fn rebuild(&self, generation: u64, naming: &Naming, servers: Vec<Arc<Server>>) -> Arc<Built> {
        let view = &self.view;
        let servers: Vec<Arc<Server>> = servers.into_iter().filter(|s| view.sees_server(s.id())).collect();
        let names: Vec<Vec<String>> =
            servers.iter().map(|s| s.tool_names().into_iter().filter(|t| view.allows_tool(t)).collect()).collect();
        let index = Index::new(
            naming,
            servers.iter().zip(&names).map(|(server, names)| (server.id(), names.iter().map(String::as_str).collect())),
        );
        let discovered = servers.iter().all(|s| !s.tools_unknown());
        let built = Arc::new(Built { generation, index, servers, discovered });
        *self.built.writing() = Some(built.clone());
        built
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::config::Config;
    use tokio::sync::broadcast;

    fn servers(ids: &[&str]) -> (Arc<Shared>, Vec<Arc<Server>>) {
        let yaml: String = ids.iter().map(|id| format!("  {id}:\n    command: [\"true\"]\n")).collect();
        let config = Config::parse(&format!("mcp_servers:\n{yaml}")).unwrap();
        let shared = Arc::new(Shared {
            events: broadcast::channel(8).0,
            tool_changes: broadcast::channel(8).0,
            tools_generation: Default::default(),
            shutting_down: Default::default(),
            journal: crate::journal::Journal::in_memory(),
            telemetry: None,
            upstream_news: broadcast::channel(8).0,
            vault: Default::default(),
            subjects: Default::default(),
        });
        let servers = config
            .mcp_servers
            .iter()
            .map(|(id, server)| Server::new(id.clone(), server.clone(), &config.recovery, shared.clone()))
            .collect();
        (shared, servers)
    }

    fn lookup(names: &ExposedNames, shared: &Shared, servers: &[Arc<Server>], name: &str) -> Option<(String, String)> {
        let built = names.current(shared, &Naming::default(), || servers.to_vec());
        built.resolve(name).ok().map(|(server, tool)| (server.id().to_owned(), tool))
    }

    #[test]
    fn a_changed_tool_list_is_resolved_anew_before_it_is_announced() {
        let (shared, servers) = servers(&["math", "words"]);
        let names = ExposedNames::default();
        servers[0].declare_for_test(&["add", "echo"]);
        servers[1].declare_for_test(&["shout"]);
        assert_eq!(lookup(&names, &shared, &servers, "add"), Some(("math".into(), "add".into())));
        assert_eq!(lookup(&names, &shared, &servers, "echo"), Some(("math".into(), "echo".into())));

        let mut announced = shared.tool_changes.subscribe();
        servers[0].declare_for_test(&["sum", "echo"]);
        assert_eq!(announced.try_recv().ok().as_deref(), Some("math"), "the change is announced");
        assert_eq!(lookup(&names, &shared, &servers, "add"), None, "the old name is gone once announced");
        assert_eq!(lookup(&names, &shared, &servers, "sum"), Some(("math".into(), "sum".into())));

        // A new collision: both sides become qualified, and each leads to its own server.
        servers[1].declare_for_test(&["shout", "echo"]);
        assert_eq!(announced.try_recv().ok().as_deref(), Some("words"));
        assert_eq!(lookup(&names, &shared, &servers, "echo"), None, "an ambiguous name is not guessed");
        assert_eq!(lookup(&names, &shared, &servers, "math__echo"), Some(("math".into(), "echo".into())));
        assert_eq!(lookup(&names, &shared, &servers, "words__echo"), Some(("words".into(), "echo".into())));
    }

    #[test]
    fn an_unchanged_list_keeps_the_index_and_announces_nothing() {
        let (shared, servers) = servers(&["math"]);
        let names = ExposedNames::default();
        servers[0].declare_for_test(&["add"]);
        let first = names.current(&shared, &Naming::default(), || servers.clone());
        let mut announced = shared.tool_changes.subscribe();
        servers[0].declare_for_test(&["add"]);
        assert!(announced.try_recv().is_err(), "nothing changed, nothing announced");
        let again = names.current(&shared, &Naming::default(), || panic!("no rebuild while nothing changed"));
        assert!(Arc::ptr_eq(&first, &again));
        assert!(first.discovered, "a server whose tools were declared (or remembered) needs no discovery");
    }

    #[test]
    fn each_view_names_only_what_it_sees() {
        let (shared, servers) = servers(&["math", "words"]);
        servers[0].declare_for_test(&["add", "echo"]);
        servers[1].declare_for_test(&["echo"]);
        let config = Config::parse(
            "profiles:\n  mathy: {servers: [math]}\n  no-echo: {servers: [\"*\"], tools: {deny: [echo]}}\n",
        )
        .unwrap();
        let policy = hangar_core::policy::Policy::compile(&config.profiles).unwrap();
        let by_view = ByView::default();
        let as_profile = |name: &str| {
            by_view.of(&policy.view(&hangar_core::access::Caller { identity: "k".into(), profile: Some(name.into()) }))
        };
        // The collision on `echo` is invisible to `mathy`: its `echo` stays bare.
        assert_eq!(lookup(&as_profile("mathy"), &shared, &servers, "echo"), Some(("math".into(), "echo".into())));
        assert_eq!(lookup(&as_profile("mathy"), &shared, &servers, "words__echo"), None, "an unseen server");
        assert_eq!(lookup(&by_view.of(&View::All), &shared, &servers, "echo"), None, "ambiguous for the all-seeing");
        // A denied tool takes no part in naming and leads nowhere.
        assert_eq!(lookup(&as_profile("no-echo"), &shared, &servers, "add"), Some(("math".into(), "add".into())));
        assert_eq!(lookup(&as_profile("no-echo"), &shared, &servers, "echo"), None);
    }
}
