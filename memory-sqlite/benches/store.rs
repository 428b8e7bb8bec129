//! Write and read costs of the SQLite store: one durable put (`synchronous=FULL`, one fsync), a replayed
//! put (receipt lookup, nothing written), a get by key, and a batched import of 10,000 documents in one
//! transaction.
#![allow(missing_docs, clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use memory_core::{
    DocumentId, MemoryContent, MemoryKey, MemoryScope, MemoryWrite, NamespaceAddress, OperationId,
};
use memory_sqlite::{SqliteStore, Synchronous};

/// Documents in one batched import.
const IMPORT_DOCUMENTS: usize = 10_000;

fn namespace() -> NamespaceAddress {
    NamespaceAddress::encode("bench", 1, &serde_json::json!({ "tenant": "bench" })).unwrap()
}

fn write(index: u64) -> MemoryWrite {
    MemoryWrite::Put {
        key: MemoryKey {
            namespace: namespace(),
            id: DocumentId::new(format!("doc-{index}")).unwrap(),
        },
        operation_id: OperationId::new(format!("op-{index}")).unwrap(),
        expected_revision: None,
        locator: format!("bench:{index}"),
        content: MemoryContent::text(format!(
            "benchmark memory number {index}: the user prefers tea over coffee in the morning"
        )),
        scopes: vec![MemoryScope::new("assistant").unwrap()],
    }
}

fn store(synchronous: Synchronous) -> (tempfile::TempDir, SqliteStore) {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder()
        .synchronous(synchronous)
        .open(directory.path().join("bench.sqlite"))
        .unwrap();
    (directory, store)
}

fn benches(criterion: &mut Criterion) {
    let (_directory, durable) = store(Synchronous::Full);
    let next = AtomicU64::new(0);
    criterion.bench_function("put_durable_single", |bench| {
        bench.iter(|| {
            durable
                .apply_blocking(write(next.fetch_add(1, Ordering::Relaxed)))
                .unwrap()
        });
    });
    let replayed = write(0);
    criterion.bench_function("put_replayed", |bench| {
        bench.iter(|| {
            let outcome = durable.apply_blocking(replayed.clone()).unwrap();
            assert!(outcome.replayed);
        });
    });
    let written = next.load(Ordering::Relaxed).max(1);
    let mut probe = 0_u64;
    criterion.bench_function("get_by_key", |bench| {
        bench.iter(|| {
            probe = (probe + 7919) % written;
            let key = write(probe).key().clone();
            durable.reader().read_blocking(&key).unwrap().unwrap()
        });
    });

    let mut group = criterion.benchmark_group("import");
    group.sample_size(10);
    group.throughput(Throughput::Elements(IMPORT_DOCUMENTS as u64));
    let (_import_directory, importer) = store(Synchronous::Full);
    let batch_start = AtomicU64::new(1_000_000);
    group.bench_function("batch_10k_one_transaction", |bench| {
        bench.iter_batched(
            || {
                let start = batch_start.fetch_add(IMPORT_DOCUMENTS as u64, Ordering::Relaxed);
                (start..start + IMPORT_DOCUMENTS as u64)
                    .map(write)
                    .collect::<Vec<_>>()
            },
            |writes| importer.apply_batch(writes).unwrap(),
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group! {
    name = store_benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(store_benches);
