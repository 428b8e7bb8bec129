//! The embedding and hybrid recall sources, with the deterministic test embedder, a scripted lexical
//! search and a reader that counts its reads.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{FeedStore, ProbeEmbedder, access, key};
use memory_core::recall::{LexicalRecall, PassageId, SourceId};
use memory_core::vectors::SourceGeneration;
use memory_core::{
    ApproximateTokenCounter, LexicalHit, LexicalSearch, MemoryAccess, MemoryDocument, MemoryError,
    MemoryKey, MemoryLookup, MemoryPassage, MemoryReader, RecallLimits, recall,
};
use memory_sqlite::vectors::SqliteVectorStore;
use semantic_index::recall::chunk_passage_id;
use semantic_index::{
    ChunkingConfig, DeterministicEmbedder, HybridParams, HybridRecall, IndexKind, Preprocessing,
    QueryLimits, SemanticIndex, SemanticIndexConfig, SemanticProfile, SemanticRecall,
};

const DIMENSIONS: usize = 64;

type Probe = ProbeEmbedder<DeterministicEmbedder>;
type Index = SemanticIndex<Probe, SqliteVectorStore>;

/// Documents plus a lexical search that answers a scripted list of keys, counting every read.
#[derive(Default)]
struct Store {
    documents: FeedStore,
    lexical: Mutex<Vec<MemoryKey>>,
    read_many_calls: AtomicUsize,
    keys_read: Mutex<Vec<MemoryKey>>,
}

impl Store {
    fn script_lexical(&self, ids: &[&str]) {
        *self.lexical.lock().unwrap() = ids.iter().map(|id| key(id)).collect();
    }

    fn reads(&self) -> (usize, Vec<MemoryKey>) {
        (
            self.read_many_calls.load(Ordering::SeqCst),
            self.keys_read.lock().unwrap().clone(),
        )
    }
}

impl MemoryReader for Store {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        self.keys_read.lock().unwrap().push(key.clone());
        self.documents.read(key).await
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        self.read_many_calls.fetch_add(1, Ordering::SeqCst);
        self.keys_read.lock().unwrap().extend_from_slice(keys);
        self.documents.read_many(keys).await
    }
}

impl LexicalSearch for Store {
    async fn search(
        &self,
        _access: &MemoryAccess,
        _query: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>, MemoryError> {
        let keys = self.lexical.lock().unwrap().clone();
        let mut hits = Vec::new();
        for (rank, key) in keys.into_iter().take(limit).enumerate() {
            // Like a real lexical index, hits name the revision they indexed, read here uncounted.
            if let Some(document) = self.documents.read(&key).await? {
                hits.push(LexicalHit {
                    key,
                    revision: document.revision,
                    locator: document.locator,
                    score: 10.0 - rank as f64,
                });
            }
        }
        Ok(hits)
    }
}

struct Fixture {
    _directory: tempfile::TempDir,
    store: Store,
    embedder: Arc<Probe>,
    index: Index,
    generation: u64,
}

impl Fixture {
    async fn new() -> Self {
        let directory = tempfile::tempdir().unwrap();
        let profile = SemanticProfile {
            provider: "test".to_owned(),
            model: "deterministic".to_owned(),
            model_revision: "1".to_owned(),
            dimensions: DIMENSIONS,
            max_sequence_length: 128,
            chunking: ChunkingConfig {
                max_chunk_bytes: 48,
            },
            preprocessing: Preprocessing::TextOnly,
        };
        let embedder = ProbeEmbedder::new(DeterministicEmbedder::new(DIMENSIONS));
        let vectors = Arc::new(SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap());
        let index =
            SemanticIndex::open(SemanticIndexConfig::new(profile), embedder.clone(), vectors)
                .await
                .unwrap();
        Self {
            _directory: directory,
            store: Store::default(),
            embedder,
            index,
            generation: 0,
        }
    }

    /// Writes and indexes a document (reads for indexing go around the counting reader).
    async fn put(&mut self, id: &str, text: &str) {
        self.store.documents.put(id, text).await;
        self.generation += 1;
        self.index
            .refresh(
                &self.store.documents,
                &key(id),
                SourceGeneration(self.generation),
            )
            .await
            .unwrap();
    }

    fn semantic(
        &self,
        query: &str,
        kind: IndexKind,
    ) -> SemanticRecall<'_, Probe, SqliteVectorStore, Store> {
        SemanticRecall::new(&self.index, &self.store, access(), query, limits(kind))
    }

    fn hybrid(&self, query: &str) -> HybridRecall<'_, Probe, SqliteVectorStore, Store> {
        HybridRecall::new(
            &self.index,
            &self.store,
            access(),
            query,
            limits(IndexKind::Exact),
        )
    }
}

fn limits(kind: IndexKind) -> QueryLimits {
    QueryLimits::new(1_024, 10, 10_000, 0.3, 5_000, kind)
}

fn passages(lookup: MemoryLookup) -> Vec<MemoryPassage> {
    match lookup {
        MemoryLookup::Found { passages } => passages,
        other => panic!("expected passages, got {other:?}"),
    }
}

fn source_ids(passages: &[MemoryPassage]) -> Vec<String> {
    passages
        .iter()
        .map(|passage| passage.source.id.to_string())
        .collect()
}

const LONG: &str = "Ada keeps bees in the garden. The orchard has twelve old pear trees. \
                    Her brother repairs clocks in town.";

#[tokio::test]
async fn semantic_source_yields_excerpt_passages_from_both_indexes() {
    let mut fixture = Fixture::new().await;
    fixture.put("long", LONG).await;
    fixture.put("short", "the lighthouse lamp").await;
    let revision = fixture
        .store
        .documents
        .read(&key("long"))
        .await
        .unwrap()
        .unwrap()
        .revision;
    for kind in [IndexKind::Exact, IndexKind::Hnsw] {
        let found = passages(
            fixture
                .semantic("twelve old pear trees in the orchard", kind)
                .lookup()
                .await
                .unwrap(),
        );
        let first = &found[0];
        assert_eq!(first.source.id.as_str(), "long", "{kind:?}");
        assert_eq!(first.source.revision.as_ref(), Some(&revision));
        assert!(LONG.contains(&first.content.text) && first.content.text.len() < LONG.len());
        assert!(
            first.content.text.contains("pear trees"),
            "{:?}",
            first.content.text
        );
        let ordinal = first.passage_id.as_str().rsplit(':').next().unwrap();
        assert_eq!(
            first.passage_id,
            chunk_passage_id(fixture.index.digest(), ordinal.parse().unwrap()).unwrap()
        );
        assert!(
            first.authority.is_some(),
            "authority bound to the namespace"
        );

        let whole = passages(
            fixture
                .semantic("lighthouse lamp", kind)
                .lookup()
                .await
                .unwrap(),
        );
        assert_eq!(whole[0].passage_id, PassageId::new("short").unwrap());
        assert_eq!(whole[0].content.text, "the lighthouse lamp");
    }
    let stranger = MemoryAccess {
        scope: memory_core::MemoryScope::new("elsewhere").unwrap(),
        ..access()
    };
    let hidden = SemanticRecall::new(
        &fixture.index,
        &fixture.store,
        stranger,
        "lighthouse lamp",
        limits(IndexKind::Exact),
    );
    assert_eq!(hidden.lookup().await.unwrap(), MemoryLookup::NoMatch);
}

#[tokio::test]
async fn embedder_failure_answers_unavailable() {
    let mut fixture = Fixture::new().await;
    fixture.put("a", "the lighthouse lamp").await;
    fixture.embedder.fail.store(true, Ordering::SeqCst);
    let semantic = fixture
        .semantic("lighthouse", IndexKind::Exact)
        .lookup()
        .await
        .unwrap();
    assert!(matches!(semantic, MemoryLookup::Unavailable { .. }));
    let hybrid = fixture.hybrid("lighthouse").lookup().await.unwrap();
    assert!(matches!(hybrid, MemoryLookup::Unavailable { .. }));
}

#[tokio::test]
async fn hybrid_returns_documents_only_one_side_finds_in_fused_order() {
    let mut fixture = Fixture::new().await;
    // "lexical" shares no word with the query, so the embedding side cannot find it above min_score.
    fixture.put("lexical", "zebra quartz umbrella").await;
    fixture
        .put("semantic", "the cat sleeps on the warm mat")
        .await;
    fixture.store.script_lexical(&["lexical"]);
    let query = "where does the cat sleep";
    let only_embedding = passages(
        fixture
            .semantic(query, IndexKind::Exact)
            .lookup()
            .await
            .unwrap(),
    );
    assert_eq!(source_ids(&only_embedding), ["semantic"]);

    // Equal weights: both score 1/61 at rank 1; the tie breaks by key.
    let equal = passages(fixture.hybrid(query).lookup().await.unwrap());
    assert_eq!(source_ids(&equal), ["lexical", "semantic"]);
    assert_eq!(equal[0].content.text, "zebra quartz umbrella");
    assert_eq!(equal[0].passage_id, PassageId::new("lexical").unwrap());

    let embedding_heavy = HybridParams {
        embedding_weight: 2.0,
        ..HybridParams::default()
    };
    let reordered = passages(
        fixture
            .hybrid(query)
            .params(embedding_heavy)
            .lookup()
            .await
            .unwrap(),
    );
    assert_eq!(source_ids(&reordered), ["semantic", "lexical"]);
    let one = HybridParams {
        max_documents: 1,
        ..embedding_heavy
    };
    let kept = passages(fixture.hybrid(query).params(one).lookup().await.unwrap());
    assert_eq!(source_ids(&kept), ["semantic"]);
}

#[tokio::test]
async fn withdrawn_document_among_fused_candidates_is_excluded() {
    let mut fixture = Fixture::new().await;
    fixture.put("kept", "apples grow on apple trees").await;
    fixture.put("gone", "apples are red and sweet").await;
    fixture.store.script_lexical(&["gone", "kept"]);
    let query = "red apples";
    assert_eq!(
        source_ids(&passages(fixture.hybrid(query).lookup().await.unwrap())).len(),
        2
    );
    // Withdrawn in the store; the index has not caught up and still ranks it.
    fixture.store.documents.withdraw("gone").await;
    fixture.store.script_lexical(&["gone", "kept"]);
    let after = passages(fixture.hybrid(query).lookup().await.unwrap());
    assert_eq!(source_ids(&after), ["kept"]);
    let semantic = passages(
        fixture
            .semantic(query, IndexKind::Hnsw)
            .lookup()
            .await
            .unwrap(),
    );
    assert_eq!(source_ids(&semantic), ["kept"]);
}

#[tokio::test]
async fn hybrid_revalidates_with_one_read_per_source() {
    let mut fixture = Fixture::new().await;
    fixture.put("both", "bees make honey in the hive").await;
    fixture.put("lexical", "zebra quartz umbrella").await;
    fixture.put("semantic", LONG).await;
    fixture.put("other", "honey bees in the garden hive").await;
    fixture.store.script_lexical(&["both", "lexical", "both"]);
    let query = "bees make honey in the hive garden";
    let by_embedding = source_ids(&passages(
        fixture
            .semantic(query, IndexKind::Exact)
            .lookup()
            .await
            .unwrap(),
    ));
    assert!(
        by_embedding.contains(&"both".to_owned()) && !by_embedding.contains(&"lexical".to_owned()),
        "{by_embedding:?}"
    );
    let (calls_before, keys_before) = fixture.store.reads();
    let found = passages(fixture.hybrid(query).lookup().await.unwrap());
    let (calls_after, keys_after) = fixture.store.reads();
    let calls = calls_after - calls_before;
    let keys = keys_after[keys_before.len()..].to_vec();
    assert_eq!(calls, 1, "one grouped read");
    let mut distinct = keys.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), keys.len(), "no source read twice: {keys:?}");
    let mut cited = source_ids(&found);
    cited.sort();
    cited.dedup();
    assert_eq!(cited.len(), keys.len(), "every read source contributes");
    assert!(cited.contains(&"both".to_owned()) && cited.contains(&"lexical".to_owned()));
    assert_eq!(
        found
            .iter()
            .filter(|p| p.source.id.as_str() == "both")
            .count(),
        1,
        "a document both sides found appears once"
    );
}

#[tokio::test]
async fn sources_compose_in_recall_and_share_citations() {
    let mut fixture = Fixture::new().await;
    fixture.put("bees", "bees make honey in the hive").await;
    fixture.store.script_lexical(&["bees"]);
    let limits = RecallLimits::builder()
        .max_sources(8)
        .max_items(8)
        .max_bytes(16_384)
        .max_tokens(4_096)
        .timeout_ms(5_000)
        .build()
        .unwrap();
    // The test embedder hashes words into 64 signed buckets, so short queries can collide and cancel:
    // ask with the document's own words.
    let query = "bees make honey in the hive";
    let recalled = recall(
        vec![
            LexicalRecall::new(&fixture.store, access(), query)
                .into_source(SourceId::new("lexical").unwrap(), false),
            fixture
                .semantic(query, IndexKind::Exact)
                .into_source(SourceId::new("embedding").unwrap(), false),
            fixture
                .hybrid(query)
                .into_source(SourceId::new("hybrid").unwrap(), true),
        ],
        &limits,
        &ApproximateTokenCounter,
    )
    .await
    .unwrap();
    assert_eq!(recalled.passages.len(), 1, "one document, one citation");
    assert!(recalled.text.contains("bees make honey in the hive"));
    let deduplicated: usize = recalled.outcomes.iter().map(|o| o.deduplicated).sum();
    assert_eq!(deduplicated, 2, "{:?}", recalled.outcomes);
}
