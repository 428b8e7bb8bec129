//! Cold start, then (criterion) exact and HNSW top-10 query latency at 10,000 and 100,000 synthetic
//! vectors.
//!
//! Run: `SEMANTIC_BENCH_DIR=/dev/shm cargo bench -p semantic-index --bench index_latency`. Vectors are
//! SYNTHETIC unit vectors around real-model centroids (or around deterministic random centroids when
//! the model assets are missing; the labels say which). 100,000 vectors pass the SPEC's default float
//! bound, so that size uses a deliberately raised bound.
//!
//! Cold start (printed, not a criterion group: each run reopens everything): a SQLite vector store
//! holding `SEMANTIC_BENCH_COLD_CHUNKS` one-chunk sources (default 100,000; 0 skips it) is opened
//! `SEMANTIC_BENCH_COLD_RUNS` times (default 3): open the store, load the model, and
//! `SemanticIndex::open`, which loads every vector into the exact index. The first run opens with the
//! default `HnswStartup::Background` and times the background graph build until it is ready; later
//! runs open with `OnDemand`, so no build left by an earlier run competes for the CPU (starting a
//! build costs `open` nothing: the snapshot is taken on the build thread).
//! `SEMANTIC_BENCH_COLD_GRAPH=0` starts no graph at all (100,000 points take minutes on a small
//! machine). `SEMANTIC_BENCH_DIR` says where the file goes (a tmpfs avoids 100,000 fsyncs while
//! populating). `SEMANTIC_BENCH_SIZES` (comma-separated, default `10000,100000`; `none` skips) sets
//! the query-latency sizes.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion};
use memory_core::vectors::{
    StoredChunk, StoredSource, StoredSourceState, VectorLoadLimits, VectorStore,
};
use memory_sqlite::vectors::SqliteVectorStore;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use semantic_index::engine::HnswStartup;
use semantic_index::{
    DeterministicEmbedder, Embedder, ExactIndex, FastembedEmbedder, HnswIndex, HnswParams,
    IndexBounds, ModelAssets, SearchRequest, SemanticIndex, SemanticIndexConfig, SemanticProfile,
    VectorIndex,
};
use support::{DIMENSIONS, around, centroids, synthetic_sources, try_embedder};

const DEFAULT_SIZES: [usize; 2] = [10_000, 100_000];
const DEFAULT_COLD_CHUNKS: usize = 100_000;
const DEFAULT_COLD_RUNS: usize = 3;
const TOP_K: usize = 10;
const QUERY_POOL: usize = 64;
const SAMPLE_SIZE: usize = 30;

fn query_latency(criterion: &mut Criterion) {
    let embedder = try_embedder();
    let (centroids, label) = centroids(embedder.as_ref());
    drop(embedder);
    let mut group = criterion.benchmark_group(format!("query latency ({label})"));
    group.sample_size(SAMPLE_SIZE);
    for size in sizes() {
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

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn sizes() -> Vec<usize> {
    match std::env::var("SEMANTIC_BENCH_SIZES") {
        Ok(list) => list
            .split(',')
            .filter_map(|size| size.trim().parse().ok())
            .collect(),
        Err(_) => DEFAULT_SIZES.to_vec(),
    }
}

fn millis(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}

/// Either the real model or, without its assets, the deterministic embedder (labelled).
enum ColdEmbedder {
    Real(Box<FastembedEmbedder>),
    Deterministic(DeterministicEmbedder),
}

impl Embedder for ColdEmbedder {
    fn dimensions(&self) -> usize {
        match self {
            Self::Real(embedder) => embedder.dimensions(),
            Self::Deterministic(embedder) => embedder.dimensions(),
        }
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, semantic_index::EmbedError> {
        match self {
            Self::Real(embedder) => embedder.embed(texts),
            Self::Deterministic(embedder) => embedder.embed(texts),
        }
    }
}

fn cold_start() {
    let chunks: usize = env_or("SEMANTIC_BENCH_COLD_CHUNKS", DEFAULT_COLD_CHUNKS);
    let runs: usize = env_or("SEMANTIC_BENCH_COLD_RUNS", DEFAULT_COLD_RUNS);
    let wait_for_graph = env_or("SEMANTIC_BENCH_COLD_GRAPH", 1u8) != 0;
    if chunks == 0 || runs == 0 {
        return;
    }
    let parent = std::env::var("SEMANTIC_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let directory = tempfile::tempdir_in(parent).unwrap();
    let path = directory.path().join("vectors.sqlite");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let profile = SemanticProfile::minilm_l6_v2();
        let digest = profile.digest().unwrap();
        let bounds = IndexBounds::for_chunks(DIMENSIONS, chunks).unwrap();
        let (centroids, label) = centroids(try_embedder().as_ref());
        let populate = Instant::now();
        {
            let store = SqliteVectorStore::open(&path).unwrap();
            for (key, rows) in synthetic_sources(chunks, &centroids, 11) {
                let source = StoredSource {
                    key,
                    generation: rows[0].0.source.generation,
                    state: StoredSourceState::Indexed {
                        revision: rows[0].0.source.revision.clone(),
                        chunks: rows
                            .into_iter()
                            .map(|(meta, vector)| StoredChunk {
                                ordinal: meta.ordinal,
                                start: meta.start as u64,
                                end: meta.end as u64,
                                excerpt_digest: meta.excerpt_digest,
                                vector,
                            })
                            .collect(),
                    },
                };
                store.replace_source(&digest, &source).await.unwrap();
            }
        }
        println!(
            "cold start, {chunks} stored vectors ({label}); populated in {:.1} s",
            populate.elapsed().as_secs_f64()
        );
        for run in 0..runs {
            let started = Instant::now();
            let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
            let store_ms = millis(started);
            let model = Instant::now();
            let embedder = match FastembedEmbedder::load(&ModelAssets::from_env(), &profile) {
                Ok(embedder) => ColdEmbedder::Real(Box::new(embedder)),
                Err(_) => ColdEmbedder::Deterministic(DeterministicEmbedder::new(DIMENSIONS)),
            };
            let model_ms = millis(model);
            let open = Instant::now();
            // Only a run that waits for the graph starts it: a build left running by a dropped
            // index would take CPU from the next run's load until its current batch ends.
            let graph_run = run == 0 && wait_for_graph;
            let config = SemanticIndexConfig {
                bounds,
                hnsw_startup: if graph_run {
                    HnswStartup::Background
                } else {
                    HnswStartup::OnDemand
                },
                ..SemanticIndexConfig::new(profile.clone())
            };
            let index = SemanticIndex::open(config, Arc::new(embedder), store.clone())
                .await
                .unwrap();
            let open_ms = millis(open);
            let total_ms = millis(started);
            assert_eq!(index.stats().live_chunks, chunks);
            println!(
                "  run {run}: cold start {total_ms:.0} ms = store open {store_ms:.1} ms + model load \
                 {model_ms:.0} ms + SemanticIndex::open (vectors loaded, exact index ready) \
                 {open_ms:.0} ms"
            );
            if graph_run {
                let graph = Instant::now();
                index.hnsw_ready().await.unwrap();
                println!(
                    "  run {run}: HNSW graph ready {:.1} s after open returned (background build; \
                     HNSW queries answered by the exact index until then)",
                    graph.elapsed().as_secs_f64()
                );
            }
            drop(index);
            let load = Instant::now();
            let loaded = store
                .load_sources(
                    &digest,
                    VectorLoadLimits {
                        dimensions: DIMENSIONS,
                        max_sources: bounds.max_sources,
                        max_chunks: bounds.max_chunks,
                    },
                )
                .await
                .unwrap();
            println!(
                "  run {run}: of which SqliteVectorStore::load_sources alone {:.0} ms ({} sources)",
                millis(load),
                loaded.len()
            );
        }
    });
}

fn main() {
    cold_start();
    if !sizes().is_empty() {
        let mut criterion = Criterion::default().configure_from_args();
        query_latency(&mut criterion);
        criterion.final_summary();
    }
}
