//! Issue 13: the index's capacity (refusals past `max_chunks`, reclaimed tombstones, unindexed
//! documents counted by reason) and the HNSW graph persisted beside the vectors (loaded at restart
//! without a build or an embedder call, rejected when stale or corrupt).
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use common::{FeedStore, ProbeEmbedder, access, key};
use memory_core::vectors::{SourceGeneration, UnindexedReason, VectorLoadLimits, VectorStore};
use memory_core::{ChangeFeed, ChangeSequence};
use memory_sqlite::vectors::SqliteVectorStore;
use proptest::prelude::*;
use semantic_index::indexer::{catch_up, catch_up_report};
use semantic_index::{
    ChunkingConfig, DeterministicEmbedder, GraphOrigin, HnswParams, HnswStartup, HnswStatus,
    IndexBounds, IndexKind, IndexerOptions, PersistOutcome, Preprocessing, QueryLimits,
    RefreshOutcome, SemanticError, SemanticIndex, SemanticIndexConfig, SemanticProfile,
};
use sha2::{Digest, Sha256};

const DIMENSIONS: usize = 32;

type Probe = ProbeEmbedder<DeterministicEmbedder>;
type Index = SemanticIndex<Probe, SqliteVectorStore>;

fn profile() -> SemanticProfile {
    SemanticProfile {
        provider: "test".to_owned(),
        model: "deterministic".to_owned(),
        model_revision: "1".to_owned(),
        dimensions: DIMENSIONS,
        max_sequence_length: 128,
        chunking: ChunkingConfig {
            max_chunk_bytes: 64,
        },
        preprocessing: Preprocessing::TextOnly,
    }
}

fn config(startup: HnswStartup, max_chunks: usize) -> SemanticIndexConfig {
    SemanticIndexConfig {
        hnsw: HnswParams {
            max_connections: 8,
            ef_construction: 32,
            ef_search: 16,
            width_grows: false,
            max_layers: 4,
            rebuild_tombstone_fraction: 0.2,
        },
        ..SemanticIndexConfig::new(profile())
            .with_bounds(IndexBounds::with_max_chunks(DIMENSIONS, max_chunks).unwrap())
            .with_hnsw_startup(startup)
    }
}

struct Fixture {
    _directory: tempfile::TempDir,
    path: std::path::PathBuf,
    documents: Arc<FeedStore>,
    embedder: Arc<Probe>,
}

impl Fixture {
    fn new() -> Self {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("vectors.sqlite");
        Self {
            _directory: directory,
            path,
            documents: Arc::new(FeedStore::default()),
            embedder: ProbeEmbedder::new(DeterministicEmbedder::new(DIMENSIONS)),
        }
    }

    fn store(&self) -> Arc<SqliteVectorStore> {
        Arc::new(SqliteVectorStore::open(&self.path).unwrap())
    }

    async fn open_with(&self, config: SemanticIndexConfig) -> Index {
        SemanticIndex::open(config, self.embedder.clone(), self.store())
            .await
            .unwrap()
    }

    async fn open(&self, startup: HnswStartup) -> Index {
        self.open_with(config(startup, 10_000)).await
    }

    async fn put_many(&self, count: usize) {
        for i in 0..count {
            self.documents
                .put(
                    &format!("doc{i:04}"),
                    &format!("note {i} about topic {}", i % 17),
                )
                .await;
        }
    }

    async fn catch_up(
        &self,
        index: &Index,
        from: ChangeSequence,
    ) -> Result<ChangeSequence, SemanticError> {
        let head = self.documents.head().await.unwrap();
        catch_up(
            index,
            &*self.documents,
            &*self.documents,
            from,
            head,
            IndexerOptions::default(),
        )
        .await
        .map(|caught| caught.position)
    }
}

type Ranked = Vec<(String, u32, u32)>;

async fn ranked(fixture: &Fixture, index: &Index, kind: IndexKind) -> (Ranked, IndexKind) {
    ranked_for(fixture, index, kind, "note about topic 3").await
}

async fn ranked_for(
    fixture: &Fixture,
    index: &Index,
    kind: IndexKind,
    query: &str,
) -> (Ranked, IndexKind) {
    let limits = QueryLimits::new(1_024, 10, 100_000, -1.0, 10_000, kind);
    let result = index
        .query(&*fixture.documents, &access(), query, limits)
        .await
        .unwrap();
    let ranked = result
        .hits
        .iter()
        .map(|hit| (hit.key.id.to_string(), hit.ordinal, hit.score.to_bits()))
        .collect();
    (ranked, result.answered_by)
}

/// Indexes 300 documents, persists the graph, and answers what HNSW ranked before.
async fn persisted(fixture: &Fixture) -> Ranked {
    fixture.put_many(300).await;
    let index = fixture.open(HnswStartup::LoadOnly).await;
    fixture
        .catch_up(&index, ChangeSequence::ZERO)
        .await
        .unwrap();
    assert_eq!(
        index.hnsw_status(),
        HnswStatus::NotStarted,
        "LoadOnly builds nothing at open"
    );
    // A background build may have saved the graph first: either way it is stored now.
    assert!(matches!(
        index.persist_graph().await.unwrap(),
        PersistOutcome::Saved { chunks: 300 } | PersistOutcome::Unchanged
    ));
    assert_eq!(index.save_graph().await.unwrap(), PersistOutcome::Unchanged);
    let (before, answered_by) = ranked(fixture, &index, IndexKind::Hnsw).await;
    assert_eq!(answered_by, IndexKind::Hnsw);
    before
}

#[tokio::test]
async fn a_restart_loads_the_persisted_graph_without_building_or_embedding() {
    let fixture = Fixture::new();
    let before = persisted(&fixture).await;
    for startup in [
        HnswStartup::LoadOnly,
        HnswStartup::Background,
        HnswStartup::Blocking,
    ] {
        let calls = fixture.embedder.calls();
        let index = fixture.open(startup).await;
        let stats = index.stats();
        assert_eq!(stats.hnsw, HnswStatus::Ready, "{startup:?}");
        assert_eq!(stats.hnsw_origin, Some(GraphOrigin::LoadedFromStore));
        assert_eq!((stats.graph_builds, stats.graphs_loaded), (0, 1));
        assert!(!stats.hnsw_unsaved);
        assert_eq!(
            fixture.embedder.calls(),
            calls,
            "open never calls the model"
        );
        let (after, answered_by) = ranked(&fixture, &index, IndexKind::Hnsw).await;
        assert_eq!(answered_by, IndexKind::Hnsw);
        assert_eq!(
            after, before,
            "the reloaded graph ranks as the saved one did"
        );
    }

    // An increment lands on the loaded graph; persisting it builds nothing.
    let index = fixture.open(HnswStartup::LoadOnly).await;
    let from = index
        .store()
        .indexed_position(&index.digest())
        .await
        .unwrap();
    fixture
        .documents
        .put("late", "a late note about topic 3")
        .await;
    fixture.catch_up(&index, from).await.unwrap();
    assert!(index.stats().hnsw_unsaved);
    assert!(matches!(
        index.persist_graph().await.unwrap(),
        PersistOutcome::Saved { chunks: 301 }
    ));
    assert_eq!(index.stats().graph_builds, 0);
    let reopened = fixture.open(HnswStartup::LoadOnly).await;
    assert_eq!(reopened.stats().graph_builds, 0);
    assert_eq!(
        reopened.stats().hnsw_origin,
        Some(GraphOrigin::LoadedFromStore)
    );
    let (hits, answered_by) = ranked_for(
        &fixture,
        &reopened,
        IndexKind::Hnsw,
        "a late note about topic 3",
    )
    .await;
    assert_eq!(answered_by, IndexKind::Hnsw);
    assert_eq!(
        hits[0].0, "late",
        "the increment was persisted with the graph"
    );
}

#[tokio::test]
async fn a_graph_for_another_vector_set_is_stale_and_rebuilt() {
    let fixture = Fixture::new();
    persisted(&fixture).await;
    // Another process changes the vectors without persisting a graph.
    let writer = fixture.open(HnswStartup::OnDemand).await;
    let from = writer
        .store()
        .indexed_position(&writer.digest())
        .await
        .unwrap();
    fixture.documents.put("doc0001", "rewritten text").await;
    fixture.catch_up(&writer, from).await.unwrap();
    drop(writer);

    let one_shot = fixture.open(HnswStartup::LoadOnly).await;
    let stats = one_shot.stats();
    assert_eq!(
        stats.hnsw,
        HnswStatus::NotStarted,
        "a stale graph is never used"
    );
    assert_eq!((stats.graphs_loaded, stats.graph_loads_rejected), (0, 0));
    let (exact, _) = ranked(&fixture, &one_shot, IndexKind::Exact).await;
    let (meanwhile, answered_by) = ranked(&fixture, &one_shot, IndexKind::Hnsw).await;
    assert_eq!(
        answered_by,
        IndexKind::Exact,
        "the exact index answers meanwhile"
    );
    assert_eq!(meanwhile, exact);

    let server = fixture.open(HnswStartup::Background).await;
    server.hnsw_ready().await.unwrap();
    assert_eq!(server.stats().hnsw_origin, Some(GraphOrigin::Built));
    assert_eq!(server.stats().graph_builds, 1);
    // The build persisted its graph: the next one-shot loads it.
    server.save_graph().await.unwrap();
    let next = fixture.open(HnswStartup::LoadOnly).await;
    assert_eq!(next.stats().hnsw_origin, Some(GraphOrigin::LoadedFromStore));
}

async fn store_mutated(fixture: &Fixture, mutate: impl FnOnce(&mut Vec<u8>), fix_digest: bool) {
    let store = fixture.store();
    let digest = profile().digest().unwrap();
    let mut graph = store
        .load_graph(&digest, usize::MAX)
        .await
        .unwrap()
        .unwrap();
    mutate(&mut graph.bytes);
    if fix_digest && graph.bytes.len() >= 32 {
        let body = graph.bytes.len() - 32;
        let sum: [u8; 32] = Sha256::digest(&graph.bytes[..body]).into();
        graph.bytes[body..].copy_from_slice(&sum);
    }
    store.save_graph(&digest, &graph).await.unwrap();
}

/// A change to a stored graph's bytes, and whether its digest is recomputed after it.
type Corruption = (Box<dyn FnOnce(&mut Vec<u8>)>, bool);

#[tokio::test]
async fn a_corrupt_graph_is_rejected_and_the_exact_index_answers() {
    let fixture = Fixture::new();
    persisted(&fixture).await;
    let corruptions: Vec<Corruption> = vec![
        (Box::new(|bytes: &mut Vec<u8>| bytes[40] ^= 0xff), false),
        (Box::new(|bytes: &mut Vec<u8>| bytes.truncate(100)), false),
        (Box::new(|bytes: &mut Vec<u8>| bytes[0] = b'X'), true),
        // A neighbour reference far outside the points, with a valid digest.
        (
            Box::new(|bytes: &mut Vec<u8>| {
                let at = bytes.len() - 32 - 8;
                bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            }),
            true,
        ),
        // A NaN distance, with a valid digest.
        (
            Box::new(|bytes: &mut Vec<u8>| {
                let at = bytes.len() - 32 - 4;
                bytes[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
            }),
            true,
        ),
    ];
    for (round, (mutate, fix_digest)) in corruptions.into_iter().enumerate() {
        let fresh = Fixture::new();
        persisted(&fresh).await;
        store_mutated(&fresh, mutate, fix_digest).await;
        let index = fresh.open(HnswStartup::LoadOnly).await;
        let stats = index.stats();
        assert_eq!(stats.graph_loads_rejected, 1, "round {round}");
        assert_eq!(stats.hnsw, HnswStatus::NotStarted);
        let (_, answered_by) = ranked(&fresh, &index, IndexKind::Hnsw).await;
        assert_eq!(answered_by, IndexKind::Exact);
        // The server rebuilds over the rejected graph.
        let server = fresh.open(HnswStartup::Blocking).await;
        assert_eq!(server.stats().hnsw_origin, Some(GraphOrigin::Built));
    }
    drop(fixture);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any single-byte change, even with a recomputed digest, is either rejected or yields a graph
    /// that answers; never a panic or an exit.
    #[test]
    fn mutated_graphs_never_panic(position in 0usize..4_096, value in any::<u8>(), fix in any::<bool>()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let fixture = Fixture::new();
            fixture.put_many(60).await;
            let index = fixture.open(HnswStartup::LoadOnly).await;
            fixture.catch_up(&index, ChangeSequence::ZERO).await.unwrap();
            index.persist_graph().await.unwrap();
            drop(index);
            store_mutated(&fixture, |bytes| {
                let at = position % bytes.len();
                bytes[at] = if bytes[at] == value { value.wrapping_add(1) } else { value };
            }, fix).await;
            let index = fixture.open(HnswStartup::LoadOnly).await;
            let stats = index.stats();
            prop_assert_eq!(stats.graphs_loaded + stats.graph_loads_rejected, 1);
            let (hits, _) = ranked(&fixture, &index, IndexKind::Hnsw).await;
            prop_assert!(!hits.is_empty());
            Ok(())
        })?;
    }
}

fn one_chunk(i: usize) -> String {
    format!("short note {i}")
}

#[tokio::test]
async fn a_refresh_past_max_chunks_is_refused_and_changes_nothing() {
    let fixture = Fixture::new();
    let index = fixture.open_with(config(HnswStartup::OnDemand, 5)).await;
    for i in 0..6 {
        fixture.documents.put(&format!("d{i}"), &one_chunk(i)).await;
    }
    for i in 0..5 {
        let outcome = index
            .refresh(
                &*fixture.documents,
                &key(&format!("d{i}")),
                SourceGeneration::new(i as u64 + 1),
            )
            .await
            .unwrap();
        assert!(matches!(outcome, RefreshOutcome::Indexed { chunks: 1, .. }));
    }
    let calls = fixture.embedder.calls();
    let refused = index
        .refresh(&*fixture.documents, &key("d5"), SourceGeneration::new(6))
        .await;
    assert!(
        matches!(
            refused,
            Err(SemanticError::TooLarge {
                limit: "max_chunks",
                max: 5,
                actual: 6
            })
        ),
        "{refused:?}"
    );
    assert_eq!(
        fixture.embedder.calls(),
        calls,
        "refused before the embedder is called"
    );
    assert_eq!(index.stats().live_chunks, 5);
    let stored = index
        .store()
        .load_sources(
            &index.digest(),
            VectorLoadLimits {
                dimensions: DIMENSIONS,
                max_sources: 100,
                max_chunks: 100,
            },
        )
        .await
        .unwrap();
    assert_eq!(stored.len(), 5, "nothing was written");
    drop(index);
    // Opened again with room for fewer chunks than the store holds: refused before a chunk is read
    // (the store keeps its count), naming the setting to raise, and nothing is changed.
    let smaller = SemanticIndex::open(
        config(HnswStartup::OnDemand, 3),
        fixture.embedder.clone(),
        fixture.store(),
    )
    .await;
    assert!(
        matches!(
            smaller,
            Err(SemanticError::TooLarge {
                limit: "max_chunks",
                max: 3,
                actual: 5
            })
        ),
        "{:?}",
        smaller.err()
    );
    let reopened = fixture.open_with(config(HnswStartup::OnDemand, 5)).await;
    assert_eq!(reopened.stats().live_chunks, 5);
}

#[tokio::test]
async fn tombstones_are_reclaimed_so_capacity_stays_usable() {
    let fixture = Fixture::new();
    let index = fixture.open_with(config(HnswStartup::Blocking, 4)).await;
    let mut generation = 0u64;
    for round in 0..200usize {
        let id = format!("slot{}", round % 4);
        fixture.documents.put(&id, &one_chunk(round)).await;
        generation += 1;
        index
            .refresh(
                &*fixture.documents,
                &key(&id),
                SourceGeneration::new(generation),
            )
            .await
            .unwrap();
    }
    let stats = index.stats();
    assert_eq!(stats.live_chunks, 4);
    assert!(
        stats.tombstones <= 4,
        "exact tombstones compacted: {stats:?}"
    );
    while index.stats().hnsw_rebuilding {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let stats = index.stats();
    assert!(stats.graph_builds > 1, "the graph was rebuilt: {stats:?}");
    assert!(
        stats.hnsw_tombstones <= 2,
        "graph tombstones reclaimed: {stats:?}"
    );
    index.hnsw_ready().await.unwrap();
    let (hits, answered_by) = ranked(&fixture, &index, IndexKind::Hnsw).await;
    assert_eq!(answered_by, IndexKind::Hnsw);
    assert_eq!(hits.len(), 4);
}

#[tokio::test]
async fn catch_up_records_unindexed_documents_by_reason_and_clears_them() {
    let fixture = Fixture::new();
    let mut config = config(HnswStartup::OnDemand, 3);
    config.refresh.max_source_bytes = 200;
    config.refresh.max_chunks_per_source = 2;
    let index = fixture.open_with(config).await;
    fixture.documents.put("huge", &"x".repeat(300)).await;
    fixture
        .documents
        .put("long", &"many words in this note ".repeat(8))
        .await;
    for i in 0..5 {
        fixture.documents.put(&format!("d{i}"), &one_chunk(i)).await;
    }
    let head = fixture.documents.head().await.unwrap();
    let options = IndexerOptions::default();
    let refused = catch_up(
        &index,
        &*fixture.documents,
        &*fixture.documents,
        ChangeSequence::ZERO,
        head,
        options,
    )
    .await;
    assert!(
        matches!(
            refused,
            Err(SemanticError::TooLarge {
                limit: "max_chunks",
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(
        index.unindexed_counts().await.unwrap(),
        vec![
            (UnindexedReason::TooLarge, 1),
            (UnindexedReason::TooManyChunks, 1),
            (UnindexedReason::Capacity, 2),
        ]
    );
    let status = index.status().await.unwrap();
    assert_eq!(
        status.indexed_position,
        head.get(),
        "refused sources are settled, not skipped"
    );
    assert_eq!(status.stats.max_chunks, 3);

    // Withdrawals free room: the refused one-chunk documents are retried and indexed.
    for id in ["d0", "d1", "d2"] {
        fixture.documents.withdraw(id).await;
    }
    let head = fixture.documents.head().await.unwrap();
    let freed = catch_up(
        &index,
        &*fixture.documents,
        &*fixture.documents,
        status_position(&status),
        head,
        options,
    )
    .await
    .unwrap();
    assert_eq!((freed.unindexed, freed.capacity_unindexed), (2, 0));
    assert_eq!(index.stats().live_chunks, 2);

    // Fixed texts are indexed and their records cleared, until the capacity refuses one again.
    fixture.documents.put("huge", "now small").await;
    fixture.documents.put("long", "now short too").await;
    let head = fixture.documents.head().await.unwrap();
    let fixed = catch_up_report(
        &index,
        &*fixture.documents,
        &*fixture.documents,
        freed.position,
        head,
        options,
    )
    .await
    .unwrap();
    assert_eq!((fixed.unindexed, fixed.capacity_unindexed), (1, 1));
    assert_eq!(
        index.unindexed_counts().await.unwrap(),
        vec![(UnindexedReason::Capacity, 1)]
    );
    fixture.documents.withdraw("huge").await;
    let head = fixture.documents.head().await.unwrap();
    let done = catch_up(
        &index,
        &*fixture.documents,
        &*fixture.documents,
        fixed.position,
        head,
        options,
    )
    .await
    .unwrap();
    assert_eq!((done.unindexed, done.capacity_unindexed), (0, 0));
    assert!(index.unindexed_counts().await.unwrap().is_empty());
    assert_eq!(index.stats().live_chunks, 3);
}

fn status_position(status: &semantic_index::IndexStatus) -> ChangeSequence {
    ChangeSequence::new(status.indexed_position)
}

#[tokio::test]
async fn recall_sources_say_which_index_answered() {
    use semantic_index::SemanticRecall;
    let fixture = Fixture::new();
    fixture.put_many(50).await;
    let index = Arc::new(fixture.open(HnswStartup::LoadOnly).await);
    fixture
        .catch_up(&index, ChangeSequence::ZERO)
        .await
        .unwrap();
    let limits = QueryLimits::new(1_024, 5, 100_000, -1.0, 10_000, IndexKind::Hnsw);
    let semantic = || {
        SemanticRecall::new(
            Arc::clone(&index),
            Arc::clone(&fixture.documents),
            access(),
            "note 7",
            limits,
        )
    };
    let answered = semantic().lookup_answered().await.unwrap();
    assert_eq!(answered.answered_by, Some(IndexKind::Exact), "no graph yet");
    index.persist_graph().await.unwrap();
    let answered = semantic().lookup_answered().await.unwrap();
    assert_eq!(answered.answered_by, Some(IndexKind::Hnsw));
}
