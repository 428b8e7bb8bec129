//! The memory-core vector store suite against PostgreSQL, one fresh schema per rule.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{TestStore, server_url, store_at};
use memory_core::vectors::{
    ChunkVectorRef, GraphSnapshot, ProfileDigest, ReplaceOutcome, SourceGeneration, StoredSource,
    UnindexedReason, UnindexedSource, VectorLoadLimits, VectorStore,
};
use memory_core::{ChangeSequence, MemoryError, MemoryKey};
use memory_testkit::vectors::run_vector_suite;

/// The vector store of a fresh schema, which lives (and is dropped) with it.
struct SchemaVectors(TestStore);

impl VectorStore for SchemaVectors {
    async fn load_sources(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        self.0.vectors().load_sources(profile, limits).await
    }

    async fn replace_source(
        &self,
        profile: &ProfileDigest,
        source: &StoredSource,
    ) -> Result<ReplaceOutcome, MemoryError> {
        self.0.vectors().replace_source(profile, source).await
    }

    async fn indexed_position(
        &self,
        profile: &ProfileDigest,
    ) -> Result<ChangeSequence, MemoryError> {
        self.0.vectors().indexed_position(profile).await
    }

    async fn set_indexed_position(
        &self,
        profile: &ProfileDigest,
        position: ChangeSequence,
    ) -> Result<(), MemoryError> {
        self.0
            .vectors()
            .set_indexed_position(profile, position)
            .await
    }

    async fn record_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
        reason: UnindexedReason,
    ) -> Result<(), MemoryError> {
        self.0
            .vectors()
            .record_unindexed(profile, key, generation, reason)
            .await
    }

    async fn clear_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<(), MemoryError> {
        self.0
            .vectors()
            .clear_unindexed(profile, key, generation)
            .await
    }

    async fn unindexed_sources(
        &self,
        profile: &ProfileDigest,
        reason: UnindexedReason,
        after: Option<&MemoryKey>,
        limit: usize,
    ) -> Result<Vec<UnindexedSource>, MemoryError> {
        self.0
            .vectors()
            .unindexed_sources(profile, reason, after, limit)
            .await
    }

    async fn unindexed_counts(
        &self,
        profile: &ProfileDigest,
    ) -> Result<Vec<(UnindexedReason, u64)>, MemoryError> {
        self.0.vectors().unindexed_counts(profile).await
    }

    async fn stored_chunks(&self, profile: &ProfileDigest) -> Result<u64, MemoryError> {
        self.0.vectors().stored_chunks(profile).await
    }

    async fn save_graph(
        &self,
        profile: &ProfileDigest,
        graph: &GraphSnapshot,
    ) -> Result<(), MemoryError> {
        self.0.vectors().save_graph(profile, graph).await
    }

    async fn load_chunk_vectors(
        &self,
        profile: &ProfileDigest,
        chunks: &[ChunkVectorRef],
        dimensions: usize,
    ) -> Result<Vec<Option<Vec<f32>>>, MemoryError> {
        self.0
            .vectors()
            .load_chunk_vectors(profile, chunks, dimensions)
            .await
    }

    async fn load_graph(
        &self,
        profile: &ProfileDigest,
        max_bytes: usize,
    ) -> Result<Option<GraphSnapshot>, MemoryError> {
        self.0.vectors().load_graph(profile, max_bytes).await
    }
}

#[tokio::test]
async fn postgres_vector_store_passes_the_vector_suite() {
    let Some(url) = server_url("postgres_vector_store_passes_the_vector_suite") else {
        return;
    };
    run_vector_suite(|| {
        let url = url.clone();
        async move { SchemaVectors(store_at(url).await) }
    })
    .await
    .assert_all_passed();
}
