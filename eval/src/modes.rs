//! The recall modes: `direct` is the harness's ceiling; every other mode is the product's own, run
//! through memory-service's mode table ([`RecallService::recall_over`]), the code `memory recall`,
//! the MCP servers and the Python package answer with, with the same search depth, semantic score
//! floor, fusion parameters, revalidation, suppression and composition.
//!
//! - `direct`: the known `person/topic` key, read and revalidated through memory-core's recall (what
//!   an application that knows its keys does; the quality ceiling). The product has no such mode.
//! - `lexical`, `exact`, `hnsw`, `hybrid`: the product's modes of the same names over the harness's
//!   index. The harness keeps that index current with its own [`semantic_index::Indexer`] following
//!   the store (as `memory serve` does) and waits for it before recalling; its configuration is the
//!   product's ([`memory_service::semantic::IndexOptions::config`], from the same `MEMORY_*`
//!   settings), so the figures are the product's, with the embedder the run loads (the real model in
//!   the main job, a deterministic one in the tests).

use std::sync::Arc;

use memory_core::recall::{
    MemoryLookup, RecallError, RecallLimits, RecallSource, SourceId, recall,
};
use memory_core::{
    ApproximateTokenCounter, DocumentId, MemoryAccess, MemoryKey, RecallCandidate,
    RevalidationLimits, revalidate,
};
use memory_service::recall_service::{RecallQuery, RecallService};
use memory_service::refusal::Refusal;
use memory_service::wire::{RecallMode, RecallResult};
use memory_sqlite::SqliteStore;
use memory_sqlite::vectors::SqliteVectorStore;
use semantic_index::{CrossEncoder, Embedder, SemanticIndex};
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
    /// Lexical and HNSW fused by the product's hybrid (normalized score fusion by default), with
    /// its rerank stage as the product's default says.
    Hybrid,
    /// The product's hybrid with its rerank stage off (`rerank: false`): what the stage adds is
    /// the difference from `hybrid`. The other modes have no such stage.
    HybridNoRerank,
}

impl Mode {
    /// Every mode, in report order.
    pub const ALL: [Mode; 6] = [
        Mode::Direct,
        Mode::Lexical,
        Mode::Exact,
        Mode::Hnsw,
        Mode::Hybrid,
        Mode::HybridNoRerank,
    ];

    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Lexical => "lexical",
            Self::Exact => "exact",
            Self::Hnsw => "hnsw",
            Self::Hybrid => "hybrid",
            Self::HybridNoRerank => "hybrid-no-rerank",
        }
    }
}

/// Passages a recall may cite: hit@10 needs ten.
pub const MAX_ITEMS: u32 = 10;
/// Deadline of one recall in the quality runs: far above any healthy recall, so it never decides quality.
pub const RECALL_TIMEOUT_MS: u64 = 5_000;
/// The id the `direct` source is declared with.
pub const SOURCE_ID: &str = "memory";

impl Mode {
    /// The product's mode of the same name; `None` for `direct`, the harness's own ceiling.
    pub fn product(self) -> Option<RecallMode> {
        match self {
            Self::Direct => None,
            Self::Lexical => Some(RecallMode::Lexical),
            Self::Exact => Some(RecallMode::Exact),
            Self::Hnsw => Some(RecallMode::Hnsw),
            Self::Hybrid | Self::HybridNoRerank => Some(RecallMode::Hybrid),
        }
    }

    /// Whether the mode turns hybrid recall's rerank stage off.
    pub fn without_rerank(self) -> bool {
        self == Self::HybridNoRerank
    }
}

/// Runs recalls in every mode over one store and index.
pub struct Recaller<'a, E> {
    store: &'a Arc<SqliteStore>,
    index: &'a Arc<SemanticIndex<E, SqliteVectorStore>>,
    /// The product's recall over the store; the semantic modes are handed `index`.
    service: RecallService<SqliteStore>,
    access: MemoryAccess,
    limits: RecallLimits,
    /// The rerank stage's cross-encoder, if the run loads one.
    cross: Option<Arc<dyn CrossEncoder>>,
}

impl<E> std::fmt::Debug for Recaller<'_, E> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Recaller")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
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
            service: RecallService::lexical_only(Arc::clone(store)),
            access,
            limits,
            cross: None,
        })
    }

    /// The same recaller with the rerank stage's cross-encoder (`None`: as `--rerank-model off`).
    #[must_use]
    pub fn with_cross_encoder(mut self, cross: Option<Arc<dyn CrossEncoder>>) -> Self {
        self.cross = cross;
        self
    }

    /// The limits recalls run under.
    pub fn limits(&self) -> &RecallLimits {
        &self.limits
    }

    /// The `direct` source for `query`, declared essential or optional: the known key, revalidated.
    pub fn direct_source<'q>(
        &self,
        query: &'q EvalQuery,
        essential: bool,
    ) -> Result<RecallSource<'q>, RecallError>
    where
        'a: 'q,
    {
        let id = SourceId::new(SOURCE_ID)?;
        let store = self.store;
        let access = self.access.clone();
        let revalidation = RevalidationLimits::from(&self.limits);
        let key = MemoryKey {
            namespace: access.namespace.clone(),
            id: DocumentId::new(document_id(&query.person, &query.topic))?,
        };
        let read = async move {
            let candidates = vec![RecallCandidate::document(key, None)];
            let passages = revalidate(&candidates, &access, &**store, &revalidation).await?;
            Ok::<_, RecallError>(if passages.is_empty() {
                MemoryLookup::NoMatch
            } else {
                MemoryLookup::Found { passages }
            })
        };
        Ok(RecallSource::new(id, essential, read))
    }

    /// One recall of `query` in `mode`: the product's recall for its modes, the known key for
    /// `direct` (declared optional: the best that fits). Answers the ranked document ids.
    pub async fn recall(&self, mode: Mode, query: &EvalQuery) -> Result<RankedAnswer, Refusal> {
        let Some(product) = mode.product() else {
            let source = self.direct_source(query, false)?;
            let recalled = recall(vec![source], &self.limits, &ApproximateTokenCounter).await?;
            return Ok(RankedAnswer {
                ranked: recalled
                    .passages
                    .into_iter()
                    .map(|passage| {
                        (
                            passage.passage.source.id.as_str().to_owned(),
                            passage.passage.content.text,
                        )
                    })
                    .collect(),
            });
        };
        let mut query = RecallQuery::for_access(
            self.access.clone(),
            query.text.clone(),
            product,
            self.limits,
        )?;
        if mode.without_rerank() {
            query = query.with_rerank(false)?;
        }
        let answer = self
            .service
            .recall_over(self.index, self.cross.clone(), query)
            .await?;
        Ok(ranked(answer))
    }
}

/// The ranked answer of a recall: source document ids in citation order, with their texts.
pub fn ranked(answer: RecallResult) -> RankedAnswer {
    RankedAnswer {
        ranked: answer
            .passages
            .into_iter()
            .map(|passage| (passage.source.id, passage.content.text))
            .collect(),
    }
}
