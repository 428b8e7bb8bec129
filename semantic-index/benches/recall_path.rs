//! The whole recall path with the real model over a SQLite store of 100,000 one-chunk documents:
//! (b) warm recall (embed the query + search + revalidate against `SqliteStore` + render through
//! `memory_core::recall`), (c) cold start (open the store, load the model, load the stored vectors into
//! the indexes), (d) commit-to-recallable lag of single-document commits under steady writes through the
//! `Indexer`, (e) embedding throughput. Prints one table at the end.
//!
//! Run: `scripts/fetch-assets.sh && SEMANTIC_BENCH_DIR=/dev/shm cargo bench -p semantic-index --bench
//! recall_path`. The documents are real text in a real `SqliteStore`; their stored vectors are SYNTHETIC
//! (unit vectors around real-model centroids, stored with the documents' exact chunk offsets and digests
//! so revalidation does its full work), because embedding 100,000 chunks takes longer than a benchmark
//! run. Query embedding, indexing during (d) and (e) use the real model.
//!
//! Settings: `SEMANTIC_BENCH_DIR` (where the SQLite files go; default the system temp dir; a tmpfs
//! avoids 100,000 fsyncs while populating), `SEMANTIC_BENCH_CHUNKS` (default 100,000),
//! `SEMANTIC_BENCH_RECALLS` (queries per mode, default 200), `SEMANTIC_BENCH_COMMITS` (default 40),
//! `SEMANTIC_BENCH_COMMIT_INTERVAL_MS` (default 250).
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memory_core::recall::SourceId;
use memory_core::vectors::{
    SourceGeneration, StoredChunk, StoredSource, StoredSourceState, VectorLoadLimits, VectorStore,
};
use memory_core::{
    ChangeFeed, DocumentId, MemoryAccess, MemoryContent, MemoryKey, MemoryScope, MemoryWrite,
    MemoryWriter, NamespaceAddress, OperationId, RecallLimits, Revision, recall,
};
use memory_sqlite::SqliteStore;
use memory_sqlite::vectors::SqliteVectorStore;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use semantic_index::index::{ChunkMeta, SourceVersion};
use semantic_index::{
    Embedder, ExactIndex, FastembedEmbedder, HybridRecall, IndexBounds, IndexKind, Indexer,
    IndexerOptions, ModelAssets, QueryLimits, SemanticIndex, SemanticIndexConfig, SemanticProfile,
    SemanticRecall, VectorIndex, chunk_text,
};
use sha2::{Digest, Sha256};
use support::{DIMENSIONS, around, centroids, p50_p99};

const DEFAULT_CHUNKS: usize = 100_000;
const DEFAULT_RECALLS: usize = 200;
const DEFAULT_COMMITS: usize = 40;
const DEFAULT_COMMIT_INTERVAL_MS: u64 = 250;
/// Room for the documents written during the lag measurement.
const BOUND_SLACK: usize = 10_000;
const WRITE_BATCH: usize = 10_000;
const THROUGHPUT_TEXTS: usize = 256;
const TOP_K: usize = 10;
const NAMESPACE: &str = r#"[1,"bench",1,{"corpus":"recall-path"}]"#;
const SCOPE: &str = "bench";

const NAMES: [&str; 8] = [
    "Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis", "Frances",
];
const FACTS: [&str; 16] = [
    "prefers green tea over coffee in the morning",
    "moved the weekly sync to Thursday afternoon",
    "is allergic to peanuts and shellfish",
    "booked a flight to Lisbon for the conference",
    "keeps the deployment runbook in the shared drive",
    "wants invoices sent before the end of the month",
    "runs ten kilometres along the river every weekend",
    "asked for the staging database to be rebuilt",
    "adopted a grey cat called Pixel last spring",
    "reviews pull requests only after lunch",
    "needs the quarterly report in PDF format",
    "is learning Portuguese before the trip",
    "reported that the build server runs out of disk",
    "likes window seats on long flights",
    "plans to repaint the kitchen a pale yellow",
    "switched the team chat notifications off at night",
];
const QUERIES: [&str; 10] = [
    "what does Ada drink in the morning",
    "when is the weekly meeting",
    "which foods is Grace allergic to",
    "where is the conference trip",
    "where is the deployment runbook",
    "how far does Linus run",
    "what is the name of the cat",
    "which format should the quarterly report use",
    "what language is Barbara learning",
    "what colour will the kitchen be",
];

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn document_text(position: usize) -> String {
    format!(
        "{} {} (note {position}).",
        NAMES[position % NAMES.len()],
        FACTS[(position / NAMES.len()) % FACTS.len()]
    )
}

fn key(id: &str) -> MemoryKey {
    MemoryKey {
        namespace: NamespaceAddress::parse(NAMESPACE).unwrap(),
        id: DocumentId::new(id).unwrap(),
    }
}

fn access() -> MemoryAccess {
    MemoryAccess {
        namespace: NamespaceAddress::parse(NAMESPACE).unwrap(),
        scope: MemoryScope::new(SCOPE).unwrap(),
    }
}

fn put(id: &str, text: String) -> MemoryWrite {
    MemoryWrite::Put {
        key: key(id),
        operation_id: OperationId::new(format!("put-{id}")).unwrap(),
        expected_revision: None,
        locator: format!("bench:{id}"),
        content: MemoryContent::text(text),
        scopes: vec![MemoryScope::new(SCOPE).unwrap()],
    }
}

fn stored_source(
    profile: &SemanticProfile,
    key: MemoryKey,
    revision: Revision,
    text: &str,
    rng: &mut ChaCha8Rng,
    centroids: &[Vec<f32>],
) -> StoredSource {
    let chunks = chunk_text(text, profile.chunking)
        .into_iter()
        .map(|chunk| StoredChunk {
            ordinal: chunk.ordinal,
            start: chunk.start as u64,
            end: chunk.end as u64,
            excerpt_digest: Sha256::digest(chunk.text(text).as_bytes()).into(),
            vector: around(centroids, rng),
        })
        .collect();
    StoredSource {
        key,
        generation: SourceGeneration::new(1),
        state: StoredSourceState::Indexed { revision, chunks },
    }
}

struct Row {
    label: String,
    value: String,
}

fn row(rows: &mut Vec<Row>, label: impl Into<String>, value: impl Into<String>) {
    let row = Row {
        label: label.into(),
        value: value.into(),
    };
    println!("{:<58} {}", row.label, row.value);
    rows.push(row);
}

fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}

fn percentiles(latencies: Vec<Duration>) -> String {
    let (p50, p99) = p50_p99(latencies);
    format!("p50 {p50:.2} ms, p99 {p99:.2} ms")
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let chunks: usize = env_or("SEMANTIC_BENCH_CHUNKS", DEFAULT_CHUNKS);
    let recalls: usize = env_or("SEMANTIC_BENCH_RECALLS", DEFAULT_RECALLS);
    let commits: usize = env_or("SEMANTIC_BENCH_COMMITS", DEFAULT_COMMITS);
    let interval = Duration::from_millis(env_or(
        "SEMANTIC_BENCH_COMMIT_INTERVAL_MS",
        DEFAULT_COMMIT_INTERVAL_MS,
    ));
    let parent = std::env::var("SEMANTIC_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let directory = tempfile::tempdir_in(&parent).unwrap();
    let documents_path = directory.path().join("documents.sqlite");
    let vectors_path = directory.path().join("vectors.sqlite");
    let assets = ModelAssets::from_env();
    let profile = SemanticProfile::minilm_l6_v2();
    let digest = profile.digest().unwrap();
    let bounds = IndexBounds::for_chunks(DIMENSIONS, chunks + BOUND_SLACK).unwrap();
    let mut rows = Vec::new();
    println!("files in {}", parent.display());

    // (e) and the centroids, with a model that is dropped before the cold start.
    {
        let embedder =
            FastembedEmbedder::load(&assets, &profile).unwrap_or_else(|error| panic!("{error}"));
        let texts: Vec<String> = (0..THROUGHPUT_TEXTS).map(document_text).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        black_box(embedder.embed(&refs[..8]).unwrap());
        let started = Instant::now();
        black_box(embedder.embed(&refs).unwrap());
        let elapsed = started.elapsed();
        row(
            &mut rows,
            "(e) embedding throughput, real model",
            format!(
                "{:.0} chunks/s ({THROUGHPUT_TEXTS} chunks in {:.2} s)",
                THROUGHPUT_TEXTS as f64 / elapsed.as_secs_f64(),
                elapsed.as_secs_f64()
            ),
        );

        let (centroids, label) = centroids(Some(&embedder));
        let populate = Instant::now();
        let store = SqliteStore::open(&documents_path).unwrap();
        let vectors = SqliteVectorStore::open(&vectors_path).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for batch_start in (0..chunks).step_by(WRITE_BATCH) {
            let batch_end = (batch_start + WRITE_BATCH).min(chunks);
            let writes = (batch_start..batch_end)
                .map(|position| put(&format!("d{position:07}"), document_text(position)))
                .collect();
            let outcomes = store.apply_batch(writes).unwrap();
            for (position, outcome) in (batch_start..batch_end).zip(outcomes) {
                let revision = outcome.unwrap().receipt.document.revision;
                let id = format!("d{position:07}");
                let source = stored_source(
                    &profile,
                    key(&id),
                    revision,
                    &document_text(position),
                    &mut rng,
                    &centroids,
                );
                vectors.replace_source(&digest, &source).await.unwrap();
            }
        }
        let head = store.head().await.unwrap();
        vectors.set_indexed_position(&digest, head).await.unwrap();
        println!(
            "populated {chunks} documents and vectors ({label}) in {:.1} s",
            populate.elapsed().as_secs_f64()
        );
    }

    // (c) cold start, exact: open the store, load the model, load the vectors, fill the exact index.
    let started = Instant::now();
    let store = Arc::new(SqliteStore::open(&documents_path).unwrap());
    let opened = started.elapsed();
    let embedder = Arc::new(
        FastembedEmbedder::load(&assets, &profile).unwrap_or_else(|error| panic!("{error}")),
    );
    let model_loaded = started.elapsed();
    let vectors = Arc::new(SqliteVectorStore::open(&vectors_path).unwrap());
    let stored = vectors
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
    let vectors_loaded = started.elapsed();
    let mut exact = ExactIndex::new(DIMENSIONS, bounds).unwrap();
    let rows_of: Vec<_> = stored
        .into_iter()
        .filter_map(|source| match source.state {
            StoredSourceState::Indexed { revision, chunks } => {
                let version = Arc::new(SourceVersion {
                    key: source.key.clone(),
                    revision,
                    generation: source.generation,
                });
                let chunk_rows = chunks
                    .into_iter()
                    .map(|chunk| {
                        (
                            ChunkMeta {
                                source: version.clone(),
                                ordinal: chunk.ordinal,
                                start: chunk.start as usize,
                                end: chunk.end as usize,
                                excerpt_digest: chunk.excerpt_digest,
                            },
                            chunk.vector,
                        )
                    })
                    .collect();
                Some((source.key, chunk_rows))
            }
            StoredSourceState::Withdrawn => None,
        })
        .collect();
    exact.replace_sources(rows_of).unwrap();
    let exact_ready = started.elapsed();
    row(
        &mut rows,
        format!("(c) cold start, exact, {chunks} vectors"),
        format!(
            "{} (store {}, model {}, vectors read {}, exact fill {})",
            millis(exact_ready),
            millis(opened),
            millis(model_loaded - opened),
            millis(vectors_loaded - model_loaded),
            millis(exact_ready - vectors_loaded)
        ),
    );
    drop(exact);

    // (c) cold start through the engine: `open` loads the exact index and starts the HNSW graph in
    // the background; (b) below waits for the graph so its HNSW rows measure the graph.
    let config = SemanticIndexConfig {
        bounds,
        ..SemanticIndexConfig::new(profile.clone())
    };
    let engine_started = Instant::now();
    let index = Arc::new(
        SemanticIndex::open(config, embedder.clone(), vectors.clone())
            .await
            .unwrap(),
    );
    let engine_open = engine_started.elapsed();
    index.hnsw_ready().await.unwrap();
    let graph_ready = engine_started.elapsed();
    row(
        &mut rows,
        format!("(c) cold start, engine, {chunks} vectors"),
        format!(
            "{} (store + model {}, SemanticIndex::open {}); HNSW graph ready in the background \
             after {}",
            millis(model_loaded + engine_open),
            millis(model_loaded),
            millis(engine_open),
            millis(graph_ready)
        ),
    );

    // (b) warm recall path, with the token counter `memory` renders with (memory-cli's recall
    // service uses the approximate one; the model's tokenizer would measure a path nobody runs).
    let counter = memory_core::ApproximateTokenCounter;
    let recall_limits = RecallLimits::builder()
        .max_sources(TOP_K as u32)
        .max_items(TOP_K as u32)
        .max_bytes(16_384)
        .max_tokens(4_096)
        .timeout_ms(5_000)
        .build()
        .unwrap();
    let embed_only: Vec<Duration> = (0..recalls.min(50))
        .map(|i| {
            let text = format!("{} {i}", QUERIES[i % QUERIES.len()]);
            let started = Instant::now();
            black_box(embedder.embed(&[text.as_str()]).unwrap());
            started.elapsed()
        })
        .collect();
    row(
        &mut rows,
        "(b) of which: embed one query, real model",
        percentiles(embed_only),
    );
    // The lexical side of hybrid recall alone: the store's BM25 search for as many hits as hybrid
    // asks for. Hybrid runs it on the blocking pool beside embed + search, so hybrid's latency is
    // about the longer of the two plus revalidation.
    let mut lexical_only = Vec::with_capacity(recalls);
    for i in 0..recalls {
        let text = format!("{} {i}", QUERIES[i % QUERIES.len()]);
        let started = Instant::now();
        black_box(
            memory_core::LexicalSearch::search(
                &*store,
                &access(),
                &text,
                semantic_index::recall::DEFAULT_LEXICAL_CANDIDATES,
            )
            .await
            .unwrap(),
        );
        lexical_only.push(started.elapsed());
    }
    row(
        &mut rows,
        "(b) of which: lexical search (BM25, 32 hits)",
        percentiles(lexical_only),
    );
    for kind in [IndexKind::Exact, IndexKind::Hnsw] {
        let limits = QueryLimits::new(1_024, TOP_K, bounds.max_chunks, -1.0, 5_000, kind);
        let mut searched = Vec::with_capacity(recalls);
        let mut queried = Vec::with_capacity(recalls);
        for i in 0..recalls {
            let text = format!("{} {i}", QUERIES[i % QUERIES.len()]);
            let started = Instant::now();
            black_box(
                index
                    .search_candidates_in_every_namespace(&text, limits)
                    .await
                    .unwrap(),
            );
            searched.push(started.elapsed());
            let started = Instant::now();
            black_box(
                index
                    .query(&*store, &access(), &text, limits)
                    .await
                    .unwrap(),
            );
            queried.push(started.elapsed());
        }
        row(
            &mut rows,
            format!("(b) of which: embed + search, {kind:?}"),
            percentiles(searched),
        );
        row(
            &mut rows,
            format!("(b) of which: embed + search + revalidate (query), {kind:?}"),
            percentiles(queried),
        );
        for hybrid in [false, true] {
            let mut latencies = Vec::with_capacity(recalls);
            let mut cited = 0usize;
            for i in 0..recalls {
                // A distinct text per call, so nothing is answered from a warm cache of one query.
                let text = format!("{} {i}", QUERIES[i % QUERIES.len()]);
                let started = Instant::now();
                let source = if hybrid {
                    HybridRecall::new(index.clone(), store.clone(), access(), text, limits)
                        .into_source(SourceId::new("hybrid").unwrap(), false)
                } else {
                    SemanticRecall::new(index.clone(), store.clone(), access(), text, limits)
                        .into_source(SourceId::new("embedding").unwrap(), false)
                };
                let recalled = recall(vec![source], &recall_limits, &counter)
                    .await
                    .unwrap();
                latencies.push(started.elapsed());
                cited += recalled.passages.len();
            }
            let mode = if hybrid { "hybrid" } else { "embedding" };
            row(
                &mut rows,
                format!("(b) warm recall, {mode}, {kind:?}, {chunks} chunks"),
                format!(
                    "{} ({:.1} passages/recall)",
                    percentiles(latencies),
                    cited as f64 / recalls as f64
                ),
            );
        }
    }

    // (d) commit-to-recallable lag under steady single-document writes.
    let indexer = Arc::new(
        Indexer::spawn(
            index.clone(),
            store.clone(),
            store.clone(),
            IndexerOptions::default(),
        )
        .await
        .unwrap(),
    );
    let mut waiters = Vec::with_capacity(commits);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut next_commit = Instant::now();
    for i in 0..commits {
        tokio::time::sleep_until(next_commit.into()).await;
        next_commit += interval;
        let text = format!(
            "{} {} (fresh {i}, {}).",
            NAMES[i % NAMES.len()],
            FACTS[rng.random_range(0..FACTS.len())],
            rng.random_range(0..1_000_000u32)
        );
        store.apply(put(&format!("lag{i:04}"), text)).await.unwrap();
        let committed = Instant::now();
        let head = store.head().await.unwrap();
        let indexer = indexer.clone();
        waiters.push(tokio::spawn(async move {
            indexer.wait_until_indexed(head).await.unwrap();
            committed.elapsed()
        }));
    }
    let mut lags = Vec::with_capacity(commits);
    for waiter in waiters {
        lags.push(waiter.await.unwrap());
    }
    lags.sort();
    let p95 = support::percentile(&lags, 0.95);
    let (p50, _) = p50_p99(lags.clone());
    row(
        &mut rows,
        format!(
            "(d) commit-to-recallable lag, {commits} commits every {} ms",
            interval.as_millis()
        ),
        format!(
            "p50 {p50:.1} ms, p95 {:.1} ms, max {:.1} ms",
            p95.as_secs_f64() * 1e3,
            lags.last().unwrap().as_secs_f64() * 1e3
        ),
    );
    let last = format!("lag{:04}", commits - 1);
    let stored_last = store.read_document(&last).await;
    let check = index
        .query(
            &*store,
            &access(),
            &stored_last,
            QueryLimits::new(1_024, 1, bounds.max_chunks, -1.0, 5_000, IndexKind::Exact),
        )
        .await
        .unwrap();
    println!(
        "sanity: the last committed document is the top exact hit for its own text: {}",
        check.hits.first().map(|hit| hit.key.id.as_str()) == Some(last.as_str())
    );

    println!("\n{:<58} result", "measurement");
    for row in &rows {
        println!("{:<58} {}", row.label, row.value);
    }
    match Arc::try_unwrap(indexer) {
        Ok(indexer) => indexer.shutdown().await,
        Err(_) => println!("indexer still shared at exit"),
    }
}

trait ReadText {
    async fn read_document(&self, id: &str) -> String;
}

impl ReadText for SqliteStore {
    async fn read_document(&self, id: &str) -> String {
        use memory_core::MemoryReader;
        self.read(&key(id)).await.unwrap().unwrap().content.text
    }
}
