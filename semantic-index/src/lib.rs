//! Semantic recall (SPEC §4): profiles, chunking, embedding, exact and HNSW cosine indexes, and refresh
//! and query with revalidation against the document store.
//!
//! - [`profile`]: [`SemanticProfile`] and its digest, which keys every stored vector.
//! - [`chunk`]: the chunker and [`ChunkId`].
//! - [`embed`], [`fastembed_embedder`], [`assets`]: the [`Embedder`] trait, the local fastembed model and
//!   where its files are found (`MEMORY_ASSETS_DIR`, installed by `scripts/fetch-assets.sh`).
//! - [`index`]: [`ExactIndex`] and [`HnswIndex`] behind [`VectorIndex`], holding f32 vectors or
//!   int8 codes ([`CompactVectors`]); [`kernels`]: their distance kernels, dispatched at run time
//!   to AVX-512, AVX2+FMA or a portable kernel.
//! - [`engine`]: [`SemanticIndex`], refresh, withdrawal and revalidated query; [`limits`] bounds them.
//! - [`indexer`]: the background task following the store's change feed, and [`catch_up`], the same
//!   work done once in the calling task.
//! - [`recall`](mod@recall): the embedding and hybrid (normalized score or rank fusion) recall
//!   sources for [`memory_core::recall`](mod@memory_core::recall), revalidated against the document
//!   store.
//! - [`tokens`]: [`TokenizerCounter`], exact token counts from the model's `tokenizer.json`.
//!
//! Bounds: an index holds [`DEFAULT_MAX_CHUNKS`] (1,000,000) live chunks by default, configurable with
//! [`IndexBounds::with_max_chunks`]; memory is taken as chunks arrive and every bound is checked
//! before allocating. Issue 13 overrides the SPEC's `max_chunks * dimensions <= 16,777,216` (see
//! [`IndexBounds`]). A refresh past the capacity is refused (`TooLarge { limit: "max_chunks" }`), and a
//! document the index cannot hold is recorded as unindexed with its reason, never reported as
//! searchable ([`indexer`]). The HNSW graph is persisted beside the vectors and reloaded when fresh
//! ([`engine`]).
//!
//! Architecture invariant: this crate knows nothing about SQL. Documents are read through
//! [`memory_core::MemoryReader`], changes followed through [`memory_core::ChangeFeed`], and vectors
//! persisted through [`memory_core::vectors::VectorStore`].

pub mod assets;
pub mod chunk;
pub mod cross_encoder;
pub mod embed;
pub mod engine;
pub mod error;
pub mod fastembed_embedder;
pub mod index;
pub mod indexer;
pub mod kernels;
pub mod limits;
pub mod profile;
pub mod recall;
pub mod tokens;

pub use assets::{ASSETS_DIR_ENV, AssetsSource, Candidate, Located, ModelAssets};
pub use chunk::{Chunk, ChunkId, chunk_text};
pub use cross_encoder::{CROSS_ENCODER_SHA256, CrossEncoder, FastembedCrossEncoder};
pub use embed::{DeterministicEmbedder, Embedder, checked_embeddings};
pub use engine::{
    EmbeddingUsage, GraphOrigin, HNSW_INLINE_BUILD_MAX_CHUNKS, HnswStartup, HnswStatus, IndexStats,
    IndexStatus, PersistOutcome, RefreshOutcome, RefreshResults, SemanticCandidates, SemanticHit,
    SemanticIndex, SemanticIndexConfig, SemanticQueryResult,
};
pub use error::{EmbedError, FETCH_ASSETS_COMMAND, SemanticError};
pub use fastembed_embedder::FastembedEmbedder;
pub use index::{
    CompactVectors, DEFAULT_MAX_CHUNKS, ExactIndex, HnswIndex, HnswParams, IndexBounds, IndexKind,
    MAX_INDEX_FLOATS, MAX_INDEX_FLOATS_CEILING, SearchRequest, SourceFilter, VectorIndex,
};
pub use indexer::{
    CatchUp, DEFAULT_MAX_EMBED_TEXTS, Indexer, IndexerOptions, catch_up, catch_up_report,
};
pub use limits::{QueryLimits, RefreshLimits};
pub use memory_core::vectors::{SourceGeneration, UnindexedReason};
pub use profile::{ChunkingConfig, Preprocessing, ProfileDigest, SemanticProfile};
pub use recall::{
    AnsweredLookup, CROSS_ENCODER_DEPTH, DEFAULT_CROSS_RERANK_WEIGHTS, DEFAULT_RERANK_WEIGHTS,
    Fused, FusionMethod, HybridParams, HybridRecall, RerankQuery, RerankSignals, RerankWeights,
    ScoredLookup, ScoredPassage, SemanticRecall, borrow_from_neighbours, cross_encoder_choice,
    cross_encoder_text, cross_rank_signals, fuse_rankings, hybrid_lookup, hybrid_lookup_answered,
    order_by_rerank, semantic_lookup, semantic_lookup_answered,
};
pub use tokens::TokenizerCounter;
