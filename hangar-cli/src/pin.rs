//! `hangar pin NAME [--write --config PATH]`: the `capabilities.tools.pinned` block of a running
//! server's current tools, from the digests `GET /api/mcp_servers/{id}/tools` reports; printed
//! ready to paste, or written into the config file in place (`hangar_core::pin_edit`).

use std::path::Path;

use hangar_core::config::MAX_CONFIG_BYTES;
use hangar_core::pin_edit;
use hangar_core::tool_digest;
use indexmap::IndexMap;
use serde_json::json;

use crate::client::{Api, segment};
use crate::error::CliError;

pub fn run(api: &Api, name: &str, config: Option<&Path>, json: bool) -> Result<(), CliError> {
    let pins = current_pins(api, name)?;
    let Some(path) = config else {
        let text = if json { json!({"pinned": pins}).to_string() } else { pin_edit::pinned_block(&pins) };
        // The block's names are JSON-quoted (YAML double-quoted scalars): escaped as JSON's are.
        return crate::emit_json(text.trim_end());
    };
    write_pins(path, name, &pins)?;
    let count = pins.len();
    let tools = if count == 1 { "tool" } else { "tools" };
    let done = format!("pinned {count} {tools} of {name} in {}; `hangar reload` applies them", path.display());
    crate::emit(&hangar_core::terminal::visible(&done))
}

/// Each current tool's digest, in the order the server declares them.
fn current_pins(api: &Api, name: &str) -> Result<IndexMap<String, String>, CliError> {
    let details = api.get(&format!("/api/mcp_servers/{}", segment(name)))?;
    let state = details.body["state"].as_str().unwrap_or("unknown");
    if !matches!(state, "ready" | "degraded") {
        return Err(CliError::NotServing { name: name.to_owned(), state: state.to_owned() });
    }
    let answer = api.get(&format!("/api/mcp_servers/{}/tools", segment(name)))?;
    let wrong = |reason: &str| CliError::Protocol { url: api.base().to_owned(), reason: reason.to_owned() };
    let tools = answer.body["tools"].as_array().ok_or_else(|| wrong("the tools answer has no `tools` list"))?;
    let mut pins = IndexMap::new();
    for tool in tools {
        match (tool["name"].as_str(), tool["digest"].as_str()) {
            (Some(tool), Some(digest)) if tool_digest::is_digest(digest) => {
                pins.insert(tool.to_owned(), digest.to_owned());
            }
            _ => return Err(wrong("a tool without a name or a sha256 digest")),
        }
    }
    Ok(pins)
}

/// Rewrites the config at `path` with the pins, atomically (a temporary file beside it, then a
/// rename), keeping its permissions; a symlink is followed and its target rewritten.
fn write_pins(path: &Path, name: &str, pins: &IndexMap<String, String>) -> Result<(), CliError> {
    let read_error = |reason: String| CliError::ConfigRead { path: path.to_owned(), reason };
    let text = hangar_core::small_file::read_regular(path, MAX_CONFIG_BYTES).map_err(|e| read_error(e.to_string()))?;
    let edited = pin_edit::with_pins(&text, name, pins)
        .map_err(|source| CliError::ConfigEdit { path: path.to_owned(), source })?;
    crate::setup::replace_file(path, &edited)
        .map_err(|err| CliError::ConfigWrite { path: path.to_owned(), reason: err.to_string() })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_it_cannot_edit_safely_is_left_alone_and_exits_65() {
        let dir = std::env::temp_dir().join(format!("hangar-pin-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hangar.yaml");
        let flow = "mcp_servers:\n  m: {command: [x]}  # flow style\n";
        std::fs::write(&path, flow).unwrap();
        let pins: IndexMap<String, String> = [("add".to_string(), format!("sha256:{}", "a".repeat(64)))].into();
        let err = write_pins(&path, "m", &pins).unwrap_err();
        assert_eq!(hangar_runtime::exit::Sysexit::exit_code(&err), 65, "{err}");
        assert!(err.to_string().contains("not a block mapping"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), flow, "untouched");
        std::fs::write(&path, "mcp_servers:\n  m:\n    command: [x]  # kept\n").unwrap();
        write_pins(&path, "m", &pins).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.starts_with("mcp_servers:\n  m:\n    command: [x]  # kept\n    capabilities:\n"), "{written}");
        let err = write_pins(&path, "other", &pins).unwrap_err();
        assert_eq!(hangar_runtime::exit::Sysexit::exit_code(&err), 78, "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
