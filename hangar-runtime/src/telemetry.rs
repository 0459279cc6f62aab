//! Span export over OTLP (HTTP/protobuf), shared by the API and the supervisor.
//!
//! Off unless `telemetry.otlp_endpoint` is set: callers hold an `Option<Telemetry>`, so with
//! export off a call costs one branch and no span work. When on, finished spans go to a bounded
//! queue that the SDK's batch processor drains on a thread of its own (a blocking HTTP client
//! with a timeout), so an exporter that is down or slow never slows or fails a call: spans past
//! the queue are dropped, and export failures are logged at most once every [`WARN_EVERY`].
//! [`Telemetry::shutdown`] flushes what is pending.
//!
//! Spans join the caller's trace ([`TraceContext`]); [`Span::context`] is what the next hop
//! gets as its `traceparent`.

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hangar_core::sync::Unpoisoned;
use hangar_core::trace::TraceContext;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
};

/// How often an export failure may be logged.
pub const WARN_EVERY: Duration = Duration::from_secs(60);
/// One export (an HTTP POST) gives up after this long.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// Finished spans wait at most this long before they are sent (unless `OTEL_BSP_SCHEDULE_DELAY`
/// says otherwise, in milliseconds).
const EXPORT_DELAY: Duration = Duration::from_secs(1);
/// Spans past this many waiting are dropped rather than held.
const MAX_QUEUE: usize = 4096;
/// How long a graceful shutdown waits for the last export.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The hangar's span names and attribute keys, one place for both processes (and dashboards).
pub mod names {
    /// The API answering one request (`tools/call` at `/mcp`, a REST call).
    pub const API_REQUEST: &str = "hangar.api.request";
    /// The supervisor resolving, judging, limiting and making one call.
    pub const ADMISSION: &str = "hangar.supervisor.admission";
    /// One request to an upstream and its answer.
    pub const UPSTREAM: &str = "hangar.upstream.round_trip";
    pub const MCP_SERVER: &str = "mcp_server";
    pub const TOOL: &str = "tool";
    pub const IDENTITY: &str = "identity";
    /// `ok`, `is_error` or the error type (`hangar_core::trace::outcome`).
    pub const OUTCOME: &str = "outcome";
}

#[derive(Debug, thiserror::Error)]
#[error("cannot set up span export to {endpoint}: {reason}")]
pub struct TelemetryError {
    endpoint: String,
    reason: String,
}

/// An exporter of spans to one OTLP/HTTP endpoint.
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

/// Where a span stands towards its neighbours (OTLP's span kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Answers a request from outside (the API's request span).
    Server,
    /// Work within the process (the supervisor's admission).
    Internal,
    /// A request to another process (the upstream round trip).
    Client,
}

impl Telemetry {
    /// Starts exporting to `endpoint` (the config's `telemetry.otlp_endpoint`, a URL checked by
    /// the config; `/v1/traces` is appended) as `service` (`hangar-api`, `hangar-supervisor`).
    pub fn start(endpoint: &str, service: &'static str) -> Result<Telemetry, TelemetryError> {
        let url = traces_url(endpoint);
        // The exporter's HTTP client needs a TLS provider even for plain http; already
        // installed (by an earlier start) is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|err| TelemetryError { endpoint: url.clone(), reason: err.to_string() })?;
        let mut batches = BatchConfigBuilder::default().with_max_queue_size(MAX_QUEUE);
        // The SDK's standard variable may set another delay (the tests make it long, to see
        // that a graceful stop sends what is pending).
        if std::env::var_os("OTEL_BSP_SCHEDULE_DELAY").is_none() {
            batches = batches.with_scheduled_delay(EXPORT_DELAY);
        }
        let processor =
            BatchSpanProcessor::builder(QuietFailures::new(exporter, url.clone())).with_batch_config(batches.build());
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor.build())
            .with_resource(Resource::builder_empty().with_service_name(service).build())
            .build();
        let tracer = provider.tracer(service);
        tracing::info!(endpoint = %url, "exporting spans over OTLP/HTTP");
        Ok(Telemetry { provider, tracer })
    }

    /// Opens a span named `name`, a child of `parent` (the client's or the previous hop's), or
    /// the root of a new trace without one. It ends when dropped or [`Span::end`]ed.
    pub fn span(&self, name: &'static str, kind: Kind, parent: Option<&TraceContext>) -> Span {
        let parent_context = match parent {
            Some(parent) => Context::new().with_remote_span_context(SpanContext::new(
                TraceId::from_bytes(parent.trace_id),
                SpanId::from_bytes(parent.span_id),
                TraceFlags::new(parent.flags),
                true,
                TraceState::NONE,
            )),
            None => Context::new(),
        };
        let kind = match kind {
            Kind::Server => SpanKind::Server,
            Kind::Internal => SpanKind::Internal,
            Kind::Client => SpanKind::Client,
        };
        let span = self.tracer.span_builder(name).with_kind(kind).start_with_context(&self.tracer, &parent_context);
        let tracestate = parent.and_then(|p| p.tracestate.clone());
        Span { span, tracestate }
    }

    /// Sends what is pending and stops exporting. Blocks (up to a few seconds): call it where
    /// blocking is fine, e.g. `spawn_blocking`, or at the very end of a process.
    pub fn shutdown(&self) {
        if let Err(err) = self.provider.shutdown_with_timeout(FLUSH_TIMEOUT) {
            tracing::warn!(error = %err, "spans pending at shutdown may be lost");
        }
    }
}

/// `/v1/traces` under the endpoint's path, unless it already ends there.
fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") { base.to_owned() } else { format!("{base}/v1/traces") }
}

/// One span being recorded.
pub struct Span {
    span: opentelemetry_sdk::trace::Span,
    /// The trace's vendor state, passed on as received.
    tracestate: Option<String>,
}

impl Span {
    /// This span as the parent of the next hop (its `traceparent`).
    pub fn context(&self) -> TraceContext {
        let context = self.span.span_context();
        TraceContext {
            trace_id: context.trace_id().to_bytes(),
            span_id: context.span_id().to_bytes(),
            flags: context.trace_flags().to_u8(),
            tracestate: self.tracestate.clone(),
        }
    }

    pub fn set(&mut self, key: &'static str, value: impl Into<String>) {
        self.span.set_attribute(KeyValue::new(key, value.into()));
    }

    /// Ends it now (dropping it does the same).
    pub fn end(mut self) {
        self.span.end();
    }
}

/// The OTLP exporter, with its failures logged at most once every [`WARN_EVERY`] (with how many
/// spans were lost since), so an endpoint that is down cannot flood the log.
#[derive(Debug)]
struct QuietFailures<E> {
    inner: E,
    endpoint: String,
    last_warned: Mutex<Option<Instant>>,
    lost: AtomicU64,
}

impl<E> QuietFailures<E> {
    fn new(inner: E, endpoint: String) -> Self {
        QuietFailures { inner, endpoint, last_warned: Mutex::new(None), lost: AtomicU64::new(0) }
    }

    fn failed(&self, spans: usize, error: &dyn fmt::Display) {
        let lost = self.lost.fetch_add(spans as u64, Ordering::Relaxed) + spans as u64;
        let mut last = self.last_warned.locked();
        if last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            self.lost.store(0, Ordering::Relaxed);
            tracing::warn!(endpoint = %self.endpoint, %error, lost_spans = lost, "span export failed");
        }
    }
}

impl<E: SpanExporter> SpanExporter for QuietFailures<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        if let Err(err) = &result {
            self.failed(spans, err);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_appended_once() {
        assert_eq!(traces_url("http://127.0.0.1:4318"), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/otlp/"), "http://c:4318/otlp/v1/traces");
        assert_eq!(traces_url("http://c:4318/v1/traces"), "http://c:4318/v1/traces");
    }

    #[test]
    fn a_span_joins_its_parents_trace_and_passes_on_its_state() {
        let telemetry = Telemetry::start("http://127.0.0.1:9", "test").expect("builds without connecting");
        let parent = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Some("a=b"));
        let span = telemetry.span("s", Kind::Internal, parent.as_ref());
        let context = span.context();
        assert_eq!(context.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(context.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert_eq!(context.tracestate.as_deref(), Some("a=b"));
        assert!(context.sampled());
        let root = telemetry.span("r", Kind::Server, None).context();
        // An https endpoint gets a TLS client (rustls on ring), built without panicking.
        assert!(Telemetry::start("https://127.0.0.1:9", "test").is_ok());
        assert_ne!(root.trace_id, [0; 16]);
        assert!(root.sampled());
        span.end();
    }
}
