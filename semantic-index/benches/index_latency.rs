//! Criterion: exact and HNSW top-10 query latency at 10,000 and 100,000 synthetic vectors.
//!
//! Run: `cargo bench -p semantic-index --bench index_latency`. Vectors are SYNTHETIC unit vectors around
//! real-model centroids (or around deterministic random centroids when the model assets are missing; the
//! group name says which). 100,000 vectors pass the SPEC's default float bound, so that size uses a
//! deliberately raised bound.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use semantic_index::{ExactIndex, HnswIndex, HnswParams, IndexBounds, SearchRequest, VectorIndex};
use support::{DIMENSIONS, around, centroids, synthetic_sources, try_embedder};

const SIZES: [usize; 2] = [10_000, 100_000];
const TOP_K: usize = 10;
const QUERY_POOL: usize = 64;
const SAMPLE_SIZE: usize = 30;

fn query_latency(criterion: &mut Criterion) {
    let embedder = try_embedder();
    let (centroids, label) = centroids(embedder.as_ref());
    drop(embedder);
    let mut group = criterion.benchmark_group(format!("query latency ({label})"));
    group.sample_size(SAMPLE_SIZE);
    for size in SIZES {
        let bounds = IndexBounds::for_chunks(DIMENSIONS, size).unwrap();
        let sources = synthetic_sources(size, &centroids, size as u64);
        let mut exact = ExactIndex::new(DIMENSIONS, bounds).unwrap();
        let mut hnsw = HnswIndex::new(DIMENSIONS, bounds, HnswParams::default()).unwrap();
        exact.replace_sources(sources.clone()).unwrap();
        hnsw.replace_sources(sources).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(!size as u64);
        let queries: Vec<Vec<f32>> = (0..QUERY_POOL)
            .map(|_| around(&centroids, &mut rng))
            .collect();
        let request = SearchRequest {
            limit: TOP_K,
            min_score: -1.0,
            max_scanned_chunks: size,
        };
        let indexes: [(&str, &dyn VectorIndex); 2] = [("exact", &exact), ("hnsw", &hnsw)];
        for (name, index) in indexes {
            let mut next = 0usize;
            group.bench_with_input(BenchmarkId::new(name, size), &size, |bencher, _| {
                bencher.iter(|| {
                    next = (next + 1) % queries.len();
                    index.search(&queries[next], request).unwrap()
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, query_latency);
criterion_main!(benches);
