//! What `memory_thread_append` stores for a caller: tool outputs bounded by `--max-tool-output-bytes`
//! (an envelope of their head and tail), and no compaction records (the context layer's
//! `memory_compact` appends those through the thread log port).

#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use common::Fixture;
use memory_cli::thread::ThreadService;
use memory_core::activity::{
    CompactionOutcome, CompactionRecord, DEFAULT_MAX_TOOL_OUTPUT_BYTES, NewRecord, RecordBody,
    Sequence, ThreadId, ThreadLog, ToolOutputBound,
};
use memory_core::{ErrorKind, SystemClock};
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use serde_json::{Value, json};

fn tool_result(output: Value) -> NewRecord {
    NewRecord {
        occurred_at: Some(1),
        speaker: "search".to_owned(),
        observers: Vec::new(),
        body: RecordBody::ToolResult {
            call_id: "c1".to_owned(),
            output,
            is_error: false,
        },
        opaque_cursor: None,
    }
}

fn service(fixture: &Fixture) -> (ThreadService, Arc<SqliteThreadLog>) {
    let log = Arc::new(SqliteThreadLog::open(&fixture.db).unwrap());
    let remembering = Arc::new(SqliteRememberingStore::open(&fixture.db).unwrap());
    let service = ThreadService::new(
        Arc::clone(&log) as Arc<dyn ThreadLog>,
        remembering,
        Arc::new(SystemClock),
    );
    (service, log)
}

fn stored_output(log: &SqliteThreadLog, thread: &ThreadId) -> Value {
    let page = log.read_page(thread, Sequence::ZERO, 10).unwrap();
    assert_eq!(page.len(), 1);
    match &page[0].record.body {
        RecordBody::ToolResult { output, .. } => output.clone(),
        other => panic!("not a tool result: {other:?}"),
    }
}

#[tokio::test]
async fn a_large_tool_output_is_stored_as_its_head_and_tail() {
    let fixture = Fixture::new();
    let (service, log) = service(&fixture);
    let thread = ThreadId::new("t").unwrap();
    let text = format!("{}{}", "a".repeat(100 * 1024), "z".repeat(100 * 1024));
    service
        .append(thread.clone(), None, tool_result(Value::String(text)))
        .await
        .unwrap();
    let half = DEFAULT_MAX_TOOL_OUTPUT_BYTES / 2;
    assert_eq!(
        stored_output(&log, &thread),
        json!({
            "truncated": true,
            "original_bytes": 200 * 1024,
            "omitted_bytes": 200 * 1024 - DEFAULT_MAX_TOOL_OUTPUT_BYTES,
            "head": "a".repeat(half),
            "tail": "z".repeat(half),
        })
    );

    // A service configured with another bound keeps that much; a small output is stored unchanged.
    let bounded = service.with_tool_output_bound(ToolOutputBound::new(2_048).unwrap());
    let other = ThreadId::new("other").unwrap();
    bounded
        .append(
            other.clone(),
            None,
            tool_result(json!({"rows": vec![7; 5_000]})),
        )
        .await
        .unwrap();
    let envelope = stored_output(&log, &other);
    assert_eq!(envelope["head"].as_str().unwrap().len(), 1_024);
    assert_eq!(envelope["tail"].as_str().unwrap().len(), 1_024);
    let small = ThreadId::new("small").unwrap();
    bounded
        .append(small.clone(), None, tool_result(json!({"ok": true})))
        .await
        .unwrap();
    assert_eq!(stored_output(&log, &small), json!({"ok": true}));
}

#[tokio::test]
async fn a_caller_cannot_append_a_compaction() {
    let fixture = Fixture::new();
    let (service, log) = service(&fixture);
    let thread = ThreadId::new("t").unwrap();
    let compaction = NewRecord {
        occurred_at: Some(1),
        speaker: "assistant".to_owned(),
        observers: Vec::new(),
        body: RecordBody::Compaction(CompactionRecord {
            outcome: CompactionOutcome::NothingToFold,
            folded: Vec::new(),
            measured_input_tokens: 10,
            refusals: Vec::new(),
            summary: None,
            summarizer: None,
            replaced_chars: 0,
            summary_chars: 0,
            failure: None,
            forgotten: Vec::new(),
            replaces: None,
            summarizer_tokens: None,
        }),
        opaque_cursor: None,
    };
    let refusal = service
        .append(thread.clone(), None, compaction)
        .await
        .unwrap_err();
    assert_eq!(refusal.kind(), ErrorKind::InvalidInput);
    assert!(refusal.message().contains("memory_compact"), "{refusal:?}");
    assert_eq!(log.inspect_tail(&thread).unwrap(), Sequence::ZERO);
}

#[test]
fn the_flag_bounds_appends_and_refuses_a_bound_below_its_floor() {
    let fixture = Fixture::new();
    let argument = json!({
        "thread": "t",
        "user": "ana",
        "record": {"speaker": "search", "body": {"kind": "tool_result", "call_id": "c1",
            "output": "x".repeat(10_000), "is_error": false}},
    })
    .to_string();
    fixture
        .run(&[
            "--max-tool-output-bytes",
            "100",
            "thread",
            "append",
            &argument,
        ])
        .assert_refused("invalid-input");
    let thread = ThreadId::new("t").unwrap();
    let log = SqliteThreadLog::open(&fixture.db).unwrap();
    assert_eq!(log.inspect_tail(&thread).unwrap(), Sequence::ZERO);
    fixture
        .run(&[
            "--max-tool-output-bytes",
            "2048",
            "thread",
            "append",
            &argument,
        ])
        .assert_success();
    let envelope = stored_output(&log, &thread);
    assert_eq!(envelope["original_bytes"], 10_000);
    assert_eq!(envelope["head"].as_str().unwrap().len(), 1_024);
}
