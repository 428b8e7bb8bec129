//! Builders shared by this crate's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use memory_core::{
    ManualClock, MemoryAccess, MemoryKey, MemoryWrite, NamespaceAddress, OperationId,
};
use memory_sqlite::{SqliteStore, Synchronous};

/// The fixed time every test store reads from its clock.
pub const NOW: i64 = 1_700_000_000_000;

/// A fresh directory that outlives the test (removed with the system's temporary files).
pub fn fresh_dir() -> PathBuf {
    tempfile::tempdir().expect("temporary directory").keep()
}

/// A fresh store file path.
pub fn fresh_path() -> PathBuf {
    fresh_dir().join("memory.sqlite")
}

/// Opens a store on a manual clock standing at [`NOW`].
pub fn open(path: &Path) -> SqliteStore {
    SqliteStore::builder()
        .clock(Arc::new(ManualClock::new(NOW)))
        .synchronous(Synchronous::Normal)
        .open(path)
        .expect("store opens")
}

// Not every test binary uses every builder.
#[allow(unused_imports)]
pub use memory_testkit::builders::{access, key, namespace, op, put, said, scope, withdraw};

/// Sizes of the database file and its WAL (0 when absent).
pub fn file_sizes(path: &Path) -> (u64, u64) {
    let size = |path: &Path| std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    (size(path), size(Path::new(&wal)))
}

/// What a [`Suited`] store breaks on purpose, to prove the store suites can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// Nothing: the store as it is.
    Nothing,
    /// Change pages include the change at the given position.
    FeedIncludesPosition,
    /// Search answers worst hit first.
    SearchWorstFirst,
    /// History loses every predecessor.
    HistoryWithoutPredecessors,
    /// Search in scope `s2` answers what scope `s1` may see.
    SearchLeaksScope,
    /// Search answers from every namespace written so far, best first.
    SearchEveryNamespace,
    /// Written neighbours come back swapped: each previous as next.
    NeighboursBackwards,
    /// A document's history is its current revision alone (issue 42's symptom).
    HistoryOnlyCurrent,
    /// Corrections come back oldest first.
    CorrectionsOldestFirst,
}

/// The bound of revisions per document of a [`Suited`] store: small, so the suite's bound rule
/// writes few revisions, and not the default, so the configured bound is the one in force.
pub const SUITED_MAX_REVISIONS: usize = 3;

/// A SQLite store seen through memory-core's [`InspectableStore`] (the suites' adapter), optionally
/// broken in one place.
pub struct Suited {
    pub store: SqliteStore,
    pub broken: Break,
    /// Every namespace written through this adapter (for [`Break::SearchEveryNamespace`]).
    pub written: std::sync::Mutex<Vec<NamespaceAddress>>,
}

/// A fresh store for the store suites.
pub fn suited(broken: Break) -> Suited {
    Suited {
        store: SqliteStore::builder()
            .clock(Arc::new(ManualClock::new(NOW)))
            .synchronous(Synchronous::Normal)
            .retention(memory_core::RevisionRetention::new(SUITED_MAX_REVISIONS).unwrap())
            .open(fresh_path())
            .expect("store opens"),
        broken,
        written: std::sync::Mutex::new(Vec::new()),
    }
}

use memory_core::{
    Change, ChangeFeed, ChangeSequence, LexicalHit, LexicalSearch, MemoryDocument, MemoryError,
    MemoryReader, MemoryReceipt, MemoryWriter, WriteOutcome,
};
use memory_testkit::store::{ConsistencyCounts, HistoryLink, InspectableStore};

impl MemoryReader for Suited {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        self.store.read(key).await
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        self.store.read_many(keys).await
    }
}

impl MemoryWriter for Suited {
    async fn apply(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        self.note_written(std::slice::from_ref(&write));
        self.store.apply(write).await
    }
}

impl ChangeFeed for Suited {
    async fn head(&self) -> Result<ChangeSequence, MemoryError> {
        self.store.head().await
    }

    async fn changes_since(
        &self,
        after: ChangeSequence,
        limit: usize,
    ) -> Result<Vec<Change>, MemoryError> {
        let after = match self.broken {
            Break::FeedIncludesPosition => ChangeSequence::new(after.get().saturating_sub(1)),
            _ => after,
        };
        self.store.changes_since(after, limit).await
    }
}

impl LexicalSearch for Suited {
    async fn search(
        &self,
        access: &MemoryAccess,
        query: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>, MemoryError> {
        let leaked;
        let access = if self.broken == Break::SearchLeaksScope && access.scope.as_str() == "s2" {
            leaked = MemoryAccess {
                scope: scope("s1"),
                ..access.clone()
            };
            &leaked
        } else {
            access
        };
        let mut hits = self.store.search(access, query, limit).await?;
        if self.broken == Break::SearchEveryNamespace {
            let others: Vec<NamespaceAddress> = self.written.lock().unwrap().clone();
            for namespace in others
                .into_iter()
                .filter(|other| *other != access.namespace)
            {
                let elsewhere = MemoryAccess {
                    namespace,
                    ..access.clone()
                };
                hits.extend(self.store.search(&elsewhere, query, limit).await?);
            }
            hits.sort_by(|a, b| b.score.total_cmp(&a.score));
            hits.truncate(limit);
        }
        if self.broken == Break::SearchWorstFirst {
            hits.reverse();
        }
        Ok(hits)
    }
    async fn written_neighbours(
        &self,
        access: &MemoryAccess,
        ids: &[memory_core::DocumentId],
        reach: usize,
    ) -> Result<Vec<memory_core::WrittenNeighbours>, MemoryError> {
        let mut answers = self.store.written_neighbours(access, ids, reach).await?;
        if self.broken == Break::NeighboursBackwards {
            for answer in &mut answers {
                std::mem::swap(&mut answer.before, &mut answer.after);
            }
        }
        Ok(answers)
    }
}

impl memory_core::CorrectionIndex for Suited {
    async fn corrections_of(
        &self,
        access: &MemoryAccess,
        ids: &[memory_core::DocumentId],
    ) -> Result<Vec<Vec<memory_core::DocumentId>>, MemoryError> {
        let mut answers = self.store.corrections_of(access, ids).await?;
        if self.broken == Break::CorrectionsOldestFirst {
            for answer in &mut answers {
                answer.reverse();
            }
        }
        Ok(answers)
    }
}

impl memory_core::RevisionHistory for Suited {
    async fn revisions(
        &self,
        key: &MemoryKey,
        limit: usize,
    ) -> Result<Vec<memory_core::StoredRevision>, MemoryError> {
        let mut revisions = self.store.revisions(key, limit).await?;
        if self.broken == Break::HistoryOnlyCurrent {
            revisions.truncate(1);
        }
        Ok(revisions)
    }
}

impl InspectableStore for Suited {
    fn retention(&self) -> memory_core::RevisionRetention {
        memory_core::RevisionRetention::new(SUITED_MAX_REVISIONS).unwrap()
    }

    async fn history(&self, key: &MemoryKey) -> Result<Vec<HistoryLink>, MemoryError> {
        let links = self.store.reader().history(key)?;
        Ok(links
            .into_iter()
            .map(|link| HistoryLink {
                revision: link.revision,
                predecessor: link
                    .predecessor
                    .filter(|_| self.broken != Break::HistoryWithoutPredecessors),
            })
            .collect())
    }

    async fn receipt(
        &self,
        namespace: &NamespaceAddress,
        operation: &OperationId,
    ) -> Result<Option<MemoryReceipt>, MemoryError> {
        self.store.reader().receipt(namespace, operation)
    }

    async fn check_consistency(&self) -> Result<ConsistencyCounts, MemoryError> {
        let report = self.store.reader().check_consistency()?;
        Ok(ConsistencyCounts {
            documents: report.documents,
            receipts: report.receipts,
            revisions: report.revisions,
            changes: report.changes,
        })
    }

    async fn apply_batch(
        &self,
        writes: Vec<MemoryWrite>,
    ) -> Result<Vec<Result<WriteOutcome, MemoryError>>, MemoryError> {
        self.note_written(&writes);
        self.store.apply_batch(writes)
    }

    fn max_batch_writes(&self) -> usize {
        memory_sqlite::MAX_BATCH_WRITES
    }
}

impl Suited {
    fn note_written(&self, writes: &[MemoryWrite]) {
        let mut written = self.written.lock().unwrap();
        for write in writes {
            let namespace = match write {
                MemoryWrite::Put { key, .. } | MemoryWrite::Withdraw { key, .. } => &key.namespace,
            };
            if !written.contains(namespace) {
                written.push(namespace.clone());
            }
        }
    }
}
