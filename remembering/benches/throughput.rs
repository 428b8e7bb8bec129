//! Throughput of committed-activity processing (one and two workers on one SQLite file, and on one
//! PostgreSQL database when `MEMORY_TEST_POSTGRES_URL` names a server, see `scripts/postgres-setup.sh`)
//! and admission latency. Prints figures; asserts nothing about time. Run with
//! `cargo bench -p remembering`. Each PostgreSQL worker has a pool of its own, as a separate process
//! would; the run works in a fresh schema that it drops afterwards.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Instant;

use memory_core::activity::{
    ActivityError, Intent, NewRecord, ProcessorId, ProcessorVersion, SourceId, SourceRevision,
    ThreadId, ThreadLog, WorkerId,
};
use memory_core::activity::{ProgressStore, RememberingStore};
use memory_core::{
    DocumentId, MemoryKey, MemoryReader, MemoryScope, MemoryWriter, NamespaceAddress, SystemClock,
};
use memory_postgres::{PostgresStore, SchemaName};
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use remembering::admission::Admission;
use remembering::{
    ActivityProcessor, ActivityProcessorParts, PassLimits, RememberingError, StatementExtractor,
    UnboundThreads,
};

const THREADS: usize = 8;
const RECORDS_PER_THREAD: usize = 250;
const ADMISSIONS: usize = 2_000;

fn seed(log: &dyn ThreadLog) -> Vec<ThreadId> {
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

/// One worker's stores.
struct Stores<W> {
    log: Arc<dyn ThreadLog>,
    progress: Arc<dyn ProgressStore>,
    references: Arc<dyn RememberingStore>,
    writer: Arc<W>,
}

/// Where a run's workers keep their state.
#[derive(Clone)]
enum Backend {
    Sqlite(std::path::PathBuf),
    Postgres { url: String, schema: SchemaName },
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "SQLite",
            Self::Postgres { .. } => "PostgreSQL",
        }
    }
}

fn sqlite_stores(path: &std::path::Path) -> Stores<memory_sqlite::SqliteStore> {
    Stores {
        log: Arc::new(SqliteThreadLog::open(path).unwrap()),
        progress: Arc::new(SqliteProgressStore::open(path).unwrap()),
        references: Arc::new(SqliteRememberingStore::open(path).unwrap()),
        writer: Arc::new(memory_sqlite::SqliteStore::open(path).unwrap()),
    }
}

async fn postgres_stores(url: &str, schema: &SchemaName) -> Stores<PostgresStore> {
    let store = PostgresStore::builder(url)
        .schema(schema.clone())
        .pool_size(4)
        .connect()
        .await
        .unwrap();
    Stores {
        log: Arc::new(store.thread_log()),
        progress: Arc::new(store.progress()),
        references: Arc::new(store.remembering()),
        writer: Arc::new(store),
    }
}

async fn drain_on(backend: Backend, owner: &'static str, threads: Vec<ThreadId>) -> usize {
    match backend {
        Backend::Sqlite(path) => drain(sqlite_stores(&path), owner, threads).await,
        Backend::Postgres { url, schema } => {
            drain(postgres_stores(&url, &schema).await, owner, threads).await
        }
    }
}

async fn drain<W>(stores: Stores<W>, owner: &'static str, threads: Vec<ThreadId>) -> usize
where
    W: MemoryReader + MemoryWriter + 'static,
{
    let processor = ActivityProcessor::new(ActivityProcessorParts {
        log: stores.log,
        progress: stores.progress,
        references: stores.references,
        writer: stores.writer,
        extractor: StatementExtractor::new(),
        clock: Arc::new(SystemClock),
        processor: ProcessorId::new("statements").unwrap(),
        version: ProcessorVersion::new(1),
        owner: WorkerId::new(owner).unwrap(),
        limits: PassLimits {
            max_records: 50,
            page_size: 25,
            timeout_ms: 10_000,
            lease_ms: 30_000,
        },
        unbound: UnboundThreads::PerThread {
            scopes: vec![MemoryScope::new("agent").unwrap()],
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

fn records_per_second(backend: &Backend, workers: usize) {
    let threads = match backend {
        Backend::Sqlite(path) => seed(&SqliteThreadLog::open(path).unwrap()),
        Backend::Postgres { url, schema } => seed(
            &PostgresStore::builder(url)
                .schema(schema.clone())
                .pool_size(1)
                .connect_blocking()
                .unwrap()
                .thread_log(),
        ),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let started = Instant::now();
    let total: usize = runtime.block_on(async {
        let owners = ["worker-a", "worker-b"];
        let handles: Vec<_> = owners[..workers]
            .iter()
            .map(|owner| tokio::spawn(drain_on(backend.clone(), owner, threads.clone())))
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
        "activity processing on {}, {workers} worker(s): {total} records in {elapsed:.2} s = {:.0} records/s",
        backend.name(),
        total as f64 / elapsed
    );
}

/// A fresh schema for one PostgreSQL run, dropped afterwards.
fn with_postgres_schema(url: &str, run: impl FnOnce(Backend)) {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let schema = SchemaName::new(format!(
        "rembench_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ))
    .unwrap();
    run(Backend::Postgres {
        url: url.to_owned(),
        schema: schema.clone(),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                schema.as_str()
            ))
            .await
            .unwrap();
    });
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
    for workers in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        records_per_second(&Backend::Sqlite(dir.path().join("bench.sqlite")), workers);
    }
    match std::env::var("MEMORY_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => {
            for workers in [1, 2] {
                with_postgres_schema(&url, |backend| records_per_second(&backend, workers));
            }
        }
        _ => println!(
            "activity processing on PostgreSQL: not run (set MEMORY_TEST_POSTGRES_URL, see scripts/postgres-setup.sh)"
        ),
    }
    admission_latency();
}
