//! Transient-context recall under hard limits (SPEC §2.3).
//!
//! An agent run calls [`recall`] before each model call. Every declared [`RecallSource`] is read
//! concurrently under one deadline; the answers are checked against the input budget, deduplicated and
//! checked for conflicts by authority-qualified identity, selected under the output limits and rendered
//! into one text block whose every passage carries a positional citation. Nothing is written anywhere.
//!
//! - [`passage`]: [`MemoryPassage`], one piece of evidence and its source reference.
//! - [`lookup`]: what a source answers and what a recall returns.
//! - [`limits`]: the hard limits, [`RecallLimits`].
//! - [`render`]: the rendered block and how untrusted text is neutralised in it.
//! - [`lexical_source`]: a recall source over any lexical search plus reader, revalidated.
//! - [`crate::revalidate`](mod@crate::revalidate): keeps deleted, stale and revoked memory out, run inside a source.

mod compose;
pub mod corrections;
pub mod error;
pub mod ids;
mod join;
pub mod lexical_source;
pub mod limits;
pub mod lookup;
pub mod passage;
pub mod render;
pub mod ties;

use std::collections::HashSet;

pub use error::RecallError;
pub use ids::{Authority, AuthorityLabel, Citation, PassageId, SourceId};
pub use lexical_source::{LexicalRecall, lexical_lookup};
pub use limits::{DEFAULT_MAX_INPUT_BYTES, MAX_MAX_INPUT_BYTES, RecallLimits, RecallLimitsBuilder};
pub use lookup::{
    LookupFuture, MemoryLookup, RecallSource, RecalledMemory, RecalledPassage, SourceOutcome,
    SourceStatus,
};
pub use passage::{MemoryPassage, PassageSource, PassageVersion};

use crate::tokens::TokenCounter;
use compose::{Declaration, compose};

/// Recalls from `sources` under `limits`, counting tokens with `counter`.
///
/// - Sources are read concurrently. The first error a source returns fails the recall with that error
///   (its type kept); the others are dropped.
/// - `Unavailable` or `InsufficientFreshness` from an essential source fails the recall; from an optional
///   one it is reported in [`RecalledMemory::outcomes`]. `NoMatch` is a success for every source.
/// - The whole recall, reads and composition, must finish within `limits.timeout_ms()`; otherwise
///   [`RecallError::Deadline`].
/// - Every passage considered counts its compact JSON size against `limits.max_input_bytes()`; going over
///   is [`RecallError::Budget`] and nothing is returned.
/// - A passage's identity is its authority (its own, or else the declaring source's id), source id,
///   revision and passage id. Equal passages share one citation; a different passage under the same
///   known-revision identity is [`RecallError::ConflictingPassages`], even when the first copy was left
///   out by the limits. Unknown-revision passages share a citation only when equal.
/// - The text fits `max_items`, `max_sources` (distinct authority-qualified source ids), `max_bytes`
///   (UTF-8 bytes of the whole text) and `max_tokens` (as `counter` counts the whole text); see [`render`]
///   for the layout. Passages are considered in a fixed order, so equal inputs give equal results: every
///   passage of the essential sources (declaration order, then rank), then the optional sources'
///   passages round-robin by rank, each taken greedily if the text with it still fits.
/// - Every matching passage of an essential source must be cited (directly or through a shared
///   citation), else [`RecallError::EssentialDoesNotFit`]; declare a source optional to get "the best
///   that fits" from it.
/// - Declaring two sources with the same id is [`RecallError::DuplicateSource`], checked before any read.
///
/// Must run inside a tokio runtime with timers enabled, as [`tokio::time::timeout`] requires.
pub async fn recall(
    sources: Vec<RecallSource<'_>>,
    limits: &RecallLimits,
    counter: &dyn TokenCounter,
) -> Result<RecalledMemory, RecallError> {
    let mut declared_ids = HashSet::with_capacity(sources.len());
    for source in &sources {
        if !declared_ids.insert(source.id.clone()) {
            return Err(RecallError::DuplicateSource {
                source_id: source.id.clone(),
            });
        }
    }
    let mut declarations = Vec::with_capacity(sources.len());
    let mut reads = Vec::with_capacity(sources.len());
    for source in sources {
        declarations.push(Declaration {
            id: source.id,
            essential: source.essential,
        });
        reads.push(source.read);
    }
    let work = async {
        let lookups = join::try_join_all(reads).await?;
        compose(&declarations, lookups, limits, counter)
    };
    tokio::time::timeout(limits.timeout(), work)
        .await
        .map_err(|_| RecallError::Deadline {
            timeout_ms: limits.timeout_ms(),
        })?
}
