//! FTS5 query latency (p50, p99) at 10,000 and 100,000 documents, against a plain in-process BM25 index
//! over the same texts, measured in the same run and printed as a ratio.
//!
//! Criterion reports means; tail latency needs per-query timings, so this bench is its own harness.
//! `MEMORY_BENCH_QUERIES` sets the number of timed queries per size (default 500).
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

fn main() {
    let queries: usize = std::env::var("MEMORY_BENCH_QUERIES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(500);
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
        "docs", "fts5 p50", "fts5 p99", "bm25 p50", "bm25 p99", "p50 x", "p99 x"
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
        let query_texts: Vec<String> = (0..queries)
            .map(|_| {
                let words = 1 + rng.next() % 3;
                (0..words)
                    .map(|_| word(rng.word()))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
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
