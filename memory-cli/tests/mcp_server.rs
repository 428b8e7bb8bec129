//! End-to-end tests of `memory serve`: an MCP client (rmcp) drives the built binary over a real stdio
//! pipe: initialize, list tools, call each tool, receive error kinds as tool errors.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::io::{Read, Write};
use std::process::Stdio;

use common::{BINARY, Fixture, get, put, recall, withdraw};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const TOOLS: [&str; 15] = [
    "memory_put",
    "memory_withdraw",
    "memory_get",
    "memory_recall",
    "memory_sync",
    "memory_thread_append",
    "memory_thread_forget",
    "memory_context",
    "memory_compact",
    "memory_history_read",
    "memory_history_search",
    "memory_new_context",
    "memory_context_remaining",
    "memory_read_notes",
    "memory_write_notes",
];

async fn connect(fixture: &Fixture) -> RunningService<RoleClient, ()> {
    connect_with_env(fixture, &[]).await
}

async fn connect_with_env(
    fixture: &Fixture,
    env: &[(&str, &std::ffi::OsStr)],
) -> RunningService<RoleClient, ()> {
    let command = tokio::process::Command::new(BINARY).configure(|command| {
        command
            .env_remove("MEMORY_DB")
            .env_remove("MEMORY_LOG")
            .envs(env.iter().copied())
            .arg("--db")
            .arg(&fixture.db)
            // These tests name their own namespaces, as a trusted single-user host does.
            .args(["serve", "--allow-any-namespace"]);
    });
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("the server starts");
    ().serve(transport)
        .await
        .expect("the MCP handshake succeeds")
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("tool arguments are an object");
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .expect("a tool call gets a result, refusals included")
}

fn success(result: &CallToolResult) -> &Value {
    assert_eq!(result.is_error, Some(false), "{result:#?}");
    result
        .structured_content
        .as_ref()
        .expect("structured content")
}

fn refused(result: &CallToolResult, kind: &str) {
    assert_eq!(result.is_error, Some(true), "{result:#?}");
    let content = result
        .structured_content
        .as_ref()
        .expect("structured error");
    assert_eq!(content["error"]["kind"], kind, "{result:#?}");
    assert!(content["error"]["message"].is_string());
}

#[tokio::test]
async fn tools_are_listed_with_object_input_schemas() {
    let fixture = Fixture::new();
    let client = connect(&fixture).await;
    let info = client.peer_info().expect("the server introduced itself");
    assert_eq!(
        info.server_info.as_ref().map(|server| server.name.as_str()),
        Some("memory")
    );
    assert!(info.capabilities.tools.is_some());

    let tools = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    names.sort_unstable();
    let mut expected = TOOLS.to_vec();
    expected.sort_unstable();
    assert_eq!(names, expected);
    for tool in &tools {
        assert_eq!(
            tool.input_schema.get("type"),
            Some(&json!("object")),
            "{}",
            tool.name
        );
        assert!(
            tool.description
                .as_deref()
                .is_some_and(|text| !text.is_empty())
        );
    }
    let put_tool = tools.iter().find(|tool| tool.name == "memory_put").unwrap();
    let properties = put_tool.input_schema["properties"]
        .as_object()
        .expect("properties");
    for field in [
        "namespace",
        "id",
        "operation_id",
        "expected_revision",
        "locator",
        "scopes",
        "content",
    ] {
        assert!(
            properties.contains_key(field),
            "memory_put schema lacks {field}"
        );
    }
    assert_eq!(
        put_tool.input_schema.get("additionalProperties"),
        Some(&json!(false))
    );
    let recall_tool = tools
        .iter()
        .find(|tool| tool.name == "memory_recall")
        .unwrap();
    let recall_schema = serde_json::to_string(&*recall_tool.input_schema).unwrap();
    for mode in ["lexical", "exact", "hnsw", "hybrid"] {
        assert!(
            recall_schema.contains(mode),
            "recall schema names mode {mode}"
        );
    }
    client.cancel().await.expect("the client closes");
}

#[tokio::test]
async fn every_tool_answers_and_refusals_are_tool_errors() {
    let fixture = Fixture::new();
    let client = connect(&fixture).await;

    let created = call(
        &client,
        "memory_put",
        put("tea", "op-1", None, "The user prefers green tea."),
    )
    .await;
    let created = success(&created).clone();
    assert_eq!(created["replayed"], false);
    let revision = created["revision"].as_str().unwrap().to_owned();
    let replayed = call(
        &client,
        "memory_put",
        put("tea", "op-1", None, "The user prefers green tea."),
    )
    .await;
    assert_eq!(success(&replayed)["replayed"], true);

    let read = call(&client, "memory_get", get("tea")).await;
    assert_eq!(success(&read)["document"]["revision"], revision.as_str());

    // Committed writes are recallable at once.
    let recalled = call(&client, "memory_recall", recall("green tea", "lexical")).await;
    let recalled = success(&recalled);
    assert_eq!(recalled["passages"][0]["citation"], "memory:1");
    assert_eq!(recalled["passages"][0]["source"]["id"], "tea");
    assert!(
        recalled["text"]
            .as_str()
            .unwrap()
            .contains("The user prefers green tea.")
    );

    let synced = call(&client, "memory_sync", json!({})).await;
    assert_eq!(success(&synced)["indexed"], 1);

    refused(
        &call(&client, "memory_put", put("tea", "op-2", None, "black tea")).await,
        "conflict",
    );
    refused(
        &call(&client, "memory_put", put("tea", "op-1", None, "white tea")).await,
        "operation-conflict",
    );
    refused(
        &call(
            &client,
            "memory_withdraw",
            withdraw("coffee", "op-3", "r-any"),
        )
        .await,
        "not-found",
    );
    let hybrid = call(&client, "memory_recall", recall("green tea", "hybrid")).await;
    assert_eq!(success(&hybrid)["passages"][0]["source"]["id"], "tea");

    let withdrawn = call(
        &client,
        "memory_withdraw",
        withdraw("tea", "op-4", &revision),
    )
    .await;
    assert!(success(&withdrawn)["document"]["withdrawn"].is_object());
    refused(
        &call(&client, "memory_put", put("tea", "op-5", None, "again")).await,
        "withdrawn",
    );
    let gone = call(&client, "memory_get", get("tea")).await;
    assert_eq!(success(&gone)["document"], Value::Null);

    // Bad arguments are typed refusals too, not protocol errors.
    let mut unknown = get("tea");
    unknown["surprise"] = json!(1);
    refused(&call(&client, "memory_get", unknown).await, "invalid-input");
    refused(
        &call(&client, "memory_get", json!({"namespace": 3, "id": "tea"})).await,
        "invalid-input",
    );
    refused(
        &call(&client, "memory_sync", json!({"now": true})).await,
        "invalid-input",
    );
    let mut long_id = get("tea");
    long_id["id"] = json!("i".repeat(1_025));
    refused(&call(&client, "memory_get", long_id).await, "too-large");
    let mut deep = get("tea");
    let mut identity = json!(1);
    for _ in 0..17 {
        identity = json!({"n": identity});
    }
    deep["namespace"]["identity"] = identity;
    refused(&call(&client, "memory_get", deep).await, "too-large");

    let synced = call(&client, "memory_sync", json!({})).await;
    assert_eq!(success(&synced)["indexed"], 2, "refusals wrote nothing");
    client.cancel().await.expect("the client closes");
}

/// The server exits with status 0 once its input ends, after answering what it was sent.
#[test]
fn server_shuts_down_cleanly_at_end_of_input() {
    let fixture = Fixture::new();
    let mut child = std::process::Command::new(BINARY)
        .env_remove("MEMORY_DB")
        .arg("--db")
        .arg(&fixture.db)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "memory_sync", "arguments": {}}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    for message in &messages {
        writeln!(stdin, "{message}").unwrap();
    }
    drop(stdin);
    let mut output = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut output)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let answers: Vec<Value> = output
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON-RPC message per line"))
        .collect();
    let sync_answer = answers
        .iter()
        .find(|answer| answer["id"] == 2)
        .expect("the call was answered");
    assert_eq!(
        sync_answer["result"]["structuredContent"],
        json!({"indexed": 0, "unindexed": 0})
    );
    assert_eq!(sync_answer["result"]["isError"], false);
}

/// Calls above the SDK's default 16 MiB line cap still reach the server, which refuses text above the
/// canonical size limit as `too-large` and accepts a large write below it.
#[tokio::test]
async fn large_calls_get_typed_answers() {
    let fixture = Fixture::new();
    let client = connect(&fixture).await;
    let too_long = "x".repeat(16 * 1024 * 1024 + 1);
    refused(
        &call(&client, "memory_put", put("big", "op-1", None, &too_long)).await,
        "too-large",
    );
    let large = "y".repeat(1024 * 1024);
    let written = call(&client, "memory_put", put("big", "op-2", None, &large)).await;
    assert_eq!(success(&written)["replayed"], false);
    let synced = call(&client, "memory_sync", json!({})).await;
    assert_eq!(success(&synced)["indexed"], 1);
    client.cancel().await.expect("the client closes");
}

fn recalled_ids(result: &CallToolResult) -> Vec<String> {
    success(result)["passages"]
        .as_array()
        .expect("passages")
        .iter()
        .map(|passage| passage["source"]["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The background indexer and `memory_sync` over the pipe: after a sync, hybrid recall finds a
/// paraphrase by meaning, and a withdrawn document is gone from every mode.
#[tokio::test]
async fn sync_makes_earlier_writes_recallable_in_hybrid_mode() {
    let fixture = Fixture::new();
    let client = connect(&fixture).await;
    let mut ada_revision = String::new();
    for (index, (id, text)) in [
        ("ada", "Ada moved to Lisbon last spring."),
        ("tea", "Bob prefers green tea over coffee in the morning."),
        (
            "meeting",
            "The quarterly budget review is scheduled for Tuesday.",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let written = call(
            &client,
            "memory_put",
            put(id, &format!("op-{index}"), None, text),
        )
        .await;
        if id == "ada" {
            ada_revision = success(&written)["revision"].as_str().unwrap().to_owned();
        }
    }
    let synced = call(&client, "memory_sync", json!({})).await;
    assert_eq!(success(&synced)["indexed"], 3);
    let mut question = recall("which city does Ada live in", "hybrid");
    let recalled = call(&client, "memory_recall", question.clone()).await;
    assert_eq!(
        recalled_ids(&recalled).first().map(String::as_str),
        Some("ada")
    );
    question.as_object_mut().unwrap().remove("mode");
    let by_default = call(&client, "memory_recall", question).await;
    assert_eq!(
        success(&by_default),
        success(&recalled),
        "hybrid is the default"
    );

    call(
        &client,
        "memory_withdraw",
        withdraw("ada", "op-w", &ada_revision),
    )
    .await;
    let synced = call(&client, "memory_sync", json!({})).await;
    assert_eq!(success(&synced)["indexed"], 4);
    for mode in ["lexical", "exact", "hnsw", "hybrid"] {
        let recalled = call(
            &client,
            "memory_recall",
            recall("which city does Ada live in", mode),
        )
        .await;
        assert!(
            !recalled_ids(&recalled).contains(&"ada".to_owned()),
            "{mode}"
        );
    }
    client.cancel().await.expect("the client closes");
}

/// Without the model, the server still serves every lexical need and refuses the semantic ones as
/// `unavailable`, naming the script that installs the model.
#[tokio::test]
async fn without_the_model_semantic_tools_are_unavailable_and_lexical_works() {
    let fixture = Fixture::new();
    let empty = tempfile::tempdir().unwrap();
    let client =
        connect_with_env(&fixture, &[("MEMORY_ASSETS_DIR", empty.path().as_os_str())]).await;
    let written = call(
        &client,
        "memory_put",
        put("tea", "op-1", None, "The user prefers green tea."),
    )
    .await;
    assert_eq!(success(&written)["replayed"], false);
    let lexical = call(&client, "memory_recall", recall("green tea", "lexical")).await;
    assert_eq!(recalled_ids(&lexical), vec!["tea".to_owned()]);
    for (tool, arguments) in [
        ("memory_recall", recall("green tea", "exact")),
        ("memory_recall", recall("green tea", "hnsw")),
        ("memory_recall", recall("green tea", "hybrid")),
        ("memory_sync", json!({})),
    ] {
        let result = call(&client, tool, arguments).await;
        refused(&result, "unavailable");
        let message = result.structured_content.as_ref().unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains("scripts/fetch-assets.sh"), "{message}");
    }
    client.cancel().await.expect("the client closes");
}

/// `budget`, `storage` and `corrupt` as tool errors: four matching 4.5 MB documents exceed recall's
/// default 16 MiB input budget; a renamed table makes reads fail in SQLite; a tampered document body
/// is reported as corrupt. (No model: the background indexer would spend minutes embedding 18 MB that
/// no lexical recall needs.)
#[tokio::test]
async fn budget_storage_and_corrupt_are_tool_errors() {
    let fixture = Fixture::new();
    let no_model = tempfile::tempdir().unwrap();
    let client = connect_with_env(
        &fixture,
        &[("MEMORY_ASSETS_DIR", no_model.path().as_os_str())],
    )
    .await;
    // Four documents of 4.5 MB: each put's answer echoes the document (twice, as text and as
    // structured content) and must stay under the client's 16 MiB line cap.
    let big_text = "needle ".repeat(9 * 1024 * 1024 / 14);
    for (id, operation) in [
        ("one", "op-1"),
        ("two", "op-2"),
        ("three", "op-3"),
        ("four", "op-4"),
    ] {
        let written = call(&client, "memory_put", put(id, operation, None, &big_text)).await;
        success(&written);
    }
    refused(
        &call(&client, "memory_recall", recall("needle", "lexical")).await,
        "budget",
    );
    let written = call(&client, "memory_put", put("tea", "op-5", None, "green tea")).await;
    success(&written);

    let connection = rusqlite::Connection::open(&fixture.db).unwrap();
    connection
        .execute("UPDATE memory_documents SET body = 'not a document'", [])
        .unwrap();
    refused(&call(&client, "memory_get", get("tea")).await, "corrupt");
    connection
        .execute(
            "ALTER TABLE memory_documents RENAME TO hidden_documents",
            [],
        )
        .unwrap();
    refused(&call(&client, "memory_get", get("tea")).await, "storage");
    drop(connection);
    client.cancel().await.expect("the client closes");
}

/// `deadline` as a tool error: with the test-only `fault-injection` feature, every store call of a
/// recall blocks its thread for a minute; `timeout_ms` ends the recall long before, and the server keeps
/// answering other calls.
#[cfg(feature = "fault-injection")]
#[tokio::test]
async fn a_recall_whose_store_stalls_is_a_deadline_tool_error() {
    use memory_cli::recall_service::STALL_RECALL_ENV;

    let fixture = Fixture::new();
    let client = connect_with_env(
        &fixture,
        &[(STALL_RECALL_ENV, std::ffi::OsStr::new("60000"))],
    )
    .await;
    let written = call(
        &client,
        "memory_put",
        put("tea", "op-1", None, "The user prefers green tea."),
    )
    .await;
    success(&written);
    let synced = call(&client, "memory_sync", json!({})).await;
    assert_eq!(success(&synced)["indexed"], 1);
    for mode in ["lexical", "hnsw", "hybrid"] {
        let mut arguments = recall("green tea", mode);
        arguments["limits"]["timeout_ms"] = json!(50);
        refused(&call(&client, "memory_recall", arguments).await, "deadline");
    }
    let read = call(&client, "memory_get", get("tea")).await;
    assert_eq!(success(&read)["document"]["id"], "tea");
    client.cancel().await.expect("the client closes");
}
