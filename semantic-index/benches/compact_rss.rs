//! Resident memory of a process holding `SEMANTIC_BENCH_COMPACT_CHUNKS` chunks (default 100,000;
//! the issue's goal is 1,000,000) in an exact index ready to query, with compact (int8) vectors on
//! and off. Each encoding is measured in a child process of its own (this binary, re-run), so one
//! measurement's allocations never inflate the other's. A child reads `VmRSS` and `VmHWM` from
//! `/proc/self/status` before filling the index and once it has answered rescored queries, and
//! the parent prints the named figures:
//!
//! - `compact_rss_mb f32 N rss R hwm H` and `compact_rss_mb int8 N rss R hwm H`: after the fill;
//! - `compact_rss_baseline_mb f32|int8 R`: the child before the fill (binary and allocator);
//! - `compact_vector_mb f32|int8 V`: the vectors' own allocation;
//! - `compact_rss_ratio int8/f32 X`: the two RSS figures over each other.
//!
//! The sources are generated one by one (synthetic unit vectors around random centroids, source
//! `i` in namespace `i % (N / 100)`, as in `namespace_isolation.rs`), so no f32 copy of the corpus is
//! ever resident. The int8 child rescores its queries' candidates with the f32 vectors regenerated
//! from their positions (a stand-in for the store's read, which holds nothing in memory either).
//! The model is not loaded (a server adds its fixed size), and the HNSW graph is not built: its
//! layer-0 lists take `2 * max_connections * 4` bytes a row (192 at the default 24; the graph keeps
//! neighbour rows only, no distances), whatever the encoding. Asserts nothing.
//!
//! Run: `cargo bench -p semantic-index --bench compact_rss`, or at the issue's size
//! `SEMANTIC_BENCH_COMPACT_CHUNKS=1000000 cargo bench -p semantic-index --bench compact_rss`.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use memory_core::vectors::SourceGeneration;
use memory_core::{DocumentId, MemoryKey, NamespaceAddress, Revision};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use semantic_index::index::{ChunkMeta, SourceVersion, rescore};
use semantic_index::{
    CompactVectors, ExactIndex, IndexBounds, SearchRequest, SourceFilter, VectorIndex,
};
use support::{DIMENSIONS, around, centroids};

const CHILD: &str = "SEMANTIC_BENCH_COMPACT_CHILD";
const QUERIES: usize = 20;

fn namespace(index: usize) -> NamespaceAddress {
    NamespaceAddress::parse(&format!(r#"[1,"tenant",1,{{"team":"t{index:05}"}}]"#)).unwrap()
}

fn chunks() -> usize {
    std::env::var("SEMANTIC_BENCH_COMPACT_CHUNKS")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100_000)
}

/// `VmRSS` and `VmHWM` in MiB.
fn memory_mb() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(f64::NAN, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Source `position`'s vector: the same on every call, so it needs no copy.
fn vector(centroids: &[Vec<f32>], position: usize) -> Vec<f32> {
    around(
        centroids,
        &mut ChaCha8Rng::seed_from_u64(position as u64 ^ 0x5eed),
    )
}

fn child(encoding: &str, size: usize) {
    let compact = if encoding == "int8" {
        CompactVectors::int8()
    } else {
        CompactVectors::F32
    };
    let (centroids, _) = centroids(None);
    let namespaces = (size / 100).max(1);
    let (baseline, _) = memory_mb();
    let bounds = IndexBounds::for_chunks(DIMENSIONS, size.max(1)).unwrap();
    let mut index = ExactIndex::with_compact(DIMENSIONS, bounds, compact).unwrap();
    let revision = Revision::new("r").unwrap();
    for position in 0..size {
        let key = MemoryKey {
            namespace: namespace(position % namespaces),
            id: DocumentId::new(format!("d{position:07}")).unwrap(),
        };
        let meta = ChunkMeta {
            source: Arc::new(SourceVersion {
                key: key.clone(),
                revision: revision.clone(),
                generation: SourceGeneration(1),
            }),
            ordinal: 0,
            start: 0,
            end: 0,
            excerpt_digest: [0; 32],
        };
        index
            .replace_source(&key, vec![(meta, vector(&centroids, position))])
            .unwrap();
    }
    let request = SearchRequest {
        limit: 10,
        min_score: -1.0,
        max_scanned_chunks: usize::MAX,
    };
    let target = namespace(0);
    for query in 0..QUERIES {
        let query = vector(&centroids, size + query);
        for filter in [SourceFilter::All, SourceFilter::Namespace(&target)] {
            let outcome = index.search_in(&query, request, filter).unwrap();
            let exact = outcome
                .hits
                .iter()
                .map(|hit| {
                    let position: usize = hit.chunk.source.key.id.as_str()[1..].parse().unwrap();
                    Some(vector(&centroids, position))
                })
                .collect();
            let hits = rescore(&query, outcome, &request, exact).unwrap().hits;
            assert_eq!(hits.len(), 10);
        }
    }
    let (rss, hwm) = memory_mb();
    println!(
        "CHILD {encoding} {size} {rss:.1} {hwm:.1} {baseline:.1} {:.1}",
        index.reserved_vector_bytes() as f64 / (1024.0 * 1024.0)
    );
}

fn main() {
    if let Ok(encoding) = std::env::var(CHILD) {
        child(&encoding, chunks());
        return;
    }
    if !std::env::args().any(|argument| argument == "--bench") {
        return;
    }
    let size = chunks();
    let mut rss = Vec::new();
    for encoding in ["f32", "int8"] {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .env(CHILD, encoding)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let Some(line) = stdout.lines().find(|line| line.starts_with("CHILD ")) else {
            println!(
                "compact_rss {encoding}: the child failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            return;
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        println!(
            "compact_rss_mb {encoding} {size} rss {} hwm {}",
            fields[3], fields[4]
        );
        println!("compact_rss_baseline_mb {encoding} {}", fields[5]);
        println!("compact_vector_mb {encoding} {}", fields[6]);
        rss.push(fields[3].parse::<f64>().unwrap_or(f64::NAN));
    }
    println!("compact_rss_ratio int8/f32 {:.3}", rss[1] / rss[0]);
}
