//! Query latency of the exact and HNSW indexes, exact scan throughput against a memory-bandwidth
//! measurement taken in the same run, and embedding throughput of the real model.
//!
//! Run: `scripts/fetch-assets.sh && cargo bench -p semantic-index --bench index_search`.
//! Index vectors are SYNTHETIC: unit vectors drawn around centroids that the real model computed for 64
//! varied sentences (more vectors than can be embedded in a benchmark's time). Sizes are 10,000 and the
//! SPEC's largest admissible index at 384 dimensions (16,777,216 / 384 = 43,690 chunks).
//! `SEMANTIC_BENCH_QUERIES` sets the query count (default 300).
#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memory_core::vectors::SourceGeneration;
use memory_core::{DocumentId, MemoryKey, NamespaceAddress, Revision};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use semantic_index::index::{ChunkMeta, SourceVersion};
use semantic_index::{
    Embedder, ExactIndex, FastembedEmbedder, HnswIndex, HnswParams, IndexBounds, ModelAssets,
    SearchRequest, SemanticProfile, VectorIndex, checked_embeddings,
};

const DIMENSIONS: usize = 384;
const NOISE: f32 = 0.045;

const SEEDS: [&str; 8] = [
    "The meeting moved to Thursday afternoon",
    "My daughter loves painting horses",
    "The server crashed after the update",
    "We booked a flight to Lisbon",
    "He is allergic to peanuts and shellfish",
    "The invoice was paid late again",
    "Our team prefers tabs over spaces",
    "She runs ten kilometres every morning",
];
const SUFFIXES: [&str; 8] = [
    "",
    " according to the notes",
    " last week",
    " as far as I remember",
    " in the report",
    " during the call",
    " which surprised everyone",
    " again",
];

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let position = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[position]
}

fn unit(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    vector.iter_mut().for_each(|v| *v /= norm);
    vector
}

fn around(centroids: &[Vec<f32>], rng: &mut ChaCha8Rng) -> Vec<f32> {
    let centroid = &centroids[rng.random_range(0..centroids.len())];
    unit(
        centroid
            .iter()
            .map(|value| {
                // Sum of uniforms: cheap and close enough to Gaussian noise for spreading points.
                let noise: f32 = (0..4).map(|_| rng.random_range(-1.0f32..1.0)).sum::<f32>() * 0.5;
                value + noise * NOISE
            })
            .collect(),
    )
}

fn chunk(position: usize) -> (MemoryKey, ChunkMeta) {
    let key = MemoryKey {
        namespace: NamespaceAddress::parse(r#"[1,"bench",1,{"corpus":"synthetic"}]"#).unwrap(),
        id: DocumentId::new(format!("d{position:07}")).unwrap(),
    };
    let meta = ChunkMeta {
        source: Arc::new(SourceVersion {
            key: key.clone(),
            revision: Revision::new("r").unwrap(),
            generation: SourceGeneration(1),
        }),
        ordinal: 0,
        start: 0,
        end: 0,
        excerpt_digest: [0; 32],
    };
    (key, meta)
}

/// Read bandwidth of summing a buffer much larger than the caches, in bytes per second.
fn memory_bandwidth() -> f64 {
    let buffer = vec![1.0f32; 64 * 1024 * 1024];
    let mut best = f64::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        let mut sums = [0.0f32; 8];
        for block in buffer.chunks_exact(8) {
            for lane in 0..8 {
                sums[lane] += block[lane];
            }
        }
        black_box(sums);
        best = best.min(started.elapsed().as_secs_f64());
    }
    (buffer.len() * 4) as f64 / best
}

fn report(label: &str, mut latencies: Vec<Duration>) -> Duration {
    latencies.sort();
    let p50 = percentile(&latencies, 0.5);
    println!(
        "{label:<40} p50 {:>9.3} ms  p99 {:>9.3} ms",
        p50.as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3
    );
    p50
}

fn main() {
    let queries: usize = std::env::var("SEMANTIC_BENCH_QUERIES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(300);
    let embedder =
        FastembedEmbedder::load(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2())
            .unwrap_or_else(|error| panic!("{error}"));

    let texts: Vec<String> = SEEDS
        .iter()
        .flat_map(|seed| {
            SUFFIXES
                .iter()
                .map(move |suffix| format!("{seed}{suffix}."))
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let started = Instant::now();
    let centroids =
        checked_embeddings(embedder.embed(&refs).unwrap(), refs.len(), DIMENSIONS).unwrap();
    let warm_up = started.elapsed();
    let throughput_texts: Vec<String> = (0..256)
        .map(|i| format!("{} (note {i})", texts[i % texts.len()]))
        .collect();
    let throughput_refs: Vec<&str> = throughput_texts.iter().map(String::as_str).collect();
    let started = Instant::now();
    black_box(embedder.embed(&throughput_refs).unwrap());
    let embed_elapsed = started.elapsed();
    println!(
        "embedding throughput (real model, batch 64): {:.1} chunks/s ({} chunks in {:.2} s; first 64 incl. warm-up {:.2} s)",
        throughput_refs.len() as f64 / embed_elapsed.as_secs_f64(),
        throughput_refs.len(),
        embed_elapsed.as_secs_f64(),
        warm_up.as_secs_f64()
    );
    let single_query = (0..20)
        .map(|i| {
            let started = Instant::now();
            black_box(embedder.embed(&[refs[i % refs.len()]]).unwrap());
            started.elapsed()
        })
        .collect();
    report("embed one query (real model)", single_query);

    let bandwidth = memory_bandwidth();
    println!(
        "memory read bandwidth (sum of 256 MiB): {:.2} GB/s",
        bandwidth / 1e9
    );

    let max_chunks = IndexBounds::for_dimensions(DIMENSIONS).max_chunks;
    for size in [10_000, max_chunks] {
        let mut rng = ChaCha8Rng::seed_from_u64(size as u64);
        let bounds = IndexBounds::for_dimensions(DIMENSIONS);
        let mut exact = ExactIndex::new(DIMENSIONS, bounds).unwrap();
        let mut hnsw = HnswIndex::new(DIMENSIONS, bounds, HnswParams::default()).unwrap();
        let sources: Vec<_> = (0..size)
            .map(|position| {
                let (key, meta) = chunk(position);
                (key, vec![(meta, around(&centroids, &mut rng))])
            })
            .collect();
        exact.replace_sources(sources.clone()).unwrap();
        let started = Instant::now();
        hnsw.replace_sources(sources).unwrap();
        let build = started.elapsed();
        println!(
            "-- {size} synthetic vectors around real-model centroids (HNSW build {:.1} s)",
            build.as_secs_f64()
        );
        let request = SearchRequest {
            limit: 10,
            min_score: -1.0,
            max_scanned_chunks: size,
        };
        let query_vectors: Vec<Vec<f32>> =
            (0..queries).map(|_| around(&centroids, &mut rng)).collect();
        let mut exact_latencies = Vec::with_capacity(queries);
        let mut hnsw_latencies = Vec::with_capacity(queries);
        let mut overlap = 0usize;
        for query in &query_vectors {
            let started = Instant::now();
            let truth = black_box(exact.search(query, request).unwrap());
            exact_latencies.push(started.elapsed());
            let started = Instant::now();
            let approximate = black_box(hnsw.search(query, request).unwrap());
            hnsw_latencies.push(started.elapsed());
            overlap += approximate
                .hits
                .iter()
                .filter(|hit| {
                    truth
                        .hits
                        .iter()
                        .any(|t| t.chunk.source.key == hit.chunk.source.key)
                })
                .count();
        }
        let exact_p50 = report(&format!("exact query, {size} vectors"), exact_latencies);
        report(&format!("hnsw query, {size} vectors"), hnsw_latencies);
        let scanned_bytes = (size * DIMENSIONS * 4) as f64;
        let scan_rate = scanned_bytes / exact_p50.as_secs_f64();
        println!(
            "exact scan throughput at p50: {:.2} GB/s = {:.0}% of measured memory bandwidth; hnsw recall@10 vs exact {:.3}",
            scan_rate / 1e9,
            100.0 * scan_rate / bandwidth,
            overlap as f64 / (queries * 10) as f64
        );
    }
}
