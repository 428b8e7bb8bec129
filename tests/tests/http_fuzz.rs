//! Fuzzing the HTTP/MCP surface of the built `memory serve --http`: malformed JSON-RPC, wrong
//! methods and paths, oversized and deeply nested bodies, tool arguments of every wrong type, and
//! header junk, from a seeded generator (`MEMORY_FUZZ_CASES` cases of each generated family, 40 by
//! default; `MEMORY_FUZZ_SEED` picks another sequence).
//!
//! Every answer must be typed: an HTTP `4xx` refusal, a JSON-RPC error, or a tool result whose
//! refusal carries a known kind (a mutation that happens to be valid may also succeed, and is
//! counted). The server never answers `5xx` and never dies: after every family a valid session
//! still works. Nothing is written by a refused call: the store's change head moves by exactly the
//! number of writes that succeeded. The number of cases run is printed.

use std::time::Duration;

use integration_tests::product::{Fixture, McpClient};
use integration_tests::serving::{
    HttpServer, default_flags, get, parse_metrics, sample, token_file,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The server's `--max-body-bytes` in this test.
const MAX_BODY_BYTES: usize = 1_048_576;
const TOKEN: &str = "fuzz-token-a90c";

/// The kinds a refusal may carry (memory-core's `ErrorKind::as_str`).
const KINDS: [&str; 12] = [
    "conflict",
    "operation-conflict",
    "withdrawn",
    "too-large",
    "invalid-input",
    "budget",
    "deadline",
    "not-found",
    "unavailable",
    "storage",
    "corrupt",
    "forbidden",
];

/// Tools that write to the memory store when they succeed (the change head moves by one).
const WRITING_TOOLS: [&str; 4] = [
    "memory_put",
    "memory_withdraw",
    "memory_remember",
    "memory_forget",
];

/// A small deterministic generator (xorshift64*): the same seed, the same cases.
struct Cases(u64);

impl Cases {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| (self.next() >> 24) as u8).collect()
    }
}

/// What one answer was.
#[derive(Debug, Default)]
struct Tally {
    cases: usize,
    http_refusals: usize,
    rpc_errors: usize,
    tool_refusals: usize,
    successes: usize,
    writes: usize,
}

/// A valid argument of every tool, from which the wrong ones are made.
fn templates() -> Vec<(&'static str, Value)> {
    let namespace = json!({"name": "notes", "version": 1, "identity": {"user": "u1"}});
    let limits =
        json!({"max_items": 5, "max_bytes": 10000, "max_tokens": 2000, "timeout_ms": 10000});
    vec![
        (
            "memory_put",
            json!({"namespace": namespace, "id": "f1", "operation_id": "op-f1",
                   "expected_revision": null, "locator": "l", "scopes": ["assistant"],
                   "content": {"text": "fuzz", "attributions": [], "metadata": {},
                               "recorded_at": 1, "extracted_at": 1}}),
        ),
        (
            "memory_withdraw",
            json!({"namespace": namespace, "id": "f1", "operation_id": "op-w",
                   "expected_revision": "r1", "reason": "x"}),
        ),
        ("memory_get", json!({"namespace": namespace, "id": "f1"})),
        (
            "memory_recall",
            json!({"namespace": namespace, "scope": "assistant", "query": "fuzz",
                   "mode": "lexical", "limits": limits}),
        ),
        ("memory_sync", json!({})),
        (
            "memory_thread_append",
            json!({"thread": "t-fuzz", "record": {"speaker": "user",
                   "body": {"kind": "user_input", "text": "fuzz"}}}),
        ),
        (
            "memory_thread_forget",
            json!({"thread": "t-fuzz", "sequence": 1, "reason": "x"}),
        ),
        (
            "memory_context",
            json!({"thread": "t-fuzz", "budget": 500, "query": "fuzz"}),
        ),
        (
            "memory_compact",
            json!({"thread": "t-fuzz", "measured_input_tokens": 900, "keep_tokens": 0}),
        ),
        (
            "memory_history_read",
            json!({"thread": "t-fuzz", "after": 0, "limit": 5}),
        ),
        (
            "memory_history_search",
            json!({"thread": "t-fuzz", "text": "fuzz", "limit": 5}),
        ),
        ("memory_remember", json!({"text": "fuzz", "id": "r1"})),
        ("memory_search", json!({"query": "fuzz", "limit": 3})),
        ("memory_forget", json!({"id": "r1", "reason": "x"})),
        ("memory_list", json!({"limit": 5})),
    ]
}

/// Values of every JSON type, some at or past a limit.
fn wrong_values(cases: &mut Cases) -> Vec<Value> {
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    vec![
        Value::Null,
        json!(true),
        json!(0),
        json!(-1),
        json!(u64::MAX),
        json!(1.5),
        json!(""),
        json!(" "),
        json!("x".repeat(70_000)),
        json!(String::from_utf8_lossy(&cases.bytes(32)).into_owned()),
        json!([]),
        json!([1, "a", null]),
        json!({}),
        json!({"unexpected": 1}),
        deep,
    ]
}

struct Surface {
    http: reqwest::Client,
    url: String,
    session: String,
}

impl Surface {
    async fn open(url: &str) -> Self {
        // A connection per request: a server may close a connection after refusing a request on it
        // (a body it did not read), and a pooled connection reused in that moment would fail the
        // next case for a reason that is not the server's answer.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .expect("a client");
        let response = http
            .post(url)
            .bearer_auth(TOKEN)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "fuzz", "version": "1"}}})
                .to_string(),
            )
            .send()
            .await
            .expect("initialize");
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .expect("a session id")
            .to_owned();
        let _ = response.text().await;
        let surface = Self {
            http,
            url: url.to_owned(),
            session,
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        surface
            .post(initialized.to_string().into_bytes(), true)
            .await;
        surface
    }

    /// POSTs `body` (in the session when `in_session`): the status and the JSON-RPC message, if any.
    async fn post(&self, body: Vec<u8>, in_session: bool) -> (u16, Option<Value>) {
        let oversized = body.len() > MAX_BODY_BYTES;
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(TOKEN)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body);
        if in_session {
            request = request.header("mcp-session-id", &self.session);
        }
        let response = match request.send().await {
            Ok(response) => response,
            // A body past --max-body-bytes is answered 413 at once, unread (see http_limits.rs, which
            // reads that answer over raw TCP); the server then closes, so a client still writing the
            // body may see its pipe broken before it reads the 413. Only then is a send error the
            // refusal; anything else is the server failing to answer.
            Err(_) if oversized => return (413, None),
            Err(error) => panic!("the server answers: {error}"),
        };
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        (status, message_of(&text))
    }
}

/// The JSON-RPC message in a JSON body or in an event stream's data lines.
fn message_of(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return Some(value);
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message.get("id").is_some())
}

/// Checks one answer is typed and tallies it; `tool` names a tool call's tool.
fn judge(tally: &mut Tally, what: &str, status: u16, message: Option<&Value>, tool: Option<&str>) {
    tally.cases += 1;
    assert!(status < 500, "{what}: HTTP {status} {message:?}");
    if status >= 400 {
        tally.http_refusals += 1;
        return;
    }
    let Some(message) = message else {
        // 202 Accepted: a notification or a response the server takes without answering.
        assert!(status == 202 || status == 200, "{what}: HTTP {status}");
        tally.successes += 1;
        return;
    };
    if let Some(error) = message.get("error") {
        assert!(error["code"].is_i64(), "{what}: {message}");
        tally.rpc_errors += 1;
        return;
    }
    let result = &message["result"];
    if result["isError"] == json!(true) {
        let kind = result["structuredContent"]["error"]["kind"]
            .as_str()
            .unwrap_or_default();
        assert!(KINDS.contains(&kind), "{what}: untyped refusal {message}");
        tally.tool_refusals += 1;
    } else {
        tally.successes += 1;
        // A replayed write answers its first receipt and writes nothing.
        if tool.is_some_and(|tool| WRITING_TOOLS.contains(&tool))
            && result["structuredContent"]["replayed"] == json!(false)
        {
            tally.writes += 1;
        }
    }
}

fn tool_call(id: u64, tool: &str, arguments: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
    .to_string()
    .into_bytes()
}

async fn head(server: &HttpServer) -> f64 {
    let (status, body) = get(&format!("{}/metrics", server.base()), Some(TOKEN)).await;
    assert_eq!(status, 200);
    sample(&parse_metrics(&body), "memory_change_head", &[]).expect("the change head")
}

async fn still_answering(server: &HttpServer) {
    let client = McpClient::http(&server.url, Some(TOKEN))
        .await
        .expect("a valid session still opens");
    client.success("memory_sync", json!({})).await;
    client.close().await;
}

/// Sends raw bytes on a new connection; answers the status code, if a status line came back.
async fn raw(server: &HttpServer, request: &[u8]) -> Option<u16> {
    let authority = server.base().trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(authority).await.expect("connects");
    stream.write_all(request).await.ok()?;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        let mut buffer = [0u8; 1024];
        while !answer.windows(2).any(|window| window == b"\r\n") {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => answer.extend_from_slice(&buffer[..read]),
            }
        }
    })
    .await;
    let line = String::from_utf8_lossy(&answer);
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test]
async fn every_answer_to_junk_is_typed_and_nothing_refused_is_written() {
    let per_family: usize = std::env::var("MEMORY_FUZZ_CASES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(40);
    let seed: u64 = std::env::var("MEMORY_FUZZ_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15);
    let mut cases = Cases(seed.max(1));
    let fixture = Fixture::new();
    let mut args = default_flags();
    args.extend([
        "--token-file".to_owned(),
        token_file(fixture.dir.path(), TOKEN)
            .to_str()
            .expect("UTF-8")
            .to_owned(),
        "--max-body-bytes".to_owned(),
        MAX_BODY_BYTES.to_string(),
    ]);
    let server = HttpServer::start(&fixture, &args, &[]);
    let surface = Surface::open(&server.url).await;
    let head_before = head(&server).await;
    let mut tally = Tally::default();
    let mut id = 1_u64;

    // 1. Tool arguments of every wrong type: each field of each tool's valid arguments replaced,
    // removed, or joined by an unknown one; and arguments that are not an object.
    for (tool, template) in templates() {
        let Value::Object(fields) = &template else {
            unreachable!("templates are objects")
        };
        let mut variants: Vec<Value> = Vec::new();
        for field in fields.keys() {
            for value in wrong_values(&mut cases) {
                let mut wrong = fields.clone();
                wrong.insert(field.clone(), value);
                variants.push(Value::Object(wrong));
            }
            let mut missing = fields.clone();
            missing.remove(field);
            variants.push(Value::Object(missing));
        }
        let mut extra = fields.clone();
        extra.insert("surprise".to_owned(), json!(1));
        variants.push(Value::Object(extra));
        variants.extend(wrong_values(&mut cases));
        for arguments in variants {
            id += 1;
            let (status, message) = surface.post(tool_call(id, tool, arguments), true).await;
            judge(&mut tally, tool, status, message.as_ref(), Some(tool));
        }
    }
    still_answering(&server).await;

    // 2. Malformed JSON-RPC: random bytes, truncated and invalid UTF-8 bodies, wrong versions and
    // ids, unknown methods and tools, batches, deep nesting, an oversized body.
    let valid = String::from_utf8(tool_call(1, "memory_sync", json!({}))).expect("UTF-8");
    let mut deep = String::new();
    for _ in 0..100_000 {
        deep.push('[');
    }
    let fixed: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"{}".to_vec(),
        b"\xff\xfe\xfd".to_vec(),
        deep.clone().into_bytes(),
        format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{deep}")
            .into_bytes(),
        json!({"jsonrpc": "1.0", "id": 1, "method": "tools/list"})
            .to_string()
            .into_bytes(),
        json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"})
            .to_string()
            .into_bytes(),
        json!({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"})
            .to_string()
            .into_bytes(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "no/such/method"})
            .to_string()
            .into_bytes(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "nope"}})
            .to_string()
            .into_bytes(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []})
            .to_string()
            .into_bytes(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 7}})
            .to_string()
            .into_bytes(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
            .to_string()
            .into_bytes(),
        json!([json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})])
            .to_string()
            .into_bytes(),
        json!({"jsonrpc": "2.0", "result": {}, "id": 99})
            .to_string()
            .into_bytes(),
        vec![b'{'; 2 * 1024 * 1024],
    ];
    for body in fixed {
        let (status, message) = surface.post(body, true).await;
        judge(&mut tally, "malformed", status, message.as_ref(), None);
    }
    for _ in 0..per_family {
        let cut = cases.below(valid.len());
        let mut body = valid.as_bytes()[..cut].to_vec();
        let noise = cases.below(16);
        body.extend(cases.bytes(noise));
        let in_session = cases.below(4) != 0;
        let (status, message) = surface.post(body, in_session).await;
        judge(&mut tally, "truncated", status, message.as_ref(), None);
        let len = cases.below(512);
        let body = cases.bytes(len);
        let (status, message) = surface.post(body, true).await;
        judge(&mut tally, "random", status, message.as_ref(), None);
    }
    still_answering(&server).await;

    // 3. Wrong methods and paths, header junk: raw requests on their own connections.
    let authority = server.base().trim_start_matches("http://").to_owned();
    let mut raw_requests: Vec<Vec<u8>> = Vec::new();
    for method in ["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "BREW"] {
        for path in [
            "/mcp",
            "/metrics",
            "/healthz",
            "/",
            "/mcp/../metrics",
            "/%00",
        ] {
            raw_requests.push(
                format!(
                    "{method} {path} HTTP/1.1\r\nHost: {authority}\r\n\
                     Authorization: Bearer {TOKEN}\r\nContent-Length: 0\r\n\r\n"
                )
                .into_bytes(),
            );
        }
    }
    let junk_headers = [
        "Authorization: Bearer\r\n".to_owned(),
        "Authorization: Basic Zm9vOmJhcg==\r\n".to_owned(),
        format!("Authorization: Bearer {TOKEN}\r\nAuthorization: Bearer other\r\n"),
        format!("Authorization: Bearer {TOKEN}\r\nContent-Type: text/plain\r\n"),
        format!("Authorization: Bearer {TOKEN}\r\nAccept: image/png\r\n"),
        format!("Authorization: Bearer {TOKEN}\r\nMcp-Session-Id: not-a-session\r\n"),
        format!("Authorization: Bearer {TOKEN}\r\nMcp-Protocol-Version: 1999-01-01\r\n"),
        format!(
            "Authorization: Bearer {TOKEN}\r\nX-Junk: {}\r\n",
            "j".repeat(300_000)
        ),
        format!("Authorization: Bearer {TOKEN}\r\nContent-Length: -5\r\n"),
        format!("Authorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n"),
        "Authorization: Bearer \u{1}\u{2}\r\n".to_owned(),
        "NoColonHeader\r\n".to_owned(),
    ];
    for headers in junk_headers {
        raw_requests.push(
            format!(
                "POST /mcp HTTP/1.1\r\nHost: {authority}\r\n{headers}Content-Length: 2\r\n\r\n{{}}"
            )
            .into_bytes(),
        );
    }
    for _ in 0..per_family {
        let len = cases.below(256);
        let mut junk = b"POST /mcp HTTP/1.1\r\n".to_vec();
        junk.extend(cases.bytes(len));
        junk.extend(b"\r\n\r\n");
        raw_requests.push(junk);
    }
    raw_requests.push(b"\r\n\r\n".to_vec());
    raw_requests.push(b"GET / HTTP/9.9\r\n\r\n".to_vec());
    for request in raw_requests {
        tally.cases += 1;
        // A connection closed without an answer is a refusal too (hyper drops unparseable heads).
        match raw(&server, &request).await {
            Some(status) => {
                assert!(
                    status < 500,
                    "HTTP {status} for {:?}",
                    String::from_utf8_lossy(&request[..request.len().min(120)])
                );
                tally.http_refusals += usize::from(status >= 400);
                tally.successes += usize::from(status < 400);
            }
            None => tally.http_refusals += 1,
        }
    }
    still_answering(&server).await;

    let head_after = head(&server).await;
    assert_eq!(
        head_after - head_before,
        tally.writes as f64,
        "only the writes that succeeded moved the store: {tally:?}"
    );
    eprintln!(
        "http fuzz: {} cases ({} HTTP refusals, {} JSON-RPC errors, {} tool refusals, {} \
         successes of which {} writes), seed {seed:#x}",
        tally.cases,
        tally.http_refusals,
        tally.rpc_errors,
        tally.tool_refusals,
        tally.successes,
        tally.writes
    );
    assert!(tally.cases > 500, "{tally:?}");
}
