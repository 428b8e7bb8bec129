//! Every setting takes effect through each door's own way of setting it: the command line's flag and
//! variable, a served MCP server's flag and variable (stdio and HTTP). Each case observes the effect
//! (what the store holds, what is refused), never the parse. The index settings' other doors are
//! `tests/http.rs` (the served index's `/metrics`), `tests/product.rs` (`memory status`, recall with
//! int8 codes) and the Python package's `tests/test_settings.py`.

use std::ffi::OsStr;

use integration_tests::hook::thread_records;
use integration_tests::product::{Fixture, McpClient, put};
use integration_tests::serving::{HttpServer, default_flags};
use memory_core::activity::RecordBody;
use serde_json::{Value, json};

/// The stored output of the one tool result of `thread`.
fn stored_output(fixture: &Fixture, thread: &str) -> Value {
    let outputs: Vec<Value> = thread_records(&fixture.db, thread)
        .into_iter()
        .filter_map(|record| match record.record.body {
            RecordBody::ToolResult { output, .. } => Some(output),
            _ => None,
        })
        .collect();
    let [output] = outputs.as_slice() else {
        panic!("one tool result in {thread}: {outputs:?}");
    };
    output.clone()
}

fn tool_result(thread: &str) -> Value {
    json!({
        "thread": thread,
        "user": "ana",
        "record": {"speaker": "search", "body": {"kind": "tool_result", "call_id": "c1",
            "output": "a".repeat(5_000) + &"z".repeat(5_000), "is_error": false}},
    })
}

/// A 10,000-byte output under a 2,048-byte bound: its first and last 1,024 bytes.
fn assert_bounded(output: &Value, door: &str) {
    assert_eq!(output["truncated"], true, "{door}: {output}");
    assert_eq!(output["original_bytes"], 10_000, "{door}");
    assert_eq!(output["omitted_bytes"], 10_000 - 2_048, "{door}");
    assert_eq!(output["head"], "a".repeat(1_024), "{door}");
    assert_eq!(output["tail"], "z".repeat(1_024), "{door}");
}

fn bound() -> [(&'static str, &'static OsStr); 1] {
    [("MEMORY_MAX_TOOL_OUTPUT_BYTES", OsStr::new("2048"))]
}

#[tokio::test]
async fn the_tool_output_bound_takes_effect_at_every_door() {
    let fixture = Fixture::new();

    let argument = tool_result("by-variable").to_string();
    fixture
        .run_env(&["thread", "append", &argument], &bound())
        .success();
    assert_bounded(
        &stored_output(&fixture, "by-variable"),
        "command line, variable",
    );

    let stdio = fixture
        .serve_with(
            &[
                "--allow-any-namespace".to_owned(),
                "--max-tool-output-bytes".to_owned(),
                "2048".to_owned(),
            ],
            &[],
        )
        .await;
    stdio
        .success("memory_thread_append", tool_result("stdio-flag"))
        .await;
    stdio.close().await;
    assert_bounded(&stored_output(&fixture, "stdio-flag"), "stdio, flag");

    let stdio = fixture.serve_env(&bound()).await;
    stdio
        .success("memory_thread_append", tool_result("stdio-variable"))
        .await;
    stdio.close().await;
    assert_bounded(
        &stored_output(&fixture, "stdio-variable"),
        "stdio, variable",
    );

    let mut flags = default_flags();
    flags.push("--allow-any-namespace".to_owned());
    let server = HttpServer::start(&fixture, &flags, &bound());
    let http = McpClient::http(&server.url, None).await.expect("connected");
    http.success("memory_thread_append", tool_result("http-variable"))
        .await;
    http.close().await;
    assert!(server.stop().success());
    assert_bounded(&stored_output(&fixture, "http-variable"), "HTTP, variable");

    // Without a bound, the default (51,200 bytes) keeps the whole output.
    let argument = tool_result("unbounded").to_string();
    fixture.run(&["thread", "append", &argument]).success();
    assert_eq!(
        stored_output(&fixture, "unbounded").as_str().map(str::len),
        Some(10_000)
    );
}

#[tokio::test]
async fn the_index_capacity_takes_effect_at_every_door() {
    let fixture = Fixture::new();
    let documents: Vec<Value> = (0..6)
        .map(|n| {
            put(
                &format!("fact-{n}"),
                &format!("Fact {n}: the lantern was lit at dusk."),
            )
        })
        .collect();
    fixture.import(&documents).success();
    let capacity: [(&str, &OsStr); 1] = [("MEMORY_MAX_CHUNKS", OsStr::new("3"))];

    let refused = fixture.run_env(&["sync", "{}"], &capacity);
    assert!(
        refused.refused("too-large").contains("max_chunks"),
        "{refused:?}"
    );

    let stdio = fixture.serve_env(&capacity).await;
    let message = stdio.refused("memory_sync", json!({}), "too-large").await;
    assert!(message.contains("max_chunks"), "{message}");
    stdio.close().await;

    let stdio = fixture
        .serve_with(
            &[
                "--allow-any-namespace".to_owned(),
                "--max-chunks".to_owned(),
                "3".to_owned(),
            ],
            &[],
        )
        .await;
    let message = stdio.refused("memory_sync", json!({}), "too-large").await;
    assert!(message.contains("max_chunks"), "{message}");
    stdio.close().await;

    // Room for every chunk: the same store syncs.
    fixture.run(&["sync", "{}"]).success();

    // Opened again with room for fewer chunks than it now holds: every command that needs the
    // index refuses alike, naming the setting to raise (sync too, though it has nothing to index).
    let recall = json!({
        "namespace": {"name": "notes", "version": 1, "identity": {"user": "u1"}},
        "scope": "assistant",
        "query": "lantern",
        "mode": "exact",
        "limits": {"max_items": 3, "max_bytes": 4000, "max_tokens": 1000, "timeout_ms": 60000},
    })
    .to_string();
    for command in [vec!["sync", "{}"], vec!["status"], vec!["recall", &recall]] {
        let refused = fixture.run_env(&command, &capacity);
        assert!(
            refused.refused("too-large").contains("max_chunks"),
            "{command:?}: {refused:?}"
        );
    }
    let stdio = fixture.serve_env(&capacity).await;
    let message = stdio.refused("memory_sync", json!({}), "too-large").await;
    assert!(message.contains("max_chunks"), "{message}");
    stdio.close().await;
}
