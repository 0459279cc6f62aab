//! What both eras share: who the server is, and `tools/call`'s parameters.

use serde_json::Value;

use super::errors::RpcError;
use super::front_door;
use crate::app::AppState;

pub const SERVER_NAME: &str = "hangar";
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
pub const INSTRUCTIONS: &str = "Hangar supervises MCP servers. hangar_list, hangar_status and hangar_health show \
them; hangar_details and hangar_tools show one; hangar_start and hangar_stop control one; hangar_call calls their \
tools, many at once.";

pub fn server_info() -> Value {
    crate::json::object([("name", Value::from(SERVER_NAME)), ("version", Value::from(SERVER_VERSION))])
}

/// The methods both eras route the same way, beyond `tools/call`. `None` if not one of them.
pub async fn shared(app: &AppState, method: &str, params: Option<Value>) -> Option<Result<Value, RpcError>> {
    let supervisor = &app.supervisor;
    Some(match method {
        "tools/list" => {
            front_door::tools_list(supervisor).await.map(|tools| crate::json::object([("tools", tools.into())]))
        }
        "tools/call" => tools_call(app, params).await,
        "prompts/list" => front_door::list(supervisor, method, "prompts").await,
        "prompts/get" => front_door::prompts_get(supervisor, params).await,
        "resources/list" => front_door::list(supervisor, method, "resources").await,
        "resources/templates/list" => front_door::list(supervisor, method, "resourceTemplates").await,
        "resources/read" => front_door::resources_read(supervisor, params).await,
        "completion/complete" => front_door::complete(supervisor, params).await,
        // Legacy only (2026-07-28 removed them; its validation refuses them first).
        "logging/setLevel" => front_door::set_level(supervisor, params).await,
        "resources/subscribe" | "resources/unsubscribe" => front_door::by_uri(supervisor, method, params).await,
        _ => return None,
    })
}

/// `tools/call`: `params.name` names a hangar tool or (front door) an upstream's tool.
pub async fn tools_call(app: &AppState, params: Option<Value>) -> Result<Value, RpcError> {
    let mut params = match params {
        Some(Value::Object(map)) => map,
        _ => return Err(RpcError::invalid_params("Invalid params: tools/call needs params with a tool `name`")),
    };
    let name = match params.remove("name") {
        Some(Value::String(name)) => name,
        _ => return Err(RpcError::invalid_params("Invalid params: tools/call needs a string `name`")),
    };
    let arguments = params.remove("arguments");
    front_door::tools_call(&app.supervisor, &name, arguments, params).await
}
