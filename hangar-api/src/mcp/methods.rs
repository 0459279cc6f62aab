//! What both eras share: who the server is, and `tools/call`'s parameters.

use serde_json::{Value, json};

use super::errors::RpcError;
use super::tools;
use crate::app::AppState;

pub const SERVER_NAME: &str = "hangar";
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
pub const INSTRUCTIONS: &str = "Hangar supervises MCP servers. hangar_list, hangar_status and hangar_health show \
them; hangar_details and hangar_tools show one; hangar_start and hangar_stop control one; hangar_call calls their \
tools, many at once.";

pub fn server_info() -> Value {
    json!({"name": SERVER_NAME, "version": SERVER_VERSION})
}

pub fn capabilities() -> Value {
    json!({"tools": {"listChanged": false}})
}

/// `tools/call`: `params.name` names a hangar tool; `params.arguments` are its arguments.
pub async fn tools_call(app: &AppState, params: Option<Value>) -> Result<Value, RpcError> {
    let mut params = match params {
        Some(Value::Object(map)) => map,
        _ => return Err(RpcError::invalid_params("Invalid params: tools/call needs params with a tool `name`")),
    };
    let name = match params.remove("name") {
        Some(Value::String(name)) => name,
        _ => return Err(RpcError::invalid_params("Invalid params: tools/call needs a string `name`")),
    };
    tools::call(&app.supervisor, &name, params.remove("arguments")).await
}
