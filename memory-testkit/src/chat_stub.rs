//! A loopback OpenAI-compatible chat-completions endpoint, for tests of model clients over real HTTP.
//!
//! [`ChatStub`] serves `POST /v1/chat/completions` on `127.0.0.1` from its own thread and its own
//! current-thread runtime, so it works from a plain `#[test]` and from inside another runtime
//! alike. Each request is recorded ([`ChatStub::requests`]) and answered by the next scripted
//! [`StubReply`] or, when the script is empty, by the responder.
//!
//! ```no_run
//! use memory_testkit::chat_stub::{ChatStub, StubReply};
//!
//! let stub = ChatStub::scripted(vec![StubReply::status(429), StubReply::content("hello")]).unwrap();
//! // Point the client at `stub.url()` (`http://127.0.0.1:PORT/v1`), then inspect `stub.requests()`.
//! ```

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// The one path the stub answers.
const CHAT_PATH: &str = "/v1/chat/completions";
/// How long a stopping stub lets open requests finish; a [`StubReply::Delay`] may hold one for
/// seconds after its client gave up, and a test should not wait for it.
const STOP_GRACE: Duration = Duration::from_millis(200);

/// How the stub answers one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StubReply {
    /// A chat completion with `finish_reason: "stop"`.
    Content {
        /// The first choice's message content.
        text: String,
        /// `usage.prompt_tokens`.
        prompt_tokens: u64,
        /// `usage.completion_tokens`.
        completion_tokens: u64,
    },
    /// An error status with a body, and a `Retry-After` header in seconds if given.
    Status {
        /// The HTTP status.
        status: u16,
        /// The body, sent as `application/json` whatever it holds.
        body: String,
        /// The `Retry-After` header's seconds.
        retry_after: Option<u64>,
    },
    /// Any body with any status, e.g. malformed JSON with 200.
    Raw {
        /// The HTTP status.
        status: u16,
        /// The body, sent as `application/json` whatever it holds.
        body: String,
    },
    /// Waits, then answers as `then`.
    Delay {
        /// Milliseconds to wait before answering.
        millis: u64,
        /// The answer after the wait.
        then: Box<StubReply>,
    },
    /// A chat completion cut at `max_tokens` (`finish_reason: "length"`), usage 10/5.
    Cut {
        /// The (partial) content.
        text: String,
    },
}

impl StubReply {
    /// A chat completion of `text` with usage 10 prompt and 5 completion tokens.
    pub fn content(text: impl Into<String>) -> Self {
        Self::Content {
            text: text.into(),
            prompt_tokens: 10,
            completion_tokens: 5,
        }
    }

    /// Status `code` with an OpenAI-style error body and no `Retry-After`.
    pub fn status(code: u16) -> Self {
        Self::Status {
            status: code,
            body: json!({"error": {"message": format!("stub status {code}"), "type": "stub"}})
                .to_string(),
            retry_after: None,
        }
    }

    /// Status 200 with `body` as it is.
    pub fn raw(body: impl Into<String>) -> Self {
        Self::Raw {
            status: 200,
            body: body.into(),
        }
    }
}

/// One request the stub received.
#[derive(Debug, Clone, PartialEq)]
pub struct StubRequest {
    /// The request's JSON body (a JSON string of the raw text if it was not JSON).
    pub body: Value,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

type Responder = dyn Fn(&Value) -> StubReply + Send + Sync;

/// What the serving thread and the test share.
struct Shared {
    responder: Box<Responder>,
    script: Mutex<VecDeque<StubReply>>,
    requests: Mutex<Vec<StubRequest>>,
    answered: AtomicU64,
}

impl Shared {
    fn next_reply(&self, body: &Value) -> StubReply {
        let scripted = lock(&self.script).pop_front();
        scripted.unwrap_or_else(|| (self.responder)(body))
    }
}

/// A running stub endpoint; dropping it stops the server and joins its thread.
pub struct ChatStub {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ChatStub {
    /// A stub answering every request with `responder(body)` (after any replies [`push`]ed).
    ///
    /// [`push`]: ChatStub::push
    pub fn start(
        responder: impl Fn(&Value) -> StubReply + Send + Sync + 'static,
    ) -> io::Result<Self> {
        Self::serve(Box::new(responder), VecDeque::new())
    }

    /// A stub answering with `replies` in order; once they are spent, with status 500.
    pub fn scripted(replies: Vec<StubReply>) -> io::Result<Self> {
        Self::serve(Box::new(|_| StubReply::status(500)), replies.into())
    }

    /// The API's base URL, `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every chat-completions request received so far, in order (other paths are not recorded).
    pub fn requests(&self) -> Vec<StubRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Appends `reply` to the script, which is answered before the responder.
    pub fn push(&self, reply: StubReply) {
        lock(&self.shared.script).push_back(reply);
    }

    fn serve(responder: Box<Responder>, script: VecDeque<StubReply>) -> io::Result<Self> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            responder,
            script: Mutex::new(script),
            requests: Mutex::new(Vec::new()),
            answered: AtomicU64::new(0),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let (stop, stopped) = oneshot::channel();
        let (ready, is_ready) = std::sync::mpsc::channel();
        // The runtime is built, run and dropped on the stub's own thread: a runtime may be neither
        // blocked on nor dropped inside the caller's runtime.
        let thread = std::thread::Builder::new()
            .name("chat-stub".to_owned())
            .spawn(move || {
                let setup = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .and_then(|runtime| {
                        let listener = {
                            let _entered = runtime.enter();
                            tokio::net::TcpListener::from_std(listener)?
                        };
                        Ok((runtime, listener))
                    });
                match setup {
                    Ok((runtime, listener)) => {
                        let _ = ready.send(Ok(()));
                        runtime.block_on(run(listener, app, stopped));
                    }
                    Err(error) => {
                        let _ = ready.send(Err(error));
                    }
                }
            })?;
        let started = is_ready
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("the chat stub's thread ended early")));
        if let Err(error) = started {
            let _ = thread.join();
            return Err(error);
        }
        Ok(Self {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl std::fmt::Debug for ChatStub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStub")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for ChatStub {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves until `stop`, then shuts down gracefully within [`STOP_GRACE`].
async fn run(listener: tokio::net::TcpListener, app: Router, stop: oneshot::Receiver<()>) {
    let (stopping, is_stopping) = oneshot::channel::<()>();
    let signal = async move {
        let _ = stop.await;
        let _ = stopping.send(());
    };
    let server = axum::serve(listener, app).with_graceful_shutdown(signal);
    let grace = async move {
        let _ = is_stopping.await;
        tokio::time::sleep(STOP_GRACE).await;
    };
    tokio::select! {
        _ = server.into_future() => {}
        () = grace => {}
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method != Method::POST || uri.path() != CHAT_PATH {
        return StatusCode::NOT_FOUND.into_response();
    }
    let body = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    lock(&shared.requests).push(StubRequest {
        body: body.clone(),
        authorization,
    });
    let mut reply = shared.next_reply(&body);
    while let StubReply::Delay { millis, then } = reply {
        tokio::time::sleep(Duration::from_millis(millis)).await;
        reply = *then;
    }
    let id = shared.answered.fetch_add(1, Ordering::Relaxed);
    let model = body.get("model").and_then(Value::as_str).unwrap_or("stub");
    match reply {
        StubReply::Content {
            text,
            prompt_tokens,
            completion_tokens,
        } => completion(id, model, &text, "stop", prompt_tokens, completion_tokens),
        StubReply::Cut { text } => completion(id, model, &text, "length", 10, 5),
        StubReply::Status {
            status,
            body,
            retry_after,
        } => respond(status, body, retry_after),
        StubReply::Raw { status, body } => respond(status, body, None),
        // Unwrapped by the loop above.
        StubReply::Delay { .. } => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

fn completion(
    id: u64,
    model: &str,
    text: &str,
    finish_reason: &str,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> Response {
    let body = json!({
        "id": format!("chatcmpl-stub-{id}"),
        "object": "chat.completion",
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": finish_reason,
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    });
    respond(200, body.to_string(), None)
}

fn respond(status: u16, body: String, retry_after: Option<u64>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// A lock that outlives a panicking holder: the stub's state stays readable for the test's report.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::io::{Read, Write};

    /// A bare HTTP/1.1 POST (no client library in this crate), answering the status and the body.
    fn post(stub: &ChatStub, path: &str, body: &str) -> (u16, String) {
        let (status, _, body) = exchange(stub, path, body);
        (status, body)
    }

    /// The status, the head (lower-cased) and the body of a bare HTTP/1.1 POST.
    fn exchange(stub: &ChatStub, path: &str, body: &str) -> (u16, String, String) {
        let mut stream = std::net::TcpStream::connect(stub.addr).unwrap();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let status = answer[9..12].parse().unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        (status, head.to_ascii_lowercase(), body.to_owned())
    }

    #[test]
    fn scripted_replies_in_order_then_500() {
        let stub =
            ChatStub::scripted(vec![StubReply::content("one"), StubReply::status(429)]).unwrap();
        let (status, body) = post(&stub, CHAT_PATH, r#"{"model":"m"}"#);
        assert_eq!(status, 200);
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["choices"][0]["message"]["content"], "one");
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert_eq!(body["usage"]["total_tokens"], 15);
        assert_eq!(body["model"], "m");
        assert_eq!(post(&stub, CHAT_PATH, "{}").0, 429);
        assert_eq!(post(&stub, CHAT_PATH, "{}").0, 500);
        stub.push(StubReply::Cut { text: "ha".into() });
        let body: Value = serde_json::from_str(&post(&stub, CHAT_PATH, "{}").1).unwrap();
        assert_eq!(body["choices"][0]["finish_reason"], "length");
        let requests = stub.requests();
        assert_eq!(requests.len(), 4);
        assert_eq!(requests[0].body, json!({"model": "m"}));
        assert_eq!(requests[0].authorization.as_deref(), Some("Bearer k"));
    }

    #[test]
    fn other_paths_are_not_found_and_not_recorded() {
        let stub = ChatStub::start(|_| StubReply::content("x")).unwrap();
        assert_eq!(post(&stub, "/v1/embeddings", "{}").0, 404);
        assert!(stub.requests().is_empty());
    }

    #[test]
    fn the_responder_sees_the_body_and_raw_bodies_pass_unchanged() {
        let stub =
            ChatStub::start(|body| StubReply::raw(format!("not json {}", body["n"]))).unwrap();
        assert_eq!(
            post(&stub, CHAT_PATH, r#"{"n":7}"#),
            (200, "not json 7".to_owned())
        );
    }

    #[tokio::test]
    async fn works_inside_another_runtime_and_stops_on_drop() {
        let stub = ChatStub::scripted(vec![StubReply::Status {
            status: 429,
            body: String::new(),
            retry_after: Some(3),
        }])
        .unwrap();
        let (status, head, _) = exchange(&stub, CHAT_PATH, "{}");
        assert_eq!(status, 429);
        assert!(head.contains("\r\nretry-after: 3"), "{head}");
        let addr = stub.addr;
        drop(stub);
        assert!(std::net::TcpStream::connect(addr).is_err());
    }
}
