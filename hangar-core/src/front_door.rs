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
    // The qualified form always works; server ids never contain the separator's characters
    // at their start, so split at the first separator after a known id.
    server_ids.iter().find_map(|id| {
        let name = requested.strip_prefix(id)?.strip_prefix(SEPARATOR)?;
        (!name.is_empty()).then(|| ((*id).to_owned(), name.to_owned()))
    })
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
