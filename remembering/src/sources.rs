//! Source events (SPEC §5): forget, edit, deletion and revocation. Each records durable suppression and
//! admits cleanup in one transaction before it is acknowledged; cleanup later withdraws the source-owned
//! contributions found through the kept source-to-target references.
//!
//! Between acknowledgement and cleanup, a contribution may still be current in the memory store. Reads
//! that must never show a suppressed contribution go through [`SuppressingReader`], which hides any
//! document whose current revision was written for a suppressed source.

use std::sync::Arc;

use memory_core::activity::{ActivityError, IntentId, RememberingStore, SourceId, SourceRevision};
use memory_core::{Clock, MemoryDocument, MemoryError, MemoryKey, MemoryReader};

/// Why a source's contributions must go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceEvent {
    /// The user asked to forget the source.
    Forget,
    /// The source was deleted.
    Deleted,
    /// Access to the source was revoked.
    Revoked,
    /// The source was edited: contributions of the old revision go; the new revision is admitted as a
    /// new remember intent by the caller.
    Edited {
        /// The revision that was replaced.
        previous: SourceRevision,
    },
}

/// The acknowledgement of a source event: returned only after suppression and cleanup are durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    /// The admitted cleanup intent.
    pub cleanup: IntentId,
}

/// Records source events.
pub struct SourceEvents {
    store: Arc<dyn RememberingStore>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for SourceEvents {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SourceEvents")
            .finish_non_exhaustive()
    }
}

impl SourceEvents {
    /// Source events recorded in `store`.
    pub fn new(store: Arc<dyn RememberingStore>, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
    }

    /// Suppresses the source (all revisions, or the edited one) and admits its cleanup.
    pub fn record(
        &self,
        source: &SourceId,
        event: &SourceEvent,
    ) -> Result<Acknowledged, ActivityError> {
        let revision = match event {
            SourceEvent::Edited { previous } => Some(previous),
            SourceEvent::Forget | SourceEvent::Deleted | SourceEvent::Revoked => None,
        };
        let cleanup = self
            .store
            .suppress(source, revision, self.clock.now_millis())?;
        Ok(Acknowledged { cleanup })
    }
}

/// A reader that hides documents whose current revision a suppressed source wrote.
pub struct SuppressingReader<R> {
    inner: Arc<R>,
    store: Arc<dyn RememberingStore>,
}

impl<R> std::fmt::Debug for SuppressingReader<R> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SuppressingReader")
            .finish_non_exhaustive()
    }
}

impl<R: MemoryReader> SuppressingReader<R> {
    /// Wraps `inner`, consulting `store` for suppression.
    pub fn new(inner: Arc<R>, store: Arc<dyn RememberingStore>) -> Self {
        Self { inner, store }
    }

    fn filter(
        &self,
        documents: Vec<Option<MemoryDocument>>,
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        let present: Vec<(MemoryKey, memory_core::Revision)> = documents
            .iter()
            .flatten()
            .map(|document| (document.key.clone(), document.revision.clone()))
            .collect();
        let suppressed = self
            .store
            .suppressed_contributions(&present)
            .map_err(|error| MemoryError::storage("check suppression", error))?;
        let mut flags = suppressed.into_iter();
        Ok(documents
            .into_iter()
            .map(|document| document.filter(|_| !flags.next().unwrap_or(true)))
            .collect())
    }
}

impl<R: MemoryReader> MemoryReader for SuppressingReader<R> {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        let document = self.inner.read(key).await?;
        Ok(self.filter(vec![document])?.pop().flatten())
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        let documents = self.inner.read_many(keys).await?;
        self.filter(documents)
    }
}
