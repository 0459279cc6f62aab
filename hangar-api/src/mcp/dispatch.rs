//! The one dispatcher of both eras: a checked request's method to its handler, the result shaped
//! by the era (see [`Era`]).

use axum::http::HeaderMap;
use hangar_core::access::ANONYMOUS;
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::{ALL_REVISIONS, EXTENSION_TASKS};
use serde_json::{Value, json};

use super::about::INSTRUCTIONS;
use super::era::Era;
use super::id::Id;
use super::reply::McpReply;
use super::way::{Incoming, Way};
use super::{custom_headers, front_door, relay, relay_batch, stream, subscriptions, tasks, tools, traced};
use crate::state::Calling;
use hangar_runtime::telemetry::{Kind, Span, names as spans};

/// A request its era's checks let through.
pub struct Request {
    pub id: Id,
    pub method: String,
    pub params: Option<Value>,
    /// `params._meta.progressToken` as the client wrote it (see `Incoming::progress_token`).
    pub progress_token: Option<Id>,
    /// The legacy session the request came in (`None` for 2026-07-28): its calls take requests
    /// both ways (`relay`).
    pub session: Option<String>,
    /// The legacy session was not checked yet: the supervisor checks it with the call, which
    /// can only be a front-door call of an upstream's tool (`legacy.rs`, `relay.rs`).
    pub session_unchecked: bool,
}

/// How a handler answered: a result for the era to shape, or a reply of its own (a stream).
enum Answer {
    Result(Value),
    /// A hangar tool's result, its `structuredContent` also rendered as its first block's text
    /// (see [`McpReply::rendered`]).
    Rendered(Value),
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
        Ok(Answer::Result(result)) => McpReply::result(&id, scoped(app, &method, (era.finish)(&method, result))),
        Ok(Answer::Rendered(result)) => McpReply::rendered(&id, scoped(app, &method, (era.finish)(&method, result))),
        Ok(Answer::Reply(reply)) => reply,
        Err(err) => McpReply::error((era.error_status)(&err), &id, &err),
    }
}

/// What the caller's view filters (lists, and what a resource read may reach).
const PER_CALLER: [&str; 5] =
    ["tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"];

/// With authentication configured (every caller is someone, never [`ANONYMOUS`]), what is
/// filtered per caller is `cacheScope: "private"`: a shared cache must not hand one identity's
/// view to another. Without it everyone sees the same, and the era's `"public"` stands.
fn scoped(app: &Calling, method: &str, mut result: Value) -> Value {
    if app.supervisor.caller().identity != ANONYMOUS
        && PER_CALLER.contains(&method)
        && let Some(scope) = result.get_mut("cacheScope")
    {
        *scope = json!("private");
    }
    result
}

/// A `tools/call` in its trace: with span export on, inside the API's request span (a child of
/// the client's context, or a new trace's root), whose context the call carries on; with it
/// off, the client's context (if any) goes on unchanged.
async fn traced_tools_call(
    app: &Calling,
    headers: &HeaderMap,
    era: &'static Era,
    request: &mut Request,
    params: Option<Value>,
) -> Result<Answer, RpcError> {
    let incoming = traced::incoming(headers, params.as_ref());
    let mut span = app.telemetry.as_ref().map(|telemetry| {
        let mut span = telemetry.span(spans::API_REQUEST, Kind::Server, incoming.as_ref());
        span.set(spans::IDENTITY, app.supervisor.caller().identity.clone());
        if let Some(name) = params.as_ref().and_then(|p| p.get("name")).and_then(Value::as_str) {
            span.set(spans::TOOL, name);
        }
        span
    });
    let traced_app;
    let app = match span.as_ref().map(Span::context).or(incoming) {
        Some(trace) => {
            traced_app = app.traced(trace);
            &traced_app
        }
        None => app,
    };
    let answer = tools_call(app, headers, era, request, params).await;
    if let Some(mut span) = span.take() {
        let outcome = match &answer {
            Ok(Answer::Result(result) | Answer::Rendered(result)) => traced::outcome(Ok(result)),
            Ok(Answer::Reply(_)) => "streamed".to_owned(),
            Err(err) => traced::outcome(Err(err)),
        };
        span.set(spans::OUTCOME, outcome);
        span.end();
    }
    answer
}

/// `tools/call`: the call and its way read once ([`Incoming`]), then one request to the
/// supervisor (a legacy session's stream relays each of its own) and one answer, shaped by the
/// way and the era.
async fn tools_call(
    app: &Calling,
    headers: &HeaderMap,
    era: &'static Era,
    request: &mut Request,
    params: Option<Value>,
) -> Result<Answer, RpcError> {
    let session = request.session.as_deref();
    let Incoming { mut call, opted_in, way } = Incoming::read(headers, params, session, request.progress_token.take())?;
    // A hangar tool the caller's view does not list is refused here, whatever its way.
    if front_door::route(&call.name) == front_door::Route::Hangar
        && let Some(refused) = tools::refusal(&app.supervisor, &call.name).await?
    {
        return Ok(Answer::Result(refused));
    }
    if era.mirrors_params {
        call.param_headers = Some(custom_headers::read(headers)?);
    }
    // A legacy session's `hangar_call`: its client may cancel it by its id, whichever way it goes.
    let cancellable;
    let app = match session {
        Some(session) if call.name == "hangar_call" => {
            cancellable = app.cancellable_by(session, request.id.to_value());
            &cancellable
        }
        _ => app,
    };
    let (supervisor, id) = (&app.supervisor, &request.id);
    let reply = match way {
        Way::LegacyCall(wanted) => {
            let session = session.unwrap_or_default();
            let session = (session, request.session_unchecked);
            relay::tools_call(supervisor, headers, session, id, call, wanted, era).await?
        }
        Way::LegacyBatch(spec, wanted) => {
            let session = (session.unwrap_or_default(), id);
            relay_batch::hangar_call(supervisor, headers, session, &call, spec, wanted, era).await?
        }
        Way::StreamedCall(wanted) => {
            let takes_tasks = opted_in && session.is_none();
            stream::front_door_call(supervisor, id, &call, wanted, era, takes_tasks).await?
        }
        Way::StreamedBatch(spec, wanted, runs) => stream::hangar_call(supervisor, id, &call, spec, wanted, era, runs),
        Way::FrontDoor => return front_door::call(supervisor, call, opted_in).await.map(Answer::Result),
        Way::BatchTask => {
            return tools::hangar_call_task(supervisor, call.arguments, &call.extra).await.map(Answer::Result);
        }
        Way::BatchHeld => {
            return tools::hangar_call_held(supervisor, call.arguments, &call.extra).await.map(Answer::Result);
        }
        Way::Hangar => return tools::call(supervisor, &call.name, call.arguments).await.map(Answer::Rendered),
    };
    Ok(Answer::Reply(reply))
}

/// Runs the request's method; takes its params (and progress token) out of it.
async fn handle(
    app: &Calling,
    headers: &HeaderMap,
    era: &'static Era,
    request: &mut Request,
) -> Result<Answer, RpcError> {
    // In a legacy session, what is forwarded is that session's (its own instance of a
    // `per_session` server).
    let in_session;
    let supervisor = match request.session.as_deref() {
        Some(session) => {
            in_session = app.supervisor.in_session(session);
            &in_session
        }
        None => &app.supervisor,
    };
    let params = request.params.take();
    let (id, method) = (&request.id, request.method.as_str());
    let result = match method {
        "ping" => Ok(json!({})),
        "server/discover" => {
            let mut capabilities = front_door::capabilities(supervisor).await;
            // A listen's `resourceSubscriptions` are honoured through the front door.
            if front_door::enabled(supervisor).await {
                capabilities["resources"]["subscribe"] = json!(true);
            }
            // It runs calls as tasks (SEP-2663), beside what the front door declares.
            capabilities["extensions"][EXTENSION_TASKS] = json!({});
            Ok(json!({"supportedVersions": ALL_REVISIONS, "capabilities": capabilities, "instructions": INSTRUCTIONS}))
        }
        "subscriptions/listen" => {
            let front_door = front_door::enabled(supervisor).await;
            return subscriptions::listen(app, id, params.as_ref(), front_door).map(Answer::Reply);
        }
        "tools/list" => {
            front_door::tools_list(supervisor).await.map(|tools| crate::json::object([("tools", tools.into())]))
        }
        "tools/call" => return traced_tools_call(app, headers, era, request, params).await,
        "prompts/list" => front_door::list(supervisor, method, "prompts").await,
        "prompts/get" => front_door::prompts_get(supervisor, params).await,
        "resources/list" => front_door::list(supervisor, method, "resources").await,
        "resources/templates/list" => front_door::list(supervisor, method, "resourceTemplates").await,
        "resources/read" => front_door::resources_read(supervisor, params).await,
        "completion/complete" => front_door::complete(supervisor, params).await,
        "logging/setLevel" => front_door::set_level(supervisor, params).await,
        "resources/subscribe" | "resources/unsubscribe" => front_door::by_uri(supervisor, method, params).await,
        "tasks/get" | "tasks/update" | "tasks/cancel" => tasks::handle(supervisor, method, params).await,
        _ => Err(RpcError::method_not_found(method)),
    };
    result.map(Answer::Result)
}
