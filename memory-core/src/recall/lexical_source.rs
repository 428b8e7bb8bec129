//! A recall source over any store that offers lexical search and reads: query, hits, candidates,
//! revalidation, lookup.

use crate::document::MemoryAccess;
use crate::ports::{LexicalSearch, MemoryReader};
use crate::recall::error::RecallError;
use crate::recall::ids::SourceId;
use crate::recall::lookup::{MemoryLookup, RecallSource};
use crate::revalidate::{RecallCandidate, RevalidationLimits, revalidate};

/// Default number of search hits asked for.
pub const DEFAULT_MAX_HITS: usize = 16;

/// Searches `store` for `query` as `access`, revalidates the hits against the same store and answers
/// `Found` (ranked as the search ranked) or `NoMatch`. Search and read failures keep their type.
pub async fn lexical_lookup<S: LexicalSearch + MemoryReader>(
    store: &S,
    access: &MemoryAccess,
    query: &str,
    max_hits: usize,
    limits: &RevalidationLimits,
) -> Result<MemoryLookup, RecallError> {
    if max_hits == 0 {
        return Ok(MemoryLookup::NoMatch);
    }
    let hits = store.search(access, query, max_hits).await?;
    let candidates: Vec<RecallCandidate> = hits
        .into_iter()
        .map(|hit| RecallCandidate::document(hit.key, Some(hit.revision)))
        .collect();
    let passages = revalidate(&candidates, access, store, limits).await?;
    Ok(if passages.is_empty() {
        MemoryLookup::NoMatch
    } else {
        MemoryLookup::Found { passages }
    })
}

/// Builds a [`RecallSource`] that runs [`lexical_lookup`].
///
/// ```text
/// LexicalRecall::new(&store, access, "queue retry policy").max_hits(8).into_source(source_id, false)
/// ```
#[derive(Debug, Clone)]
pub struct LexicalRecall<'a, S> {
    store: &'a S,
    access: MemoryAccess,
    query: String,
    max_hits: usize,
    limits: RevalidationLimits,
}

impl<'a, S: LexicalSearch + MemoryReader> LexicalRecall<'a, S> {
    /// A lexical recall of `query` for `access`, with [`DEFAULT_MAX_HITS`] hits and the default
    /// revalidation budget.
    pub fn new(store: &'a S, access: MemoryAccess, query: impl Into<String>) -> Self {
        Self {
            store,
            access,
            query: query.into(),
            max_hits: DEFAULT_MAX_HITS,
            limits: RevalidationLimits::default(),
        }
    }

    /// How many hits to ask the search for.
    #[must_use]
    pub fn max_hits(mut self, max_hits: usize) -> Self {
        self.max_hits = max_hits;
        self
    }

    /// The revalidation budget (usually `RevalidationLimits::from(&recall_limits)`).
    #[must_use]
    pub fn revalidation_limits(mut self, limits: RevalidationLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Runs the lookup now.
    pub async fn lookup(&self) -> Result<MemoryLookup, RecallError> {
        lexical_lookup(
            self.store,
            &self.access,
            &self.query,
            self.max_hits,
            &self.limits,
        )
        .await
    }

    /// The recall source declaration.
    pub fn into_source(self, id: SourceId, essential: bool) -> RecallSource<'a> {
        RecallSource::new(id, essential, async move { self.lookup().await })
    }
}
