//! SQLite persistence of semantic chunk vectors ([`memory_core::vectors::VectorStore`]).
//!
//! The tables live in the same file as the memory store (or any other file), in the crate's one
//! versioned schema (`crate::schema`); they are keyed by profile digest so vectors of different profiles never
//! mix. Vectors are little-endian f32 BLOBs whose length is checked on load. One source's replacement is
//! one transaction whose first statement is the generation fence (an upsert that changes the source
//! row only when the stored state admits the new one), so several processes may share the tables. A
//! load reads both tables once each, in primary-key order, and merges them.
//!
//! Two more tables keep what the index cannot hold and what it built: `semantic_unindexed` (sources
//! refused by a limit, with the reason; an admitted replacement deletes the key's row in its own
//! transaction) and `semantic_graphs` (one persisted search graph per profile, an opaque BLOB with the
//! position and vector-set digest it was built over).
//!
//! One module per job: `connection` (opening and locking the connection),
//! `sources` (loading and replacing a profile's sources and their chunks), `chunk_vectors` (single
//! chunks' stored vectors), `positions` (the indexer's position), `unindexed` (what the index could
//! not hold), `graphs` (persisted search graphs) and `codecs` (rows into the model's types). This
//! module holds the store and its [`VectorStore`] implementation.

mod chunk_vectors;
mod codecs;
mod connection;
mod graphs;
mod positions;
mod sources;
mod unindexed;

use std::sync::Mutex;

use memory_core::vectors::{
    ChunkVectorRef, GraphSnapshot, ProfileDigest, ReplaceOutcome, SourceGeneration, StoredSource,
    UnindexedReason, UnindexedSource, VectorLoadLimits, VectorSink, VectorStore,
};
use memory_core::{ChangeSequence, MemoryError, MemoryKey};
use rusqlite::Connection;

/// Chunk vectors and indexer positions in a SQLite file.
pub struct SqliteVectorStore {
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteVectorStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SqliteVectorStore")
            .finish_non_exhaustive()
    }
}

impl VectorStore for SqliteVectorStore {
    async fn load_sources(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        self.load_now(profile, limits, None)
    }

    async fn load_sources_into(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
        sink: &mut dyn VectorSink,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        self.load_now(profile, limits, Some(sink))
    }

    async fn replace_source(
        &self,
        profile: &ProfileDigest,
        source: &StoredSource,
    ) -> Result<ReplaceOutcome, MemoryError> {
        self.replace_now(profile, source)
    }

    async fn indexed_position(
        &self,
        profile: &ProfileDigest,
    ) -> Result<ChangeSequence, MemoryError> {
        self.position_now(profile)
    }

    async fn set_indexed_position(
        &self,
        profile: &ProfileDigest,
        position: ChangeSequence,
    ) -> Result<(), MemoryError> {
        self.set_position_now(profile, position)
    }

    async fn record_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
        reason: UnindexedReason,
    ) -> Result<(), MemoryError> {
        self.record_unindexed_now(profile, key, generation, reason)
    }

    async fn clear_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<(), MemoryError> {
        self.clear_unindexed_now(profile, key, generation)
    }

    async fn unindexed_sources(
        &self,
        profile: &ProfileDigest,
        reason: UnindexedReason,
        after: Option<&MemoryKey>,
        limit: usize,
    ) -> Result<Vec<UnindexedSource>, MemoryError> {
        self.unindexed_sources_now(profile, reason, after, limit)
    }

    async fn unindexed_counts(
        &self,
        profile: &ProfileDigest,
    ) -> Result<Vec<(UnindexedReason, u64)>, MemoryError> {
        self.unindexed_counts_now(profile)
    }

    async fn stored_chunks(&self, profile: &ProfileDigest) -> Result<u64, MemoryError> {
        self.stored_chunks_now(profile)
    }

    async fn load_chunk_vectors(
        &self,
        profile: &ProfileDigest,
        chunks: &[ChunkVectorRef],
        dimensions: usize,
    ) -> Result<Vec<Option<Vec<f32>>>, MemoryError> {
        self.chunk_vectors_now(profile, chunks, dimensions)
    }

    async fn save_graph(
        &self,
        profile: &ProfileDigest,
        graph: &GraphSnapshot,
    ) -> Result<(), MemoryError> {
        self.save_graph_now(profile, graph)
    }

    async fn load_graph(
        &self,
        profile: &ProfileDigest,
        max_bytes: usize,
    ) -> Result<Option<GraphSnapshot>, MemoryError> {
        self.load_graph_now(profile, max_bytes)
    }
}

#[cfg(test)]
mod tests;
