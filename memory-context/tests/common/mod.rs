//! Builders for the context layer's tests: a thread log in memory and records of every kind.
#![allow(dead_code)]

use std::sync::Arc;

use memory_core::activity::{NewRecord, RecordBody, ThreadId, ThreadLog, ThreadRecord};
use memory_testkit::InMemoryActivity;
use serde_json::json;

pub fn log() -> Arc<InMemoryActivity> {
    Arc::new(InMemoryActivity::new())
}

pub fn thread(name: &str) -> ThreadId {
    ThreadId::new(name).expect("a valid thread id")
}

fn record(speaker: &str, body: RecordBody) -> NewRecord {
    NewRecord {
        occurred_at: Some(1_700_000_000_000),
        speaker: speaker.to_owned(),
        observers: Vec::new(),
        body,
        opaque_cursor: None,
    }
}

pub fn user(log: &dyn ThreadLog, thread: &ThreadId, text: &str) -> ThreadRecord {
    log.append(
        thread,
        record(
            "ana",
            RecordBody::UserInput {
                text: text.to_owned(),
            },
        ),
    )
    .expect("append")
}

pub fn system(log: &dyn ThreadLog, thread: &ThreadId, text: &str) -> ThreadRecord {
    log.append(
        thread,
        record(
            "host",
            RecordBody::SystemMessage {
                text: text.to_owned(),
            },
        ),
    )
    .expect("append")
}

pub fn answer(log: &dyn ThreadLog, thread: &ThreadId, text: &str) -> ThreadRecord {
    log.append(
        thread,
        record(
            "assistant",
            RecordBody::AssistantMessage {
                text: text.to_owned(),
            },
        ),
    )
    .expect("append")
}

pub fn call(log: &dyn ThreadLog, thread: &ThreadId, call_id: &str, name: &str) -> ThreadRecord {
    log.append(
        thread,
        record(
            "assistant",
            RecordBody::ToolCall {
                call_id: call_id.to_owned(),
                name: name.to_owned(),
                arguments: json!({ "query": call_id }),
            },
        ),
    )
    .expect("append")
}

pub fn result(log: &dyn ThreadLog, thread: &ThreadId, call_id: &str, output: &str) -> ThreadRecord {
    log.append(
        thread,
        record(
            "tool",
            RecordBody::ToolResult {
                call_id: call_id.to_owned(),
                output: json!(output),
                is_error: false,
            },
        ),
    )
    .expect("append")
}

pub fn run_completed(log: &dyn ThreadLog, thread: &ThreadId) -> ThreadRecord {
    log.append(
        thread,
        record(
            "host",
            RecordBody::RunCompleted {
                outcome: "completed".to_owned(),
            },
        ),
    )
    .expect("append")
}

/// Every record of a thread.
pub fn all_records(log: &dyn ThreadLog, thread: &ThreadId) -> Vec<ThreadRecord> {
    let mut records = Vec::new();
    let mut after = memory_core::activity::Sequence::ZERO;
    loop {
        let page = log.read_page(thread, after, 1_000).expect("read");
        let Some(last) = page.last() else {
            return records;
        };
        after = last.sequence;
        records.extend(page);
    }
}
