//! The [`RecallSource`]s over a [`SemanticIndex`]: [`SemanticRecall`] runs
//! [`semantic_lookup`](super::semantic_lookup) and [`HybridRecall`] runs
//! [`hybrid_lookup`](super::hybrid_lookup), each holding what one recall needs (the index, the
//! store, the access, the query and its limits) so memory-core's [`memory_core::recall()`] can call
//! it.

use std::sync::Arc;

use memory_core::recall::{RecallSource, SourceId};
use memory_core::vectors::VectorStore;
use memory_core::{
    LexicalSearch, MemoryAccess, MemoryLookup, MemoryReader, RecallError, RevalidationLimits,
};

use super::{
    AnsweredLookup, HybridParams, ScoredLookup, hybrid_lookup_answered, semantic_lookup_answered,
};
use crate::cross_encoder::CrossEncoder;
use crate::embed::Embedder;
use crate::engine::SemanticIndex;
use crate::limits::QueryLimits;

/// Builds a [`RecallSource`] that runs [`semantic_lookup`](super::semantic_lookup).
///
/// ```text
/// SemanticRecall::new(index.clone(), store.clone(), access, "what does Ada eat", limits)
///     .into_source(id, false)
/// ```
pub struct SemanticRecall<E, S, R> {
    index: Arc<SemanticIndex<E, S>>,
    reader: Arc<R>,
    access: MemoryAccess,
    query: String,
    limits: QueryLimits,
    revalidation: RevalidationLimits,
}

impl<E, S, R> std::fmt::Debug for SemanticRecall<E, S, R> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SemanticRecall")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<E, S, R> SemanticRecall<E, S, R>
where
    E: Embedder,
    S: VectorStore + 'static,
    R: MemoryReader + 'static,
{
    /// An embedding recall of `query` for `access` within `limits`, with the default revalidation
    /// budget.
    pub fn new(
        index: Arc<SemanticIndex<E, S>>,
        reader: Arc<R>,
        access: MemoryAccess,
        query: impl Into<String>,
        limits: QueryLimits,
    ) -> Self {
        Self {
            index,
            reader,
            access,
            query: query.into(),
            limits,
            revalidation: RevalidationLimits::default(),
        }
    }

    /// The revalidation budget (usually `RevalidationLimits::from(&recall_limits)`).
    #[must_use]
    pub fn revalidation_limits(mut self, limits: RevalidationLimits) -> Self {
        self.revalidation = limits;
        self
    }

    /// Runs the lookup now, keeping each passage's cosine similarity.
    pub async fn lookup_scored(&self) -> Result<ScoredLookup, RecallError> {
        self.lookup_answered().await.map(|answered| answered.lookup)
    }

    /// Runs the lookup now, keeping each passage's cosine similarity and which index answered.
    pub async fn lookup_answered(&self) -> Result<AnsweredLookup, RecallError> {
        semantic_lookup_answered(
            &self.index,
            &self.reader,
            &self.access,
            &self.query,
            self.limits,
            &self.revalidation,
        )
        .await
    }

    /// Runs the lookup now.
    pub async fn lookup(&self) -> Result<MemoryLookup, RecallError> {
        self.lookup_scored().await.map(ScoredLookup::into_lookup)
    }

    /// The recall source declaration.
    pub fn into_source(self, id: SourceId, essential: bool) -> RecallSource<'static> {
        RecallSource::new(id, essential, async move { self.lookup().await })
    }
}

/// Builds a [`RecallSource`] that runs [`hybrid_lookup`](super::hybrid_lookup).
///
/// ```text
/// HybridRecall::new(index.clone(), store.clone(), access, "queue retry policy", limits)
///     .params(tuned)
///     .into_source(id, false)
/// ```
pub struct HybridRecall<E, S, R> {
    index: Arc<SemanticIndex<E, S>>,
    store: Arc<R>,
    access: MemoryAccess,
    query: String,
    limits: QueryLimits,
    params: HybridParams,
    revalidation: RevalidationLimits,
    cross: Option<Arc<dyn CrossEncoder>>,
}

impl<E, S, R> std::fmt::Debug for HybridRecall<E, S, R> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("HybridRecall")
            .field("limits", &self.limits)
            .field("params", &self.params)
            .field("cross", &self.cross.is_some())
            .finish_non_exhaustive()
    }
}

impl<E, S, R> HybridRecall<E, S, R>
where
    E: Embedder,
    S: VectorStore + 'static,
    R: LexicalSearch + MemoryReader + 'static,
{
    /// A hybrid recall of `query` for `access`; `limits` bound the embedding side, [`HybridParams`]
    /// start at their defaults and so does the revalidation budget.
    pub fn new(
        index: Arc<SemanticIndex<E, S>>,
        store: Arc<R>,
        access: MemoryAccess,
        query: impl Into<String>,
        limits: QueryLimits,
    ) -> Self {
        Self {
            index,
            store,
            access,
            query: query.into(),
            limits,
            params: HybridParams::default(),
            revalidation: RevalidationLimits::default(),
            cross: None,
        }
    }

    /// The cross-encoder the rerank stage scores with (none by default: the stage then ranks by
    /// the signals recall already has).
    #[must_use]
    pub fn cross_encoder(mut self, cross: Option<Arc<dyn CrossEncoder>>) -> Self {
        self.cross = cross;
        self
    }

    /// The fusion parameters.
    #[must_use]
    pub fn params(mut self, params: HybridParams) -> Self {
        self.params = params;
        self
    }

    /// The revalidation budget (usually `RevalidationLimits::from(&recall_limits)`).
    #[must_use]
    pub fn revalidation_limits(mut self, limits: RevalidationLimits) -> Self {
        self.revalidation = limits;
        self
    }

    /// Runs the lookup now, keeping each passage's fused score.
    pub async fn lookup_scored(&self) -> Result<ScoredLookup, RecallError> {
        self.lookup_answered().await.map(|answered| answered.lookup)
    }

    /// Runs the lookup now, keeping each passage's fused score and which index ranked the
    /// embedding candidates.
    pub async fn lookup_answered(&self) -> Result<AnsweredLookup, RecallError> {
        hybrid_lookup_answered(
            &self.index,
            &self.store,
            &self.access,
            &self.query,
            self.limits,
            &self.params,
            &self.revalidation,
            self.cross.clone(),
        )
        .await
    }

    /// Runs the lookup now.
    pub async fn lookup(&self) -> Result<MemoryLookup, RecallError> {
        self.lookup_scored().await.map(ScoredLookup::into_lookup)
    }

    /// The recall source declaration.
    pub fn into_source(self, id: SourceId, essential: bool) -> RecallSource<'static> {
        RecallSource::new(id, essential, async move { self.lookup().await })
    }
}
