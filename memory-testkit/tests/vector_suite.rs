//! The in-memory vector store keeps every rule of the vector suite, and the suite fails on stores that
//! break one: each broken store wraps the in-memory one and breaks exactly one rule.

use memory_core::vectors::{
    ChunkVectorRef, GraphSnapshot, ProfileDigest, ReplaceOutcome, SourceGeneration, StoredSource,
    StoredSourceState, UnindexedReason, UnindexedSource, VectorLoadLimits, VectorStore,
};
use memory_core::{ChangeSequence, MemoryError, MemoryKey};
use memory_testkit::InMemoryVectorStore;
use memory_testkit::vectors::{VECTOR_RULES, run_vector_rules, run_vector_suite};

#[tokio::test]
async fn in_memory_vector_store_passes_the_vector_suite() {
    let report = run_vector_suite(|| async { InMemoryVectorStore::new() }).await;
    report.assert_all_passed();
    assert_eq!(report.passed, VECTOR_RULES, "every rule runs, in order");
    let unknown = run_vector_rules(|| async { InMemoryVectorStore::new() }, &["none"]).await;
    assert!(unknown.failure("unknown-rule").is_some());
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Positions follow every write, backwards too.
    PositionMovesBack,
    /// A refresh of a withdrawn source is admitted.
    RefreshesWithdrawn,
    /// Graph loads ignore their byte bound.
    GraphUnbounded,
    /// Chunk vectors are read whatever revision is named (a replaced revision's candidate would
    /// be rescored with its successor's vector).
    ChunkVectorsIgnoreRevision,
}

struct Broken {
    inner: InMemoryVectorStore,
    fault: Fault,
    /// The last position written, for [`Fault::PositionMovesBack`].
    position: std::sync::Mutex<Option<ChangeSequence>>,
}

impl VectorStore for Broken {
    async fn load_sources(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        self.inner.load_sources(profile, limits).await
    }

    async fn replace_source(
        &self,
        profile: &ProfileDigest,
        source: &StoredSource,
    ) -> Result<ReplaceOutcome, MemoryError> {
        let outcome = self.inner.replace_source(profile, source).await?;
        if self.fault == Fault::RefreshesWithdrawn
            && matches!(
                outcome,
                ReplaceOutcome::Stale {
                    withdrawn: true,
                    ..
                }
            )
            && matches!(source.state, StoredSourceState::Indexed { .. })
        {
            return Ok(ReplaceOutcome::Replaced);
        }
        Ok(outcome)
    }

    async fn indexed_position(
        &self,
        profile: &ProfileDigest,
    ) -> Result<ChangeSequence, MemoryError> {
        let stored = self.inner.indexed_position(profile).await?;
        let last = *self.position.lock().expect("not poisoned");
        Ok(match (self.fault, last) {
            (Fault::PositionMovesBack, Some(last))
                if *profile == ProfileDigest::from_bytes([7; 32]) =>
            {
                last
            }
            _ => stored,
        })
    }

    async fn set_indexed_position(
        &self,
        profile: &ProfileDigest,
        position: ChangeSequence,
    ) -> Result<(), MemoryError> {
        *self.position.lock().expect("not poisoned") = Some(position);
        self.inner.set_indexed_position(profile, position).await
    }

    async fn record_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
        reason: UnindexedReason,
    ) -> Result<(), MemoryError> {
        self.inner
            .record_unindexed(profile, key, generation, reason)
            .await
    }

    async fn clear_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<(), MemoryError> {
        self.inner.clear_unindexed(profile, key, generation).await
    }

    async fn unindexed_sources(
        &self,
        profile: &ProfileDigest,
        reason: UnindexedReason,
        after: Option<&MemoryKey>,
        limit: usize,
    ) -> Result<Vec<UnindexedSource>, MemoryError> {
        self.inner
            .unindexed_sources(profile, reason, after, limit)
            .await
    }

    async fn unindexed_counts(
        &self,
        profile: &ProfileDigest,
    ) -> Result<Vec<(UnindexedReason, u64)>, MemoryError> {
        self.inner.unindexed_counts(profile).await
    }

    async fn stored_chunks(&self, profile: &ProfileDigest) -> Result<u64, MemoryError> {
        self.inner.stored_chunks(profile).await
    }

    async fn save_graph(
        &self,
        profile: &ProfileDigest,
        graph: &GraphSnapshot,
    ) -> Result<(), MemoryError> {
        self.inner.save_graph(profile, graph).await
    }

    async fn load_chunk_vectors(
        &self,
        profile: &ProfileDigest,
        chunks: &[ChunkVectorRef],
        dimensions: usize,
    ) -> Result<Vec<Option<Vec<f32>>>, MemoryError> {
        if self.fault != Fault::ChunkVectorsIgnoreRevision {
            return self
                .inner
                .load_chunk_vectors(profile, chunks, dimensions)
                .await;
        }
        // The stored revision stands in for whichever one was named.
        let limits = VectorLoadLimits {
            dimensions,
            max_sources: usize::MAX,
            max_chunks: usize::MAX,
        };
        let stored = self.inner.load_sources(profile, limits).await?;
        let mut answered = Vec::with_capacity(chunks.len());
        for wanted in chunks {
            let current = stored.iter().find(|source| source.key == wanted.key);
            let revision = match current.map(|source| &source.state) {
                Some(StoredSourceState::Indexed { revision, .. }) => revision.clone(),
                _ => wanted.revision.clone(),
            };
            let named = ChunkVectorRef {
                revision,
                ..wanted.clone()
            };
            answered.extend(
                self.inner
                    .load_chunk_vectors(profile, &[named], dimensions)
                    .await?,
            );
        }
        Ok(answered)
    }

    async fn load_graph(
        &self,
        profile: &ProfileDigest,
        max_bytes: usize,
    ) -> Result<Option<GraphSnapshot>, MemoryError> {
        let bound = match self.fault {
            Fault::GraphUnbounded => usize::MAX,
            _ => max_bytes,
        };
        self.inner.load_graph(profile, bound).await
    }
}

#[tokio::test]
async fn each_broken_vector_store_fails_the_rule_it_breaks() {
    for (fault, rule) in [
        (Fault::PositionMovesBack, "positions-never-move-backwards"),
        (Fault::RefreshesWithdrawn, "withdrawal-is-terminal"),
        (
            Fault::GraphUnbounded,
            "graphs-are-kept-per-profile-and-bounded-on-load",
        ),
        (
            Fault::ChunkVectorsIgnoreRevision,
            "chunk-vectors-are-read-by-key-revision-and-ordinal",
        ),
    ] {
        let report = run_vector_rules(
            || async move {
                Broken {
                    inner: InMemoryVectorStore::new(),
                    fault,
                    position: std::sync::Mutex::new(None),
                }
            },
            &[rule],
        )
        .await;
        assert!(
            report.failure(rule).is_some(),
            "{fault:?} passed `{rule}`:\n{report}"
        );
    }
}
