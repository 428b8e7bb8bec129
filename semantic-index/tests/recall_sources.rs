//! The embedding and hybrid recall sources, with the deterministic test embedder, a scripted lexical
//! search and a reader that counts its reads. The store and the embedder can also block their thread
//! (as SQLite and the model do) to show that the two sides of a hybrid lookup overlap and that the
//! deadline bounds a lookup whose store call does not return.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use common::{FeedStore, ProbeEmbedder, access, key};
use memory_core::StoreFault;
use memory_core::recall::{LexicalRecall, PassageId, SourceId};
use memory_core::vectors::SourceGeneration;
use memory_core::{
    ApproximateTokenCounter, LexicalHit, LexicalSearch, MemoryAccess, MemoryDocument, MemoryError,
    MemoryKey, MemoryLookup, MemoryPassage, MemoryReader, RecallError, RecallLimits, recall,
};
use memory_sqlite::vectors::SqliteVectorStore;
use semantic_index::recall::{ScoredLookup, chunk_passage_id};
use semantic_index::{
    CROSS_ENCODER_DEPTH, ChunkingConfig, CrossEncoder, DeterministicEmbedder, EmbedError, Embedder,
    HybridParams, HybridRecall, IndexKind, Preprocessing, QueryLimits, RerankWeights,
    SemanticIndex, SemanticIndexConfig, SemanticProfile, SemanticRecall,
};

const DIMENSIONS: usize = 64;

type Probe = ProbeEmbedder<Gated>;
type Index = SemanticIndex<Probe, SqliteVectorStore>;

/// How long a blocked call waits before giving up. Never reached when the code under test is right; it
/// only turns a regression (calls run one after another, or inline on the task) into a failure
/// instead of a hang.
const GUARD: Duration = Duration::from_secs(30);

/// A one-way gate a blocked thread waits on.
#[derive(Default)]
struct Latch {
    open: Mutex<bool>,
    changed: Condvar,
}

impl Latch {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.changed.notify_all();
    }

    /// Blocks the thread until the latch opens; false if the guard ran out first.
    fn wait(&self) -> bool {
        let open = self.open.lock().unwrap();
        let (open, _) = self
            .changed
            .wait_timeout_while(open, GUARD, |open| !*open)
            .unwrap();
        *open
    }
}

/// When armed, the lexical search and the query embedding each wait for the other to have started:
/// both finish only if they run at the same time.
#[derive(Default)]
struct Meeting {
    armed: AtomicBool,
    lexical: Latch,
    embedding: Latch,
}

/// The deterministic embedder, meeting the lexical search when armed.
struct Gated {
    inner: DeterministicEmbedder,
    meeting: Arc<Meeting>,
}

impl Embedder for Gated {
    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.meeting.armed.load(Ordering::SeqCst) {
            self.meeting.embedding.open();
            if !self.meeting.lexical.wait() {
                return Err(EmbedError::Model {
                    detail: "the lexical search never started alongside".to_owned(),
                });
            }
        }
        self.inner.embed(texts)
    }
}

/// Documents plus a lexical search that answers a scripted list of keys, counting every read.
#[derive(Default)]
struct Store {
    documents: FeedStore,
    lexical: Mutex<Vec<MemoryKey>>,
    read_many_calls: AtomicUsize,
    keys_read: Mutex<Vec<MemoryKey>>,
    meeting: Arc<Meeting>,
    /// When set, `read_many` and `search` block their thread until `released` opens.
    stall: AtomicBool,
    released: Latch,
}

impl Store {
    /// Blocks the calling thread while stalled, as a slow synchronous store would.
    fn maybe_stall(&self) -> Result<(), MemoryError> {
        if self.stall.load(Ordering::SeqCst) && !self.released.wait() {
            return Err(MemoryError::Store(StoreFault::Busy {
                operation: "stalled read",
            }));
        }
        Ok(())
    }
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
        self.maybe_stall()?;
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
        self.maybe_stall()?;
        if self.meeting.armed.load(Ordering::SeqCst) {
            self.meeting.lexical.open();
            if !self.meeting.embedding.wait() {
                return Err(MemoryError::Store(StoreFault::Busy {
                    operation: "the embedding never started alongside",
                }));
            }
        }
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
    async fn written_neighbours(
        &self,
        _access: &MemoryAccess,
        ids: &[memory_core::DocumentId],
        _reach: usize,
    ) -> Result<Vec<memory_core::WrittenNeighbours>, MemoryError> {
        // This stand-in models no write order: no document has neighbours.
        Ok(vec![memory_core::WrittenNeighbours::default(); ids.len()])
    }
}

struct Fixture {
    _directory: tempfile::TempDir,
    store: Arc<Store>,
    embedder: Arc<Probe>,
    index: Arc<Index>,
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
        let meeting = Arc::new(Meeting::default());
        let embedder = ProbeEmbedder::new(Gated {
            inner: DeterministicEmbedder::new(DIMENSIONS),
            meeting: meeting.clone(),
        });
        let vectors = Arc::new(SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap());
        let index =
            SemanticIndex::open(SemanticIndexConfig::new(profile), embedder.clone(), vectors)
                .await
                .unwrap();
        Self {
            _directory: directory,
            store: Arc::new(Store {
                meeting,
                ..Store::default()
            }),
            embedder,
            index: Arc::new(index),
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
                SourceGeneration::new(self.generation),
            )
            .await
            .unwrap();
    }

    fn semantic(
        &self,
        query: &str,
        kind: IndexKind,
    ) -> SemanticRecall<Probe, SqliteVectorStore, Store> {
        SemanticRecall::new(
            self.index.clone(),
            self.store.clone(),
            access(),
            query,
            limits(kind),
        )
    }

    fn hybrid(&self, query: &str) -> HybridRecall<Probe, SqliteVectorStore, Store> {
        HybridRecall::new(
            self.index.clone(),
            self.store.clone(),
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
        fixture.index.clone(),
        fixture.store.clone(),
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

    // Equal weights: both score 1/(k + 1) at rank 1; the tie breaks by key.
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
async fn hybrid_cites_a_long_lexical_hit_by_its_matching_chunks() {
    let mut fixture = Fixture::new().await;
    // Six chunks of at most 48 bytes; only the fourth holds the query's rare word.
    let text = "alpha bravo charlie delta echo foxtrot golf hotel. \
                india juliet kilo lima mike november oscar papa. \
                quebec romeo sierra tango uniform victor whiskey. \
                the zebra sleeps by the river under the bridge. \
                xray yankee alpha bravo charlie delta echo golf. \
                hotel india juliet kilo lima mike november papa.";
    fixture.put("long", text).await;
    fixture.store.script_lexical(&["long"]);
    let found = passages(fixture.hybrid("zebra").lookup().await.unwrap());
    assert!(!found.is_empty());
    assert!(found[0].content.text.contains("zebra"), "{found:?}");
    for passage in &found {
        assert_eq!(passage.source.id.as_str(), "long");
        assert!(passage.content.text.len() < text.len() && text.contains(&passage.content.text));
        assert!(
            passage.passage_id.as_str().starts_with("chunk:"),
            "{passage:?}"
        );
    }
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

/// Weights that order by one text signal alone (fusion's signals weigh nothing).
fn by_coverage(weight: f64) -> HybridParams {
    HybridParams {
        rerank: true,
        rerank_weights: RerankWeights {
            fused: 0.0,
            lexical: 0.0,
            embedding: 0.0,
            coverage: weight,
            speaker: 0.0,
            brevity: 0.0,
            cross: 0.0,
        },
        ..HybridParams::default()
    }
}

/// A cross-encoder that favours texts holding `word` (0.9, else 0.1) and records every text it
/// was given; or fails every call.
#[derive(Debug)]
struct WordCross {
    word: &'static str,
    seen: Mutex<Vec<String>>,
    fails: bool,
}

impl WordCross {
    fn favouring(word: &'static str) -> Arc<Self> {
        Arc::new(Self {
            word,
            seen: Mutex::new(Vec::new()),
            fails: false,
        })
    }
}

impl CrossEncoder for WordCross {
    fn score(&self, _query: &str, texts: &[&str]) -> Result<Vec<f64>, EmbedError> {
        if self.fails {
            return Err(EmbedError::Model {
                detail: "scripted failure".to_owned(),
            });
        }
        self.seen
            .lock()
            .unwrap()
            .extend(texts.iter().map(|text| (*text).to_owned()));
        Ok(texts
            .iter()
            .map(|text| if text.contains(self.word) { 0.9 } else { 0.1 })
            .collect())
    }
}

/// Weights that order by the cross-encoder's score alone.
fn by_cross() -> HybridParams {
    HybridParams {
        rerank: true,
        embedding_weight: 0.0,
        cross_rerank_weights: RerankWeights {
            fused: 0.0,
            lexical: 0.0,
            embedding: 0.0,
            coverage: 0.0,
            speaker: 0.0,
            brevity: 0.0,
            cross: 1.0,
        },
        ..HybridParams::default()
    }
}

/// The passages of a hybrid recall of `query` under `params`, reranked with `cross`.
async fn reranked(
    fixture: &Fixture,
    query: &str,
    params: HybridParams,
    cross: Option<Arc<dyn CrossEncoder>>,
) -> Vec<MemoryPassage> {
    passages(
        fixture
            .hybrid(query)
            .params(params)
            .cross_encoder(cross)
            .lookup()
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn the_cross_encoder_reorders_by_its_scores_over_the_current_text_only() {
    let mut fixture = Fixture::new().await;
    fixture.put("first", "apples grow on apple trees").await;
    fixture.put("second", "red apples taste sweet").await;
    fixture.store.script_lexical(&["first", "second"]);
    let query = "red apples";
    // Without a cross-encoder the stage's weights without one apply: fused order.
    let plain = reranked(&fixture, query, by_cross(), None).await;
    assert_eq!(source_ids(&plain), ["first", "second"]);
    let cross = WordCross::favouring("sweet");
    let shared: Arc<dyn CrossEncoder> = cross.clone();
    let scored = scores(
        fixture
            .hybrid(query)
            .params(by_cross())
            .cross_encoder(Some(Arc::clone(&shared)))
            .lookup_scored()
            .await
            .unwrap(),
    );
    // The model's best read takes rank signal 1, the next 1/2.
    assert_eq!(
        scored,
        [("second".to_owned(), 1.0), ("first".to_owned(), 0.5)]
    );
    // `rerank: false` turns the model off with the rest of the stage.
    let off = HybridParams {
        rerank: false,
        ..by_cross()
    };
    let unranked = reranked(&fixture, query, off, Some(Arc::clone(&shared))).await;
    assert_eq!(source_ids(&unranked), ["first", "second"]);

    // Corrected in the store while the index still holds the old text: the model reads the
    // revalidated text, never the indexed one.
    fixture
        .store
        .documents
        .put("first", "sweet apples, corrected")
        .await;
    fixture.store.script_lexical(&["first", "second"]);
    cross.seen.lock().unwrap().clear();
    let corrected = reranked(&fixture, query, by_cross(), Some(Arc::clone(&shared))).await;
    assert_eq!(
        corrected.first().map(|p| p.content.text.as_str()),
        Some("sweet apples, corrected")
    );
    let seen = cross.seen.lock().unwrap().clone();
    assert!(
        !seen.iter().any(|text| text.contains("apple trees")),
        "{seen:?}"
    );

    // Withdrawn while still ranked: however much the model favours it, revalidation refused it.
    fixture.store.documents.withdraw("first").await;
    fixture.store.script_lexical(&["first", "second"]);
    let after = reranked(&fixture, query, by_cross(), Some(Arc::clone(&shared))).await;
    assert_eq!(source_ids(&after), ["second"]);

    // A model that fails answers unavailable, never a ranking without it.
    let failing: Arc<dyn CrossEncoder> = Arc::new(WordCross {
        word: "sweet",
        seen: Mutex::new(Vec::new()),
        fails: true,
    });
    let failed = fixture
        .hybrid(query)
        .params(by_cross())
        .cross_encoder(Some(failing))
        .lookup_scored()
        .await
        .unwrap();
    assert!(
        matches!(failed, ScoredLookup::Unavailable { .. }),
        "{failed:?}"
    );
}

/// The model's cost per recall is bounded: of the documents fusion keeps (16 by default), it reads
/// the first [`CROSS_ENCODER_DEPTH`] in the stage's order without it, each once, and the others keep
/// their place after the ones it read, however much it would have favoured them.
#[tokio::test]
async fn the_cross_encoder_reads_the_first_documents_up_to_its_depth_only() {
    let kept = HybridParams::default().max_documents;
    assert!(kept > CROSS_ENCODER_DEPTH);
    let mut fixture = Fixture::new().await;
    let ids: Vec<String> = (0..kept + 2)
        .map(|number| format!("doc-{number:02}"))
        .collect();
    // The last document kept alone holds the word the model favours; the lexical search ranks it
    // past the depth, so it is never read.
    let favoured = ids[kept - 1].clone();
    for id in &ids {
        let taste = if *id == favoured { "sweet" } else { "plain" };
        fixture
            .put(id, &format!("{taste} apples in basket {id}"))
            .await;
    }
    let scripted: Vec<&str> = ids.iter().map(String::as_str).collect();
    fixture.store.script_lexical(&scripted);
    let cross = WordCross::favouring("sweet");
    let shared: Arc<dyn CrossEncoder> = cross.clone();
    let found = reranked(&fixture, "apples basket", by_cross(), Some(shared)).await;
    let seen = cross.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), CROSS_ENCODER_DEPTH, "{seen:?}");
    let read = &ids[..CROSS_ENCODER_DEPTH];
    for id in read {
        assert_eq!(
            seen.iter()
                .filter(|text| text.ends_with(id.as_str()))
                .count(),
            1,
            "{id} read once: {seen:?}"
        );
    }
    let cited = source_ids(&found);
    assert_eq!(cited.len(), kept, "{cited:?}");
    assert!(
        cited[..CROSS_ENCODER_DEPTH]
            .iter()
            .all(|id| read.contains(id)),
        "{cited:?}"
    );
    assert!(
        cited[CROSS_ENCODER_DEPTH..].contains(&favoured),
        "{cited:?}"
    );
}

#[tokio::test]
async fn the_rerank_stage_orders_by_its_weights_and_admits_nothing_revalidation_refused() {
    let mut fixture = Fixture::new().await;
    fixture.put("half", "apples grow on apple trees").await;
    fixture.put("whole", "red apples taste sweet").await;
    // The lexical search ranks `half` first, so fusion alone cites it first.
    fixture.store.script_lexical(&["half", "whole"]);
    let query = "red apples";
    let off = HybridParams {
        rerank: false,
        embedding_weight: 0.0,
        ..HybridParams::default()
    };
    let fused = passages(fixture.hybrid(query).params(off).lookup().await.unwrap());
    assert_eq!(source_ids(&fused), ["half", "whole"]);
    // `whole` holds both query words, `half` one of them: coverage decides, whichever way it weighs.
    let more = passages(
        fixture
            .hybrid(query)
            .params(by_coverage(1.0))
            .lookup()
            .await
            .unwrap(),
    );
    assert_eq!(source_ids(&more), ["whole", "half"]);
    let fewer = passages(
        fixture
            .hybrid(query)
            .params(by_coverage(-1.0))
            .lookup()
            .await
            .unwrap(),
    );
    assert_eq!(source_ids(&fewer), ["half", "whole"]);
    // The scores are the stage's: coverage 1 and 0.5.
    let scored = scores(
        fixture
            .hybrid(query)
            .params(by_coverage(1.0))
            .lookup_scored()
            .await
            .unwrap(),
    );
    assert_eq!(
        scored,
        [("whole".to_owned(), 1.0), ("half".to_owned(), 0.5)]
    );

    // Withdrawn in the store while the index and the lexical search still rank it: however much
    // the stage would favour it, revalidation refused it first.
    fixture.store.documents.withdraw("whole").await;
    fixture.store.script_lexical(&["half", "whole"]);
    let after = passages(
        fixture
            .hybrid(query)
            .params(by_coverage(1_000.0))
            .lookup()
            .await
            .unwrap(),
    );
    assert_eq!(source_ids(&after), ["half"]);

    // Weights out of range are refused before any search.
    let invalid = HybridParams {
        rerank_weights: RerankWeights {
            speaker: f64::NAN,
            ..by_coverage(1.0).rerank_weights
        },
        ..HybridParams::default()
    };
    assert!(matches!(
        fixture.hybrid(query).params(invalid).lookup().await,
        Err(RecallError::Source(MemoryError::InvalidInput { .. }))
    ));
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
            LexicalRecall::new(&*fixture.store, access(), query)
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

fn scores(lookup: ScoredLookup) -> Vec<(String, f64)> {
    match lookup {
        ScoredLookup::Found(passages) => passages
            .into_iter()
            .map(|scored| (scored.passage.source.id.to_string(), scored.score))
            .collect(),
        other => panic!("expected passages, got {other:?}"),
    }
}

#[tokio::test]
async fn scored_lookups_report_cosine_and_fused_scores() {
    let mut fixture = Fixture::new().await;
    fixture.put("lexical", "zebra quartz umbrella").await;
    fixture
        .put("semantic", "the cat sleeps on the warm mat")
        .await;
    fixture.store.script_lexical(&["lexical"]);
    // The document's own text: the deterministic embedder gives the identical vector, cosine 1.
    let exact = scores(
        fixture
            .semantic("the cat sleeps on the warm mat", IndexKind::Exact)
            .lookup_scored()
            .await
            .unwrap(),
    );
    assert_eq!(exact[0].0, "semantic");
    assert!((exact[0].1 - 1.0).abs() < 1e-5, "{exact:?}");
    for pair in exact.windows(2) {
        assert!(pair[0].1 >= pair[1].1, "best first: {exact:?}");
    }
    let partial = scores(
        fixture
            .semantic("where does the cat sleep", IndexKind::Exact)
            .lookup_scored()
            .await
            .unwrap(),
    );
    assert!(
        partial[0].1 >= 0.3 && partial[0].1 < 1.0,
        "a partial match scores between min_score and 1: {partial:?}"
    );
    // Normalized score fusion (the default): each document is the best (so 1) of one list only, and
    // scores that list's share of the weights (the fused scores, so without the rerank stage, whose
    // scores replace them).
    let params = HybridParams {
        rerank: false,
        ..HybridParams::default()
    };
    assert_eq!(
        params.method,
        semantic_index::FusionMethod::NormalizedScores
    );
    let share = |weight: f64| weight / (params.lexical_weight + params.embedding_weight);
    let fused = scores(
        fixture
            .hybrid("where does the cat sleep")
            .params(params)
            .lookup_scored()
            .await
            .unwrap(),
    );
    assert_eq!(
        fused.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["lexical", "semantic"],
        "{fused:?}"
    );
    assert!(
        (fused[0].1 - share(params.lexical_weight)).abs() < 1e-12,
        "{fused:?}"
    );
    assert!(
        (fused[1].1 - share(params.embedding_weight)).abs() < 1e-12,
        "{fused:?}"
    );
    // Found by both lists as their best: 1.
    fixture.store.script_lexical(&["semantic"]);
    let both = scores(
        fixture
            .hybrid("the cat sleeps on the warm mat")
            .params(params)
            .lookup_scored()
            .await
            .unwrap(),
    );
    assert_eq!(both[0].0, "semantic");
    assert!((both[0].1 - 1.0).abs() < 1e-12, "{both:?}");
    // Rank fusion: each document rank 1 of one list, 1 / (k + 1) each (weights 1:1).
    let rank = HybridParams {
        method: semantic_index::FusionMethod::ReciprocalRank,
        lexical_weight: 1.0,
        embedding_weight: 1.0,
        ..params
    };
    fixture.store.script_lexical(&["lexical"]);
    let fused = scores(
        fixture
            .hybrid("where does the cat sleep")
            .params(rank)
            .lookup_scored()
            .await
            .unwrap(),
    );
    assert_eq!(fused.len(), 2, "{fused:?}");
    for (_, score) in &fused {
        assert!((score - 1.0 / (rank.k + 1.0)).abs() < 1e-12, "{fused:?}");
    }
}

#[tokio::test]
async fn hybrid_runs_the_lexical_search_and_the_embedding_at_the_same_time() {
    let mut fixture = Fixture::new().await;
    fixture.put("lexical", "zebra quartz umbrella").await;
    fixture
        .put("semantic", "the cat sleeps on the warm mat")
        .await;
    fixture.store.script_lexical(&["lexical"]);
    // From here on, the search and the query embedding each block until the other has started: run
    // one after the other, the first would give up after the guard and the lookup would fail.
    fixture.store.meeting.armed.store(true, Ordering::SeqCst);
    let found = passages(
        fixture
            .hybrid("where does the cat sleep")
            .lookup()
            .await
            .unwrap(),
    );
    assert_eq!(source_ids(&found), ["lexical", "semantic"]);
}

#[tokio::test]
async fn the_deadline_bounds_a_lookup_whose_store_call_does_not_return() {
    let mut fixture = Fixture::new().await;
    fixture
        .put("semantic", "the cat sleeps on the warm mat")
        .await;
    fixture.store.script_lexical(&["semantic"]);
    fixture.store.stall.store(true, Ordering::SeqCst);
    // The store blocks its thread until released (after the assertions). Run inline on this
    // single-threaded runtime, it would also block the timer, and the lookup would only end when the
    // guard gave up, with a store error instead of the deadline.
    let short = QueryLimits::new(1_024, 10, 10_000, 0.3, 20, IndexKind::Exact);
    let semantic = SemanticRecall::new(
        fixture.index.clone(),
        fixture.store.clone(),
        access(),
        "where does the cat sleep",
        short,
    );
    let hybrid = HybridRecall::new(
        fixture.index.clone(),
        fixture.store.clone(),
        access(),
        "where does the cat sleep",
        short,
    );
    let semantic = semantic.lookup().await;
    let hybrid = hybrid.lookup().await;
    fixture.store.released.open();
    assert!(
        matches!(semantic, Err(RecallError::Deadline { timeout_ms: 20 })),
        "{semantic:?}"
    );
    assert!(
        matches!(hybrid, Err(RecallError::Deadline { timeout_ms: 20 })),
        "{hybrid:?}"
    );
}

#[tokio::test]
async fn hybrid_passages_carry_what_each_ranking_gave_their_document() {
    let mut fixture = Fixture::new().await;
    fixture.put("lexical", "zebra quartz umbrella").await;
    fixture
        .put("semantic", "the cat sleeps on the warm mat")
        .await;
    fixture.store.script_lexical(&["lexical"]);
    let query = "where does the cat sleep";
    let rankings = |lookup: ScoredLookup| match lookup {
        ScoredLookup::Found(passages) => passages
            .into_iter()
            .map(|scored| {
                (
                    scored.passage.source.id.to_string(),
                    (scored.score, scored.rankings),
                )
            })
            .collect::<std::collections::HashMap<_, _>>(),
        other => panic!("expected passages, got {other:?}"),
    };
    let exact = rankings(
        fixture
            .semantic(query, IndexKind::Exact)
            .lookup_scored()
            .await
            .unwrap(),
    );
    let (cosine, none) = exact["semantic"];
    assert_eq!(none, None, "one ranking: its score says it all");
    let hybrid = rankings(fixture.hybrid(query).lookup_scored().await.unwrap());
    let semantic = hybrid["semantic"].1.expect("a hybrid passage's rankings");
    assert_eq!(
        semantic.lexical, None,
        "the lexical ranking did not hold it"
    );
    let embedding = semantic.embedding.expect("the embedding ranking held it");
    assert!(
        (embedding - cosine).abs() < 1e-6,
        "{embedding} against {cosine}"
    );
    let lexical = hybrid["lexical"].1.expect("a hybrid passage's rankings");
    assert!(lexical.lexical.is_some(), "{lexical:?}");
}
