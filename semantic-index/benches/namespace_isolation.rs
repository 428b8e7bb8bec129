//! `namespace_isolation_ratio` for the embedding indexes: the p50 of a top-10 search in a
//! 100-chunk namespace inside an index of `SEMANTIC_BENCH_ISOLATION_CHUNKS` chunks (default
//! 1,000,000) spread over `chunks / 100` namespaces, over the p50 of the same search in an index
//! holding that namespace alone. Both indexes are measured in the same run, searches alternating,
//! for `exact` and for `hnsw` (`SEMANTIC_BENCH_ISOLATION_HNSW_CHUNKS`, default the same size; 0
//! skips it: a graph over 1,000,000 points takes long to build on a small machine). Prints
//! `namespace_isolation_ratio exact R` and `namespace_isolation_ratio hnsw R` with the p50s; asserts
//! nothing.
//!
//! Vectors are synthetic unit vectors around deterministic random centroids: what is measured is
//! how much of the index a namespace's search visits, not ranking quality. Namespaces interleave
//! (source `i` is in namespace `i % namespaces`), as tenants' writes arrive in a shared store.
//!
//! Run: `cargo bench -p semantic-index --bench namespace_isolation` (only under `--bench`: a test
//! run of the benches builds nothing).
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use memory_core::{DocumentId, MemoryKey, NamespaceAddress};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use semantic_index::index::SourceChunks;
use semantic_index::{
    ExactIndex, HnswIndex, HnswParams, IndexBounds, SearchRequest, SourceFilter, VectorIndex,
};
use support::{DIMENSIONS, around, centroids, chunks_from, keyed_sources, p50_p99};

const NAMESPACE_CHUNKS: usize = 100;
const QUERIES: usize = 400;
const TOP_K: usize = 10;

fn namespace(index: usize) -> NamespaceAddress {
    NamespaceAddress::parse(&format!(r#"[1,"tenant",1,{{"team":"t{index:05}"}}]"#)).unwrap()
}

/// `size` one-chunk sources, source `i` in namespace `i % namespaces`.
fn sources(size: usize, namespaces: usize, centroids: &[Vec<f32>]) -> Vec<SourceChunks> {
    keyed_sources(size, centroids, size as u64, |position| MemoryKey {
        namespace: namespace(position % namespaces),
        id: DocumentId::new(format!("d{position:07}")).unwrap(),
    })
}

/// p50 of namespace 0's searches in `shared` and in `alone`, alternating query by query.
fn p50s(shared: &dyn VectorIndex, alone: &dyn VectorIndex, queries: &[Vec<f32>]) -> (f64, f64) {
    let target = namespace(0);
    let request = SearchRequest {
        limit: TOP_K,
        min_score: -1.0,
        max_scanned_chunks: usize::MAX,
    };
    let mut times = (Vec::new(), Vec::new());
    let time = |index: &dyn VectorIndex, query: &[f32], into: &mut Vec<Duration>| {
        let started = Instant::now();
        let outcome = index
            .search_in(query, request, SourceFilter::Namespace(&target))
            .unwrap();
        into.push(started.elapsed());
        assert_eq!(outcome.hits.len(), TOP_K);
    };
    for query in queries {
        time(shared, query, &mut times.0);
        time(alone, query, &mut times.1);
    }
    (p50_p99(times.0).0, p50_p99(times.1).0)
}

fn measure(
    kind: &str,
    size: usize,
    build: impl Fn(usize, Vec<SourceChunks>) -> Box<dyn VectorIndex>,
) {
    let (centroids, _) = centroids(None);
    let namespaces = (size / NAMESPACE_CHUNKS).max(1);
    let all = sources(size, namespaces, &centroids);
    let own: Vec<SourceChunks> = all
        .iter()
        .filter(|(key, _)| key.namespace == namespace(0))
        .cloned()
        .collect();
    let started = Instant::now();
    let shared = build(size, all);
    let built = started.elapsed();
    let alone = build(own.len(), own);
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let queries: Vec<Vec<f32>> = (0..QUERIES).map(|_| around(&centroids, &mut rng)).collect();
    let (shared_ms, alone_ms) = p50s(shared.as_ref(), alone.as_ref(), &queries);
    println!(
        "{kind}: {size} chunks in {namespaces} namespaces (built in {:.1} s); p50 in a \
         {NAMESPACE_CHUNKS}-chunk namespace {shared_ms:.4} ms, alone {alone_ms:.4} ms",
        built.as_secs_f64()
    );
    println!(
        "namespace_isolation_ratio {kind} {:.2}",
        shared_ms / alone_ms
    );
}

fn main() {
    if !std::env::args().any(|argument| argument == "--bench") {
        return;
    }
    let exact_size = chunks_from("SEMANTIC_BENCH_ISOLATION_CHUNKS", 1_000_000);
    let hnsw_size = chunks_from("SEMANTIC_BENCH_ISOLATION_HNSW_CHUNKS", exact_size);
    measure("exact", exact_size, |size, sources| {
        let mut index = ExactIndex::new(
            DIMENSIONS,
            IndexBounds::for_chunks(DIMENSIONS, size.max(1)).unwrap(),
        )
        .unwrap();
        index.replace_sources(sources).unwrap();
        Box::new(index)
    });
    if hnsw_size > 0 {
        measure("hnsw", hnsw_size, |size, sources| {
            let bounds = IndexBounds::for_chunks(DIMENSIONS, size.max(1)).unwrap();
            let mut index = HnswIndex::new(DIMENSIONS, bounds, HnswParams::default()).unwrap();
            index.replace_sources(sources).unwrap();
            Box::new(index)
        });
    }
}
