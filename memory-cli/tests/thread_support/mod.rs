//! Helpers of the thread tests: the records and recalls they use, and the remembering worker's passes
//! run in-process over either backend's stores.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use memory_cli::database::{Client, Database, Opened};
use memory_cli::worker::ProcessorStores;
use memory_core::activity::{
    IntentId, IntentOutcome, IntentState, ProcessorId, ProcessorVersion, ProgressStore,
    RememberingStore, ThreadId, ThreadLog, WorkerId,
};
use memory_core::{MemoryReader, MemoryScope, MemoryWriter, SystemClock};
use remembering::app::{KeepLatestMerger, RemoveSourceAttributions};
use remembering::thread_sources::{StatementProposals, ThreadRecordLoader};
use remembering::worker::{Application, IntentPassLimits, IntentWorker};
use remembering::{
    ActivityProcessor, ActivityProcessorParts, PassLimits, StatementExtractor, UnboundThreads,
};
use serde_json::{Value, json};

use super::common::Outcome;

pub const MODES: [&str; 4] = ["lexical", "exact", "hnsw", "hybrid"];
pub const THREAD: &str = "chat-42";
pub const FORGOTTEN: &str = "I adopted a grey cat named Miso last winter.";
pub const FORGOTTEN_QUERY: &str = "grey cat named Miso";
pub const KEPT: &str = "I play the violin every Sunday morning.";
pub const KEPT_QUERY: &str = "violin every Sunday";
/// The scope the worker grants statements (its default).
pub const SCOPE: &str = "agent";

pub fn user_record(text: &str, at: i64) -> Value {
    json!({"occurred_at": at, "speaker": "ana", "observers": ["assistant"],
           "body": {"kind": "user_input", "text": text}})
}

/// Every append names its user, so the thread is bound to that user's namespace (whatever the OS
/// user running the tests is called).
pub fn append(thread: &str, record: Value) -> Value {
    json!({"thread": thread, "record": record, "user": USER})
}

/// The user the tests' threads belong to.
pub const USER: &str = "ana";

pub fn forget(thread: &str, sequence: u64) -> Value {
    json!({"thread": thread, "sequence": sequence, "reason": "the user asked to forget it"})
}

/// The namespace the worker writes the tests' threads' statements to: their destination, the
/// per-user namespace of [`USER`].
pub fn statements_namespace() -> Value {
    json!({"name": "memory.user", "version": 1, "identity": {"user": USER}})
}

pub fn recall(query: &str, mode: &str) -> Value {
    json!({
        "namespace": statements_namespace(), "scope": SCOPE, "query": query, "mode": mode,
        // Generous: a one-shot recall loads the model inside its deadline.
        "limits": {"max_items": 5, "max_bytes": 8000, "max_tokens": 2000, "timeout_ms": 600000}
    })
}

pub fn get(id: &str) -> Value {
    json!({"namespace": statements_namespace(), "id": id})
}

/// (document id, content) of each recalled passage.
pub fn passages(answer: &Value) -> Vec<(String, String)> {
    answer["passages"]
        .as_array()
        .expect("passages")
        .iter()
        .map(|passage| {
            (
                passage["source"]["id"].as_str().unwrap().to_owned(),
                passage["content"]["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Asserts that `answer` recalls document `id` (and so the text it holds), or that it does not.
/// Whether `answer` recalls document `id` (or the text it holds).
pub fn recalls(answer: &Value, id: &str, text: &str) -> bool {
    passages(answer)
        .iter()
        .any(|(document, content)| document == id || content.contains(text))
}

/// Asserts every mode's answer recalls document `id` (or not, as `expected` says), naming each mode
/// that disagrees, so one failure shows which modes went wrong.
pub fn assert_modes(answers: &[(&str, Value)], id: &str, text: &str, expected: bool, stage: &str) {
    let wrong: Vec<&str> = answers
        .iter()
        .filter(|(_, answer)| recalls(answer, id, text) != expected)
        .map(|(mode, _)| *mode)
        .collect();
    assert!(
        wrong.is_empty(),
        "{stage}: modes {wrong:?} {} the document: {answers:#?}",
        if expected {
            "do not recall"
        } else {
            "still recall"
        }
    );
}

pub fn assert_append_answer(answer: &Value, thread: &str, sequence: u64) {
    assert_eq!(answer["thread"], thread, "{answer}");
    assert_eq!(answer["sequence"], sequence, "{answer}");
    let digest = answer["digest"].as_str().expect("a digest");
    assert!(
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
        "{answer}"
    );
    assert_eq!(answer.as_object().unwrap().len(), 3, "{answer}");
}

pub fn assert_forget_answer(answer: &Value, thread: &str, sequence: u64) -> IntentId {
    assert_eq!(answer["thread"], thread, "{answer}");
    assert_eq!(answer["sequence"], sequence, "{answer}");
    assert_eq!(answer["event"], "forget", "{answer}");
    IntentId::new(answer["cleanup"].as_str().expect("a cleanup intent id")).unwrap()
}

/// The remembering worker's stores, as `remembering-worker` opens them.
pub struct WorkerStores<W> {
    pub memory: Arc<W>,
    pub log: Arc<dyn ThreadLog>,
    pub progress: Arc<dyn ProgressStore>,
    pub remembering: Arc<dyn RememberingStore>,
}

impl<W> From<ProcessorStores<W>> for WorkerStores<W> {
    fn from(stores: ProcessorStores<W>) -> Self {
        Self {
            memory: stores.memory,
            log: stores.log,
            progress: stores.progress,
            remembering: stores.remembering,
        }
    }
}

/// The worker's stores of the SQLite file at `path`.
pub fn sqlite_worker(path: &Path) -> WorkerStores<memory_sqlite::SqliteStore> {
    let Opened::Sqlite(memory) = Database::Sqlite(path.to_owned())
        .open(Client::WORKER)
        .unwrap()
    else {
        panic!("a path opens SQLite");
    };
    ProcessorStores::open(memory).unwrap().into()
}

impl<W: MemoryReader + MemoryWriter + 'static> WorkerStores<W> {
    fn owner() -> WorkerId {
        WorkerId::new("thread-test-worker").unwrap()
    }

    fn scopes() -> Vec<MemoryScope> {
        vec![MemoryScope::new(SCOPE).unwrap()]
    }

    /// One committed-activity pass of the default `statements@1` processor over `thread`; answers how
    /// many records it advanced past.
    pub async fn activity_pass(&self, thread: &str) -> usize {
        let processor = ActivityProcessor::new(ActivityProcessorParts {
            log: Arc::clone(&self.log),
            progress: Arc::clone(&self.progress),
            references: Arc::clone(&self.remembering),
            writer: Arc::clone(&self.memory),
            extractor: StatementExtractor::new(),
            clock: Arc::new(SystemClock),
            processor: ProcessorId::new("statements").unwrap(),
            version: ProcessorVersion::new(1),
            owner: Self::owner(),
            limits: PassLimits {
                max_records: 100,
                page_size: 10,
                timeout_ms: 300_000,
                lease_ms: 600_000,
            },
            unbound: UnboundThreads::PerThread {
                scopes: Self::scopes(),
            },
        })
        .unwrap();
        processor
            .run_pass(&ThreadId::new(thread).unwrap())
            .await
            .unwrap()
            .processed
    }

    /// One intent pass (a forget's cleanup runs here), as the worker binary runs it.
    pub async fn intent_pass(&self) {
        IntentWorker::new(
            Arc::clone(&self.remembering),
            Arc::clone(&self.memory),
            Application {
                loader: ThreadRecordLoader::new(Arc::clone(&self.log)),
                extractor: StatementProposals::new(StatementExtractor::new()),
                merger: KeepLatestMerger,
                cleanup: RemoveSourceAttributions,
            },
            Arc::new(SystemClock),
            Self::owner(),
            IntentPassLimits {
                max_intents: 100,
                lease_ms: 600_000,
            },
        )
        .unwrap()
        .run_pass()
        .await
        .unwrap();
    }

    /// Asserts the cleanup intent finished, having withdrawn one document.
    pub fn assert_cleaned(&self, cleanup: &IntentId) {
        let view = self.remembering.inspect_intent(cleanup).unwrap().unwrap();
        assert_eq!(view.state, IntentState::Done, "{view:?}");
        assert_eq!(
            view.outcome,
            Some(IntentOutcome::Cleaned {
                withdrawn: 1,
                kept: 0
            }),
            "{view:?}"
        );
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Recalls `query` in every mode through `call`, asserting whether document `id` is among the answers.
pub fn check_modes(
    call: &mut dyn FnMut(&Value) -> Value,
    query: &str,
    id: &str,
    text: &str,
    expected: bool,
    stage: &str,
) {
    let answers: Vec<(&str, Value)> = MODES
        .iter()
        .map(|mode| (*mode, call(&recall(query, mode))))
        .collect();
    assert_modes(&answers, id, text, expected, stage);
}

pub fn succeeded(outcome: Outcome) -> Value {
    outcome.assert_success();
    outcome.json
}

/// The id of the one document recalled for `query` (lexically), which must hold `text`.
pub fn recalled_id(call: &mut dyn FnMut(&Value) -> Value, query: &str, text: &str) -> String {
    let answer = call(&recall(query, "lexical"));
    let passages = passages(&answer);
    let (id, _) = passages
        .iter()
        .find(|(_, content)| content.contains(text))
        .unwrap_or_else(|| panic!("the worker's document is recalled: {passages:#?}"));
    id.clone()
}

/// A forgotten record is never shown again by the context tools of a `memory <db_args> serve` (stdio
/// MCP), on whichever backend `db_args` names: the context, the history tools, and a summary that
/// folded the record (withdrawn), while the log keeps every record.
pub async fn a_forgotten_record_is_never_shown_by_the_context_tools(db_args: &[&str]) {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};

    let command = tokio::process::Command::new(super::common::BINARY).configure(|command| {
        command
            .env_remove("MEMORY_DB")
            .env_remove("MEMORY_LOG")
            .args(db_args)
            // The threads name destinations of several users, as a trusted single-user host may.
            .args(["serve", "--allow-any-namespace"]);
    });
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the server starts");
    let client = ().serve(transport).await.expect("the MCP handshake");
    let call = async |tool: &str, arguments: Value| -> Value {
        let Value::Object(arguments) = arguments else {
            panic!("an object");
        };
        let result = client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await
            .expect("a result");
        let content = result.structured_content.expect("structured content");
        assert_eq!(result.is_error, Some(false), "{tool}: {content:#}");
        content
    };
    let thread = "forget-window";
    let secret = "My bank PIN is K-4417 and my password is hunter2.";
    let mut sequences = Vec::new();
    for record in [
        user_record(secret, 1),
        json!({"speaker": "assistant", "body": {"kind": "tool_call", "call_id": "c1", "name": "vault", "arguments": {"item": "pin"}}}),
        json!({"speaker": "vault", "body": {"kind": "tool_result", "call_id": "c1", "output": "stored K-4417", "is_error": false}}),
        json!({"speaker": "assistant", "body": {"kind": "assistant_message", "text": "Stored."}}),
        user_record("What is the weather like?", 5),
    ] {
        let answer = call("memory_thread_append", append(thread, record)).await;
        sequences.push(answer["sequence"].as_u64().expect("sequence"));
    }
    let compact = json!({"thread": thread, "measured_input_tokens": 900, "keep_tokens": 0});
    let plan = call("memory_compact", compact.clone()).await["plan"].clone();
    let mut commit = compact.clone();
    commit["summary"] = json!("PIN K-4417, stored.");
    commit["through"] = plan["through"].clone();
    let folded = call("memory_compact", commit).await;
    assert_eq!(folded["compaction"]["outcome"], "folded", "{folded:#}");
    for sequence in [sequences[0], sequences[2]] {
        call("memory_thread_forget", forget(thread, sequence)).await;
    }
    let leaks = |value: &Value| {
        let text = value.to_string();
        text.contains("K-4417") || text.contains("hunter2")
    };
    let context = call(
        "memory_context",
        json!({"thread": thread, "budget": 4000, "memory": false}),
    )
    .await;
    assert!(!leaks(&context), "{context:#}");
    assert_eq!(
        context["view"]["summary_withdrawn"],
        json!([folded["sequence"]])
    );
    let messages = context["messages"].as_array().expect("messages");
    let first: Value = serde_json::from_str(messages[0]["content"].as_str().expect("text"))
        .expect("a placeholder");
    assert_eq!(first["forgotten"], true);
    assert_eq!(first["sequence"], sequences[0]);
    assert_eq!(messages[1]["tool_calls"][0]["id"], "c1");
    assert_eq!(messages[2]["tool_call_id"], "c1");
    let page = call(
        "memory_history_read",
        json!({"thread": thread, "include": ["system", "operational"]}),
    )
    .await;
    assert!(!leaks(&page), "{page:#}");
    let records = page["records"].as_array().expect("records");
    assert_eq!(records.len(), 6, "the log keeps every record");
    assert_eq!(records[0]["forgotten"], true);
    assert_eq!(records[2]["call_id"], "c1");
    assert_eq!(records[5]["summary_withdrawn"], true);
    for text in ["K-4417", "hunter2"] {
        let found = call(
            "memory_history_search",
            json!({"thread": thread, "text": text, "include": ["system", "operational"]}),
        )
        .await;
        assert_eq!(found["matches"], json!([]), "{found:#}");
    }
    client.cancel().await.expect("the session ends");
}
