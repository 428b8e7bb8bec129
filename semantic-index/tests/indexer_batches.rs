//! Batched indexing: `SemanticIndex::refresh_many` and `indexer::catch_up` share embedder calls between
//! documents while keeping per-source fencing and atomic replacement.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::{FeedStore, ProbeEmbedder, access, key};
use memory_core::vectors::{SourceGeneration, VectorStore};
use memory_core::{ChangeFeed, ChangeSequence};
use memory_sqlite::vectors::SqliteVectorStore;
use semantic_index::indexer::{CatchUp, catch_up};
use semantic_index::{
    ChunkingConfig, DeterministicEmbedder, IndexKind, IndexerOptions, Preprocessing, QueryLimits,
    RefreshOutcome, SemanticError, SemanticIndex, SemanticIndexConfig, SemanticProfile,
};

const DIMENSIONS: usize = 64;

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
            max_chunk_bytes: 48,
        },
        preprocessing: Preprocessing::TextOnly,
    }
}

struct Fixture {
    _directory: tempfile::TempDir,
    documents: Arc<FeedStore>,
    embedder: Arc<Probe>,
    vectors: Arc<SqliteVectorStore>,
    index: Arc<Index>,
}

impl Fixture {
    async fn new() -> Self {
        let directory = tempfile::tempdir().unwrap();
        let vectors =
            Arc::new(SqliteVectorStore::open(directory.path().join("vectors.sqlite")).unwrap());
        let embedder = ProbeEmbedder::new(DeterministicEmbedder::new(DIMENSIONS));
        let index = Arc::new(
            SemanticIndex::open(
                SemanticIndexConfig::new(profile()),
                embedder.clone(),
                vectors.clone(),
            )
            .await
            .unwrap(),
        );
        Self {
            _directory: directory,
            documents: Arc::new(FeedStore::default()),
            embedder,
            vectors,
            index,
        }
    }

    async fn catch_up(
        &self,
        from: ChangeSequence,
        max_embed_texts: usize,
    ) -> Result<CatchUp, SemanticError> {
        let head = self.documents.head().await.unwrap();
        let options = IndexerOptions {
            max_embed_texts,
            ..IndexerOptions::default()
        };
        catch_up(
            &*self.index,
            &*self.documents,
            &*self.documents,
            from,
            head,
            options,
        )
        .await
    }

    async fn top_excerpt(&self, query: &str) -> Option<String> {
        let limits = QueryLimits::new(1_024, 10, 10_000, 0.1, 5_000, IndexKind::Exact);
        let result = self
            .index
            .query(&*self.documents, &access(), query, limits)
            .await
            .unwrap();
        result.hits.first().map(|hit| hit.excerpt.clone())
    }
}

const ONE_CHUNK: [(&str, &str); 6] = [
    ("garden", "tomatoes ripen in the garden"),
    ("kitchen", "bread bakes in the kitchen oven"),
    ("attic", "old letters sleep in the attic"),
    ("cellar", "wine rests in the cellar"),
    ("garage", "the bicycle hangs in the garage"),
    ("porch", "a cat naps on the porch"),
];

#[tokio::test]
async fn catch_up_embeds_several_documents_per_call_and_converges() {
    let fixture = Fixture::new().await;
    for (id, text) in ONE_CHUNK {
        fixture.documents.put(id, text).await;
    }
    // A key changed twice in the batch is embedded once, at its latest text.
    fixture
        .documents
        .put("garden", "cucumbers climb the garden trellis")
        .await;
    let head = fixture.documents.head().await.unwrap();
    let caught = fixture.catch_up(ChangeSequence::ZERO, 4).await.unwrap();
    assert_eq!(
        caught,
        CatchUp {
            position: head,
            skipped: 0,
            unindexed: 0,
            capacity_unindexed: 0,
        }
    );
    // Six one-chunk documents, at most four chunks per call: two calls, six texts.
    assert_eq!(fixture.embedder.calls(), 2);
    assert_eq!(fixture.embedder.texts.load(Ordering::SeqCst), 6);
    assert_eq!(fixture.index.stats().live_chunks, 6);
    assert_eq!(
        fixture
            .top_excerpt("cucumbers climb the garden trellis")
            .await
            .as_deref(),
        Some("cucumbers climb the garden trellis")
    );
    assert_eq!(
        fixture
            .top_excerpt("a cat naps on the porch")
            .await
            .as_deref(),
        Some("a cat naps on the porch")
    );
    assert_eq!(
        fixture
            .vectors
            .indexed_position(&fixture.index.digest())
            .await
            .unwrap(),
        head,
        "the position is stored"
    );

    // Nothing new: no embedder call. (The queries above embedded their texts.)
    let calls = fixture.embedder.calls();
    let again = fixture.catch_up(head, 4).await.unwrap();
    assert_eq!(again.position, head);
    assert_eq!(fixture.embedder.calls(), calls);

    // A withdrawal and an edit in one batch.
    fixture.documents.withdraw("attic").await;
    fixture
        .documents
        .put("cellar", "cider rests in the cellar")
        .await;
    fixture.catch_up(head, 4).await.unwrap();
    assert_eq!(fixture.embedder.calls(), calls + 1, "one call for the edit");
    assert_eq!(fixture.index.stats().withdrawn, 1);
    assert_eq!(fixture.index.stats().live_chunks, 5);
    assert_eq!(
        fixture
            .top_excerpt("cider rests in the cellar")
            .await
            .as_deref(),
        Some("cider rests in the cellar")
    );
}

#[tokio::test]
async fn a_document_larger_than_the_batch_gets_a_call_of_its_own() {
    let fixture = Fixture::new().await;
    // About 150 bytes at 48 bytes per chunk: four chunks.
    let long = "Ada keeps bees in the garden. The orchard has twelve old pear trees. \
                Her brother repairs clocks in town. The river floods every spring.";
    fixture
        .documents
        .put("short", "a cat naps on the porch")
        .await;
    fixture.documents.put("long", long).await;
    fixture
        .documents
        .put("tiny", "wine rests in the cellar")
        .await;
    fixture.catch_up(ChangeSequence::ZERO, 2).await.unwrap();
    let chunks = fixture.index.stats().live_chunks;
    assert!(chunks >= 5, "{chunks}");
    // "short" alone (the long one does not fit beside it), "long" alone, then "tiny".
    assert_eq!(fixture.embedder.calls(), 3);
    assert_eq!(fixture.embedder.texts.load(Ordering::SeqCst), chunks);
}

#[tokio::test]
async fn a_failing_embedder_call_leaves_the_previous_chunks_and_the_position() {
    let fixture = Fixture::new().await;
    fixture
        .documents
        .put("garden", "tomatoes ripen in the garden")
        .await;
    fixture
        .documents
        .put("kitchen", "bread bakes in the kitchen oven")
        .await;
    let first = fixture.catch_up(ChangeSequence::ZERO, 8).await.unwrap();
    let digest = fixture.index.digest();
    let stored_before = fixture
        .vectors
        .load_sources(&digest, limits())
        .await
        .unwrap();

    let long = "Cucumbers climb the garden trellis. Beans twist around the poles. \
                Squash sprawls over the path.";
    fixture.documents.put("garden", long).await;
    fixture
        .documents
        .put("kitchen", "soup simmers in the kitchen")
        .await;
    fixture.embedder.fail.store(true, Ordering::SeqCst);
    let failed = fixture.catch_up(first.position, 8).await;
    assert!(matches!(failed, Err(SemanticError::Embed(_))), "{failed:?}");
    assert_eq!(
        fixture.index.stats().live_chunks,
        2,
        "the old chunks stay searchable"
    );
    assert_eq!(
        fixture
            .vectors
            .load_sources(&digest, limits())
            .await
            .unwrap(),
        stored_before,
        "nothing stored changed"
    );
    assert_eq!(
        fixture.vectors.indexed_position(&digest).await.unwrap(),
        first.position,
        "the position did not move past the failed batch"
    );

    // The retry from the same position converges.
    fixture.embedder.fail.store(false, Ordering::SeqCst);
    let retried = fixture.catch_up(first.position, 8).await.unwrap();
    assert_eq!(retried.position, fixture.documents.head().await.unwrap());
    assert!(fixture.index.stats().live_chunks > 2);
    assert_eq!(
        fixture
            .top_excerpt("soup simmers in the kitchen")
            .await
            .as_deref(),
        Some("soup simmers in the kitchen")
    );
}

fn limits() -> memory_core::vectors::VectorLoadLimits {
    memory_core::vectors::VectorLoadLimits {
        dimensions: DIMENSIONS,
        max_sources: 100,
        max_chunks: 100,
    }
}

#[tokio::test]
async fn refresh_many_keeps_per_source_fencing() {
    let fixture = Fixture::new().await;
    fixture
        .documents
        .put("garden", "tomatoes ripen in the garden")
        .await;
    fixture
        .documents
        .put("kitchen", "bread bakes in the kitchen oven")
        .await;
    fixture
        .documents
        .put("attic", "old letters sleep in the attic")
        .await;
    let first = fixture
        .index
        .refresh_many(
            &*fixture.documents,
            &[
                (key("garden"), SourceGeneration::new(5)),
                (key("kitchen"), SourceGeneration::new(5)),
            ],
            8,
        )
        .await
        .unwrap();
    assert!(
        first
            .iter()
            .all(|outcome| matches!(outcome, Ok(RefreshOutcome::Indexed { .. })))
    );
    assert_eq!(fixture.embedder.calls(), 1, "both documents in one call");

    fixture.documents.withdraw("attic").await;
    let second = fixture
        .index
        .refresh_many(
            &*fixture.documents,
            &[
                // An older generation than the indexed one is fenced.
                (key("garden"), SourceGeneration::new(4)),
                // The same generation and revision replays.
                (key("kitchen"), SourceGeneration::new(5)),
                // A document that reads as absent is withdrawn.
                (key("attic"), SourceGeneration::new(6)),
            ],
            8,
        )
        .await
        .unwrap();
    assert!(
        matches!(second[0], Err(SemanticError::Fenced { .. })),
        "{second:?}"
    );
    assert!(
        matches!(second[1], Ok(RefreshOutcome::Unchanged)),
        "{second:?}"
    );
    assert!(
        matches!(second[2], Ok(RefreshOutcome::Withdrawn)),
        "{second:?}"
    );
    assert_eq!(fixture.embedder.calls(), 1, "nothing needed embedding");

    // Withdrawal is terminal, even for a later generation in a batch.
    let third = fixture
        .index
        .refresh_many(
            &*fixture.documents,
            &[(key("attic"), SourceGeneration::new(9))],
            8,
        )
        .await
        .unwrap();
    assert!(
        matches!(third[0], Err(SemanticError::Withdrawn)),
        "{third:?}"
    );

    let duplicate = fixture
        .index
        .refresh_many(
            &*fixture.documents,
            &[
                (key("garden"), SourceGeneration::new(7)),
                (key("garden"), SourceGeneration::new(8)),
            ],
            8,
        )
        .await;
    assert!(matches!(duplicate, Err(SemanticError::InvalidInput { .. })));
    let zero = fixture
        .index
        .refresh_many(
            &*fixture.documents,
            &[(key("garden"), SourceGeneration::new(7))],
            0,
        )
        .await;
    assert!(matches!(zero, Err(SemanticError::InvalidInput { .. })));
}
