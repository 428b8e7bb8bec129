//! The async/blocking rule of `memory_cli::blocking`, checked: every store call the services make runs
//! on tokio's blocking pool, never on an async worker.
//!
//! The services run over [`Probe`], a SQLite store whose every port (documents, change feed, lexical
//! search, listing, thread log, progress, remembering store) records a call made on a thread other than
//! the blocking pool's. The runtime is current-thread, so its one async worker is the test's own thread
//! and the pool's threads carry a name nothing else has. A service that calls a store inline (a new
//! operation, a forgotten wrapper) fails here; a hand-written `spawn_blocking` fails clippy
//! (`clippy.toml`). Vector stores are probed where they are called, by semantic-index's
//! `tests/vector_boundary.rs` (every engine and indexer call goes through `engine::vector_call`).

#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::{Arc, Mutex};

use memory_cli::database::{Following, Store};
use memory_cli::destination::DestinationDefaults;
use memory_cli::grants::Grant;
use memory_cli::list::ListArguments;
use memory_cli::recall_service::RecallService;
use memory_cli::refusal::Refusal;
use memory_cli::semantic::IndexOptions;
use memory_cli::service::{MemoryService, Operation, RawArguments};
use memory_cli::simple::{Defaults, ForgetArguments, RememberArguments};
use memory_cli::thread::{ThreadOperation, ThreadService, ThreadTools};
use memory_core::activity::{
    ActivityError, Admitted, Claim, ExtractionNote, ExtractionTotals, Intent, IntentClaim,
    IntentId, IntentLease, IntentOutcome, IntentView, Lease, LogEntry, NewRecord, PendingOutput,
    PendingThread, ProgressKey, ProgressStore, ProgressView, RememberingStore, SavedCommand,
    Sequence, SourceId, SourceReference, SourceRevision, ThreadBinding, ThreadDestination,
    ThreadId, ThreadLog, ThreadOverview, ThreadRecord, ThreadSuppressions, WorkerId,
};
use memory_core::document::EpochMillis;
use memory_core::{
    Change, ChangeFeed, ChangeSequence, DocumentId, LexicalHit, LexicalSearch, ListCursor,
    ListPage, MemoryAccess, MemoryContent, MemoryDocument, MemoryError, MemoryKey, MemoryLister,
    MemoryReader, MemoryScope, MemoryWrite, MemoryWriter, NamespaceAddress, Revision, WriteOutcome,
    WrittenNeighbours,
};
use memory_sqlite::SqliteStore;
use memory_sqlite::vectors::SqliteVectorStore;
use serde_json::{Value, json};

/// The name of the blocking pool's threads (and of no other thread).
const POOL_THREAD: &str = "blocking-boundary-pool";

/// The ports called off the blocking pool, in call order.
#[derive(Debug, Clone, Default)]
struct Violations(Arc<Mutex<Vec<String>>>);

impl Violations {
    fn check(&self, port: &str) {
        if std::thread::current().name() != Some(POOL_THREAD) {
            self.0.lock().unwrap().push(port.to_owned());
        }
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A SQLite store that records every port call made on an async worker.
struct Probe {
    store: SqliteStore,
    violations: Violations,
}

impl MemoryReader for Probe {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        self.violations.check("read");
        self.store.read(key).await
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        self.violations.check("read_many");
        self.store.read_many(keys).await
    }
}

impl MemoryWriter for Probe {
    async fn apply(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        self.violations.check("apply");
        self.store.apply(write).await
    }
}

impl ChangeFeed for Probe {
    async fn head(&self) -> Result<ChangeSequence, MemoryError> {
        self.violations.check("head");
        self.store.head().await
    }

    async fn changes_since(
        &self,
        after: ChangeSequence,
        limit: usize,
    ) -> Result<Vec<Change>, MemoryError> {
        self.violations.check("changes_since");
        self.store.changes_since(after, limit).await
    }
}

impl LexicalSearch for Probe {
    async fn search(
        &self,
        access: &MemoryAccess,
        query: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>, MemoryError> {
        self.violations.check("search");
        self.store.search(access, query, limit).await
    }

    async fn written_neighbours(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
        reach: usize,
    ) -> Result<Vec<WrittenNeighbours>, MemoryError> {
        self.violations.check("written_neighbours");
        self.store.written_neighbours(access, ids, reach).await
    }
}

impl memory_core::CorrectionIndex for Probe {
    async fn corrections_of(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
    ) -> Result<Vec<Vec<DocumentId>>, MemoryError> {
        self.violations.check("corrections_of");
        self.store.corrections_of(access, ids).await
    }
}

impl MemoryLister for Probe {
    async fn list(
        &self,
        namespace: &NamespaceAddress,
        after: Option<ListCursor>,
        limit: usize,
    ) -> Result<ListPage, MemoryError> {
        self.violations.check("list");
        self.store.list(namespace, after, limit).await
    }
}

impl memory_core::RevisionHistory for Probe {
    async fn revisions(
        &self,
        key: &MemoryKey,
        limit: usize,
    ) -> Result<Vec<memory_core::StoredRevision>, MemoryError> {
        self.violations.check("revisions");
        self.store.revisions(key, limit).await
    }
}

/// Forwards each listed method of an activity port to `self.inner`, checking the thread first.
macro_rules! probed {
    ($( fn $name:ident(&self $(, $arg:ident : $ty:ty)*) -> $answer:ty; )*) => {
        $(
            fn $name(&self $(, $arg: $ty)*) -> $answer {
                self.violations.check(stringify!($name));
                self.inner.$name($($arg),*)
            }
        )*
    };
}

struct ProbedLog {
    inner: Arc<dyn ThreadLog>,
    violations: Violations,
}

impl ThreadLog for ProbedLog {
    probed! {
        fn append_to(&self, thread: &ThreadId, destination: Option<&ThreadDestination>, record: NewRecord) -> Result<ThreadRecord, ActivityError>;
        fn inspect_tail(&self, thread: &ThreadId) -> Result<Sequence, ActivityError>;
        fn read_entries(&self, thread: &ThreadId, after: Sequence, limit: usize) -> Result<Vec<LogEntry>, ActivityError>;
        fn read_page(&self, thread: &ThreadId, after: Sequence, limit: usize) -> Result<Vec<ThreadRecord>, ActivityError>;
        fn binding(&self, thread: &ThreadId) -> Result<Option<ThreadBinding>, ActivityError>;
        fn rebind(&self, thread: &ThreadId, destination: &ThreadDestination) -> Result<ThreadBinding, ActivityError>;
        fn threads(&self, after: Option<&ThreadId>, limit: usize) -> Result<Vec<ThreadId>, ActivityError>;
        fn pending_threads(&self, after: Option<&ThreadId>, limit: usize) -> Result<Vec<PendingThread>, ActivityError>;
        fn mark_all_pending(&self) -> Result<u64, ActivityError>;
        fn settle(&self, thread: &ThreadId, tail: Sequence) -> Result<bool, ActivityError>;
        fn park(&self, thread: &ThreadId, sequence: Sequence, kind: &str) -> Result<(), ActivityError>;
        fn overview(&self) -> Result<ThreadOverview, ActivityError>;
    }
}

struct ProbedRemembering {
    inner: Arc<dyn RememberingStore>,
    violations: Violations,
}

impl RememberingStore for ProbedRemembering {
    probed! {
        fn admit(&self, intent: &Intent, capacity: u64, now: EpochMillis) -> Result<Admitted, ActivityError>;
        fn claim_next(&self, owner: &WorkerId, lease_ms: u64, now: EpochMillis) -> Result<Option<IntentClaim>, ActivityError>;
        fn save_proposal(&self, lease: &IntentLease, proposal: &MemoryContent, now: EpochMillis) -> Result<(), ActivityError>;
        fn save_command(&self, lease: &IntentLease, command: &SavedCommand, reference: &SourceReference, now: EpochMillis) -> Result<(), ActivityError>;
        fn complete(&self, lease: &IntentLease, outcome: &IntentOutcome, successor: Option<&Intent>, now: EpochMillis) -> Result<(), ActivityError>;
        fn release(&self, lease: &IntentLease, now: EpochMillis) -> Result<(), ActivityError>;
        fn suppress(&self, source: &SourceId, revision: Option<&SourceRevision>, now: EpochMillis) -> Result<IntentId, ActivityError>;
        fn thread_suppressions(&self, thread: &ThreadId) -> Result<ThreadSuppressions, ActivityError>;
        fn is_suppressed(&self, source: &SourceId, revision: &SourceRevision) -> Result<bool, ActivityError>;
        fn save_references(&self, references: &[SourceReference]) -> Result<(), ActivityError>;
        fn references(&self, source: &SourceId, after: u64, limit: usize) -> Result<Vec<(u64, SourceReference)>, ActivityError>;
        fn suppressed_contributions(&self, documents: &[(MemoryKey, Revision)]) -> Result<Vec<bool>, ActivityError>;
        fn inspect_intent(&self, id: &IntentId) -> Result<Option<IntentView>, ActivityError>;
        fn open_intents(&self) -> Result<u64, ActivityError>;
        fn outbox_put(&self, intent: &Intent, capacity: u64, now: EpochMillis) -> Result<(), ActivityError>;
        fn outbox_peek(&self, limit: usize) -> Result<Vec<(u64, Intent)>, ActivityError>;
        fn outbox_admit(&self, row: u64, capacity: u64, now: EpochMillis) -> Result<Admitted, ActivityError>;
    }
}

struct ProbedProgress {
    inner: Arc<dyn ProgressStore>,
    violations: Violations,
}

impl ProgressStore for ProbedProgress {
    probed! {
        fn claim(&self, key: &ProgressKey, owner: &WorkerId, lease_ms: u64, now: EpochMillis) -> Result<Claim, ActivityError>;
        fn save_pending(&self, lease: &Lease, pending: &PendingOutput, now: EpochMillis) -> Result<(), ActivityError>;
        fn replace_pending(&self, lease: &Lease, pending: &PendingOutput, now: EpochMillis) -> Result<(), ActivityError>;
        fn advance(&self, lease: &Lease, to: Sequence, now: EpochMillis) -> Result<(), ActivityError>;
        fn release(&self, lease: &Lease, now: EpochMillis) -> Result<(), ActivityError>;
        fn inspect(&self, key: &ProgressKey) -> Result<Option<ProgressView>, ActivityError>;
        fn inspect_all(&self, limit: usize) -> Result<Vec<ProgressView>, ActivityError>;
        fn note_extraction(&self, key: &ProgressKey, sequence: Sequence, note: &ExtractionNote) -> Result<(), ActivityError>;
        fn extraction_totals(&self) -> Result<ExtractionTotals, ActivityError>;
    }
}

impl Store for Probe {
    type Vectors = SqliteVectorStore;
    type Feed = memory_cli::feed::WakingFeed<Probe>;
    const FEED_WAITS: bool = true;

    fn open_vectors(&self) -> Result<Arc<Self::Vectors>, Refusal> {
        self.store.open_vectors()
    }

    fn open_thread_log(&self) -> Result<Arc<dyn ThreadLog>, Refusal> {
        self.violations.check("open_thread_log");
        Ok(Arc::new(ProbedLog {
            inner: self.store.open_thread_log()?,
            violations: self.violations.clone(),
        }))
    }

    fn open_remembering(&self) -> Result<Arc<dyn RememberingStore>, Refusal> {
        self.violations.check("open_remembering");
        Ok(Arc::new(ProbedRemembering {
            inner: self.store.open_remembering()?,
            violations: self.violations.clone(),
        }))
    }

    fn open_progress(&self) -> Result<Arc<dyn ProgressStore>, Refusal> {
        self.violations.check("open_progress");
        Ok(Arc::new(ProbedProgress {
            inner: self.store.open_progress()?,
            violations: self.violations.clone(),
        }))
    }

    async fn follow(store: Arc<Self>) -> Result<Following<Self::Feed>, Refusal> {
        let commits = memory_cli::feed::CommitSignal::new();
        Ok(Following {
            feed: Arc::new(memory_cli::feed::WakingFeed::new(store, commits.clone())),
            commits: Some(commits),
        })
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name(POOL_THREAD)
        .build()
        .unwrap()
}

fn probe(directory: &tempfile::TempDir) -> (Arc<Probe>, Violations) {
    let violations = Violations::default();
    let store = SqliteStore::open(directory.path().join("memory.sqlite")).unwrap();
    let probe = Arc::new(Probe {
        store,
        violations: violations.clone(),
    });
    (probe, violations)
}

async fn run(service: &MemoryService<Probe>, operation: Operation, arguments: Value) -> Value {
    service
        .execute_as(
            &Grant::local("test", None),
            operation,
            RawArguments::Json(arguments),
        )
        .await
        .unwrap_or_else(|refusal| panic!("{operation:?}: {refusal}"))
}

#[test]
fn every_store_call_of_the_operations_runs_on_the_blocking_pool() {
    let directory = tempfile::tempdir().unwrap();
    let (store, violations) = probe(&directory);
    let service = MemoryService::new(
        Arc::clone(&store),
        RecallService::lexical_only(Arc::clone(&store)),
    );
    runtime().block_on(async {
        let put = run(
            &service,
            Operation::Put,
            common::put("tea", "op-1", None, "Ana prefers green tea."),
        )
        .await;
        assert_eq!(put["replayed"], false);
        let got = run(&service, Operation::Get, common::get("tea")).await;
        assert_eq!(got["document"]["id"], "tea", "{got}");
        let mut with_history = common::get("tea");
        with_history["revisions"] = json!(5);
        let got = run(&service, Operation::Get, with_history).await;
        assert_eq!(got["revisions"].as_array().map(Vec::len), Some(1), "{got}");
        for mode in ["lexical", "recent"] {
            let recalled = run(
                &service,
                Operation::Recall,
                common::recall("green tea", mode),
            )
            .await;
            assert_eq!(
                recalled["passages"].as_array().unwrap().len(),
                1,
                "{mode}: {recalled}"
            );
        }
        let synced = run(&service, Operation::Sync, json!({})).await;
        assert_eq!(synced["indexed"], 1);
        let namespace = serde_json::from_value(common::namespace()).unwrap();
        let listed = memory_cli::list::list(
            &service,
            &namespace,
            None,
            ListArguments {
                cursor: None,
                limit: Some(10),
            },
        )
        .await
        .unwrap();
        assert_eq!(listed.documents.len(), 1);
        let revision = put["revision"].as_str().unwrap();
        run(
            &service,
            Operation::Withdraw,
            common::withdraw("tea", "op-2", revision),
        )
        .await;

        let defaults = Defaults::new(namespace, MemoryScope::new("assistant").unwrap()).unwrap();
        let everything = memory_cli::grants::Grant::everything("test", None);
        let remembered = memory_cli::simple::remember(
            &service,
            &defaults,
            &everything,
            RememberArguments {
                text: "Bob drinks coffee.".to_owned(),
                id: Some("coffee".to_owned()),
                expected_revision: None,
                speaker: None,
                metadata: None,
            },
        )
        .await
        .unwrap();
        assert!(!remembered.replayed);
        memory_cli::simple::forget(
            &service,
            &defaults,
            &everything,
            ForgetArguments {
                id: "coffee".to_owned(),
                reason: "asked".to_owned(),
            },
        )
        .await
        .unwrap();
    });
    assert_eq!(violations.take(), Vec::<String>::new());
}

#[test]
fn every_store_call_of_the_thread_operations_and_status_runs_on_the_blocking_pool() {
    let directory = tempfile::tempdir().unwrap();
    let (store, violations) = probe(&directory);
    runtime().block_on(async {
        let defaults = DestinationDefaults {
            user: Some("ana".to_owned()),
            ..DestinationDefaults::default()
        };
        // The server's tools open the thread stores on their first call.
        let tools = ThreadTools::new(Arc::clone(&store), defaults);
        let grant = Grant::local("test", None);
        let appended = tools
            .execute_as(
                &grant,
                ThreadOperation::Append,
                RawArguments::Json(json!({
                    "thread": "chat-1",
                    "record": {"speaker": "ana", "body": {"kind": "user_input", "text": "I live in Lisbon."}}
                })),
            )
            .await
            .unwrap();
        assert_eq!(appended["sequence"], 1);
        let forgotten = tools
            .execute_as(
                &grant,
                ThreadOperation::Forget,
                RawArguments::Json(json!({"thread": "chat-1", "sequence": 1, "reason": "asked"})),
            )
            .await
            .unwrap();
        assert_eq!(forgotten["sequence"], 1);

        let service = memory_cli::blocking::blocking({
            let store = Arc::clone(&store);
            move || ThreadService::open(&*store)
        })
        .await
        .unwrap()
        .unwrap();
        let address = serde_json::from_value::<memory_core::DynamicNamespace>(common::namespace())
            .unwrap()
            .address()
            .unwrap();
        let destination =
            ThreadDestination::new(address, vec![MemoryScope::new("assistant").unwrap()]).unwrap();
        let rebound = service
            .rebind(ThreadId::new("chat-1").unwrap(), destination)
            .await
            .unwrap();
        assert_eq!(rebound.generation, 1, "moved once");

        let vectors = store.open_vectors().unwrap();
        let status = memory_cli::status::status(Arc::clone(&store), vectors, IndexOptions::default())
            .await
            .unwrap();
        assert_eq!(status.threads.pending, 1);

        // The feed the server's indexer follows.
        let Following { feed, .. } = Probe::follow(Arc::clone(&store)).await.unwrap();
        assert_eq!(feed.head().await.unwrap(), ChangeSequence::ZERO);
        assert!(feed.changes_since(ChangeSequence::ZERO, 10).await.unwrap().is_empty());
    });
    assert_eq!(violations.take(), Vec::<String>::new());
}

#[test]
fn the_probe_catches_a_store_call_on_an_async_worker() {
    let directory = tempfile::tempdir().unwrap();
    let (store, violations) = probe(&directory);
    runtime().block_on(async {
        store.head().await.unwrap();
        store.open_thread_log().unwrap().overview().unwrap();
    });
    assert_eq!(violations.take(), ["head", "open_thread_log", "overview"]);
}
