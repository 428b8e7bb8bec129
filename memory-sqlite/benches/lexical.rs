//! Lexical search latency, two measurements in one run:
//! - the store's query latency (p50, p99) at 10,000 and 100,000 documents in one namespace, against a
//!   plain in-process BM25 index over the same texts, printed as a ratio;
//! - `namespace_isolation_ratio lexical`: the p50 of a search in a 100-document namespace inside a store
//!   of `MEMORY_BENCH_ISOLATION_DOCS` documents (default 1,000,000) spread over 100-document namespaces
//!   (10,000 by default), over the p50 of the same searches in a store holding that namespace alone.
//!   Documents are written round-robin across the namespaces, as concurrent tenants write, so the
//!   searched namespace's documents are scattered over the whole file. Both stores hold the same
//!   documents for that namespace and are queried alternately, query by query, so machine noise falls
//!   on both; the run also counts the queries whose answers (keys and scores) are the same in both.
//!
//! Criterion reports means; tail latency needs per-query timings, so this bench is its own harness.
//! `MEMORY_BENCH_QUERIES` sets the number of timed queries per measurement (default 500);
//! `MEMORY_BENCH_LEXICAL=latency` or `=isolation` runs one measurement only.
#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use memory_core::{
    DocumentId, MemoryAccess, MemoryContent, MemoryKey, MemoryScope, MemoryWrite, NamespaceAddress,
    OperationId,
};
use memory_sqlite::{MAX_BATCH_WRITES, SqliteStore, Synchronous};

/// Corpus sizes measured.
const SIZES: [usize; 2] = [10_000, 100_000];
/// Distinct words in the synthetic vocabulary.
const VOCABULARY: u64 = 5_000;
/// Words per document.
const WORDS_PER_DOCUMENT: u64 = 24;
/// Hits requested per query.
const LIMIT: usize = 10;
/// Documents of each namespace in the isolation measurement.
const NAMESPACE_DOCUMENTS: usize = 100;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A word index with a roughly Zipfian distribution (frequent words are common).
    fn word(&mut self) -> u64 {
        let uniform = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((VOCABULARY as f64).powf(uniform) as u64).min(VOCABULARY - 1)
    }
}

fn word(index: u64) -> String {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "ve", "zu", "bo", "da", "fe", "gi", "ho",
        "ju",
    ];
    let mut text = String::new();
    let mut rest = index;
    loop {
        text.push_str(SYLLABLES[(rest % 16) as usize]);
        rest /= 16;
        if rest == 0 {
            break;
        }
    }
    text.push('x');
    text
}

fn text(rng: &mut Rng) -> String {
    (0..WORDS_PER_DOCUMENT)
        .map(|_| word(rng.word()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// BM25 (k1 = 1.2, b = 0.75, FTS5's defaults) over an inverted index in memory.
struct PlainBm25 {
    postings: HashMap<String, Vec<(u32, u32)>>,
    lengths: Vec<u32>,
    average_length: f64,
}

impl PlainBm25 {
    fn build(texts: &[String]) -> Self {
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(texts.len());
        for (document, text) in texts.iter().enumerate() {
            let mut counts: HashMap<String, u32> = HashMap::new();
            let mut length = 0;
            for token in tokens(text) {
                *counts.entry(token).or_default() += 1;
                length += 1;
            }
            lengths.push(length);
            for (token, count) in counts {
                postings
                    .entry(token)
                    .or_default()
                    .push((document as u32, count));
            }
        }
        let average_length =
            lengths.iter().map(|length| f64::from(*length)).sum::<f64>() / lengths.len() as f64;
        Self {
            postings,
            lengths,
            average_length,
        }
    }

    fn search(&self, query: &str, limit: usize) -> Vec<(u32, f64)> {
        let documents = self.lengths.len() as f64;
        let mut scores: HashMap<u32, f64> = HashMap::new();
        let mut seen = Vec::new();
        for token in tokens(query) {
            if seen.contains(&token) {
                continue;
            }
            let Some(list) = self.postings.get(&token) else {
                continue;
            };
            seen.push(token);
            let frequency = list.len() as f64;
            let idf = ((documents - frequency + 0.5) / (frequency + 0.5)).ln_1p();
            for (document, count) in list {
                let count = f64::from(*count);
                let length = f64::from(self.lengths[*document as usize]);
                let norm = 1.2 * (1.0 - 0.75 + 0.75 * length / self.average_length);
                *scores.entry(*document).or_default() += idf * count * 2.2 / (count + norm);
            }
        }
        let mut ranked: Vec<(u32, f64)> = scores.into_iter().collect();
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit, |a, b| b.1.total_cmp(&a.1));
            ranked.truncate(limit);
        }
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        ranked
    }
}

fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|character: char| !character.is_alphanumeric())
        .filter(|token| !token.is_empty())
        .map(str::to_lowercase)
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index]
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let queries = env_number("MEMORY_BENCH_QUERIES", 500);
    let only = std::env::var("MEMORY_BENCH_LEXICAL").unwrap_or_default();
    if only != "isolation" {
        latency(queries);
    }
    if only != "latency" {
        isolation(
            queries,
            env_number("MEMORY_BENCH_ISOLATION_DOCS", 1_000_000),
        );
    }
}

fn query_texts(rng: &mut Rng, queries: usize) -> Vec<String> {
    (0..queries)
        .map(|_| {
            let words = 1 + rng.next() % 3;
            (0..words)
                .map(|_| word(rng.word()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn latency(queries: usize) {
    let namespace =
        NamespaceAddress::encode("bench", 1, &serde_json::json!({ "tenant": "bench" })).unwrap();
    let scope = MemoryScope::new("assistant").unwrap();
    let access = MemoryAccess {
        namespace: namespace.clone(),
        scope: scope.clone(),
    };
    println!("lexical search, {LIMIT} hits per query, {queries} queries of 1 to 3 words");
    println!(
        "{:>8} {:>12} {:>12} {:>12} {:>12} {:>8} {:>8}",
        "docs", "store p50", "store p99", "bm25 p50", "bm25 p99", "p50 x", "p99 x"
    );
    for size in SIZES {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteStore::builder()
            .synchronous(Synchronous::Normal)
            .open(directory.path().join("lexical.sqlite"))
            .unwrap();
        let mut rng = Rng(size as u64);
        let texts: Vec<String> = (0..size).map(|_| text(&mut rng)).collect();
        let import = Instant::now();
        for (chunk_index, chunk) in texts.chunks(MAX_BATCH_WRITES).enumerate() {
            let writes = chunk
                .iter()
                .enumerate()
                .map(|(offset, text)| {
                    let index = chunk_index * MAX_BATCH_WRITES + offset;
                    MemoryWrite::Put {
                        key: MemoryKey {
                            namespace: namespace.clone(),
                            id: DocumentId::new(format!("doc-{index}")).unwrap(),
                        },
                        operation_id: OperationId::new(format!("op-{index}")).unwrap(),
                        expected_revision: None,
                        locator: format!("bench:{index}"),
                        content: MemoryContent::text(text.clone()),
                        scopes: vec![scope.clone()],
                    }
                })
                .collect();
            for outcome in store.apply_batch(writes).unwrap() {
                outcome.unwrap();
            }
        }
        let import = import.elapsed();
        let plain = PlainBm25::build(&texts);
        let query_texts = query_texts(&mut rng, queries);
        // One untimed pass warms caches on both sides.
        for query in &query_texts {
            store
                .reader()
                .search_blocking(&access, query, LIMIT)
                .unwrap();
            plain.search(query, LIMIT);
        }
        let mut fts = Vec::with_capacity(queries);
        let mut bm25 = Vec::with_capacity(queries);
        let mut overlap = 0_usize;
        for query in &query_texts {
            let started = Instant::now();
            let hits = store
                .reader()
                .search_blocking(&access, query, LIMIT)
                .unwrap();
            fts.push(started.elapsed());
            let started = Instant::now();
            let plain_hits = plain.search(query, LIMIT);
            bm25.push(started.elapsed());
            overlap += usize::from(hits.len() == plain_hits.len());
        }
        fts.sort();
        bm25.sort();
        let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
        println!(
            "{size:>8} {:>12?} {:>12?} {:>12?} {:>12?} {:>8.2} {:>8.2}",
            percentile(&fts, 0.5),
            percentile(&fts, 0.99),
            percentile(&bm25, 0.5),
            percentile(&bm25, 0.99),
            ratio(percentile(&fts, 0.5), percentile(&bm25, 0.5)),
            ratio(percentile(&fts, 0.99), percentile(&bm25, 0.99)),
        );
        println!(
            "         import {size} docs in {import:?}; same hit count on {overlap}/{queries} queries"
        );
    }
}

fn bench_namespace(tenant: usize) -> NamespaceAddress {
    NamespaceAddress::encode("bench", 1, &serde_json::json!({ "tenant": tenant })).unwrap()
}

/// The text of document `index` of namespace `tenant`: the same in every store.
fn namespace_text(tenant: usize, index: usize) -> String {
    let mut rng = Rng(((tenant as u64) << 20) ^ index as u64);
    text(&mut rng)
}

fn namespace_put(tenant: usize, index: usize, scope: &MemoryScope) -> MemoryWrite {
    MemoryWrite::Put {
        key: MemoryKey {
            namespace: bench_namespace(tenant),
            id: DocumentId::new(format!("doc-{index}")).unwrap(),
        },
        operation_id: OperationId::new(format!("op-{index}")).unwrap(),
        expected_revision: None,
        locator: format!("bench:{tenant}:{index}"),
        content: MemoryContent::text(namespace_text(tenant, index)),
        scopes: vec![scope.clone()],
    }
}

fn open_bench_store(directory: &std::path::Path, name: &str) -> SqliteStore {
    SqliteStore::builder()
        .synchronous(Synchronous::Normal)
        .open(directory.join(name))
        .unwrap()
}

fn write_all(store: &SqliteStore, writes: impl Iterator<Item = MemoryWrite>) {
    let mut writes = writes.peekable();
    while writes.peek().is_some() {
        let batch: Vec<MemoryWrite> = writes.by_ref().take(MAX_BATCH_WRITES).collect();
        for outcome in store.apply_batch(batch).unwrap() {
            outcome.unwrap();
        }
    }
}

fn isolation(queries: usize, total: usize) {
    let namespaces = (total / NAMESPACE_DOCUMENTS).max(1);
    let total = namespaces * NAMESPACE_DOCUMENTS;
    let searched = namespaces / 2;
    let scope = MemoryScope::new("assistant").unwrap();
    let access = MemoryAccess {
        namespace: bench_namespace(searched),
        scope: scope.clone(),
    };
    let directory = tempfile::tempdir().unwrap();
    let alone = open_bench_store(directory.path(), "alone.sqlite");
    write_all(
        &alone,
        (0..NAMESPACE_DOCUMENTS).map(|index| namespace_put(searched, index, &scope)),
    );
    let crowded = open_bench_store(directory.path(), "crowded.sqlite");
    let import = Instant::now();
    // Round-robin: the n-th write goes to namespace n % namespaces, so every namespace's documents are
    // spread over the whole file.
    write_all(
        &crowded,
        (0..total).map(|n| namespace_put(n % namespaces, n / namespaces, &scope)),
    );
    let import = import.elapsed();
    let mut rng = Rng(0x15);
    let query_texts = query_texts(&mut rng, queries);
    let search = |store: &SqliteStore, query: &str| {
        store
            .reader()
            .search_blocking(&access, query, LIMIT)
            .unwrap()
    };
    for query in &query_texts {
        search(&alone, query);
        search(&crowded, query);
    }
    let mut alone_times = Vec::with_capacity(queries);
    let mut crowded_times = Vec::with_capacity(queries);
    let mut same = 0_usize;
    let mut with_hits = 0_usize;
    for query in &query_texts {
        let started = Instant::now();
        let alone_hits = search(&alone, query);
        alone_times.push(started.elapsed());
        let started = Instant::now();
        let crowded_hits = search(&crowded, query);
        crowded_times.push(started.elapsed());
        let answer = |hits: Vec<memory_core::LexicalHit>| {
            hits.into_iter()
                .map(|hit| (hit.key, hit.score))
                .collect::<Vec<_>>()
        };
        with_hits += usize::from(!alone_hits.is_empty());
        same += usize::from(answer(alone_hits) == answer(crowded_hits));
    }
    alone_times.sort();
    crowded_times.sort();
    let p50 = |times: &[Duration]| percentile(times, 0.5);
    let ratio = p50(&crowded_times).as_secs_f64() / p50(&alone_times).as_secs_f64().max(1e-9);
    println!(
        "lexical search in a {NAMESPACE_DOCUMENTS}-document namespace, {LIMIT} hits per query, \
         {queries} queries of 1 to 3 words ({with_hits} with hits)"
    );
    println!(
        "  alone:   p50 {:?}, p99 {:?}",
        p50(&alone_times),
        percentile(&alone_times, 0.99)
    );
    println!(
        "  crowded: p50 {:?}, p99 {:?} ({total} documents in {namespaces} namespaces, written in \
         {import:?})",
        p50(&crowded_times),
        percentile(&crowded_times, 0.99)
    );
    println!("  same answers (keys and scores) on {same}/{queries} queries");
    println!("namespace_isolation_ratio lexical {ratio:.2}");
}
