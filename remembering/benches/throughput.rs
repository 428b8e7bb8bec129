//! Throughput of committed-activity processing (one and two workers on one SQLite file) and admission
//! latency. Prints figures; asserts nothing about time. Run with `cargo bench -p remembering`.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Instant;

use memory_core::activity::{
    ActivityError, Intent, NewRecord, ProcessorId, ProcessorVersion, SourceId, SourceRevision,
    ThreadId, ThreadLog, WorkerId,
};
use memory_core::{DocumentId, MemoryKey, MemoryScope, NamespaceAddress, SystemClock};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use remembering::admission::Admission;
use remembering::{
    ActivityProcessor, ActivityProcessorParts, PassLimits, RememberingError, StatementExtractor,
};

const THREADS: usize = 8;
const RECORDS_PER_THREAD: usize = 250;
const ADMISSIONS: usize = 2_000;

fn seed(path: &std::path::Path) -> Vec<ThreadId> {
    let log = SqliteThreadLog::open(path).unwrap();
    (0..THREADS)
        .map(|index| {
            let thread = ThreadId::new(format!("thread-{index}")).unwrap();
            for record in 0..RECORDS_PER_THREAD {
                log.append(
                    &thread,
                    NewRecord::user("ana", format!("fact {record} of thread {index}"), 0),
                )
                .unwrap();
            }
            thread
        })
        .collect()
}

async fn drain(path: std::path::PathBuf, owner: &'static str, threads: Vec<ThreadId>) -> usize {
    let processor = ActivityProcessor::new(ActivityProcessorParts {
        log: Arc::new(SqliteThreadLog::open(&path).unwrap()),
        progress: Arc::new(SqliteProgressStore::open(&path).unwrap()),
        writer: Arc::new(memory_sqlite::open_store(&path).unwrap()),
        extractor: StatementExtractor::new(vec![MemoryScope::new("agent").unwrap()]),
        clock: Arc::new(SystemClock),
        processor: ProcessorId::new("statements").unwrap(),
        version: ProcessorVersion(1),
        owner: WorkerId::new(owner).unwrap(),
        limits: PassLimits {
            max_records: 50,
            page_size: 25,
            timeout_ms: 10_000,
            lease_ms: 30_000,
        },
    })
    .unwrap();
    let mut processed = 0;
    loop {
        let mut busy = false;
        for thread in &threads {
            match processor.run_pass(thread).await {
                Ok(report) => {
                    processed += report.processed;
                    busy |= report.processed > 0;
                }
                Err(RememberingError::Activity(ActivityError::LeaseHeld { .. })) => busy = true,
                Err(error) => panic!("pass failed: {error}"),
            }
        }
        if !busy {
            return processed;
        }
        tokio::task::yield_now().await;
    }
}

fn records_per_second(workers: usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.sqlite");
    let threads = seed(&path);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let started = Instant::now();
    let total: usize = runtime.block_on(async {
        let owners = ["worker-a", "worker-b"];
        let handles: Vec<_> = owners[..workers]
            .iter()
            .map(|owner| tokio::spawn(drain(path.clone(), owner, threads.clone())))
            .collect();
        let mut total = 0;
        for handle in handles {
            total += handle.await.unwrap();
        }
        total
    });
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(total, THREADS * RECORDS_PER_THREAD);
    println!(
        "activity processing, {workers} worker(s): {total} records in {elapsed:.2} s = {:.0} records/s",
        total as f64 / elapsed
    );
}

fn admission_latency() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.sqlite");
    let admission = Admission::new(
        Arc::new(SqliteRememberingStore::open(&path).unwrap()),
        Arc::new(SystemClock),
    );
    let namespace =
        NamespaceAddress::encode("notes", 1, &serde_json::json!({"user": "u"})).unwrap();
    let mut latencies: Vec<f64> = (0..ADMISSIONS)
        .map(|index| {
            let intent = Intent::Remember {
                source: SourceId::new(format!("source-{index}")).unwrap(),
                revision: SourceRevision::new("r1").unwrap(),
                target: MemoryKey {
                    namespace: namespace.clone(),
                    id: DocumentId::new(format!("doc-{index}")).unwrap(),
                },
                scopes: vec![MemoryScope::new("agent").unwrap()],
            };
            let started = Instant::now();
            admission.admit(&intent).unwrap();
            started.elapsed().as_secs_f64() * 1_000.0
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    let at = |quantile: f64| latencies[((latencies.len() - 1) as f64 * quantile) as usize];
    println!(
        "admission latency over {ADMISSIONS} admits: p50 {:.3} ms, p99 {:.3} ms",
        at(0.50),
        at(0.99)
    );
}

fn main() {
    // `cargo test --benches` runs this with `--bench`-less arguments; keep it quick there too.
    records_per_second(1);
    records_per_second(2);
    admission_latency();
}
