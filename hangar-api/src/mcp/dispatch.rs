//! The one dispatcher of both eras: a checked request's method to its handler, the result shaped
//! by the era (see [`Era`]).

use axum::http::HeaderMap;
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::ALL_REVISIONS;
use serde_json::{Value, json};

use super::about::INSTRUCTIONS;
use super::era::Era;
use super::id::Id;
use super::params::{ToolCall, Wanted};
use super::reply::McpReply;
use super::{front_door, stream, subscriptions};
use crate::state::Calling;

/// A request its era's checks let through.
pub struct Request {
    pub id: Id,
    pub method: String,
    pub params: Option<Value>,
    /// `params._meta.progressToken` as the client wrote it (see `Incoming::progress_token`).
    pub progress_token: Option<Id>,
}

/// How a handler answered: a result for the era to shape, or a reply of its own (a stream).
enum Answer {
    Result(Value),
    Reply(McpReply),
}

pub async fn dispatch(app: &Calling, headers: &HeaderMap, era: &'static Era, mut request: Request) -> McpReply {
    let answer = if era.serves(&request.method) {
        handle(app, headers, era, &mut request).await
    } else {
        Err(RpcError::method_not_found(&request.method))
    };
    let Request { id, method, .. } = request;
    match answer {
        Ok(Answer::Result(result)) => McpReply::result(&id, (era.finish)(&method, result)),
        Ok(Answer::Reply(reply)) => reply,
        Err(err) => McpReply::error((era.error_status)(&err), &id, &err),
    }
}

/// Runs the request's method; takes its params (and progress token) out of it.
async fn handle(
    app: &Calling,
    headers: &HeaderMap,
    era: &'static Era,
    request: &mut Request,
) -> Result<Answer, RpcError> {
    let supervisor = &app.supervisor;
    let params = request.params.take();
    let (id, method) = (&request.id, request.method.as_str());
    let result = match method {
        "ping" => Ok(json!({})),
        "server/discover" => {
            let capabilities = front_door::capabilities(supervisor).await;
            Ok(json!({"supportedVersions": ALL_REVISIONS, "capabilities": capabilities, "instructions": INSTRUCTIONS}))
        }
        "subscriptions/listen" => {
            let front_door = front_door::enabled(supervisor).await;
            return Ok(Answer::Reply(subscriptions::listen(app, id, params.as_ref(), front_door)));
        }
        "tools/list" => {
            front_door::tools_list(supervisor).await.map(|tools| crate::json::object([("tools", tools.into())]))
        }
        "tools/call" => {
            // Streamed when the client takes an event stream and asked to hear about the call.
            let wanted = stream::accepts_event_stream(headers)
                .then(|| Wanted::from_params(params.as_ref(), request.progress_token.take()))
                .flatten();
            let call = ToolCall::from_params(params)?;
            if let Some(wanted) = wanted
                && let Some(reply) = stream::front_door_call(app, id, &call, wanted, era).await?
            {
                return Ok(Answer::Reply(reply));
            }
            front_door::tools_call(supervisor, &call.name, call.arguments, call.extra).await
        }
        "prompts/list" => front_door::list(supervisor, method, "prompts").await,
        "prompts/get" => front_door::prompts_get(supervisor, params).await,
        "resources/list" => front_door::list(supervisor, method, "resources").await,
        "resources/templates/list" => front_door::list(supervisor, method, "resourceTemplates").await,
        "resources/read" => front_door::resources_read(supervisor, params).await,
        "completion/complete" => front_door::complete(supervisor, params).await,
        "logging/setLevel" => front_door::set_level(supervisor, params).await,
        "resources/subscribe" | "resources/unsubscribe" => front_door::by_uri(supervisor, method, params).await,
        _ => Err(RpcError::method_not_found(method)),
    };
    result.map(Answer::Result)
}
