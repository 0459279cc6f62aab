//! `hangar search TEXT`: the registry's servers whose name holds TEXT (newest version of each),
//! following `nextCursor` page by page; name, version, status and description, each cell shown
//! visibly (`--json`: one JSON object a line).

use std::collections::HashSet;

use hangar_core::terminal::{visible, visible_json};
use serde_json::json;

use crate::registry::Registry;
use crate::setup::SetupError;

/// The most pages followed: a search that matches more says so and stops.
const MAX_PAGES: usize = 50;

pub fn run(registry: &str, text: &str, json: bool) -> Result<(), SetupError> {
    let registry = Registry::new(registry)?;
    let mut rows = vec![["NAME", "VERSION", "STATUS", "DESCRIPTION"].map(str::to_owned).to_vec()];
    let mut cursor: Option<String> = None;
    let mut cursors = HashSet::new();
    for _ in 0..MAX_PAGES {
        let page = registry.page(text, cursor.as_deref())?;
        for entry in &page.servers {
            let server = &entry.server;
            if json {
                let line = json!({"name": server.name, "version": server.version, "status": entry.status(),
                    "description": server.description});
                crate::setup::print(&visible_json(&line.to_string()))?;
            } else {
                let cells = [&server.name, &server.version, entry.status(), &server.description];
                rows.push(cells.iter().map(|cell| visible(cell).into_owned()).collect());
            }
        }
        match page.metadata.next_cursor.filter(|next| !next.is_empty()) {
            // A cursor seen before would loop: the registry's pages end there.
            Some(next) if cursors.insert(next.clone()) => cursor = Some(next),
            _ => {
                cursor = None;
                break;
            }
        }
    }
    if !json {
        if rows.len() == 1 {
            let none = format!("no server in {} matches `{text}`", registry.base());
            crate::setup::print(&visible(&none))?;
        } else {
            crate::setup::print(crate::status::align(&rows).trim_end())?;
        }
    }
    if cursor.is_some() {
        eprintln!("hangar: more than {MAX_PAGES} pages match; narrow the search");
    }
    Ok(())
}
