//! End-to-end tests of conversation activity through the built binary and its MCP server: `memory
//! thread append` and `memory thread forget` (and the tools `memory_thread_append`,
//! `memory_thread_forget`), with the remembering worker's passes run in-process between the calls.
//!
//! The claim under test: a forget is effective for recall the moment it is acknowledged, in every mode
//! (lexical, exact, hnsw, hybrid) and for `memory_get`, before the worker's cleanup has run and after
//! it. Every "not recalled" check is preceded by the same recall finding the record's document, so the
//! test fails if suppression stops working. The semantic modes use the real model (found the way the
//! binary finds it); a missing model fails these tests, it never skips them.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::thread_support;

use std::process::Stdio;

use common::{Fixture, run_with_stdin};
use memory_core::activity::RememberingStore;
use memory_core::activity::{IntentState, Sequence, ThreadId, ThreadLog};
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use thread_support::*;

#[test]
fn a_forgotten_record_is_not_recalled_in_any_mode_before_or_after_cleanup() {
    let fixture = Fixture::new();
    let first = succeeded(fixture.run(&[
        "thread",
        "append",
        &append(THREAD, user_record(FORGOTTEN, 1)).to_string(),
    ]));
    assert_append_answer(&first, THREAD, 1);
    // The same contract through standard input.
    let second = succeeded(run_with_stdin(
        Some(&fixture.db),
        &["thread", "append", "-"],
        Some(append(THREAD, user_record(KEPT, 2)).to_string().as_bytes()),
    ));
    assert_append_answer(&second, THREAD, 2);
    assert_ne!(first["digest"], second["digest"]);

    let worker = sqlite_worker(&fixture.db);
    let runtime = runtime();
    assert_eq!(
        runtime.block_on(worker.activity_pass(THREAD)),
        2,
        "the worker sees both records"
    );
    succeeded(fixture.call("sync", &json!({})));

    let mut call = |argument: &Value| succeeded(fixture.call("recall", argument));
    let forgotten = recalled_id(&mut call, FORGOTTEN_QUERY, FORGOTTEN);
    let kept = recalled_id(&mut call, KEPT_QUERY, KEPT);
    check_modes(
        &mut call,
        FORGOTTEN_QUERY,
        &forgotten,
        FORGOTTEN,
        true,
        "before the forget",
    );
    assert!(succeeded(fixture.call("get", &get(&forgotten)))["document"].is_object());

    let answer = succeeded(fixture.run(&["thread", "forget", &forget(THREAD, 1).to_string()]));
    let cleanup = assert_forget_answer(&answer, THREAD, 1);

    // Acknowledged, cleanup not run yet: the document is still current in the store and its chunks
    // are in the index, yet no mode recalls it and get reads it as gone.
    let view = worker
        .remembering
        .inspect_intent(&cleanup)
        .unwrap()
        .unwrap();
    assert_eq!(
        view.state,
        IntentState::Queued,
        "cleanup has not run: {view:?}"
    );
    check_modes(
        &mut call,
        FORGOTTEN_QUERY,
        &forgotten,
        FORGOTTEN,
        false,
        "after the forget, before cleanup",
    );
    check_modes(
        &mut call,
        KEPT_QUERY,
        &kept,
        KEPT,
        true,
        "the other record, before cleanup",
    );
    assert!(succeeded(fixture.call("get", &get(&forgotten)))["document"].is_null());
    assert!(succeeded(fixture.call("get", &get(&kept)))["document"].is_object());

    // Forgetting again is no error and names the same cleanup.
    let again = succeeded(fixture.run(&["thread", "forget", &forget(THREAD, 1).to_string()]));
    assert_eq!(assert_forget_answer(&again, THREAD, 1), cleanup);

    // The worker's cleanup withdraws the document; recall stays empty of it in every mode.
    runtime.block_on(worker.intent_pass());
    worker.assert_cleaned(&cleanup);
    succeeded(fixture.call("sync", &json!({})));
    check_modes(
        &mut call,
        FORGOTTEN_QUERY,
        &forgotten,
        FORGOTTEN,
        false,
        "after cleanup",
    );
    check_modes(
        &mut call,
        KEPT_QUERY,
        &kept,
        KEPT,
        true,
        "the other record, after cleanup",
    );
    assert!(succeeded(fixture.call("get", &get(&forgotten)))["document"].is_null());
}

#[test]
fn delete_and_revoke_are_forgets_and_unknown_records_are_not_found() {
    let fixture = Fixture::new();
    for at in 1..=2 {
        succeeded(fixture.run(&[
            "thread",
            "append",
            &append(THREAD, user_record(KEPT, at)).to_string(),
        ]));
    }
    for (sequence, event) in [(1, "delete"), (2, "revoke")] {
        let mut argument = forget(THREAD, sequence);
        argument["event"] = json!(event);
        let answer = succeeded(fixture.run(&["thread", "forget", &argument.to_string()]));
        assert_eq!(answer["event"], event, "{answer}");
        assert!(answer["cleanup"].is_string(), "{answer}");
    }
    let remembering = SqliteRememberingStore::open(&fixture.db).unwrap();
    let open = remembering.open_intents().unwrap();
    assert_eq!(open, 2, "one cleanup per forgotten record");
    for argument in [forget(THREAD, 3), forget("another-thread", 1)] {
        fixture
            .run(&["thread", "forget", &argument.to_string()])
            .assert_refused("not-found");
    }
    assert_eq!(
        remembering.open_intents().unwrap(),
        open,
        "a refused forget records nothing"
    );
}

#[test]
fn bad_thread_input_is_refused_with_its_kind_and_writes_nothing() {
    let fixture = Fixture::new();
    let long_thread = "t".repeat(513);
    let cases = [
        (
            vec!["thread", "append"],
            json!({"thread": THREAD, "record": user_record(KEPT, 1), "extra": 1}),
            "invalid-input",
        ),
        (
            vec!["thread", "append"],
            json!({"thread": THREAD, "record": {"speaker": "ana", "tone": "warm",
            "body": {"kind": "user_input", "text": KEPT}}}),
            "invalid-input",
        ),
        (
            vec!["thread", "append"],
            json!({"thread": THREAD, "record": {"speaker": "ana",
            "body": {"kind": "user_input", "text": KEPT, "mood": 1}}}),
            "invalid-input",
        ),
        (
            vec!["thread", "append"],
            json!({"thread": THREAD, "record": {"speaker": "ana",
            "body": {"kind": "shout", "text": KEPT}}}),
            "invalid-input",
        ),
        (
            vec!["thread", "append"],
            json!({"thread": "", "record": user_record(KEPT, 1)}),
            "invalid-input",
        ),
        (
            vec!["thread", "append"],
            json!({"thread": "a\u{7}b", "record": user_record(KEPT, 1)}),
            "invalid-input",
        ),
        (
            vec!["thread", "append"],
            json!({"thread": long_thread, "record": user_record(KEPT, 1)}),
            "too-large",
        ),
        (
            vec!["thread", "append"],
            json!({"thread": THREAD, "record": {"speaker": "a".repeat(257),
            "body": {"kind": "user_input", "text": KEPT}}}),
            "too-large",
        ),
        (
            vec!["thread", "append"],
            json!({"thread": THREAD, "record": {"speaker": "ana",
            "observers": vec!["b"; 65], "body": {"kind": "user_input", "text": KEPT}}}),
            "too-large",
        ),
        (
            vec!["thread", "forget"],
            json!({"thread": THREAD, "sequence": 0, "reason": "asked"}),
            "invalid-input",
        ),
        (
            vec!["thread", "forget"],
            json!({"thread": THREAD, "sequence": -1, "reason": "asked"}),
            "invalid-input",
        ),
        (
            vec!["thread", "forget"],
            json!({"thread": THREAD, "sequence": 1}),
            "invalid-input",
        ),
        (
            vec!["thread", "forget"],
            json!({"thread": THREAD, "sequence": 1, "reason": "asked", "event": "edit"}),
            "invalid-input",
        ),
        (
            vec!["thread", "forget"],
            json!({"thread": THREAD, "sequence": 1, "reason": "r".repeat(4_097)}),
            "too-large",
        ),
    ];
    for (mut args, argument, kind) in cases {
        let text = argument.to_string();
        args.push(&text);
        fixture.run(&args).assert_refused(kind);
    }
    // A record body past the canonical limit (16 Mi UTF-16 units), on standard input.
    let huge = append(THREAD, user_record(&"x".repeat(16_777_216), 1)).to_string();
    run_with_stdin(
        Some(&fixture.db),
        &["thread", "append", "-"],
        Some(huge.as_bytes()),
    )
    .assert_refused("too-large");
    // Refused input is refused before the database is opened: not even the file was created.
    assert!(!fixture.db.exists(), "refused input created the database");

    // And with a database in place, a refusal leaves the log as it was.
    succeeded(fixture.run(&[
        "thread",
        "append",
        &append(THREAD, user_record(KEPT, 1)).to_string(),
    ]));
    fixture
        .run(&[
            "thread",
            "append",
            &json!({"thread": THREAD, "record": {"speaker": "a".repeat(257),
            "body": {"kind": "user_input", "text": KEPT}}})
            .to_string(),
        ])
        .assert_refused("too-large");
    let log = SqliteThreadLog::open(&fixture.db).unwrap();
    assert_eq!(
        log.inspect_tail(&ThreadId::new(THREAD).unwrap()).unwrap(),
        Sequence::new(1)
    );
}

#[test]
fn thread_commands_explain_themselves() {
    for command in ["append", "forget"] {
        let outcome = common::run_with_stdin(None, &["thread", command, "--help"], None);
        outcome.assert_success();
        assert!(outcome.stdout.contains("Example:"), "{}", outcome.stdout);
        assert!(
            outcome
                .stdout
                .contains(&format!("memory thread {command} '")),
            "{}",
            outcome.stdout
        );
    }
}

async fn connect(fixture: &Fixture) -> RunningService<RoleClient, ()> {
    let command = tokio::process::Command::new(common::BINARY).configure(|command| {
        command
            .env_remove("MEMORY_DB")
            .env_remove("MEMORY_LOG")
            .arg("--db")
            .arg(&fixture.db)
            // The threads name destinations of several users, as a trusted single-user host may.
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

async fn call_tool(
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

async fn tool_success(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    arguments: Value,
) -> Value {
    let result = call_tool(client, tool, arguments).await;
    assert_eq!(result.is_error, Some(false), "{tool}: {result:#?}");
    result.structured_content.expect("structured content")
}

async fn tool_refused(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    arguments: Value,
    kind: &str,
) {
    let result = call_tool(client, tool, arguments).await;
    assert_eq!(result.is_error, Some(true), "{tool}: {result:#?}");
    let content = result.structured_content.expect("structured error");
    assert_eq!(content["error"]["kind"], kind, "{tool}: {content}");
}

async fn recall_modes(
    client: &RunningService<RoleClient, ()>,
    query: &str,
    id: &str,
    text: &str,
    expected: bool,
    stage: &str,
) {
    let mut answers = Vec::new();
    for mode in MODES {
        answers.push((
            mode,
            tool_success(client, "memory_recall", recall(query, mode)).await,
        ));
    }
    assert_modes(&answers, id, text, expected, stage);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_thread_tools_append_and_forget_with_immediate_effect() {
    let fixture = Fixture::new();
    let client = connect(&fixture).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    for name in ["memory_thread_append", "memory_thread_forget"] {
        let tool = tools.iter().find(|tool| tool.name == name).expect(name);
        assert_eq!(
            tool.input_schema.get("type"),
            Some(&json!("object")),
            "{name}"
        );
        assert!(tool.input_schema.get("properties").is_some(), "{name}");
    }

    let first = tool_success(
        &client,
        "memory_thread_append",
        append(THREAD, user_record(FORGOTTEN, 1)),
    )
    .await;
    assert_append_answer(&first, THREAD, 1);
    let second = tool_success(
        &client,
        "memory_thread_append",
        append(THREAD, user_record(KEPT, 2)),
    )
    .await;
    assert_append_answer(&second, THREAD, 2);
    tool_refused(
        &client,
        "memory_thread_append",
        json!({"thread": THREAD, "record": user_record(KEPT, 3), "x": 1}),
        "invalid-input",
    )
    .await;
    tool_refused(
        &client,
        "memory_thread_append",
        json!({"thread": "", "record": user_record(KEPT, 3)}),
        "invalid-input",
    )
    .await;
    tool_refused(
        &client,
        "memory_thread_forget",
        forget(THREAD, 9),
        "not-found",
    )
    .await;

    let worker = sqlite_worker(&fixture.db);
    assert_eq!(
        worker.activity_pass(THREAD).await,
        2,
        "refused appends wrote nothing"
    );
    tool_success(&client, "memory_sync", json!({})).await;
    let answer = tool_success(&client, "memory_recall", recall(FORGOTTEN_QUERY, "lexical")).await;
    let forgotten = passages(&answer)
        .into_iter()
        .find(|(_, content)| content.contains(FORGOTTEN))
        .expect("the worker's document is recalled")
        .0;
    recall_modes(
        &client,
        FORGOTTEN_QUERY,
        &forgotten,
        FORGOTTEN,
        true,
        "before the forget",
    )
    .await;

    let answer = tool_success(&client, "memory_thread_forget", forget(THREAD, 1)).await;
    let cleanup = assert_forget_answer(&answer, THREAD, 1);
    recall_modes(
        &client,
        FORGOTTEN_QUERY,
        &forgotten,
        FORGOTTEN,
        false,
        "after the forget, before cleanup",
    )
    .await;
    recall_modes(
        &client,
        KEPT_QUERY,
        "-",
        KEPT,
        true,
        "the other record, before cleanup",
    )
    .await;
    let read = tool_success(&client, "memory_get", get(&forgotten)).await;
    assert!(read["document"].is_null(), "{read}");

    worker.intent_pass().await;
    worker.assert_cleaned(&cleanup);
    tool_success(&client, "memory_sync", json!({})).await;
    recall_modes(
        &client,
        FORGOTTEN_QUERY,
        &forgotten,
        FORGOTTEN,
        false,
        "after cleanup",
    )
    .await;
    client.cancel().await.expect("the server stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_record_is_never_shown_by_the_context_tools_on_sqlite() {
    let fixture = Fixture::new();
    let db = fixture.db.to_str().expect("a UTF-8 path").to_owned();
    a_forgotten_record_is_never_shown_by_the_context_tools(&["--db", &db]).await;
}
