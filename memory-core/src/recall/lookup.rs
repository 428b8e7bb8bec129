//! What a source answers ([`MemoryLookup`]), how a source is declared ([`RecallSource`]), and what a
//! recall returns ([`RecalledMemory`]).

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use crate::recall::error::RecallError;
use crate::recall::ids::{Authority, AuthorityLabel, Citation, SourceId};
use crate::recall::passage::MemoryPassage;

/// A source's answer to one recall.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum MemoryLookup {
    /// Matching passages, best first.
    Found {
        /// The passages, ranked.
        passages: Vec<MemoryPassage>,
    },
    /// Nothing matched; a success for every source.
    NoMatch,
    /// The source could not answer.
    Unavailable {
        /// Why, in words safe to log (no user data).
        reason: String,
    },
    /// The source could answer only from data older than the caller accepts.
    InsufficientFreshness,
}

/// The boxed future a recall source reads through.
pub type LookupFuture<'a> =
    Pin<Box<dyn Future<Output = Result<MemoryLookup, RecallError>> + Send + 'a>>;

/// One declared recall source: an id, whether it is essential, and the lookup to run.
///
/// The lookup is a future, run once per recall, concurrently with the other sources and under the
/// recall's deadline. It may borrow (a store, a query) for the recall's duration. An error it returns
/// fails the recall with that error; a reader that prefers to degrade maps its failure to
/// [`MemoryLookup::Unavailable`] itself.
pub struct RecallSource<'a> {
    /// The declaration's id; also the authority of its passages that name none.
    pub id: SourceId,
    /// Whether an unavailable, stale or unfitting answer fails the whole recall.
    pub essential: bool,
    /// The lookup.
    pub read: LookupFuture<'a>,
}

impl<'a> RecallSource<'a> {
    /// Declares a source.
    pub fn new(
        id: SourceId,
        essential: bool,
        read: impl Future<Output = Result<MemoryLookup, RecallError>> + Send + 'a,
    ) -> Self {
        Self {
            id,
            essential,
            read: Box::pin(read),
        }
    }

    /// Declares an essential source.
    pub fn essential(
        id: SourceId,
        read: impl Future<Output = Result<MemoryLookup, RecallError>> + Send + 'a,
    ) -> Self {
        Self::new(id, true, read)
    }

    /// Declares an optional source.
    pub fn optional(
        id: SourceId,
        read: impl Future<Output = Result<MemoryLookup, RecallError>> + Send + 'a,
    ) -> Self {
        Self::new(id, false, read)
    }
}

impl std::fmt::Debug for RecallSource<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RecallSource")
            .field("id", &self.id)
            .field("essential", &self.essential)
            .finish_non_exhaustive()
    }
}

/// How a source answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum SourceStatus {
    /// It returned passages (possibly none).
    Found,
    /// Nothing matched.
    NoMatch,
    /// It could not answer (only reported for optional sources; essential ones fail the recall).
    Unavailable {
        /// The reason it gave.
        reason: String,
    },
    /// Its data was not fresh enough (only reported for optional sources).
    InsufficientFreshness,
}

/// What happened at one declared source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceOutcome {
    /// The declaration's id.
    pub id: SourceId,
    /// Whether it was declared essential.
    pub essential: bool,
    /// Its answer.
    pub status: SourceStatus,
    /// Passages of this source that got a citation of their own.
    pub selected: usize,
    /// Passages that duplicated an already cited passage and share its citation.
    pub deduplicated: usize,
    /// Passages left out of the text by the limits (including duplicates of left-out passages).
    pub omitted: usize,
}

/// One cited passage of a recall result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecalledPassage {
    /// Its citation id in the text (`memory:N`).
    pub citation: Citation,
    /// Its authority's label in the text (`memory-authority:N`).
    pub authority_label: AuthorityLabel,
    /// The passage, with `authority` always set: the passage's own, or else its declaring source's id.
    pub passage: MemoryPassage,
    /// The declaration that contributed it first.
    pub declared_by: SourceId,
    /// The citation of the passage that corrects this one, when it is cited
    /// ([`MemoryPassage::corrected_by`]).
    pub corrected_by: Option<Citation>,
}

impl RecalledPassage {
    /// The passage's explicit authority.
    pub fn authority(&self) -> Option<&Authority> {
        self.passage.authority.as_ref()
    }
}

/// The result of one recall.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecalledMemory {
    /// The rendered block for model input; empty when no passage was selected. Untrusted input: check a
    /// model's claims against [`RecalledMemory::passages`] before presenting them as sourced.
    pub text: String,
    /// The cited passages, in citation order.
    pub passages: Vec<RecalledPassage>,
    /// One outcome per declared source, in declaration order.
    pub outcomes: Vec<SourceOutcome>,
}
