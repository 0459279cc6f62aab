//! What a caller may see and do: the `profiles:` block compiled once, and the [`View`] of one
//! [`Caller`]. Pure; the supervisor applies it to every request (issue 13, part 3).
//!
//! The rules, in full:
//! - a caller with no profile (the anonymous caller when no `auth` is configured, a key with no
//!   `profile`, the hangar's own helpers) sees every server and tool and may do everything;
//! - a caller whose profile is configured sees the servers matching one of its `servers` globs
//!   (no glob: none), and on them the tools matching one of `tools.allow` (default `*`) and none
//!   of `tools.deny`; it may start, stop, restart, reload and read logs only with `admin: true`;
//! - a caller naming a profile that is not configured (a reload removed it) sees nothing and
//!   may do nothing: a stale name never widens a view;
//! - the hangar's own MCP tools ([`OWN_TOOLS`]) are listed and callable as the view says
//!   ([`View::lists_own_tool`]): the admin ones ([`ADMIN_TOOLS`]) only by an admin, and in
//!   `front_door` mode, where they sit among the upstreams' tools, only those the profile's
//!   `tools` globs allow, like any other name.

use std::collections::HashMap;
use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::access::{Caller, Profiles};
use crate::key_error::KeyError;

/// The `profiles:` block, each profile's globs compiled.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    profiles: HashMap<String, Arc<Rules>>,
}

/// One profile, compiled.
#[derive(Debug, Default)]
pub struct Rules {
    servers: GlobSet,
    allow: GlobSet,
    deny: GlobSet,
    admin: bool,
    approver: bool,
    /// Its rules on calls (`crate::rules`).
    calls: crate::rules::CompiledRules,
    /// Each identity's quotas (`crate::quotas`); `None` when it sets none.
    quotas: Option<Arc<crate::quotas::Quotas>>,
}

impl Policy {
    /// Compiles every profile; a glob that does not compile is an error at its key path
    /// (`profiles.dev.tools.deny[1]`).
    pub fn compile(profiles: &Profiles) -> Result<Policy, KeyError> {
        let mut compiled = HashMap::new();
        for (name, profile) in profiles {
            let at = |key: &str| format!("profiles.{name}.{key}");
            let rules = Rules {
                servers: glob_set(&at("servers"), &profile.servers)?,
                allow: glob_set(&at("tools.allow"), &profile.tools.allow)?,
                deny: glob_set(&at("tools.deny"), &profile.tools.deny)?,
                admin: profile.admin,
                approver: profile.approver,
                calls: crate::rules::CompiledRules::compile(&at("rules"), &profile.rules)?,
                quotas: Some(Arc::new(crate::quotas::Quotas::compile(name, &profile.limits)?))
                    .filter(|quotas| !quotas.is_empty()),
            };
            compiled.insert(name.clone(), Arc::new(rules));
        }
        Ok(Policy { profiles: compiled })
    }

    /// What `caller` sees.
    pub fn view(&self, caller: &Caller) -> View {
        match &caller.profile {
            None => View::All,
            Some(name) => {
                View::Profile { name: name.clone(), rules: self.profiles.get(name).cloned().unwrap_or_default() }
            }
        }
    }
}

fn glob_set(at: &str, globs: &[String]) -> Result<GlobSet, KeyError> {
    let mut set = GlobSetBuilder::new();
    for (n, glob) in globs.iter().enumerate() {
        let glob = Glob::new(glob).map_err(|err| KeyError {
            key: format!("{at}[{n}]"),
            message: format!("not a valid glob: {}", err.kind()),
        })?;
        set.add(glob);
    }
    set.build().map_err(|err| KeyError { key: at.to_owned(), message: format!("the globs do not compile: {err}") })
}

/// The hangar's own MCP tools, in the order `tools/list` shows them (argument-free ones first).
pub const OWN_TOOLS: [&str; 8] = [
    "hangar_list",
    "hangar_status",
    "hangar_health",
    "hangar_details",
    "hangar_tools",
    "hangar_start",
    "hangar_stop",
    "hangar_call",
];

/// The hangar's tools that act as an admin does (start, stop): listed to admins only.
pub const ADMIN_TOOLS: [&str; 2] = ["hangar_start", "hangar_stop"];

/// What one caller sees and may do.
#[derive(Debug, Clone)]
pub enum View {
    /// Everything (no profile).
    All,
    /// What the named profile allows.
    Profile { name: String, rules: Arc<Rules> },
}

impl View {
    pub fn sees_server(&self, mcp_server: &str) -> bool {
        match self {
            View::All => true,
            View::Profile { rules, .. } => rules.servers.is_match(mcp_server),
        }
    }

    /// Whether `identity`, with this view, sees the server or instance named `id`: a server its
    /// profile lists, and an instance of one only if it is the caller's own or the caller an
    /// admin (`crate::isolation`).
    pub fn sees_unit(&self, identity: &str, id: &str) -> bool {
        let (server, label) = crate::isolation::split(id);
        self.sees_server(server) && label.is_none_or(|label| self.is_admin() || crate::isolation::owns(identity, label))
    }

    /// The rule of its profile that decides `call`, if one matches (none for the all-seeing
    /// view, which has no rules).
    pub fn rule_for(&self, call: &crate::rules::Call<'_>) -> Option<crate::rules::Verdict> {
        match self {
            View::All => None,
            View::Profile { rules, .. } => rules.calls.judge(call),
        }
    }

    /// Its profile's quotas for each identity, if it sets any.
    pub fn quotas(&self) -> Option<&Arc<crate::quotas::Quotas>> {
        match self {
            View::All => None,
            View::Profile { rules, .. } => rules.quotas.as_ref(),
        }
    }

    /// Whether a tool of a server it sees may be listed and called.
    pub fn allows_tool(&self, tool: &str) -> bool {
        match self {
            View::All => true,
            View::Profile { rules, .. } => rules.allow.is_match(tool) && !rules.deny.is_match(tool),
        }
    }

    /// May start, stop, restart, reload, and read logs.
    pub fn is_admin(&self) -> bool {
        match self {
            View::All => true,
            View::Profile { rules, .. } => rules.admin,
        }
    }

    /// May approve or deny calls waiting for a person: an admin, or a profile with
    /// `approver: true`.
    pub fn is_approver(&self) -> bool {
        match self {
            View::All => true,
            View::Profile { rules, .. } => rules.admin || rules.approver,
        }
    }

    /// The profile's name; `None` for the all-seeing view.
    pub fn profile(&self) -> Option<&str> {
        match self {
            View::All => None,
            View::Profile { name, .. } => Some(name),
        }
    }

    /// Whether it lists (and may call) the hangar's own tool `name`: an admin tool only as an
    /// admin, and with the `front_door` on only if the `tools` globs allow it.
    pub fn lists_own_tool(&self, name: &str, front_door: bool) -> bool {
        OWN_TOOLS.contains(&name)
            && (self.is_admin() || !ADMIN_TOOLS.contains(&name))
            && (!front_door || self.allows_tool(name))
    }

    /// The hangar's own tools it lists, in [`OWN_TOOLS`] order.
    pub fn own_tools(&self, front_door: bool) -> Vec<String> {
        OWN_TOOLS.iter().filter(|name| self.lists_own_tool(name, front_door)).map(|name| (*name).to_owned()).collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        let config = crate::config::Config::parse(
            "profiles:\n  dev: {servers: [math, \"git*\"], tools: {allow: [\"*\"], deny: [\"*delete*\"]}}\n  ci: {servers: [math], tools: {allow: [add]}}\n  admin: {servers: [\"*\"], admin: true}\n  empty: {}\n",
        )
        .unwrap();
        Policy::compile(&config.profiles).unwrap()
    }

    fn caller(profile: Option<&str>) -> Caller {
        Caller { identity: "someone".into(), profile: profile.map(Into::into) }
    }

    #[test]
    fn no_profile_sees_and_does_everything() {
        let view = policy().view(&Caller::anonymous());
        assert!(view.sees_server("anything") && view.allows_tool("drop_all") && view.is_admin());
        assert_eq!(view.profile(), None);
        assert!(policy().view(&Caller::hangar()).is_admin());
    }

    #[test]
    fn servers_are_matched_by_glob() {
        let dev = policy().view(&caller(Some("dev")));
        assert!(dev.sees_server("math") && dev.sees_server("git") && dev.sees_server("github"));
        assert!(!dev.sees_server("mathx") && !dev.sees_server("words") && !dev.sees_server("agit"));
    }

    #[test]
    fn a_tool_needs_an_allow_and_no_deny() {
        let dev = policy().view(&caller(Some("dev")));
        assert!(dev.allows_tool("add") && dev.allows_tool("echo"));
        assert!(!dev.allows_tool("delete") && !dev.allows_tool("bulk_delete_all"));
        let ci = policy().view(&caller(Some("ci")));
        assert!(ci.allows_tool("add") && !ci.allows_tool("echo") && !ci.allows_tool("add2"));
    }

    #[test]
    fn admin_is_only_what_the_profile_says() {
        assert!(policy().view(&caller(Some("admin"))).is_admin());
        assert!(!policy().view(&caller(Some("dev"))).is_admin());
    }

    #[test]
    fn a_profile_without_servers_sees_none_and_allows_every_tool_by_default() {
        let empty = policy().view(&caller(Some("empty")));
        assert!(!empty.sees_server("math"));
        assert!(empty.allows_tool("anything"), "tools.allow defaults to every tool");
    }

    #[test]
    fn an_unknown_profile_sees_nothing() {
        let gone = policy().view(&caller(Some("removed")));
        assert!(!gone.sees_server("math") && !gone.allows_tool("add") && !gone.is_admin());
        assert_eq!(gone.profile(), Some("removed"));
    }

    #[test]
    fn the_hangars_own_tools_follow_admin_and_in_front_door_mode_the_globs() {
        let every = OWN_TOOLS.map(str::to_owned).to_vec();
        let but_admin: Vec<String> = every.iter().filter(|t| !ADMIN_TOOLS.contains(&t.as_str())).cloned().collect();
        for front_door in [false, true] {
            assert_eq!(policy().view(&Caller::anonymous()).own_tools(front_door), every);
            assert_eq!(policy().view(&caller(Some("admin"))).own_tools(front_door), every);
            assert_eq!(policy().view(&caller(Some("dev"))).own_tools(front_door), but_admin);
        }
        let ci = policy().view(&caller(Some("ci")));
        assert_eq!(ci.own_tools(false), but_admin, "egress: the globs judge upstream tools only");
        assert!(ci.own_tools(true).is_empty(), "front door: allow: [add] allows no hangar tool");
        assert!(!ci.lists_own_tool("hangar_nope", false) && !ci.lists_own_tool("add", false));
    }

    #[test]
    fn a_bad_glob_names_its_key_path() {
        let err = crate::config::Config::parse("profiles:\n  dev: {servers: [ok, \"[unclosed\"]}\n").unwrap_err();
        assert_eq!(err.key, "profiles.dev.servers[1]");
        assert!(err.message.contains("not a valid glob"), "{}", err.message);
    }
}
