//! Processor output keeps source-to-target references under its thread record's source id: forgetting,
//! deleting or editing a record withdraws what the processor wrote from it (human corrections survive),
//! a forget during an in-flight pass never becomes recallable, and keyed contributions (target key and
//! action) replay their saved command unchanged and rebase only on a definite conflict.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::future::Future;
use std::sync::Arc;

use memory_core::activity::{
    IntentOutcome, NewRecord, ProgressStore, RecordBody, RememberingStore, Sequence, SourceId,
    ThreadDestination, ThreadId, ThreadLog, ThreadRecord, WorkerId,
};
use memory_core::{
    DocumentId, EpochMillis, ManualClock, MemoryContent, MemoryKey, MemoryReader, MemoryWrite,
    MemoryWriter, NamespaceAddress, OperationId,
};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use remembering::app::{KeepLatestMerger, RemoveSourceAttributions};
use remembering::hooks::HookFuture;
use remembering::sources::{SourceEvent, SourceEvents, SuppressingReader};
use remembering::thread_sources::{StatementProposals, ThreadRecordLoader};
use remembering::worker::{Application, IntentPassLimits, IntentWorker};
use remembering::{
    ActivityProcessor, ActivityProcessorParts, ApplicationError, Contribution, Extraction,
    PassHooks, PassLimits, PassPoint, RecordExtractor, RememberingError, StatementExtractor,
    UnboundThreads,
};
use support::{
    CallAt, Fault, FaultyWriter, processor, scopes, statement_key, statement_namespace, temp_db,
    thread,
};

const LIMITS: PassLimits = PassLimits {
    max_records: 100,
    page_size: 10,
    timeout_ms: 1_000,
    lease_ms: 2_000,
};

/// Polls a future that never waits (the in-memory store's) to completion inside a synchronous hook.
fn ready<T>(future: impl Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(value) => value,
        std::task::Poll::Pending => panic!("the in-memory store never waits"),
    }
}

/// Calls a closure at every pass point.
struct OnPoint<F>(F);

impl<F: Fn(PassPoint) + Send + Sync> PassHooks for OnPoint<F> {
    fn at(&self, point: PassPoint) -> HookFuture<'_> {
        (self.0)(point);
        Box::pin(std::future::ready(()))
    }
}

type Cleaner = IntentWorker<
    FaultyWriter,
    ThreadRecordLoader,
    StatementProposals,
    KeepLatestMerger,
    RemoveSourceAttributions,
>;

fn cleaner(path: &std::path::Path, writer: Arc<FaultyWriter>, clock: Arc<ManualClock>) -> Cleaner {
    IntentWorker::new(
        Arc::new(SqliteRememberingStore::open(path).unwrap()),
        writer,
        Application {
            loader: ThreadRecordLoader::new(Arc::new(SqliteThreadLog::open(path).unwrap())),
            extractor: StatementProposals::new(StatementExtractor::new()),
            merger: KeepLatestMerger,
            cleanup: RemoveSourceAttributions,
        },
        clock,
        WorkerId::new("cleaner").unwrap(),
        IntentPassLimits::default(),
    )
    .unwrap()
}

fn events(path: &std::path::Path, clock: Arc<ManualClock>) -> SourceEvents {
    SourceEvents::new(Arc::new(SqliteRememberingStore::open(path).unwrap()), clock)
}

fn suppressing(
    path: &std::path::Path,
    writer: Arc<FaultyWriter>,
) -> SuppressingReader<FaultyWriter> {
    SuppressingReader::new(
        writer,
        Arc::new(SqliteRememberingStore::open(path).unwrap()),
    )
}

fn human_put(key: &MemoryKey, expected: memory_core::Revision, text: &str) -> MemoryWrite {
    MemoryWrite::Put {
        key: key.clone(),
        operation_id: OperationId::new(format!("human-{text}")).unwrap(),
        expected_revision: Some(expected),
        locator: "human".to_owned(),
        content: MemoryContent::text(text),
        scopes: scopes(),
    }
}

#[tokio::test]
async fn forgetting_processed_records_withdraws_their_documents_and_keeps_human_corrections() {
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    log.append(&t, NewRecord::user("ana", "I live in Lisbon", 1))
        .unwrap();
    log.append(&t, NewRecord::user("ana", "I like tea", 2))
        .unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let worker = processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS);
    assert_eq!(worker.run_pass(&t).await.unwrap().receipts.len(), 2);
    let (lisbon, tea) = (
        statement_key(&t, "ana", "I live in Lisbon"),
        statement_key(&t, "ana", "I like tea"),
    );
    let written = writer.read(&tea).await.unwrap().unwrap();
    writer
        .inner
        .apply(human_put(&tea, written.revision, "Ana likes green tea"))
        .await
        .unwrap();

    let events = events(&db.path, clock.clone());
    events
        .record(
            &SourceId::thread_record(&t, Sequence::new(1)),
            &SourceEvent::Forget,
        )
        .unwrap();
    events
        .record(
            &SourceId::thread_record(&t, Sequence::new(2)),
            &SourceEvent::Deleted,
        )
        .unwrap();
    // Recall hides the forgotten contribution as soon as the forget is acknowledged.
    let reader = suppressing(&db.path, writer.clone());
    assert!(writer.read(&lisbon).await.unwrap().is_some());
    assert_eq!(reader.read(&lisbon).await.unwrap(), None);
    assert!(reader.read(&tea).await.unwrap().is_some());

    let report = cleaner(&db.path, writer.clone(), clock.clone())
        .run_pass()
        .await
        .unwrap();
    assert!(report.completed.contains(&IntentOutcome::Cleaned {
        withdrawn: 1,
        kept: 0
    }));
    assert!(report.completed.contains(&IntentOutcome::Cleaned {
        withdrawn: 0,
        kept: 1
    }));
    assert_eq!(writer.read(&lisbon).await.unwrap(), None);
    // The cleanup's tombstone says who withdrew the document: the worker.
    let sent = writer.sent.lock().unwrap().clone();
    assert!(
        sent.iter().any(|write| matches!(
            write,
            MemoryWrite::Withdraw { key, by: Some(by), .. }
                if *key == lisbon && by == memory_core::write::BY_WORKER
        )),
        "{sent:#?}"
    );
    let corrected = reader.read(&tea).await.unwrap().unwrap();
    assert_eq!(corrected.content.text, "Ana likes green tea");
}

#[tokio::test]
async fn a_forget_acknowledged_before_sending_means_the_command_is_never_sent() {
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    log.append(&t, NewRecord::user("ana", "my pin is 1234", 1))
        .unwrap();
    log.append(&t, NewRecord::user("ana", "forget me too", 2))
        .unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let events = events(&db.path, clock.clone());
    // Record 2 is forgotten before any pass: it is never extracted.
    events
        .record(
            &SourceId::thread_record(&t, Sequence::new(2)),
            &SourceEvent::Revoked,
        )
        .unwrap();
    let forget = SourceId::thread_record(&t, Sequence::new(1));
    let worker = processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS).with_hooks(
        Arc::new(CallAt::new(PassPoint::OutputSaved, 1, move || {
            events.record(&forget, &SourceEvent::Forget).unwrap();
        })),
    );
    let report = worker.run_pass(&t).await.unwrap();
    assert_eq!((report.processed, report.suppressed), (2, 2));
    assert!(writer.sent.lock().unwrap().is_empty(), "nothing was sent");
    assert_eq!(
        writer
            .read(&statement_key(&t, "ana", "my pin is 1234"))
            .await
            .unwrap(),
        None
    );
    let view = SqliteProgressStore::open(&db.path)
        .unwrap()
        .inspect(&worker.key(&t, 0).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!((view.cursor, view.pending), (Sequence::new(2), None));
}

#[tokio::test]
async fn a_forget_racing_the_write_is_never_recallable_and_its_cleanup_runs_again() {
    let db = temp_db();
    let t = thread("t");
    SqliteThreadLog::open(&db.path)
        .unwrap()
        .append(&t, NewRecord::user("ana", "my pin is 1234", 1))
        .unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let key = statement_key(&t, "ana", "my pin is 1234");
    let events = events(&db.path, clock.clone());
    let forget = SourceId::thread_record(&t, Sequence::new(1));
    let reader = Arc::new(suppressing(&db.path, writer.clone()));
    // The cleanup the forget admits runs before the write lands, and finds nothing to withdraw.
    let early_cleaner = cleaner(&db.path, writer.clone(), clock.clone());
    let (hook_writer, hook_reader) = (writer.clone(), reader.clone());
    let hook_key = key.clone();
    let checked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let window = checked.clone();
    let early = Arc::new(std::sync::Mutex::new(None));
    let early_report = early.clone();
    let worker = processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS).with_hooks(
        Arc::new(OnPoint(move |point| match point {
            PassPoint::BeforeApply => {
                events.record(&forget, &SourceEvent::Forget).unwrap();
                let report = ready(early_cleaner.run_pass()).unwrap();
                *early_report.lock().unwrap() = Some(report);
            }
            PassPoint::AfterApply => {
                assert!(ready(hook_writer.read(&hook_key)).unwrap().is_some());
                assert_eq!(ready(hook_reader.read(&hook_key)).unwrap(), None);
                window.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            _ => {}
        })),
    );
    let report = worker.run_pass(&t).await.unwrap();
    assert_eq!(report.receipts.len(), 1);
    assert!(checked.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(
        early.lock().unwrap().take().unwrap().completed,
        vec![IntentOutcome::Cleaned {
            withdrawn: 0,
            kept: 1
        }]
    );
    assert_eq!(reader.read(&key).await.unwrap(), None);
    // The landed write admitted the record's cleanup again; it withdraws the contribution.
    let report = cleaner(&db.path, writer.clone(), clock.clone())
        .run_pass()
        .await
        .unwrap();
    assert_eq!(
        report.completed,
        vec![IntentOutcome::Cleaned {
            withdrawn: 1,
            kept: 0
        }]
    );
    assert_eq!(writer.read(&key).await.unwrap(), None);
}

/// Puts what a user says about their home on `ana/home`; "forget my home" withdraws it.
struct HomeExtractor {
    namespace: NamespaceAddress,
}

impl HomeExtractor {
    fn new() -> Self {
        Self {
            namespace: NamespaceAddress::encode("people", 1, &serde_json::json!({"team": "x"}))
                .unwrap(),
        }
    }

    fn key() -> MemoryKey {
        MemoryKey {
            namespace: Self::new().namespace,
            id: DocumentId::new("ana/home").unwrap(),
        }
    }
}

impl RecordExtractor for HomeExtractor {
    fn extract(
        &self,
        record: &ThreadRecord,
        _previous: Option<&ThreadRecord>,
        _destination: &ThreadDestination,
        now: EpochMillis,
    ) -> Result<Extraction, ApplicationError> {
        let RecordBody::UserInput { text } = &record.record.body else {
            return Ok(Extraction::default());
        };
        let target = DocumentId::new("ana/home")?;
        if text == "forget my home" {
            return Ok(Extraction {
                contributions: vec![Contribution::withdraw(
                    self.namespace.clone(),
                    target,
                    "asked to forget",
                )],
                ..Extraction::default()
            });
        }
        let mut content = MemoryContent::text(text);
        content.extracted_at = now;
        content.recorded_at = now;
        content.attributions = vec![memory_core::MemoryAttribution {
            origin_id: format!("thread-record:{}", record.digest.as_str()),
            speaker: record.record.speaker.clone(),
            observers: Vec::new(),
            locator: record.locator(),
            activity_at: record.record.occurred_at,
            interpretation: "stated".to_owned(),
        }];
        Ok(Extraction {
            contributions: vec![Contribution::put_at(
                self.namespace.clone(),
                target,
                content,
                scopes(),
            )],
            ..Extraction::default()
        })
    }
}

fn home_processor(
    path: &std::path::Path,
    writer: Arc<FaultyWriter>,
    clock: Arc<ManualClock>,
    owner: &str,
) -> ActivityProcessor<FaultyWriter, HomeExtractor> {
    ActivityProcessor::new(ActivityProcessorParts {
        log: Arc::new(SqliteThreadLog::open(path).unwrap()),
        progress: Arc::new(SqliteProgressStore::open(path).unwrap()),
        references: Arc::new(SqliteRememberingStore::open(path).unwrap()),
        writer,
        extractor: HomeExtractor::new(),
        clock,
        processor: memory_core::activity::ProcessorId::new("homes").unwrap(),
        version: memory_core::activity::ProcessorVersion::new(1),
        owner: WorkerId::new(owner).unwrap(),
        limits: LIMITS,
        unbound: UnboundThreads::PerThread { scopes: scopes() },
    })
    .unwrap()
}

#[tokio::test]
async fn keyed_puts_and_withdrawals_replay_the_saved_command_after_a_lost_acknowledgement() {
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    for (index, text) in ["I live in Lisbon", "I moved to Porto"]
        .into_iter()
        .enumerate()
    {
        log.append(&t, NewRecord::user("ana", text, index as i64))
            .unwrap();
    }
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let worker = home_processor(&db.path, writer.clone(), clock.clone(), "a");
    worker.run_pass(&t).await.unwrap();
    let u = t;
    log.append(&u, NewRecord::user("ana", "I moved to Faro", 5))
        .unwrap();
    writer.inject(Fault::LoseAcknowledgement);
    let error = worker.run_pass(&u).await.unwrap_err();
    assert!(matches!(error, RememberingError::Memory(_)), "{error:?}");
    // Meanwhile the document moved on (the lost write landed): a command rebuilt from a fresh read
    // would carry another expected revision under the same operation id.
    clock.advance(5_000);
    let report = worker.run_pass(&u).await.unwrap();
    assert_eq!((report.reused_saved_output, report.rebases), (1, 0));
    let sent = writer.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 4);
    assert_eq!(
        sent[2], sent[3],
        "the retry sent the saved command unchanged"
    );
    let current = writer.read(&HomeExtractor::key()).await.unwrap().unwrap();
    assert_eq!(current.content.text, "I moved to Faro");
    assert_eq!(writer.inner.history().len(), 3, "each record landed once");

    log.append(&u, NewRecord::user("ana", "forget my home", 9))
        .unwrap();
    let report = worker.run_pass(&u).await.unwrap();
    assert_eq!(report.receipts.len(), 1);
    assert_eq!(writer.read(&HomeExtractor::key()).await.unwrap(), None);
    assert!(matches!(
        writer.sent.lock().unwrap().last(),
        Some(MemoryWrite::Withdraw { .. })
    ));
}

#[tokio::test]
async fn a_conflict_with_a_human_correction_rebases_the_saved_contribution_and_keeps_it() {
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    log.append(&t, NewRecord::user("ana", "I live in Lisbon", 1))
        .unwrap();
    log.append(
        &t,
        NewRecord::user("ana", "I live in Lisbon, near the river", 2),
    )
    .unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let human_writer = writer.clone();
    let extractions = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = extractions.clone();
    let worker = home_processor(&db.path, writer.clone(), clock.clone(), "a").with_hooks(Arc::new(
        OnPoint(move |point| match point {
            PassPoint::Extracted => {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            // Record 2's command is saved against revision 1; a human corrects the document first.
            PassPoint::OutputSaved if counted.load(std::sync::atomic::Ordering::SeqCst) == 2 => {
                let current = ready(human_writer.read(&HomeExtractor::key()))
                    .unwrap()
                    .unwrap();
                ready(human_writer.inner.apply(human_put(
                    &HomeExtractor::key(),
                    current.revision,
                    "Ana lives in Lisbon (Alfama)",
                )))
                .unwrap();
            }
            _ => {}
        }),
    ));
    let report = worker.run_pass(&t).await.unwrap();
    assert_eq!(report.rebases, 1);
    assert_eq!(
        extractions.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "no second extraction"
    );
    let current = writer.read(&HomeExtractor::key()).await.unwrap().unwrap();
    assert_eq!(current.content.text, "Ana lives in Lisbon (Alfama)");
    assert!(
        current
            .content
            .attributions
            .iter()
            .any(|attribution| attribution.locator.starts_with("thread-record/2/")),
        "the rebased write added record 2's attribution"
    );
    let sent = writer.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 3);
    assert_ne!(
        sent[1].operation_id(),
        sent[2].operation_id(),
        "a rebase takes a new operation id"
    );
    // The rebased command kept a reference: forgetting record 2 hides and cleans up its revision.
    let store = SqliteRememberingStore::open(&db.path).unwrap();
    let references = store
        .references(&SourceId::thread_record(&t, Sequence::new(2)), 0, 10)
        .unwrap();
    assert!(
        references
            .iter()
            .any(|(_, reference)| reference.revision == current.revision)
    );
}

#[tokio::test]
async fn thread_record_intents_load_records_and_other_sources_stay_queued() {
    use memory_core::activity::{Intent, IntentState, SourceRevision};

    let db = temp_db();
    let t = thread("t");
    let record = SqliteThreadLog::open(&db.path)
        .unwrap()
        .append(&t, NewRecord::user("ana", "I like tea", 1))
        .unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    let store = SqliteRememberingStore::open(&db.path).unwrap();
    let target = MemoryKey {
        namespace: statement_namespace(&t),
        id: DocumentId::new("tea").unwrap(),
    };
    let remember = |source: SourceId, revision: SourceRevision| Intent::Remember {
        source,
        revision,
        target: target.clone(),
        scopes: scopes(),
    };
    let from_record = remember(
        SourceId::thread_record(&t, Sequence::new(1)),
        SourceRevision::of_record(&record.digest),
    );
    store.admit(&from_record, 10, 1_000).unwrap();
    let report = cleaner(&db.path, writer.clone(), clock.clone())
        .run_pass()
        .await
        .unwrap();
    assert!(matches!(
        report.completed[..],
        [IntentOutcome::Written { .. }]
    ));
    let written = writer.read(&target).await.unwrap().unwrap();
    assert_eq!(written.content.text, "I like tea");

    let foreign = remember(
        SourceId::new("note/1").unwrap(),
        SourceRevision::new("r1").unwrap(),
    );
    let queued = store.admit(&foreign, 10, 1_000).unwrap();
    let error = cleaner(&db.path, writer.clone(), clock.clone())
        .run_pass()
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            RememberingError::Application {
                operation: "load_source",
                ..
            }
        ),
        "{error:?}"
    );
    let view = store.inspect_intent(&queued.id).unwrap().unwrap();
    assert_eq!(view.state, IntentState::Queued, "never dropped silently");
}

/// Appends `records` (speaker, text) to a fresh thread `t` and runs one statement pass over them.
async fn remembered(
    db: &support::TempDb,
    records: &[(&str, &str)],
) -> (
    ThreadId,
    Arc<FaultyWriter>,
    Arc<ManualClock>,
    Vec<ThreadRecord>,
) {
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    let appended = records
        .iter()
        .enumerate()
        .map(|(index, (speaker, text))| {
            let record = if *speaker == "assistant" {
                NewRecord::assistant(*text, index as i64)
            } else {
                NewRecord::user(*speaker, *text, index as i64)
            };
            log.append(&t, record).unwrap()
        })
        .collect();
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS)
        .run_pass(&t)
        .await
        .unwrap();
    (t, writer, clock, appended)
}

fn origins(document: &memory_core::MemoryDocument) -> Vec<String> {
    document
        .content
        .attributions
        .iter()
        .map(|attribution| attribution.origin_id.clone())
        .collect()
}

fn origin(record: &ThreadRecord) -> String {
    format!("thread-record:{}", record.digest.as_str())
}

async fn forget_and_clean(
    db: &support::TempDb,
    writer: &Arc<FaultyWriter>,
    clock: &Arc<ManualClock>,
    record: &ThreadRecord,
) -> Vec<IntentOutcome> {
    events(&db.path, clock.clone())
        .record(
            &SourceId::thread_record(&record.thread, record.sequence),
            &SourceEvent::Forget,
        )
        .unwrap();
    cleaner(&db.path, writer.clone(), clock.clone())
        .run_pass()
        .await
        .unwrap()
        .completed
}

const KEPT: IntentOutcome = IntentOutcome::Cleaned {
    withdrawn: 0,
    kept: 1,
};
const WITHDRAWN: IntentOutcome = IntentOutcome::Cleaned {
    withdrawn: 1,
    kept: 0,
};

#[tokio::test]
async fn only_statements_become_memories_each_with_its_evidence_and_counts() {
    let db = temp_db();
    let text = "Hey Mel! Good to see you! How have you been? I went to a LGBTQ support group \
                yesterday and it was so powerful. Can you remind me where I live?";
    let (t, writer, _clock, records) = remembered(
        &db,
        &[
            ("caroline", text),
            ("assistant", "I went to a LGBTQ support group yesterday."),
            ("caroline", "..."),
        ],
    )
    .await;
    let kept = "I went to a LGBTQ support group yesterday and it was so powerful.";
    let history = writer.inner.history();
    assert_eq!(history.len(), 1, "one statement, one memory");
    let document = &history[0];
    assert_eq!(document.key, statement_key(&t, "caroline", kept));
    assert_eq!(document.content.text, kept);
    let start = text.find(kept).unwrap();
    assert_eq!(
        document.content.metadata["evidence"],
        serde_json::json!({"start": start, "end": start + kept.len()})
    );
    assert_eq!(document.content.metadata["kind"], "statement");
    assert_eq!(
        document.content.metadata["record_digest"],
        records[0].digest.as_str()
    );
    assert_eq!(origins(document), vec![origin(&records[0])]);
    assert_eq!(
        document.content.attributions[0].locator,
        records[0].locator()
    );
    assert_eq!(document.content.attributions[0].interpretation, "stated");
    // The counts reach `memory status`: nothing was dropped silently.
    let totals = SqliteProgressStore::open(&db.path)
        .unwrap()
        .extraction_totals()
        .unwrap();
    assert_eq!(totals.kept, 1);
    assert_eq!(
        totals.dropped,
        [("empty", 1), ("greeting", 3), ("request", 1)]
            .into_iter()
            .map(|(reason, count)| (reason.to_owned(), count))
            .collect()
    );
}

#[tokio::test]
async fn restatements_are_one_memory_and_forgetting_one_keeps_the_other() {
    let db = temp_db();
    let (t, writer, clock, records) = remembered(
        &db,
        &[
            ("ana", "Hi! I moved to Lisbon last spring."),
            ("assistant", "Nice! I moved to Lisbon last spring too."),
            (
                "ana",
                "i moved to  Lisbon last spring!! Where should I eat?",
            ),
            ("bea", "I moved to Lisbon last spring."),
        ],
    )
    .await;
    let key = statement_key(&t, "ana", "I moved to Lisbon last spring.");
    let document = writer.read(&key).await.unwrap().unwrap();
    assert_eq!(document.content.text, "I moved to Lisbon last spring.");
    assert_eq!(
        origins(&document),
        vec![origin(&records[0]), origin(&records[2])],
        "the restatement is one more attribution, not a second document"
    );
    assert_eq!(
        document.content.metadata["evidence"],
        serde_json::json!({"start": 4, "end": 34}),
        "the evidence of the first statement"
    );
    let mut keys: Vec<_> = writer
        .inner
        .history()
        .into_iter()
        .map(|document| document.key)
        .collect();
    keys.dedup();
    assert_eq!(
        keys,
        vec![
            key.clone(),
            statement_key(&t, "bea", "I moved to Lisbon last spring.")
        ],
        "another speaker's statement is a memory of its own"
    );

    // Forgetting the restatement hides the revision it wrote until cleanup takes its attribution
    // out; the statement stays, witnessed by the first record.
    let reader = suppressing(&db.path, writer.clone());
    events(&db.path, clock.clone())
        .record(
            &SourceId::thread_record(&t, records[2].sequence),
            &SourceEvent::Forget,
        )
        .unwrap();
    assert_eq!(reader.read(&key).await.unwrap(), None);
    let outcomes = cleaner(&db.path, writer.clone(), clock.clone())
        .run_pass()
        .await
        .unwrap()
        .completed;
    // Two documents kept: ana's statement loses this record's attribution, and bea's, which answered
    // this record's question, loses the question.
    assert_eq!(
        outcomes,
        vec![IntentOutcome::Cleaned {
            withdrawn: 0,
            kept: 2
        }]
    );
    let document = reader.read(&key).await.unwrap().unwrap();
    assert_eq!(document.content.text, "I moved to Lisbon last spring.");
    assert_eq!(origins(&document), vec![origin(&records[0])]);
    assert_eq!(
        document.content.metadata["record_digest"],
        records[0].digest.as_str()
    );

    // Forgetting the last witness withdraws it.
    assert_eq!(
        forget_and_clean(&db, &writer, &clock, &records[0]).await,
        vec![WITHDRAWN]
    );
    assert_eq!(writer.read(&key).await.unwrap(), None);
}

#[tokio::test]
async fn forgetting_the_first_statement_keeps_the_restatement() {
    let db = temp_db();
    let (t, writer, clock, records) =
        remembered(&db, &[("ana", "I like tea."), ("ana", "I like tea")]).await;
    let key = statement_key(&t, "ana", "I like tea");
    assert_eq!(
        forget_and_clean(&db, &writer, &clock, &records[0]).await,
        vec![KEPT]
    );
    let document = suppressing(&db.path, writer.clone())
        .read(&key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(document.content.text, "I like tea.");
    assert_eq!(origins(&document), vec![origin(&records[1])]);
    assert!(
        !document.content.metadata.contains_key("record_digest")
            && !document.content.metadata.contains_key("evidence"),
        "nothing names the forgotten record any more"
    );
    assert_eq!(
        forget_and_clean(&db, &writer, &clock, &records[1]).await,
        vec![WITHDRAWN]
    );
    assert_eq!(writer.read(&key).await.unwrap(), None);
}

#[tokio::test]
async fn a_corrected_statement_survives_forgetting_its_witnesses() {
    let db = temp_db();
    let (t, writer, clock, records) = remembered(&db, &[("ana", "I like tea.")]).await;
    let key = statement_key(&t, "ana", "I like tea");
    let written = writer.read(&key).await.unwrap().unwrap();
    // A human corrects the text and keeps its provenance.
    let mut corrected = written.content.clone();
    corrected.text = "Ana likes green tea.".to_owned();
    writer
        .inner
        .apply(MemoryWrite::Put {
            key: key.clone(),
            operation_id: OperationId::new("human-correction").unwrap(),
            expected_revision: Some(written.revision),
            locator: "human".to_owned(),
            content: corrected,
            scopes: scopes(),
        })
        .await
        .unwrap();
    assert_eq!(
        forget_and_clean(&db, &writer, &clock, &records[0]).await,
        vec![KEPT]
    );
    let document = writer.read(&key).await.unwrap().unwrap();
    assert_eq!(document.content.text, "Ana likes green tea.");
    assert!(document.content.attributions.is_empty());
}

#[tokio::test]
async fn a_forgotten_statement_said_again_is_remembered_again() {
    let db = temp_db();
    let (t, writer, clock, records) = remembered(&db, &[("ana", "I like tea.")]).await;
    let first = statement_key(&t, "ana", "I like tea");
    assert_eq!(
        forget_and_clean(&db, &writer, &clock, &records[0]).await,
        vec![WITHDRAWN]
    );
    let log = SqliteThreadLog::open(&db.path).unwrap();
    let again = log
        .append(&t, NewRecord::user("ana", "I like tea", 5))
        .unwrap();
    let report = processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS)
        .run_pass(&t)
        .await
        .unwrap();
    assert_eq!((report.kept, report.receipts.len()), (1, 1));
    assert_eq!(
        writer.read(&first).await.unwrap(),
        None,
        "withdrawal is terminal"
    );
    let next = MemoryKey {
        namespace: first.namespace.clone(),
        id: DocumentId::new(format!("{}~1", first.id.as_str())).unwrap(),
    };
    let document = writer.read(&next).await.unwrap().unwrap();
    assert_eq!(origins(&document), vec![origin(&again)]);
    // Said once more: the new incarnation gains the attribution, and a retry of the same record (a
    // new processor version, say) adds nothing.
    let third = log
        .append(&t, NewRecord::user("ana", "i like TEA!", 6))
        .unwrap();
    processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS)
        .run_pass(&t)
        .await
        .unwrap();
    let document = writer.read(&next).await.unwrap().unwrap();
    assert_eq!(origins(&document), vec![origin(&again), origin(&third)]);
    let revisions = writer.inner.history().len();
    let version_two = ActivityProcessor::new(ActivityProcessorParts {
        log: Arc::new(SqliteThreadLog::open(&db.path).unwrap()),
        progress: Arc::new(SqliteProgressStore::open(&db.path).unwrap()),
        references: Arc::new(SqliteRememberingStore::open(&db.path).unwrap()),
        writer: writer.clone(),
        extractor: StatementExtractor::new(),
        clock: clock.clone(),
        processor: memory_core::activity::ProcessorId::new("statements").unwrap(),
        version: memory_core::activity::ProcessorVersion::new(2),
        owner: WorkerId::new("b").unwrap(),
        limits: LIMITS,
        unbound: UnboundThreads::PerThread { scopes: scopes() },
    })
    .unwrap();
    let report = version_two.run_pass(&t).await.unwrap();
    assert_eq!((report.processed, report.kept), (3, 2));
    assert_eq!(
        writer.inner.history().len(),
        revisions,
        "statements already attested are not written again"
    );
    // The record's references include the command that met the withdrawn first incarnation.
    let outcomes = forget_and_clean(&db, &writer, &clock, &again).await;
    assert!(
        matches!(outcomes[..], [IntentOutcome::Cleaned { withdrawn: 0, .. }]),
        "{outcomes:?}"
    );
    assert_eq!(
        origins(&writer.read(&next).await.unwrap().unwrap()),
        vec![origin(&third)]
    );
}

#[tokio::test]
async fn an_attestation_that_meets_a_concurrent_write_reads_and_merges_again() {
    let db = temp_db();
    let (t, writer, clock, records) = remembered(&db, &[("ana", "I like tea.")]).await;
    let key = statement_key(&t, "ana", "I like tea");
    let restated = SqliteThreadLog::open(&db.path)
        .unwrap()
        .append(&t, NewRecord::user("ana", "I like tea!", 7))
        .unwrap();
    let human_writer = writer.clone();
    let human_key = key.clone();
    // The restatement's command is saved against the first revision; a human edits it first.
    let worker = processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS).with_hooks(
        Arc::new(CallAt::new(PassPoint::OutputSaved, 1, move || {
            let current = ready(human_writer.read(&human_key)).unwrap().unwrap();
            let mut content = current.content.clone();
            content.text = "Ana likes tea a lot.".to_owned();
            content
                .metadata
                .insert("reviewed".to_owned(), serde_json::json!(true));
            ready(human_writer.inner.apply(MemoryWrite::Put {
                key: human_key.clone(),
                operation_id: OperationId::new("human-edit").unwrap(),
                expected_revision: Some(current.revision),
                locator: "human".to_owned(),
                content,
                scopes: scopes(),
            }))
            .unwrap();
        })),
    );
    let report = worker.run_pass(&t).await.unwrap();
    assert_eq!((report.rebases, report.receipts.len()), (1, 1));
    let document = writer.read(&key).await.unwrap().unwrap();
    assert_eq!(document.content.text, "Ana likes tea a lot.");
    assert_eq!(document.content.metadata["reviewed"], true);
    assert_eq!(
        origins(&document),
        vec![origin(&records[0]), origin(&restated)]
    );
    let sent = writer.sent.lock().unwrap().clone();
    assert_ne!(
        sent[sent.len() - 2].operation_id(),
        sent[sent.len() - 1].operation_id(),
        "a rebase takes a new operation id"
    );
}

#[tokio::test]
async fn a_cleanup_that_meets_a_conflict_reads_and_decides_again() {
    let db = temp_db();
    let (t, writer, clock, records) =
        remembered(&db, &[("ana", "I like tea."), ("ana", "I like tea")]).await;
    writer.inject(Fault::Conflict);
    assert_eq!(
        forget_and_clean(&db, &writer, &clock, &records[1]).await,
        vec![KEPT]
    );
    let sent = writer.sent.lock().unwrap().clone();
    assert_eq!(sent[sent.len() - 2], sent[sent.len() - 1], "decided again");
    let document = writer
        .read(&statement_key(&t, "ana", "I like tea"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(origins(&document), vec![origin(&records[0])]);
}

#[tokio::test]
async fn a_statement_answering_a_question_carries_it_until_the_question_is_forgotten() {
    let db = temp_db();
    let (t, writer, clock, records) = remembered(
        &db,
        &[
            ("mel", "What flowers do you grow?"),
            ("caroline", "They're called Peruvian lilies. Thanks!"),
            ("caroline", "I also grow basil."),
        ],
    )
    .await;
    let key = statement_key(&t, "caroline", "They're called Peruvian lilies.");
    let reader = suppressing(&db.path, writer.clone());
    let document = reader.read(&key).await.unwrap().unwrap();
    assert_eq!(
        document.content.text,
        "They're called Peruvian lilies. (answering: What flowers do you grow?)"
    );
    assert_eq!(
        document.content.metadata["answering"],
        serde_json::json!({
            "text": "What flowers do you grow?",
            "speaker": "mel",
            "thread": "t",
            "sequence": 1,
            "record_digest": records[0].digest.as_str(),
        })
    );
    assert_eq!(
        origins(&document),
        vec![origin(&records[1])],
        "the asker is no witness"
    );
    // The same speaker going on answers nothing: no question of someone else's just before.
    let basil = statement_key(&t, "caroline", "I also grow basil.");
    let basil = reader.read(&basil).await.unwrap().unwrap();
    assert_eq!(basil.content.text, "I also grow basil.");
    assert!(!basil.content.metadata.contains_key("answering"));

    // Forgetting the question hides the answer at once, then takes the question out of it.
    events(&db.path, clock.clone())
        .record(
            &SourceId::thread_record(&t, records[0].sequence),
            &SourceEvent::Forget,
        )
        .unwrap();
    assert_eq!(
        reader.read(&key).await.unwrap(),
        None,
        "hidden until cleaned"
    );
    let outcomes = cleaner(&db.path, writer.clone(), clock.clone())
        .run_pass()
        .await
        .unwrap()
        .completed;
    assert_eq!(outcomes, vec![KEPT]);
    let document = reader.read(&key).await.unwrap().unwrap();
    assert_eq!(document.content.text, "They're called Peruvian lilies.");
    assert!(!document.content.metadata.contains_key("answering"));
    assert_eq!(origins(&document), vec![origin(&records[1])]);

    // The answer's own record still decides the rest: forgetting it withdraws the statement.
    assert_eq!(
        forget_and_clean(&db, &writer, &clock, &records[1]).await,
        vec![WITHDRAWN]
    );
    assert_eq!(writer.read(&key).await.unwrap(), None);
}

#[tokio::test]
async fn forgetting_an_answer_that_carries_its_question_withdraws_it() {
    let db = temp_db();
    let (t, writer, clock, records) = remembered(
        &db,
        &[
            ("assistant", "Where are you moving?"),
            ("ana", "Lisbon, next month."),
        ],
    )
    .await;
    let key = statement_key(&t, "ana", "Lisbon, next month.");
    let document = writer.read(&key).await.unwrap().unwrap();
    assert_eq!(
        document.content.text,
        "Lisbon, next month. (answering: Where are you moving?)"
    );
    assert_eq!(
        forget_and_clean(&db, &writer, &clock, &records[1]).await,
        vec![WITHDRAWN],
        "still what its only witness stated"
    );
    assert_eq!(writer.read(&key).await.unwrap(), None);
}

#[tokio::test]
async fn a_forgotten_question_is_no_context_for_the_answer_remembered_after() {
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    let asked = log
        .append(&t, NewRecord::user("mel", "What flowers do you grow?", 1))
        .unwrap();
    log.append(
        &t,
        NewRecord::user("caroline", "Peruvian lilies mostly.", 2),
    )
    .unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    events(&db.path, clock.clone())
        .record(
            &SourceId::thread_record(&t, asked.sequence),
            &SourceEvent::Forget,
        )
        .unwrap();
    processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS)
        .run_pass(&t)
        .await
        .unwrap();
    let key = statement_key(&t, "caroline", "Peruvian lilies mostly.");
    let document = writer.read(&key).await.unwrap().unwrap();
    assert_eq!(document.content.text, "Peruvian lilies mostly.");
    assert!(!document.content.metadata.contains_key("answering"));
}

#[tokio::test]
async fn an_answer_remembered_in_a_later_pass_still_carries_the_question() {
    let db = temp_db();
    let t = thread("t");
    let log = SqliteThreadLog::open(&db.path).unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    log.append(&t, NewRecord::assistant("Where are you moving?", 1))
        .unwrap();
    let pass = || processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS);
    pass().run_pass(&t).await.unwrap();
    log.append(&t, NewRecord::user("ana", "Lisbon, next month.", 2))
        .unwrap();
    pass().run_pass(&t).await.unwrap();
    let key = statement_key(&t, "ana", "Lisbon, next month.");
    let document = writer.read(&key).await.unwrap().unwrap();
    assert_eq!(
        document.content.text,
        "Lisbon, next month. (answering: Where are you moving?)"
    );
}

#[tokio::test]
async fn a_restatement_in_another_thread_keeps_the_first_question_named_by_its_own_thread() {
    let db = temp_db();
    let log = SqliteThreadLog::open(&db.path).unwrap();
    let destination = ThreadDestination::new(
        memory_core::activity::destination::user_namespace("caroline").unwrap(),
        scopes(),
    )
    .unwrap();
    let (first, second) = (thread("first"), thread("second"));
    let append = |thread: &ThreadId, speaker: &str, text: &str, at: i64| {
        log.append_to(
            thread,
            Some(&destination),
            NewRecord::user(speaker, text, at),
        )
        .unwrap()
    };
    let asked = append(&first, "mel", "What flowers do you grow?", 1);
    append(&first, "caroline", "Peruvian lilies mostly.", 2);
    // The other thread's first record sits at the same sequence as the question.
    let other = append(&second, "mel", "I love lilies.", 3);
    append(&second, "caroline", "Peruvian lilies mostly.", 4);
    let clock = Arc::new(ManualClock::new(1_000));
    let writer = Arc::new(FaultyWriter::new(clock.clone()));
    for thread in [&first, &second] {
        processor(&db.path, writer.clone(), clock.clone(), "a", LIMITS)
            .run_pass(thread)
            .await
            .unwrap();
    }
    let key = MemoryKey {
        namespace: destination.namespace().clone(),
        id: remembering::extract::statement_document_id("caroline", "Peruvian lilies mostly.")
            .unwrap(),
    };
    let text = |document: Option<memory_core::MemoryDocument>| {
        document.map(|document| document.content.text)
    };
    let reader = suppressing(&db.path, writer.clone());
    let asked_text = "Peruvian lilies mostly. (answering: What flowers do you grow?)";
    assert_eq!(
        text(reader.read(&key).await.unwrap()).as_deref(),
        Some(asked_text)
    );
    // Forgetting the other thread's record at the same sequence touches nothing of the question.
    assert_eq!(other.sequence, asked.sequence);
    forget_and_clean(&db, &writer, &clock, &other).await;
    assert_eq!(
        text(reader.read(&key).await.unwrap()).as_deref(),
        Some(asked_text)
    );
    // Forgetting the question, in its own thread, takes it out of the attested statement.
    forget_and_clean(&db, &writer, &clock, &asked).await;
    assert_eq!(
        text(reader.read(&key).await.unwrap()).as_deref(),
        Some("Peruvian lilies mostly.")
    );
}
