//! The hook's client of a running `memory serve --http`: the MCP streamable HTTP protocol, just as much
//! of it as one hook needs (initialize, the initialized notification, `tools/call`, and the session's
//! end), over one HTTP/1.1 connection per request with hyper.
//!
//! Why not rmcp's client: its streamable HTTP client runs a transport worker and, for TCP, needs
//! reqwest, which would add an HTTP stack (and URL parsing) to a build that already has hyper through
//! the server. A hook makes four requests and exits, so the few protocol steps are spelt out here, and
//! the answers are read with the `sse-stream` parser the server side already uses. Every body read is
//! bounded by [`MAX_RESPONSE_BYTES`].

use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use crate::discovery::Discovery;

/// Most bytes of one answer read from the server.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// The MCP protocol version the hook asks for.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// The kind a hook logs, and the eval counts, when the server no longer knew the caller's session
/// even after a new one was opened ([`ServerError::SessionExpired`]).
pub const EXPIRED_SESSION_KIND: &str = "expired-session";

/// Why the server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// It could not be reached: a stale discovery file (the hook answers one-shot instead).
    #[error("the server at {url} cannot be reached: {detail}")]
    Unreachable {
        /// Its endpoint.
        url: String,
        /// Why.
        detail: String,
    },
    /// It no longer knows the hook's session (`404` on a request carrying the session id): it
    /// restarted, or dropped the session, between the hook's initialize and this request.
    #[error("the server no longer knows this hook's session ({method}: HTTP 404)")]
    SessionExpired {
        /// The request it refused.
        method: String,
    },
    /// It answered something else than the protocol says.
    #[error("the server answered unexpectedly: {0}")]
    Protocol(String),
}

/// A tool's answer: its structured content, and whether it is a refusal.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    /// `isError`.
    pub is_error: bool,
    /// The structured content (the operation's wire result, or `{"error": ...}`).
    pub content: Value,
}

/// An initialized MCP session with the server.
#[derive(Debug)]
pub struct ServerSession {
    authority: String,
    path: String,
    token: Option<String>,
    session: Option<String>,
    next_id: u64,
}

impl ServerSession {
    /// Connects to the server `discovery` names and initializes a session. An address that refuses
    /// the connection is [`ServerError::Unreachable`].
    pub async fn connect(discovery: &Discovery) -> Result<Self, ServerError> {
        let unreachable = |detail: String| ServerError::Unreachable {
            url: discovery.url.clone(),
            detail,
        };
        let rest = discovery
            .url
            .strip_prefix("http://")
            .ok_or_else(|| unreachable("not an http:// URL".to_owned()))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let mut session = Self {
            authority: authority.to_owned(),
            path: format!("/{path}"),
            token: discovery.token.clone(),
            session: None,
            next_id: 1,
        };
        match session.initialize().await {
            Err(ServerError::Unreachable { detail, .. }) => Err(unreachable(detail)),
            other => other.map(|()| session),
        }
    }

    /// Opens a session: `initialize`, then the initialized notification.
    async fn initialize(&mut self) -> Result<(), ServerError> {
        self.session = None;
        let initialize = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "memory-hook", "version": env!("CARGO_PKG_VERSION")},
        });
        let (response, headers) = self.request("initialize", initialize).await?;
        if response.get("result").is_none() {
            return Err(ServerError::Protocol(format!(
                "initialize failed: {response}"
            )));
        }
        self.session = headers;
        self.notify("notifications/initialized").await
    }

    /// Calls `tool` with `arguments`. A server that no longer knows the session did not run the call
    /// (it refused the request before reading it as a call), so the hook opens a new session and asks
    /// once more; a second refusal is [`ServerError::SessionExpired`], logged as its own kind.
    pub async fn call_tool(
        &mut self,
        tool: &str,
        arguments: Value,
    ) -> Result<ToolAnswer, ServerError> {
        let params = json!({"name": tool, "arguments": arguments});
        let (response, _) = match self.request("tools/call", params.clone()).await {
            Err(ServerError::SessionExpired { .. }) => {
                self.initialize().await?;
                self.request("tools/call", params).await?
            }
            other => other?,
        };
        let result = response.get("result").ok_or_else(|| {
            ServerError::Protocol(format!(
                "{tool}: {}",
                response.get("error").unwrap_or(&Value::Null)
            ))
        })?;
        let content = result
            .get("structuredContent")
            .cloned()
            .ok_or_else(|| ServerError::Protocol(format!("{tool}: no structured content")))?;
        Ok(ToolAnswer {
            is_error: result
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            content,
        })
    }

    /// Ends the session (best effort: a server that keeps it until it times out loses nothing).
    pub async fn close(self) {
        if let Some(session) = &self.session
            && let Ok(request) = self
                .builder(Method::DELETE)
                .header("mcp-session-id", session)
                .body(Full::new(Bytes::new()))
        {
            let _ = self.send(request).await;
        }
    }

    fn builder(&self, method: Method) -> hyper::http::request::Builder {
        let mut builder = Request::builder()
            .method(method)
            .uri(&self.path)
            .header(hyper::header::HOST, &self.authority)
            .header(hyper::header::ACCEPT, "application/json, text/event-stream")
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header("mcp-protocol-version", PROTOCOL_VERSION);
        if let Some(token) = &self.token {
            builder = builder.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        builder
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> Result<Response<Incoming>, ServerError> {
        let unreachable = |detail: String| ServerError::Unreachable {
            url: format!("http://{}{}", self.authority, self.path),
            detail,
        };
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .map_err(|error| unreachable(error.to_string()))?;
        // Answers are small and the hook waits for each: no Nagle delay on the request.
        let _ = stream.set_nodelay(true);
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| unreachable(error.to_string()))?;
        tokio::spawn(connection);
        sender
            .send_request(request)
            .await
            .map_err(|error| ServerError::Protocol(error.to_string()))
    }

    async fn post(&self, message: &Value) -> Result<Response<Incoming>, ServerError> {
        let mut builder = self.builder(Method::POST);
        if let Some(session) = &self.session {
            builder = builder.header("mcp-session-id", session);
        }
        let request = builder
            .body(Full::new(Bytes::from(message.to_string())))
            .map_err(|error| ServerError::Protocol(error.to_string()))?;
        let response = self.send(request).await?;
        if response.status() == StatusCode::UNAUTHORIZED
            || response.status() == StatusCode::FORBIDDEN
        {
            return Err(ServerError::Protocol(format!(
                "HTTP {}: the discovery file's token was refused",
                response.status()
            )));
        }
        Ok(response)
    }

    async fn notify(&self, method: &str) -> Result<(), ServerError> {
        let response = self
            .post(&json!({"jsonrpc": "2.0", "method": method}))
            .await?;
        if !response.status().is_success() {
            return Err(ServerError::Protocol(format!(
                "{method}: HTTP {}",
                response.status()
            )));
        }
        Ok(())
    }

    /// Sends one JSON-RPC request and answers its response and the session id header, reading a JSON
    /// body or an event stream up to the response with the request's id.
    async fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<(Value, Option<String>), ServerError> {
        let id = self.next_id;
        self.next_id += 1;
        let response = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let status = response.status();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let content_type = response
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        // The streamable HTTP transport answers 404 to a session id it does not hold.
        if status == StatusCode::NOT_FOUND && self.session.is_some() {
            return Err(ServerError::SessionExpired {
                method: method.to_owned(),
            });
        }
        if !status.is_success() {
            return Err(ServerError::Protocol(format!("{method}: HTTP {status}")));
        }
        let body = response.into_body();
        let message = if content_type.starts_with("text/event-stream") {
            read_event_stream(body, id).await?
        } else {
            let bytes = http_body_util::Limited::new(body, MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|error| ServerError::Protocol(format!("{method}: {error}")))?
                .to_bytes();
            serde_json::from_slice(&bytes)
                .map_err(|error| ServerError::Protocol(format!("{method}: {error}")))?
        };
        Ok((message, session))
    }
}

/// Reads server-sent events until the JSON-RPC response with `id` (events before it, such as a
/// priming event or a notification, are passed over), within [`MAX_RESPONSE_BYTES`] in all.
async fn read_event_stream(body: Incoming, id: u64) -> Result<Value, ServerError> {
    let mut read = 0_usize;
    let bytes = body.into_data_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        read = read.saturating_add(chunk.len());
        if read > MAX_RESPONSE_BYTES {
            return Err(std::io::Error::other(format!(
                "the answer passed {MAX_RESPONSE_BYTES} bytes"
            )));
        }
        Ok(chunk)
    });
    let mut events = std::pin::pin!(sse_stream::SseStream::from_bytes_stream(bytes));
    while let Some(event) = events.next().await {
        let event =
            event.map_err(|error| ServerError::Protocol(format!("event stream: {error}")))?;
        let Some(data) = event.data.filter(|data| !data.is_empty()) else {
            continue;
        };
        let message: Value = serde_json::from_str(&data)
            .map_err(|error| ServerError::Protocol(format!("event stream: {error}")))?;
        if message.get("id").and_then(Value::as_u64) == Some(id) {
            return Ok(message);
        }
    }
    Err(ServerError::Protocol(
        "the event stream ended before the answer".to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::http::{HeaderMap, StatusCode as AxumStatus};
    use axum::response::IntoResponse;
    use axum::routing::post;

    use super::*;

    /// A loopback stub of the streamable HTTP transport: `initialize` hands out session `s<N>`, the
    /// notification is accepted, and a `tools/call` on a session older than the newest
    /// `forgotten_sessions` is answered 404, as a restarted server answers.
    #[derive(Default)]
    struct Stub {
        initialized: AtomicUsize,
        forgotten_sessions: AtomicUsize,
    }

    async fn serve(stub: Arc<Stub>) -> Discovery {
        let handler = move |headers: HeaderMap, body: String| {
            let stub = Arc::clone(&stub);
            async move {
                let message: Value = serde_json::from_str(&body).expect("JSON-RPC");
                let session = headers
                    .get("mcp-session-id")
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| value.strip_prefix('s'))
                    .and_then(|value| value.parse::<usize>().ok());
                match message["method"].as_str() {
                    Some("initialize") => {
                        let number = stub.initialized.fetch_add(1, Ordering::SeqCst) + 1;
                        let answer = json!({"jsonrpc": "2.0", "id": message["id"], "result": {}});
                        (
                            [
                                ("mcp-session-id", format!("s{number}")),
                                ("content-type", "application/json".to_owned()),
                            ],
                            answer.to_string(),
                        )
                            .into_response()
                    }
                    Some("notifications/initialized") => AxumStatus::ACCEPTED.into_response(),
                    _ if session.is_none_or(|number| {
                        number <= stub.forgotten_sessions.load(Ordering::SeqCst)
                    }) =>
                    {
                        AxumStatus::NOT_FOUND.into_response()
                    }
                    _ => {
                        let result = json!({"structuredContent": {"ok": true}, "isError": false});
                        let answer =
                            json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
                        ([("content-type", "application/json")], answer.to_string()).into_response()
                    }
                }
            }
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        tokio::spawn(async move {
            axum::serve(listener, axum::Router::new().route("/mcp", post(handler)))
                .await
                .expect("the stub serves");
        });
        Discovery {
            version: crate::discovery::VERSION,
            url,
            pid: std::process::id(),
            token: None,
        }
    }

    #[tokio::test]
    async fn a_lost_session_is_opened_again_once_then_said() {
        let stub = Arc::new(Stub::default());
        let discovery = serve(Arc::clone(&stub)).await;
        let mut session = ServerSession::connect(&discovery).await.expect("connects");

        // The server restarted: it forgot session 1. The call is asked again on a new session.
        stub.forgotten_sessions.store(1, Ordering::SeqCst);
        let answer = session
            .call_tool("memory_recall", json!({}))
            .await
            .expect("answered on a new session");
        assert_eq!(answer.content, json!({"ok": true}));
        assert_eq!(stub.initialized.load(Ordering::SeqCst), 2);

        // It forgets every session it hands out: the second 404 is said as an expired session.
        stub.forgotten_sessions.store(usize::MAX, Ordering::SeqCst);
        let error = session
            .call_tool("memory_recall", json!({}))
            .await
            .expect_err("still refused");
        assert!(
            matches!(&error, ServerError::SessionExpired { method } if method == "tools/call"),
            "{error:?}"
        );
        assert_eq!(stub.initialized.load(Ordering::SeqCst), 3);
    }
}
