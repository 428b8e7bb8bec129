//! The recall modes, each a [`RecallSource`] read through memory-core's [`recall`] with revalidation.
//!
//! - `direct`: the known `person/topic` key, read and revalidated (what an application that knows its
//!   keys does; the quality ceiling).
//! - `lexical`: the store's FTS5 BM25 search, through memory-core's lexical source.
//! - `exact`, `hnsw`: the semantic index (query embedding, search, its own revalidation), then the
//!   hits as excerpt candidates through memory-core's revalidation.
//! - `hybrid`: lexical and HNSW rankings fused by weighted reciprocal rank (RRF), then revalidated.

use std::collections::HashMap;

use memory_core::recall::{
    MemoryLookup, PassageId, RecallError, RecallLimits, RecallSource, RecalledMemory, SourceId,
    recall,
};
use memory_core::{
    ApproximateTokenCounter, DocumentId, LexicalSearch, MemoryAccess, MemoryError, MemoryKey,
    RecallCandidate, RevalidationLimits, revalidate,
};
use memory_sqlite::SqliteStore;
use memory_sqlite::vectors::SqliteVectorStore;
use semantic_index::{Embedder, IndexBounds, IndexKind, QueryLimits, SemanticError, SemanticIndex};
use serde::Serialize;

use crate::corpus::{EvalQuery, document_id};
use crate::metrics::RankedAnswer;

/// A recall mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Known keys.
    Direct,
    /// FTS5 BM25.
    Lexical,
    /// Exact cosine scan.
    Exact,
    /// HNSW approximate search.
    Hnsw,
    /// Lexical and HNSW fused by weighted RRF.
    Hybrid,
}

impl Mode {
    /// Every mode, in report order.
    pub const ALL: [Mode; 5] = [
        Mode::Direct,
        Mode::Lexical,
        Mode::Exact,
        Mode::Hnsw,
        Mode::Hybrid,
    ];

    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Lexical => "lexical",
            Self::Exact => "exact",
            Self::Hnsw => "hnsw",
            Self::Hybrid => "hybrid",
        }
    }
}

/// Hits each search is asked for; more than the ten that are scored, so revalidation has spares.
pub const SEARCH_DEPTH: usize = 20;
/// Passages a recall may cite: hit@10 needs ten.
pub const MAX_ITEMS: u32 = 10;
/// Deadline of one recall in the quality runs: far above any healthy recall, so it never decides quality.
pub const RECALL_TIMEOUT_MS: u64 = 5_000;
/// Most UTF-8 bytes of a query.
pub const MAX_QUERY_BYTES: usize = 4_096;
/// The id the mode's source is declared with.
pub const SOURCE_ID: &str = "memory";

/// Weighted reciprocal-rank fusion: `score(d) = w / (k + rank_lexical) + (1 - w) / (k + rank_semantic)`,
/// ranks starting at 1, absent rankings adding nothing.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HybridWeights {
    /// Weight of the lexical ranking, in [0, 1].
    pub lexical_weight: f64,
    /// The rank offset `k`.
    pub k: f64,
}

impl Default for HybridWeights {
    /// The textbook `k = 60`, equal weights; the harness tunes both on the corpus.
    fn default() -> Self {
        Self {
            lexical_weight: 0.5,
            k: 60.0,
        }
    }
}

/// Fuses two rankings of document ids with the library's reciprocal-rank fusion
/// ([`semantic_index::reciprocal_rank_fusion`]), lexical weight `w` and embedding weight `1 - w`; the
/// harness only chooses the weights, it does not fuse on its own.
pub fn fuse(lexical: &[String], semantic: &[String], weights: HybridWeights) -> Vec<String> {
    let params = semantic_index::HybridParams {
        k: weights.k,
        lexical_weight: weights.lexical_weight,
        embedding_weight: 1.0 - weights.lexical_weight,
        ..semantic_index::HybridParams::default()
    };
    semantic_index::reciprocal_rank_fusion(&params, lexical, semantic)
        .into_iter()
        .map(|fused| fused.item)
        .collect()
}

/// Runs recalls in every mode over one store and index.
pub struct Recaller<'a, E> {
    store: &'a SqliteStore,
    index: &'a SemanticIndex<E, SqliteVectorStore>,
    access: MemoryAccess,
    limits: RecallLimits,
    weights: HybridWeights,
}

impl<E> std::fmt::Debug for Recaller<'_, E> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Recaller")
            .field("weights", &self.weights)
            .finish_non_exhaustive()
    }
}

/// Maps a semantic-index failure onto recall's typed errors, keeping deadlines as deadlines.
fn semantic_error(error: SemanticError) -> RecallError {
    match error {
        SemanticError::Store(error) => RecallError::Source(error),
        SemanticError::Deadline { timeout_ms } => RecallError::Deadline { timeout_ms },
        other => RecallError::Source(MemoryError::storage("semantic query", other)),
    }
}

impl<'a, E: Embedder> Recaller<'a, E> {
    /// A recaller with the quality runs' limits.
    pub fn new(
        store: &'a SqliteStore,
        index: &'a SemanticIndex<E, SqliteVectorStore>,
        access: MemoryAccess,
        weights: HybridWeights,
    ) -> Result<Self, RecallError> {
        let limits = RecallLimits::builder()
            .max_sources(MAX_ITEMS)
            .max_items(MAX_ITEMS)
            .max_bytes(64 * 1024)
            .max_tokens(16 * 1024)
            .timeout_ms(RECALL_TIMEOUT_MS)
            .build()?;
        Ok(Self {
            store,
            index,
            access,
            limits,
            weights,
        })
    }

    /// The same recaller with other limits (the fault runs use a short deadline).
    #[must_use]
    pub fn with_limits(mut self, limits: RecallLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The hybrid weights.
    pub fn weights(&self) -> HybridWeights {
        self.weights
    }

    /// The limits recalls run under.
    pub fn limits(&self) -> &RecallLimits {
        &self.limits
    }

    /// The source of `mode` for `query`, declared essential or optional.
    pub fn source<'q>(
        &self,
        mode: Mode,
        query: &'q EvalQuery,
        essential: bool,
    ) -> Result<RecallSource<'q>, RecallError>
    where
        'a: 'q,
        E: 'q,
    {
        let id = SourceId::new(SOURCE_ID)?;
        let store = self.store;
        let index = self.index;
        let access = self.access.clone();
        let revalidation = RevalidationLimits::from(&self.limits);
        let weights = self.weights;
        let text = query.text.as_str();
        let key = MemoryKey {
            namespace: access.namespace.clone(),
            id: DocumentId::new(document_id(&query.person, &query.topic))?,
        };
        let read = async move {
            let candidates = match mode {
                Mode::Direct => vec![RecallCandidate::document(key, None)],
                Mode::Lexical => lexical_candidates(store, &access, text).await?,
                Mode::Exact => {
                    semantic_candidates(store, index, &access, text, IndexKind::Exact).await?
                }
                Mode::Hnsw => {
                    semantic_candidates(store, index, &access, text, IndexKind::Hnsw).await?
                }
                Mode::Hybrid => {
                    let (lexical, semantic) = tokio::join!(
                        lexical_candidates(store, &access, text),
                        semantic_candidates(store, index, &access, text, IndexKind::Hnsw)
                    );
                    hybrid_candidates(lexical?, semantic?, weights)
                }
            };
            let passages = revalidate(&candidates, &access, store, &revalidation).await?;
            Ok::<_, RecallError>(if passages.is_empty() {
                MemoryLookup::NoMatch
            } else {
                MemoryLookup::Found { passages }
            })
        };
        Ok(RecallSource::new(id, essential, read))
    }

    /// One recall of `query` in `mode`, the source declared optional (best that fits).
    pub async fn recall(
        &self,
        mode: Mode,
        query: &EvalQuery,
    ) -> Result<RecalledMemory, RecallError> {
        let source = self.source(mode, query, false)?;
        recall(vec![source], &self.limits, &ApproximateTokenCounter).await
    }
}

async fn lexical_candidates(
    store: &SqliteStore,
    access: &MemoryAccess,
    text: &str,
) -> Result<Vec<RecallCandidate>, RecallError> {
    let hits = store.search(access, text, SEARCH_DEPTH).await?;
    Ok(hits
        .into_iter()
        .map(|hit| RecallCandidate::document(hit.key, Some(hit.revision)))
        .collect())
}

async fn semantic_candidates<E: Embedder>(
    store: &SqliteStore,
    index: &SemanticIndex<E, SqliteVectorStore>,
    access: &MemoryAccess,
    text: &str,
    kind: IndexKind,
) -> Result<Vec<RecallCandidate>, RecallError> {
    let bounds = IndexBounds::for_dimensions(index.profile().dimensions);
    let limits = QueryLimits::new(
        MAX_QUERY_BYTES,
        SEARCH_DEPTH,
        bounds.max_chunks,
        -1.0,
        RECALL_TIMEOUT_MS,
        kind,
    );
    let result = index
        .query(store, access, text, limits)
        .await
        .map_err(semantic_error)?;
    result
        .hits
        .into_iter()
        .map(|hit| -> Result<RecallCandidate, RecallError> {
            let passage = PassageId::new(format!("{}#chunk-{}", hit.key.id.as_str(), hit.ordinal))?;
            Ok(RecallCandidate::excerpt(
                hit.key,
                Some(hit.revision),
                passage,
                hit.excerpt,
            ))
        })
        .collect()
}

fn hybrid_candidates(
    lexical: Vec<RecallCandidate>,
    semantic: Vec<RecallCandidate>,
    weights: HybridWeights,
) -> Vec<RecallCandidate> {
    let ids = |candidates: &[RecallCandidate]| -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        candidates
            .iter()
            .map(|candidate| candidate.key.id.as_str().to_owned())
            .filter(|id| seen.insert(id.clone()))
            .collect()
    };
    let fused = fuse(&ids(&lexical), &ids(&semantic), weights);
    let mut by_id: HashMap<String, RecallCandidate> = HashMap::new();
    // A document's whole text is the passage: the two rankings' hits of one document become one candidate.
    for candidate in lexical.into_iter().chain(semantic) {
        by_id
            .entry(candidate.key.id.as_str().to_owned())
            .or_insert_with(|| {
                RecallCandidate::document(candidate.key.clone(), candidate.revision.clone())
            });
    }
    fused
        .into_iter()
        .filter_map(|id| by_id.remove(&id))
        .collect()
}

/// The ranked answer of a recall: source document ids in citation order, with their texts.
pub fn ranked(recalled: &RecalledMemory) -> RankedAnswer {
    RankedAnswer {
        ranked: recalled
            .passages
            .iter()
            .map(|passage| {
                (
                    passage.passage.source.id.as_str().to_owned(),
                    passage.passage.content.text.clone(),
                )
            })
            .collect(),
    }
}
