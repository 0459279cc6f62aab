//! The front door's naming rule: how upstream tools and prompts are exposed under one endpoint.
//!
//! The rule, in full (also in the README):
//! - a name that exactly one upstream declares, and that does not start with `hangar_`, is
//!   exposed as it is;
//! - a name that several upstreams declare is exposed once per upstream as `<server>__<name>`,
//!   so nothing is dropped and nobody's name wins by accident;
//! - a name starting with `hangar_` (the hangar's own tools) is always exposed as
//!   `<server>__<name>`;
//! - `<server>__<name>` also resolves for every upstream name, listed or not, so a client may
//!   always use the qualified form.
//!
//! The order is deterministic: servers in config order, each server's names in its own order.

use std::collections::HashMap;

/// The separator between a server id and a name in a qualified name.
pub const SEPARATOR: &str = "__";
/// Names reserved for the hangar's own tools.
pub const RESERVED_PREFIX: &str = "hangar_";

/// One exposed name and where it leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed {
    pub exposed: String,
    pub mcp_server: String,
    pub name: String,
}

/// Exposes `(server, names)` pairs, in order, under the rule above.
pub fn expose<'a>(servers: impl IntoIterator<Item = (&'a str, Vec<&'a str>)>) -> Vec<Exposed> {
    let servers: Vec<(&str, Vec<&str>)> = servers.into_iter().collect();
    let mut declared_by: HashMap<&str, usize> = HashMap::new();
    for (_, names) in &servers {
        let mut seen = std::collections::HashSet::new();
        for name in names {
            if seen.insert(*name) {
                *declared_by.entry(*name).or_default() += 1;
            }
        }
    }
    let mut exposed = Vec::new();
    for (server, names) in &servers {
        let mut seen = std::collections::HashSet::new();
        for name in names {
            if !seen.insert(*name) {
                continue; // an upstream listing a name twice gets it once
            }
            let plain = declared_by.get(name) == Some(&1) && !name.starts_with(RESERVED_PREFIX);
            exposed.push(Exposed {
                exposed: if plain { (*name).to_owned() } else { qualified(server, name) },
                mcp_server: (*server).to_owned(),
                name: (*name).to_owned(),
            });
        }
    }
    exposed
}

/// `<server>__<name>`.
pub fn qualified(server: &str, name: &str) -> String {
    format!("{server}{SEPARATOR}{name}")
}

/// Where an exposed (or qualified) name leads, given what [`expose`] produced and the server ids.
pub fn resolve(exposed: &[Exposed], server_ids: &[&str], requested: &str) -> Option<(String, String)> {
    if let Some(hit) = exposed.iter().find(|e| e.exposed == requested) {
        return Some((hit.mcp_server.clone(), hit.name.clone()));
    }
    split_qualified(server_ids.iter().copied(), requested)
        .map(|(at, name)| (server_ids[at].to_owned(), name.to_owned()))
}

/// The qualified form, which always works: the position of the server id `requested` starts
/// with (followed by the separator and a name), and that name. Server ids never contain the
/// separator's characters at their start, so split at the first separator after a known id.
fn split_qualified<'a, 'r>(server_ids: impl Iterator<Item = &'a str>, requested: &'r str) -> Option<(usize, &'r str)> {
    server_ids.enumerate().find_map(|(at, id)| {
        let name = requested.strip_prefix(id)?.strip_prefix(SEPARATOR)?;
        (!name.is_empty()).then_some((at, name))
    })
}

/// The exposed names of one set of servers, looked up in one step: what [`resolve`] answers,
/// built once for as long as no server's names change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    /// Exposed name → (the server's position, its own name).
    by_name: HashMap<String, (usize, String)>,
    server_ids: Vec<String>,
}

impl Index {
    /// Indexes `(server, names)` pairs, in order, under the rule above.
    pub fn new<'a>(servers: impl IntoIterator<Item = (&'a str, Vec<&'a str>)>) -> Index {
        let servers: Vec<(&str, Vec<&str>)> = servers.into_iter().collect();
        let server_ids: Vec<String> = servers.iter().map(|(id, _)| (*id).to_owned()).collect();
        let position = |id: &str| server_ids.iter().position(|s| s == id).unwrap_or_default();
        let by_name = expose(servers.iter().map(|(id, names)| (*id, names.clone())))
            .into_iter()
            .map(|e| {
                let at = position(&e.mcp_server);
                (e.exposed, (at, e.name))
            })
            .collect();
        Index { by_name, server_ids }
    }

    /// Where `requested` leads: the position of its server (in the order given to [`Index::new`])
    /// and the server's own name for it.
    pub fn resolve<'r>(&'r self, requested: &'r str) -> Option<(usize, &'r str)> {
        if let Some((at, name)) = self.by_name.get(requested) {
            return Some((*at, name.as_str()));
        }
        split_qualified(self.server_ids.iter().map(String::as_str), requested)
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

    #[test]
    fn unique_names_stay_collisions_are_qualified_and_nothing_is_dropped() {
        let exposed =
            expose([("math", vec!["add", "echo"]), ("words", vec!["echo", "shout"]), ("odd", vec!["hangar_list"])]);
        assert_eq!(names(&exposed), ["add", "math__echo", "words__echo", "shout", "odd__hangar_list"]);
        let ids = ["math", "words", "odd"];
        assert_eq!(resolve(&exposed, &ids, "add"), Some(("math".into(), "add".into())));
        assert_eq!(resolve(&exposed, &ids, "words__echo"), Some(("words".into(), "echo".into())));
        assert_eq!(resolve(&exposed, &ids, "echo"), None, "an ambiguous plain name resolves to nobody");
        assert_eq!(resolve(&exposed, &ids, "math__add"), Some(("math".into(), "add".into())), "qualified always works");
        assert_eq!(resolve(&exposed, &ids, "nope__add"), None);
        assert_eq!(resolve(&exposed, &ids, "math__"), None);
    }

    #[test]
    fn the_index_resolves_as_resolve_does() {
        let servers =
            || [("math", vec!["add", "echo"]), ("words", vec!["echo", "shout"]), ("odd", vec!["hangar_list"])];
        let exposed = expose(servers());
        let index = Index::new(servers());
        let ids = ["math", "words", "odd"];
        for requested in [
            "add",
            "echo",
            "math__echo",
            "words__echo",
            "shout",
            "odd__hangar_list",
            "hangar_list",
            "math__add",
            "math__nope",
            "nope__add",
            "math__",
            "",
        ] {
            let by_index = index.resolve(requested).map(|(at, name)| (ids[at].to_owned(), name.to_owned()));
            assert_eq!(by_index, resolve(&exposed, &ids, requested), "{requested}");
        }
        assert_eq!(index.resolve("words__echo"), Some((1, "echo")));
        assert_eq!(Index::default().resolve("add"), None, "no servers, no names");
    }

    #[test]
    fn the_order_follows_the_config_and_duplicates_within_one_server_collapse() {
        let exposed = expose([("b", vec!["z", "a", "z"]), ("a", vec!["m"])]);
        assert_eq!(names(&exposed), ["z", "a", "m"]);
    }

    #[test]
    fn server_ids_with_separators_still_resolve() {
        let exposed = expose([("my__srv", vec!["t"]), ("other", vec!["t"])]);
        assert_eq!(names(&exposed), ["my__srv__t", "other__t"]);
        assert_eq!(resolve(&exposed, &["my__srv", "other"], "my__srv__t"), Some(("my__srv".into(), "t".into())));
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
