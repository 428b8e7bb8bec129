//! Benchmarks of the product as a user runs it: the built `memory` binary, one-shot and served over MCP,
//! on a real SQLite file with the real model. Prints figures and ratios measured in the same run; asserts
//! no time.
//!
//! - `oneshot`: wall time of a one-shot `memory recall` (process start, open, model load, search,
//!   revalidation, answer) per stored size, for `exact` and `hnsw`, after a `memory sync` (which leaves
//!   a persisted graph). Sizes in documents of one short chunk each: `PRODUCT_BENCH_SIZES` (default
//!   `1000,10000`; add `100000` for the largest point, which embeds 100k texts first).
//! - `busy`: warm `memory_recall` latency through `memory serve`, idle and then while a second client
//!   writes continuously (so the server's indexer is busy too), with the p99 ratio busy/idle.
//!
//! - `restart` (only with `PRODUCT_BENCH=restart`): restart of `memory serve` over
//!   `PRODUCT_BENCH_RESTART_CHUNKS` chunks (default 100,000): time from the spawn to the first
//!   answer by the persisted HNSW graph, next to the same store without a graph (answered exactly),
//!   alternated three times each; then one-shot recall at that size. The store's vectors are
//!   written through the library with a deterministic embedder under the binary's profile (the
//!   model would take minutes for 100k texts); the restarts and the answers go through the binary.
//!
//!   With `PRODUCT_BENCH_KEEP=DIR`, the store with the graph is copied to `DIR/memory.sqlite` first,
//!   so the same store can be profiled afterwards (`memory --db DIR/memory.sqlite recall ...`).
//!
//! Run: `cargo build --release -p memory-cli --bin memory && cargo bench -p integration-tests --bench
//! product` (the harness runs `target/<profile>/memory`; under `cargo bench` that is `release`).

#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use integration_tests::product::{Fixture, put, recall};
use serde_json::{Value, json};

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let index = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1_000.0
}

const WORDS: [&str; 16] = [
    "garden", "river", "coffee", "violin", "mountain", "letter", "market", "winter", "kitchen",
    "bicycle", "library", "harbor", "festival", "lantern", "meadow", "castle",
];

/// A short, varied sentence for document `n`.
fn sentence(n: usize) -> String {
    let a = WORDS[n % WORDS.len()];
    let b = WORDS[(n / WORDS.len()) % WORDS.len()];
    let c = WORDS[(n / 256) % WORDS.len()];
    format!("Entry {n}: we talked about the {a} near the {b} and a {c} story.")
}

fn documents(count: usize) -> Vec<Value> {
    (0..count)
        .map(|n| put(&format!("d{n}"), &sentence(n)))
        .collect()
}

fn oneshot() {
    let sizes: Vec<usize> = std::env::var("PRODUCT_BENCH_SIZES")
        .ok()
        .map(|text| {
            text.split(',')
                .filter_map(|size| size.trim().parse().ok())
                .collect()
        })
        .unwrap_or_else(|| vec![1_000, 10_000]);
    for size in sizes {
        let fixture = Fixture::new();
        fixture.import(&documents(size)).success();
        let started = Instant::now();
        fixture.call("sync", &json!({})).success();
        let sync = started.elapsed();
        let status = fixture.run(&["status"]);
        eprintln!(
            "oneshot size={size}: sync {:.1} s; status {}",
            sync.as_secs_f64(),
            status.stdout.trim()
        );
        for mode in ["exact", "hnsw"] {
            let mut samples = Vec::new();
            let mut answered_by = Value::Null;
            for word in &WORDS[..5] {
                let query = recall(&format!("the {word} near the river"), mode, 10);
                let started = Instant::now();
                let outcome = fixture.call("recall", &query);
                samples.push(millis(started.elapsed()));
                answered_by = outcome.success()["answered_by"].clone();
            }
            samples.sort_by(f64::total_cmp);
            println!(
                "{}",
                json!({
                    "bench": "oneshot_recall", "size": size, "mode": mode,
                    "answered_by": answered_by,
                    "p50_ms": percentile(&samples, 0.5), "max_ms": percentile(&samples, 1.0),
                })
            );
        }
    }
}

async fn busy() {
    const DOCUMENTS: usize = 2_000;
    const RECALLS: usize = 200;
    let fixture = Fixture::new();
    fixture.import(&documents(DOCUMENTS)).success();
    let server = fixture.serve().await;
    server.success("memory_sync", json!({})).await;
    let measure = |label: &'static str| {
        let server = &server;
        async move {
            let mut samples = Vec::with_capacity(RECALLS);
            for n in 0..RECALLS {
                let query = recall(&sentence(n * 7 + 3), "hybrid", 10);
                let started = Instant::now();
                server.success("memory_recall", query).await;
                samples.push(millis(started.elapsed()));
            }
            samples.sort_by(f64::total_cmp);
            let (p50, p99) = (percentile(&samples, 0.5), percentile(&samples, 0.99));
            println!(
                "{}",
                json!({"bench": "warm_recall", "load": label, "p50_ms": p50, "p99_ms": p99})
            );
            p99
        }
    };
    let idle = measure("idle").await;
    // Writes through the same server (concurrent requests on one MCP session), so its writer and its
    // indexer (woken by each commit, embedding each new document) are busy while it answers recalls.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let writing = async {
        let mut written = 0usize;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let n = DOCUMENTS + written;
            server
                .success("memory_put", put(&format!("d{n}"), &sentence(n)))
                .await;
            written += 1;
        }
        written
    };
    let measuring = async {
        let busy = measure("busy").await;
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        busy
    };
    let (written, busy) = tokio::join!(writing, measuring);
    println!(
        "{}",
        json!({
            "bench": "warm_recall_busy_over_idle_p99", "ratio": busy / idle,
            "writes_during": written
        })
    );
    server.close().await;
}

/// The vectors of `fixture`'s imported documents, written through the library with a
/// deterministic 384-dimension embedder under the binary's own profile (so the binary loads them as
/// its own), at the speed of the store rather than of the model. With `graph`, an HNSW graph over them
/// is built and persisted too, as `memory sync` would leave it.
async fn write_vectors(fixture: &Fixture, graph: bool) {
    use memory_core::ChangeFeed;
    use memory_core::vectors::VectorStore;
    use semantic_index::indexer::catch_up;
    use semantic_index::{
        DeterministicEmbedder, HnswStartup, IndexerOptions, SemanticIndex, SemanticIndexConfig,
        SemanticProfile,
    };
    let store = std::sync::Arc::new(memory_sqlite::SqliteStore::open(&fixture.db).unwrap());
    let vectors =
        std::sync::Arc::new(memory_sqlite::vectors::SqliteVectorStore::open(&fixture.db).unwrap());
    let profile = SemanticProfile::minilm_l6_v2();
    let embedder = std::sync::Arc::new(DeterministicEmbedder::new(profile.dimensions));
    let config = SemanticIndexConfig::new(profile).with_hnsw_startup(HnswStartup::OnDemand);
    let index = SemanticIndex::open(config, embedder, vectors)
        .await
        .unwrap();
    let head = store.head().await.unwrap();
    let options = IndexerOptions {
        batch_size: 2_048,
        max_embed_texts: 2_048,
        ..IndexerOptions::default()
    };
    let from = index
        .store()
        .indexed_position(&index.digest())
        .await
        .unwrap();
    if from < head {
        catch_up(&index, &*store, &*store, from, head, options)
            .await
            .unwrap();
    }
    if graph {
        index.persist_graph().await.unwrap();
    }
}

/// Copies the SQLite file of `from` (with its WAL, if any) into `to`; nothing may have it open.
fn copy_database(from: &Fixture, to: &Fixture) {
    for suffix in ["", "-wal", "-shm"] {
        let source = std::path::PathBuf::from(format!("{}{suffix}", from.db.display()));
        if source.is_file() {
            std::fs::copy(&source, format!("{}{suffix}", to.db.display())).unwrap();
        }
    }
}

/// Starts `memory serve` on `fixture` and times, from the spawn, the first `memory_recall` in `mode`
/// that `answered_by` names `by` (polled, so a graph still loading would show as a longer time).
async fn first_answer(fixture: &Fixture, mode: &str, by: &str) -> (f64, usize) {
    let started = Instant::now();
    let server = fixture.serve().await;
    let mut calls = 0usize;
    loop {
        calls += 1;
        let answer = server
            .success(
                "memory_recall",
                recall("the garden near the river", mode, 10),
            )
            .await;
        if answer["answered_by"] == by {
            let elapsed = millis(started.elapsed());
            server.close().await;
            return (elapsed, calls);
        }
        assert!(calls < 100_000, "{mode} never answered by {by}");
    }
}

/// Restart of `memory serve` over `PRODUCT_BENCH_RESTART_CHUNKS` chunks (default 100,000): time to
/// the first answer by the persisted HNSW graph, next to the same store without a graph answered
/// exactly. Then one-shot `memory recall` on the store with the graph, at that size.
async fn restart() {
    let size: usize = std::env::var("PRODUCT_BENCH_RESTART_CHUNKS")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100_000);
    let with_graph = Fixture::new();
    let started = Instant::now();
    with_graph.import(&documents(size)).success();
    let imported = started.elapsed();
    let started = Instant::now();
    write_vectors(&with_graph, false).await;
    let vectors = started.elapsed();
    let exact_only = Fixture::new();
    copy_database(&with_graph, &exact_only);
    let started = Instant::now();
    write_vectors(&with_graph, true).await;
    let graph = started.elapsed();
    let status = with_graph.run(&["status"]);
    eprintln!(
        "restart size={size}: import {:.1} s, vectors {:.1} s, graph {:.1} s; status {}",
        imported.as_secs_f64(),
        vectors.as_secs_f64(),
        graph.as_secs_f64(),
        status.stdout.trim()
    );
    if let Some(keep) = std::env::var_os("PRODUCT_BENCH_KEEP") {
        let kept = Fixture {
            db: std::path::Path::new(&keep).join("memory.sqlite"),
            ..Fixture::new()
        };
        copy_database(&with_graph, &kept);
        eprintln!("restart: store kept at {}", kept.db.display());
    }
    let mut hnsw = Vec::new();
    let mut exact = Vec::new();
    for _ in 0..3 {
        // Alternated, so both see the same page cache and machine load.
        hnsw.push(first_answer(&with_graph, "hnsw", "hnsw").await);
        exact.push(first_answer(&exact_only, "exact", "exact").await);
    }
    let median = |samples: &mut Vec<(f64, usize)>| {
        samples.sort_by(|left, right| left.0.total_cmp(&right.0));
        samples[samples.len() / 2]
    };
    let (hnsw_ms, hnsw_calls) = median(&mut hnsw);
    let (exact_ms, _) = median(&mut exact);
    println!(
        "{}",
        json!({
            "bench": "restart_first_answer", "chunks": size,
            "hnsw_persisted_graph_ms": hnsw_ms, "hnsw_calls_until_graph": hnsw_calls,
            "exact_only_ms": exact_ms, "ratio": hnsw_ms / exact_ms,
            "samples_hnsw_ms": hnsw.iter().map(|sample| sample.0).collect::<Vec<_>>(),
            "samples_exact_ms": exact.iter().map(|sample| sample.0).collect::<Vec<_>>(),
        })
    );
    for mode in ["exact", "hnsw"] {
        let mut samples = Vec::new();
        let mut answered_by = Value::Null;
        for word in &WORDS[..5] {
            let query = recall(&format!("the {word} near the river"), mode, 10);
            let started = Instant::now();
            let outcome = with_graph.call("recall", &query);
            samples.push(millis(started.elapsed()));
            answered_by = outcome.success()["answered_by"].clone();
        }
        samples.sort_by(f64::total_cmp);
        println!(
            "{}",
            json!({
                "bench": "oneshot_recall", "size": size, "mode": mode, "vectors": "deterministic",
                "answered_by": answered_by,
                "p50_ms": percentile(&samples, 0.5), "max_ms": percentile(&samples, 1.0),
            })
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing we need: run only for
    // `--bench` so a test run of the benches does not embed thousands of texts.
    if !std::env::args().any(|argument| argument == "--bench") {
        return;
    }
    let only = std::env::var("PRODUCT_BENCH").unwrap_or_default();
    if only.is_empty() || only == "oneshot" {
        oneshot();
    }
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };
    if only.is_empty() || only == "busy" {
        runtime().block_on(busy());
    }
    // Opt-in: building the 100k store takes minutes.
    if only == "restart" {
        runtime().block_on(restart());
    }
}
