//! Recall and sync plumbing: which search backs each recall mode, and what `memory_sync` waits for.
//!
//! Kept in one module so wiring a new index touches nothing else:
//! - `lexical`: the store's full-text (BM25) index. It is updated in the same transaction as every write,
//!   so a committed write is recallable at once. It needs no model.
//! - `exact`, `hnsw`: the semantic index ([`crate::semantic`]): the query is embedded, the exact scan or
//!   the HNSW graph ranks chunks, the index revalidates its hits against the current documents, and each
//!   hit becomes an excerpt candidate with semantic-index's chunk passage id
//!   ([`semantic_index::recall::chunk_passage_id`]). Each passage's score is its chunk's cosine
//!   similarity.
//! - `hybrid` (the default): the lexical and the HNSW rankings of documents fused by semantic-index's
//!   reciprocal rank fusion with its default parameters (see [`semantic_index::recall::HybridParams`]);
//!   a document found lexically becomes a whole-document candidate, one found only by embedding its
//!   chunks. Each passage is scored by its document's fused score.
//! - Every mode's candidates then go through memory-core's revalidation and recall composition, so
//!   withdrawn, revoked and stale documents are never recalled and the limits hold in every mode.
//! - Without a semantic index ([`RecallService::lexical_only`]) or when the model cannot be loaded, the
//!   semantic modes are refused as `unavailable`; never a lexical answer in disguise.
//! - `memory_sync` answers the change-feed head once the semantic index reflects it (see
//!   [`crate::semantic::SemanticBackend::sync`]); without a semantic index, the transactional lexical
//!   index already does.
//!
//! Decisions: semantic-index's own recall sources (`SemanticRecall`, `HybridRecall`) are not used
//! because their passages carry no score, which the wire contract requires; the price is that a
//! semantic hit's document is read twice (by the index's revalidation and by memory-core's). The
//! store's source is declared optional, so a recall answers the best passages that fit
//! the limits rather than failing when more match than fit. `timeout_ms` bounds the search, revalidation
//! and composition; loading the model and a one-shot command's catch-up indexing happen before it starts
//! (they are the implicit sync of a semantic recall, not the recall). Token counts use memory-core's
//! approximate counter in every mode: the counter should be the consuming agent's model's, which is not
//! the embedding model, and one limit should mean the same thing whatever the mode.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use memory_core::recall::{
    MemoryLookup, RecallError, RecallLimits, RecallSource, RecalledMemory, SourceId, SourceOutcome,
    SourceStatus, recall,
};
use memory_core::revalidate::CandidatePassage;
use memory_core::{
    ApproximateTokenCounter, LexicalSearch, MemoryAccess, MemoryError, MemoryKey, MemoryScope,
    RecallCandidate, RevalidationLimits, revalidate,
};
use semantic_index::recall::{HybridParams, chunk_passage_id, reciprocal_rank_fusion};
use semantic_index::{IndexBounds, IndexKind, QueryLimits, SemanticError};

use crate::refusal::Refusal;
use crate::semantic::{MemorySemanticIndex, SemanticBackend, refusal_of};
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
/// Semantic hits whose cosine similarity with the query is below this are dropped. all-MiniLM-L6-v2
/// scores unrelated English sentences around 0 to 0.15 and paraphrases well above 0.3, so the floor
/// keeps an unrelated query from filling the answer with whatever happens to rank first.
pub const MIN_SEMANTIC_SCORE: f32 = 0.2;

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
    semantic: Option<Arc<SemanticBackend<S>>>,
}

impl<S> std::fmt::Debug for RecallService<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RecallService")
            .field("semantic", &self.semantic.is_some())
            .finish_non_exhaustive()
    }
}

impl From<RecallError> for Refusal {
    fn from(error: RecallError) -> Self {
        Self::new(error.kind(), error.to_string())
    }
}

/// Candidates in rank order, with the score each passage reports.
#[derive(Debug, Default)]
struct Ranked {
    candidates: Vec<RecallCandidate>,
    scores: Scores,
}

/// Scores by passage id, and by document id for passages that revalidation widens to the whole
/// document (an excerpt that is the whole current text).
#[derive(Debug, Default)]
struct Scores {
    by_passage: HashMap<String, f64>,
    by_document: HashMap<String, f64>,
}

impl Scores {
    /// Records a score; the first (best-ranked) one of a document wins.
    fn record(&mut self, document: &str, passage: Option<&str>, score: f64) {
        if let Some(passage) = passage {
            self.by_passage.entry(passage.to_owned()).or_insert(score);
        }
        self.by_document.entry(document.to_owned()).or_insert(score);
    }

    fn of(&self, document: &str, passage: &str) -> f64 {
        self.by_passage
            .get(passage)
            .or_else(|| self.by_document.get(document))
            .copied()
            .unwrap_or(0.0)
    }
}

impl<S: Store> RecallService<S> {
    /// Recall over `store` with its lexical index only; the semantic modes are refused as
    /// `unavailable`.
    pub fn lexical_only(store: Arc<S>) -> Self {
        Self {
            store,
            semantic: None,
        }
    }

    /// Recall over `store` with its lexical index and `semantic`.
    pub fn with_semantic(store: Arc<S>, semantic: Arc<SemanticBackend<S>>) -> Self {
        Self {
            store,
            semantic: Some(semantic),
        }
    }

    /// The semantic index, when one is configured.
    pub fn semantic(&self) -> Option<&Arc<SemanticBackend<S>>> {
        self.semantic.as_ref()
    }

    /// `memory_recall`.
    pub async fn recall(&self, query: RecallQuery) -> Result<RecallResult, Refusal> {
        let index = match query.mode {
            RecallMode::Lexical => None,
            RecallMode::Exact | RecallMode::Hnsw | RecallMode::Hybrid => {
                let Some(semantic) = &self.semantic else {
                    return Err(Refusal::unavailable(format!(
                        "recall mode {} is not available: no semantic index is configured",
                        query.mode.as_str()
                    )));
                };
                Some(semantic.index_for_query().await?)
            }
        };
        let RecallQuery {
            access,
            text,
            mode,
            limits,
        } = query;
        let depth = search_depth(&limits);
        let store = self.store.as_ref();
        let revalidation = RevalidationLimits::from(&limits);
        let scores: Mutex<Scores> = Mutex::new(Scores::default());
        let failure: Mutex<Option<Refusal>> = Mutex::new(None);
        let hybrid = HybridParams {
            lexical_candidates: depth,
            max_documents: depth,
            ..HybridParams::default()
        };
        let lookup = async {
            let semantic = index.as_deref().map(|index| SemanticSearch {
                index,
                store,
                access: &access,
                text: &text,
                depth,
                timeout_ms: limits.timeout_ms(),
                failure: &failure,
            });
            let ranked = match (mode, semantic) {
                (RecallMode::Exact, Some(semantic)) => semantic.ranking(IndexKind::Exact).await?,
                (RecallMode::Hnsw, Some(semantic)) => semantic.ranking(IndexKind::Hnsw).await?,
                (RecallMode::Hybrid, Some(semantic)) => {
                    let (lexical, semantic) = tokio::join!(
                        lexical_ranking(store, &access, &text, hybrid.lexical_candidates),
                        semantic.ranking(IndexKind::Hnsw)
                    );
                    hybrid_ranking(lexical?, semantic?, &hybrid)
                }
                _ => lexical_ranking(store, &access, &text, depth).await?,
            };
            let passages = revalidate(&ranked.candidates, &access, store, &revalidation).await?;
            if let Ok(mut scores) = scores.lock() {
                *scores = ranked.scores;
            }
            Ok(if passages.is_empty() {
                MemoryLookup::NoMatch
            } else {
                MemoryLookup::Found { passages }
            })
        };
        let source = RecallSource::optional(SourceId::new(STORE_SOURCE_ID)?, lookup);
        let recalled = match recall(vec![source], &limits, &ApproximateTokenCounter).await {
            Ok(recalled) => recalled,
            Err(error) => {
                return Err(match failure.into_inner().ok().flatten() {
                    Some(refusal) => refusal,
                    None => Refusal::from(error),
                });
            }
        };
        let scores = scores.into_inner().unwrap_or_default();
        Ok(to_wire(recalled, |document, passage| {
            scores.of(document, passage)
        }))
    }

    /// `memory_sync`: waits until every write committed before the call is searchable in every
    /// configured mode, and answers the change-sequence position reached.
    pub async fn sync(&self) -> Result<SyncResult, Refusal> {
        let head = match &self.semantic {
            Some(semantic) => semantic.sync().await?,
            None => self.store.head().await?,
        };
        Ok(SyncResult { indexed: head.0 })
    }
}

/// Search hits asked of each index: twice the items, within bounds.
fn search_depth(limits: &RecallLimits) -> usize {
    usize::try_from(limits.max_items())
        .unwrap_or(usize::MAX)
        .saturating_mul(2)
        .clamp(MIN_SEARCH_HITS, MAX_SEARCH_HITS)
}

async fn lexical_ranking<S: LexicalSearch>(
    store: &S,
    access: &MemoryAccess,
    text: &str,
    depth: usize,
) -> Result<Ranked, RecallError> {
    let hits = store.search(access, text, depth).await?;
    let mut ranked = Ranked::default();
    for hit in hits {
        ranked.scores.record(hit.key.id.as_str(), None, hit.score);
        ranked
            .candidates
            .push(RecallCandidate::document(hit.key, Some(hit.revision)));
    }
    Ok(ranked)
}

/// One semantic search of a recall.
struct SemanticSearch<'a, S> {
    index: &'a MemorySemanticIndex,
    store: &'a S,
    access: &'a MemoryAccess,
    text: &'a str,
    depth: usize,
    timeout_ms: u64,
    failure: &'a Mutex<Option<Refusal>>,
}

impl<S: Store> SemanticSearch<'_, S> {
    /// The index's revalidated hits as excerpt candidates, best first.
    async fn ranking(&self, kind: IndexKind) -> Result<Ranked, RecallError> {
        let index = self.index;
        let bounds = IndexBounds::for_dimensions(index.profile().dimensions);
        let query_limits = QueryLimits::new(
            MAX_QUERY_BYTES,
            self.depth,
            // Scan every chunk rather than rank a prefix; the index's own bounds cap the count.
            bounds.max_chunks,
            MIN_SEMANTIC_SCORE,
            self.timeout_ms,
            kind,
        );
        let result = index
            .query(self.store, self.access, self.text, query_limits)
            .await
            .map_err(|error| recall_error(error, self.failure))?;
        let mut ranked = Ranked::default();
        for hit in result.hits {
            let score = f64::from(hit.score);
            // The passage id semantic-index's own recall sources give a chunk, so the same evidence keeps one
            // id whichever way it is recalled.
            let passage_id = chunk_passage_id(index.digest(), hit.ordinal)?;
            ranked
                .scores
                .record(hit.key.id.as_str(), Some(passage_id.as_str()), score);
            let candidate =
                RecallCandidate::excerpt(hit.key, Some(hit.revision), passage_id, hit.excerpt);
            ranked.candidates.push(candidate);
        }
        Ok(ranked)
    }
}

/// A semantic-index failure as a recall error of the same kind. Failures recall has no variant for
/// (the embedder or its task failing: `unavailable`) are parked in `failure`, which the caller answers
/// instead of the placeholder error.
fn recall_error(error: SemanticError, failure: &Mutex<Option<Refusal>>) -> RecallError {
    match error {
        SemanticError::Store(error) => RecallError::Source(error),
        SemanticError::Deadline { timeout_ms } => RecallError::Deadline { timeout_ms },
        SemanticError::Budget { limit, max, actual } => RecallError::Budget { limit, max, actual },
        SemanticError::TooLarge { limit, max, actual } => {
            RecallError::Source(MemoryError::TooLarge { limit, max, actual })
        }
        SemanticError::InvalidInput { field, reason } => {
            RecallError::Source(MemoryError::InvalidInput { field, reason })
        }
        other => {
            let refusal = refusal_of(other);
            let placeholder = MemoryError::storage("semantic query", refusal.clone());
            if let Ok(mut failure) = failure.lock() {
                failure.get_or_insert(refusal);
            }
            RecallError::Source(placeholder)
        }
    }
}

/// Fuses the lexical and semantic rankings of documents with semantic-index's reciprocal rank fusion
/// (a semantic ranking ranks each document by its best chunk) and keeps `max_documents` of them, as
/// semantic-index's hybrid recall does: a document the lexical search found becomes its whole current
/// text (the match may lie anywhere in it), one only the embedding found becomes its chunks, best first.
/// Every passage reports its document's fused score.
fn hybrid_ranking(lexical: Ranked, semantic: Ranked, params: &HybridParams) -> Ranked {
    let lexical_documents = documents_in_order(&lexical.candidates);
    let semantic_documents = documents_in_order(&semantic.candidates);
    let mut chunks: HashMap<MemoryKey, Vec<RecallCandidate>> = HashMap::new();
    for candidate in semantic.candidates {
        chunks
            .entry(candidate.key.clone())
            .or_default()
            .push(candidate);
    }
    let mut fused = reciprocal_rank_fusion(params, &lexical_documents, &semantic_documents);
    fused.truncate(params.max_documents);
    let mut ranked = Ranked::default();
    for item in fused {
        let document = item.item.id.as_str().to_owned();
        let candidates = if item.lexical_rank.is_some() {
            lexical
                .candidates
                .iter()
                .find(|candidate| candidate.key == item.item)
                .cloned()
                .into_iter()
                .collect()
        } else {
            chunks.remove(&item.item).unwrap_or_default()
        };
        for candidate in candidates {
            let passage = match &candidate.passage {
                CandidatePassage::Excerpt { passage_id, .. } => Some(passage_id.as_str()),
                CandidatePassage::Document => None,
            };
            ranked.scores.record(&document, passage, item.score);
            ranked.candidates.push(candidate);
        }
    }
    ranked
}

/// The distinct documents of `candidates`, in order of first appearance.
fn documents_in_order(candidates: &[RecallCandidate]) -> Vec<MemoryKey> {
    let mut seen = HashSet::new();
    candidates
        .iter()
        .filter(|candidate| seen.insert(&candidate.key))
        .map(|candidate| candidate.key.clone())
        .collect()
}

/// The wire form of a recall result; `score_of` gives the score of a (document id, passage id).
fn to_wire(recalled: RecalledMemory, score_of: impl Fn(&str, &str) -> f64) -> RecallResult {
    let passages = recalled
        .passages
        .into_iter()
        .map(|recalled| {
            let passage = recalled.passage;
            WirePassage {
                score: score_of(passage.source.id.as_str(), passage.passage_id.as_str()),
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

#[cfg(test)]
mod tests {
    use memory_core::recall::PassageId;
    use memory_core::{DocumentId, NamespaceAddress, Revision};

    use super::*;

    fn key(id: &str) -> MemoryKey {
        MemoryKey {
            namespace: NamespaceAddress::parse(r#"[1,"notes",1,{"user":"u"}]"#).expect("address"),
            id: DocumentId::new(id).expect("id"),
        }
    }

    fn lexical(ids: &[&str]) -> Ranked {
        let mut ranked = Ranked::default();
        for (rank, id) in ids.iter().enumerate() {
            ranked.scores.record(id, None, 10.0 - rank as f64);
            ranked.candidates.push(RecallCandidate::document(
                key(id),
                Some(Revision::new("r1").expect("revision")),
            ));
        }
        ranked
    }

    fn chunks(hits: &[(&str, u32)]) -> Ranked {
        let mut ranked = Ranked::default();
        for (id, ordinal) in hits {
            let passage = PassageId::new(format!("chunk:{ordinal}")).expect("passage id");
            ranked.scores.record(id, Some(passage.as_str()), 0.5);
            ranked.candidates.push(RecallCandidate::excerpt(
                key(id),
                Some(Revision::new("r1").expect("revision")),
                passage,
                "excerpt",
            ));
        }
        ranked
    }

    fn described(ranked: &Ranked) -> Vec<String> {
        ranked
            .candidates
            .iter()
            .map(|candidate| match &candidate.passage {
                CandidatePassage::Document => candidate.key.id.as_str().to_owned(),
                CandidatePassage::Excerpt { passage_id, .. } => {
                    format!("{}/{}", candidate.key.id.as_str(), passage_id.as_str())
                }
            })
            .collect()
    }

    #[test]
    fn hybrid_keeps_lexical_documents_whole_and_embedding_only_documents_as_chunks() {
        let params = HybridParams::default();
        // "b" is ranked by both, so it leads; "c" is found by embedding only, through two chunks.
        let fused = hybrid_ranking(
            lexical(&["a", "b"]),
            chunks(&[("b", 0), ("c", 1), ("c", 0)]),
            &params,
        );
        assert_eq!(described(&fused), ["b", "a", "c/chunk:1", "c/chunk:0"]);
        let both = fused.scores.of("b", "b");
        let lexical_only = fused.scores.of("a", "a");
        let embedding_only = fused.scores.of("c", "chunk:0");
        assert!(both > lexical_only && lexical_only > embedding_only);
        assert_eq!(
            fused.scores.of("c", "chunk:1"),
            embedding_only,
            "a document's chunks share its fused score"
        );
    }

    #[test]
    fn hybrid_keeps_at_most_max_documents() {
        let params = HybridParams {
            max_documents: 2,
            ..HybridParams::default()
        };
        let fused = hybrid_ranking(lexical(&["a", "b", "c"]), chunks(&[("d", 0)]), &params);
        assert_eq!(described(&fused), ["a", "d/chunk:0"]);
    }

    #[test]
    fn scores_fall_back_to_the_document_when_a_passage_was_widened() {
        let mut scores = Scores::default();
        scores.record("doc", Some("chunk:0"), 0.7);
        scores.record("doc", Some("chunk:1"), 0.4);
        assert_eq!(scores.of("doc", "chunk:1"), 0.4);
        // Revalidation gives an excerpt that is the whole text the document id as passage id.
        assert_eq!(scores.of("doc", "doc"), 0.7);
        assert_eq!(scores.of("other", "other"), 0.0);
    }
}
