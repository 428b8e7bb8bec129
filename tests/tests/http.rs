//! `memory serve --http` through a real MCP client (rmcp's streamable HTTP client): the bearer token,
//! the discovery file, `/healthz` and `/metrics`.

use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, Instant};

use integration_tests::product::{Fixture, McpClient};
use integration_tests::serving::{
    HttpServer, default_flags, get, parse_metrics, sample, token_file,
};
use serde_json::{Value, json};

const TOKEN: &str = "test-token-9f2c41";

fn flags_with_token(fixture: &Fixture) -> Vec<String> {
    let mut flags = default_flags();
    flags.push("--token-file".to_owned());
    flags.push(
        token_file(fixture.dir.path(), TOKEN)
            .to_str()
            .expect("UTF-8 path")
            .to_owned(),
    );
    flags
}

#[tokio::test]
async fn the_token_is_accepted_and_a_missing_or_wrong_one_refused() {
    let fixture = Fixture::new();
    let server = HttpServer::start(&fixture, &flags_with_token(&fixture), &[]);

    let discovery = server.discovery();
    assert_eq!(discovery.version, 1);
    assert_eq!(discovery.url, server.url);
    assert!(discovery.url.starts_with("http://127.0.0.1:") && discovery.url.ends_with("/mcp"));
    assert_eq!(discovery.token.as_deref(), Some(TOKEN));
    let mode = std::fs::metadata(&server.discovery)
        .expect("discovery file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let session = McpClient::http(&server.url, Some(TOKEN))
        .await
        .expect("the token is accepted");
    assert_eq!(session.tools().await.len(), 19);
    let remembered = session
        .success(
            "memory_remember",
            json!({"text": "The user's cat is called Miso."}),
        )
        .await;
    assert_eq!(remembered["replayed"], false);
    session.close().await;

    for token in [None, Some("wrong-token"), Some("test-token-9f2c4")] {
        assert!(
            McpClient::http(&server.url, token).await.is_err(),
            "a session opened with {token:?}"
        );
    }
    let (status, _) = get(&format!("{}/metrics", server.base()), None).await;
    assert_eq!(status, 401);
    let (status, _) = get(&format!("{}/metrics", server.base()), Some("wrong")).await;
    assert_eq!(status, 401);
    let (status, _) = get(&format!("{}/metrics", server.base()), Some(TOKEN)).await;
    assert_eq!(status, 200);

    let discovery_path = server.discovery.clone();
    let status = server.stop();
    assert!(status.success(), "{status:?}");
    assert!(
        !discovery_path.exists(),
        "the discovery file outlived a clean shutdown"
    );
}

#[tokio::test]
async fn healthz_and_metrics_are_scraped_and_parsed() {
    let fixture = Fixture::new();
    let server = HttpServer::start(&fixture, &flags_with_token(&fixture), &[]);
    let session = McpClient::http(&server.url, Some(TOKEN))
        .await
        .expect("connected");
    let text = "Miso the cat sleeps on the red sofa every afternoon.";
    let call = json!({"text": text});
    session.success("memory_remember", call.clone()).await;
    assert_eq!(
        session.success("memory_remember", call).await["replayed"],
        true
    );
    // sync waits for the model and the index: from its answer on the server is ready.
    session.success("memory_sync", json!({})).await;
    let query = "where does the cat sleep";
    let found = session
        .success("memory_search", json!({"query": query}))
        .await;
    assert!(!found["passages"].as_array().expect("passages").is_empty());

    let (status, body) = get(&format!("{}/healthz", server.base()), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).expect("JSON"),
        json!({"status": "ready"})
    );

    let (status, body) = get(&format!("{}/metrics", server.base()), Some(TOKEN)).await;
    assert_eq!(status, 200);
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
    let samples = parse_metrics(&body);
    let value = |name: &str, labels: &[(&str, &str)]| {
        sample(&samples, name, labels).unwrap_or_else(|| panic!("{name} {labels:?} in\n{body}"))
    };
    assert_eq!(value("memory_writes_total", &[("result", "written")]), 1.0);
    assert_eq!(value("memory_writes_total", &[("result", "replayed")]), 1.0);
    assert_eq!(
        value(
            "memory_recall_duration_seconds_count",
            &[("mode", "hybrid"), ("outcome", "ok")]
        ),
        1.0
    );
    assert!(
        value(
            "memory_recall_duration_seconds_sum",
            &[("mode", "hybrid"), ("outcome", "ok")]
        ) > 0.0
    );
    assert_eq!(value("memory_index_lag", &[]), 0.0);
    assert_eq!(value("memory_change_head", &[]), 1.0);
    assert!(value("memory_chunks", &[]) >= 1.0);
    assert_eq!(value("memory_chunk_capacity", &[]), 1_000_000.0);
    assert_eq!(value("memory_index_compact_vectors", &[]), 0.0);
    assert_eq!(value("memory_hnsw_ef_search", &[]), 128.0);
    assert_eq!(
        value("memory_unindexed_documents", &[("reason", "too_large")]),
        0.0
    );
    assert_eq!(value("memory_model_loaded", &[]), 1.0);
    let states: f64 = samples
        .iter()
        .filter(|sample| sample.name == "memory_hnsw_state")
        .map(|sample| sample.value)
        .sum();
    assert_eq!(states, 1.0, "exactly one HNSW state is current");
    // No namespace identity, query or text in any label.
    for sample in &samples {
        for value in sample.labels.values() {
            for secret in ["u1", "notes", "Miso", "cat", "sofa", "sleep"] {
                assert!(!value.contains(secret), "{sample:?}");
            }
        }
    }
    session.close().await;
    assert!(server.stop().success());
}

/// The index settings, as flags and as variables, configure the index the server loads: its
/// `/metrics` read them from the loaded index itself.
#[tokio::test]
async fn the_index_settings_configure_the_served_index() {
    let by_flag = [
        "--max-chunks",
        "5000",
        "--compact-vectors",
        "--hnsw-ef-search",
        "40",
    ];
    let by_variable: [(&str, &std::ffi::OsStr); 3] = [
        ("MEMORY_MAX_CHUNKS", "6000".as_ref()),
        ("MEMORY_COMPACT_VECTORS", "1".as_ref()),
        ("MEMORY_HNSW_EF_SEARCH", "60".as_ref()),
    ];
    for (flags, env, (capacity, width)) in [
        (&by_flag[..], &[][..], (5_000.0, 40.0)),
        (&[][..], &by_variable[..], (6_000.0, 60.0)),
    ] {
        let fixture = Fixture::new();
        let mut args = flags_with_token(&fixture);
        args.extend(flags.iter().map(|flag| (*flag).to_owned()));
        let server = HttpServer::start(&fixture, &args, env);
        let session = McpClient::http(&server.url, Some(TOKEN))
            .await
            .expect("connected");
        session
            .success(
                "memory_remember",
                json!({"text": "Miso sleeps on the sofa."}),
            )
            .await;
        // sync waits for the model and the index: from its answer on, the index is loaded.
        session.success("memory_sync", json!({})).await;
        let (status, body) = get(&format!("{}/metrics", server.base()), Some(TOKEN)).await;
        assert_eq!(status, 200, "{body}");
        let samples = parse_metrics(&body);
        let value =
            |name: &str| sample(&samples, name, &[]).unwrap_or_else(|| panic!("{name} in\n{body}"));
        assert_eq!(
            value("memory_chunk_capacity"),
            capacity,
            "{flags:?} {env:?}"
        );
        assert_eq!(
            value("memory_index_compact_vectors"),
            1.0,
            "{flags:?} {env:?}"
        );
        assert_eq!(value("memory_hnsw_ef_search"), width, "{flags:?} {env:?}");
        session.close().await;
        assert!(server.stop().success());
    }
}

#[test]
fn a_non_loopback_address_needs_a_token() {
    let fixture = Fixture::new();
    let message = fixture
        .run(&["serve", "--http", "0.0.0.0:0"])
        .refused("invalid-input")
        .to_owned();
    assert!(message.contains("MEMORY_TOKEN"), "{message}");
    assert!(
        !fixture.db.exists(),
        "the store was opened for a refused flag"
    );
    let empty = token_file(fixture.dir.path(), "  ");
    fixture
        .run(&[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--token-file",
            empty.to_str().expect("path"),
        ])
        .refused("invalid-input");
}

#[tokio::test]
async fn a_loopback_server_without_a_token_publishes_none() {
    let fixture = Fixture::new();
    let server = HttpServer::start(&fixture, &[], &[]);
    assert_eq!(server.discovery().token, None);
    let session = McpClient::http(&server.url, None)
        .await
        .expect("no token needed");
    let names = session.tool_names().await;
    assert_eq!(names.len(), 15, "no defaults, no simple tools: {names:?}");
    session.close().await;
    assert!(server.stop().success());
}

/// A server stopped while its model is still loading waits for the load before it exits: exiting
/// with the model's native runtime half set up on another thread crashed the process (SIGSEGV) now
/// and then. The failpoint marks the load's start, holds it until the test releases it and marks
/// its end; the test stops the server once the load has begun (on a busy machine the background
/// load may begin well after the socket answers), releases the load only then, and the end must be
/// marked once the process has exited.
#[test]
fn a_server_stopped_while_loading_waits_for_the_load() {
    let fixture = Fixture::new();
    let marker = fixture.dir.path().join("model-load");
    let spec = format!("60000:{}", marker.to_str().expect("UTF-8 path"));
    let server = HttpServer::start(
        &fixture,
        &default_flags(),
        &[("MEMORY_MODEL_LOAD_FAILPOINT", std::ffi::OsStr::new(&spec))],
    );
    let read = || std::fs::read_to_string(&marker).unwrap_or_default();
    let begun = Instant::now();
    while read().is_empty() {
        assert!(
            begun.elapsed() < Duration::from_secs(60),
            "the model load never began"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(read(), "started", "the load was not held");
    server.signal("TERM");
    let mut release = marker.clone().into_os_string();
    release.push(".release");
    std::fs::write(release, b"").expect("the release file");
    // Waits for the exit (a second SIGTERM changes nothing: the server is already stopping).
    let status = server.stop();
    assert!(status.success(), "{status:?}");
    assert_eq!(
        read(),
        "loaded",
        "the server exited before its model load ended"
    );
}
