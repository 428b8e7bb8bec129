//! Put and get latency and throughput of the PostgreSQL store beside the SQLite store, in one run:
//! - `put_single/{sqlite,postgres}`: one durable put (SQLite `synchronous=FULL`; PostgreSQL's defaults,
//!   `synchronous_commit=on`), one at a time: the latency of an acknowledged write;
//! - `put_concurrent_64/{sqlite,postgres}`: 64 puts issued at once from tokio tasks, as many agents
//!   writing together would (throughput in writes per second);
//! - `get_by_key/{sqlite,postgres}`: one read of a present key;
//! - `lexical_search/{sqlite,postgres}`: one lexical recall (full-text search, top 10, filtered by
//!   namespace and scope) in a namespace of its own holding [`SEARCH_CORPUS`] documents, every one of
//!   which matches two of the query's three terms (so each search ranks them all);
//! - `cross_host_follow/postgres`: a put through store A (its own pool, as one host), timed until store
//!   B's [`memory_postgres::ChangeFollower`] (another pool, as another host) knows the new head: the
//!   write's latency plus the `NOTIFY` wake-up;
//! - `cross_host_recallable/postgres`: a put through store A, timed until a semantic-index `Indexer` on
//!   store B (following B's follower, deterministic embedder, vectors in PostgreSQL) has indexed it:
//!   commit-to-recallable across hosts, embedding excluded as far as a toy embedder allows.
//!
//! PostgreSQL runs at `MEMORY_TEST_POSTGRES_URL` (see `scripts/postgres-setup.sh`) in a fresh schema
//! that is dropped afterwards; with `MEMORY_SKIP_POSTGRES=1` only SQLite is measured.
#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use memory_core::{
    ChangeFeed, ChangeSequence, DocumentId, LexicalSearch, MemoryAccess, MemoryContent, MemoryKey,
    MemoryReader, MemoryScope, MemoryWrite, MemoryWriter, NamespaceAddress, OperationId,
};
use memory_postgres::FollowerOptions;
use memory_sqlite::{SqliteStore, Synchronous};
use semantic_index::{
    ChunkingConfig, DeterministicEmbedder, Indexer, IndexerOptions, Preprocessing, SemanticIndex,
    SemanticIndexConfig, SemanticProfile,
};

/// Puts issued at once in the concurrent benchmark.
const CONCURRENT_PUTS: u64 = 64;

/// Documents in the lexical search benchmark's namespace, the same for both backends.
const SEARCH_CORPUS: u64 = 2_000;

fn namespace() -> NamespaceAddress {
    NamespaceAddress::encode("bench", 1, &serde_json::json!({ "tenant": "bench" })).unwrap()
}

fn search_namespace() -> NamespaceAddress {
    NamespaceAddress::encode("bench", 1, &serde_json::json!({ "tenant": "search" })).unwrap()
}

fn write(index: u64) -> MemoryWrite {
    write_in(namespace(), index)
}

/// The `index`th document of the search corpus.
fn search_write(index: u64) -> MemoryWrite {
    write_in(search_namespace(), index)
}

fn write_in(namespace: NamespaceAddress, index: u64) -> MemoryWrite {
    MemoryWrite::Put {
        key: MemoryKey {
            namespace,
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

/// Puts and gets against one store, under one benchmark name per backend.
fn bench_store<S>(
    criterion: &mut Criterion,
    runtime: &tokio::runtime::Runtime,
    backend: &str,
    store: Arc<S>,
) where
    S: MemoryReader + MemoryWriter + LexicalSearch + 'static,
{
    let next = Arc::new(AtomicU64::new(0));
    criterion
        .benchmark_group("put_single")
        .throughput(Throughput::Elements(1))
        .bench_function(backend, |bench| {
            bench.iter(|| {
                runtime
                    .block_on(store.apply(write(next.fetch_add(1, Ordering::Relaxed))))
                    .unwrap()
            });
        });
    let mut group = criterion.benchmark_group("put_concurrent_64");
    group.throughput(Throughput::Elements(CONCURRENT_PUTS));
    group.sample_size(20);
    group.bench_function(backend, |bench| {
        bench.iter(|| {
            runtime.block_on(async {
                let start = next.fetch_add(CONCURRENT_PUTS, Ordering::Relaxed);
                let tasks: Vec<_> = (start..start + CONCURRENT_PUTS)
                    .map(|index| {
                        let store = store.clone();
                        tokio::spawn(async move { store.apply(write(index)).await.unwrap() })
                    })
                    .collect();
                for task in tasks {
                    task.await.unwrap();
                }
            })
        });
    });
    group.finish();
    let written = next.load(Ordering::Relaxed).max(1);
    let mut probe = 0_u64;
    criterion
        .benchmark_group("get_by_key")
        .throughput(Throughput::Elements(1))
        .bench_function(backend, |bench| {
            bench.iter(|| {
                probe = (probe + 7919) % written;
                let key = write(probe).key().clone();
                runtime.block_on(store.read(&key)).unwrap().unwrap()
            });
        });
    runtime.block_on(async {
        for start in (0..SEARCH_CORPUS).step_by(CONCURRENT_PUTS as usize) {
            let tasks: Vec<_> = (start..(start + CONCURRENT_PUTS).min(SEARCH_CORPUS))
                .map(|index| {
                    let store = store.clone();
                    tokio::spawn(async move { store.apply(search_write(index)).await.unwrap() })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        }
    });
    let access = MemoryAccess {
        namespace: search_namespace(),
        scope: MemoryScope::new("assistant").unwrap(),
    };
    criterion
        .benchmark_group("lexical_search")
        .throughput(Throughput::Elements(1))
        .bench_function(backend, |bench| {
            bench.iter(|| {
                probe = (probe + 7919) % SEARCH_CORPUS;
                let query = format!("tea morning {probe}");
                let hits = runtime.block_on(store.search(&access, &query, 10)).unwrap();
                assert!(!hits.is_empty());
                hits
            });
        });
}

fn profile() -> SemanticProfile {
    SemanticProfile {
        provider: "bench".to_owned(),
        model: "deterministic".to_owned(),
        model_revision: "1".to_owned(),
        dimensions: 64,
        max_sequence_length: 128,
        chunking: ChunkingConfig {
            max_chunk_bytes: 512,
        },
        preprocessing: Preprocessing::TextOnly,
    }
}

/// Writes on one store, observed through a second store instance with its own pool ("another host").
fn bench_cross_host(criterion: &mut Criterion, runtime: &tokio::runtime::Runtime, url: String) {
    let host_a = runtime.block_on(common::store_at(url));
    let host_b = runtime.block_on(host_a.another());
    let options = FollowerOptions {
        // Notifications do the waking here; the poll is only the fallback.
        poll_interval: Duration::from_secs(1),
        ..FollowerOptions::default()
    };
    let follower = Arc::new(
        runtime
            .block_on(host_b.follow_changes_with(options))
            .unwrap(),
    );
    let next = AtomicU64::new(0);
    criterion
        .benchmark_group("cross_host_follow")
        .throughput(Throughput::Elements(1))
        .bench_function("postgres", |bench| {
            bench.iter(|| {
                runtime.block_on(async {
                    let before = follower.known_head();
                    host_a
                        .apply(write(next.fetch_add(1, Ordering::Relaxed)))
                        .await
                        .unwrap();
                    follower.wait_past(before).await.unwrap()
                })
            });
        });
    let index = Arc::new(
        runtime
            .block_on(SemanticIndex::open(
                SemanticIndexConfig::new(profile()),
                Arc::new(DeterministicEmbedder::new(64)),
                Arc::new(host_b.vectors()),
            ))
            .unwrap(),
    );
    let indexer = runtime
        .block_on(Indexer::spawn(
            index,
            follower.clone(),
            Arc::new(host_b.clone()),
            IndexerOptions {
                poll_interval: Duration::from_millis(1),
                ..IndexerOptions::default()
            },
        ))
        .unwrap();
    let head = runtime.block_on(follower.store().head()).unwrap();
    runtime.block_on(indexer.wait_until_indexed(head)).unwrap();
    // The only writer, so each put is the next change.
    let mut sequence = head.get();
    criterion
        .benchmark_group("cross_host_recallable")
        .throughput(Throughput::Elements(1))
        .bench_function("postgres", |bench| {
            bench.iter(|| {
                sequence += 1;
                runtime.block_on(async {
                    host_a
                        .apply(write(next.fetch_add(1, Ordering::Relaxed)))
                        .await
                        .unwrap();
                    indexer
                        .wait_until_indexed(ChangeSequence::new(sequence))
                        .await
                        .unwrap();
                })
            });
        });
    runtime.block_on(indexer.shutdown());
}

fn benches(criterion: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let directory = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::builder()
        .synchronous(Synchronous::Full)
        .open(directory.path().join("bench.sqlite"))
        .unwrap();
    bench_store(criterion, &runtime, "sqlite", Arc::new(sqlite));
    if let Some(url) = common::server_url("benches/store.rs") {
        let store = runtime.block_on(common::store_at(url.clone()));
        bench_store(criterion, &runtime, "postgres", Arc::new(store));
        bench_cross_host(criterion, &runtime, url);
    }
}

criterion_group! {
    name = store_benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(store_benches);
