//! The gate in front of `/mcp` and `/metrics`: which grant the request's token holds, and the
//! bounds a shared server needs, answered before the MCP layer sees the request.
//!
//! - A missing or unknown token is `401` with `WWW-Authenticate: Bearer`.
//! - A POST to `/mcp` while the token already has `--max-in-flight` requests being answered is
//!   `429` with `Retry-After: 1`. A request counts until its whole answer (an event stream
//!   included) is sent or dropped. The standalone event stream (GET) is bounded by sessions instead.
//! - A POST that opens a session (no `Mcp-Session-Id`) while `--max-sessions` are open is `503` with
//!   `Retry-After: 5`. Opening sessions is serialized (each opening request's body is read first, so
//!   a stalled one holds up no other), so the bound is exact. Sessions idle for
//!   `--session-idle-timeout` are closed by the MCP layer, which frees their places.
//! - A request whose `Content-Length` announces more than `--max-body-bytes` is `413` at once, its
//!   body unread, inside a session or opening one.
//! - `/metrics` names every grant: only the server's own grant (the `--token-file` token's, or a
//!   loopback caller's without a token) and a grant to everything read it; any other is `403`.
//!
//! The request then carries its grant (`Arc<Grant>` in its extensions), which the MCP tools read
//! ([`crate::mcp`]); a request that is refused here reaches nothing behind the gate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::json_response;
use crate::grants::{Grant, Grants};
use crate::input::MAX_INPUT_BYTES;
use crate::metrics::ServerMetrics;

/// JSON-RPC framing around the largest valid tool argument.
const ENVELOPE_BYTES: u64 = 64 * 1024;

/// The bounds of `memory serve --http`, each a flag with its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct Limits {
    /// Most bytes of one request body; a larger one is refused (`413`) unread. Default: the
    /// largest valid write (64 MiB) and 64 KiB of JSON-RPC framing.
    #[arg(long, value_name = "BYTES", default_value_t = MAX_INPUT_BYTES + ENVELOPE_BYTES,
          value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_body_bytes: u64,
    /// Most MCP sessions open at once; a request opening one more is answered `503` with
    /// Retry-After.
    #[arg(long, value_name = "N", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_sessions: u64,
    /// Most MCP requests one token may have in flight; one more is answered `429` with Retry-After.
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_in_flight: u64,
    /// Seconds a client has to send a request's headers, counted from when the connection is ready
    /// for a request (so it also closes a kept-alive connection left idle that long).
    #[arg(long, value_name = "SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub header_timeout: u64,
    /// Seconds a request body may stall (no bytes arriving) before the request is dropped.
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub body_timeout: u64,
    /// Seconds an MCP session may go without a request before it is closed (its client then opens
    /// a new one).
    #[arg(long, value_name = "SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub session_idle_timeout: u64,
}

impl Limits {
    /// The header read timeout.
    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout)
    }

    /// The request body stall timeout.
    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs(self.body_timeout)
    }

    /// The session idle timeout.
    pub fn session_idle_timeout(&self) -> Duration {
        Duration::from_secs(self.session_idle_timeout)
    }

    /// Shows every bound in `/metrics`.
    pub fn publish(&self, metrics: &ServerMetrics) {
        metrics.set_limit("max_body_bytes", self.max_body_bytes);
        metrics.set_limit("max_sessions", self.max_sessions);
        metrics.set_limit("max_in_flight", self.max_in_flight);
        metrics.set_limit("header_timeout_seconds", self.header_timeout);
        metrics.set_limit("body_timeout_seconds", self.body_timeout);
        metrics.set_limit("session_idle_timeout_seconds", self.session_idle_timeout);
    }
}

/// The gate's state: grants, bounds, and what is in flight.
pub struct Gate {
    grants: Arc<Grants>,
    limits: Limits,
    sessions: Arc<LocalSessionManager>,
    /// Held while a session is being opened, so two openings cannot both pass the bound.
    opening: tokio::sync::Mutex<()>,
    /// Requests in flight per grant name.
    in_flight: Mutex<HashMap<String, u64>>,
    metrics: Arc<ServerMetrics>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Gate")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// One request in flight for a grant, released when dropped (with the answer's body).
struct InFlight {
    gate: Arc<Gate>,
    grant: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut counts = self
            .gate
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.grant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.grant);
            }
        }
        self.gate.metrics.in_flight().dec();
    }
}

impl Gate {
    /// The gate over `grants`, bounding with `limits` the sessions `sessions` keeps.
    pub fn new(
        grants: Arc<Grants>,
        limits: Limits,
        sessions: Arc<LocalSessionManager>,
        metrics: Arc<ServerMetrics>,
    ) -> Arc<Self> {
        limits.publish(&metrics);
        Arc::new(Self {
            grants,
            limits,
            sessions,
            opening: tokio::sync::Mutex::new(()),
            in_flight: Mutex::new(HashMap::new()),
            metrics,
        })
    }

    /// The open MCP sessions.
    pub async fn open_sessions(&self) -> usize {
        self.sessions.sessions.read().await.len()
    }

    fn enter(self: &Arc<Self>, grant: &Grant) -> Option<InFlight> {
        let mut counts = self
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = counts.entry(grant.name().to_owned()).or_insert(0);
        if *count >= self.limits.max_in_flight {
            return None;
        }
        *count += 1;
        self.metrics.in_flight().inc();
        Some(InFlight {
            gate: Arc::clone(self),
            grant: grant.name().to_owned(),
        })
    }

    /// The middleware: finds the grant, applies the bounds, and passes the request on.
    pub async fn admit(self: Arc<Self>, mut request: Request, next: Next) -> Response {
        let token = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim);
        let Some(grant) = self.grants.caller(token) else {
            self.metrics.count_http_refused("unauthorized");
            return unauthorized();
        };
        if request.uri().path() != super::MCP_PATH {
            // `/metrics`: every grant's name and counts are in it.
            if !grant.reads_metrics() {
                return refusal(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "/metrics needs the server's token or a token granted everything",
                    None,
                );
            }
            return next.run(request).await;
        }
        // Announced too large: answered now, the body unread. Waiting for it (rmcp reads up to
        // its limit) held the request until --body-timeout and then answered `500` (issue 42).
        if announced_length(&request).is_some_and(|length| length > self.limits.max_body_bytes) {
            self.metrics.count_http_refused("body_size");
            return too_large();
        }
        request.extensions_mut().insert(Arc::clone(&grant));
        if request.method() != Method::POST {
            return next.run(request).await;
        }
        let Some(in_flight) = self.enter(&grant) else {
            self.metrics.count_http_refused("in_flight");
            return refusal(
                StatusCode::TOO_MANY_REQUESTS,
                "unavailable",
                "this token has too many requests in flight (--max-in-flight); retry later",
                Some("1"),
            );
        };
        let response = if request.headers().contains_key("mcp-session-id") {
            next.run(request).await
        } else {
            // The body is read before the lock is taken, so a client that stalls its body holds
            // no one else's session opening.
            let (parts, body) = request.into_parts();
            let limit = usize::try_from(self.limits.max_body_bytes).unwrap_or(usize::MAX);
            let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
                return too_large();
            };
            let request = Request::from_parts(parts, Body::from(bytes));
            let _opening = self.opening.lock().await;
            if self.open_sessions().await as u64 >= self.limits.max_sessions {
                self.metrics.count_http_refused("sessions");
                return refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the server has as many MCP sessions open as it allows (--max-sessions); \
                     retry later",
                    Some("5"),
                );
            }
            next.run(request).await
        };
        // The request is in flight until its answer has been sent: an event stream's body included.
        response.map(|body| {
            Body::new(body.map_frame(move |frame| {
                let _held = &in_flight;
                frame
            }))
        })
    }
}

/// The body length a request's `Content-Length` announces; `None` without one (a chunked body is
/// bounded as it is read) or when it is not a number (hyper refuses that before the gate).
fn announced_length(request: &Request) -> Option<u64> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn too_large() -> Response {
    refusal(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too-large",
        "the request body is larger than --max-body-bytes, or did not arrive",
        None,
    )
}

fn unauthorized() -> Response {
    let mut response = refusal(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "missing or wrong bearer token (Authorization: Bearer TOKEN)",
        None,
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// An HTTP refusal: `{"error": {"kind", "message"}}` with the status, and `Retry-After` when given.
fn refusal(
    status: StatusCode,
    kind: &str,
    message: &str,
    retry_after: Option<&'static str>,
) -> Response {
    let mut response = json_response(
        status,
        &serde_json::json!({"error": {"kind": kind, "message": message}}),
    );
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static(seconds));
    }
    response
}
