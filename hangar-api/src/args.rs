//! The API's command line.

use std::path::PathBuf;

use clap::Parser;
use hangar_runtime::logging::LogFormat;

use crate::{guard, listen, serve};

/// The hangar's gateway: REST under /api and MCP at /mcp, backed by the supervisor.
#[derive(Debug, Parser)]
#[command(version)]
pub struct Args {
    /// The supervisor's control socket [default: $RUNTIME_DIRECTORY/supervisor.sock, else
    /// $XDG_RUNTIME_DIR/hangar/supervisor.sock, else /tmp/hangar-$USER/supervisor.sock]
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// The file holding the control key this API proves to the supervisor, read at every
    /// connect [default: beside the socket, `<socket>.key`, where the supervisor writes it].
    #[arg(long, value_name = "FILE", env = "HANGAR_CONTROL_KEY_FILE")]
    pub control_key: Option<PathBuf>,
    /// Address to serve HTTP on, e.g. 127.0.0.1:PORT, localhost:PORT, [::1]:PORT (port 0 picks
    /// one). Beyond loopback (e.g. 0.0.0.0:8000) every request but /health/* is refused (503) while
    /// no authentication is configured (auth.api_keys, auth.oauth or --api-keys). Refused (exit 69)
    /// if anything already answers on an address it resolves to. Not used under systemd socket
    /// activation (`LISTEN_FDS`), where the listener is the socket passed as fd 3.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8000", value_parser = listen::parse_addr)]
    pub listen: String,
    /// Serve on the listening TCP socket passed as standard input, not on --listen (the
    /// supervisor passes on the one `hangar run` bound).
    #[arg(long)]
    pub listen_stdin: bool,
    /// Log format on stderr [default: json under Kubernetes (KUBERNETES_SERVICE_HOST set) when
    /// stderr is not a terminal, else human].
    #[arg(long, value_name = "FORMAT", value_enum, env = "HANGAR_LOG_FORMAT", default_value_t = LogFormat::detected(), hide_default_value = true)]
    pub log_format: LogFormat,
    /// A file of API key hashes (`sha256:<hex>` or `NAME:sha256:<hex>` a line), merged with the
    /// config's `auth.api_keys`; every route but /health/* then needs a key (`X-API-Key` or
    /// `Authorization: Bearer`).
    #[arg(long, value_name = "FILE", env = "HANGAR_API_KEYS_FILE")]
    pub api_keys: Option<PathBuf>,
    /// Serve beyond loopback even while no authentication is configured (every caller is then
    /// anonymous and sees everything). Without it, such requests are refused (503).
    #[arg(long)]
    pub unsafe_no_auth: bool,
    /// Also let web pages from this origin (`https://host[:port]`) call the API (repeat it, or
    /// separate origins with commas). Without it, a request with an `Origin` header is served only
    /// from the hangar's own origin and, on a loopback listener, from loopback origins; every
    /// other origin, and `null`, is refused (403), as is a non-loopback `Host` on a loopback
    /// listener and a POST without `Content-Type: application/json`.
    #[arg(long, value_name = "ORIGIN", env = "HANGAR_API_ALLOW_ORIGINS", value_delimiter = ',', value_parser = guard::parse_allowed_origin)]
    pub allow_origin: Vec<guard::AllowedOrigin>,
    /// Connections served at once [default: 4096, or fewer if the open-file limit is lower]. Past
    /// it, a few reserve connections serve one request each (health probes, an operator's
    /// command); past those, a new connection evicts the one that has waited longest without
    /// sending a request (answered 503 and closed), or is itself answered 503 and closed.
    #[arg(long, value_name = "N", env = "HANGAR_API_MAX_CONNECTIONS", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// Seconds a client has to send a request's headers, from connecting (or, on a kept-alive
    /// connection, from the request's first byte), and then as long again for its body; a slower
    /// connection is closed.
    #[arg(long, value_name = "SECONDS", env = "HANGAR_API_HEADER_TIMEOUT_S", default_value_t = serve::DEFAULT_HEADER_TIMEOUT_S, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout_s: u64,
    /// Seconds a kept-alive connection may wait for its next request before it is closed. A
    /// request in progress (an event stream included) is never idle.
    #[arg(long, value_name = "SECONDS", env = "HANGAR_API_IDLE_TIMEOUT_S", default_value_t = serve::DEFAULT_IDLE_TIMEOUT_S, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub idle_timeout_s: u64,
    /// Export spans over OTLP/HTTP (protobuf) to this endpoint (`/v1/traces` is appended), as the
    /// supervisor does for `telemetry.otlp_endpoint` (it passes this flag to the API it starts).
    /// Off without it.
    #[arg(long, value_name = "URL", env = "HANGAR_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Seconds the requests in progress may take to finish after SIGTERM or SIGINT. Meanwhile
    /// /health/ready answers 503 and every new request but /health/* and a task's `tasks/*`
    /// follow-ups is refused 503 with `Retry-After`. The supervisor passes its config's
    /// `shutdown.grace_s`.
    #[arg(long, value_name = "SECONDS", env = "HANGAR_SHUTDOWN_GRACE_S", default_value_t = 10.0, value_parser = parse_grace)]
    pub shutdown_grace_s: f64,
}

/// Seconds from 0 to an hour, fractions allowed (as the config's `shutdown.grace_s`).
fn parse_grace(raw: &str) -> Result<f64, String> {
    let config =
        hangar_core::shutdown::ShutdownConfig { grace_s: raw.parse().map_err(|_| format!("not a number: {raw}"))? };
    config.check().map(|()| config.grace_s).map_err(|err| err.message)
}
