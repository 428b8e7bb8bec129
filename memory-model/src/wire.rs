//! The chat-completions JSON: the request body we send and the parts of the answer we read.

use serde::Serialize;
use serde_json::Value;

use crate::{ChatRequest, MAX_REQUEST_BYTES, ModelError, TokenUsage};

/// Characters of an error body kept in [`ModelError::Refused`]: enough to say why, too few to
/// carry a large echo of the request.
const EXCERPT_CHARS: usize = 200;

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: [Message<'a>; 2],
    // The same material should give the same extraction: sampling would make it a coin toss.
    temperature: u8,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat<'a>>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct ResponseFormat<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    json_schema: JsonSchema<'a>,
}

#[derive(Serialize)]
struct JsonSchema<'a> {
    name: &'a str,
    schema: &'a Value,
    strict: bool,
}

/// The body of `request` for `model`, with `response_format` when `structured` (and the request
/// has a schema); refused when longer than [`MAX_REQUEST_BYTES`].
pub(crate) fn encode(
    model: &str,
    request: &ChatRequest,
    structured: bool,
) -> Result<Vec<u8>, ModelError> {
    let response_format = request
        .schema
        .as_ref()
        .filter(|_| structured)
        .map(|schema| ResponseFormat {
            kind: "json_schema",
            json_schema: JsonSchema {
                name: &schema.name,
                schema: &schema.schema,
                strict: true,
            },
        });
    let body = Body {
        model,
        messages: [
            Message {
                role: "system",
                content: &request.system,
            },
            Message {
                role: "user",
                content: &request.user,
            },
        ],
        temperature: 0,
        max_tokens: request.max_tokens,
        stream: false,
        response_format,
    };
    let bytes = serde_json::to_vec(&body).map_err(|e| ModelError::Config {
        detail: format!("the request could not be encoded as JSON: {e}"),
    })?;
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(ModelError::TooLarge {
            limit: "request_bytes",
            max: MAX_REQUEST_BYTES as u64,
            actual: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// The parts of a chat completion we use. Usage is read apart from the content so that an answer
/// that cannot be used is still metered.
#[derive(Debug)]
pub(crate) struct Completion {
    content: Option<String>,
    finish_reason: Option<String>,
    pub(crate) usage: TokenUsage,
}

/// Reads a chat completion; only a body that is not JSON fails here.
pub(crate) fn parse(body: &[u8]) -> Result<Completion, ModelError> {
    // The serde error names a line and column, never the body's text.
    let value: Value = serde_json::from_slice(body).map_err(|e| ModelError::Malformed {
        detail: format!("the answer is not JSON: {e}"),
    })?;
    let tokens = |pointer| value.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    Ok(Completion {
        content: value
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .map(str::to_owned),
        finish_reason: value
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        usage: TokenUsage {
            prompt: tokens("/usage/prompt_tokens"),
            completion: tokens("/usage/completion_tokens"),
        },
    })
}

impl Completion {
    /// The answer's text, unless there is none or it was cut short.
    pub(crate) fn into_content(self) -> Result<String, ModelError> {
        // A cut answer is a prefix: half a JSON object, or a summary missing its end.
        if self.finish_reason.as_deref() == Some("length") {
            return Err(ModelError::Malformed {
                detail: "the answer was cut at max_tokens (finish_reason \"length\")".to_owned(),
            });
        }
        self.content.ok_or_else(|| ModelError::Malformed {
            detail: "the answer has no choices[0].message.content string".to_owned(),
        })
    }
}

/// Whether an error body is about structured output (the endpoint does not take it).
pub(crate) fn mentions_schema(body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    body.contains("response_format") || body.contains("json_schema")
}

/// The first [`EXCERPT_CHARS`] characters of an error body, the key's text redacted first (so no
/// cut can leave part of it).
pub(crate) fn excerpt(body: &str, key: Option<&str>) -> String {
    redact(body, key).chars().take(EXCERPT_CHARS).collect()
}

/// `text` with every occurrence of the key replaced by `<redacted>`.
pub(crate) fn redact(text: &str, key: Option<&str>) -> String {
    match key {
        Some(key) if !key.is_empty() => text.replace(key, "<redacted>"),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::AnswerSchema;

    fn request(schema: bool) -> ChatRequest {
        ChatRequest {
            system: "sys".into(),
            user: "usr".into(),
            schema: schema.then(|| AnswerSchema {
                name: "facts".into(),
                schema: serde_json::json!({"type": "object"}),
            }),
            max_tokens: 64,
        }
    }

    #[test]
    fn encode_writes_the_openai_body() {
        let body: Value =
            serde_json::from_slice(&encode("m", &request(true), true).unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "model": "m",
                "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "usr"}],
                "temperature": 0,
                "max_tokens": 64,
                "stream": false,
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": "facts", "schema": {"type": "object"}, "strict": true}},
            })
        );
        let plain: Value =
            serde_json::from_slice(&encode("m", &request(true), false).unwrap()).unwrap();
        assert!(plain.get("response_format").is_none());
    }

    #[test]
    fn excerpt_redacts_before_cutting() {
        let key = "k".repeat(50);
        let body = format!("{}{key}{}", "x".repeat(190), "y".repeat(100));
        let cut = excerpt(&body, Some(&key));
        assert_eq!(cut.chars().count(), EXCERPT_CHARS);
        assert!(!cut.contains("kkkkk"));
        assert!(cut.ends_with("<redacted>"));
    }

    #[test]
    fn usage_is_read_even_from_a_cut_answer() {
        let body = br#"{"choices":[{"message":{"content":"half"},"finish_reason":"length"}],
            "usage":{"prompt_tokens":7,"completion_tokens":3}}"#;
        let completion = parse(body).unwrap();
        assert_eq!(
            completion.usage,
            TokenUsage {
                prompt: 7,
                completion: 3
            }
        );
        assert_eq!(completion.into_content().unwrap_err().kind(), "malformed");
    }
}
