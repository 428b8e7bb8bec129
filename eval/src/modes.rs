//! The recall modes, each a [`RecallSource`] read through memory-core's [`recall`] with revalidation.
//!
//! - `direct`: the known `person/topic` key, read and revalidated (what an application that knows its
//!   keys does; the quality ceiling).
//! - `lexical`: the store's BM25 search (per namespace), through memory-core's lexical source.
//! - `exact`, `hnsw`: the semantic index (query embedding, search, its own revalidation), then the
//!   hits as excerpt candidates through memory-core's revalidation.
//! - `hybrid`: the product's hybrid source ([`semantic_index::HybridRecall`] with its default
//!   [`semantic_index::HybridParams`], HNSW side), exactly what `memory recall` runs: the harness has no
//!   fusion of its own, so the figure it reports is the product's.

use std::sync::Arc;

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
    /// BM25 over the caller's namespace.
    Lexical,
    /// Exact cosine scan.
    Exact,
    /// HNSW approximate search.
    Hnsw,
    /// Lexical and HNSW fused by the product's hybrid (normalized score fusion by default).
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

/// Runs recalls in every mode over one store and index.
pub struct Recaller<'a, E> {
    store: &'a Arc<SqliteStore>,
    index: &'a Arc<SemanticIndex<E, SqliteVectorStore>>,
    access: MemoryAccess,
    limits: RecallLimits,
}

impl<E> std::fmt::Debug for Recaller<'_, E> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Recaller")
            .field("limits", &self.limits)
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
        store: &'a Arc<SqliteStore>,
        index: &'a Arc<SemanticIndex<E, SqliteVectorStore>>,
        access: MemoryAccess,
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
        })
    }

    /// The same recaller with other limits (the fault runs use a short deadline).
    #[must_use]
    pub fn with_limits(mut self, limits: RecallLimits) -> Self {
        self.limits = limits;
        self
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
                    return hybrid_lookup(store, index, access, text, &revalidation).await;
                }
            };
            let passages = revalidate(&candidates, &access, &**store, &revalidation).await?;
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

/// The product's hybrid recall with its defaults: the same source, parameters, semantic score floor and
/// revalidation that `memory recall --mode hybrid` runs (memory-cli asks each side for at least the
/// search depth).
async fn hybrid_lookup<E: Embedder>(
    store: &Arc<SqliteStore>,
    index: &Arc<SemanticIndex<E, SqliteVectorStore>>,
    access: MemoryAccess,
    text: &str,
    revalidation: &RevalidationLimits,
) -> Result<MemoryLookup, RecallError> {
    let bounds = IndexBounds::for_dimensions(index.profile().dimensions);
    let limits = QueryLimits::new(
        MAX_QUERY_BYTES,
        SEARCH_DEPTH,
        bounds.max_chunks,
        memory_service::recall_service::MIN_SEMANTIC_SCORE,
        RECALL_TIMEOUT_MS,
        IndexKind::Hnsw,
    );
    let defaults = semantic_index::HybridParams::default();
    let params = semantic_index::HybridParams {
        lexical_candidates: SEARCH_DEPTH.max(defaults.lexical_candidates),
        max_documents: SEARCH_DEPTH,
        ..defaults
    };
    semantic_index::recall::hybrid_lookup(
        index,
        store,
        &access,
        text,
        limits,
        &params,
        revalidation,
    )
    .await
    .map(semantic_index::recall::ScoredLookup::into_lookup)
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
