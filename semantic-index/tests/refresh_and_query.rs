//! Refresh, withdrawal, fencing, revalidation and restart, with the deterministic test embedder and the
//! SQLite vector store.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use common::{FeedStore, ProbeEmbedder, access, key};
use memory_core::vectors::SourceGeneration;
use memory_core::{MemoryAccess, MemoryScope};
use memory_sqlite::vectors::SqliteVectorStore;
use semantic_index::{
    DeterministicEmbedder, IndexKind, Preprocessing, QueryLimits, RefreshOutcome, SemanticError,
    SemanticIndex, SemanticIndexConfig, SemanticProfile,
};

const DIMENSIONS: usize = 64;

fn profile() -> SemanticProfile {
    SemanticProfile {
        provider: "test".to_owned(),
        model: "deterministic".to_owned(),
        model_revision: "1".to_owned(),
        dimensions: DIMENSIONS,
        max_sequence_length: 128,
        chunking: semantic_index::ChunkingConfig {
            max_chunk_bytes: 48,
        },
        preprocessing: Preprocessing::TextOnly,
    }
}

fn limits(index: IndexKind) -> QueryLimits {
    QueryLimits::new(1_024, 10, 10_000, 0.1, 5_000, index)
}

type Probe = ProbeEmbedder<DeterministicEmbedder>;

struct Fixture {
    _directory: tempfile::TempDir,
    path: std::path::PathBuf,
    documents: FeedStore,
    embedder: Arc<Probe>,
}

impl Fixture {
    fn new() -> Self {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("vectors.sqlite");
        Self {
            _directory: directory,
            path,
            documents: FeedStore::default(),
            embedder: ProbeEmbedder::new(DeterministicEmbedder::new(DIMENSIONS)),
        }
    }

    async fn open(&self) -> SemanticIndex<Probe, SqliteVectorStore> {
        self.open_with(SemanticIndexConfig::new(profile())).await
    }

    async fn open_with(
        &self,
        config: SemanticIndexConfig,
    ) -> SemanticIndex<Probe, SqliteVectorStore> {
        let store = Arc::new(SqliteVectorStore::open(&self.path).unwrap());
        SemanticIndex::open(config, self.embedder.clone(), store)
            .await
            .unwrap()
    }
}

fn ids(result: &semantic_index::SemanticQueryResult) -> Vec<String> {
    result
        .hits
        .iter()
        .map(|hit| hit.key.id.to_string())
        .collect()
}

#[tokio::test]
async fn refreshed_documents_are_found_in_both_indexes() {
    let fixture = Fixture::new();
    let index = fixture.open().await;
    fixture
        .documents
        .put("cat", "the cat sleeps on the warm mat")
        .await;
    fixture
        .documents
        .put("rocket", "rocket engines burn liquid fuel")
        .await;
    for (generation, id) in [(1, "cat"), (2, "rocket")] {
        let outcome = index
            .refresh(
                &fixture.documents,
                &key(id),
                SourceGeneration::new(generation),
            )
            .await
            .unwrap();
        assert!(matches!(outcome, RefreshOutcome::Indexed { chunks: 1, .. }));
    }
    for kind in [IndexKind::Exact, IndexKind::Hnsw] {
        let result = index
            .query(
                &fixture.documents,
                &access(),
                "where does the cat sleep",
                limits(kind),
            )
            .await
            .unwrap();
        assert_eq!(ids(&result)[0], "cat", "{kind:?}");
        assert_eq!(result.hits[0].excerpt, "the cat sleeps on the warm mat");
        assert_eq!(result.embedding.texts, 1);
    }
}

#[tokio::test]
async fn stale_and_unauthorized_candidates_are_dropped_and_counted() {
    let fixture = Fixture::new();
    let index = fixture.open().await;
    fixture
        .documents
        .put("a", "apples grow on apple trees")
        .await;
    fixture.documents.put("b", "apples are red").await;
    index
        .refresh(&fixture.documents, &key("a"), SourceGeneration::new(1))
        .await
        .unwrap();
    index
        .refresh(&fixture.documents, &key("b"), SourceGeneration::new(2))
        .await
        .unwrap();
    // Changed after indexing and not yet refreshed: the old vector must not lend its score to new text.
    fixture.documents.put("a", "bananas are yellow").await;
    let result = index
        .query(
            &fixture.documents,
            &access(),
            "apples",
            limits(IndexKind::Exact),
        )
        .await
        .unwrap();
    assert_eq!(ids(&result), vec!["b"]);
    assert_eq!(result.excluded_stale, 1);
    let stranger = MemoryAccess {
        scope: MemoryScope::new("other-scope").unwrap(),
        ..access()
    };
    let result = index
        .query(
            &fixture.documents,
            &stranger,
            "apples",
            limits(IndexKind::Exact),
        )
        .await
        .unwrap();
    assert!(result.hits.is_empty());
    assert_eq!(
        result.excluded_unauthorized, 2,
        "authorization is checked before freshness"
    );
}

#[tokio::test]
async fn failed_refresh_leaves_the_previous_chunks() {
    let fixture = Fixture::new();
    let index = fixture.open().await;
    let first = fixture
        .documents
        .put("doc", "the lighthouse keeper lit the lamp")
        .await;
    index
        .refresh(&fixture.documents, &key("doc"), SourceGeneration::new(1))
        .await
        .unwrap();
    fixture
        .documents
        .put("doc", "the lighthouse keeper slept all night")
        .await;
    fixture
        .embedder
        .fail
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let error = index
        .refresh(&fixture.documents, &key("doc"), SourceGeneration::new(2))
        .await
        .unwrap_err();
    assert!(matches!(error, SemanticError::Embed(_)), "{error}");
    fixture
        .embedder
        .fail
        .store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(index.stats().live_chunks, 1);
    // The previous chunks are still there (and stale against the new text); a restart sees the same.
    let reopened = fixture.open().await;
    for kept in [&index, &reopened] {
        let result = kept
            .query(
                &fixture.documents,
                &access(),
                "lighthouse lamp",
                limits(IndexKind::Exact),
            )
            .await
            .unwrap();
        assert_eq!(result.excluded_stale, 1, "old chunk kept, dropped as stale");
    }
    let _ = first;
    index
        .refresh(&fixture.documents, &key("doc"), SourceGeneration::new(2))
        .await
        .unwrap();
    let result = index
        .query(
            &fixture.documents,
            &access(),
            "keeper slept",
            limits(IndexKind::Exact),
        )
        .await
        .unwrap();
    assert_eq!(
        result.hits[0].excerpt,
        "the lighthouse keeper slept all night"
    );
}

#[tokio::test]
async fn withdrawn_source_never_comes_back_through_a_delayed_refresh() {
    let fixture = Fixture::new();
    let index = fixture.open().await;
    fixture
        .documents
        .put("secret", "the vault code is hidden")
        .await;
    index
        .refresh(&fixture.documents, &key("secret"), SourceGeneration::new(1))
        .await
        .unwrap();
    assert_eq!(
        index
            .withdraw(&key("secret"), SourceGeneration::new(3))
            .await
            .unwrap(),
        RefreshOutcome::Withdrawn
    );
    let before = index.stats();
    assert_eq!(
        index
            .withdraw(&key("secret"), SourceGeneration::new(3))
            .await
            .unwrap(),
        RefreshOutcome::AlreadyWithdrawn
    );
    assert_eq!(
        index.stats(),
        before,
        "a replayed withdrawal charges nothing"
    );
    // The document is still readable in this store, as a delayed refresh would have seen it.
    for generation in [2, 4] {
        let error = index
            .refresh(
                &fixture.documents,
                &key("secret"),
                SourceGeneration::new(generation),
            )
            .await
            .unwrap_err();
        assert!(matches!(error, SemanticError::Withdrawn), "{error}");
    }
    let reopened = fixture.open().await;
    let error = reopened
        .refresh(&fixture.documents, &key("secret"), SourceGeneration::new(5))
        .await
        .unwrap_err();
    assert!(matches!(error, SemanticError::Withdrawn));
    let result = reopened
        .query(
            &fixture.documents,
            &access(),
            "vault code",
            limits(IndexKind::Exact),
        )
        .await
        .unwrap();
    assert!(result.hits.is_empty() && result.scanned_chunks == 0);
}

#[tokio::test]
async fn older_and_divergent_generations_are_fenced() {
    let fixture = Fixture::new();
    let index = fixture.open().await;
    fixture.documents.put("doc", "first text").await;
    index
        .refresh(&fixture.documents, &key("doc"), SourceGeneration::new(5))
        .await
        .unwrap();
    assert_eq!(
        index
            .refresh(&fixture.documents, &key("doc"), SourceGeneration::new(5))
            .await
            .unwrap(),
        RefreshOutcome::Unchanged
    );
    let error = index
        .refresh(&fixture.documents, &key("doc"), SourceGeneration::new(4))
        .await
        .unwrap_err();
    assert!(matches!(error, SemanticError::Fenced { .. }));
    fixture.documents.put("doc", "second text").await;
    let error = index
        .refresh(&fixture.documents, &key("doc"), SourceGeneration::new(5))
        .await
        .unwrap_err();
    assert!(matches!(error, SemanticError::Divergent { .. }));
}

#[tokio::test]
async fn restart_reloads_vectors_without_calling_the_embedder() {
    let fixture = Fixture::new();
    {
        let index = fixture.open().await;
        for (generation, (id, text)) in [
            (
                "one",
                "alpha beta gamma. delta epsilon zeta eta theta iota kappa lambda mu nu xi",
            ),
            ("two", "rivers flow into the sea"),
        ]
        .into_iter()
        .enumerate()
        {
            fixture.documents.put(id, text).await;
            index
                .refresh(
                    &fixture.documents,
                    &key(id),
                    SourceGeneration::new(generation as u64 + 1),
                )
                .await
                .unwrap();
        }
    }
    let calls_before = fixture.embedder.calls();
    let reopened = fixture.open().await;
    assert_eq!(
        fixture.embedder.calls(),
        calls_before,
        "open embeds nothing"
    );
    assert_eq!(reopened.stats().live_chunks, 3);
    let result = reopened
        .query(
            &fixture.documents,
            &access(),
            "rivers and the sea",
            limits(IndexKind::Hnsw),
        )
        .await
        .unwrap();
    assert_eq!(ids(&result)[0], "two");
    // Another profile never sees these vectors.
    let other = SemanticIndexConfig::new(SemanticProfile {
        model_revision: "2".to_owned(),
        ..profile()
    });
    assert_eq!(fixture.open_with(other).await.stats().live_chunks, 0);
}

#[tokio::test]
async fn limits_are_enforced_with_typed_errors() {
    let fixture = Fixture::new();
    let index = fixture.open().await;
    fixture
        .documents
        .put("doc", "some words to find here")
        .await;
    index
        .refresh(&fixture.documents, &key("doc"), SourceGeneration::new(1))
        .await
        .unwrap();
    let reader_access = access();
    let query = |limits| index.query(&fixture.documents, &reader_access, "words to find", limits);
    let too_long = QueryLimits {
        max_query_bytes: 4,
        ..limits(IndexKind::Exact)
    };
    assert!(matches!(
        query(too_long).await,
        Err(SemanticError::TooLarge {
            limit: "max_query_bytes",
            ..
        })
    ));
    let scan = QueryLimits {
        max_scanned_chunks: 0,
        ..limits(IndexKind::Exact)
    };
    assert!(matches!(
        query(scan).await,
        Err(SemanticError::InvalidInput { .. })
    ));
    let output = QueryLimits {
        max_output_bytes: 10,
        ..limits(IndexKind::Exact)
    };
    assert!(matches!(
        query(output).await,
        Err(SemanticError::Budget {
            limit: "max_output_bytes",
            ..
        })
    ));
    let sources = QueryLimits {
        max_source_bytes: 10,
        ..limits(IndexKind::Exact)
    };
    assert!(matches!(
        query(sources).await,
        Err(SemanticError::Budget {
            limit: "max_source_bytes",
            ..
        })
    ));
    let over = QueryLimits {
        max_source_bytes: 64 * 1024 * 1024 + 1,
        ..limits(IndexKind::Exact)
    };
    assert!(matches!(
        query(over).await,
        Err(SemanticError::TooLarge { .. })
    ));
    let hnsw_scan = QueryLimits {
        max_scanned_chunks: 5,
        ..limits(IndexKind::Hnsw)
    };
    assert!(matches!(
        query(hnsw_scan).await,
        Err(SemanticError::Budget {
            limit: "max_scanned_chunks",
            ..
        })
    ));
    let mut config = SemanticIndexConfig::new(profile());
    config.refresh.max_chunks_per_source = 1;
    let tight = fixture.open_with(config).await;
    fixture.documents.put("long", &"word ".repeat(40)).await;
    let calls = fixture.embedder.calls();
    let error = tight
        .refresh(&fixture.documents, &key("long"), SourceGeneration::new(9))
        .await
        .unwrap_err();
    assert!(matches!(
        error,
        SemanticError::TooLarge {
            limit: "max_chunks_per_source",
            ..
        }
    ));
    assert_eq!(
        fixture.embedder.calls(),
        calls,
        "limits are checked before embedding"
    );
}

#[tokio::test]
async fn indexer_follows_the_feed_and_resumes_from_its_stored_position() {
    use semantic_index::{Indexer, IndexerOptions};
    let fixture = Fixture::new();
    let documents = Arc::new(FeedStore::default());
    let open = || async {
        let store = Arc::new(SqliteVectorStore::open(&fixture.path).unwrap());
        Arc::new(
            SemanticIndex::open(
                SemanticIndexConfig::new(profile()),
                fixture.embedder.clone(),
                store,
            )
            .await
            .unwrap(),
        )
    };
    let options = IndexerOptions {
        poll_interval: std::time::Duration::from_millis(5),
        ..IndexerOptions::default()
    };
    let index = open().await;
    let indexer = Indexer::spawn(index.clone(), documents.clone(), documents.clone(), options)
        .await
        .unwrap();
    documents
        .put("garden", "tomatoes ripen in the garden")
        .await;
    documents
        .put("kitchen", "bread bakes in the kitchen oven")
        .await;
    documents
        .put("garden", "cucumbers climb the garden trellis")
        .await;
    documents
        .put("attic", "old letters sleep in the attic")
        .await;
    documents.withdraw("attic").await;
    let head = memory_core::ChangeFeed::head(&*documents).await.unwrap();
    indexer.wait_until_indexed(head).await.unwrap();
    assert_eq!(indexer.position(), head);
    let result = index
        .query(
            &*documents,
            &access(),
            "cucumbers trellis",
            limits(IndexKind::Exact),
        )
        .await
        .unwrap();
    assert_eq!(result.hits[0].excerpt, "cucumbers climb the garden trellis");
    assert_eq!(index.stats().withdrawn, 1);
    indexer.shutdown().await;
    drop(index);

    let calls = fixture.embedder.calls();
    let index = open().await;
    let indexer = Indexer::spawn(index.clone(), documents.clone(), documents.clone(), options)
        .await
        .unwrap();
    assert_eq!(indexer.position(), head, "resumes from the stored position");
    documents.put("cellar", "wine rests in the cellar").await;
    let head = memory_core::ChangeFeed::head(&*documents).await.unwrap();
    indexer.wait_until_indexed(head).await.unwrap();
    assert_eq!(
        fixture.embedder.calls(),
        calls + 1,
        "only the new change was embedded"
    );
    indexer.shutdown().await;
}
