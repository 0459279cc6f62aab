//! The accept loop: hyper's HTTP/1 connections serving the router, with limits that a greedy or
//! slow client cannot get around.
//!
//! - A request's headers must be complete within `header_timeout`, counted from the connection's
//!   start, or on a kept-alive connection from the first byte of the next request. Dribbling
//!   bytes does not extend it (slowloris).
//!   A request's body must then arrive within the same time from the end of its headers.
//! - The request bodies being received share a memory budget ([`BODY_BUDGET`]) beyond the first
//!   [`FREE_BODY_BYTES`] of each: past it, a body waits for room (within its deadline), so
//!   thousands of connections each sending most of a megabyte and stalling cannot grow the API
//!   by gigabytes.
//! - A kept-alive connection with no request in progress is closed after `idle_timeout`. A
//!   response still being sent (an event stream) is a request in progress, never idle.
//! - At most `max_connections` are served at once. Past that, a few [`RESERVE`] connections
//!   each serve one request (short header deadline, no keep-alive, bounded life), so health
//!   probes and an operator's command still get through. When the reserve is taken too, a new
//!   connection evicts the one that has waited longest without sending a complete request (it is
//!   answered 503 and closed) and takes its place; with none to evict, the new one is answered
//!   503 and closed. So a flood of connections that send nothing, renewed as fast as they are
//!   closed, cannot hold every slot (event streams filling the cap included): a client that sends
//!   its request at once is served before the flood's newer connections reach it. The loop never
//!   stops accepting: a full backlog would starve the reserve too.
//!
//! Refusals and timeouts are counted and logged as one summary line per [`REPORT_EVERY`].

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::Service as _;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

pub const DEFAULT_HEADER_TIMEOUT_S: u64 = 10;
pub const DEFAULT_IDLE_TIMEOUT_S: u64 = 60;
/// The cap when the open-file limit allows it (an idle connection costs ~10 KiB).
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Connections served past the cap, one request each.
pub const RESERVE: usize = 32;
/// How long a connection that evicted another waits for the slot it freed.
const EVICTION_WAIT: Duration = Duration::from_secs(1);
/// A reserve connection's header deadline, when `header_timeout` is longer.
const RESERVE_HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// A reserve connection's whole life, so that none can be held (e.g. by an event stream).
const RESERVE_LIFETIME: Duration = Duration::from_secs(30);
/// Files kept for the API's own use (stdio, the control socket, epoll, resolver, ...).
const FD_HEADROOM: u64 = 64;
/// The pause after an accept error such as EMFILE, so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
const REPORT_EVERY: Duration = Duration::from_secs(10);
/// A connection's read and write buffers at most (hyper's default is ~400 KiB): request headers
/// larger than this are refused (431), so a slow client holds at most this much.
const MAX_BUFFER: usize = 64 * 1024;

/// What every request body may hold without asking the budget: small bodies (a tool call, an
/// operator's command) never wait for it.
const FREE_BODY_BYTES: usize = 16 * 1024;
/// The bytes all bodies being received may hold beyond their free part, counted in KiB.
const BODY_BUDGET: usize = 64 * 1024 * 1024;
const KIB: usize = 1024;

/// What a connection past the cap and the reserve reads before it is closed.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 103\r\n\r\n\
{\"error\":{\"code\":\"TooManyConnections\",\"message\":\"the API serves too many connections\",\"details\":null}}\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
}

/// Raises the soft open-file limit to the hard one (every connection is a file) and returns
/// the soft limit now in force, if it can be read.
pub fn raise_fd_limit() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return Some(hard);
    }
    Some(soft)
}

/// [`DEFAULT_MAX_CONNECTIONS`], or fewer when the open-file limit leaves less room beside the
/// reserve and the API's own files.
pub fn default_max_connections(fd_limit: Option<u64>) -> usize {
    let ceiling = DEFAULT_MAX_CONNECTIONS as u64;
    let room = fd_limit.map_or(ceiling, |limit| limit.saturating_sub(FD_HEADROOM + RESERVE as u64));
    usize::try_from(room.min(ceiling)).unwrap_or(DEFAULT_MAX_CONNECTIONS).max(1)
}

/// Whether `max_connections`, the reserve and the API's own files fit in `fd_limit`.
pub fn fits(max_connections: usize, fd_limit: u64) -> bool {
    (max_connections as u64).saturating_add(RESERVE as u64 + FD_HEADROOM) <= fd_limit
}

/// Serves `router` on `listener` until `stop` resolves, then lets every open connection finish
/// its request in progress (hyper's graceful shutdown) and returns once all are closed.
pub async fn serve(listener: TcpListener, router: Router, limits: Limits, stop: impl Future<Output = ()>) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let reserve = Arc::new(Semaphore::new(RESERVE));
    let tally = Arc::new(Tally::default());
    let waiting = Arc::new(Waiting::default());
    let bodies = Arc::new(Semaphore::new(BODY_BUDGET / KIB));
    let reporter = tokio::spawn(report(tally.clone(), slots.clone(), limits.max_connections));
    let (stopping, _) = watch::channel(());
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) if is_per_connection(&err) => continue,
                Err(err) => {
                    // Out of files or memory: the pending connection stays queued; try again soon.
                    tally.accept_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::trace!(error = %err, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let admitted = match slots.clone().try_acquire_owned() {
            Ok(permit) => Some((permit, Kind::Regular)),
            Err(_) => match reserve.clone().try_acquire_owned() {
                Ok(permit) => Some((permit, Kind::Reserve)),
                Err(_) => None,
            },
        };
        let serve = Serve {
            limits,
            tally: tally.clone(),
            waiting: waiting.clone(),
            bodies: bodies.clone(),
            router: router.clone(),
        };
        match admitted {
            Some((permit, kind)) => serve.spawn(stream, permit, kind, stopping.subscribe()),
            // Full: make room by evicting the longest-waiting silent connection, if there is one.
            None if waiting.evict_oldest() => {
                tally.evicted.fetch_add(1, Ordering::Relaxed);
                let (slots, reserve, stopping) = (slots.clone(), reserve.clone(), stopping.subscribe());
                tokio::spawn(async move {
                    let freed = tokio::time::timeout(EVICTION_WAIT, async {
                        tokio::select! {
                            biased;
                            Ok(permit) = slots.acquire_owned() => Some((permit, Kind::Regular)),
                            Ok(permit) = reserve.acquire_owned() => Some((permit, Kind::Reserve)),
                            else => None,
                        }
                    });
                    match freed.await {
                        Ok(Some((permit, kind))) => serve.spawn(stream, permit, kind, stopping),
                        _ => {
                            serve.tally.refused.fetch_add(1, Ordering::Relaxed);
                            refuse(stream);
                        }
                    }
                });
            }
            None => {
                tally.refused.fetch_add(1, Ordering::Relaxed);
                refuse(stream);
            }
        }
    }
    // New connections are no longer ours (under socket activation, another instance may take them).
    drop(listener);
    stopping.send_replace(());
    stopping.closed().await;
    reporter.abort();
}

/// What every connection is served with.
struct Serve {
    limits: Limits,
    tally: Arc<Tally>,
    waiting: Arc<Waiting>,
    bodies: Arc<Semaphore>,
    router: Router,
}

impl Serve {
    fn spawn(self, stream: TcpStream, permit: OwnedSemaphorePermit, kind: Kind, stopping: watch::Receiver<()>) {
        if kind == Kind::Reserve {
            self.tally.reserve_served.fetch_add(1, Ordering::Relaxed);
        }
        let header_timeout = match kind {
            Kind::Regular => self.limits.header_timeout,
            Kind::Reserve => self.limits.header_timeout.min(RESERVE_HEADER_TIMEOUT),
        };
        let activity = Arc::new(Activity::new(header_timeout, self.limits.idle_timeout));
        self.waiting.push(&activity);
        let connection = Connection { kind, tally: self.tally, activity, bodies: self.bodies, _permit: permit };
        tokio::spawn(connection.serve(stream, self.router, stopping));
    }
}

/// The connections that have not yet sent a complete request, oldest first: those a full API
/// evicts to make room for a new one.
#[derive(Default)]
struct Waiting(Mutex<VecDeque<Weak<Activity>>>);

impl Waiting {
    fn queue(&self) -> MutexGuard<'_, VecDeque<Weak<Activity>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, activity: &Arc<Activity>) {
        let mut queue = self.queue();
        // Entries of connections that sent a request or closed are dropped as they reach the
        // front; prune them all when they pile up behind a long-waiting one.
        if queue.len() >= 64 && queue.len().is_power_of_two() {
            queue.retain(|entry| entry.upgrade().is_some_and(|activity| activity.evictable()));
        }
        queue.push_back(Arc::downgrade(activity));
    }

    /// Evicts the oldest connection still waiting for its first request; false if none is.
    fn evict_oldest(&self) -> bool {
        let mut queue = self.queue();
        while let Some(entry) = queue.pop_front() {
            if entry.upgrade().is_some_and(|activity| activity.evict()) {
                return true;
            }
        }
        false
    }
}

/// Errors that concern one connection only (it was reset before we took it): accept the next.
fn is_per_connection(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

/// Past the cap and the reserve: a 503 if the socket takes it at once, then close. Nothing
/// waits on the client.
fn refuse(stream: TcpStream) {
    // Reading what already arrived lets the close be a FIN rather than a reset, which would
    // discard the 503 on the client's side.
    let mut scratch = [0u8; 2048];
    let _ = stream.try_read(&mut scratch);
    let _ = stream.try_write(REFUSAL);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Regular,
    /// Past the cap: one request, a short header deadline, a bounded life.
    Reserve,
}

struct Connection {
    kind: Kind,
    tally: Arc<Tally>,
    activity: Arc<Activity>,
    /// The budget of the request bodies being received.
    bodies: Arc<Semaphore>,
    /// Held for as long as the connection is open.
    _permit: OwnedSemaphorePermit,
}

impl Connection {
    async fn serve(self, stream: TcpStream, router: Router, mut stopping: watch::Receiver<()>) {
        let reserve = self.kind == Kind::Reserve;
        let activity = self.activity.clone();
        let header_timeout = activity.header_timeout;
        let end_of_life = reserve.then(|| Instant::now() + RESERVE_LIFETIME);
        let router = TowerToHyperService::new(router);
        let tracked = activity.clone();
        let bodies = self.bodies.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let request_in_progress = RequestInProgress::begin(tracked.clone());
            let body_deadline = Instant::now() + header_timeout;
            let answer = router.call(request.map(|body| DeadlineBody::new(body, body_deadline, bodies.clone())));
            async move {
                let response = answer.await?;
                Ok::<_, Infallible>(response.map(|body| TrackedBody { body, _held: request_in_progress }))
            }
        });
        let io = TokioIo::new(TrackedStream { stream, activity: activity.clone() });
        // Unpin (hyper boxes the request futures), so an evicted connection can take its socket
        // back to send the refusal.
        let mut connection =
            http1::Builder::new().keep_alive(!reserve).max_buf_size(MAX_BUFFER).serve_connection(io, service);
        let mut draining = false;
        loop {
            let deadline = match (activity.deadline(), end_of_life) {
                (Some(deadline), Some(end)) => Some(deadline.min(end)),
                (deadline, end) => deadline.or(end),
            };
            tokio::select! {
                served = &mut connection => {
                    if let Err(err) = served {
                        tracing::debug!(error = %err, "connection ended with an error");
                    }
                    return;
                }
                () = sleep_until(deadline) => {
                    let now = Instant::now();
                    match activity.expired(now) {
                        Some(Phase::AwaitingHeaders(_)) if activity.evicted() => {
                            refuse(connection.into_parts().io.into_inner().stream);
                            return;
                        }
                        Some(Phase::AwaitingHeaders(_)) => self.tally.header_timeouts.fetch_add(1, Ordering::Relaxed),
                        Some(_) => self.tally.idle_closed.fetch_add(1, Ordering::Relaxed),
                        None if end_of_life.is_some_and(|end| end <= now) => 0,
                        None => continue,
                    };
                    // Dropping the connection closes the socket.
                    return;
                }
                () = activity.changed.notified() => {}
                _ = stopping.changed(), if !draining => {
                    draining = true;
                    Pin::new(&mut connection).graceful_shutdown();
                    // Nothing in progress (idle, or headers not yet complete): nothing to finish.
                    if activity.deadline().is_some() {
                        return;
                    }
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Where a connection is between requests, and so which deadline applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for (the rest of) a request's headers, until the instant.
    AwaitingHeaders(Instant),
    /// This many requests in progress (read, being answered or streaming): no deadline.
    Busy(usize),
    /// Kept alive with nothing in progress, until the instant.
    Idle(Instant),
}

/// A connection's phase, moved by the bytes it reads and the requests it serves.
struct Activity {
    phase: Mutex<Phase>,
    /// Wakes the connection's task when its deadline moves.
    changed: Notify,
    header_timeout: Duration,
    idle_timeout: Duration,
    /// A request's headers were complete once: the connection is no longer evictable.
    served: AtomicBool,
    /// Chosen for eviction: its header deadline was moved to now.
    evicted: AtomicBool,
}

impl Activity {
    fn new(header_timeout: Duration, idle_timeout: Duration) -> Activity {
        let first_request = Phase::AwaitingHeaders(Instant::now() + header_timeout);
        Activity {
            phase: Mutex::new(first_request),
            changed: Notify::new(),
            header_timeout,
            idle_timeout,
            served: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
        }
    }

    fn phase(&self) -> MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn deadline(&self) -> Option<Instant> {
        match *self.phase() {
            Phase::AwaitingHeaders(deadline) | Phase::Idle(deadline) => Some(deadline),
            Phase::Busy(_) => None,
        }
    }

    /// The phase whose deadline has passed at `now`, if any.
    fn expired(&self, now: Instant) -> Option<Phase> {
        let phase = *self.phase();
        match phase {
            Phase::AwaitingHeaders(deadline) | Phase::Idle(deadline) if deadline <= now => Some(phase),
            _ => None,
        }
    }

    /// Whether it is still waiting for its first request's headers.
    fn evictable(&self) -> bool {
        let phase = self.phase();
        matches!(*phase, Phase::AwaitingHeaders(_)) && !self.served.load(Ordering::Relaxed)
    }

    /// Ends the wait for its first request now, unless that request's headers are complete by
    /// now (then it is served, and this returns false).
    fn evict(&self) -> bool {
        let mut phase = self.phase();
        if !matches!(*phase, Phase::AwaitingHeaders(_)) || self.served.load(Ordering::Relaxed) {
            return false;
        }
        *phase = Phase::AwaitingHeaders(Instant::now());
        self.evicted.store(true, Ordering::Relaxed);
        drop(phase);
        self.changed.notify_one();
        true
    }

    fn evicted(&self) -> bool {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Bytes arrived: on an idle connection they start the next request's header deadline.
    fn read(&self) {
        let mut phase = self.phase();
        if let Phase::Idle(_) = *phase {
            *phase = Phase::AwaitingHeaders(Instant::now() + self.header_timeout);
            drop(phase);
            self.changed.notify_one();
        }
    }

    fn begin_request(&self) {
        let mut phase = self.phase();
        self.served.store(true, Ordering::Relaxed);
        *phase = match *phase {
            Phase::Busy(requests) => Phase::Busy(requests + 1),
            _ => Phase::Busy(1),
        };
    }

    fn end_request(&self) {
        let mut phase = self.phase();
        *phase = match *phase {
            Phase::Busy(requests) if requests > 1 => Phase::Busy(requests - 1),
            _ => Phase::Idle(Instant::now() + self.idle_timeout),
        };
        drop(phase);
        self.changed.notify_one();
    }
}

/// A request from its complete headers until its response is sent in full (or dropped).
struct RequestInProgress(Arc<Activity>);

impl RequestInProgress {
    fn begin(activity: Arc<Activity>) -> RequestInProgress {
        activity.begin_request();
        RequestInProgress(activity)
    }
}

impl Drop for RequestInProgress {
    fn drop(&mut self) {
        self.0.end_request();
    }
}

/// A response body that holds `G` (e.g. its request counted in progress) until hyper has sent it
/// all and drops it.
pub(crate) struct TrackedBody<G> {
    pub(crate) body: Body,
    pub(crate) _held: G,
}

impl<G: Unpin> HttpBody for TrackedBody<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A request body that must arrive in full within the header deadline, counted again from the
/// end of the headers, so a client cannot hold a connection by dribbling its body either; and
/// whose bytes beyond [`FREE_BODY_BYTES`] (up to the body limit) are held against the budget.
struct DeadlineBody {
    body: Incoming,
    deadline: Instant,
    /// Armed the first time the body is not all there yet.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    budget: Arc<Semaphore>,
    /// Bytes received so far.
    received: usize,
    /// What it holds of the budget, in KiB; released when the body is dropped (read whole).
    held: Option<OwnedSemaphorePermit>,
    /// A frame that arrived while the budget had no room, and the wait for that room.
    waiting: Option<(http_body::Frame<Bytes>, BudgetWait)>,
}

type BudgetWait = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, tokio::sync::AcquireError>> + Send + Sync>>;

impl DeadlineBody {
    fn new(body: Incoming, deadline: Instant, budget: Arc<Semaphore>) -> DeadlineBody {
        DeadlineBody { body, deadline, timer: None, budget, received: 0, held: None, waiting: None }
    }

    /// KiB of the budget this body needs now beyond what it holds.
    fn wanted(&self) -> u32 {
        let charged = self.received.min(crate::body::BODY_LIMIT).saturating_sub(FREE_BODY_BYTES).div_ceil(KIB);
        let held = self.held.as_ref().map_or(0, OwnedSemaphorePermit::num_permits);
        u32::try_from(charged.saturating_sub(held)).unwrap_or(u32::MAX)
    }

    fn hold(&mut self, permit: OwnedSemaphorePermit) {
        match &mut self.held {
            Some(held) => held.merge(permit),
            None => self.held = Some(permit),
        }
    }

    /// Whether the deadline has passed (arming the timer, which wakes the task at it).
    fn timed_out(&mut self, cx: &mut Context<'_>) -> bool {
        let deadline = self.deadline;
        let timer = self.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        timer.as_mut().poll(cx).is_ready()
    }
}

/// The request body did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the deadline")]
struct BodyTimedOut;

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::BoxError>>> {
        let this = self.get_mut();
        if this.waiting.is_none() {
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    this.received += frame.data_ref().map_or(0, Bytes::len);
                    let wanted = this.wanted();
                    if wanted == 0 {
                        return Poll::Ready(Some(Ok(frame)));
                    }
                    match this.budget.clone().try_acquire_many_owned(wanted) {
                        Ok(permit) => {
                            this.hold(permit);
                            return Poll::Ready(Some(Ok(frame)));
                        }
                        Err(_) => {
                            this.waiting = Some((frame, Box::pin(this.budget.clone().acquire_many_owned(wanted))))
                        }
                    }
                }
                Poll::Ready(frame) => return Poll::Ready(frame.map(|frame| frame.map_err(axum::BoxError::from))),
                Poll::Pending => {}
            }
        }
        if let Some((_, wait)) = &mut this.waiting {
            match wait.as_mut().poll(cx) {
                Poll::Ready(Ok(permit)) => {
                    let (frame, _) = this.waiting.take().unzip();
                    this.hold(permit);
                    return Poll::Ready(frame.map(Ok));
                }
                // The budget is never closed.
                Poll::Ready(Err(_)) => return Poll::Ready(Some(Err(BodyTimedOut.into()))),
                Poll::Pending => {}
            }
        }
        if this.timed_out(cx) { Poll::Ready(Some(Err(BodyTimedOut.into()))) } else { Poll::Pending }
    }

    fn is_end_stream(&self) -> bool {
        self.waiting.is_none() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        // A frame held back is not counted by the body below.
        if self.waiting.is_some() { http_body::SizeHint::default() } else { self.body.size_hint() }
    }
}

/// The connection's socket, telling its [`Activity`] when bytes arrive.
struct TrackedStream {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for TrackedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.read();
        }
        polled
    }
}

impl AsyncWrite for TrackedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// What the connection limits did since the last report.
#[derive(Default)]
struct Tally {
    refused: AtomicU64,
    reserve_served: AtomicU64,
    header_timeouts: AtomicU64,
    idle_closed: AtomicU64,
    accept_errors: AtomicU64,
    evicted: AtomicU64,
}

/// One summary line per period in which a limit acted, instead of one line per connection.
async fn report(tally: Arc<Tally>, slots: Arc<Semaphore>, max_connections: usize) {
    let mut every = tokio::time::interval(REPORT_EVERY);
    every.tick().await;
    loop {
        every.tick().await;
        let take = |counter: &AtomicU64| counter.swap(0, Ordering::Relaxed);
        let (refused, reserve_served, header_timeouts, idle_closed, accept_errors, evicted) = (
            take(&tally.refused),
            take(&tally.reserve_served),
            take(&tally.header_timeouts),
            take(&tally.idle_closed),
            take(&tally.accept_errors),
            take(&tally.evicted),
        );
        let open = max_connections.saturating_sub(slots.available_permits());
        let period_s = REPORT_EVERY.as_secs();
        if refused > 0 || accept_errors > 0 || reserve_served > 0 || evicted > 0 {
            tracing::warn!(
                refused,
                reserve_served,
                evicted,
                accept_errors,
                header_timeouts,
                idle_closed,
                open,
                max_connections,
                period_s,
                "connection limit reached: connections refused or served from the reserve"
            );
        } else if header_timeouts > 0 {
            tracing::info!(header_timeouts, idle_closed, open, period_s, "connections closed for slow request headers");
        } else if idle_closed > 0 {
            tracing::debug!(idle_closed, open, period_s, "idle connections closed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_leaves_room_for_the_reserve_and_the_apis_own_files() {
        assert_eq!(default_max_connections(None), DEFAULT_MAX_CONNECTIONS);
        assert_eq!(default_max_connections(Some(1 << 20)), DEFAULT_MAX_CONNECTIONS);
        assert_eq!(default_max_connections(Some(1024)), 1024 - 64 - RESERVE);
        assert_eq!(default_max_connections(Some(10)), 1);
        assert!(fits(default_max_connections(Some(1024)), 1024));
        assert!(!fits(1024, 1024));
    }

    #[test]
    fn the_refusal_declares_its_length() {
        let text = std::str::from_utf8(REFUSAL).unwrap_or_default();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head:?} vs {} bytes", body.len());
        assert!(serde_json::from_str::<serde_json::Value>(body).is_ok(), "{body}");
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_start_a_header_deadline_only_on_an_idle_connection() {
        let header = Duration::from_secs(10);
        let idle = Duration::from_secs(60);
        let activity = Activity::new(header, idle);
        let start = Instant::now();
        assert_eq!(activity.deadline(), Some(start + header), "the first request's deadline starts at accept");
        tokio::time::advance(Duration::from_secs(3)).await;
        activity.read();
        assert_eq!(activity.deadline(), Some(start + header), "dribbled bytes do not extend it");
        activity.begin_request();
        assert_eq!(activity.deadline(), None, "a request in progress has no deadline");
        activity.begin_request();
        activity.end_request();
        assert_eq!(activity.deadline(), None, "one of two still in progress");
        activity.end_request();
        let idle_since = Instant::now();
        assert_eq!(activity.deadline(), Some(idle_since + idle));
        tokio::time::advance(Duration::from_secs(5)).await;
        activity.read();
        assert_eq!(activity.deadline(), Some(Instant::now() + header), "the next request's headers");
        tokio::time::advance(header).await;
        assert!(matches!(activity.expired(Instant::now()), Some(Phase::AwaitingHeaders(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_connection_that_never_sent_a_request_is_evicted_oldest_first() {
        let timeout = Duration::from_secs(10);
        let waiting = Waiting::default();
        let (oldest, served, newest) = (
            Arc::new(Activity::new(timeout, timeout)),
            Arc::new(Activity::new(timeout, timeout)),
            Arc::new(Activity::new(timeout, timeout)),
        );
        for activity in [&served, &oldest, &newest] {
            waiting.push(activity);
        }
        served.begin_request();
        served.end_request();
        assert!(waiting.evict_oldest());
        assert!(!served.evicted() && oldest.evicted() && !newest.evicted(), "the served one is skipped");
        assert!(matches!(oldest.expired(Instant::now()), Some(Phase::AwaitingHeaders(_))), "closed at once");
        newest.begin_request();
        assert!(!waiting.evict_oldest(), "a request in progress is never evicted");
        assert!(!newest.evicted());
    }
}
