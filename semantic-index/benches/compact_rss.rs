//! Resident memory of a process holding `SEMANTIC_BENCH_COMPACT_CHUNKS` chunks (default 100,000;
//! the issue's goal is 1,000,000) ready to query, in three children of its own (this binary,
//! re-run), so one measurement's allocations never inflate another's:
//!
//! - `f32`: an exact index of f32 vectors;
//! - `int8`: an exact index of compact (int8) vectors;
//! - `int8+hnsw`: what the product's HNSW mode holds, the int8 exact index and an HNSW index built
//!   over it ([`HnswIndex::build_over`]: its own row metadata and graph, the vectors shared).
//!
//! A child reads `VmRSS` and `VmHWM` from `/proc/self/status` before filling the index and once it
//! has answered rescored queries, then checks its top 10 against an exact f32 ranking of every
//! source, and the parent prints the named figures (MiB, as `/proc` reports them in KiB / 1024):
//!
//! - `compact_rss_mb MODE N rss R hwm H`: after the fill and the queries;
//! - `compact_rss_baseline_mb MODE R`: the child before the fill (binary and allocator);
//! - `compact_rss_bytes_per_chunk MODE B`: `(R - baseline) / N`, in bytes;
//! - `compact_vector_mb MODE V`: the vectors' own allocation;
//! - `compact_recall_at_10 MODE X`: the rescored top 10's overlap with the exact f32 top 10;
//! - `compact_rss_ratio int8/f32 X` and `compact_rss_ratio int8+hnsw/f32 X`.
//!
//! By default the sources are generated one by one (synthetic unit vectors around random
//! centroids); with `SEMANTIC_BENCH_COMPACT_VECTORS=PATH` they are read, a row at a time, from a
//! vector file that `memory-eval dump-vectors --dir DIR --size N` writes (real-model vectors of the
//! eval corpus, derived ones past its 578, and its 480 real-model queries, 100 of them used). Source
//! `i` is in namespace `i % (N / 100)`, as in `namespace_isolation.rs`; ids of 8 bytes, revisions
//! of 33 as the store writes them; so no f32 copy of the corpus is ever resident. The int8
//! children rescore their queries' candidates with the f32 vectors regenerated (or re-read) from
//! their positions (a stand-in for the store's read, which holds nothing in memory either). The
//! model is not loaded (a server adds its fixed size). `SEMANTIC_BENCH_COMPACT_EF=W1,W2,...` also
//! measures the graph child's recall at those search widths (`compact_hnsw_recall_at_10 int8+hnsw
//! ef W X`). Asserts nothing but ten hits a query.
//!
//! At 1,000,000 chunks (2 cores), synthetic: int8 591.4 MiB (620 MB; 617 bytes a chunk: 388 of
//! codes and scale, 56 of row metadata, 96 for the source's record of namespace, id, revision and
//! generation, about 12 for its span), int8+hnsw 759.1 MiB (796 MB; 792 bytes; the graph's layer-0
//! lists are 192 bytes a row at the default 24 connections), f32 1728.6 MiB. Before the rows held
//! their source as one compact record (`index/table/record.rs`) and the span maps stopped keeping
//! a key of their own, the int8 figures were 633.7 and 816.5 MiB (660 and 852 bytes a chunk); with
//! a one-letter revision shared by every source (this bench's earlier form) they were 728.4 and
//! 1056.7 MiB before the two tables shared their metadata segments and per-namespace span maps, the
//! sources of a namespace its address, and the graph kept upper lists for upper rows only.
//!
//! Recall@10 against exact f32, at 1,000,000 chunks: exact int8 with rescoring is 1.0 on both
//! sets (598.5 MiB on the vector file). HNSW's depends on the vectors, not on the codes: at the
//! old fixed `ef_search` of 128 it was 0.87 on the synthetic set (0.998 at 100,000) and 0.700 on
//! the vector file of 1,000,000 (765.3 MiB; 0.789, 0.879 and 0.917 at widths 256, 512 and 1,024).
//! The default width now follows the index (`HnswParams::width_for`: 1,280 at a million rows):
//! on the vector file, 0.929 at 765.3 MiB (2026-12-06; the graph and so the memory unchanged).
//! Since rows that no layer-0 list took are adopted into four spare slots of a near row's list
//! (`Graph::adopt`, 16 bytes a row), 0.957 at 786.9 MiB (825 MB; 822 bytes a chunk). With segments
//! of 4,096 rows (the int8 child alone: 598.6 to 575.4 MiB) and the graph's lists on huge
//! pages, 765.2 MiB; with three spare slots, 761.3 MiB (798 MB; 795 bytes a chunk), recall 0.956.
//! hnswlib 0.8 with the same M (24) and `ef_construction` (200), in f32, is level on both: 0.709,
//! 0.803, 0.876 and 0.916 at the same widths on the same file (its 480 queries), and 0.853 at 128
//! on isotropic clusters of the synthetic set's density (4 centroids, 62,500 rows: ours 0.876).
//! Both sets are hard cases: each real vector of the file stands for about 1,700 derived ones, and
//! the synthetic rows are isotropic noise around 64 centres, so a query's exact top 10 is decided
//! by small differences a graph walk misses; on 20,000 vectors of the same file both reach 0.99 at
//! a width of 40 (`scripts/compare.sh`). A server that needs more from a large index widens its
//! searches (`memory --hnsw-ef-search N`) or answers exactly (`exact` mode).
//!
//! Run: `cargo bench -p semantic-index --bench compact_rss`, or at the issue's size
//! `SEMANTIC_BENCH_COMPACT_CHUNKS=1000000 cargo bench -p semantic-index --bench compact_rss`; on
//! real-model vectors, `memory-eval dump-vectors --dir /tmp/v --size 1000000`, then the same with
//! `SEMANTIC_BENCH_COMPACT_VECTORS=/tmp/v/vectors.bin` (and `SEMANTIC_BENCH_COMPACT_EF=256,512`).
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use memory_core::vectors::SourceGeneration;
use memory_core::{DocumentId, MemoryKey, NamespaceAddress, Revision};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use semantic_index::index::{ChunkMeta, SourceVersion, rescore};
use semantic_index::{
    CompactVectors, ExactIndex, HnswIndex, HnswParams, IndexBounds, SearchRequest, SourceFilter,
    VectorIndex,
};
use support::{DIMENSIONS, around, centroids};

const CHILD: &str = "SEMANTIC_BENCH_COMPACT_CHILD";
/// Queries each child answers (each twice: over every namespace and within one).
const QUERIES: usize = 100;
/// A vector file to read the sources and queries from instead of generating them.
const VECTORS: &str = "SEMANTIC_BENCH_COMPACT_VECTORS";
/// The int8 child that also builds the HNSW graph.
const GRAPH_MODE: &str = "int8+hnsw";

fn namespace(index: usize) -> NamespaceAddress {
    NamespaceAddress::parse(&format!(r#"[1,"tenant",1,{{"team":"t{index:05}"}}]"#)).unwrap()
}

fn chunks() -> usize {
    support::chunks_from("SEMANTIC_BENCH_COMPACT_CHUNKS", 100_000)
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

/// Where the children's vectors come from: generated from each source's position, or read from a
/// vector file (`SEMANTIC_BENCH_COMPACT_VECTORS`), a row at a time, so neither keeps an f32 copy of
/// the corpus resident.
enum Vectors {
    /// Unit vectors around 64 random centroids; query `i` is source `size + i`'s vector.
    Synthetic {
        centroids: Vec<Vec<f32>>,
        size: usize,
    },
    /// What `memory-eval dump-vectors` writes: real-model vectors (derived ones past the corpus)
    /// and real-model queries.
    File {
        file: std::fs::File,
        base: usize,
        queries: usize,
        dimensions: usize,
    },
}

/// `memory-eval dump-vectors`'s header: magic, then base count, query count and dimensions.
const FILE_MAGIC: &[u8; 8] = b"MEMVEC01";
const FILE_HEADER: u64 = 32;

impl Vectors {
    fn open(size: usize) -> Self {
        let Ok(path) = std::env::var(VECTORS) else {
            return Self::Synthetic {
                centroids: centroids(None).0,
                size,
            };
        };
        let file = std::fs::File::open(&path).unwrap();
        let mut header = [0u8; FILE_HEADER as usize];
        file.read_exact_at(&mut header, 0).unwrap();
        assert_eq!(&header[..8], FILE_MAGIC, "{path}: not a vector file");
        let number = |at: usize| {
            usize::try_from(u64::from_le_bytes(header[at..at + 8].try_into().unwrap())).unwrap()
        };
        let (base, queries, dimensions) = (number(8), number(16), number(24));
        assert_eq!(dimensions, DIMENSIONS, "{path}: dimensions");
        assert!(
            base >= size,
            "{path} holds {base} vectors, fewer than {size}"
        );
        assert!(queries >= 1, "{path} holds no queries");
        Self::File {
            file,
            base,
            queries,
            dimensions,
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Self::Synthetic { .. } => "synthetic around random centroids",
            Self::File { .. } => "from the vector file",
        }
    }

    /// Source `position`'s vector: the same on every call, so it needs no copy.
    fn source(&self, position: usize) -> Vec<f32> {
        match self {
            Self::Synthetic { centroids, .. } => around(
                centroids,
                &mut ChaCha8Rng::seed_from_u64(position as u64 ^ 0x5eed),
            ),
            Self::File {
                file, dimensions, ..
            } => read_row(file, *dimensions, position),
        }
    }

    /// Query `index` of [`QUERIES`]: for a file, its queries spread evenly over the ones it holds.
    fn query(&self, index: usize) -> Vec<f32> {
        match self {
            Self::Synthetic { size, .. } => self.source(size + index),
            Self::File {
                file,
                base,
                queries,
                dimensions,
            } => read_row(file, *dimensions, base + index * queries / QUERIES),
        }
    }
}

/// Row `row` of a vector file (queries follow the base rows).
fn read_row(file: &std::fs::File, dimensions: usize, row: usize) -> Vec<f32> {
    let mut bytes = vec![0u8; dimensions * 4];
    file.read_exact_at(&mut bytes, FILE_HEADER + (row * dimensions * 4) as u64)
        .unwrap();
    bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes(word.try_into().unwrap()))
        .collect()
}

/// The `limit` positions nearest each query by exact f32 dot product over every source's vector
/// (streamed: nothing but the running top lists is held).
fn nearest(vectors: &Vectors, size: usize, queries: &[Vec<f32>], limit: usize) -> Vec<Vec<usize>> {
    let mut best: Vec<Vec<(f32, usize)>> = vec![Vec::with_capacity(limit + 1); queries.len()];
    for position in 0..size {
        let row = vectors.source(position);
        for (query, top) in queries.iter().zip(&mut best) {
            let score = semantic_index::kernels::dot(query, &row);
            if top.len() < limit || score > top[top.len() - 1].0 {
                let at = top.partition_point(|(kept, _)| *kept >= score);
                top.insert(at, (score, position));
                top.truncate(limit);
            }
        }
    }
    best.into_iter()
        .map(|top| top.into_iter().map(|(_, position)| position).collect())
        .collect()
}

fn position_of(hit: &semantic_index::index::SearchHit) -> usize {
    hit.chunk.source.key.id.as_str()[1..].parse().unwrap()
}

fn child(mode: &str, size: usize) {
    let compact = if mode == "f32" {
        CompactVectors::F32
    } else {
        CompactVectors::int8()
    };
    let vectors = Vectors::open(size);
    let namespaces = (size / 100).max(1);
    let (baseline, _) = memory_mb();
    let bounds = IndexBounds::for_chunks(DIMENSIONS, size.max(1)).unwrap();
    let mut index = ExactIndex::with_compact(DIMENSIONS, bounds, compact).unwrap();
    for position in 0..size {
        // A revision of the store's form (33 hex characters), one per source.
        let revision = Revision::new(format!("{:033x}", position as u128 * 0x9e37_79b9)).unwrap();
        let key = MemoryKey {
            namespace: namespace(position % namespaces),
            id: DocumentId::new(format!("d{position:07}")).unwrap(),
        };
        let meta = ChunkMeta {
            source: Arc::new(SourceVersion {
                key: key.clone(),
                revision,
                generation: SourceGeneration::new(1),
            }),
            ordinal: 0,
            start: 0,
            end: 0,
            excerpt_digest: [0; 32],
        };
        index
            .replace_source(&key, vec![(meta, vectors.source(position))])
            .unwrap();
    }
    // The product's HNSW mode holds both: the exact index it loaded and answers from while the
    // graph builds, and the graph's own table sharing the exact index's vectors.
    let mut graph = (mode == GRAPH_MODE)
        .then(|| HnswIndex::build_over(&index, bounds, HnswParams::default()).unwrap());
    let queries: Vec<Vec<f32>> = (0..QUERIES).map(|query| vectors.query(query)).collect();
    let found = answer(searched(&index, graph.as_ref()), &vectors, &queries);
    let (rss, hwm) = memory_mb();
    let truth = nearest(&vectors, size, &queries, LIMIT);
    println!(
        "CHILD {mode} {size} {rss:.1} {hwm:.1} {baseline:.1} {:.1} {:.4}",
        index.reserved_vector_bytes() as f64 / (1024.0 * 1024.0),
        recall(&found, &truth)
    );
    if let Some(graph) = &mut graph {
        for ef in search_widths() {
            graph.set_ef_search(ef).unwrap();
            let found = answer(graph, &vectors, &queries);
            println!("WIDTH {ef} {:.4}", recall(&found, &truth));
        }
    }
}

/// The index a child's queries go to: the graph when it built one.
fn searched<'a>(index: &'a ExactIndex, graph: Option<&'a HnswIndex>) -> &'a dyn VectorIndex {
    match graph {
        Some(graph) => graph,
        None => index,
    }
}

/// Hits asked per query.
const LIMIT: usize = 10;

/// Each query's rescored top [`LIMIT`] over every namespace, as source positions; each is also
/// answered within one namespace (the product's filtered path), which must fill its top too.
fn answer(searched: &dyn VectorIndex, vectors: &Vectors, queries: &[Vec<f32>]) -> Vec<Vec<usize>> {
    let request = SearchRequest {
        limit: LIMIT,
        min_score: -1.0,
        max_scanned_chunks: usize::MAX,
    };
    let target = namespace(0);
    let mut found = Vec::new();
    for query in queries {
        for filter in [SourceFilter::All, SourceFilter::Namespace(&target)] {
            let outcome = searched.search_in(query, request, filter).unwrap();
            let exact = outcome
                .hits
                .iter()
                .map(|hit| Some(vectors.source(position_of(hit))))
                .collect();
            let hits = rescore(query, outcome, &request, exact).unwrap().hits;
            assert_eq!(hits.len(), LIMIT);
            if filter == SourceFilter::All {
                found.push(hits.iter().map(position_of).collect::<Vec<_>>());
            }
        }
    }
    found
}

/// The share of the exact top lists found.
fn recall(found: &[Vec<usize>], truth: &[Vec<usize>]) -> f64 {
    let matched: usize = found
        .iter()
        .zip(truth)
        .map(|(found, truth)| {
            found
                .iter()
                .filter(|position| truth.contains(position))
                .count()
        })
        .sum();
    matched as f64 / truth.iter().map(Vec::len).sum::<usize>().max(1) as f64
}

/// Extra HNSW search widths to measure recall at (`SEMANTIC_BENCH_COMPACT_EF`, comma-separated;
/// none by default: the figure of record is at the product's default width).
fn search_widths() -> Vec<usize> {
    std::env::var("SEMANTIC_BENCH_COMPACT_EF")
        .unwrap_or_default()
        .split(',')
        .filter_map(|width| width.trim().parse().ok())
        .collect()
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
    println!("compact_rss_vectors {}", Vectors::open(size).label());
    let mut rss = Vec::new();
    for encoding in ["f32", "int8", GRAPH_MODE] {
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
        println!("compact_recall_at_10 {encoding} {}", fields[7]);
        let mib = fields[3].parse::<f64>().unwrap_or(f64::NAN);
        println!(
            "compact_rss_bytes_per_chunk {encoding} {:.0}",
            (mib - fields[5].parse::<f64>().unwrap_or(f64::NAN)) * 1024.0 * 1024.0 / size as f64
        );
        for width in stdout
            .lines()
            .filter_map(|line| line.strip_prefix("WIDTH "))
        {
            println!("compact_hnsw_recall_at_10 {encoding} ef {width}");
        }
        rss.push(mib);
    }
    println!("compact_rss_ratio int8/f32 {:.3}", rss[1] / rss[0]);
    println!("compact_rss_ratio int8+hnsw/f32 {:.3}", rss[2] / rss[0]);
}
