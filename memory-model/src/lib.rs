//! A client of an OpenAI-compatible chat-completions endpoint (the protocol Ollama, vLLM, llama.cpp's
//! server and hosted APIs share), for the parts of memory that may ask a language model: the worker's
//! model extraction and compaction summaries.
//!
//! - [`ChatModel`]: the port (one bounded request in, one answer with its metered usage out). The
//!   worker and the summarizer depend on it, never on HTTP.
//! - [`HttpChatModel`]: the port over HTTP (`POST {url}/chat/completions`), with structured output
//!   (`response_format` with a JSON schema) where the endpoint offers it and a plain answer
//!   otherwise, bounded retries with backoff for transient failures, and a bounded answer size;
//!   [`HttpChatModel::meter`] reads its own counters ([`MeterSnapshot`]: calls, failures by kind,
//!   retries, tokens, latency).
//! - [`ModelError`]: every failure typed; [`ModelError::is_transient`] tells a failure worth a later
//!   try (the endpoint down, 429, 5xx, a timeout) from one that a retry would repeat. A call fails
//!   with a [`CallFailure`]: the error with what the call spent (an answer cut at `max_tokens` was
//!   generated and is counted).
//! - [`ApiKey`]: the key, which never appears in `Debug`, `Display`, logs or errors.

mod error;
mod http;
mod key;
mod meter;
mod wire;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub use error::ModelError;
pub use http::HttpChatModel;
pub use key::ApiKey;
pub use meter::MeterSnapshot;

/// Where and what to ask.
#[derive(Debug, Clone)]
pub struct ModelEndpoint {
    /// The API's base URL, e.g. `http://127.0.0.1:8080/v1` (requests go to `{url}/chat/completions`).
    pub url: String,
    /// The model's name as the endpoint knows it.
    pub model: String,
    /// The bearer key, if the endpoint wants one.
    pub key: Option<ApiKey>,
    /// The limit of one HTTP attempt, connecting and answering included.
    pub timeout: Duration,
    /// Most attempts of one request (1: no retry). Only transient failures are tried again.
    pub attempts: u32,
    /// The delay before the first retry; each later one doubles it (with jitter, at most 30 s).
    pub backoff: Duration,
}

/// The default limit of one attempt.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The default number of attempts of one request.
pub const DEFAULT_ATTEMPTS: u32 = 3;
/// The default delay before the first retry.
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(500);
/// Most bytes of one request body; a longer request is refused before it is sent.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// Most bytes of one answer body; a longer answer is `Malformed`, read no further.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

impl ModelEndpoint {
    /// `model` at `url`, with no key, the default timeout, attempts and backoff.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            model: model.into(),
            key: None,
            timeout: DEFAULT_TIMEOUT,
            attempts: DEFAULT_ATTEMPTS,
            backoff: DEFAULT_BACKOFF,
        }
    }
}

/// A JSON schema the answer must follow, sent as `response_format` when the endpoint takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerSchema {
    /// The schema's name (letters, digits, `_` and `-`).
    pub name: String,
    /// The schema.
    pub schema: serde_json::Value,
}

/// One request: a system message, a user message, and the answer wanted.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The instructions.
    pub system: String,
    /// The material.
    pub user: String,
    /// The shape of the answer, if it must be JSON of a shape.
    pub schema: Option<AnswerSchema>,
    /// Most tokens of the answer.
    pub max_tokens: u32,
}

/// Tokens one call used, as the endpoint reports them (0 when it reports none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    /// Tokens of the request.
    pub prompt: u64,
    /// Tokens of the answer.
    pub completion: u64,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatAnswer {
    /// The answer's text (the first choice's message content).
    pub content: String,
    /// Tokens used, over every attempt that was answered.
    pub usage: TokenUsage,
    /// HTTP attempts made (1 unless a transient failure was tried again).
    pub attempts: u32,
    /// Milliseconds from the first attempt to the answer.
    pub latency_ms: u64,
    /// Whether the answer was asked for with `response_format` (structured output).
    pub structured: bool,
}

/// A call that failed, and what it cost before it did: an answer cut at `max_tokens` or not JSON
/// was still generated and paid for, so a caller that counts cost (the worker's `ModelUsage`) can
/// count it as it counts an answer.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("{error}")]
pub struct CallFailure {
    /// Why it failed.
    pub error: ModelError,
    /// Tokens the endpoint reported over the call's attempts (0 when none answered).
    pub usage: TokenUsage,
    /// HTTP attempts made (0 when the request was refused before sending: too large).
    pub attempts: u32,
    /// Milliseconds from the first attempt to the failure.
    pub latency_ms: u64,
}

/// The future of one [`ChatModel::complete`].
pub type ChatFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ChatAnswer, CallFailure>> + Send + 'a>>;

/// A chat model: one request in, one answer out.
pub trait ChatModel: Send + Sync + std::fmt::Debug {
    /// The model's name (recorded with what it produced).
    fn name(&self) -> &str;
    /// Asks `request`; transient failures are tried again within the model's own bounds.
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> ChatFuture<'a>;
    /// What the model's calls cost so far, when it keeps count (a server's `/metrics` shows it).
    fn meter(&self) -> Option<MeterSnapshot> {
        None
    }
}
