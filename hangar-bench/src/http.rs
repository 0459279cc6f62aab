//! One keep-alive HTTP/1.1 connection per client, straight on hyper's connection API: no pool,
//! no redirects, nothing between the timer and the socket.

use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONNECTION, HOST, HeaderName, HeaderValue};
use hyper::http::response::Parts;
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How long one request may take before it counts as failed (and its connection is dropped).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Where requests go: `http://host:port/path`.
#[derive(Debug, Clone)]
pub struct Endpoint {
    host: String,
    port: u16,
    /// The `Host` header: an HTTP/1.1 request must carry it and hyper's bare connection adds none.
    pub authority: HeaderValue,
    /// The path of the URL (`/mcp`), as a request target.
    pub path: Uri,
}

impl Endpoint {
    pub fn parse(url: &str) -> anyhow::Result<Endpoint> {
        let uri: Uri = url.parse().with_context(|| format!("bad URL {url:?}"))?;
        if uri.scheme_str() != Some("http") {
            bail!("only http:// URLs are supported, not {url:?}");
        }
        let host = uri.host().ok_or_else(|| anyhow!("no host in {url:?}"))?;
        let port = uri.port_u16().unwrap_or(80);
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host);
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        Ok(Endpoint {
            host: host.trim_start_matches('[').trim_end_matches(']').to_owned(),
            port,
            authority: HeaderValue::from_str(authority)?,
            path: path.parse()?,
        })
    }

    /// The same server, another path.
    pub fn with_path(&self, path: &str) -> anyhow::Result<Endpoint> {
        Ok(Endpoint { path: path.parse()?, ..self.clone() })
    }
}

/// One answer, its body read to the end.
pub struct Answer {
    pub parts: Parts,
    pub body: Bytes,
}

impl Answer {
    pub fn status(&self) -> u16 {
        self.parts.status.as_u16()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.parts.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn json(&self) -> anyhow::Result<serde_json::Value> {
        serde_json::from_slice(&self.body).with_context(|| format!("not JSON: {}", snippet(&self.body)))
    }
}

/// A short, printable prefix of a body, for error messages.
pub fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut cut: String = text.chars().take(400).collect();
    if cut.len() < text.len() {
        cut.push_str("...");
    }
    cut
}

/// A keep-alive connection that reconnects by itself when the server closed it between
/// requests (`Connection: close`, or an idle close): nothing had been sent, so nothing is lost.
pub struct Conn {
    sender: Option<SendRequest<Full<Bytes>>>,
    endpoint: Endpoint,
}

impl Conn {
    pub async fn connect(endpoint: &Endpoint) -> anyhow::Result<Conn> {
        let mut conn = Conn { sender: None, endpoint: endpoint.clone() };
        conn.sender = Some(conn.open().await?);
        Ok(conn)
    }

    async fn open(&self) -> anyhow::Result<SendRequest<Full<Bytes>>> {
        let Endpoint { host, port, .. } = &self.endpoint;
        let stream = TcpStream::connect((host.as_str(), *port))
            .await
            .with_context(|| format!("cannot connect to {host}:{port}"))?;
        // Small requests and answers: never wait for Nagle.
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        // The connection's I/O runs on its own task; it ends when `sender` is dropped.
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Sends one request and reads its whole answer, within [`REQUEST_TIMEOUT`].
    pub async fn send(
        &mut self,
        method: Method,
        path: &Uri,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> anyhow::Result<Answer> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = path.clone();
        let map = request.headers_mut();
        map.reserve(headers.len() + 1);
        map.insert(HOST, self.endpoint.authority.clone());
        for (name, value) in headers {
            map.insert(name.clone(), value.clone());
        }
        let exchange = async {
            let reusable = match self.sender.take() {
                Some(mut sender) => sender.ready().await.is_ok().then_some(sender),
                None => None,
            };
            let mut sender = match reusable {
                Some(sender) => sender,
                None => {
                    let mut sender = self.open().await?;
                    sender.ready().await.context("the new connection closed at once")?;
                    sender
                }
            };
            let response = sender.send_request(request).await.context("the request failed")?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await.context("reading the answer failed")?.to_bytes();
            let closing = parts.headers.get(CONNECTION).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
            if !closing {
                self.sender = Some(sender);
            }
            anyhow::Ok(Answer { parts, body })
        };
        // On a timeout or a failure the connection is dropped; the next request opens another.
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| anyhow!("no answer within {REQUEST_TIMEOUT:?}"))?
    }

    pub async fn get(&mut self, path: &Uri, headers: &[(HeaderName, HeaderValue)]) -> anyhow::Result<Answer> {
        self.send(Method::GET, path, headers, Bytes::new()).await
    }
}

/// A one-off request on a fresh connection (management calls, readiness polls).
pub async fn once(
    endpoint: &Endpoint,
    method: Method,
    headers: &[(HeaderName, HeaderValue)],
    body: Bytes,
) -> anyhow::Result<Answer> {
    let mut conn = Conn::connect(endpoint).await?;
    conn.send(method, &endpoint.path, headers, body).await
}
