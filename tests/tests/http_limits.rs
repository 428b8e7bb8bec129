//! The bounds of a shared `memory serve --http`, driven over raw TCP against the built binary:
//! requests in flight per token (`429`), open sessions (`503`), the request body bound (`413`), and
//! the header and body timeouts that keep a slow client from holding a connection. Every bound shows
//! in `/metrics`. Waits are bounded but never asserted as durations.

use std::time::Duration;

use integration_tests::product::{Fixture, McpClient};
use integration_tests::serving::{
    HttpServer, default_flags, get, parse_metrics, sample, token_file,
};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const TOKEN: &str = "limits-token-31a7";

/// The longest any step here may take before the test gives up (not a measured figure).
const PATIENCE: Duration = Duration::from_secs(60);

fn start(fixture: &Fixture, limits: &[&str]) -> HttpServer {
    let mut args = default_flags();
    args.push("--token-file".to_owned());
    args.push(
        token_file(fixture.dir.path(), TOKEN)
            .to_str()
            .expect("UTF-8")
            .to_owned(),
    );
    args.extend(limits.iter().map(|arg| (*arg).to_owned()));
    HttpServer::start(fixture, &args, &[])
}

fn authority(server: &HttpServer) -> String {
    server.base().trim_start_matches("http://").to_owned()
}

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "limits-test", "version": "1"}}})
    .to_string()
}

/// A POST to `/mcp` whose headers declare `length` body bytes.
fn post_head(server: &HttpServer, token: &str, length: usize) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {length}\r\n\r\n",
        authority(server)
    )
}

/// Sends `request` on a new connection and reads the answer's status line and headers.
async fn exchange(server: &HttpServer, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(authority(server))
        .await
        .expect("connects");
    stream.write_all(request).await.expect("sent");
    read_head(&mut stream).await
}

async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    tokio::time::timeout(PATIENCE, async {
        while !head.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).await.expect("reads") == 0 {
                break;
            }
            head.push(byte[0]);
        }
    })
    .await
    .expect("an answer");
    String::from_utf8_lossy(&head).to_ascii_lowercase()
}

/// Whether the server closes `stream` (reads end) without being sent anything more.
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buffer = [0u8; 256];
    matches!(
        tokio::time::timeout(PATIENCE, async {
            loop {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await,
        Ok(())
    )
}

#[tokio::test]
async fn a_token_over_its_requests_in_flight_gets_429_with_retry_after() {
    let fixture = Fixture::new();
    let server = start(&fixture, &["--max-in-flight", "1", "--body-timeout", "600"]);
    // One request in flight: its headers are in, its body never finishes.
    let mut held = TcpStream::connect(authority(&server))
        .await
        .expect("connects");
    held.write_all(post_head(&server, TOKEN, 1_000).as_bytes())
        .await
        .expect("sent");
    held.write_all(b"{").await.expect("sent");
    // It reaches the gate asynchronously. A request sent before it does would take the token's one
    // place and refuse it instead, so wait until `/metrics` (outside the bound) counts it.
    let mut counted = false;
    for _ in 0..600 {
        let (_, metrics) = get(&format!("{}/metrics", server.base()), Some(TOKEN)).await;
        if sample(&parse_metrics(&metrics), "memory_http_in_flight", &[]) == Some(1.0) {
            counted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(counted, "the held request was never counted in flight");
    // The next request of the same token is refused until that one ends.
    let body = initialize_body();
    let mut request = post_head(&server, TOKEN, body.len());
    request.push_str(&body);
    let head = exchange(&server, request.as_bytes()).await;
    assert!(head.starts_with("http/1.1 429"), "{head}");
    assert!(head.contains("retry-after: 1"), "{head}");
    let (_, metrics) = get(&format!("{}/metrics", server.base()), Some(TOKEN)).await;
    let samples = parse_metrics(&metrics);
    assert!(
        sample(
            &samples,
            "memory_http_refused_total",
            &[("reason", "in_flight")]
        )
        .is_some_and(|count| count >= 1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&samples, "memory_http_limit", &[("limit", "max_in_flight")]),
        Some(1.0)
    );
    // Once the held request ends, the token is admitted again.
    drop(held);
    let mut admitted = false;
    for _ in 0..600 {
        if exchange(&server, request.as_bytes())
            .await
            .starts_with("http/1.1 200")
        {
            admitted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(admitted, "the token was never admitted again");
}

#[tokio::test]
async fn sessions_past_the_bound_get_503_and_bodies_past_theirs_413() {
    let fixture = Fixture::new();
    let server = start(
        &fixture,
        &["--max-sessions", "1", "--max-body-bytes", "4096"],
    );
    let first = McpClient::http(&server.url, Some(TOKEN))
        .await
        .expect("the first session opens");
    assert!(McpClient::http(&server.url, Some(TOKEN)).await.is_err());
    let body = initialize_body();
    let mut request = post_head(&server, TOKEN, body.len());
    request.push_str(&body);
    let head = exchange(&server, request.as_bytes()).await;
    assert!(head.starts_with("http/1.1 503"), "{head}");
    assert!(head.contains("retry-after: 5"), "{head}");
    // The open session keeps working.
    first
        .success("memory_remember", json!({"text": "Sessions are bounded."}))
        .await;
    first.close().await;

    let big = "x".repeat(8_192);
    let mut request = post_head(&server, TOKEN, big.len());
    request.push_str(&big);
    let head = exchange(&server, request.as_bytes()).await;
    assert!(head.starts_with("http/1.1 413"), "{head}");

    let (_, metrics) = get(&format!("{}/metrics", server.base()), Some(TOKEN)).await;
    let samples = parse_metrics(&metrics);
    assert_eq!(
        sample(&samples, "memory_http_limit", &[("limit", "max_sessions")]),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &samples,
            "memory_http_limit",
            &[("limit", "max_body_bytes")]
        ),
        Some(4096.0)
    );
    assert!(
        sample(
            &samples,
            "memory_http_refused_total",
            &[("reason", "sessions")]
        )
        .is_some_and(|count| count >= 1.0)
    );
}

#[tokio::test]
async fn a_silent_or_stalled_client_cannot_hold_a_connection() {
    let fixture = Fixture::new();
    let server = start(&fixture, &["--header-timeout", "1", "--body-timeout", "1"]);
    // Connected, sends nothing.
    let mut silent = TcpStream::connect(authority(&server))
        .await
        .expect("connects");
    // Half a header line, then nothing.
    let mut slow = TcpStream::connect(authority(&server))
        .await
        .expect("connects");
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: x")
        .await
        .expect("sent");
    // The headers, then a body that stops.
    let mut stalled = TcpStream::connect(authority(&server))
        .await
        .expect("connects");
    stalled
        .write_all(post_head(&server, TOKEN, 1_000).as_bytes())
        .await
        .expect("sent");
    stalled.write_all(b"{\"jsonrpc\"").await.expect("sent");
    assert!(closed_by_server(&mut silent).await, "the silent client");
    assert!(closed_by_server(&mut slow).await, "the slow header");
    assert!(closed_by_server(&mut stalled).await, "the stalled body");
    // Others are served all along.
    let (status, _) = get(&format!("{}/healthz", server.base()), None).await;
    assert!(status == 200 || status == 503, "{status}");
    let client = McpClient::http(&server.url, Some(TOKEN))
        .await
        .expect("connects");
    client
        .success("memory_remember", json!({"text": "Still answering."}))
        .await;
    client.close().await;
}

/// The `mcp-session-id` of an `initialize` answered on a raw connection.
async fn open_session(server: &HttpServer) -> String {
    let body = initialize_body();
    let mut request = post_head(server, TOKEN, body.len());
    request.push_str(&body);
    let head = exchange(server, request.as_bytes()).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    head.lines()
        .find_map(|line| line.strip_prefix("mcp-session-id:"))
        .map(|id| id.trim().to_owned())
        .expect("the server names the session")
}

#[tokio::test]
async fn a_body_announced_past_the_bound_is_413_at_once_and_unread() {
    let fixture = Fixture::new();
    // A body timeout longer than the test's patience: an answer that waited for the body (or its
    // timeout) never arrives in time.
    let server = start(
        &fixture,
        &["--max-body-bytes", "4096", "--body-timeout", "600"],
    );
    let session = open_session(&server).await;
    // Headers only, announcing more than the bound; the body is never sent.
    let opening = post_head(&server, TOKEN, 1_000_000);
    let mut within = post_head(&server, TOKEN, 1_000_000);
    within = within.replacen(
        "\r\n\r\n",
        &format!("\r\nMcp-Session-Id: {session}\r\n\r\n"),
        1,
    );
    for request in [opening, within] {
        let mut stream = TcpStream::connect(authority(&server))
            .await
            .expect("connects");
        stream.write_all(request.as_bytes()).await.expect("sent");
        let head = read_head(&mut stream).await;
        assert!(head.starts_with("http/1.1 413"), "{request}\n{head}");
    }
    let (_, metrics) = get(&format!("{}/metrics", server.base()), Some(TOKEN)).await;
    assert!(
        sample(
            &parse_metrics(&metrics),
            "memory_http_refused_total",
            &[("reason", "body_size")]
        )
        .is_some_and(|count| count >= 2.0),
        "{metrics}"
    );
}
