//! Admission, intent passes, rebases on conflict, lost acknowledgements and source withdrawal.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use memory_core::activity::{
    ActivityError, Intent, IntentOutcome, IntentState, RememberingStore, SourceId, SourceRevision,
    WorkerId,
};
use memory_core::{
    DocumentId, ManualClock, MemoryContent, MemoryError, MemoryKey, MemoryReader, MemoryWrite,
    MemoryWriter, NamespaceAddress, OperationId,
};
use memory_sqlite::remembering_store::SqliteRememberingStore;
use remembering::admission::{Admission, Submission};
use remembering::app::{
    Extractor, KeepLatestMerger, LoadedSource, SourceLoader, WithdrawOwnRevision,
};
use remembering::sources::{SourceEvent, SourceEvents, SuppressingReader};
use remembering::worker::{Application, IntentPassLimits, IntentWorker};
use remembering::{ApplicationError, PassPoint, RememberingError};
use support::{CallAt, Fault, FaultyWriter, scopes, temp_db};

/// Polls a future that never waits (the in-memory store's) to completion inside a synchronous hook.
fn ready<T>(future: impl Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(value) => value,
        std::task::Poll::Pending => panic!("the in-memory store never waits"),
    }
}

#[derive(Default, Clone)]
struct Sources(Arc<Mutex<HashMap<String, (String, String)>>>);

impl Sources {
    fn set(&self, id: &str, revision: &str, text: &str) {
        self.0
            .lock()
            .unwrap()
            .insert(id.to_owned(), (revision.to_owned(), text.to_owned()));
    }
}

impl SourceLoader for Sources {
    async fn load(&self, source: &SourceId) -> Result<Option<LoadedSource>, ApplicationError> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .get(source.as_str())
            .map(|(revision, text)| LoadedSource {
                revision: SourceRevision::new(revision.clone()).unwrap(),
                body: serde_json::json!(text),
            }))
    }
}

#[derive(Default)]
struct CountingExtractor(std::sync::atomic::AtomicUsize);

impl Extractor for CountingExtractor {
    async fn extract(
        &self,
        _source: &SourceId,
        loaded: &LoadedSource,
        now: i64,
    ) -> Result<Option<MemoryContent>, ApplicationError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let text = loaded.body.as_str().unwrap_or_default();
        if text.is_empty() {
            return Ok(None);
        }
        let mut content = MemoryContent::text(text);
        content.extracted_at = now;
        Ok(Some(content))
    }
}

/// Calls a closure at every pass point.
struct OnPoint<F>(F);

impl<F: Fn(PassPoint) + Send + Sync> remembering::PassHooks for OnPoint<F> {
    fn at(&self, point: PassPoint) -> remembering::hooks::HookFuture<'_> {
        (self.0)(point);
        Box::pin(std::future::ready(()))
    }
}

struct Fixture {
    _db: support::TempDb,
    clock: Arc<ManualClock>,
    store: Arc<SqliteRememberingStore>,
    memory: Arc<FaultyWriter>,
    sources: Sources,
    extractor: Arc<CountingExtractor>,
}

type Worker =
    IntentWorker<FaultyWriter, Sources, ArcExtractor, KeepLatestMerger, WithdrawOwnRevision>;

struct ArcExtractor(Arc<CountingExtractor>);

impl Extractor for ArcExtractor {
    fn extract(
        &self,
        source: &SourceId,
        loaded: &LoadedSource,
        now: i64,
    ) -> impl Future<Output = Result<Option<MemoryContent>, ApplicationError>> + Send {
        self.0.extract(source, loaded, now)
    }
}

impl Fixture {
    fn new() -> Self {
        let db = temp_db();
        let clock = Arc::new(ManualClock::new(1_000));
        Self {
            store: Arc::new(SqliteRememberingStore::open(&db.path).unwrap()),
            memory: Arc::new(FaultyWriter::new(clock.clone())),
            sources: Sources::default(),
            extractor: Arc::new(CountingExtractor::default()),
            clock,
            _db: db,
        }
    }

    fn worker(&self) -> Worker {
        IntentWorker::new(
            self.store.clone(),
            self.memory.clone(),
            Application {
                loader: self.sources.clone(),
                extractor: ArcExtractor(self.extractor.clone()),
                merger: KeepLatestMerger,
                cleanup: WithdrawOwnRevision,
            },
            self.clock.clone(),
            WorkerId::new("w").unwrap(),
            IntentPassLimits::default(),
        )
        .unwrap()
    }

    fn admission(&self) -> Admission {
        Admission::new(self.store.clone(), self.clock.clone())
    }

    fn events(&self) -> SourceEvents {
        SourceEvents::new(self.store.clone(), self.clock.clone())
    }
}

fn target(id: &str) -> MemoryKey {
    MemoryKey {
        namespace: NamespaceAddress::encode("notes", 1, &serde_json::json!({"user": "u1"}))
            .unwrap(),
        id: DocumentId::new(id).unwrap(),
    }
}

fn remember(source: &str, revision: &str, id: &str) -> Intent {
    Intent::Remember {
        source: SourceId::new(source).unwrap(),
        revision: SourceRevision::new(revision).unwrap(),
        target: target(id),
        scopes: scopes(),
    }
}

fn human_put(
    key: &MemoryKey,
    expected: Option<memory_core::Revision>,
    text: &str,
    op: &str,
) -> MemoryWrite {
    MemoryWrite::Put {
        key: key.clone(),
        operation_id: OperationId::new(op).unwrap(),
        expected_revision: expected,
        locator: "human".to_owned(),
        content: MemoryContent::text(text),
        scopes: scopes(),
    }
}

#[tokio::test]
async fn admission_at_capacity_refuses_evicts_nothing_and_parks_foreground_work() {
    let fixture = Fixture::new();
    let admission = fixture.admission().with_capacity(2);
    let first = admission.admit(&remember("s1", "r1", "d1")).unwrap();
    admission.admit(&remember("s2", "r1", "d2")).unwrap();
    assert!(
        admission
            .admit(&remember("s1", "r1", "d1"))
            .unwrap()
            .already_admitted
    );
    let refused = admission.admit(&remember("s3", "r1", "d3")).unwrap_err();
    assert!(matches!(refused, ActivityError::AtCapacity { capacity: 2 }));
    assert_eq!(fixture.store.open_intents().unwrap(), 2);
    let view = fixture.store.inspect_intent(&first.id).unwrap().unwrap();
    assert_eq!(view.state, IntentState::Queued, "nothing was evicted");

    assert!(matches!(
        admission.submit(&remember("s3", "r1", "d3")),
        Submission::Parked {
            reason: "at-capacity"
        }
    ));
    assert_eq!(admission.retry_outbox(10).unwrap().admitted, 0);
    for (source, text) in [("s1", "alpha"), ("s2", "beta"), ("s3", "gamma")] {
        fixture.sources.set(source, "r1", text);
    }
    fixture.worker().run_pass().await.unwrap();
    assert_eq!(admission.retry_outbox(10).unwrap().admitted, 1);
    fixture.worker().run_pass().await.unwrap();
    let gamma = fixture.memory.read(&target("d3")).await.unwrap().unwrap();
    assert_eq!(gamma.content.text, "gamma");
}

#[tokio::test]
async fn lost_acknowledgement_resends_the_saved_command_unchanged() {
    let fixture = Fixture::new();
    fixture.sources.set("s", "r1", "the sky is blue");
    let queued = fixture
        .admission()
        .admit(&remember("s", "r1", "d"))
        .unwrap();
    fixture.memory.inject(Fault::LoseAcknowledgement);
    let error = fixture.worker().run_pass().await.unwrap_err();
    assert!(matches!(error, RememberingError::Memory(_)));
    let view = fixture.store.inspect_intent(&queued.id).unwrap().unwrap();
    assert!(view.command.is_some() && view.state == IntentState::Queued);
    fixture.clock.advance(60_000);
    let report = fixture.worker().run_pass().await.unwrap();
    assert!(matches!(
        report.completed[..],
        [IntentOutcome::Written { .. }]
    ));
    let sent = fixture.memory.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0], sent[1]);
    assert_eq!(fixture.memory.inner.history().len(), 1);
    assert_eq!(
        fixture
            .extractor
            .0
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

#[tokio::test]
async fn conflict_rebases_the_saved_proposal_and_keeps_the_human_correction() {
    let fixture = Fixture::new();
    let key = target("d");
    let original = ready(fixture.memory.inner.apply(human_put(
        &key,
        None,
        "Ana lives in Lisbon",
        "h1",
    )))
    .unwrap();
    fixture.sources.set("s", "r1", "Ana lives in Lisbon");
    fixture
        .admission()
        .admit(&remember("s", "r1", "d"))
        .unwrap();
    let memory = fixture.memory.clone();
    let correction_key = key.clone();
    let base = original.receipt.document.revision.clone();
    let worker = fixture.worker().with_hooks(Arc::new(CallAt::new(
        PassPoint::CommandSaved,
        1,
        move || {
            ready(memory.inner.apply(human_put(
                &correction_key,
                Some(base.clone()),
                "Ana lives in Porto",
                "h2",
            )))
            .unwrap();
        },
    )));
    let report = worker.run_pass().await.unwrap();
    assert!(matches!(
        report.completed[..],
        [IntentOutcome::Written { .. }]
    ));
    let current = fixture.memory.read(&key).await.unwrap().unwrap();
    assert_eq!(
        current.content.text, "Ana lives in Porto",
        "the human correction survives"
    );
    let sent = fixture.memory.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 2);
    assert_ne!(
        sent[0].operation_id(),
        sent[1].operation_id(),
        "a definite conflict takes a new id"
    );
    assert_eq!(
        fixture
            .extractor
            .0
            .load(std::sync::atomic::Ordering::SeqCst),
        1,
        "no second extraction"
    );
}

#[tokio::test]
async fn operation_conflict_is_an_error_never_a_new_command() {
    let fixture = Fixture::new();
    fixture.sources.set("s", "r1", "fact");
    let queued = fixture
        .admission()
        .admit(&remember("s", "r1", "d"))
        .unwrap();
    let memory = fixture.memory.clone();
    let store = fixture.store.clone();
    let id = queued.id.clone();
    let worker = fixture.worker().with_hooks(Arc::new(CallAt::new(
        PassPoint::CommandSaved,
        1,
        move || {
            let saved = store.inspect_intent(&id).unwrap().unwrap().command.unwrap();
            let MemoryWrite::Put {
                key, operation_id, ..
            } = saved.write
            else {
                unreachable!()
            };
            let mut other = human_put(&target("elsewhere"), None, "other", "x");
            if let MemoryWrite::Put {
                operation_id: reused,
                key: other_key,
                ..
            } = &mut other
            {
                *reused = operation_id;
                other_key.namespace = key.namespace;
            }
            ready(memory.inner.apply(other)).unwrap();
        },
    )));
    let error = worker.run_pass().await.unwrap_err();
    assert!(
        matches!(
            error,
            RememberingError::Memory(MemoryError::OperationConflict { .. })
        ),
        "{error:?}"
    );
    assert_eq!(fixture.memory.sent.lock().unwrap().len(), 1);
    let view = fixture.store.inspect_intent(&queued.id).unwrap().unwrap();
    assert!(matches!(view.outcome, Some(IntentOutcome::Failed { .. })));
}

#[tokio::test]
async fn forget_during_an_in_flight_pass_is_never_recallable_and_cleanup_withdraws_it() {
    let fixture = Fixture::new();
    fixture.sources.set("s", "r1", "secret plan");
    fixture
        .admission()
        .admit(&remember("s", "r1", "d"))
        .unwrap();
    let events = fixture.events();
    let reader = Arc::new(SuppressingReader::new(
        fixture.memory.clone(),
        fixture.store.clone(),
    ));
    let memory = fixture.memory.clone();
    let window_checked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let checked = window_checked.clone();
    let hook_reader = reader.clone();
    let worker = fixture
        .worker()
        .with_hooks(Arc::new(OnPoint(move |point| match point {
            PassPoint::CommandSaved => {
                events
                    .record(&SourceId::new("s").unwrap(), &SourceEvent::Forget)
                    .unwrap();
            }
            PassPoint::AfterApply => {
                // The write landed after the forget was acknowledged: the plain store shows it, recall must not.
                assert!(ready(memory.read(&target("d"))).unwrap().is_some());
                assert_eq!(ready(hook_reader.read(&target("d"))).unwrap(), None);
                checked.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            _ => {}
        })));
    worker.run_pass().await.unwrap();
    assert!(window_checked.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(reader.read(&target("d")).await.unwrap(), None);
    // The cleanup admitted by the forget ran in the same pass and withdrew the contribution.
    assert_eq!(fixture.memory.read(&target("d")).await.unwrap(), None);
}

#[tokio::test]
async fn cleanup_keeps_human_corrections_and_edits_admit_the_new_revision() {
    let fixture = Fixture::new();
    fixture.sources.set("s", "r1", "Bea likes tea");
    fixture.sources.set("t", "r1", "Bea likes jazz");
    let admission = fixture.admission();
    admission.admit(&remember("s", "r1", "d1")).unwrap();
    admission.admit(&remember("t", "r1", "d2")).unwrap();
    fixture.worker().run_pass().await.unwrap();
    let written = fixture.memory.read(&target("d1")).await.unwrap().unwrap();
    ready(fixture.memory.inner.apply(human_put(
        &target("d1"),
        Some(written.revision),
        "Bea likes green tea",
        "h1",
    )))
    .unwrap();
    let events = fixture.events();
    events
        .record(&SourceId::new("s").unwrap(), &SourceEvent::Deleted)
        .unwrap();
    events
        .record(
            &SourceId::new("t").unwrap(),
            &SourceEvent::Edited {
                previous: SourceRevision::new("r1").unwrap(),
            },
        )
        .unwrap();
    fixture.worker().run_pass().await.unwrap();
    let kept = fixture.memory.read(&target("d1")).await.unwrap().unwrap();
    assert_eq!(kept.content.text, "Bea likes green tea");
    assert_eq!(fixture.memory.read(&target("d2")).await.unwrap(), None);
    // An intent for a revision that changed before extraction is invalidated and its successor admitted.
    fixture.sources.set("t", "r3", "Bea likes blues");
    admission.admit(&remember("t", "r2", "d2")).unwrap();
    let report = fixture.worker().run_pass().await.unwrap();
    assert_eq!(report.completed[0], IntentOutcome::Invalidated);
    assert!(matches!(
        report.completed[1],
        IntentOutcome::TargetWithdrawn
    ));
}
