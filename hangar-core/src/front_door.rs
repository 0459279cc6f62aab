//! The front door's naming rule: how upstream tools, prompts and resources are exposed under one
//! endpoint.
//!
//! The rule, in full (for operators: `docs/clients.md`, "Front-door names"):
//! - each server has a prefix: its `expose_as` if it sets one, else its id; a qualified name is
//!   `<prefix>__<name>`;
//! - `names: bare_when_unique` (the default): a name that exactly one upstream declares, and that
//!   does not start with `hangar_`, is exposed as it is; a name that several upstreams declare
//!   is exposed once per upstream, qualified, so nothing is dropped and nobody's name wins by
//!   accident. Adding a server can therefore qualify a name that was bare;
//! - `names: always_qualified`: every name is exposed qualified, so adding a server never
//!   renames anything;
//! - a name starting with `hangar_` (the hangar's own tools) is always exposed qualified;
//! - an MCP App's `ui://` URI is always exposed qualified, inside the scheme:
//!   `ui://<prefix>__<rest>` (a host finds apps by their scheme, and an app's HTML must name one
//!   server's, stably: a bare URI that a later server's app would qualify could switch apps under
//!   a host that keeps it);
//! - the qualified form also resolves for every name its upstream declares, so a client may
//!   always use it; a name the upstream does not declare leads nowhere, in any spelling (a
//!   profile's globs judge the declared name, so `DELETE_ALL` or `files__delete_all ` must not
//!   reach an upstream that would take it for `delete_all`);
//! - a name that leads nowhere but that some upstreams declare (it became ambiguous, or the
//!   names are always qualified) is refused with the qualified names it is exposed as.
//!
//! The order is deterministic: servers in config order, each server's names in its own order.

use std::collections::{BTreeMap, HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::echo::bounded;

/// The separator between a server's prefix and a name in a qualified name.
pub const SEPARATOR: &str = "__";
/// Names reserved for the hangar's own tools.
pub const RESERVED_PREFIX: &str = "hangar_";
/// The scheme of an MCP App's resources (the `io.modelcontextprotocol/ui` extension).
pub const UI_SCHEME: &str = "ui://";
/// The most qualified names a refusal lists (a name many servers declare stays a short answer).
pub const MAX_LISTED: usize = 8;

/// Which names are exposed bare (`tool_access.names`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Names {
    /// A name only one upstream declares is bare; a collision qualifies it on every side.
    #[default]
    BareWhenUnique,
    /// Every name is qualified: a name never changes when servers are added.
    AlwaysQualified,
}

/// The naming settings of one set of servers: the rule, and the prefixes servers chose.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Naming {
    #[serde(default)]
    pub names: Names,
    /// Server id → the prefix its qualified names use instead of the id (`expose_as`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub expose_as: BTreeMap<String, String>,
}

impl Naming {
    /// The prefix of `server`'s qualified names.
    pub fn prefix<'a>(&'a self, server: &'a str) -> &'a str {
        self.expose_as.get(server).map_or(server, String::as_str)
    }

    /// `<prefix>__<name>` for `server`'s `name`; `ui://<prefix>__<rest>` for an app's URI.
    pub fn qualified(&self, server: &str, name: &str) -> String {
        qualify(self.prefix(server), name)
    }

    /// The name `requested` stands for when `server`'s prefix qualifies it.
    pub fn unqualified(&self, server: &str, requested: &str) -> Option<String> {
        unqualify(self.prefix(server), requested)
    }
}

/// `name` under `prefix`: `<prefix>__<name>`, or inside the scheme for an app's `ui://` URI.
fn qualify(prefix: &str, name: &str) -> String {
    match name.strip_prefix(UI_SCHEME) {
        Some(rest) => format!("{UI_SCHEME}{prefix}{SEPARATOR}{rest}"),
        None => format!("{prefix}{SEPARATOR}{name}"),
    }
}

/// The name `requested` is under `prefix`, if it is qualified by it (see [`qualify`]).
fn unqualify(prefix: &str, requested: &str) -> Option<String> {
    match requested.strip_prefix(UI_SCHEME) {
        Some(rest) => Some(format!("{UI_SCHEME}{}", rest.strip_prefix(prefix)?.strip_prefix(SEPARATOR)?)),
        None => Some(requested.strip_prefix(prefix)?.strip_prefix(SEPARATOR)?.to_owned()),
    }
}

/// One exposed name and where it leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed {
    pub exposed: String,
    pub mcp_server: String,
    pub name: String,
}

/// Exposes `(server, names)` pairs, in order, under the rule above.
pub fn expose<'a>(naming: &Naming, servers: impl IntoIterator<Item = (&'a str, Vec<&'a str>)>) -> Vec<Exposed> {
    let servers: Vec<(&str, Vec<&str>)> = servers.into_iter().collect();
    let mut declared_by: HashMap<&str, usize> = HashMap::new();
    for (_, names) in &servers {
        let mut seen = HashSet::new();
        for name in names {
            if seen.insert(*name) {
                *declared_by.entry(*name).or_default() += 1;
            }
        }
    }
    let mut exposed = Vec::new();
    for (server, names) in &servers {
        let mut seen = HashSet::new();
        for name in names {
            if !seen.insert(*name) {
                continue; // an upstream listing a name twice gets it once
            }
            let bare = naming.names == Names::BareWhenUnique
                && declared_by.get(name) == Some(&1)
                && !name.starts_with(RESERVED_PREFIX)
                && !name.starts_with(UI_SCHEME);
            exposed.push(Exposed {
                exposed: if bare { (*name).to_owned() } else { naming.qualified(server, name) },
                mcp_server: (*server).to_owned(),
                name: (*name).to_owned(),
            });
        }
    }
    exposed
}

/// A requested name that leads nowhere, and the qualified names that carry it as their own:
/// several when it became ambiguous, one when it is exposed only qualified, none when no
/// upstream declares it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unknown {
    pub exposed_as: Vec<String>,
}

impl Unknown {
    /// The refusal, in the hangar's words: `Unknown tool: get_current_time; it is now
    /// ambiguous: time__get_current_time, clock__get_current_time`. `what` is `tool`, `prompt`,
    /// ...; every quote of the client's name is bounded, and at most [`MAX_LISTED`] are listed.
    pub fn message(&self, what: &str, requested: &str) -> String {
        let head = format!("Unknown {what}: {}", bounded(requested));
        let listed: Vec<_> = self.exposed_as.iter().take(MAX_LISTED).map(|name| bounded(name)).collect();
        let more = match self.exposed_as.len().saturating_sub(MAX_LISTED) {
            0 => String::new(),
            more => format!(" and {more} more"),
        };
        match self.exposed_as.len() {
            0 => head,
            1 => format!("{head}; it is exposed as {}", listed.join(", ")),
            _ => format!("{head}; it is now ambiguous: {}{more}", listed.join(", ")),
        }
    }
}

/// The exposed names of one set of servers, looked up in one step, built once for as long as no
/// server's names change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    /// Exposed name → (the server's position, its own name).
    by_name: HashMap<String, (usize, String)>,
    /// Each server's prefix, by position.
    prefixes: Vec<String>,
    /// Each server's own names, by position: what its qualified form may lead to.
    declared: Vec<HashSet<String>>,
    /// The length of the longest exposed name: no longer request can be one.
    longest: usize,
}

impl Index {
    /// Indexes `(server, names)` pairs, in order, under the rule above.
    pub fn new<'a>(naming: &Naming, servers: impl IntoIterator<Item = (&'a str, Vec<&'a str>)>) -> Index {
        let servers: Vec<(&str, Vec<&str>)> = servers.into_iter().collect();
        let position: HashMap<&str, usize> = servers.iter().enumerate().map(|(at, (id, _))| (*id, at)).collect();
        let by_name: HashMap<String, (usize, String)> =
            expose(naming, servers.iter().map(|(id, names)| (*id, names.clone())))
                .into_iter()
                .map(|e| {
                    let at = position.get(e.mcp_server.as_str()).copied().unwrap_or_default();
                    (e.exposed, (at, e.name))
                })
                .collect();
        let prefixes = servers.iter().map(|(id, _)| naming.prefix(id).to_owned()).collect();
        let declared = servers.iter().map(|(_, names)| names.iter().map(|n| (*n).to_owned()).collect()).collect();
        let longest = by_name.keys().map(String::len).max().unwrap_or_default();
        Index { by_name, prefixes, declared, longest }
    }

    /// Where `requested` leads: the position of its server (in the order given to [`Index::new`])
    /// and the server's own name for it; else the qualified names it is exposed as.
    pub fn resolve<'r>(&'r self, requested: &'r str) -> Result<(usize, &'r str), Unknown> {
        if let Some((at, name)) = self.by_name.get(requested) {
            return Ok((*at, name.as_str()));
        }
        self.split_qualified(requested).ok_or_else(|| self.unknown(requested))
    }

    /// The qualified form, which always works for a declared name: the server whose prefix
    /// `requested` starts with (followed by the separator and a name it declares), and that
    /// name. Prefixes may themselves hold the separator (`my__srv`), so the longest that fits
    /// wins.
    fn split_qualified<'r>(&'r self, requested: &str) -> Option<(usize, &'r str)> {
        self.prefixes
            .iter()
            .enumerate()
            .filter_map(|(at, prefix)| {
                let name = unqualify(prefix, requested)?;
                let declared = self.declared.get(at)?.get(&name)?;
                Some((at, prefix.len(), declared.as_str()))
            })
            .max_by_key(|(_, len, _)| *len)
            .map(|(at, _, name)| (at, name))
    }

    /// The exposed names that carry `requested` as their server's own name, in config order.
    fn unknown(&self, requested: &str) -> Unknown {
        let exposed_as = self
            .prefixes
            .iter()
            .enumerate()
            .filter(|(_, prefix)| prefix.len() + SEPARATOR.len() + requested.len() <= self.longest)
            .map(|(at, prefix)| (at, qualify(prefix, requested)))
            .filter(|(at, qualified)| {
                self.by_name.get(qualified).is_some_and(|(owner, name)| owner == at && name == requested)
            })
            .map(|(_, qualified)| qualified)
            .collect();
        Unknown { exposed_as }
    }
}

/// Whether a resource URI matches an RFC 6570 level-1 template such as `test://template/{id}/data`.
pub fn template_matches(template: &str, uri: &str) -> bool {
    let mut rest = uri;
    let mut parts = template.split('{');
    let Some(first) = parts.next() else { return false };
    let Some(after) = rest.strip_prefix(first) else { return false };
    rest = after;
    for part in parts {
        let Some((_, literal)) = part.split_once('}') else { return false };
        // The variable takes at least one character, up to the next literal (or the end).
        match literal {
            "" => return !rest.is_empty() && !rest.contains('/'),
            _ => match rest.get(1..).and_then(|tail| tail.find(literal)) {
                Some(at) => rest = &rest[at + 1 + literal.len()..],
                None => return false,
            },
        }
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(exposed: &[Exposed]) -> Vec<&str> {
        exposed.iter().map(|e| e.exposed.as_str()).collect()
    }

    fn naming(names: Names, expose_as: &[(&str, &str)]) -> Naming {
        Naming { names, expose_as: expose_as.iter().map(|(id, p)| ((*id).to_owned(), (*p).to_owned())).collect() }
    }

    fn bare() -> Naming {
        Naming::default()
    }

    /// `resolve` by server id instead of position.
    fn resolve(index: &Index, ids: &[&str], requested: &str) -> Result<(String, String), Vec<String>> {
        index.resolve(requested).map(|(at, name)| (ids[at].to_owned(), name.to_owned())).map_err(|u| u.exposed_as)
    }

    fn found(server: &str, name: &str) -> Result<(String, String), Vec<String>> {
        Ok((server.to_owned(), name.to_owned()))
    }

    fn three() -> [(&'static str, Vec<&'static str>); 3] {
        [("math", vec!["add", "echo"]), ("words", vec!["echo", "shout"]), ("odd", vec!["hangar_list"])]
    }
    const IDS: [&str; 3] = ["math", "words", "odd"];

    #[test]
    fn an_apps_ui_uri_is_always_qualified_inside_its_scheme_and_resolves_back() {
        let naming = Naming::default();
        let servers = || [("a", vec!["ui://dash/app.html", "x://one"]), ("b", vec!["ui://dash/app.html"])];
        let exposed = expose(&naming, servers());
        assert_eq!(names(&exposed), ["ui://a__dash/app.html", "x://one", "ui://b__dash/app.html"]);
        let index = Index::new(&naming, servers());
        assert_eq!(resolve(&index, &["a", "b"], "ui://b__dash/app.html"), found("b", "ui://dash/app.html"));
        assert_eq!(resolve(&index, &["a", "b"], "ui://a__dash/app.html"), found("a", "ui://dash/app.html"));
        assert_eq!(resolve(&index, &["a", "b"], "ui://c__dash/app.html"), Err(vec![]));
        let bare = resolve(&index, &["a", "b"], "ui://dash/app.html");
        assert_eq!(bare, Err(vec!["ui://a__dash/app.html".into(), "ui://b__dash/app.html".into()]));
        assert_eq!(naming.qualified("a", "ui://dash/app.html"), "ui://a__dash/app.html");
    }

    #[test]
    fn an_apps_ui_template_is_qualified_inside_its_scheme_and_a_uri_it_matches_goes_back() {
        let naming = naming(Names::BareWhenUnique, &[("time-a", "clock")]);
        let template = naming.qualified("time-a", "ui://views/{id}.html");
        assert_eq!(template, "ui://clock__views/{id}.html", "by its prefix, inside the scheme");
        assert!(template_matches(&template, "ui://clock__views/7.html"));
        assert!(!template_matches(&template, "ui://views/7.html"), "a bare URI is not the template's");
        let back = naming.unqualified("time-a", "ui://clock__views/7.html");
        assert_eq!(back.as_deref(), Some("ui://views/7.html"));
        assert_eq!(naming.unqualified("time-a", "ui://time-a__views/7.html"), None, "not by the id it replaced");
        assert_eq!(
            naming.unqualified("time-a", "clock__x://one").as_deref(),
            Some("x://one"),
            "other schemes as before"
        );
    }

    #[test]
    fn bare_when_unique_keeps_unique_names_and_qualifies_collisions_dropping_nothing() {
        assert_eq!(Names::default(), Names::BareWhenUnique, "today's rule stays the default");
        let exposed = expose(&bare(), three());
        assert_eq!(names(&exposed), ["add", "math__echo", "words__echo", "shout", "odd__hangar_list"]);
        let index = Index::new(&bare(), three());
        assert_eq!(resolve(&index, &IDS, "add"), found("math", "add"));
        assert_eq!(resolve(&index, &IDS, "words__echo"), found("words", "echo"));
        assert_eq!(resolve(&index, &IDS, "math__add"), found("math", "add"), "qualified always works");
        assert_eq!(resolve(&index, &IDS, "math__nope"), Err(vec![]), "an undeclared name leads nowhere");
        assert_eq!(resolve(&index, &IDS, "math__ADD"), Err(vec![]), "nor does another spelling");
        assert_eq!(resolve(&index, &IDS, "math__add "), Err(vec![]));
        assert_eq!(resolve(&index, &IDS, "ADD"), Err(vec![]));
        assert_eq!(resolve(&index, &IDS, "nope__add"), Err(vec![]));
        assert_eq!(resolve(&index, &IDS, "math__"), Err(vec![]));
        assert_eq!(resolve(&index, &IDS, ""), Err(vec![]));
        assert_eq!(Index::default().resolve("add"), Err(Unknown::default()), "no servers, no names");
    }

    #[test]
    fn an_ambiguous_name_is_refused_with_the_qualified_names_that_exist() {
        let index = Index::new(&bare(), three());
        assert_eq!(resolve(&index, &IDS, "echo"), Err(vec!["math__echo".into(), "words__echo".into()]));
        let unknown = index.resolve("echo").unwrap_err();
        assert_eq!(unknown.message("tool", "echo"), "Unknown tool: echo; it is now ambiguous: math__echo, words__echo");
        // A reserved name is only ever qualified: the one name it has is named.
        let unknown = index.resolve("hangar_list").unwrap_err();
        assert_eq!(
            unknown.message("prompt", "hangar_list"),
            "Unknown prompt: hangar_list; it is exposed as odd__hangar_list"
        );
        assert_eq!(index.resolve("nope").unwrap_err().message("tool", "nope"), "Unknown tool: nope");
    }

    #[test]
    fn always_qualified_names_never_change_when_a_server_is_added() {
        let one = naming(Names::AlwaysQualified, &[]);
        let before = expose(&one, [("time", vec!["get_current_time", "hangar_x"])]);
        assert_eq!(names(&before), ["time__get_current_time", "time__hangar_x"]);
        let after = expose(&one, [("time", vec!["get_current_time", "hangar_x"]), ("clock", vec!["get_current_time"])]);
        assert_eq!(names(&after), ["time__get_current_time", "time__hangar_x", "clock__get_current_time"]);
        assert_eq!(after[..2], before[..], "the first server's names are untouched");

        let index = Index::new(&one, [("time", vec!["get_current_time"])]);
        assert_eq!(resolve(&index, &["time"], "time__get_current_time"), found("time", "get_current_time"));
        let unknown = index.resolve("get_current_time").unwrap_err();
        assert_eq!(unknown.exposed_as, ["time__get_current_time"], "a bare name is never exposed");
        assert_eq!(
            unknown.message("tool", "get_current_time"),
            "Unknown tool: get_current_time; it is exposed as time__get_current_time"
        );
    }

    #[test]
    fn expose_as_replaces_the_id_as_prefix_in_both_modes() {
        let servers = || [("time-a", vec!["get_current_time"]), ("time-b", vec!["get_current_time", "tz"])];
        let ids = ["time-a", "time-b"];
        for names_mode in [Names::BareWhenUnique, Names::AlwaysQualified] {
            let chosen = naming(names_mode, &[("time-a", "clock")]);
            let exposed = expose(&chosen, servers());
            let tz = if names_mode == Names::BareWhenUnique { "tz" } else { "time-b__tz" };
            assert_eq!(names(&exposed), ["clock__get_current_time", "time-b__get_current_time", tz], "{names_mode:?}");
            let index = Index::new(&chosen, servers());
            assert_eq!(resolve(&index, &ids, "clock__get_current_time"), found("time-a", "get_current_time"));
            assert_eq!(resolve(&index, &ids, "clock__other"), Err(vec![]), "only for a declared name");
            assert_eq!(resolve(&index, &ids, "time-a__get_current_time"), Err(vec![]), "the id is no prefix any more");
            assert_eq!(
                index.resolve("get_current_time").unwrap_err().message("tool", "get_current_time"),
                "Unknown tool: get_current_time; it is now ambiguous: clock__get_current_time, time-b__get_current_time"
            );
        }
    }

    #[test]
    fn the_order_follows_the_config_and_duplicates_within_one_server_collapse() {
        let exposed = expose(&bare(), [("b", vec!["z", "a", "z"]), ("a", vec!["m"])]);
        assert_eq!(names(&exposed), ["z", "a", "m"]);
        let exposed = expose(&naming(Names::AlwaysQualified, &[]), [("b", vec!["z", "z"])]);
        assert_eq!(names(&exposed), ["b__z"]);
    }

    #[test]
    fn prefixes_with_separators_still_resolve_to_the_longest_that_fits() {
        let servers = || [("my__srv", vec!["t"]), ("other", vec!["t"]), ("my", vec!["srv__u"])];
        let ids = ["my__srv", "other", "my"];
        let exposed = expose(&bare(), servers());
        assert_eq!(names(&exposed), ["my__srv__t", "other__t", "srv__u"]);
        let index = Index::new(&bare(), servers());
        assert_eq!(resolve(&index, &ids, "my__srv__t"), found("my__srv", "t"));
        assert_eq!(resolve(&index, &ids, "my__srv__u"), found("my", "srv__u"), "the prefix that declares it");
        assert_eq!(resolve(&index, &ids, "my__srv__x"), Err(vec![]), "undeclared under either prefix");
    }

    #[test]
    fn a_refusal_stays_short_however_long_the_name_or_many_the_servers() {
        let long = "n".repeat(100_000);
        let servers: Vec<String> = (0..50).map(|i| format!("s{i}")).collect();
        let index = Index::new(&bare(), servers.iter().map(|s| (s.as_str(), vec![long.as_str()])));
        let unknown = index.resolve(&long).unwrap_err();
        assert_eq!(unknown.exposed_as.len(), 50);
        let message = unknown.message("tool", &long);
        assert!(message.len() < 4096, "{} bytes", message.len());
        assert!(message.ends_with(" and 42 more"), "{}", &message[message.len() - 40..]);
        assert!(message.contains("(100000 bytes)") && message.contains("(100004 bytes)"), "quotes are bounded");
        // A name longer than any exposed one costs no lookups per server.
        assert_eq!(index.resolve(&"m".repeat(200_000)).unwrap_err(), Unknown::default());
    }

    #[test]
    fn naming_travels_as_json_and_defaults_when_absent() {
        let chosen = naming(Names::AlwaysQualified, &[("time-a", "clock")]);
        let json = serde_json::to_value(&chosen).unwrap();
        assert_eq!(json, serde_json::json!({"names": "always_qualified", "expose_as": {"time-a": "clock"}}));
        assert_eq!(serde_json::from_value::<Naming>(json).unwrap(), chosen);
        assert_eq!(serde_json::from_value::<Naming>(serde_json::json!({})).unwrap(), Naming::default());
    }

    #[test]
    fn templates_match_level_one_variables() {
        assert!(template_matches("test://template/{id}/data", "test://template/123/data"));
        assert!(!template_matches("test://template/{id}/data", "test://template//data"));
        assert!(!template_matches("test://template/{id}/data", "test://template/1/other"));
        assert!(template_matches("file:///{path}", "file:///x"));
        assert!(!template_matches("file:///{path}", "file:///"));
        assert!(template_matches("a://{x}-{y}", "a://1-2"));
        assert!(!template_matches("a://static", "a://static/more"));
    }
}
