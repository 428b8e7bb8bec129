//! Compact (int8) vectors against exact f32 search on real all-MiniLM-L6-v2 vectors: recall@10 of
//! the rescored results must be at least 0.99, for the exact scan and the HNSW graph, unfiltered
//! and filtered to a namespace, and every rescored score must be the exact f32 one. Quality
//! thresholds, not timing ones. Needs the assets of `scripts/fetch-assets.sh`.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use common::{FeedStore, access, key, sentences};
use memory_core::vectors::SourceGeneration;
use memory_core::{DocumentId, MemoryKey, NamespaceAddress, Revision};
use memory_sqlite::vectors::SqliteVectorStore;
use semantic_index::index::{ChunkMeta, SearchOutcome, SourceVersion, rescore};
use semantic_index::{
    CompactVectors, Embedder, ExactIndex, FastembedEmbedder, HnswIndex, HnswParams, HnswStartup,
    IndexBounds, IndexKind, ModelAssets, QueryLimits, SearchRequest, SemanticIndex,
    SemanticIndexConfig, SemanticProfile, SourceFilter, VectorIndex,
};

const CORPUS: usize = 2_000;
const QUERIES: usize = 150;
const NAMESPACES: usize = 5;
const K: usize = 10;

fn namespace(space: usize) -> NamespaceAddress {
    NamespaceAddress::parse(&format!(r#"[1,"compact{space}",1,{{"user":"u"}}]"#)).unwrap()
}

fn meta(position: usize) -> (MemoryKey, ChunkMeta) {
    let key = MemoryKey {
        namespace: namespace(position % NAMESPACES),
        id: DocumentId::new(format!("s{position:05}")).unwrap(),
    };
    let chunk = ChunkMeta {
        source: Arc::new(SourceVersion {
            key: key.clone(),
            revision: Revision::new("r").unwrap(),
            generation: SourceGeneration::new(1),
        }),
        ordinal: 0,
        start: 0,
        end: 0,
        excerpt_digest: [0; 32],
    };
    (key, chunk)
}

struct Fixture {
    vectors: Vec<Vec<f32>>,
    queries: Vec<Vec<f32>>,
    /// The f32 vectors by key: what the store holds, and what rescoring reads.
    stored: HashMap<MemoryKey, Vec<f32>>,
}

fn fixture() -> Fixture {
    let embedder =
        FastembedEmbedder::load(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2())
            .unwrap_or_else(|error| panic!("{error}"));
    let corpus = sentences(CORPUS, 17, &HashSet::new());
    let queries = sentences(QUERIES, 18, &corpus.iter().cloned().collect());
    let embed = |texts: &[String]| {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        semantic_index::checked_embeddings(embedder.embed(&refs).unwrap(), texts.len(), 384)
            .unwrap()
    };
    let vectors = embed(&corpus);
    let stored = vectors
        .iter()
        .enumerate()
        .map(|(position, vector)| (meta(position).0, vector.clone()))
        .collect();
    Fixture {
        vectors,
        queries: embed(&queries),
        stored,
    }
}

fn fill(index: &mut dyn VectorIndex, vectors: &[Vec<f32>]) {
    let sources = vectors
        .iter()
        .enumerate()
        .map(|(position, vector)| {
            let (key, chunk) = meta(position);
            (key, vec![(chunk, vector.clone())])
        })
        .collect();
    index.replace_sources(sources).unwrap();
}

fn request() -> SearchRequest {
    SearchRequest {
        limit: K,
        min_score: -1.0,
        max_scanned_chunks: CORPUS,
    }
}

/// `outcome` rescored with the fixture's f32 vectors, as the engine does with the store's.
fn rescored(fixture: &Fixture, query: &[f32], outcome: SearchOutcome) -> SearchOutcome {
    let exact = outcome
        .hits
        .iter()
        .map(|hit| fixture.stored.get(&hit.chunk.source.key).cloned())
        .collect();
    rescore(query, outcome, &request(), exact).unwrap()
}

/// Recall@10 of `index` (rescored) against the f32 exact index, over every query, with `filter`
/// for query `i` given by `filter_of(i)`; also checks that each hit is admitted and scored in f32.
fn recall(
    fixture: &Fixture,
    truth_index: &ExactIndex,
    index: &dyn VectorIndex,
    filter_of: &dyn Fn(usize) -> Option<NamespaceAddress>,
) -> f64 {
    let mut found = 0usize;
    for (at, query) in fixture.queries.iter().enumerate() {
        let space = filter_of(at);
        let filter = space
            .as_ref()
            .map_or(SourceFilter::All, SourceFilter::Namespace);
        let truth: BTreeSet<MemoryKey> = truth_index
            .search_in(query, request(), filter)
            .unwrap()
            .hits
            .into_iter()
            .map(|hit| hit.chunk.source.key.clone())
            .collect();
        let outcome = index.search_in(query, request(), filter).unwrap();
        assert!(
            outcome.rescore,
            "a compact index's candidates await rescoring"
        );
        let hits = rescored(fixture, query, outcome).hits;
        assert_eq!(hits.len(), K);
        for hit in &hits {
            if let Some(space) = &space {
                assert_eq!(
                    &hit.chunk.source.key.namespace, space,
                    "a filtered search returned another namespace's chunk"
                );
            }
            let exact = semantic_index::kernels::dot(query, &fixture.stored[&hit.chunk.source.key]);
            assert_eq!(
                hit.score.to_bits(),
                exact.to_bits(),
                "a score is not the f32 one"
            );
        }
        found += hits
            .iter()
            .filter(|hit| truth.contains(&hit.chunk.source.key))
            .count();
    }
    found as f64 / (fixture.queries.len() * K) as f64
}

#[test]
fn compact_vectors_keep_recall_at_10_of_099_against_exact_f32() {
    let fixture = fixture();
    let bounds = IndexBounds::for_dimensions(384);
    let mut truth = ExactIndex::new(384, bounds).unwrap();
    fill(&mut truth, &fixture.vectors);
    let mut exact = ExactIndex::with_compact(384, bounds, CompactVectors::int8()).unwrap();
    fill(&mut exact, &fixture.vectors);
    let mut hnsw =
        HnswIndex::with_compact(384, bounds, HnswParams::default(), CompactVectors::int8())
            .unwrap();
    fill(&mut hnsw, &fixture.vectors);
    assert!(
        exact.reserved_vector_bytes() * 3 < truth.reserved_vector_bytes(),
        "codes take about a quarter of the f32 bytes: {} against {}",
        exact.reserved_vector_bytes(),
        truth.reserved_vector_bytes()
    );

    let unfiltered = |_| None;
    let by_namespace = |at: usize| Some(namespace(at % NAMESPACES));
    for (name, index) in [("exact", &exact as &dyn VectorIndex), ("hnsw", &hnsw)] {
        let all = recall(&fixture, &truth, index, &unfiltered);
        let filtered = recall(&fixture, &truth, index, &by_namespace);
        println!("int8 {name} recall@{K}: {all:.4} unfiltered, {filtered:.4} by namespace");
        assert!(all >= 0.99, "int8 {name} recall@{K} = {all:.4}");
        assert!(
            filtered >= 0.99,
            "int8 {name} filtered recall@{K} = {filtered:.4}"
        );
    }

    // What rescoring buys: the codes' own top 10, unrescored.
    let mut codes_only = 0usize;
    let mut code_error = 0.0f32;
    for query in &fixture.queries {
        let truth: BTreeSet<MemoryKey> = truth
            .search(query, request())
            .unwrap()
            .hits
            .into_iter()
            .map(|hit| hit.chunk.source.key.clone())
            .collect();
        let candidates = exact.search(query, request()).unwrap().hits;
        for hit in &candidates {
            let f32_score =
                semantic_index::kernels::dot(query, &fixture.stored[&hit.chunk.source.key]);
            code_error = code_error.max((hit.score - f32_score).abs());
        }
        codes_only += candidates
            .iter()
            .take(K)
            .filter(|hit| truth.contains(&hit.chunk.source.key))
            .count();
    }
    let codes_only = codes_only as f64 / (QUERIES * K) as f64;
    println!("int8 exact recall@{K} without rescoring: {codes_only:.4}");
    println!("int8 code score error against f32: at most {code_error:.5}");
    assert!(code_error < 0.01, "code scores are off by {code_error}");
}

#[test]
fn compact_options_are_checked_before_anything_is_built() {
    let bounds = IndexBounds::for_dimensions(384);
    for factor in [0, semantic_index::index::MAX_RESCORE_FACTOR + 1] {
        let compact = CompactVectors::Int8 {
            rescore_factor: factor,
        };
        assert!(ExactIndex::with_compact(384, bounds, compact).is_err());
        assert!(HnswIndex::with_compact(384, bounds, HnswParams::default(), compact).is_err());
    }
}

/// Through the engine: compact vectors on, the f32 vectors read back from a real SQLite store for
/// rescoring, with both indexes and after a restart (which codes the stored vectors as it loads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_rescores_compact_candidates_from_the_store() {
    let embedder = Arc::new(
        FastembedEmbedder::load(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2())
            .unwrap_or_else(|error| panic!("{error}")),
    );
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("v.sqlite");
    // Blocking: the graph (built over the codes) answers the HNSW queries.
    let config = SemanticIndexConfig::new(SemanticProfile::minilm_l6_v2())
        .with_compact_vectors(CompactVectors::int8())
        .with_hnsw_startup(HnswStartup::Blocking);
    let documents = FeedStore::default();
    let corpus = sentences(300, 5, &HashSet::new());
    {
        let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
        let index = SemanticIndex::open(config.clone(), Arc::clone(&embedder), store)
            .await
            .unwrap();
        for (position, body) in corpus.iter().enumerate() {
            let id = format!("doc-{position}");
            documents.put(&id, body).await;
            index
                .refresh(
                    &documents,
                    &key(&id),
                    SourceGeneration::new(position as u64 + 1),
                )
                .await
                .unwrap();
        }
    }
    let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
    let index = SemanticIndex::open(config, Arc::clone(&embedder), store)
        .await
        .unwrap();
    for kind in [IndexKind::Exact, IndexKind::Hnsw] {
        for (position, body) in corpus.iter().enumerate().step_by(37) {
            let result = index
                .query(
                    &documents,
                    &access(),
                    body,
                    QueryLimits::new(1_024, 3, 1_000, 0.0, 10_000, kind),
                )
                .await
                .unwrap();
            assert_eq!(result.answered_by, kind);
            assert_eq!(
                result.hits[0].key.id.as_str(),
                format!("doc-{position}"),
                "{kind:?}: a document's own text finds it"
            );
            assert!(
                (result.hits[0].score - 1.0).abs() < 1e-4,
                "{kind:?}: the f32 score of a text against itself is 1, got {}",
                result.hits[0].score
            );
        }
    }
}
