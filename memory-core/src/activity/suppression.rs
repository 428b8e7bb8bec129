//! Source events and read-time suppression (SPEC §5): forget, edit, deletion and revocation.
//!
//! A source event records durable suppression and admits cleanup in one transaction
//! ([`RememberingStore::suppress`]) before it is acknowledged; cleanup later withdraws the source-owned
//! contributions found through the kept source-to-target references.
//!
//! Between acknowledgement and cleanup a contribution may still be current in the memory store, so a
//! read that must never show a suppressed contribution goes through [`SuppressingReader`] (or
//! [`hide_suppressed`] for a reader of its own): it hides any document whose current revision was
//! written for a suppressed source. A later revision (a human correction of that document) is not the
//! source's contribution and stays visible.
//!
//! These are model-level pieces with no I/O of their own, kept here so every interface (the remembering
//! worker, the `memory` command and server) hides exactly the same documents.

use std::sync::Arc;

use super::{ActivityError, IntentId, RememberingStore, SourceId, SourceRevision};
use crate::document::{MemoryDocument, MemoryKey};
use crate::error::MemoryError;
use crate::ids::Revision;
use crate::ports::{Clock, MemoryReader};

/// Most documents asked about in one [`RememberingStore::suppressed_contributions`] call: the smallest
/// page both stores accept, so a large grouped read is checked in a few calls, never refused.
pub const SUPPRESSION_CHECK_BATCH: usize = 10_000;

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

/// Replaces by `None` every document of `documents` whose current revision a suppressed source
/// contributed, asking `store` in batches of at most [`SUPPRESSION_CHECK_BATCH`] documents (one call for
/// any ordinary read). The answer keeps the order and length of `documents`.
pub fn hide_suppressed(
    store: &dyn RememberingStore,
    mut documents: Vec<Option<MemoryDocument>>,
) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
    let present: Vec<(usize, (MemoryKey, Revision))> = documents
        .iter()
        .enumerate()
        .filter_map(|(position, document)| {
            document
                .as_ref()
                .map(|document| (position, (document.key.clone(), document.revision.clone())))
        })
        .collect();
    for batch in present.chunks(SUPPRESSION_CHECK_BATCH) {
        let asked: Vec<(MemoryKey, Revision)> =
            batch.iter().map(|(_, document)| document.clone()).collect();
        let flags = store
            .suppressed_contributions(&asked)
            .map_err(suppression_failure)?;
        // A store answering fewer flags than asked breaks its contract: hide rather than show what it
        // did not vouch for.
        for (index, (position, _)) in batch.iter().enumerate() {
            if flags.get(index).copied().unwrap_or(true) {
                documents[*position] = None;
            }
        }
    }
    Ok(documents)
}

/// A store fault of the check is the read's, unchanged (a busy store stays retryable, a corrupt
/// one corrupt); any other failure of the check is a storage failure of the read.
fn suppression_failure(error: ActivityError) -> MemoryError {
    match error {
        ActivityError::Store(fault) => MemoryError::Store(fault),
        other => MemoryError::storage("check suppression", other),
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
}

impl<R: MemoryReader> MemoryReader for SuppressingReader<R> {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        let document = self.inner.read(key).await?;
        Ok(hide_suppressed(&*self.store, vec![document])?
            .pop()
            .flatten())
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        let documents = self.inner.read_many(keys).await?;
        hide_suppressed(&*self.store, documents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorKind, StoreFault};

    /// The suppression check's store faults keep their kind in the read's error.
    #[test]
    fn a_store_fault_of_the_check_keeps_its_kind() {
        for (fault, kind) in [
            (
                StoreFault::Busy { operation: "check" },
                ErrorKind::Unavailable,
            ),
            (StoreFault::Poisoned, ErrorKind::Storage),
            (StoreFault::corrupt("row"), ErrorKind::Corrupt),
        ] {
            assert_eq!(
                suppression_failure(ActivityError::Store(fault)).kind(),
                kind
            );
        }
        let other = ActivityError::ProgressMismatch { what: "record" };
        assert_eq!(suppression_failure(other).kind(), ErrorKind::Storage);
    }
}
