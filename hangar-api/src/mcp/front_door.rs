//! The front door: the upstreams' own tools, prompts and resources, served at `/mcp` beside the
//! `hangar_*` tools, so an ordinary MCP client uses them without knowing about `hangar_call`.
//!
//! Names follow `hangar_core::front_door` (`tool_access.names` and each server's `expose_as`,
//! which the supervisor sends with its catalog). Declarations and results pass through untouched; a JSON-RPC error
//! keeps its code, and the upstream's own message as far as `tool_access.upstream_errors` allows.

use hangar_core::custom_headers::ParamCheck;
use hangar_core::echo::bounded;
use hangar_core::front_door::{self, Exposed, Index, Naming};
use hangar_core::ipc::{
    CallSpec, Called, ErrorKind, FrontDoor, IpcError, Relay, Stance, Target, UPSTREAM_DATA_DETAIL,
    UPSTREAM_MESSAGE_DETAIL,
};
use hangar_core::jsonrpc::{INVALID_PARAMS, RpcError};
use hangar_core::mcp::{
    EXTENSION_UI, HELD_CALL_STATE_PREFIX, LEGACY_RESOURCE_NOT_FOUND, META_CLIENT_INFO, META_PROTOCOL_VERSION,
    REQUEST_STATE,
};
use serde_json::{Map, Value, json};

use super::errors::{header_mismatch, missing_capability};
use super::params::ToolCall;
use super::{stance, tools};
use crate::supervisor::AsCaller;

/// Whether the front door is on (asks the supervisor; cheap once servers are discovered).
pub async fn enabled(supervisor: &AsCaller) -> bool {
    supervisor.front_door().await.is_ok_and(|f| f.front_door)
}

/// The capabilities `server/discover` and `initialize` declare.
pub async fn capabilities(supervisor: &AsCaller) -> Value {
    if enabled(supervisor).await {
        json!({
            "tools": {"listChanged": true},
            "prompts": {"listChanged": false},
            "resources": {"listChanged": false},
            "completions": {},
            "logging": {},
            // Upstreams' MCP Apps pass through (`apps.rs`).
            "extensions": {EXTENSION_UI: hangar_core::mcp::apps_extension()},
        })
    } else {
        // No upstream's prompts or resources: the lists are empty, a name or URI is unknown.
        json!({"tools": {"listChanged": false}, "prompts": {"listChanged": false}, "resources": {"listChanged": false}})
    }
}

/// `tools/list`: the hangar's tools the caller's view lists, then every exposed upstream tool,
/// declared as upstream did.
pub async fn tools_list(supervisor: &AsCaller) -> Result<Vec<Value>, RpcError> {
    let own = tools::listed(supervisor).await?;
    let mut list = tools::definitions();
    list.retain(|tool| tool["name"].as_str().is_some_and(|name| own.iter().any(|t| t == name)));
    let catalog = supervisor.catalog().await.map_err(internal)?;
    if !catalog.front_door {
        return Ok(list);
    }
    let per_server = catalog
        .servers
        .into_iter()
        .map(|server| {
            let mut tools = server.tools;
            // An app's reference names its own server's app, as resources/list names it.
            tools.iter_mut().for_each(|tool| super::apps::rewrite_tool(&catalog.naming, &server.mcp_server, tool));
            (server.mcp_server, tools)
        })
        .collect();
    list.extend(rename(&catalog.naming, per_server, "name"));
    Ok(list)
}

/// Where a `tools/call` goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// One of the `hangar_*` tools.
    Hangar,
    /// (Front door) an upstream's tool by its exposed name, which the supervisor resolves: it
    /// holds the tool lists, so no name is stale once a change has been announced.
    Exposed,
}

/// Whether a tool name is the hangar's own or a front-door name.
pub fn route(name: &str) -> Route {
    if name.starts_with(front_door::RESERVED_PREFIX) { Route::Hangar } else { Route::Exposed }
}

/// Where a front-door name leads, asked before a call that must know it is routable before it
/// answers (an event stream, once started, cannot turn into an error response). With a
/// 2026-07-28 client's `stance`, a tool that runs only as a task is refused (-32021) to a client
/// that does not take tasks.
pub async fn resolve(
    supervisor: &AsCaller,
    name: &str,
    param_check: Option<Box<ParamCheck>>,
    stance: Option<Stance>,
) -> Result<Target, RpcError> {
    supervisor.resolve(name, param_check, stance).await.map_err(refused)
}

/// The supervisor refused a front-door name (or the front door is off): `Unknown tool`, in the
/// words the supervisor rendered (`front_door::Unknown::message`: bounded, and naming the
/// qualified names an ambiguous name now has), as a JSON-RPC error. A supervisor that does not
/// answer is an internal error.
pub fn refused(err: IpcError) -> RpcError {
    match err.kind {
        ErrorKind::UnknownTool => RpcError::invalid_params(err.message),
        ErrorKind::HeaderMismatch => header_mismatch(err.message),
        ErrorKind::MissingCapability => missing_capability(err),
        _ => internal(err),
    }
}

/// An upstream tool's arguments: an object (absent means empty).
pub fn upstream_arguments(arguments: Option<Value>) -> Result<Value, RpcError> {
    match arguments {
        None | Some(Value::Null) => Ok(json!({})),
        Some(Value::Object(map)) => Ok(Value::Object(map)),
        Some(_) => Err(RpcError::invalid_params("Invalid params: `arguments` must be an object")),
    }
}

/// The client's params for the upstream, without the protocol version (the hangar speaks its
/// own to each upstream); `None` when nothing is left.
pub fn pass_on(mut extra: Map<String, Value>) -> Option<Value> {
    strip_protocol_meta(&mut extra);
    (!extra.is_empty()).then_some(Value::Object(extra))
}

/// `prompts/list`, `resources/list`, `resources/templates/list`: every upstream's, together.
/// Without the front door: none (an empty list, with the caching hints its era adds).
pub async fn list(supervisor: &AsCaller, method: &str, key: &str) -> Result<Value, RpcError> {
    let front_door = served(supervisor).await?;
    let per_server = gather(supervisor, &front_door.servers, method, key).await;
    Ok(json!({ key: rename(&front_door.naming, per_server, field_of(key)) }))
}

/// `prompts/get` by exposed name.
pub async fn prompts_get(supervisor: &AsCaller, params: Option<Value>) -> Result<Value, RpcError> {
    let front_door = served(supervisor).await?;
    let mut params = object(params)?;
    let name = params.get("name").and_then(Value::as_str).map(str::to_owned);
    let name = name.ok_or_else(|| RpcError::invalid_params("Invalid params: prompts/get needs a string `name`"))?;
    let (server, original) = prompt_owner(supervisor, &front_door, &name).await?;
    params.insert("name".into(), json!(original));
    strip_protocol_meta(&mut params);
    supervisor.forward(&server, "prompts/get", Value::Object(params)).await.or_else(upstream_failure)
}

/// `resources/read` by URI: the server that lists it, else the first whose template matches.
pub async fn resources_read(supervisor: &AsCaller, params: Option<Value>) -> Result<Value, RpcError> {
    let front_door = served(supervisor).await?;
    let mut params = object(params)?;
    let uri = params.get("uri").and_then(Value::as_str).map(str::to_owned);
    let uri = uri.ok_or_else(|| RpcError::invalid_params("Invalid params: resources/read needs a string `uri`"))?;
    let target = resource_owner(supervisor, &front_door, &uri).await;
    let Some((server, original)) = target else {
        let uri = bounded(&uri);
        return Err(RpcError::new(INVALID_PARAMS, format!("Resource not found: {uri}")).with_data(json!({"uri": uri})));
    };
    params.insert("uri".into(), json!(original));
    strip_protocol_meta(&mut params);
    let mut read =
        supervisor.forward(&server, "resources/read", Value::Object(params)).await.or_else(upstream_failure)?;
    // The contents name the resource as the client asked for it (its exposed URI).
    if let Some(contents) = read.get_mut("contents").and_then(Value::as_array_mut) {
        for content in contents.iter_mut().filter(|content| content["uri"] == json!(original)) {
            content["uri"] = json!(uri);
        }
    }
    Ok(read)
}

/// Each server's items of one list method; a server that serves none (or is down) has none.
async fn gather(supervisor: &AsCaller, servers: &[String], method: &str, key: &str) -> Vec<(String, Vec<Value>)> {
    let mut per_server = Vec::new();
    for server in servers {
        let items = match supervisor.forward(server, method, json!({})).await {
            Ok(result) => result.get(key).and_then(Value::as_array).cloned().unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        per_server.push((server.clone(), items));
    }
    per_server
}

fn field_of(key: &str) -> &'static str {
    match key {
        "prompts" => "name",
        "resources" => "uri",
        _ => "uriTemplate",
    }
}

/// Each server and the names (or URIs) of its items, as the naming rule takes them.
fn names_of<'a>(
    per_server: &'a [(String, Vec<Value>)],
    field: &'a str,
) -> impl Iterator<Item = (&'a str, Vec<&'a str>)> {
    per_server.iter().map(move |(server, items)| {
        (server.as_str(), items.iter().filter_map(|i| i.get(field).and_then(Value::as_str)).collect())
    })
}

fn exposed_of(naming: &Naming, per_server: &[(String, Vec<Value>)], field: &str) -> Vec<Exposed> {
    front_door::expose(naming, names_of(per_server, field))
}

/// Where an exposed name among `per_server`'s items leads: the server and its own name.
fn lookup(
    naming: &Naming,
    per_server: &[(String, Vec<Value>)],
    field: &str,
    requested: &str,
) -> Result<(String, String), front_door::Unknown> {
    let index = Index::new(naming, names_of(per_server, field));
    let (at, original) = index.resolve(requested)?;
    Ok((per_server[at].0.clone(), original.to_owned()))
}

/// The server whose prompt a front-door prompt name is, and its own name for it; else `Unknown
/// prompt`, naming the qualified names an ambiguous one now has.
async fn prompt_owner(supervisor: &AsCaller, front_door: &FrontDoor, name: &str) -> Result<(String, String), RpcError> {
    let per_server = gather(supervisor, &front_door.servers, "prompts/list", "prompts").await;
    lookup(&front_door.naming, &per_server, "name", name)
        .map_err(|unknown| RpcError::invalid_params(unknown.message("prompt", name)))
}

/// `completion/complete`: to the server whose prompt (by exposed name) or resource (by URI or
/// template) the reference names.
pub async fn complete(supervisor: &AsCaller, params: Option<Value>) -> Result<Value, RpcError> {
    let front_door = front_door_servers(supervisor, "completion/complete").await?;
    let mut params = object(params)?;
    let reference = params.get("ref").cloned().unwrap_or(Value::Null);
    let kind = reference.get("type").and_then(Value::as_str).unwrap_or_default();
    let (server, field, original) = match kind {
        "ref/prompt" => {
            let name = reference.get("name").and_then(Value::as_str).unwrap_or_default();
            let (server, original) = prompt_owner(supervisor, &front_door, name).await?;
            (server, "name", original)
        }
        "ref/resource" => {
            let uri = reference.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned();
            let (server, original) = resource_owner(supervisor, &front_door, &uri)
                .await
                .ok_or_else(|| RpcError::invalid_params(format!("Unknown resource: {}", bounded(&uri))))?;
            (server, "uri", original)
        }
        _ => return Err(RpcError::invalid_params("Invalid params: `ref` must be a ref/prompt or a ref/resource")),
    };
    params.insert("ref".into(), {
        let mut reference = reference;
        reference[field] = json!(original);
        reference
    });
    strip_protocol_meta(&mut params);
    supervisor.forward(&server, "completion/complete", Value::Object(params)).await.or_else(upstream_failure)
}

/// Legacy `resources/subscribe` and `resources/unsubscribe`: to the server that has the URI.
pub async fn by_uri(supervisor: &AsCaller, method: &str, params: Option<Value>) -> Result<Value, RpcError> {
    let front_door = served(supervisor).await?;
    let mut params = object(params)?;
    let uri = params.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned();
    let (server, original) = resource_owner(supervisor, &front_door, &uri)
        .await
        .ok_or_else(|| RpcError::invalid_params(format!("Resource not found: {}", bounded(&uri))))?;
    params.insert("uri".into(), json!(original));
    supervisor.forward(&server, method, Value::Object(params)).await.or_else(upstream_failure)
}

/// Legacy `logging/setLevel`: every running upstream gets it; the answer is empty. Without the
/// front door no upstream logs reach the client anyway: accepted, with nothing to pass on.
pub async fn set_level(supervisor: &AsCaller, params: Option<Value>) -> Result<Value, RpcError> {
    let params = Value::Object(object(params)?);
    let front_door = supervisor.front_door().await.map_err(internal)?;
    if !front_door.front_door {
        return Ok(json!({}));
    }
    for server in &front_door.servers {
        // A server without logging simply says so; that is no failure of the client's request.
        let _ = supervisor.forward(server, "logging/setLevel", params.clone()).await;
    }
    Ok(json!({}))
}

/// The server that lists `uri` (exposed name → original, bare or qualified), else the first
/// whose template, exposed as it is, matches it (the URI less the template's prefix, if it is
/// exposed qualified). A template exposed only qualified (a collision, or `always_qualified`)
/// matches only the qualified URI, as a listed name would. A URI no server lists or matches
/// leads nowhere, as a name no upstream declares does.
async fn resource_owner(supervisor: &AsCaller, front_door: &FrontDoor, uri: &str) -> Option<(String, String)> {
    let resources = gather(supervisor, &front_door.servers, "resources/list", "resources").await;
    if let Ok(found) = lookup(&front_door.naming, &resources, "uri", uri) {
        return Some(found);
    }
    let listed = gather(supervisor, &front_door.servers, "resources/templates/list", "resourceTemplates").await;
    let matching = exposed_of(&front_door.naming, &listed, "uriTemplate")
        .into_iter()
        .find(|e| front_door::template_matches(&e.exposed, uri))?;
    // A qualified template matched: the URI is qualified the same way.
    let original = match matching.exposed == matching.name {
        true => uri.to_owned(),
        false => front_door.naming.unqualified(&matching.mcp_server, uri)?,
    };
    Some((matching.mcp_server, original))
}

/// The servers whose prompts and resources `/mcp` serves: the front door's, or none when it is
/// off (egress declares prompts and resources, and has none: a name or URI is then unknown).
async fn served(supervisor: &AsCaller) -> Result<FrontDoor, RpcError> {
    let mut front_door = supervisor.front_door().await.map_err(internal)?;
    if !front_door.front_door {
        front_door.servers.clear();
    }
    Ok(front_door)
}

/// The front door's servers (their ids, in config order) and naming, or `method` is not found:
/// the front door is off.
async fn front_door_servers(supervisor: &AsCaller, method: &str) -> Result<FrontDoor, RpcError> {
    let front_door = supervisor.front_door().await.map_err(internal)?;
    if front_door.front_door { Ok(front_door) } else { Err(RpcError::method_not_found(method)) }
}

/// Names each item by the rule, keeping every other field as the upstream declared it.
fn rename(naming: &Naming, per_server: Vec<(String, Vec<Value>)>, field: &str) -> Vec<Value> {
    let exposed = exposed_of(naming, &per_server, field);
    let mut out = Vec::new();
    for (server, items) in per_server {
        for mut item in items {
            let Some(name) = item.get(field).and_then(Value::as_str) else { continue };
            if let Some(hit) = exposed.iter().find(|e| e.mcp_server == server && e.name == name) {
                item[field] = json!(hit.exposed);
                out.push(item);
            }
        }
    }
    out
}

fn object(params: Option<Value>) -> Result<Map<String, Value>, RpcError> {
    match params {
        Some(Value::Object(map)) => Ok(map),
        _ => Err(RpcError::invalid_params("Invalid params: expected an object")),
    }
}

/// The client's protocol version and identity are the hangar's business (it speaks its own to
/// each upstream); its capabilities and everything else pass on.
fn strip_protocol_meta(params: &mut Map<String, Value>) {
    if let Some(Value::Object(meta)) = params.get_mut("_meta") {
        meta.remove(META_PROTOCOL_VERSION);
        meta.remove(META_CLIENT_INFO);
    }
}

/// An upstream's JSON-RPC error keeps its code (bridged to 2026-07-28), and its own message
/// (and `data`) as far as the supervisor passed them on (`tool_access.upstream_errors`: bounded,
/// control characters stripped); anything else the hangar could not do is an error result in its
/// own words.
pub fn upstream_failure(err: IpcError) -> Result<Value, RpcError> {
    let detail = |key: &str| err.details.as_ref().and_then(|d| d.get(key)).filter(|d| !d.is_null()).cloned();
    let code = detail("jsonrpc_code").as_ref().and_then(Value::as_i64);
    let data = detail("jsonrpc_data").or_else(|| detail(UPSTREAM_DATA_DETAIL));
    let upstream_message = detail(UPSTREAM_MESSAGE_DETAIL).and_then(|m| m.as_str().map(str::to_owned));
    match (err.kind, code) {
        (ErrorKind::UpstreamError, Some(code)) => {
            let code = if code == LEGACY_RESOURCE_NOT_FOUND { INVALID_PARAMS } else { code };
            let error = RpcError::new(code, upstream_message.unwrap_or(err.message));
            Err(match data {
                Some(data) => error.with_data(data),
                None => error,
            })
        }
        _ => Ok(json!({
            "content": [{"type": "text", "text": err.message}],
            "isError": true,
            "structuredContent": {"error": err.message, "error_type": err.kind.as_str(), "details": err.details},
        })),
    }
}

fn internal(err: IpcError) -> RpcError {
    RpcError::internal(err.message)
}

/// A front-door call's refusal or failure, as its client sees it: an unknown name (or no
/// supervisor, a header mismatch, a tool that runs only as a task) is a JSON-RPC error, an
/// upstream's JSON-RPC error keeps its code, anything else is an error result.
pub fn refused_call(err: IpcError) -> Result<Value, RpcError> {
    let refused_here = [
        ErrorKind::UnknownTool,
        ErrorKind::SupervisorUnavailable,
        ErrorKind::HeaderMismatch,
        ErrorKind::MissingCapability,
    ];
    if refused_here.contains(&err.kind) { Err(refused(err)) } else { upstream_failure(err) }
}

/// The server that has `uri` (as the client wrote it) and the URI that server knows it by: where
/// a legacy session's subscription lives upstream.
pub async fn resource_owner_of(supervisor: &AsCaller, uri: &str) -> Option<(String, String)> {
    let front_door = front_door_servers(supervisor, "resources/subscribe").await.ok()?;
    resource_owner(supervisor, &front_door, uri).await
}

/// A front-door `tools/call` of an upstream tool: for a client that takes tasks, one the
/// supervisor answers as it is or turns into a task; for any other, a plain call.
pub async fn call(supervisor: &AsCaller, call: ToolCall, opted_in: bool) -> Result<Value, RpcError> {
    let ToolCall { name, arguments, extra, param_headers } = call;
    let arguments = match upstream_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(bad) => {
            resolve(supervisor, &name, None, None).await?;
            return Err(bad);
        }
    };
    let resumes = resumes_held_call(&extra);
    let extra = pass_on(extra);
    let stance = stance::modern(extra.as_ref(), opted_in);
    let called = Called::One { target: Target::Exposed { name }, arguments, timeout_ms: None };
    let param_headers = param_headers.map(Box::new);
    let spec = CallSpec { param_headers, ..CallSpec::new(called, stance, Relay::default(), extra) };
    let answer = supervisor.call(spec).1.await;
    call_answer(answer, resumes)
}

/// Whether a call's params retry a call the hangar holds (its `requestState` is the hangar's).
pub fn resumes_held_call(params: &Map<String, Value>) -> bool {
    params.get(REQUEST_STATE).and_then(Value::as_str).is_some_and(|state| state.starts_with(HELD_CALL_STATE_PREFIX))
}

/// A front-door call's answer as its client sees it (`resumes`: it retried a held call).
pub fn call_answer(answer: Result<Value, IpcError>, resumes: bool) -> Result<Value, RpcError> {
    match answer {
        // A retry naming no call the hangar holds (unknown, expired, spent or another's).
        Err(err) if err.kind == ErrorKind::InvalidArgument && resumes => Err(RpcError::invalid_params(err.message)),
        Err(err) => refused_call(err),
        Ok(result) => Ok(result),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::ipc::Request;
    use hangar_core::mcp::{EXTENSION_TASKS, META_CLIENT_CAPABILITIES};

    #[tokio::test]
    async fn only_a_client_that_takes_tasks_has_its_call_sent_as_a_task_call() {
        use hangar_core::access::Caller;
        use hangar_core::ipc::{CallEra, TakesTasks};
        use std::sync::Arc;

        let fake = crate::testing::FakeSupervisor::new();
        let supervisor = AsCaller::new(fake.clone() as Arc<dyn crate::supervisor::Supervisor>, Caller::anonymous());
        let tool_call = |extensions: Value| {
            let meta = json!({META_CLIENT_CAPABILITIES: {"extensions": extensions}});
            ToolCall::from_params(Some(json!({"name": "echo", "arguments": {"x": 1}, "_meta": meta}))).unwrap()
        };
        // The fake knows no front-door name: each answer is a refusal; what was sent counts.
        let _ = call(&supervisor, tool_call(json!({})), false).await;
        let _ = call(&supervisor, tool_call(json!({EXTENSION_TASKS: {}})), true).await;
        let sent = fake.requests.lock().unwrap().clone();
        assert_eq!(sent.len(), 2, "one request a call, no resolve before it: {sent:?}");
        let stance = |request: &Request| match request {
            Request::Call(spec) => match &spec.called {
                Called::One { target: Target::Exposed { name }, .. } if name == "echo" => Some(spec.stance.clone()),
                _ => None,
            },
            _ => None,
        };
        let plain = stance(&sent[0]).expect("a call by front-door name");
        assert_eq!((plain.era, plain.tasks), (CallEra::Modern, None), "a plain call: {:?}", sent[0]);
        let task = stance(&sent[1]).expect("a call by front-door name");
        assert_eq!(task.tasks, Some(TakesTasks { shortcut_ms: stance::SHORTCUT_MS }), "a task call: {:?}", sent[1]);
    }
}
