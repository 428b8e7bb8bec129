//! The application traits a remembering worker calls: load a source, extract a proposal, merge it into
//! a concurrently edited document, and decide what cleanup does to a document a withdrawn source wrote.

use std::future::Future;

use memory_core::activity::{SourceId, SourceReference, SourceRevision};
use memory_core::document::{EpochMillis, MemoryContent, MemoryDocument};

use crate::error::ApplicationError;

/// A source as the application currently holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedSource {
    /// Its current revision.
    pub revision: SourceRevision,
    /// Its content, in the application's own shape.
    pub body: serde_json::Value,
}

/// Loads application-owned sources.
pub trait SourceLoader: Send + Sync {
    /// The source's current state; `None` when it no longer exists.
    fn load(
        &self,
        source: &SourceId,
    ) -> impl Future<Output = Result<Option<LoadedSource>, ApplicationError>> + Send;
}

/// Extracts what is worth remembering from a source.
pub trait Extractor: Send + Sync {
    /// The proposal for `source`, or `None` when there is nothing to remember.
    fn extract(
        &self,
        source: &SourceId,
        loaded: &LoadedSource,
        now: EpochMillis,
    ) -> impl Future<Output = Result<Option<MemoryContent>, ApplicationError>> + Send;
}

/// Rebases a saved proposal onto the latest document (after a definite conflict, or when the target
/// already exists). It must keep concurrent human corrections.
pub trait Merger: Send + Sync {
    /// The content to write over `latest`.
    fn merge(
        &self,
        latest: &MemoryDocument,
        proposal: &MemoryContent,
    ) -> Result<MemoryContent, ApplicationError>;
}

/// What cleanup does to one document a suppressed source contributed to.
#[derive(Debug, Clone, PartialEq)]
pub enum CleanupAction {
    /// Withdraw the document.
    Withdraw,
    /// Leave it (for example: someone corrected it since).
    Keep,
}

/// Decides cleanup of source-owned contributions.
pub trait Cleanup: Send + Sync {
    /// What to do with `current`, which `reference` says the source once wrote.
    fn cleanup(&self, current: &MemoryDocument, reference: &SourceReference) -> CleanupAction;
}

/// The default merge: the latest document's text wins (a human correction survives), the proposal's
/// attributions are added when not already present, and metadata members absent from the latest
/// document are added.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeepLatestMerger;

impl Merger for KeepLatestMerger {
    fn merge(
        &self,
        latest: &MemoryDocument,
        proposal: &MemoryContent,
    ) -> Result<MemoryContent, ApplicationError> {
        let mut merged = latest.content.clone();
        for attribution in &proposal.attributions {
            if !merged.attributions.contains(attribution) {
                merged.attributions.push(attribution.clone());
            }
        }
        for (name, value) in &proposal.metadata {
            merged
                .metadata
                .entry(name.clone())
                .or_insert_with(|| value.clone());
        }
        merged.extracted_at = proposal.extracted_at;
        Ok(merged)
    }
}

/// The default cleanup: withdraw a document only while it is still at the revision the source wrote;
/// any later revision is someone else's edit (a human correction) and survives.
#[derive(Debug, Clone, Copy, Default)]
pub struct WithdrawOwnRevision;

impl Cleanup for WithdrawOwnRevision {
    fn cleanup(&self, current: &MemoryDocument, reference: &SourceReference) -> CleanupAction {
        if current.revision == reference.revision {
            CleanupAction::Withdraw
        } else {
            CleanupAction::Keep
        }
    }
}
