//! The one dispatcher of both eras: a checked request's method to its handler, the result shaped
//! by the era (see [`Era`]).

use axum::http::HeaderMap;
use hangar_core::access::ANONYMOUS;
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::ALL_REVISIONS;
use serde_json::{Value, json};

use super::about::INSTRUCTIONS;
use super::era::Era;
use super::id::Id;
use super::params::{ToolCall, Wanted};
use super::reply::McpReply;
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
        Ok(Answer::Result(result)) => McpReply::result(&id, scoped(app, &method, (era.finish)(&method, result))),
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
            Ok(Answer::Result(result)) => traced::outcome(Ok(result)),
            Ok(Answer::Reply(_)) => "streamed".to_owned(),
            Err(err) => traced::outcome(Err(err)),
        };
        span.set(spans::OUTCOME, outcome);
        span.end();
    }
    answer
}

async fn tools_call(
    app: &Calling,
    headers: &HeaderMap,
    era: &'static Era,
    request: &mut Request,
    params: Option<Value>,
) -> Result<Answer, RpcError> {
    // Streamed when the client takes an event stream and asked to hear about the call.
    let wanted = stream::accepts_event_stream(headers)
        .then(|| Wanted::from_params(params.as_ref(), request.progress_token.take()))
        .flatten();
    let opted_in = tasks::opted_in(params.as_ref());
    let mut call = ToolCall::from_params(params)?;
    // A hangar tool the caller's view does not list is refused here, for every path below.
    if front_door::route(&call.name) == front_door::Route::Hangar
        && let Some(refused) = tools::refusal(&app.supervisor, &call.name).await?
    {
        return Ok(Answer::Result(refused));
    }
    if era.mirrors_params {
        call.param_headers = Some(custom_headers::read(headers)?);
    }
    if let Some(session) = &request.session
        && front_door::route(&call.name) == front_door::Route::Exposed
    {
        let reply = relay::tools_call(&app.supervisor, headers, session, &request.id, call, wanted, era).await?;
        return Ok(Answer::Reply(reply));
    }
    // A legacy session's `hangar_call`: its calls declare the session's client capabilities,
    // their questions reach the client on the call's stream, and the client may cancel it by
    // its id, as a call above. (Arguments it cannot read are refused below, as JSON.)
    if let Some(session) = &request.session
        && call.name == "hangar_call"
        && let Some(spec) = tools::hangar_call_spec(call.arguments.clone())
    {
        let session = (session.as_str(), &request.id);
        let reply = relay_batch::hangar_call(&app.supervisor, headers, session, &call, spec, wanted, era).await?;
        return Ok(Answer::Reply(reply));
    }
    // A legacy session's `hangar_call` refused: its client may cancel it by its id, as a call above.
    let cancellable;
    let app = match &request.session {
        Some(session) if call.name == "hangar_call" => {
            cancellable = app.cancellable_by(session, request.id.to_value());
            &cancellable
        }
        _ => app,
    };
    // A legacy session's client cannot poll, so its streamed `hangar_call` is no task (and its
    // calls to upstreams went by `relay` above).
    let takes_tasks = opted_in && request.session.is_none();
    if let Some(wanted) = wanted
        && let Some(reply) =
            stream::front_door_call(app, &request.id, &call, wanted, era, takes_tasks, request.session.is_none())
                .await?
    {
        return Ok(Answer::Reply(reply));
    }
    if front_door::route(&call.name) == front_door::Route::Exposed {
        return tasks::front_door_call(&app.supervisor, call, opted_in).await.map(Answer::Result);
    }
    // Outside a legacy session (whose client cannot poll), an opted-in client's `hangar_call`
    // is the supervisor's to run, and may become a task.
    if opted_in && request.session.is_none() && call.name == "hangar_call" {
        let result = tools::hangar_call_task(&app.supervisor, call.arguments, &call.extra).await;
        return result.map(Answer::Result);
    }
    // A 2026-07-28 client that can be asked something: the supervisor runs its `hangar_call`,
    // so that the calls' questions reach it as one `input_required`, and the retry resumes them.
    if request.session.is_none() && call.name == "hangar_call" && tools::takes_questions(&call.extra) {
        return tools::hangar_call_held(&app.supervisor, call.arguments, &call.extra).await.map(Answer::Result);
    }
    tools::call(&app.supervisor, &call.name, call.arguments).await.map(Answer::Result)
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
            let mut capabilities = front_door::capabilities(supervisor).await;
            capabilities["extensions"] = tasks::extensions();
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
