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
        let initialize = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "memory-hook", "version": env!("CARGO_PKG_VERSION")},
        });
        let (response, headers) = match session.request("initialize", initialize).await {
            Err(ServerError::Unreachable { detail, .. }) => return Err(unreachable(detail)),
            other => other?,
        };
        if response.get("result").is_none() {
            return Err(ServerError::Protocol(format!(
                "initialize failed: {response}"
            )));
        }
        session.session = headers;
        session.notify("notifications/initialized").await?;
        Ok(session)
    }

    /// Calls `tool` with `arguments`.
    pub async fn call_tool(
        &mut self,
        tool: &str,
        arguments: Value,
    ) -> Result<ToolAnswer, ServerError> {
        let (response, _) = self
            .request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await?;
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
