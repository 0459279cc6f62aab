//! Traces: a client's W3C trace context goes through the API and the supervisor to the upstream,
//! and with `telemetry.otlp_endpoint` set the three spans of a call (API request, supervisor
//! admission, upstream round trip) are exported over OTLP/HTTP to a loopback receiver here,
//! decoded with the real OTLP protobuf messages, in the client's trace and linked parent to
//! child. With export off nothing is sent and the context still reaches the upstream; with the
//! endpoint down calls go on and the failure is logged, not repeated per batch.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, free_port, poll};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;

const API_REQUEST: &str = "hangar.api.request";
const ADMISSION: &str = "hangar.supervisor.admission";
const UPSTREAM: &str = "hangar.upstream.round_trip";

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
const HEADER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const HEADER_SPAN: &str = "b7ad6b7169203331";

/// One exported span as the receiver decoded it.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    name: String,
    kind: i32,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attributes: Vec<(String, String)>,
}

impl Got {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// A loopback OTLP/HTTP receiver: POST /v1/traces, protobuf, answered 200.
struct Receiver {
    endpoint: String,
    spans: Arc<Mutex<Vec<Got>>>,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    fn start() -> Receiver {
        Receiver::answering(200)
    }

    /// A receiver that answers every export with `status` (a failing collector with 503).
    fn answering(status: u16) -> Receiver {
        let server = tiny_http::Server::http("127.0.0.1:0").expect("bind the OTLP receiver");
        let port = server.server_addr().to_ip().expect("an IP listener").port();
        let (spans, requests, stop) =
            (Arc::<Mutex<Vec<Got>>>::default(), Arc::<AtomicUsize>::default(), Arc::<AtomicBool>::default());
        let (into, counted, stopping) = (spans.clone(), requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                let Ok(Some(mut request)) = server.recv_timeout(Duration::from_millis(50)) else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let mut body = Vec::new();
                let read = request.as_reader().read_to_end(&mut body);
                let is_traces = *request.method() == tiny_http::Method::Post && request.url() == "/v1/traces";
                let decoded =
                    read.ok().filter(|_| is_traces).and_then(|_| ExportTraceServiceRequest::decode(&body[..]).ok());
                let status = match decoded {
                    Some(export) => {
                        into.lock().unwrap().extend(flatten(export));
                        status
                    }
                    None => 400,
                };
                let header = tiny_http::Header::from_bytes("Content-Type", "application/x-protobuf").unwrap();
                let _ = request.respond(tiny_http::Response::empty(status).with_header(header));
            }
        });
        Receiver { endpoint: format!("http://127.0.0.1:{port}"), spans, requests, stop, thread: Some(thread) }
    }

    /// The spans of `trace_id` once all of `names` have arrived.
    fn trace(&self, trace_id: &str, names: &[&str]) -> Vec<Got> {
        poll(&format!("spans {names:?} of trace {trace_id}"), Duration::from_secs(20), || {
            let spans: Vec<Got> =
                self.spans.lock().unwrap().iter().filter(|s| s.trace_id == trace_id).cloned().collect();
            names.iter().all(|name| spans.iter().any(|s| s.name == *name)).then_some(spans)
        })
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn flatten(export: ExportTraceServiceRequest) -> Vec<Got> {
    let text = |value: Option<any_value::Value>| match value {
        Some(any_value::Value::StringValue(s)) => s,
        other => format!("{other:?}"),
    };
    let mut out = Vec::new();
    for resource_spans in export.resource_spans {
        let resource = resource_spans.resource.unwrap_or_default();
        let service = resource
            .attributes
            .into_iter()
            .find(|kv| kv.key == "service.name")
            .map(|kv| text(kv.value.and_then(|v| v.value)))
            .unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            out.push(Got {
                service: service.clone(),
                name: span.name,
                kind: span.kind,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                attributes: span
                    .attributes
                    .into_iter()
                    .map(|kv| (kv.key, text(kv.value.and_then(|v| v.value))))
                    .collect(),
            });
        }
    }
    out
}

fn config(endpoint: Option<&str>) -> String {
    let telemetry = endpoint.map(|e| format!("telemetry: {{otlp_endpoint: \"{e}\"}}\n")).unwrap_or_default();
    format!(
        r#"{telemetry}tool_access: {{mode: front_door}}
mcp_servers:
  math:
    command: ["{{fake}}", "--tools", "add,echo_meta"]
"#
    )
}

/// The `traceparent` the upstream saw, split into (trace id, span id), and its `tracestate`.
fn seen_by_upstream(answer: &Value) -> ((String, String), Option<String>) {
    let meta = &answer["body"]["result"]["structuredContent"]["_meta"];
    let traceparent =
        meta["traceparent"].as_str().unwrap_or_else(|| panic!("no traceparent reached the upstream: {answer}"));
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!((parts.len(), parts[0], parts[3]), (4, "00", "01"), "{traceparent}");
    ((parts[1].to_owned(), parts[2].to_owned()), meta["tracestate"].as_str().map(str::to_owned))
}

fn call_echo_meta(hangar: &Hangar, meta: Value, headers: &[(&str, &str)]) -> Value {
    let response = hangar.mcp_with("tools/call", json!({"name": "echo_meta", "arguments": {}}), meta, headers);
    assert_eq!(response.status, 200, "{}", response.text);
    assert!(response.body["result"]["isError"] != true, "{}", response.text);
    json!({"body": response.body})
}

fn one<'a>(spans: &'a [Got], name: &str) -> &'a Got {
    let named: Vec<&Got> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(named.len(), 1, "one {name} span: {spans:#?}");
    named[0]
}

/// The three spans of one call: one trace, each the parent of the next, the upstream's request
/// carrying the round-trip span; attributes and services as documented.
fn assert_chain(spans: &[Got], client_span: Option<&str>, upstream_saw: &(String, String)) {
    let (api, admission, upstream) = (one(spans, API_REQUEST), one(spans, ADMISSION), one(spans, UPSTREAM));
    if let Some(client_span) = client_span {
        assert_eq!(api.parent_span_id, client_span, "the API span is the client's child: {api:#?}");
    } else {
        assert_eq!(api.parent_span_id, "", "without a client context the API span is the root: {api:#?}");
    }
    assert_eq!(admission.parent_span_id, api.span_id, "admission under the API request: {spans:#?}");
    assert_eq!(upstream.parent_span_id, admission.span_id, "the round trip under admission: {spans:#?}");
    assert_eq!(
        upstream_saw,
        &(upstream.trace_id.clone(), upstream.span_id.clone()),
        "the upstream's parent is the round trip"
    );
    assert_eq!((api.service.as_str(), api.kind), ("hangar-api", SpanKind::Server as i32));
    assert_eq!((admission.service.as_str(), admission.kind), ("hangar-supervisor", SpanKind::Internal as i32));
    assert_eq!((upstream.service.as_str(), upstream.kind), ("hangar-supervisor", SpanKind::Client as i32));
    for span in [admission, upstream] {
        assert_eq!(span.attribute("mcp_server"), Some("math"), "{span:#?}");
    }
    for span in [api, admission, upstream] {
        assert_eq!(span.attribute("tool"), Some("echo_meta"), "{span:#?}");
        assert_eq!(span.attribute("identity"), Some("anonymous"), "{span:#?}");
        assert_eq!(span.attribute("outcome"), Some("ok"), "{span:#?}");
    }
}

#[test]
fn a_calls_three_spans_are_exported_in_the_clients_trace() {
    let receiver = Receiver::start();
    let hangar = Hangar::start(&config(Some(&receiver.endpoint)));

    // Context in `_meta`, as the 2026-07-28 revision carries it.
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let meta = json!({"traceparent": traceparent, "tracestate": "rojo=00f067aa0ba902b7"});
    let answer = call_echo_meta(&hangar, meta, &[]);
    let (saw, tracestate) = seen_by_upstream(&answer);
    assert_eq!(saw.0, CLIENT_TRACE, "the upstream's request is in the client's trace");
    assert_ne!(saw.1, CLIENT_SPAN, "its parent is the hangar's span, not the client's");
    assert_eq!(tracestate.as_deref(), Some("rojo=00f067aa0ba902b7"), "tracestate passes on");
    let spans = receiver.trace(CLIENT_TRACE, &[API_REQUEST, ADMISSION, UPSTREAM]);
    assert_chain(&spans, Some(CLIENT_SPAN), &saw);

    // Context in the HTTP header only.
    let header = format!("00-{HEADER_TRACE}-{HEADER_SPAN}-01");
    let answer = call_echo_meta(&hangar, json!({}), &[("traceparent", &header)]);
    let (saw, _) = seen_by_upstream(&answer);
    assert_eq!(saw.0, HEADER_TRACE, "the header's trace reaches the upstream");
    let spans = receiver.trace(HEADER_TRACE, &[API_REQUEST, ADMISSION, UPSTREAM]);
    assert_chain(&spans, Some(HEADER_SPAN), &saw);

    // No context: the hangar starts a trace, and the upstream is in it.
    let answer = call_echo_meta(&hangar, json!({}), &[]);
    let (saw, _) = seen_by_upstream(&answer);
    assert!(![CLIENT_TRACE, HEADER_TRACE].contains(&saw.0.as_str()), "a new trace: {saw:?}");
    let spans = receiver.trace(&saw.0, &[API_REQUEST, ADMISSION, UPSTREAM]);
    assert_chain(&spans, None, &saw);

    // A malformed traceparent is ignored, not refused: the call works in a trace of the hangar's.
    let answer = call_echo_meta(&hangar, json!({"traceparent": "00-nonsense"}), &[("traceparent", "garbage")]);
    let (saw, _) = seen_by_upstream(&answer);
    let spans = receiver.trace(&saw.0, &[API_REQUEST, ADMISSION, UPSTREAM]);
    assert_chain(&spans, None, &saw);
}

#[test]
fn an_http_upstream_gets_the_context_in_meta_and_in_the_traceparent_header() {
    let receiver = Receiver::start();
    let port = free_port();
    let yaml = format!(
        r#"telemetry: {{otlp_endpoint: "{}"}}
tool_access: {{mode: front_door}}
mcp_servers:
  math:
    mode: http
    command: ["{{fake}}", "--http", "127.0.0.1:{port}", "--tools", "add,echo_meta"]
    endpoint: http://127.0.0.1:{port}/mcp
"#,
        receiver.endpoint
    );
    let hangar = Hangar::start(&yaml);
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let answer = call_echo_meta(&hangar, json!({"traceparent": traceparent}), &[]);
    let (saw, _) = seen_by_upstream(&answer);
    let meta = &answer["body"]["result"]["structuredContent"]["_meta"];
    assert_eq!(meta["http_traceparent"], meta["traceparent"], "the header says what `_meta` says: {meta}");
    let spans = receiver.trace(CLIENT_TRACE, &[API_REQUEST, ADMISSION, UPSTREAM]);
    assert_chain(&spans, Some(CLIENT_SPAN), &saw);
}

#[test]
fn a_graceful_stop_sends_the_spans_still_pending() {
    let receiver = Receiver::start();
    // Spans would wait ten minutes for their batch: only the stop's flush can send them.
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "600000")];
    let mut hangar = Hangar::start_with_env(&config(Some(&receiver.endpoint)), &[], &env);
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let answer = call_echo_meta(&hangar, json!({"traceparent": traceparent}), &[]);
    let (saw, _) = seen_by_upstream(&answer);
    assert_eq!(receiver.requests.load(Ordering::SeqCst), 0, "nothing sent before the stop");
    assert!(hangar.terminate().success(), "{}", hangar.log());
    let spans = receiver.trace(CLIENT_TRACE, &[API_REQUEST, ADMISSION, UPSTREAM]);
    assert_chain(&spans, Some(CLIENT_SPAN), &saw);
}

#[test]
fn with_export_off_nothing_is_sent_and_the_context_passes_through() {
    let receiver = Receiver::start();
    let mut hangar = Hangar::start(&config(None));
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let answer = call_echo_meta(&hangar, json!({"traceparent": traceparent, "tracestate": "a=b"}), &[]);
    assert_eq!(seen_by_upstream(&answer), ((CLIENT_TRACE.into(), CLIENT_SPAN.into()), Some("a=b".into())), "unchanged");
    let header = format!("00-{HEADER_TRACE}-{HEADER_SPAN}-01");
    let answer = call_echo_meta(&hangar, json!({}), &[("traceparent", &header)]);
    assert_eq!(seen_by_upstream(&answer).0, (HEADER_TRACE.into(), HEADER_SPAN.into()), "the header's, unchanged");
    let plain = call_echo_meta(&hangar, json!({}), &[]);
    assert_eq!(plain["body"]["result"]["structuredContent"]["_meta"].get("traceparent"), None, "no trace is made up");
    // The audit trail names each call's trace, and none for the call that carried none.
    let journal = hangar.path("state").join("journal.sqlite");
    let traces = crate::journal_audit::wait_for(&journal, "three audited calls", |all| {
        let calls: Vec<Value> = all
            .iter()
            .filter(|e| e["kind"] == "audit" && e["tool"] == "echo_meta")
            .map(|e| e["trace_id"].clone())
            .collect();
        (calls.len() == 3).then_some(calls)
    });
    assert_eq!(traces, [json!(CLIENT_TRACE), json!(HEADER_TRACE), Value::Null]);
    // A graceful stop would flush any exporter: after it, still nothing arrived.
    assert!(hangar.terminate().success(), "{}", hangar.log());
    assert_eq!(receiver.requests.load(Ordering::SeqCst), 0, "no span is sent with export off");
    assert!(!hangar.log().contains("exporting spans"), "{}", hangar.log());
}

#[test]
fn an_exporter_that_is_down_neither_fails_calls_nor_floods_the_log() {
    // Nothing listens at the endpoint: every export is refused.
    let down = format!("http://127.0.0.1:{}", free_port());
    let hangar = Hangar::start(&config(Some(&down)));
    for n in 0..20 {
        let added = hangar.mcp("tools/call", json!({"name": "add", "arguments": {"a": n, "b": 1}}));
        assert_eq!(added.body["result"]["structuredContent"], json!({"result": n + 1}), "{}", added.text);
    }
    poll("the export failures logged", Duration::from_secs(20), || {
        (hangar.log().matches("span export failed").count() >= 2).then_some(())
    });
    drop(hangar);

    // A collector that fails every export, many times over: each process says so once.
    let failing = Receiver::answering(503);
    let hangar = Hangar::start(&config(Some(&failing.endpoint)));
    for round in 0..4 {
        for n in 0..5 {
            let added = hangar.mcp("tools/call", json!({"name": "add", "arguments": {"a": n, "b": round}}));
            assert_eq!(added.body["result"]["structuredContent"], json!({"result": n + round}), "{}", added.text);
        }
        // Each round's spans (three a call) are sent, and refused, before the next round.
        poll("the round's spans offered to the collector", Duration::from_secs(30), || {
            let spans = failing.spans.lock().unwrap();
            let distinct: std::collections::HashSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
            (distinct.len() >= 15 * (round as usize + 1)).then_some(())
        });
    }
    assert_eq!(hangar.log().matches("span export failed").count(), 2, "once per process: {}", hangar.log());
}
