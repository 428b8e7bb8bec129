//! What a recall reads: the store with the contributions of forgotten (suppressed) thread records
//! hidden from every read, for every mode and for `memory_get`, listings and histories alike, from
//! the moment a forget is acknowledged.

use std::sync::Arc;

use memory_core::activity::RememberingStore;
use memory_core::activity::suppression::hide_suppressed;
use memory_core::{
    CorrectionIndex, DocumentId, LexicalHit, LexicalSearch, MemoryAccess, MemoryDocument,
    MemoryError, MemoryKey, MemoryReader,
};

use super::RecallService;
use crate::blocking::blocking;
use crate::database::Store;
use crate::refusal::Refusal;

/// The store as one recall sees it: every read hides the contributions of forgotten (suppressed)
/// sources, so a forget is effective for every mode the moment it is acknowledged, before the worker's
/// cleanup withdraws them. The check is one batched [`RememberingStore::suppressed_contributions`] call
/// per grouped read, made where the read is (the blocking pool, in every mode). Search hits need no
/// check of their own: every mode revalidates its hits through these reads. Every call passes through
/// [`injected_stall`], which does nothing unless the `fault-injection` feature is compiled in.
pub(super) struct RecallStore<S> {
    pub(super) store: Arc<S>,
    suppression: Arc<dyn RememberingStore>,
}

impl<S: Store> MemoryReader for RecallStore<S> {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        injected_stall();
        let document = self.store.read(key).await?;
        Ok(hide_suppressed(&*self.suppression, vec![document])?
            .pop()
            .flatten())
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        injected_stall();
        let documents = self.store.read_many(keys).await?;
        hide_suppressed(&*self.suppression, documents)
    }
}

/// Candidates only: every correction named is read back through this store's suppressing reads.
impl<S: Store> CorrectionIndex for RecallStore<S> {
    async fn corrections_of(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
    ) -> Result<Vec<Vec<DocumentId>>, MemoryError> {
        injected_stall();
        self.store.corrections_of(access, ids).await
    }
}

impl<S: Store> LexicalSearch for RecallStore<S> {
    async fn search(
        &self,
        access: &MemoryAccess,
        query: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>, MemoryError> {
        injected_stall();
        self.store.search(access, query, limit).await
    }
    async fn written_neighbours(
        &self,
        access: &MemoryAccess,
        ids: &[memory_core::DocumentId],
        reach: usize,
    ) -> Result<Vec<memory_core::WrittenNeighbours>, MemoryError> {
        self.store.written_neighbours(access, ids, reach).await
    }
}

/// The database's remembering store, opened on the first read that needs it (for SQLite one more
/// connection; for PostgreSQL a handle on the same pool) and kept for the service's lifetime.
#[derive(Default)]
pub(super) struct Suppression(std::sync::OnceLock<Arc<dyn RememberingStore>>);

impl Suppression {
    async fn get<S: Store>(&self, store: &Arc<S>) -> Result<Arc<dyn RememberingStore>, Refusal> {
        if let Some(opened) = self.0.get() {
            return Ok(Arc::clone(opened));
        }
        let store = Arc::clone(store);
        let opened = blocking(move || store.open_remembering()).await??;
        // Two first reads may both open; one handle wins and the other is dropped.
        Ok(Arc::clone(self.0.get_or_init(|| opened)))
    }
}

impl<S: Store> RecallService<S> {
    /// The store as a recall reads it (see [`RecallStore`]).
    pub(super) async fn recall_store(&self) -> Result<RecallStore<S>, Refusal> {
        Ok(RecallStore {
            store: Arc::clone(&self.store),
            suppression: self.suppression.get(&self.store).await?,
        })
    }

    /// `document` unless a suppressed source contributed its current revision, so `memory_get` agrees
    /// with recall from the moment a forget is acknowledged. The check runs on the blocking pool.
    pub async fn visible(
        &self,
        document: Option<MemoryDocument>,
    ) -> Result<Option<MemoryDocument>, Refusal> {
        if document.is_none() {
            return Ok(None);
        }
        let suppression = self.suppression.get(&self.store).await?;
        let visible = blocking(move || hide_suppressed(&*suppression, vec![document])).await??;
        Ok(visible.into_iter().next().flatten())
    }

    /// [`Self::visible`] for many documents in one check (a listing page), in their order.
    pub async fn visible_all(
        &self,
        documents: Vec<MemoryDocument>,
    ) -> Result<Vec<MemoryDocument>, Refusal> {
        let documents = documents.into_iter().map(Some).collect();
        Ok(self
            .visible_each(documents)
            .await?
            .into_iter()
            .flatten()
            .collect())
    }

    /// [`Self::visible`] for many documents in one check, each in its place (`None` where hidden):
    /// a document's revisions, for its history.
    pub async fn visible_each(
        &self,
        documents: Vec<Option<MemoryDocument>>,
    ) -> Result<Vec<Option<MemoryDocument>>, Refusal> {
        if documents.iter().all(Option::is_none) {
            return Ok(documents);
        }
        let suppression = self.suppression.get(&self.store).await?;
        Ok(blocking(move || hide_suppressed(&*suppression, documents)).await??)
    }
}

/// Milliseconds each store call of a recall blocks its thread, read only with the `fault-injection`
/// feature (tests of the `deadline` refusal).
pub const STALL_RECALL_ENV: &str = "MEMORY_FAULT_STALL_RECALL_MS";

#[cfg(feature = "fault-injection")]
fn injected_stall() {
    if let Some(millis) = std::env::var(STALL_RECALL_ENV)
        .ok()
        .and_then(|value| value.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(millis));
    }
}

#[cfg(not(feature = "fault-injection"))]
fn injected_stall() {}
