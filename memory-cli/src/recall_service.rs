//! Recall and sync plumbing: which search backs each recall mode, and what `memory_sync` waits for.
//!
//! Kept in one module so wiring a new index touches nothing else. Today:
//! - `lexical`: the store's full-text index through memory-core's revalidating recall. The index is
//!   updated in the same transaction as every write, so a committed write is recallable at once.
//! - `exact`, `hnsw`, `hybrid`: refused as `unavailable` until a semantic index is wired here (see
//!   [`RecallService::recall`]); never a lexical answer in disguise.
//! - `memory_sync` answers the change-feed head: with only the transactional lexical index, everything
//!   committed before the call is already searchable by every available mode. A semantic indexer, once
//!   wired, must be waited for here.
//!
//! Decisions: the lexical source is declared optional, so a recall answers the best passages that fit
//! the limits rather than failing when more match than fit. Each passage's score is the BM25-based
//! score of the search hit it came from.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memory_core::recall::{
    MemoryLookup, RecallError, RecallLimits, RecallSource, RecalledMemory, SourceId, SourceOutcome,
    SourceStatus, recall,
};
use memory_core::{
    ApproximateTokenCounter, MemoryAccess, MemoryScope, RecallCandidate, RevalidationLimits,
    revalidate,
};

use crate::refusal::Refusal;
use crate::service::Store;
use crate::wire::{
    RecallArguments, RecallMode, RecallResult, SyncResult, WireOutcome, WirePassage,
    WirePassageSource, address_of,
};

/// Most UTF-8 bytes in a recall query; queries are words for an index, not documents.
pub const MAX_QUERY_BYTES: usize = 65_536;
/// Fewest search hits asked for, so revalidation has spares when some hits turn out stale.
pub const MIN_SEARCH_HITS: usize = 16;
/// Most search hits asked for, whatever `max_items` says.
pub const MAX_SEARCH_HITS: usize = 256;
/// The declaration id of the store's own source in outcomes.
pub const STORE_SOURCE_ID: &str = "memory";

/// A validated recall request: namespace, scope, query size and limits checked before any search.
#[derive(Debug, Clone)]
pub struct RecallQuery {
    access: MemoryAccess,
    text: String,
    mode: RecallMode,
    limits: RecallLimits,
}

impl RecallQuery {
    /// Validates the wire arguments.
    pub fn new(arguments: RecallArguments) -> Result<Self, Refusal> {
        let access = MemoryAccess {
            namespace: address_of(&arguments.namespace)?,
            scope: MemoryScope::new(arguments.scope.as_str())?,
        };
        if arguments.query.len() > MAX_QUERY_BYTES {
            return Err(Refusal::too_large(
                "query bytes",
                MAX_QUERY_BYTES as u64,
                arguments.query.len() as u64,
            ));
        }
        let limits = RecallLimits::builder()
            .max_sources(1)
            .max_items(arguments.limits.max_items)
            .max_bytes(arguments.limits.max_bytes)
            .max_tokens(arguments.limits.max_tokens)
            .timeout_ms(arguments.limits.timeout_ms)
            .build()?;
        Ok(Self {
            access,
            text: arguments.query,
            mode: arguments.mode,
            limits,
        })
    }

    /// The requested mode.
    pub fn mode(&self) -> RecallMode {
        self.mode
    }
}

/// The recall modes and sync over one store.
pub struct RecallService<S> {
    store: Arc<S>,
}

impl<S> std::fmt::Debug for RecallService<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RecallService")
            .finish_non_exhaustive()
    }
}

impl From<RecallError> for Refusal {
    fn from(error: RecallError) -> Self {
        Self::new(error.kind(), error.to_string())
    }
}

impl<S: Store> RecallService<S> {
    /// Recall over `store` with its lexical index only.
    pub fn lexical_only(store: Arc<S>) -> Self {
        Self { store }
    }

    /// `memory_recall`.
    pub async fn recall(&self, query: RecallQuery) -> Result<RecallResult, Refusal> {
        match query.mode {
            RecallMode::Lexical => self.lexical(query.access, &query.text, &query.limits).await,
            // Wire the semantic index here: exact and hnsw query it with revalidation; hybrid fuses it
            // with the lexical hits.
            RecallMode::Exact | RecallMode::Hnsw | RecallMode::Hybrid => {
                Err(Refusal::unavailable(format!(
                    "recall mode {} is not available: no semantic index is configured",
                    query.mode.as_str()
                )))
            }
        }
    }

    async fn lexical(
        &self,
        access: MemoryAccess,
        query: &str,
        limits: &RecallLimits,
    ) -> Result<RecallResult, Refusal> {
        let max_hits = usize::try_from(limits.max_items())
            .unwrap_or(usize::MAX)
            .saturating_mul(2)
            .clamp(MIN_SEARCH_HITS, MAX_SEARCH_HITS);
        let scores: Mutex<HashMap<String, f64>> = Mutex::new(HashMap::new());
        let store = self.store.as_ref();
        let revalidation = RevalidationLimits::from(limits);
        let lookup = async {
            let hits = store.search(&access, query, max_hits).await?;
            let mut candidates = Vec::with_capacity(hits.len());
            if let Ok(mut scores) = scores.lock() {
                for hit in &hits {
                    scores.insert(hit.key.id.as_str().to_owned(), hit.score);
                }
            }
            for hit in hits {
                candidates.push(RecallCandidate::document(hit.key, Some(hit.revision)));
            }
            let passages = revalidate(&candidates, &access, store, &revalidation).await?;
            Ok(if passages.is_empty() {
                MemoryLookup::NoMatch
            } else {
                MemoryLookup::Found { passages }
            })
        };
        let source = RecallSource::optional(SourceId::new(STORE_SOURCE_ID)?, lookup);
        let recalled = recall(vec![source], limits, &ApproximateTokenCounter).await?;
        let scores = scores.into_inner().unwrap_or_default();
        Ok(to_wire(recalled, |source_id| {
            scores.get(source_id).copied().unwrap_or(0.0)
        }))
    }

    /// `memory_sync`: waits until every write committed before the call is searchable in every
    /// available mode, and answers the change-sequence position reached.
    pub async fn sync(&self) -> Result<SyncResult, Refusal> {
        let head = self.store.head().await?;
        Ok(SyncResult { indexed: head.0 })
    }
}

/// The wire form of a recall result; `score_of` gives the score of a source document id.
fn to_wire(recalled: RecalledMemory, score_of: impl Fn(&str) -> f64) -> RecallResult {
    let passages = recalled
        .passages
        .into_iter()
        .map(|recalled| {
            let passage = recalled.passage;
            WirePassage {
                score: score_of(passage.source.id.as_str()),
                source: WirePassageSource {
                    id: passage.source.id.as_str().to_owned(),
                    locator: passage.source.locator,
                    revision: passage
                        .source
                        .revision
                        .map(|revision| revision.as_str().to_owned()),
                },
                passage_id: passage.passage_id.as_str().to_owned(),
                content: passage.content,
                citation: recalled.citation.to_string(),
            }
        })
        .collect();
    RecallResult {
        text: recalled.text,
        passages,
        outcomes: recalled.outcomes.into_iter().map(outcome_to_wire).collect(),
    }
}

fn outcome_to_wire(outcome: SourceOutcome) -> WireOutcome {
    let (status, reason) = match outcome.status {
        SourceStatus::Found => ("found", None),
        SourceStatus::NoMatch => ("no-match", None),
        SourceStatus::Unavailable { reason } => ("unavailable", Some(reason)),
        SourceStatus::InsufficientFreshness => ("insufficient-freshness", None),
    };
    WireOutcome {
        id: outcome.id.as_str().to_owned(),
        essential: outcome.essential,
        status: status.to_owned(),
        reason,
        selected: outcome.selected as u64,
        deduplicated: outcome.deduplicated as u64,
        omitted: outcome.omitted as u64,
    }
}
