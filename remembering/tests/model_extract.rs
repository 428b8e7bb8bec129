//! The model extractor through the activity processor, with a scripted model: what the user said
//! literally is kept and attributed to the quoted record; every other proposal is counted by rule;
//! one call covers a batch; transient failures defer, wrong answers park, `--fallback statements`
//! extracts statements instead; a saved proposal is replayed after a crash, never asked again.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use memory_core::activity::{
    NewRecord, ProcessorId, ProcessorVersion, ProgressStore, ThreadLog, WorkerId,
};
use memory_core::recall::corrections::CorrectionLink;
use memory_core::{ManualClock, MemoryDocument, MemoryReader};
use memory_model::{
    CallFailure, ChatAnswer, ChatFuture, ChatModel, ChatRequest, ModelError, TokenUsage,
};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use remembering::corrections::{Resemblance, Resembling, ResemblingFuture};
use remembering::model_extract::ModelExtractor;
use remembering::{
    ActivityProcessor, ActivityProcessorParts, PassLimits, PassPoint, PassStop, RememberingError,
    UnboundThreads,
};
use support::{FaultyWriter, PauseAt, scopes, statement_key, temp_db, thread};

const LIMITS: PassLimits = PassLimits {
    max_records: 100,
    page_size: 10,
    timeout_ms: 10_000,
    lease_ms: 20_000,
};

/// A model answering from a script, recording what it was asked.
#[derive(Debug, Default)]
struct Scripted {
    answers: Mutex<VecDeque<Result<String, ModelError>>>,
    asked: Mutex<Vec<ChatRequest>>,
}

impl Scripted {
    fn new(answers: impl IntoIterator<Item = Result<String, ModelError>>) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.into_iter().collect()),
            asked: Mutex::new(Vec::new()),
        })
    }

    fn calls(&self) -> usize {
        self.asked.lock().unwrap().len()
    }
}

impl ChatModel for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn complete<'a>(&'a self, request: &'a ChatRequest) -> ChatFuture<'a> {
        self.asked.lock().unwrap().push(request.clone());
        let answer = self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| panic!("the model was asked more than its script: {request:?}"));
        // A failure costs what a cut answer costs: the tokens were generated.
        let usage = TokenUsage {
            prompt: 100,
            completion: 20,
        };
        Box::pin(std::future::ready(
            answer
                .map(|content| ChatAnswer {
                    content,
                    usage,
                    attempts: 1,
                    latency_ms: 7,
                    structured: true,
                })
                .map_err(|error| CallFailure {
                    error,
                    usage,
                    attempts: 1,
                    latency_ms: 7,
                }),
        ))
    }
}

/// Shows the model fixed memories.
struct Shown(Vec<MemoryDocument>);

impl Resemblance for Shown {
    fn resembling<'a>(
        &'a self,
        _: &'a memory_core::activity::ThreadDestination,
        _: &'a str,
        _: usize,
    ) -> ResemblingFuture<'a> {
        Box::pin(std::future::ready(Ok(self
            .0
            .iter()
            .cloned()
            .map(Resembling::by_words)
            .collect())))
    }
}

fn processor(
    path: &std::path::Path,
    writer: Arc<FaultyWriter>,
    clock: Arc<ManualClock>,
    extractor: ModelExtractor,
) -> ActivityProcessor<FaultyWriter, ModelExtractor> {
    ActivityProcessor::new(ActivityProcessorParts {
        log: Arc::new(SqliteThreadLog::open(path).unwrap()),
        progress: Arc::new(SqliteProgressStore::open(path).unwrap()),
        references: Arc::new(SqliteRememberingStore::open(path).unwrap()),
        writer,
        extractor,
        clock,
        processor: ProcessorId::new("model").unwrap(),
        version: ProcessorVersion::new(1),
        owner: WorkerId::new("w").unwrap(),
        limits: LIMITS,
        unbound: UnboundThreads::PerThread { scopes: scopes() },
    })
    .unwrap()
}

fn answer(memories: serde_json::Value) -> Result<String, ModelError> {
    Ok(serde_json::json!({ "memories": memories }).to_string())
}

fn memory(text: &str, record: u64, quote: &str) -> serde_json::Value {
    serde_json::json!({"text": text, "evidence": [{"record": record, "quote": quote}], "corrects": null})
}

#[tokio::test]
async fn one_call_covers_a_batch_and_only_literal_quotes_are_kept() {
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    log.append(&t, NewRecord::user("ana", "I moved to Madrid in 2024.", 1))
        .unwrap();
    log.append(&t, NewRecord::assistant("Nice! Do you like it?", 2))
        .unwrap();
    log.append(
        &t,
        NewRecord::user("ana", "Yes, and I work as a luthier.", 3),
    )
    .unwrap();
    let model = Scripted::new([answer(serde_json::json!([
        memory("Ana moved to Madrid in 2024.", 1, "I moved to Madrid in 2024."),
        memory("Ana works as a luthier.", 3, "I work as a luthier."),
        // An invented quote, an invented year, a quote of the assistant, a correction of nothing shown.
        memory("Ana moved to Porto.", 1, "I moved to Porto."),
        memory("Ana moved to Madrid in 2023.", 1, "I moved to Madrid in 2024."),
        memory("Ana likes it.", 2, "Do you like it?"),
        {"text": "Ana moved.", "evidence": [{"record": 1, "quote": "I moved to Madrid"}], "corrects": "s-nothing"},
    ]))]);
    let clock = Arc::new(ManualClock::new(10));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let pass = processor(
        &db.path,
        writer.clone(),
        clock,
        ModelExtractor::new(model.clone(), Some(Arc::new(Shown(Vec::new())))),
    )
    .run_pass(&t)
    .await
    .unwrap();
    assert_eq!(pass.processed, 3);
    assert_eq!(model.calls(), 1, "one call for the batch of three records");
    let asked = model.asked.lock().unwrap()[0].clone();
    assert!(
        asked
            .user
            .contains("[1] ana (user): I moved to Madrid in 2024.")
    );
    assert!(
        asked
            .user
            .contains("[3] ana (user): Yes, and I work as a luthier.")
    );
    // The schema bounds the answer for the batch's three records (a batch holds what the call
    // shows; the assistant's record too), so a decoder constrained by it cannot run on.
    let schema = &asked.schema.as_ref().expect("a schema").schema;
    let memories = &schema["properties"]["memories"];
    assert_eq!(memories["maxItems"], 6, "{schema}");
    assert_eq!(memories["items"]["properties"]["text"]["maxLength"], 300);
    assert_eq!(memories["items"]["properties"]["evidence"]["maxItems"], 3);
    let madrid = writer
        .read(&statement_key(&t, "ana", "Ana moved to Madrid in 2024."))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(madrid.content.attributions[0].speaker, "ana");
    assert_eq!(madrid.content.metadata["kind"], "proposal");
    assert_eq!(madrid.content.metadata["model"], "scripted");
    let luthier = writer
        .read(&statement_key(&t, "ana", "Ana works as a luthier."))
        .await
        .unwrap()
        .unwrap();
    // The luthier memory is the third record's: its attribution points there.
    assert!(
        luthier.content.attributions[0]
            .locator
            .starts_with("thread-record/3/"),
        "{:?}",
        luthier.content.attributions
    );
    for rejected in [
        "Ana moved to Porto.",
        "Ana moved to Madrid in 2023.",
        "Ana likes it.",
        "Ana moved.",
    ] {
        assert!(
            writer
                .read(&statement_key(&t, "ana", rejected))
                .await
                .unwrap()
                .is_none(),
            "{rejected}"
        );
    }
    let totals = SqliteProgressStore::open(&db.path)
        .unwrap()
        .extraction_totals()
        .unwrap();
    assert_eq!(totals.kept, 2);
    assert_eq!(totals.dropped.get("unsupported_quote"), Some(&2));
    assert_eq!(totals.dropped.get("unsupported_text"), Some(&1));
    assert_eq!(totals.dropped.get("unsupported_correction"), Some(&1));
    assert_eq!(totals.model.calls, 1);
    assert_eq!(totals.model.prompt_tokens, 100);
    assert_eq!(totals.model.completion_tokens, 20);
    assert_eq!(totals.model.latency_ms, 7);
}

#[tokio::test]
async fn a_correction_links_only_a_shown_memory_and_only_in_the_users_words() {
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    log.append(
        &t,
        NewRecord::user("ana", "Actually I moved to Madrid, not Lisbon.", 1),
    )
    .unwrap();
    let clock = Arc::new(ManualClock::new(10));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    // The memory it corrects, written first and shown to the model.
    let lisbon_key = statement_key(&t, "ana", "Ana lives in Lisbon.");
    use memory_core::MemoryWriter;
    writer
        .apply(memory_core::MemoryWrite::Put {
            key: lisbon_key.clone(),
            operation_id: memory_core::OperationId::new("lisbon").unwrap(),
            expected_revision: None,
            locator: "test".to_owned(),
            content: memory_core::MemoryContent::text("Ana lives in Lisbon."),
            scopes: scopes(),
        })
        .await
        .unwrap();
    let lisbon = writer.read(&lisbon_key).await.unwrap().unwrap();
    let model = Scripted::new([answer(serde_json::json!([{
        "text": "Ana moved to Madrid.",
        "evidence": [{"record": 1, "quote": "Actually I moved to Madrid, not Lisbon."}],
        "corrects": lisbon_key.id.as_str(),
    }]))]);
    processor(
        &db.path,
        writer.clone(),
        clock,
        ModelExtractor::new(model.clone(), Some(Arc::new(Shown(vec![lisbon.clone()])))),
    )
    .run_pass(&t)
    .await
    .unwrap();
    assert!(model.asked.lock().unwrap()[0].user.contains(&format!(
        "- {}: Ana lives in Lisbon.",
        lisbon_key.id.as_str()
    )));
    let madrid = writer
        .read(&statement_key(&t, "ana", "Ana moved to Madrid."))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        CorrectionLink::of(&madrid.content),
        Some(CorrectionLink {
            id: lisbon_key.id.clone(),
            revision: lisbon.revision.clone(),
        })
    );
}

#[tokio::test]
async fn a_transient_failure_defers_and_wrong_answers_park_unless_statements_stand_in() {
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    log.append(&t, NewRecord::user("ana", "I live in Porto.", 1))
        .unwrap();
    let clock = Arc::new(ManualClock::new(10));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    // Down: the pass fails, nothing advances, the thread is not parked.
    let model = Scripted::new([Err(ModelError::Server { status: 503 })]);
    let deferred = processor(
        &db.path,
        writer.clone(),
        clock.clone(),
        ModelExtractor::new(model.clone(), None),
    )
    .run_pass(&t)
    .await;
    assert!(
        matches!(deferred, Err(RememberingError::Deferred { .. })),
        "{deferred:?}"
    );
    assert!(log.overview().unwrap().parked.is_empty());
    // Two answers that are not the asked JSON: parked with kind `model`.
    let model = Scripted::new([
        Ok("I think Ana lives in Porto".to_owned()),
        Ok("{\"memories\": 3}".to_owned()),
    ]);
    let parked = processor(
        &db.path,
        writer.clone(),
        clock.clone(),
        ModelExtractor::new(model.clone(), None),
    )
    .run_pass(&t)
    .await
    .unwrap();
    assert_eq!(parked.stop, PassStop::Parked);
    assert_eq!(
        parked.parked.as_ref().map(|(_, kind)| kind.as_str()),
        Some("model")
    );
    assert_eq!(model.calls(), 2);
    assert_eq!(log.overview().unwrap().parked, [("model".to_owned(), 1)]);
    // With the statement fallback the statement is kept, counted as a fallback.
    let model = Scripted::new([Err(ModelError::Timeout { after_ms: 5 })]);
    let pass = processor(
        &db.path,
        writer.clone(),
        clock,
        ModelExtractor::new(model.clone(), None).with_statement_fallback(),
    )
    .run_pass(&t)
    .await
    .unwrap();
    assert_eq!(pass.processed, 1);
    assert!(
        writer
            .read(&statement_key(&t, "ana", "I live in Porto."))
            .await
            .unwrap()
            .is_some()
    );
    let totals = SqliteProgressStore::open(&db.path)
        .unwrap()
        .extraction_totals()
        .unwrap();
    assert_eq!(totals.model.fallbacks, 1);
    // The timed-out call before the fallback is a call, and its tokens and time are counted.
    assert_eq!(totals.model.calls, 1);
    assert_eq!(totals.model.prompt_tokens, 100);
    assert_eq!(totals.model.completion_tokens, 20);
    assert_eq!(totals.model.latency_ms, 7);
}

#[tokio::test]
async fn a_saved_proposal_is_replayed_after_a_crash_and_the_model_is_not_asked_again() {
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    log.append(&t, NewRecord::user("ana", "I keep bees on the roof.", 1))
        .unwrap();
    let clock = Arc::new(ManualClock::new(10));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let model = Scripted::new([answer(serde_json::json!([memory(
        "Ana keeps bees on the roof.",
        1,
        "I keep bees on the roof."
    )]))]);
    let pause = Arc::new(PauseAt::new(PassPoint::OutputSaved, 1));
    let crashed = processor(
        &db.path,
        writer.clone(),
        clock.clone(),
        ModelExtractor::new(model.clone(), None),
    )
    .with_hooks(pause.clone());
    // The worker dies after saving the proposal's command, before sending it.
    tokio::select! {
        _ = crashed.run_pass(&t) => panic!("the pass should stop at the saved output"),
        () = pause.paused.notified() => {}
    }
    drop(crashed);
    let key = statement_key(&t, "ana", "Ana keeps bees on the roof.");
    assert!(writer.read(&key).await.unwrap().is_none());
    clock.advance(i64::try_from(LIMITS.lease_ms).unwrap() + 1);
    // The next worker's model has nothing to say: it must not be asked.
    let silent = Scripted::new([]);
    let pass = processor(
        &db.path,
        writer.clone(),
        clock,
        ModelExtractor::new(silent.clone(), None),
    )
    .run_pass(&t)
    .await
    .unwrap();
    assert_eq!(pass.reused_saved_output, 1);
    assert_eq!(silent.calls(), 0);
    assert!(writer.read(&key).await.unwrap().is_some());
}
