//! An in-memory store for tests and examples. It applies the same write rules as every other store
//! ([`crate::write::PreparedWrite`]) and passes the same contract suite.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::document::{MemoryContent, MemoryDocument, MemoryKey};
use crate::error::MemoryError;
use crate::ids::OperationId;
use crate::namespace::NamespaceAddress;
use crate::ports::{
    ChangeSequence, Clock, MemoryReader, MemoryWriter, RevisionHistory, SystemClock,
};
use crate::revisions::{RevisionRetention, StoredRevision, clamp_revisions_limit, redact};
use crate::write::{MemoryReceipt, MemoryWrite, PreparedWrite, WriteOutcome, WritePlan};

#[derive(Debug, Default)]
struct State {
    current: HashMap<MemoryKey, MemoryDocument>,
    receipts: HashMap<(NamespaceAddress, OperationId), MemoryReceipt>,
    /// Every revision ever committed, for predecessor-chain checks in tests (emptied of its words
    /// when its receipt is redacted).
    history: Vec<MemoryDocument>,
    /// Each key's receipts in commit order, with their place in `history`.
    by_key: HashMap<MemoryKey, Vec<(OperationId, usize)>>,
}

/// A store held in process memory.
pub struct InMemoryStore {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    retention: RevisionRetention,
}

impl std::fmt::Debug for InMemoryStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("InMemoryStore")
            .finish_non_exhaustive()
    }
}

impl Default for InMemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryStore {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty store on the given clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self {
            state: Mutex::new(State::default()),
            clock,
            retention: RevisionRetention::default(),
        }
    }

    /// Keeps the words of `retention`'s newest revisions of each document.
    pub fn with_retention(mut self, retention: RevisionRetention) -> Self {
        self.retention = retention;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied write: every write is planned first
        // and then inserted with infallible map operations.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every committed revision, oldest first (withdrawals included).
    pub fn history(&self) -> Vec<MemoryDocument> {
        self.lock().history.clone()
    }

    /// Replaces a stored receipt, to let tests simulate corrupt storage.
    #[doc(hidden)]
    pub fn overwrite_receipt_for_tests(&self, receipt: MemoryReceipt) {
        let mut state = self.lock();
        let slot = (
            receipt.document.key.namespace.clone(),
            receipt.operation_id.clone(),
        );
        state.receipts.insert(slot, receipt);
    }

    fn apply_now(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        let prepared = PreparedWrite::prepare(write)?;
        let key = prepared.write().key().clone();
        let slot = (
            key.namespace.clone(),
            prepared.write().operation_id().clone(),
        );
        let mut state = self.lock();
        let plan = prepared.plan(
            state.receipts.get(&slot),
            state.current.get(&key),
            self.clock.now_millis(),
        )?;
        match plan {
            WritePlan::Replay(receipt) => Ok(WriteOutcome {
                receipt,
                replayed: true,
            }),
            WritePlan::Commit { document, receipt } => {
                let drop = self.retention.words_to_drop(&document);
                let place = state.history.len();
                state.history.push(document.clone());
                state.current.insert(key.clone(), document);
                state.receipts.insert(slot.clone(), receipt.clone());
                let earlier = state.by_key.entry(key.clone()).or_default();
                earlier.push((slot.1, place));
                let redacted: Vec<(OperationId, usize)> =
                    earlier.iter().rev().skip(drop.kept()).cloned().collect();
                for (operation, place) in redacted {
                    let slot = (key.namespace.clone(), operation);
                    if let Some(stored) = state.receipts.remove(&slot) {
                        state.receipts.insert(slot, redact(stored));
                    }
                    if let Some(revision) = state.history.get_mut(place) {
                        revision.content = MemoryContent::tombstone();
                    }
                }
                Ok(WriteOutcome {
                    receipt,
                    replayed: false,
                })
            }
        }
    }
}

impl MemoryReader for InMemoryStore {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        Ok(self
            .lock()
            .current
            .get(key)
            .filter(|document| document.withdrawn.is_none())
            .cloned())
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        let state = self.lock();
        Ok(keys
            .iter()
            .map(|key| {
                state
                    .current
                    .get(key)
                    .filter(|document| document.withdrawn.is_none())
                    .cloned()
            })
            .collect())
    }
}

impl MemoryWriter for InMemoryStore {
    async fn apply(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        self.apply_now(write)
    }
}

/// A revision's sequence is its place in the history (1-based), as in the listing.
impl RevisionHistory for InMemoryStore {
    async fn revisions(
        &self,
        key: &MemoryKey,
        limit: usize,
    ) -> Result<Vec<StoredRevision>, MemoryError> {
        let state = self.lock();
        let Some(receipts) = state.by_key.get(key) else {
            return Ok(Vec::new());
        };
        Ok(receipts
            .iter()
            .rev()
            .take(clamp_revisions_limit(limit))
            .filter_map(|(operation, place)| {
                let receipt = state
                    .receipts
                    .get(&(key.namespace.clone(), operation.clone()))?;
                Some(StoredRevision::from_receipt(
                    receipt.clone(),
                    ChangeSequence::new(*place as u64 + 1),
                ))
            })
            .collect())
    }
}

/// The change position of a revision is its place in the history (1-based, as a change sequence).
impl crate::listing::MemoryLister for InMemoryStore {
    async fn list(
        &self,
        namespace: &NamespaceAddress,
        after: Option<crate::listing::ListCursor>,
        limit: usize,
    ) -> Result<crate::listing::ListPage, MemoryError> {
        crate::listing::check_list_limit(limit)?;
        let before = after.map_or(u64::MAX, crate::listing::ListCursor::position);
        let state = self.lock();
        let mut rows = Vec::new();
        for (index, revision) in state.history.iter().enumerate().rev() {
            let position = index as u64 + 1;
            if position >= before || revision.key.namespace != *namespace {
                continue;
            }
            let Some(current) = state.current.get(&revision.key) else {
                continue;
            };
            if current.revision == revision.revision && current.withdrawn.is_none() {
                rows.push((position, current.clone()));
                if rows.len() > limit {
                    break;
                }
            }
        }
        Ok(crate::listing::page_of(rows, limit))
    }
}
