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
    if only.is_empty() || only == "busy" {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(busy());
    }
}
