//! Semantic recall (SPEC §4): profiles, chunking, embedding, exact and HNSW cosine indexes, and refresh
//! and query with revalidation against the document store.
//!
//! - [`profile`]: [`SemanticProfile`] and its digest, which keys every stored vector.
//! - [`chunk`]: the chunker and [`ChunkId`].
//! - [`embed`], [`fastembed_embedder`], [`assets`]: the [`Embedder`] trait, the local fastembed model and
//!   where its files are found (`MEMORY_ASSETS_DIR`, installed by `scripts/fetch-assets.sh`).
//! - [`index`]: [`ExactIndex`] and [`HnswIndex`] behind [`VectorIndex`].
//! - [`engine`]: [`SemanticIndex`], refresh, withdrawal and revalidated query; [`limits`] bounds them.
//! - [`indexer`]: the background task following the store's change feed.
//! - [`tokens`]: [`TokenizerCounter`], exact token counts from the model's `tokenizer.json`.
//!
//! Architecture invariant: this crate knows nothing about SQL. Documents are read through
//! [`memory_core::MemoryReader`], changes followed through [`memory_core::ChangeFeed`], and vectors
//! persisted through [`memory_core::vectors::VectorStore`].

pub mod assets;
pub mod chunk;
pub mod embed;
pub mod engine;
pub mod error;
pub mod fastembed_embedder;
pub mod index;
pub mod indexer;
pub mod limits;
pub mod profile;
pub mod tokens;

pub use assets::{ASSETS_DIR_ENV, ModelAssets};
pub use chunk::{Chunk, ChunkId, chunk_text};
pub use embed::{DeterministicEmbedder, Embedder, checked_embeddings};
pub use engine::{
    EmbeddingUsage, IndexStats, RefreshOutcome, SemanticHit, SemanticIndex, SemanticIndexConfig,
    SemanticQueryResult,
};
pub use error::{EmbedError, FETCH_ASSETS_COMMAND, SemanticError};
pub use fastembed_embedder::FastembedEmbedder;
pub use index::{
    ExactIndex, HnswIndex, HnswParams, IndexBounds, IndexKind, SearchRequest, VectorIndex,
};
pub use indexer::{Indexer, IndexerOptions};
pub use limits::{QueryLimits, RefreshLimits};
pub use memory_core::vectors::SourceGeneration;
pub use profile::{ChunkingConfig, Preprocessing, ProfileDigest, SemanticProfile};
pub use tokens::TokenizerCounter;
