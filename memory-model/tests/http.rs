//! `HttpChatModel` against a loopback OpenAI-compatible stub: real HTTP, every rule of the client
//! checked by what the stub received and what the client answered.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use memory_model::{
    AnswerSchema, ApiKey, ChatModel, ChatRequest, HttpChatModel, MAX_ANSWER_BYTES,
    MAX_REQUEST_BYTES, ModelEndpoint, ModelError, TokenUsage,
};
use memory_testkit::chat_stub::{ChatStub, StubReply};
use serde_json::{Value, json};

const KEY: &str = "sk-stub-0123456789abcdefSECRET";

fn endpoint(url: String) -> ModelEndpoint {
    let mut endpoint = ModelEndpoint::new(url, "stub-model");
    endpoint.backoff = Duration::from_millis(1);
    endpoint
}

fn model(stub: &ChatStub, attempts: u32) -> HttpChatModel {
    let mut endpoint = endpoint(stub.url());
    endpoint.attempts = attempts;
    HttpChatModel::new(endpoint).unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        system: "You extract facts.".into(),
        user: "The user prefers tea.".into(),
        schema: None,
        max_tokens: 256,
    }
}

fn schema_request() -> ChatRequest {
    ChatRequest {
        schema: Some(AnswerSchema {
            name: "facts".into(),
            schema: json!({"type": "object", "properties": {"facts": {"type": "array"}}}),
        }),
        ..request()
    }
}

fn bodies(stub: &ChatStub) -> Vec<Value> {
    stub.requests().into_iter().map(|r| r.body).collect()
}

#[tokio::test]
async fn a_content_answer_comes_with_its_usage() {
    let stub = ChatStub::scripted(vec![StubReply::content("tea")]).unwrap();
    // One trailing slash is trimmed: requests still go to {url}/chat/completions.
    let model = HttpChatModel::new(endpoint(format!("{}/", stub.url()))).unwrap();
    assert_eq!(model.name(), "stub-model");

    let answer = model.complete(&request()).await.unwrap();

    assert_eq!(answer.content, "tea");
    assert_eq!(
        answer.usage,
        TokenUsage {
            prompt: 10,
            completion: 5
        }
    );
    assert_eq!(answer.attempts, 1);
    assert!(!answer.structured);
    assert_eq!(
        bodies(&stub),
        [json!({
            "model": "stub-model",
            "messages": [
                {"role": "system", "content": "You extract facts."},
                {"role": "user", "content": "The user prefers tea."},
            ],
            "temperature": 0,
            "max_tokens": 256,
            "stream": false,
        })]
    );
    assert_eq!(stub.requests()[0].authorization, None);
}

#[tokio::test]
async fn the_key_is_sent_as_bearer_and_shown_nowhere() {
    // Every failure the stub can cause, the first echoing the key back in its body.
    let stub = ChatStub::scripted(vec![
        StubReply::Status {
            status: 401,
            body: format!("invalid key {KEY} for this model"),
            retry_after: None,
        },
        StubReply::status(500),
        StubReply::status(429),
        StubReply::raw(format!("not json {KEY}")),
        StubReply::Cut { text: KEY.into() },
        StubReply::Raw {
            status: 200,
            body: json!({"choices": [], "echo": KEY}).to_string(),
        },
    ])
    .unwrap();
    let mut endpoint = endpoint(stub.url());
    endpoint.key = Some(ApiKey::new(KEY.to_owned()).unwrap());
    endpoint.attempts = 1;
    assert!(!format!("{endpoint:?}").contains(KEY));
    let model = HttpChatModel::new(endpoint.clone()).unwrap();
    assert!(!format!("{model:?}").contains(KEY));

    let mut errors = Vec::new();
    for _ in 0..6 {
        errors.push(model.complete(&request()).await.unwrap_err().error);
    }
    // Unreachable and timeout: a port nobody listens on, and a stub slower than the limit.
    let mut gone = endpoint.clone();
    gone.url = format!("http://127.0.0.1:{}/v1", free_port());
    errors.push(
        HttpChatModel::new(gone)
            .unwrap()
            .complete(&request())
            .await
            .unwrap_err()
            .error,
    );
    let slow = ChatStub::scripted(vec![delayed(2000)]).unwrap();
    let mut hurried = endpoint.clone();
    hurried.url = slow.url();
    hurried.timeout = Duration::from_millis(200);
    errors.push(
        HttpChatModel::new(hurried)
            .unwrap()
            .complete(&request())
            .await
            .unwrap_err()
            .error,
    );
    let mut oversized = request();
    oversized.user = KEY.repeat(MAX_REQUEST_BYTES / KEY.len() + 1);
    errors.push(model.complete(&oversized).await.unwrap_err().error);

    let kinds: Vec<_> = errors.iter().map(ModelError::kind).collect();
    assert_eq!(
        kinds,
        [
            "refused",
            "server",
            "rate_limited",
            "malformed",
            "malformed",
            "malformed",
            "unreachable",
            "timeout",
            "too_large"
        ]
    );
    for error in &errors {
        assert!(!format!("{error}").contains(KEY), "{error}");
        assert!(!format!("{error:?}").contains(KEY), "{error:?}");
    }
    let ModelError::Refused {
        status: 401,
        detail,
    } = &errors[0]
    else {
        panic!("{:?}", errors[0]);
    };
    assert_eq!(detail, "invalid key <redacted> for this model");

    let requests = stub.requests();
    assert_eq!(requests.len(), 6);
    for request in requests {
        assert_eq!(request.authorization, Some(format!("Bearer {KEY}")));
    }
}

#[tokio::test]
async fn structured_output_is_asked_for_when_a_schema_is_given() {
    let stub = ChatStub::scripted(vec![StubReply::content(r#"{"facts":[]}"#)]).unwrap();
    let model = model(&stub, 1);

    let answer = model.complete(&schema_request()).await.unwrap();

    assert!(answer.structured);
    assert_eq!(
        bodies(&stub)[0]["response_format"],
        json!({
            "type": "json_schema",
            "json_schema": {
                "name": "facts",
                "schema": {"type": "object", "properties": {"facts": {"type": "array"}}},
                "strict": true,
            },
        })
    );
}

#[tokio::test]
async fn a_refused_response_format_falls_back_to_plain_for_good() {
    let stub = ChatStub::scripted(vec![
        StubReply::Status {
            status: 400,
            body: json!({"error": {"message": "response_format is not supported by this model"}})
                .to_string(),
            retry_after: None,
        },
        StubReply::content("first"),
        StubReply::content("second"),
    ])
    .unwrap();
    // One attempt: the fallback is no retry, so it must happen within it.
    let model = model(&stub, 1);

    let first = model.complete(&schema_request()).await.unwrap();
    assert_eq!(first.content, "first");
    assert!(!first.structured);
    assert_eq!(first.attempts, 2);

    let second = model.complete(&schema_request()).await.unwrap();
    assert_eq!(second.content, "second");
    assert!(!second.structured);
    assert_eq!(second.attempts, 1);

    let bodies = bodies(&stub);
    assert_eq!(bodies.len(), 3);
    assert!(bodies[0].get("response_format").is_some());
    assert!(bodies[1].get("response_format").is_none());
    assert!(bodies[2].get("response_format").is_none());
    assert_eq!(model.meter().retries, 0);
}

#[tokio::test]
async fn a_429_is_tried_again() {
    let stub = ChatStub::scripted(vec![
        StubReply::Status {
            status: 429,
            body: String::new(),
            retry_after: Some(0),
        },
        StubReply::content("later"),
    ])
    .unwrap();
    let model = model(&stub, 3);

    let answer = model.complete(&request()).await.unwrap();

    assert_eq!(answer.content, "later");
    assert_eq!(answer.attempts, 2);
    assert_eq!(stub.requests().len(), 2);
    assert_eq!(model.meter().retries, 1);
}

#[tokio::test]
async fn a_408_is_a_timeout_and_tried_again() {
    let stub = ChatStub::scripted(vec![StubReply::status(408), StubReply::content("ok")]).unwrap();
    let answer = model(&stub, 2).complete(&request()).await.unwrap();
    assert_eq!(answer.attempts, 2);
}

#[tokio::test]
async fn server_errors_are_tried_up_to_the_attempts() {
    let stub = ChatStub::scripted(vec![
        StubReply::status(500),
        StubReply::status(500),
        StubReply::status(500),
        StubReply::content("too late"),
    ])
    .unwrap();
    let model = model(&stub, 3);

    let error = model.complete(&request()).await.unwrap_err().error;

    assert_eq!(error, ModelError::Server { status: 500 });
    assert!(error.is_transient());
    assert_eq!(stub.requests().len(), 3);
}

#[tokio::test]
async fn a_refusal_is_not_tried_again() {
    let stub = ChatStub::scripted(vec![StubReply::status(400), StubReply::content("no")]).unwrap();
    // A schema is given, but the refusal is not about it: no fallback either.
    let error = model(&stub, 3)
        .complete(&schema_request())
        .await
        .unwrap_err()
        .error;

    let ModelError::Refused {
        status: 400,
        detail,
    } = &error
    else {
        panic!("{error:?}");
    };
    assert!(detail.contains("stub status 400"));
    assert!(!error.is_transient());
    assert_eq!(stub.requests().len(), 1);
}

#[tokio::test]
async fn a_body_that_is_not_json_is_malformed_and_not_tried_again() {
    let stub = ChatStub::scripted(vec![
        StubReply::raw("{\"choices\": [oops"),
        StubReply::content("no"),
    ])
    .unwrap();
    let error = model(&stub, 3)
        .complete(&request())
        .await
        .unwrap_err()
        .error;
    assert!(matches!(error, ModelError::Malformed { .. }), "{error:?}");
    assert!(!error.is_transient());
    assert_eq!(stub.requests().len(), 1);
}

#[tokio::test]
async fn an_answer_cut_at_max_tokens_is_malformed() {
    let stub = ChatStub::scripted(vec![StubReply::Cut {
        text: "{\"facts\": [".into(),
    }])
    .unwrap();
    let failure = model(&stub, 3).complete(&request()).await.unwrap_err();
    let error = failure.error;
    assert!(matches!(error, ModelError::Malformed { .. }), "{error:?}");
    assert_eq!(stub.requests().len(), 1);
    // The cut answer was generated: its tokens go with the failure to whoever counts cost.
    assert_eq!(failure.attempts, 1);
    assert!(failure.usage.completion > 0, "{:?}", failure.usage);
}

#[tokio::test]
async fn an_answer_over_the_bound_is_malformed() {
    let stub = ChatStub::scripted(vec![StubReply::raw("x".repeat(MAX_ANSWER_BYTES + 1))]).unwrap();
    let error = model(&stub, 3)
        .complete(&request())
        .await
        .unwrap_err()
        .error;
    let ModelError::Malformed { detail } = &error else {
        panic!("{error:?}");
    };
    assert!(detail.contains("longer than"), "{detail}");
    assert_eq!(stub.requests().len(), 1);
}

#[tokio::test]
async fn an_answer_slower_than_the_timeout_is_a_timeout() {
    let stub = ChatStub::scripted(vec![delayed(2000)]).unwrap();
    let mut endpoint = endpoint(stub.url());
    endpoint.timeout = Duration::from_millis(200);
    endpoint.attempts = 1;

    let error = HttpChatModel::new(endpoint)
        .unwrap()
        .complete(&request())
        .await
        .unwrap_err()
        .error;

    assert!(matches!(error, ModelError::Timeout { .. }), "{error:?}");
    assert!(error.is_transient());
}

#[tokio::test]
async fn a_port_nobody_listens_on_is_unreachable() {
    let mut endpoint = endpoint(format!("http://127.0.0.1:{}/v1", free_port()));
    endpoint.attempts = 2;
    let model = HttpChatModel::new(endpoint).unwrap();

    let error = model.complete(&request()).await.unwrap_err().error;

    assert!(matches!(error, ModelError::Unreachable { .. }), "{error:?}");
    assert!(error.is_transient());
    assert_eq!(model.meter().retries, 1);
}

#[tokio::test]
async fn an_oversized_request_is_refused_before_sending() {
    let stub = ChatStub::scripted(vec![StubReply::content("never")]).unwrap();
    let mut oversized = request();
    oversized.user = "x".repeat(MAX_REQUEST_BYTES);

    let error = model(&stub, 3)
        .complete(&oversized)
        .await
        .unwrap_err()
        .error;

    let ModelError::TooLarge { limit, max, actual } = error else {
        panic!("{error:?}");
    };
    assert_eq!(limit, "request_bytes");
    assert_eq!(max, MAX_REQUEST_BYTES as u64);
    assert!(actual > max);
    assert!(stub.requests().is_empty());
}

#[test]
fn an_https_url_is_a_configuration_error_naming_tls() {
    let error =
        HttpChatModel::new(ModelEndpoint::new("https://api.example.com/v1", "m")).unwrap_err();
    let ModelError::Config { detail } = &error else {
        panic!("{error:?}");
    };
    assert!(detail.contains("TLS"), "{detail}");
}

#[test]
fn other_bad_endpoints_are_configuration_errors() {
    let bad = |endpoint: ModelEndpoint| HttpChatModel::new(endpoint).unwrap_err().kind();
    assert_eq!(bad(ModelEndpoint::new("not a url", "m")), "config");
    assert_eq!(bad(ModelEndpoint::new("ftp://127.0.0.1/v1", "m")), "config");
    assert_eq!(bad(ModelEndpoint::new("http://127.0.0.1/v1", "")), "config");
    let mut no_attempts = ModelEndpoint::new("http://127.0.0.1/v1", "m");
    no_attempts.attempts = 0;
    assert_eq!(bad(no_attempts), "config");
}

#[tokio::test]
async fn the_meter_counts_calls_failures_retries_and_tokens() {
    let stub = ChatStub::scripted(vec![
        StubReply::Content {
            text: "a".into(),
            prompt_tokens: 100,
            completion_tokens: 20,
        },
        StubReply::status(503),
        StubReply::content("b"),
        StubReply::status(400),
        StubReply::Cut { text: "c".into() },
    ])
    .unwrap();
    let model = model(&stub, 2);
    assert_eq!(model.meter(), Default::default());

    model.complete(&request()).await.unwrap();
    let retried = model.complete(&request()).await.unwrap();
    assert_eq!(
        retried.usage,
        TokenUsage {
            prompt: 10,
            completion: 5
        }
    );
    assert_eq!(
        model.complete(&request()).await.unwrap_err().error.kind(),
        "refused"
    );
    assert_eq!(
        model.complete(&request()).await.unwrap_err().error.kind(),
        "malformed"
    );
    let mut oversized = request();
    oversized.user = "x".repeat(MAX_REQUEST_BYTES);
    assert_eq!(
        model.complete(&oversized).await.unwrap_err().error.kind(),
        "too_large"
    );

    let meter = model.meter();
    assert_eq!(meter.calls, 2);
    assert_eq!(meter.retries, 1);
    assert_eq!(
        meter.failures.into_iter().collect::<Vec<_>>(),
        [("malformed", 1), ("refused", 1), ("too_large", 1)]
    );
    // The cut answer's tokens were spent, so they are metered too.
    assert_eq!(meter.prompt_tokens, 100 + 10 + 10);
    assert_eq!(meter.completion_tokens, 20 + 5 + 5);
    assert_eq!(stub.requests().len(), 5);
}

fn delayed(millis: u64) -> StubReply {
    StubReply::Delay {
        millis,
        then: Box::new(StubReply::content("too slow")),
    }
}

/// A loopback port with no listener (bound, read, released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
