//! Shared test fixtures: a temporary database, a fault-injecting memory writer and pausing hooks.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use memory_core::activity::{ProcessorId, ProcessorVersion, ThreadDestination, ThreadId, WorkerId};
use memory_core::{
    InMemoryStore, ManualClock, MemoryDocument, MemoryError, MemoryKey, MemoryReader, MemoryScope,
    MemoryWrite, MemoryWriter, NamespaceAddress, WriteOutcome,
};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use remembering::extract::statement_document_id;
use remembering::hooks::HookFuture;
use remembering::{
    ActivityProcessor, ActivityProcessorParts, PassHooks, PassLimits, PassPoint,
    StatementExtractor, UnboundThreads,
};

/// A fault to inject into the next write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Apply, then report a storage error (the acknowledgement is lost).
    LoseAcknowledgement,
    /// Do not apply; report a storage error.
    FailBefore,
    /// Do not apply; report a definite conflict, as if someone wrote first.
    Conflict,
}

/// A memory writer over an [`InMemoryStore`] that injects queued faults and counts calls.
#[derive(Debug)]
pub struct FaultyWriter {
    pub inner: InMemoryStore,
    faults: Mutex<VecDeque<Fault>>,
    pub sent: Mutex<Vec<MemoryWrite>>,
}

impl FaultyWriter {
    pub fn new(clock: Arc<ManualClock>) -> Self {
        Self {
            inner: InMemoryStore::with_clock(clock),
            faults: Mutex::new(VecDeque::new()),
            sent: Mutex::new(Vec::new()),
        }
    }

    pub fn inject(&self, fault: Fault) {
        self.faults.lock().unwrap().push_back(fault);
    }

    /// How many revisions were committed for writes of this operation id.
    pub fn commits_of(&self, operation_prefix: &str) -> usize {
        self.inner
            .history()
            .iter()
            .filter(|document| document.key.id.as_str().starts_with(operation_prefix))
            .count()
    }
}

impl MemoryWriter for FaultyWriter {
    async fn apply(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        self.sent.lock().unwrap().push(write.clone());
        let fault = self.faults.lock().unwrap().pop_front();
        match fault {
            Some(Fault::FailBefore) => Err(MemoryError::storage("apply", "injected failure")),
            Some(Fault::Conflict) => Err(MemoryError::Conflict { current: None }),
            Some(Fault::LoseAcknowledgement) => {
                self.inner.apply(write).await?;
                Err(MemoryError::storage("apply", "acknowledgement lost"))
            }
            None => self.inner.apply(write).await,
        }
    }
}

impl MemoryReader for FaultyWriter {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        self.inner.read(key).await
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        self.inner.read_many(keys).await
    }
}

/// A temporary database file that lives as long as the value.
pub struct TempDb {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn temp_db() -> TempDb {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("memory.sqlite");
    TempDb { _dir: dir, path }
}

pub fn thread(name: &str) -> ThreadId {
    ThreadId::new(name).expect("valid thread id")
}

pub fn scopes() -> Vec<MemoryScope> {
    vec![MemoryScope::new("agent").expect("valid scope")]
}

/// Where the statements of an unbound `thread` go: its per-thread namespace.
pub fn statement_namespace(thread: &ThreadId) -> NamespaceAddress {
    ThreadDestination::legacy_thread(thread, scopes())
        .expect("valid")
        .namespace()
        .clone()
}

/// The document of what `speaker` states by `text` in the unbound `thread`.
pub fn statement_key(thread: &ThreadId, speaker: &str, text: &str) -> MemoryKey {
    MemoryKey {
        namespace: statement_namespace(thread),
        id: statement_document_id(speaker, text).expect("valid"),
    }
}

/// A statement processor over the database at `path`.
pub fn processor<W: MemoryReader + MemoryWriter>(
    path: &std::path::Path,
    writer: Arc<W>,
    clock: Arc<ManualClock>,
    owner: &str,
    limits: PassLimits,
) -> ActivityProcessor<W, StatementExtractor> {
    ActivityProcessor::new(ActivityProcessorParts {
        log: Arc::new(SqliteThreadLog::open(path).expect("thread log")),
        progress: Arc::new(SqliteProgressStore::open(path).expect("progress")),
        references: Arc::new(SqliteRememberingStore::open(path).expect("remembering store")),
        writer,
        extractor: StatementExtractor::new(),
        clock,
        processor: ProcessorId::new("statements").expect("valid"),
        version: ProcessorVersion::new(1),
        owner: WorkerId::new(owner).expect("valid"),
        limits,
        unbound: UnboundThreads::PerThread { scopes: scopes() },
    })
    .expect("valid limits")
}

/// Hooks that pause once at the `occurrence`-th arrival at `point`, until resumed.
pub struct PauseAt {
    point: PassPoint,
    occurrence: usize,
    seen: Mutex<usize>,
    pub paused: tokio::sync::Notify,
    pub resume: tokio::sync::Notify,
    pub hit: std::sync::atomic::AtomicBool,
}

impl PauseAt {
    pub fn new(point: PassPoint, occurrence: usize) -> Self {
        Self {
            point,
            occurrence,
            seen: Mutex::new(0),
            paused: tokio::sync::Notify::new(),
            resume: tokio::sync::Notify::new(),
            hit: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl PassHooks for PauseAt {
    fn at(&self, point: PassPoint) -> HookFuture<'_> {
        let pause = point == self.point && {
            let mut seen = self.seen.lock().unwrap();
            *seen += 1;
            *seen == self.occurrence
        };
        Box::pin(async move {
            if pause {
                self.hit.store(true, std::sync::atomic::Ordering::SeqCst);
                self.paused.notify_one();
                self.resume.notified().await;
            }
        })
    }
}

/// Runs a closure at the `occurrence`-th arrival at `point`.
pub struct CallAt<F> {
    point: PassPoint,
    occurrence: usize,
    seen: Mutex<usize>,
    action: F,
}

impl<F: Fn() + Send + Sync> CallAt<F> {
    pub fn new(point: PassPoint, occurrence: usize, action: F) -> Self {
        Self {
            point,
            occurrence,
            seen: Mutex::new(0),
            action,
        }
    }
}

impl<F: Fn() + Send + Sync> PassHooks for CallAt<F> {
    fn at(&self, point: PassPoint) -> HookFuture<'_> {
        if point == self.point {
            let mut seen = self.seen.lock().unwrap();
            *seen += 1;
            if *seen == self.occurrence {
                (self.action)();
            }
        }
        Box::pin(std::future::ready(()))
    }
}
