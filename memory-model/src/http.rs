//! [`ChatModel`] over HTTP: `POST {url}/chat/completions`, plain HTTP only (this build has no TLS).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{Response, Url};
use tracing::{debug, warn};

use crate::meter::{Meter, MeterSnapshot};
use crate::wire;
use crate::{
    CallFailure, ChatAnswer, ChatFuture, ChatModel, ChatRequest, MAX_ANSWER_BYTES, ModelEndpoint,
    ModelError, TokenUsage,
};

/// The longest wait between attempts, a server's `Retry-After` included: a caller waiting longer
/// is better told the endpoint is unavailable.
const MAX_DELAY: Duration = Duration::from_secs(30);
/// Bytes of an error body read to explain it (and to see whether it is about structured output).
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// A [`ChatModel`] speaking the OpenAI chat-completions protocol over plain HTTP.
///
/// It sends structured output (`response_format` with the request's JSON schema) until the
/// endpoint refuses it once, then asks for plain answers; it tries transient failures again with
/// exponential backoff and jitter, up to the endpoint's attempts; and it meters what it did.
#[derive(Debug)]
pub struct HttpChatModel {
    endpoint: ModelEndpoint,
    completions: Url,
    // Built once and marked sensitive, so neither `Debug` nor HTTP/2 header compression shows it.
    authorization: Option<HeaderValue>,
    client: reqwest::Client,
    // Set when the endpoint refused `response_format`: later requests are plain from the start.
    plain_only: AtomicBool,
    meter: Meter,
}

impl HttpChatModel {
    /// A model at `endpoint`: refused (`Config`) for a URL that is not `http://` (an `https://` one
    /// needs TLS, which this build lacks), an empty model name, no attempts or a zero timeout.
    pub fn new(mut endpoint: ModelEndpoint) -> Result<Self, ModelError> {
        let config = |detail: &str| ModelError::Config {
            detail: detail.to_owned(),
        };
        if let Some(trimmed) = endpoint.url.strip_suffix('/') {
            endpoint.url = trimmed.to_owned();
        }
        let base = Url::parse(&endpoint.url)
            .map_err(|e| config(&format!("the endpoint URL is not a URL: {e}")))?;
        match base.scheme() {
            "http" => {}
            "https" => {
                return Err(config(
                    "https:// endpoints need TLS, which this build does not include: use an \
                     http:// endpoint (a local server, or a TLS-terminating proxy in front of one)",
                ));
            }
            _ => return Err(config("the endpoint URL must start with http://")),
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(config(
                "the endpoint URL must have no query or fragment (requests go to {url}/chat/completions)",
            ));
        }
        let completions = Url::parse(&format!("{}/chat/completions", endpoint.url))
            .map_err(|e| config(&format!("the endpoint URL is not a URL: {e}")))?;
        if endpoint.model.is_empty() {
            return Err(config("the model name is empty"));
        }
        if endpoint.attempts == 0 {
            return Err(config("attempts must be at least 1"));
        }
        if endpoint.timeout.is_zero() {
            return Err(config("the timeout must be longer than zero"));
        }
        let authorization = endpoint
            .key
            .as_ref()
            .map(|key| {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
                    .map_err(|_| config("the API key has characters a header cannot carry"))?;
                value.set_sensitive(true);
                Ok::<_, ModelError>(value)
            })
            .transpose()?;
        let client = reqwest::Client::builder()
            .timeout(endpoint.timeout)
            // A redirect would resend the prompt somewhere not configured: report it instead.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| config(&format!("the HTTP client could not be built: {e}")))?;
        Ok(Self {
            endpoint,
            completions,
            authorization,
            client,
            plain_only: AtomicBool::new(false),
            meter: Meter::default(),
        })
    }

    /// What this model has done so far.
    pub fn meter(&self) -> MeterSnapshot {
        self.meter.snapshot()
    }

    async fn ask(&self, request: &ChatRequest) -> Result<ChatAnswer, CallFailure> {
        let started = Instant::now();
        let tally = Tally::default();
        let tally = &tally;
        let result = (move || self.attempt(request, tally))
            .retry(self.backoff())
            .sleep(tokio::time::sleep)
            .when(ModelError::is_transient)
            .adjust(honour_retry_after)
            .notify(|error: &ModelError, delay: Duration| {
                self.meter.retried();
                debug!(
                    model = %self.endpoint.model,
                    kind = error.kind(),
                    delay_ms = millis(delay),
                    "trying the model again"
                );
            })
            .await;
        let attempts = tally.attempts.load(Ordering::Relaxed);
        match result {
            Ok(answered) => {
                let latency_ms = millis(started.elapsed());
                self.meter.answered(latency_ms);
                Ok(ChatAnswer {
                    content: answered.content,
                    usage: tally.usage(),
                    attempts,
                    latency_ms,
                    structured: answered.structured,
                })
            }
            Err(error) => {
                self.meter.failed(&error);
                let model = &self.endpoint.model;
                match &error {
                    // A refusal's detail is the server's body, which may echo the prompt.
                    ModelError::Refused { status, .. } => {
                        warn!(%model, kind = error.kind(), status, attempts, "the model call failed");
                    }
                    _ => {
                        warn!(%model, kind = error.kind(), attempts, %error, "the model call failed")
                    }
                }
                Err(CallFailure {
                    error,
                    usage: tally.usage(),
                    attempts,
                    latency_ms: millis(started.elapsed()),
                })
            }
        }
    }

    fn backoff(&self) -> ExponentialBuilder {
        let retries = self.endpoint.attempts.saturating_sub(1);
        ExponentialBuilder::new()
            .with_min_delay(self.endpoint.backoff)
            .with_max_delay(MAX_DELAY)
            .with_factor(2.0)
            .with_jitter()
            .with_max_times(usize::try_from(retries).unwrap_or(usize::MAX))
    }

    /// One attempt; a refusal of structured output is followed at once by a plain request within
    /// the same attempt (a fallback, not a retry).
    async fn attempt(&self, request: &ChatRequest, tally: &Tally) -> Result<Answered, ModelError> {
        let structured = request.schema.is_some() && !self.plain_only.load(Ordering::Relaxed);
        match self.send(request, structured, tally).await {
            Err(Failure {
                schema_refused: true,
                error,
            }) => {
                self.plain_only.store(true, Ordering::Relaxed);
                warn!(
                    model = %self.endpoint.model,
                    kind = error.kind(),
                    "the endpoint refused structured output; asking for plain answers from now on"
                );
                self.send(request, false, tally).await.map_err(|f| f.error)
            }
            result => result.map_err(|f| f.error),
        }
    }

    async fn send(
        &self,
        request: &ChatRequest,
        structured: bool,
        tally: &Tally,
    ) -> Result<Answered, Failure> {
        let body = wire::encode(&self.endpoint.model, request, structured)?;
        let attempt = tally.attempts.fetch_add(1, Ordering::Relaxed) + 1;
        debug!(
            model = %self.endpoint.model,
            attempt,
            structured,
            request_bytes = body.len(),
            "asking the model"
        );
        let started = Instant::now();
        let mut http = self
            .client
            .post(self.completions.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(authorization) = &self.authorization {
            http = http.header(AUTHORIZATION, authorization.clone());
        }
        let mut response = http.send().await.map_err(|e| self.transport(&e))?;
        let status = response.status().as_u16();
        debug!(model = %self.endpoint.model, attempt, status, "the model answered");
        if response.status().is_success() {
            let body = self.read_answer(&mut response).await?;
            let completion = wire::parse(&body)?;
            tally.add(completion.usage);
            self.meter.tokens(completion.usage);
            let content = completion.into_content()?;
            return Ok(Answered {
                content,
                structured,
            });
        }
        let error = match status {
            408 => ModelError::Timeout {
                after_ms: millis(started.elapsed()),
            },
            429 => ModelError::RateLimited {
                retry_after_ms: retry_after_ms(response.headers()),
            },
            // A 501 to a structured request may be the endpoint refusing `response_format`.
            500..=599 if !(structured && status == 501) => ModelError::Server { status },
            _ => {
                let text = read_prefix(&mut response).await;
                let text = String::from_utf8_lossy(&text);
                let schema_refused =
                    structured && matches!(status, 400 | 422 | 501) && wire::mentions_schema(&text);
                let error = if status == 501 && !schema_refused {
                    ModelError::Server { status }
                } else {
                    ModelError::Refused {
                        status,
                        detail: wire::excerpt(&text, self.key()),
                    }
                };
                return Err(Failure {
                    error,
                    schema_refused,
                });
            }
        };
        Err(error.into())
    }

    /// The answer's body, failing past [`MAX_ANSWER_BYTES`] without reading further.
    async fn read_answer(&self, response: &mut Response) -> Result<Vec<u8>, ModelError> {
        let too_long = || ModelError::Malformed {
            detail: format!("the answer is longer than {MAX_ANSWER_BYTES} bytes"),
        };
        if response
            .content_length()
            .is_some_and(|length| length > MAX_ANSWER_BYTES as u64)
        {
            return Err(too_long());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(&e))? {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(too_long());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn transport(&self, error: &reqwest::Error) -> ModelError {
        if error.is_timeout() {
            return ModelError::Timeout {
                after_ms: millis(self.endpoint.timeout),
            };
        }
        // The header's value never reaches a transport error; redacting is for a key pasted into
        // the URL by mistake.
        let detail = wire::redact(&chain(error), self.key());
        if error.is_builder() {
            ModelError::Config { detail }
        } else {
            ModelError::Unreachable { detail }
        }
    }

    fn key(&self) -> Option<&str> {
        self.endpoint.key.as_ref().map(|key| key.expose())
    }
}

impl ChatModel for HttpChatModel {
    fn name(&self) -> &str {
        &self.endpoint.model
    }

    fn meter(&self) -> Option<MeterSnapshot> {
        Some(HttpChatModel::meter(self))
    }

    fn complete<'a>(&'a self, request: &'a ChatRequest) -> ChatFuture<'a> {
        Box::pin(self.ask(request))
    }
}

/// What one call has gathered over its attempts (atomics, so the call's future stays `Send`).
#[derive(Default)]
struct Tally {
    attempts: AtomicU32,
    prompt: AtomicU64,
    completion: AtomicU64,
}

impl Tally {
    fn add(&self, usage: TokenUsage) {
        self.prompt.fetch_add(usage.prompt, Ordering::Relaxed);
        self.completion
            .fetch_add(usage.completion, Ordering::Relaxed);
    }

    fn usage(&self) -> TokenUsage {
        TokenUsage {
            prompt: self.prompt.load(Ordering::Relaxed),
            completion: self.completion.load(Ordering::Relaxed),
        }
    }
}

/// An attempt's answer.
struct Answered {
    content: String,
    structured: bool,
}

/// An attempt's failure, and whether it was the endpoint refusing structured output.
struct Failure {
    error: ModelError,
    schema_refused: bool,
}

impl From<ModelError> for Failure {
    fn from(error: ModelError) -> Self {
        Self {
            error,
            schema_refused: false,
        }
    }
}

/// A 429's `Retry-After` (capped at [`MAX_DELAY`]) in place of the planned delay; no retry is
/// added where the budget is spent (`planned` is `None`).
fn honour_retry_after(error: &ModelError, planned: Option<Duration>) -> Option<Duration> {
    match (error, planned) {
        (
            ModelError::RateLimited {
                retry_after_ms: Some(ms),
            },
            Some(_),
        ) => Some(Duration::from_millis(*ms).min(MAX_DELAY)),
        _ => planned,
    }
}

/// `Retry-After` in seconds (its HTTP-date form is not honoured: the backoff applies instead).
fn retry_after_ms(headers: &HeaderMap) -> Option<u64> {
    let seconds: u64 = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(seconds.saturating_mul(1000))
}

/// The start of an error body; a body that breaks off is explained by what arrived.
async fn read_prefix(response: &mut Response) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(ERROR_BODY_BYTES);
    body
}

/// An error and its sources, `: `-joined (reqwest's own message omits the cause).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_replaces_the_planned_delay_within_the_cap() {
        let limited = |ms| ModelError::RateLimited {
            retry_after_ms: Some(ms),
        };
        let planned = Some(Duration::from_millis(1));
        assert_eq!(
            honour_retry_after(&limited(2000), planned),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            honour_retry_after(&limited(600_000), planned),
            Some(MAX_DELAY)
        );
        // The budget spent: the server's wish adds no attempt.
        assert_eq!(honour_retry_after(&limited(2000), None), None);
        let server = ModelError::Server { status: 503 };
        assert_eq!(honour_retry_after(&server, planned), planned);
    }

    #[test]
    fn retry_after_reads_seconds_only() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after_ms(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after_ms(&headers), Some(3000));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after_ms(&headers), None);
    }
}
