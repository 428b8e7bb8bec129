//! The application traits a remembering worker calls: load a source, extract a proposal, merge it into
//! a concurrently edited document, and decide what cleanup does to a document a withdrawn source wrote.

use std::future::Future;

use memory_core::activity::{SourceId, SourceReference, SourceRevision};
use memory_core::document::{EpochMillis, MemoryContent, MemoryDocument};

use crate::error::ApplicationError;
use crate::extract::{is_statement_of, statement_text, strip_answered_question};

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
    /// Write this content over the current revision, keeping its locator and scopes (for example:
    /// the same content without the source's attributions, when other witnesses remain).
    Rewrite(MemoryContent),
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

/// Cleanup for sources with one contributor per document: withdraw a document only while it is
/// still at the revision the source wrote; any later revision is someone else's edit (a human
/// correction) and survives. Statements attested by several records need
/// [`RemoveSourceAttributions`], the default.
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

/// The default cleanup: a forgotten source stops being a witness of what it stated, and a statement
/// goes when its last witness goes.
///
/// For a thread record (the source's attributions are those with origin `thread-record:<digest>`,
/// the digest being the reference's source revision):
/// - When the document carries none of them but answers a question the source asked (its
///   [`crate::extract::ANSWERING`] member names the source's record), it is rewritten without the
///   question: the asker's words go, the answer stays.
/// - When the document carries none of them otherwise, the [`WithdrawOwnRevision`] rule decides:
///   withdraw only while it is still at the revision the source wrote.
/// - When attributions of other witnesses remain, the document is rewritten without the source's
///   (and without the `record_digest` and `evidence` metadata members when they name the source).
/// - When none remain, it is withdrawn if it still is what the source stated: at the revision the
///   source wrote, or a statement document whose text is unchanged since
///   ([`crate::extract::is_statement_of`]; later revisions only added or removed attributions).
///   Otherwise someone corrected it (a human correction survives): it is rewritten without them.
///
/// Any other source is cleaned by the [`WithdrawOwnRevision`] rule.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemoveSourceAttributions;

impl Cleanup for RemoveSourceAttributions {
    fn cleanup(&self, current: &MemoryDocument, reference: &SourceReference) -> CleanupAction {
        let own = || WithdrawOwnRevision.cleanup(current, reference);
        if reference.source.as_thread_record().is_none() {
            return own();
        }
        let origin = format!("thread-record:{}", reference.source_revision.as_str());
        let (removed, remaining): (Vec<_>, Vec<_>) = current
            .content
            .attributions
            .iter()
            .cloned()
            .partition(|attribution| attribution.origin_id == origin);
        if removed.is_empty() {
            // The source only asked the question the statement answers: the question goes, the
            // statement stays.
            if let Some(stripped) =
                strip_answered_question(&current.content, reference.source_revision.as_str())
            {
                return CleanupAction::Rewrite(stripped);
            }
            return own();
        }
        let said = statement_text(&current.content);
        let still_stated = current.revision == reference.revision
            || removed
                .iter()
                .any(|attribution| is_statement_of(&current.key.id, &attribution.speaker, said));
        if remaining.is_empty() && still_stated {
            return CleanupAction::Withdraw;
        }
        let mut content = current.content.clone();
        content.attributions = remaining;
        let names_source = content
            .metadata
            .get("record_digest")
            .and_then(serde_json::Value::as_str)
            == Some(reference.source_revision.as_str());
        if names_source {
            content.metadata.remove("record_digest");
            content.metadata.remove("evidence");
            content.metadata.remove("evidence_spans");
        }
        CleanupAction::Rewrite(content)
    }
}
