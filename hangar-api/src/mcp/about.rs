//! Who the server is, as both eras tell it (`initialize`, `server/discover`, each 2026-07-28
//! result's `_meta`).

use serde_json::Value;

const SERVER_NAME: &str = "hangar";
const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
pub const INSTRUCTIONS: &str = "Hangar supervises MCP servers. hangar_list, hangar_status and hangar_health show \
them; hangar_details and hangar_tools show one; hangar_start and hangar_stop control one; hangar_call calls their \
tools, many at once.";

pub fn server_info() -> Value {
    crate::json::object([("name", Value::from(SERVER_NAME)), ("version", Value::from(SERVER_VERSION))])
}
