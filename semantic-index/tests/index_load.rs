//! Loading and searching at restart: the HNSW graph built off the query path (answered exactly until
//! it is ready), restarts that serve the stored vectors and never the model, namespace filtering before
//! the candidate limit, and the store's generation fence between two indexes sharing one file.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use common::ProbeEmbedder;
use memory_core::RevalidationLimits;
use memory_core::vectors::SourceGeneration;
use memory_core::{
    DocumentId, InMemoryStore, MemoryAccess, MemoryContent, MemoryKey, MemoryReader, MemoryScope,
    MemoryWrite, MemoryWriter, NamespaceAddress, OperationId, Revision,
};
use memory_sqlite::vectors::SqliteVectorStore;
use semantic_index::engine::{HnswStartup, HnswStatus};
use semantic_index::recall::{ScoredLookup, semantic_lookup};
use semantic_index::{
    DeterministicEmbedder, HnswParams, IndexKind, Preprocessing, QueryLimits, SemanticError,
    SemanticIndex, SemanticIndexConfig, SemanticProfile,
};

const DIMENSIONS: usize = 64;
const CROWDED: &str = r#"[1,"semantic-tests",1,{"user":"crowded"}]"#;
const SPARSE: &str = r#"[1,"semantic-tests",1,{"user":"sparse"}]"#;
const SCOPE: &str = "recall";

type Probe = ProbeEmbedder<DeterministicEmbedder>;
type Index = SemanticIndex<Probe, SqliteVectorStore>;

fn profile() -> SemanticProfile {
    SemanticProfile {
        provider: "test".to_owned(),
        model: "deterministic".to_owned(),
        model_revision: "1".to_owned(),
        dimensions: DIMENSIONS,
        max_sequence_length: 128,
        chunking: semantic_index::ChunkingConfig {
            max_chunk_bytes: 256,
        },
        preprocessing: Preprocessing::TextOnly,
    }
}

/// Small graph parameters, so a few dozen chunks already exceed the HNSW candidate list.
fn config(startup: HnswStartup) -> SemanticIndexConfig {
    SemanticIndexConfig {
        hnsw: HnswParams {
            max_connections: 8,
            ef_construction: 32,
            ef_search: 8,
            width_grows: false,
            max_layers: 4,
            rebuild_tombstone_fraction: 0.5,
        },
        hnsw_startup: startup,
        ..SemanticIndexConfig::new(profile())
    }
}

fn limits(index: IndexKind, candidates: usize) -> QueryLimits {
    QueryLimits::new(1_024, candidates, 10_000, -1.0, 5_000, index)
}

fn key(namespace: &str, id: &str) -> MemoryKey {
    MemoryKey {
        namespace: NamespaceAddress::parse(namespace).unwrap(),
        id: DocumentId::new(id).unwrap(),
    }
}

fn access(namespace: &str) -> MemoryAccess {
    MemoryAccess {
        namespace: NamespaceAddress::parse(namespace).unwrap(),
        scope: MemoryScope::new(SCOPE).unwrap(),
    }
}

struct Fixture {
    _directory: tempfile::TempDir,
    path: std::path::PathBuf,
    documents: Arc<InMemoryStore>,
    embedder: Arc<Probe>,
    operations: std::sync::atomic::AtomicUsize,
}

impl Fixture {
    fn new() -> Self {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("vectors.sqlite");
        Self {
            _directory: directory,
            path,
            documents: Arc::new(InMemoryStore::default()),
            embedder: ProbeEmbedder::new(DeterministicEmbedder::new(DIMENSIONS)),
            operations: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    async fn open(&self, startup: HnswStartup) -> Index {
        self.open_with(config(startup)).await
    }

    async fn open_with(&self, config: SemanticIndexConfig) -> Index {
        let store = Arc::new(SqliteVectorStore::open(&self.path).unwrap());
        SemanticIndex::open(config, self.embedder.clone(), store)
            .await
            .unwrap()
    }

    async fn put(&self, key: &MemoryKey, text: &str) -> Revision {
        let current = self
            .documents
            .read(key)
            .await
            .unwrap()
            .map(|document| document.revision);
        let operation = self
            .operations
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.documents
            .apply(MemoryWrite::Put {
                key: key.clone(),
                operation_id: OperationId::new(format!("op-{operation}")).unwrap(),
                expected_revision: current,
                locator: format!("test:{}", key.id),
                content: MemoryContent::text(text),
                scopes: vec![MemoryScope::new(SCOPE).unwrap()],
            })
            .await
            .unwrap()
            .receipt
            .document
            .revision
    }

    /// Puts and indexes `count` documents of `namespace`, generations from `first_generation`.
    async fn fill(
        &self,
        index: &Index,
        namespace: &str,
        prefix: &str,
        text: impl Fn(usize) -> String,
        count: usize,
        first_generation: u64,
    ) {
        for i in 0..count {
            let key = key(namespace, &format!("{prefix}{i:03}"));
            self.put(&key, &text(i)).await;
            index
                .refresh(
                    &*self.documents,
                    &key,
                    SourceGeneration::new(first_generation + i as u64),
                )
                .await
                .unwrap();
        }
    }
}

fn hit_ids(result: &semantic_index::SemanticQueryResult) -> Vec<(String, u32)> {
    result
        .hits
        .iter()
        .map(|hit| (hit.key.id.to_string(), hit.ordinal))
        .collect()
}

const QUERY: &str = "apple orchards bloom in the spring rain";

/// The crowded namespace holds many chunks nearly identical to the query; the sparse one a few that
/// are merely related, so an unfiltered candidate list is all crowded chunks.
async fn crowded_and_sparse(fixture: &Fixture, index: &Index, sparse: usize) {
    fixture
        .fill(index, CROWDED, "c", |i| format!("{QUERY} c{i}"), 60, 1)
        .await;
    fixture
        .fill(
            index,
            SPARSE,
            "s",
            |i| format!("apple orchards bloom {i} and pears ripen in autumn"),
            sparse,
            1_000,
        )
        .await;
}

#[tokio::test]
async fn a_sparse_namespace_gets_its_full_candidate_count() {
    let fixture = Fixture::new();
    let index = fixture.open(HnswStartup::Blocking).await;
    // 12 sparse chunks: more than the HNSW candidate list (8), so the graph path is filtered too.
    crowded_and_sparse(&fixture, &index, 12).await;
    index.hnsw_ready().await.unwrap();
    for kind in [IndexKind::Exact, IndexKind::Hnsw] {
        let result = index
            .query(&*fixture.documents, &access(SPARSE), QUERY, limits(kind, 5))
            .await
            .unwrap();
        assert_eq!(result.answered_by, kind);
        assert_eq!(result.hits.len(), 5, "{kind:?}: {result:?}");
        assert_eq!(
            result.excluded_unauthorized, 0,
            "{kind:?}: no candidate of another namespace"
        );
        assert!(
            result
                .hits
                .iter()
                .all(|hit| hit.key.namespace.as_str() == SPARSE)
        );
        let crowded = index
            .query(
                &*fixture.documents,
                &access(CROWDED),
                QUERY,
                limits(kind, 5),
            )
            .await
            .unwrap();
        assert_eq!(crowded.hits.len(), 5);
        assert!(crowded.hits.iter().all(|hit| hit.score > 0.8));
    }
    // A namespace smaller than the HNSW candidate list is scanned exactly, and counted as scanned.
    let few = Fixture::new();
    let index = few.open(HnswStartup::Blocking).await;
    crowded_and_sparse(&few, &index, 3).await;
    let result = index
        .query(
            &*few.documents,
            &access(SPARSE),
            QUERY,
            limits(IndexKind::Hnsw, 5),
        )
        .await
        .unwrap();
    assert_eq!(result.hits.len(), 3);
    assert_eq!(result.scanned_chunks, 3);
    let exact = index
        .query(
            &*few.documents,
            &access(SPARSE),
            QUERY,
            limits(IndexKind::Exact, 5),
        )
        .await
        .unwrap();
    assert_eq!(hit_ids(&exact), hit_ids(&result));
    assert_eq!(exact.scanned_chunks, 3);
}

/// The recall sources (what `memory recall` uses) search the caller's namespace only: with 60
/// crowded chunks closer to the query than any sparse one, an unfiltered candidate list of 5 would hold
/// none of the sparse namespace's documents.
#[tokio::test]
async fn recall_lookups_fill_their_candidates_from_the_callers_namespace() {
    let fixture = Fixture::new();
    let index = Arc::new(fixture.open(HnswStartup::Blocking).await);
    crowded_and_sparse(&fixture, &index, 12).await;
    index.hnsw_ready().await.unwrap();
    let reader = Arc::clone(&fixture.documents);
    for kind in [IndexKind::Exact, IndexKind::Hnsw] {
        let lookup = semantic_lookup(
            &index,
            &reader,
            &access(SPARSE),
            QUERY,
            limits(kind, 5),
            &RevalidationLimits::default(),
        )
        .await
        .unwrap();
        let ScoredLookup::Found(passages) = lookup else {
            panic!("{kind:?}: expected passages, got {lookup:?}");
        };
        assert_eq!(passages.len(), 5, "{kind:?}: {passages:?}");
        assert!(
            passages
                .iter()
                .all(|scored| scored.passage.content.text.contains("pears ripen")),
            "{kind:?}: only the sparse namespace's documents: {passages:?}"
        );
    }
}

#[tokio::test]
async fn hnsw_queries_are_answered_exactly_until_the_graph_is_built() {
    let fixture = Fixture::new();
    let index = fixture.open(HnswStartup::OnDemand).await;
    assert_eq!(index.hnsw_status(), HnswStatus::NotStarted);
    crowded_and_sparse(&fixture, &index, 12).await;
    let sparse = access(SPARSE);
    let query = |kind| index.query(&*fixture.documents, &sparse, QUERY, limits(kind, 5));
    let exact = query(IndexKind::Exact).await.unwrap();
    let early = query(IndexKind::Hnsw).await.unwrap();
    assert_eq!(early.answered_by, IndexKind::Exact);
    assert_eq!(hit_ids(&early), hit_ids(&exact));
    assert_eq!(early.scanned_chunks, exact.scanned_chunks);

    index.hnsw_ready().await.unwrap();
    assert_eq!(index.hnsw_status(), HnswStatus::Ready);
    let ready = query(IndexKind::Hnsw).await.unwrap();
    assert_eq!(ready.answered_by, IndexKind::Hnsw);
    assert_eq!(ready.hits.len(), 5);
}

type Candidates = Vec<(String, String, u64, u32, f32)>;

/// Every chunk's candidate entry (source, revision, generation, ordinal, score), best first.
async fn all_candidates(index: &Index, kind: IndexKind) -> Candidates {
    let candidates = index
        .search_candidates_in_every_namespace(QUERY, limits(kind, 100))
        .await
        .unwrap();
    assert_eq!(candidates.answered_by, kind);
    candidates
        .hits
        .iter()
        .map(|hit| {
            let source = &hit.chunk.source;
            (
                format!("{}/{}", source.key.namespace.as_str(), source.key.id),
                source.revision.to_string(),
                source.generation.get(),
                hit.chunk.ordinal,
                hit.score,
            )
        })
        .collect()
}

/// HNSW candidates are approximate (which of them a graph finds depends on how it was built), but
/// each must be an exact candidate with the same revision, generation, ordinal and score, and the
/// best score must be found.
fn assert_drawn_from(hnsw: &Candidates, exact: &Candidates) {
    assert!(!hnsw.is_empty());
    assert_eq!(hnsw[0].4, exact[0].4);
    for candidate in hnsw {
        assert!(
            exact.contains(candidate),
            "{candidate:?} is not a stored chunk"
        );
    }
}

#[tokio::test]
async fn a_restart_serves_the_stored_vectors_without_the_model() {
    let fixture = Fixture::new();
    // A candidate list wider than the 72 chunks.
    let wide = |startup| SemanticIndexConfig {
        hnsw: HnswParams {
            ef_search: 128,
            ..config(startup).hnsw
        },
        ..config(startup)
    };
    let open = |startup| fixture.open_with(wide(startup));
    let before = {
        let index = open(HnswStartup::Blocking).await;
        crowded_and_sparse(&fixture, &index, 12).await;
        let exact = all_candidates(&index, IndexKind::Exact).await;
        assert_eq!(exact.len(), 72);
        assert_drawn_from(&all_candidates(&index, IndexKind::Hnsw).await, &exact);
        exact
    };
    let texts = || {
        fixture
            .embedder
            .texts
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    for startup in [HnswStartup::Background, HnswStartup::OnDemand] {
        let embedded = texts();
        let index = open(startup).await;
        assert_eq!(texts(), embedded, "a restart never calls the model");
        index.hnsw_ready().await.unwrap();
        assert_eq!(texts(), embedded, "nor does building the graph");
        assert_eq!(all_candidates(&index, IndexKind::Exact).await, before);
        assert_drawn_from(&all_candidates(&index, IndexKind::Hnsw).await, &before);
    }

    // Another index on the same file moves a source on: a restart serves the new vectors only.
    {
        let writer = open(HnswStartup::OnDemand).await;
        let moved = key(SPARSE, "s000");
        fixture.put(&moved, "rocket engines burn liquid fuel").await;
        writer
            .refresh(&*fixture.documents, &moved, SourceGeneration::new(5_000))
            .await
            .unwrap();
    }
    let index = open(HnswStartup::Background).await;
    index.hnsw_ready().await.unwrap();
    let exact = all_candidates(&index, IndexKind::Exact).await;
    assert_drawn_from(&all_candidates(&index, IndexKind::Hnsw).await, &exact);
    let moved: Vec<_> = exact
        .iter()
        .filter(|candidate| candidate.0.contains("s000"))
        .collect();
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].2, 5_000);
    let unmoved = |candidates: &Candidates| -> Vec<_> {
        candidates
            .iter()
            .filter(|candidate| !candidate.0.contains("s000"))
            .cloned()
            .collect()
    };
    assert_eq!(unmoved(&exact), unmoved(&before));
    let result = index
        .query(
            &*fixture.documents,
            &access(SPARSE),
            QUERY,
            limits(IndexKind::Hnsw, 20),
        )
        .await
        .unwrap();
    assert_eq!(result.excluded_stale, 0, "no stored vector is stale");
    assert_eq!(result.hits.len(), 12);
}

#[tokio::test]
async fn a_stale_refresh_through_another_index_changes_nothing() {
    let fixture = Fixture::new();
    let ahead = fixture.open(HnswStartup::Blocking).await;
    let behind = fixture.open(HnswStartup::Blocking).await;
    let shared = key(SPARSE, "shared");
    let first = fixture
        .put(&shared, "the first text of the shared note")
        .await;
    ahead
        .refresh(&*fixture.documents, &shared, SourceGeneration::new(5))
        .await
        .unwrap();
    fixture
        .put(&shared, "a second text of the shared note")
        .await;
    let error = behind
        .refresh(&*fixture.documents, &shared, SourceGeneration::new(3))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            SemanticError::Fenced { current, attempted }
                if current == SourceGeneration::new(5) && attempted == SourceGeneration::new(3)
        ),
        "{error:?}"
    );
    assert!(matches!(
        behind.withdraw(&shared, SourceGeneration::new(4)).await,
        Err(SemanticError::Fenced { .. })
    ));
    let restarted = fixture.open(HnswStartup::Blocking).await;
    let candidates = restarted
        .search_candidates_in_every_namespace("shared note", limits(IndexKind::Exact, 5))
        .await
        .unwrap();
    assert_eq!(candidates.hits.len(), 1);
    assert_eq!(candidates.hits[0].chunk.source.revision, first);
    assert_eq!(
        candidates.hits[0].chunk.source.generation,
        SourceGeneration::new(5)
    );
    assert_eq!(
        behind.stats().live_chunks,
        0,
        "the fenced refresh did not reach the index either"
    );
}
