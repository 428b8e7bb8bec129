//! The async/blocking rule, checked for semantic-index's own store: every [`VectorStore`] call the
//! engine and the indexer make runs on tokio's blocking pool (through `engine::vector_call`), or on
//! the engine's own graph-build thread, never on an async worker.
//!
//! [`Probe`] wraps a SQLite vector store and records each call made on any other thread. The
//! runtime is current-thread, so its one async worker is the test's own thread, and the pool's
//! threads carry a name nothing else has. The test then asks that every port method it meant to
//! reach was reached, so a path that stops calling the store cannot pass by saying nothing.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use common::{FeedStore, ProbeEmbedder, access};
use memory_core::vectors::{
    ChunkVectorRef, GraphSnapshot, ProfileDigest, ReplaceOutcome, SourceGeneration, StoredSource,
    UnindexedReason, UnindexedSource, VectorLoadLimits, VectorSink, VectorStore,
};
use memory_core::{ChangeFeed, ChangeSequence, MemoryError, MemoryKey};
use memory_sqlite::vectors::SqliteVectorStore;
use semantic_index::engine::HnswStartup;
use semantic_index::indexer::{Indexer, IndexerOptions};
use semantic_index::{
    CompactVectors, DeterministicEmbedder, IndexBounds, IndexKind, Preprocessing, QueryLimits,
    SemanticIndex, SemanticIndexConfig, SemanticProfile,
};

const DIMENSIONS: usize = 16;
/// The name of the blocking pool's threads (and of no other thread).
const POOL_THREAD: &str = "vector-boundary-pool";
/// The engine's background graph build: a thread of its own, where a store call may block.
const BUILD_THREAD: &str = "semantic-hnsw-build";

#[derive(Default)]
struct Calls {
    seen: BTreeSet<&'static str>,
    off_pool: Vec<&'static str>,
}

/// A SQLite vector store that notes which of its methods were called, and which were called on an
/// async worker.
struct Probe {
    inner: SqliteVectorStore,
    calls: Mutex<Calls>,
}

impl Probe {
    fn note(&self, method: &'static str) {
        let mut calls = self.calls.lock().unwrap();
        calls.seen.insert(method);
        let thread = std::thread::current();
        if !matches!(thread.name(), Some(POOL_THREAD | BUILD_THREAD)) {
            calls.off_pool.push(method);
        }
    }
}

impl VectorStore for Probe {
    async fn load_sources(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        self.note("load_sources");
        self.inner.load_sources(profile, limits).await
    }

    async fn load_sources_into(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
        sink: &mut dyn VectorSink,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        self.note("load_sources_into");
        self.inner.load_sources_into(profile, limits, sink).await
    }

    async fn replace_source(
        &self,
        profile: &ProfileDigest,
        source: &StoredSource,
    ) -> Result<ReplaceOutcome, MemoryError> {
        self.note("replace_source");
        self.inner.replace_source(profile, source).await
    }

    async fn indexed_position(
        &self,
        profile: &ProfileDigest,
    ) -> Result<ChangeSequence, MemoryError> {
        self.note("indexed_position");
        self.inner.indexed_position(profile).await
    }

    async fn set_indexed_position(
        &self,
        profile: &ProfileDigest,
        position: ChangeSequence,
    ) -> Result<(), MemoryError> {
        self.note("set_indexed_position");
        self.inner.set_indexed_position(profile, position).await
    }

    async fn record_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
        reason: UnindexedReason,
    ) -> Result<(), MemoryError> {
        self.note("record_unindexed");
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
        self.note("clear_unindexed");
        self.inner.clear_unindexed(profile, key, generation).await
    }

    async fn unindexed_sources(
        &self,
        profile: &ProfileDigest,
        reason: UnindexedReason,
        after: Option<&MemoryKey>,
        limit: usize,
    ) -> Result<Vec<UnindexedSource>, MemoryError> {
        self.note("unindexed_sources");
        self.inner
            .unindexed_sources(profile, reason, after, limit)
            .await
    }

    async fn unindexed_counts(
        &self,
        profile: &ProfileDigest,
    ) -> Result<Vec<(UnindexedReason, u64)>, MemoryError> {
        self.note("unindexed_counts");
        self.inner.unindexed_counts(profile).await
    }

    async fn stored_chunks(&self, profile: &ProfileDigest) -> Result<u64, MemoryError> {
        self.note("stored_chunks");
        self.inner.stored_chunks(profile).await
    }

    async fn load_chunk_vectors(
        &self,
        profile: &ProfileDigest,
        chunks: &[ChunkVectorRef],
        dimensions: usize,
    ) -> Result<Vec<Option<Vec<f32>>>, MemoryError> {
        self.note("load_chunk_vectors");
        self.inner
            .load_chunk_vectors(profile, chunks, dimensions)
            .await
    }

    async fn save_graph(
        &self,
        profile: &ProfileDigest,
        graph: &GraphSnapshot,
    ) -> Result<(), MemoryError> {
        self.note("save_graph");
        self.inner.save_graph(profile, graph).await
    }

    async fn load_graph(
        &self,
        profile: &ProfileDigest,
        max_bytes: usize,
    ) -> Result<Option<GraphSnapshot>, MemoryError> {
        self.note("load_graph");
        self.inner.load_graph(profile, max_bytes).await
    }
}

fn profile() -> SemanticProfile {
    SemanticProfile {
        provider: "test".to_owned(),
        model: "deterministic".to_owned(),
        model_revision: "1".to_owned(),
        dimensions: DIMENSIONS,
        max_sequence_length: 128,
        chunking: semantic_index::ChunkingConfig {
            max_chunk_bytes: 64,
        },
        preprocessing: Preprocessing::TextOnly,
    }
}

/// Room for 6 chunks, int8 vectors (so a query rescores from the store), a graph built inline.
fn config() -> SemanticIndexConfig {
    SemanticIndexConfig::new(profile())
        .with_bounds(IndexBounds::with_max_chunks(DIMENSIONS, 6).unwrap())
        .with_compact_vectors(CompactVectors::int8())
        .with_hnsw_startup(HnswStartup::Blocking)
}

#[test]
fn every_vector_store_call_leaves_the_async_worker() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name(POOL_THREAD)
        .build()
        .unwrap();
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("vectors.sqlite");
    let documents = Arc::new(FeedStore::default());
    let embedder = ProbeEmbedder::new(DeterministicEmbedder::new(DIMENSIONS));
    let open = |probe: Arc<Probe>| {
        let embedder = embedder.clone();
        async move {
            Arc::new(
                SemanticIndex::open(config(), embedder, probe)
                    .await
                    .unwrap(),
            )
        }
    };
    let options = IndexerOptions {
        poll_interval: std::time::Duration::from_millis(5),
        ..IndexerOptions::default()
    };
    let probe = || {
        Arc::new(Probe {
            inner: SqliteVectorStore::open(&path).unwrap(),
            calls: Mutex::new(Calls::default()),
        })
    };
    let first = probe();
    runtime.block_on(async {
        let index = open(Arc::clone(&first)).await;
        let indexer = Indexer::spawn(
            Arc::clone(&index),
            Arc::clone(&documents),
            Arc::clone(&documents),
            options,
        )
        .await
        .unwrap();
        for n in 0..8 {
            documents
                .put(&format!("note-{n}"), &format!("garden note number {n}"))
                .await;
        }
        documents.withdraw("note-0").await;
        let head = documents.head().await.unwrap();
        indexer.wait_until_indexed(head).await.unwrap();
        let limits = QueryLimits::new(1_024, 4, 10_000, -1.0, 5_000, IndexKind::Exact);
        let result = index
            .query(&*documents, &access(), "garden note", limits)
            .await
            .unwrap();
        assert!(!result.hits.is_empty());
        let status = index.status().await.unwrap();
        assert!(
            status.unindexed.iter().any(|(_, count)| *count > 0),
            "the index was meant to be too small for every note: {status:?}"
        );
        index.persist_graph().await.unwrap();
        indexer.shutdown().await;
    });
    // A restart loads what the first index stored.
    let second = probe();
    runtime.block_on(async {
        open(Arc::clone(&second)).await;
    });
    let mut seen = BTreeSet::new();
    for probe in [&first, &second] {
        let calls = probe.calls.lock().unwrap();
        assert_eq!(
            calls.off_pool,
            Vec::<&str>::new(),
            "vector store calls made on an async worker"
        );
        seen.extend(calls.seen.iter().copied());
    }
    for method in [
        "load_graph",
        "load_sources_into",
        "indexed_position",
        "set_indexed_position",
        "replace_source",
        "record_unindexed",
        "unindexed_counts",
        "load_chunk_vectors",
        "save_graph",
    ] {
        assert!(seen.contains(method), "{method} was never called: {seen:?}");
    }
}
