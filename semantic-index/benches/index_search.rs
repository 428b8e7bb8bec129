//! Query latency of the exact and HNSW indexes at 10,000, 100,000 and 1,000,000 vectors, exact scan
//! throughput against a memory-bandwidth measurement taken in the same run, and embedding throughput of
//! the real model.
//!
//! Run: `scripts/fetch-assets.sh && cargo bench -p semantic-index --bench index_search`.
//! Index vectors are SYNTHETIC: unit vectors drawn around centroids that the real model computed for 64
//! varied sentences (more vectors than can be embedded in a benchmark's time), or around deterministic
//! random centroids when the model assets are missing (labelled in the output). Sizes past the SPEC's
//! default float bound use deliberately raised bounds ([`IndexBounds::for_chunks`]).
//! `SEMANTIC_BENCH_QUERIES` sets the query count (default 300); `SEMANTIC_BENCH_HNSW_MAX` the largest size
//! for which an HNSW graph is built (default 100,000: a 1,000,000-point build takes far longer than a
//! benchmark run on a small machine); `SEMANTIC_BENCH_SIZES` a comma-separated list of sizes.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use semantic_index::{
    Embedder, ExactIndex, HnswIndex, HnswParams, IndexBounds, SearchRequest, VectorIndex,
};
use support::{
    DIMENSIONS, around, centroids, p50_p99, seed_texts, synthetic_sources, try_embedder,
};

const DEFAULT_QUERIES: usize = 300;
const DEFAULT_SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];
const DEFAULT_HNSW_MAX: usize = 100_000;
const THROUGHPUT_TEXTS: usize = 256;
const BANDWIDTH_FLOATS: usize = 64 * 1024 * 1024;
const TOP_K: usize = 10;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// Read bandwidth of summing a buffer much larger than the caches, in bytes per second.
fn memory_bandwidth() -> f64 {
    let buffer = vec![1.0f32; BANDWIDTH_FLOATS];
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

fn report(label: &str, latencies: Vec<Duration>) -> f64 {
    let (p50, p99) = p50_p99(latencies);
    println!("{label:<44} p50 {p50:>9.3} ms  p99 {p99:>9.3} ms");
    p50
}

fn main() {
    let queries: usize = env_or("SEMANTIC_BENCH_QUERIES", DEFAULT_QUERIES);
    let hnsw_max: usize = env_or("SEMANTIC_BENCH_HNSW_MAX", DEFAULT_HNSW_MAX);
    let sizes: Vec<usize> = std::env::var("SEMANTIC_BENCH_SIZES")
        .ok()
        .map(|list| {
            list.split(',')
                .filter_map(|size| size.trim().parse().ok())
                .collect()
        })
        .unwrap_or_else(|| DEFAULT_SIZES.to_vec());
    let embedder = try_embedder();
    if let Some(embedder) = &embedder {
        let texts = seed_texts();
        let throughput_texts: Vec<String> = (0..THROUGHPUT_TEXTS)
            .map(|i| format!("{} (note {i})", texts[i % texts.len()]))
            .collect();
        let refs: Vec<&str> = throughput_texts.iter().map(String::as_str).collect();
        black_box(embedder.embed(&refs[..8]).unwrap());
        let started = Instant::now();
        black_box(embedder.embed(&refs).unwrap());
        let elapsed = started.elapsed();
        println!(
            "embedding throughput (real model): {:.1} chunks/s ({} chunks in {:.2} s)",
            refs.len() as f64 / elapsed.as_secs_f64(),
            refs.len(),
            elapsed.as_secs_f64()
        );
        let single = (0..20)
            .map(|i| {
                let started = Instant::now();
                black_box(embedder.embed(&[refs[i % refs.len()]]).unwrap());
                started.elapsed()
            })
            .collect();
        report("embed one query (real model)", single);
    }
    let (centroids, label) = centroids(embedder.as_ref());
    let bandwidth = memory_bandwidth();
    println!(
        "memory read bandwidth (sum of {} MiB): {:.2} GB/s",
        BANDWIDTH_FLOATS * 4 / (1024 * 1024),
        bandwidth / 1e9
    );

    for size in sizes {
        let bounds = IndexBounds::for_chunks(DIMENSIONS, size).unwrap();
        let sources = synthetic_sources(size, &centroids, size as u64);
        let mut exact = ExactIndex::new(DIMENSIONS, bounds).unwrap();
        let hnsw = if size <= hnsw_max {
            let mut hnsw = HnswIndex::new(DIMENSIONS, bounds, HnswParams::default()).unwrap();
            let build = Instant::now();
            hnsw.replace_sources(sources.clone()).unwrap();
            println!(
                "-- {size} vectors, {label}: HNSW build {:.1} s",
                build.elapsed().as_secs_f64()
            );
            Some(hnsw)
        } else {
            println!(
                "-- {size} vectors, {label}: HNSW not built (size > SEMANTIC_BENCH_HNSW_MAX = {hnsw_max})"
            );
            None
        };
        let load = Instant::now();
        exact.replace_sources(sources).unwrap();
        println!("exact load {:.2} s", load.elapsed().as_secs_f64());
        let request = SearchRequest {
            limit: TOP_K,
            min_score: -1.0,
            max_scanned_chunks: size,
        };
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(!size as u64);
        // Fewer queries at the largest sizes, where one exact scan takes tens of milliseconds.
        let count = if size >= 1_000_000 {
            queries.min(100)
        } else {
            queries
        };
        let query_vectors: Vec<Vec<f32>> =
            (0..count).map(|_| around(&centroids, &mut rng)).collect();
        let mut exact_latencies = Vec::with_capacity(count);
        let mut hnsw_latencies = Vec::with_capacity(count);
        let mut overlap = 0usize;
        for query in &query_vectors {
            let started = Instant::now();
            let truth = black_box(exact.search(query, request).unwrap());
            exact_latencies.push(started.elapsed());
            if let Some(hnsw) = &hnsw {
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
        }
        let exact_p50 = report(&format!("exact query, {size} vectors"), exact_latencies);
        let scan_rate = (size * DIMENSIONS * 4) as f64 / (exact_p50 / 1e3);
        println!(
            "exact scan throughput at p50: {:.2} GB/s = {:.0}% of measured memory bandwidth",
            scan_rate / 1e9,
            100.0 * scan_rate / bandwidth
        );
        if !hnsw_latencies.is_empty() {
            report(&format!("hnsw query, {size} vectors"), hnsw_latencies);
            println!(
                "hnsw recall@{TOP_K} vs exact: {:.3}",
                overlap as f64 / (count * TOP_K) as f64
            );
        }
    }
}
