//! HNSW against exact search on 10,000 real-model vectors: recall@10 must be at least 0.95 with the
//! shipped default parameters, and every score it answers must be the exact index's. A quality
//! threshold, not a timing one. Needs the assets of `scripts/fetch-assets.sh` (embedding 10,000
//! short sentences takes a few minutes on two cores).
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::{BTreeSet, HashSet};

use common::sentences;
use std::sync::Arc;

use memory_core::vectors::SourceGeneration;
use memory_core::{DocumentId, MemoryKey, NamespaceAddress, Revision};
use semantic_index::index::{ChunkMeta, SourceVersion};
use semantic_index::{
    Embedder, ExactIndex, FastembedEmbedder, HnswIndex, HnswParams, IndexBounds, ModelAssets,
    SearchRequest, SemanticProfile, VectorIndex,
};

const CORPUS: usize = 10_000;
const QUERIES: usize = 200;
const K: usize = 10;

fn meta(position: usize) -> (MemoryKey, ChunkMeta) {
    let key = MemoryKey {
        namespace: NamespaceAddress::parse(r#"[1,"recall",1,{"corpus":"synthetic"}]"#).unwrap(),
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

#[test]
fn hnsw_recall_at_10_is_at_least_095_on_10k_real_vectors() {
    let embedder =
        FastembedEmbedder::load(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2())
            .unwrap_or_else(|error| panic!("{error}"));
    let corpus = sentences(CORPUS, 7, &HashSet::new());
    let queries = sentences(QUERIES, 8, &corpus.iter().cloned().collect());
    let refs: Vec<&str> = corpus.iter().map(String::as_str).collect();
    let vectors =
        semantic_index::checked_embeddings(embedder.embed(&refs).unwrap(), CORPUS, 384).unwrap();
    let query_refs: Vec<&str> = queries.iter().map(String::as_str).collect();
    let query_vectors =
        semantic_index::checked_embeddings(embedder.embed(&query_refs).unwrap(), QUERIES, 384)
            .unwrap();

    let bounds = IndexBounds::for_dimensions(384);
    let mut exact = ExactIndex::new(384, bounds).unwrap();
    let mut hnsw = HnswIndex::new(384, bounds, HnswParams::default()).unwrap();
    for (position, vector) in vectors.into_iter().enumerate() {
        let (key, chunk) = meta(position);
        exact
            .replace_source(&key, vec![(chunk.clone(), vector.clone())])
            .unwrap();
        hnsw.replace_source(&key, vec![(chunk, vector)]).unwrap();
    }
    let request = SearchRequest {
        limit: K,
        min_score: -1.0,
        max_scanned_chunks: CORPUS,
    };
    let mut found = 0usize;
    for query in &query_vectors {
        let exact_hits = exact.search(query, request).unwrap().hits;
        let truth: BTreeSet<MemoryKey> = exact_hits
            .iter()
            .map(|hit| hit.chunk.source.key.clone())
            .collect();
        let approximate = hnsw.search(query, request).unwrap().hits;
        found += approximate
            .iter()
            .filter(|hit| truth.contains(&hit.chunk.source.key))
            .count();
        // The graph walks int8 codes of the rows, but every score it answers is the exact one,
        // and its hits are ranked by them.
        for hit in &approximate {
            if let Some(same) = exact_hits
                .iter()
                .find(|other| other.chunk.source.key == hit.chunk.source.key)
            {
                assert_eq!(hit.score, same.score, "{:?}", hit.chunk.source.key);
            }
        }
        assert!(
            approximate
                .windows(2)
                .all(|pair| pair[0].score >= pair[1].score)
        );
    }
    let recall = found as f64 / (QUERIES * K) as f64;
    println!("hnsw recall@{K} over {QUERIES} queries on {CORPUS} vectors: {recall:.4}");
    assert!(recall >= 0.95, "recall@{K} = {recall:.4}");
}
