//! Where a namespace-filtered HNSW search should scan its namespace instead of walking the graph:
//! an index of `SEMANTIC_BENCH_FILTERED_CHUNKS` chunks (default 100,000), with namespaces of 256
//! to 16,384 chunks scattered through it and the rest in one bulk namespace. For each size it
//! prints `filtered_walk SIZE hnsw_p50_ms H exact_p50_ms E recall_at_10 R`: the HNSW index's p50
//! (the walk, or the scan it chooses), the exact index's p50 over the same rows, and the HNSW
//! top 10's overlap with the exact top 10. Asserts nothing.
//!
//! Run: `cargo bench -p semantic-index --bench filtered_walk`.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use std::time::Instant;

use memory_core::{DocumentId, MemoryKey, NamespaceAddress};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use semantic_index::{
    ExactIndex, HnswIndex, HnswParams, IndexBounds, SearchRequest, SourceFilter, VectorIndex,
};
use support::{DIMENSIONS, around, centroids, chunks_from, keyed_sources, p50_p99};

const SIZES: [usize; 7] = [256, 512, 1_024, 2_048, 4_096, 8_192, 16_384];
const QUERIES: usize = 200;
const TOP_K: usize = 10;

fn namespace(name: &str) -> NamespaceAddress {
    NamespaceAddress::parse(&format!(r#"[1,"tenant",1,{{"team":"{name}"}}]"#)).unwrap()
}

/// Each source's namespace: the positions in a fixed shuffled order, the first 256 to the
/// 256-chunk namespace, the next 512 to the 512-chunk one, and so on, the rest to the bulk
/// namespace; so each namespace is scattered through the rows.
fn owners(total: usize) -> Vec<String> {
    let mut positions: Vec<usize> = (0..total).collect();
    positions.shuffle(&mut ChaCha8Rng::seed_from_u64(3));
    let mut owners = vec!["bulk".to_owned(); total];
    let mut taken = positions.into_iter();
    for size in SIZES {
        for position in taken.by_ref().take(size) {
            owners[position] = format!("n{size}");
        }
    }
    owners
}

fn main() {
    if !std::env::args().any(|argument| argument == "--bench") {
        return;
    }
    let total = chunks_from("SEMANTIC_BENCH_FILTERED_CHUNKS", 100_000);
    let (centroids, _) = centroids(None);
    let owners = owners(total);
    let sources = keyed_sources(total, &centroids, 7, |position| MemoryKey {
        namespace: namespace(&owners[position]),
        id: DocumentId::new(format!("d{position:07}")).unwrap(),
    });
    let bounds = IndexBounds::for_chunks(DIMENSIONS, total).unwrap();
    let mut exact = ExactIndex::new(DIMENSIONS, bounds).unwrap();
    exact.replace_sources(sources.clone()).unwrap();
    let started = Instant::now();
    let mut hnsw = HnswIndex::new(DIMENSIONS, bounds, HnswParams::default()).unwrap();
    hnsw.replace_sources(sources).unwrap();
    println!(
        "filtered_walk: {total} chunks, graph built in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let queries: Vec<Vec<f32>> = (0..QUERIES).map(|_| around(&centroids, &mut rng)).collect();
    let request = SearchRequest {
        limit: TOP_K,
        min_score: -1.0,
        max_scanned_chunks: usize::MAX,
    };
    for size in SIZES {
        let target = namespace(&format!("n{size}"));
        let filter = SourceFilter::Namespace(&target);
        let (mut walk, mut scan, mut overlap) = (Vec::new(), Vec::new(), 0usize);
        for query in &queries {
            let started = Instant::now();
            let found = hnsw.search_in(query, request, filter).unwrap();
            walk.push(started.elapsed());
            let started = Instant::now();
            let truth = exact.search_in(query, request, filter).unwrap();
            scan.push(started.elapsed());
            overlap += found
                .hits
                .iter()
                .filter(|hit| truth.hits.iter().any(|other| other.chunk == hit.chunk))
                .count();
        }
        println!(
            "filtered_walk {size} hnsw_p50_ms {:.4} exact_p50_ms {:.4} recall_at_10 {:.3}",
            p50_p99(walk).0,
            p50_p99(scan).0,
            overlap as f64 / (TOP_K * queries.len()) as f64
        );
    }
}
