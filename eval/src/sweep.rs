//! Search latency against corpus size for the exact and HNSW indexes, and the vector files the
//! comparison script reads.
//!
//! Sizes beyond the real corpus use vectors derived from the real-model vectors: each derived vector is a
//! real one plus Gaussian noise of norm about [`DERIVED_NOISE`], renormalized. Reports label such sizes.
//! One index holds at most 16,777,216 floats (43,690 chunks of 384 dimensions, the SPEC's cap), so a
//! larger size is served by several shards searched in turn and merged by score, as a deployment past
//! the cap would do.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use memory_core::vectors::SourceGeneration;
use memory_core::{DocumentId, MemoryKey, NamespaceAddress, Revision};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use semantic_index::index::{ChunkMeta, SourceVersion};
use semantic_index::{ExactIndex, HnswIndex, HnswParams, IndexBounds, SearchRequest, VectorIndex};
use serde::Serialize;

use crate::metrics::{LatencyFigures, percentiles};
use crate::progress::Progress;

/// Norm of the noise added to a real vector to derive another.
pub const DERIVED_NOISE: f32 = 0.5;
/// Chunks grouped under one synthetic source.
const CHUNKS_PER_SOURCE: usize = 16;
/// Hits asked per search.
pub const SEARCH_LIMIT: usize = 10;

/// Unit vectors of one length, stored contiguously.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorSet {
    /// Vector length.
    pub dimensions: usize,
    /// `len * dimensions` floats.
    pub data: Vec<f32>,
}

impl VectorSet {
    /// An empty set.
    pub fn new(dimensions: usize) -> Self {
        Self {
            dimensions,
            data: Vec::new(),
        }
    }

    /// From separate vectors (all of `dimensions`).
    pub fn from_rows(dimensions: usize, rows: &[Vec<f32>]) -> Self {
        let mut set = Self::new(dimensions);
        for row in rows {
            set.data.extend_from_slice(row);
        }
        set
    }

    /// How many vectors.
    pub fn len(&self) -> usize {
        self.data.len() / self.dimensions.max(1)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The `index`th vector.
    pub fn row(&self, index: usize) -> &[f32] {
        &self.data[index * self.dimensions..(index + 1) * self.dimensions]
    }
}

fn normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|value| *value /= norm);
    }
}

/// `count` vectors: the real ones first, then real ones plus noise, deterministically from `seed`.
pub fn derive(base: &VectorSet, count: usize, seed: u64) -> VectorSet {
    let dimensions = base.dimensions;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut set = VectorSet::new(dimensions);
    set.data.reserve(count * dimensions);
    let scale = DERIVED_NOISE / (dimensions as f32).sqrt();
    for index in 0..count {
        let real = base.row(index % base.len());
        if index < base.len() {
            set.data.extend_from_slice(real);
            continue;
        }
        let mut vector: Vec<f32> = real
            .iter()
            .map(|value| {
                // Box-Muller: one standard normal sample from two uniform ones.
                let u1: f32 = rng.random_range(f32::EPSILON..1.0);
                let u2: f32 = rng.random::<f32>();
                value + scale * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
            })
            .collect();
        normalize(&mut vector);
        set.data.extend_from_slice(&vector);
    }
    set
}

/// An index split into shards of at most the SPEC's cap.
pub struct Sharded<I> {
    shards: Vec<I>,
}

impl<I: VectorIndex> Sharded<I> {
    /// Builds shards with `make` and fills them with `vectors`, ticking `tick` per source.
    pub fn build(
        vectors: &VectorSet,
        make: impl Fn(IndexBounds) -> anyhow::Result<I>,
        tick: impl Fn(u64),
    ) -> anyhow::Result<Self> {
        let bounds = IndexBounds::for_dimensions(vectors.dimensions);
        let per_shard = bounds.max_chunks / CHUNKS_PER_SOURCE * CHUNKS_PER_SOURCE;
        let namespace = NamespaceAddress::encode("eval.sweep", 1, &serde_json::json!({}))?;
        let revision = Revision::new("r1")?;
        let mut shards = Vec::new();
        let mut start = 0;
        while start < vectors.len() {
            let end = (start + per_shard).min(vectors.len());
            let mut shard = make(bounds)?;
            let mut source_start = start;
            while source_start < end {
                let source_end = (source_start + CHUNKS_PER_SOURCE).min(end);
                let key = MemoryKey {
                    namespace: namespace.clone(),
                    id: DocumentId::new(format!("s{source_start:08}"))?,
                };
                let version = Arc::new(SourceVersion {
                    key: key.clone(),
                    revision: revision.clone(),
                    generation: SourceGeneration(1),
                });
                let chunks = (source_start..source_end)
                    .map(|row| {
                        (
                            ChunkMeta {
                                source: version.clone(),
                                ordinal: u32::try_from(row - source_start).unwrap_or(u32::MAX),
                                start: 0,
                                end: 0,
                                excerpt_digest: [0; 32],
                            },
                            vectors.row(row).to_vec(),
                        )
                    })
                    .collect();
                shard.replace_source(&key, chunks)?;
                tick((source_end - source_start) as u64);
                source_start = source_end;
            }
            shards.push(shard);
            start = end;
        }
        Ok(Self { shards })
    }

    /// Shards used.
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The best `limit` chunks over every shard, as global row numbers, best first.
    pub fn search(&self, query: &[f32], limit: usize) -> anyhow::Result<Vec<(usize, f32)>> {
        let request = SearchRequest {
            limit,
            min_score: -1.0,
            max_scanned_chunks: usize::MAX,
        };
        let mut merged = Vec::with_capacity(limit * self.shards.len());
        for shard in &self.shards {
            for hit in shard.search(query, request)?.hits {
                // Source ids carry the global row of their first chunk.
                let source_start: usize = hit.chunk.source.key.id.as_str()[1..].parse()?;
                merged.push((source_start + hit.chunk.ordinal as usize, hit.score));
            }
        }
        merged.sort_by(|left, right| right.1.total_cmp(&left.1).then(left.0.cmp(&right.0)));
        merged.truncate(limit);
        Ok(merged)
    }
}

/// Figures of one corpus size.
#[derive(Debug, Clone, Serialize)]
pub struct SizePoint {
    /// Chunks indexed.
    pub chunks: usize,
    /// Whether vectors derived from real ones were needed.
    pub derived: bool,
    /// Index shards per kind.
    pub shards: usize,
    /// Seconds to build the exact index.
    pub exact_build_seconds: f64,
    /// Seconds to build the HNSW index.
    pub hnsw_build_seconds: f64,
    /// Exact search latency (query embedding excluded).
    pub exact: LatencyFigures,
    /// HNSW search latency (query embedding excluded).
    pub hnsw: LatencyFigures,
    /// Share of the exact top 10 the HNSW top 10 found.
    pub hnsw_recall_at_10: f64,
}

/// Times `queries` against `index`; answers latency, the result rows and the queries per second.
fn time_queries<I: VectorIndex>(
    index: &Sharded<I>,
    queries: &VectorSet,
    limit: usize,
) -> anyhow::Result<(LatencyFigures, Vec<Vec<usize>>, f64)> {
    let mut samples = Vec::with_capacity(queries.len());
    let mut results = Vec::with_capacity(queries.len());
    for warm in 0..queries.len().min(5) {
        index.search(queries.row(warm), limit)?;
    }
    for query in 0..queries.len() {
        let started = Instant::now();
        let hits = index.search(queries.row(query), limit)?;
        samples.push(started.elapsed().as_secs_f64() * 1_000.0);
        results.push(
            hits.into_iter()
                .take(SEARCH_LIMIT)
                .map(|(row, _)| row)
                .collect(),
        );
    }
    let total_ms: f64 = samples.iter().sum();
    let qps = if total_ms > 0.0 {
        samples.len() as f64 * 1_000.0 / total_ms
    } else {
        0.0
    };
    Ok((percentiles(&samples), results, qps))
}

/// Share of `truth`'s rows found in `found`, over all queries.
pub fn recall_at(truth: &[Vec<usize>], found: &[Vec<usize>]) -> f64 {
    let (mut hit, mut total) = (0usize, 0usize);
    for (truth, found) in truth.iter().zip(found) {
        total += truth.len();
        hit += truth.iter().filter(|row| found.contains(row)).count();
    }
    if total == 0 {
        1.0
    } else {
        hit as f64 / total as f64
    }
}

/// Builds an exact and an HNSW index over `vectors`.
pub fn build_exact(
    vectors: &VectorSet,
    progress: &Progress,
) -> anyhow::Result<(Sharded<ExactIndex>, f64)> {
    let bar = progress.bar("exact build", vectors.len() as u64);
    let started = Instant::now();
    let index = Sharded::build(
        vectors,
        |bounds| Ok(ExactIndex::new(vectors.dimensions, bounds)?),
        |n| bar.inc(n),
    )?;
    bar.finish_and_clear();
    Ok((index, started.elapsed().as_secs_f64()))
}

/// Builds an HNSW index over `vectors` with `params`.
pub fn build_hnsw(
    vectors: &VectorSet,
    params: HnswParams,
    progress: &Progress,
) -> anyhow::Result<(Sharded<HnswIndex>, f64)> {
    let bar = progress.bar("hnsw build", vectors.len() as u64);
    let started = Instant::now();
    let index = Sharded::build(
        vectors,
        |bounds| Ok(HnswIndex::new(vectors.dimensions, bounds, params)?),
        |n| bar.inc(n),
    )?;
    bar.finish_and_clear();
    Ok((index, started.elapsed().as_secs_f64()))
}

/// Measures every size.
pub fn sweep(
    base: &VectorSet,
    queries: &VectorSet,
    sizes: &[usize],
    seed: u64,
    progress: &Progress,
) -> anyhow::Result<Vec<SizePoint>> {
    let mut points = Vec::new();
    for &size in sizes {
        let vectors = derive(base, size, seed);
        let (exact, exact_build_seconds) = build_exact(&vectors, progress)?;
        let (exact_latency, truth, _) = time_queries(&exact, queries, SEARCH_LIMIT)?;
        let shards = exact.shards();
        drop(exact);
        let (hnsw, hnsw_build_seconds) = build_hnsw(&vectors, HnswParams::default(), progress)?;
        let (hnsw_latency, found, _) = time_queries(&hnsw, queries, SEARCH_LIMIT)?;
        drop(hnsw);
        points.push(SizePoint {
            chunks: size,
            derived: size > base.len(),
            shards,
            exact_build_seconds,
            hnsw_build_seconds,
            exact: exact_latency,
            hnsw: hnsw_latency,
            hnsw_recall_at_10: recall_at(&truth, &found),
        });
    }
    Ok(points)
}

const MAGIC: &[u8; 8] = b"MEMVEC01";

/// Writes base vectors and queries: `MEMVEC01`, then little-endian u64 base count, query count and
/// dimensions, then the base floats and the query floats (little-endian f32).
pub fn write_vectors(path: &Path, base: &VectorSet, queries: &VectorSet) -> anyhow::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    file.write_all(MAGIC)?;
    for value in [base.len(), queries.len(), base.dimensions] {
        file.write_all(&(value as u64).to_le_bytes())?;
    }
    for value in base.data.iter().chain(&queries.data) {
        file.write_all(&value.to_le_bytes())?;
    }
    file.flush()?;
    Ok(())
}

/// Most floats a vector file may declare (4 GiB of f32), checked before allocating.
const MAX_FILE_FLOATS: u64 = 1 << 30;

/// Reads what [`write_vectors`] wrote.
pub fn read_vectors(path: &Path) -> anyhow::Result<(VectorSet, VectorSet)> {
    let mut file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut magic = [0u8; 8];
    file.read_exact(&mut magic)?;
    anyhow::ensure!(&magic == MAGIC, "not a vector file (bad magic)");
    let mut numbers = [0u64; 3];
    for number in &mut numbers {
        let mut bytes = [0u8; 8];
        file.read_exact(&mut bytes)?;
        *number = u64::from_le_bytes(bytes);
    }
    let [base_count, query_count, dimensions] = numbers;
    anyhow::ensure!(
        dimensions > 0 && dimensions <= 16_384,
        "bad dimensions {dimensions}"
    );
    let floats = base_count
        .checked_add(query_count)
        .and_then(|count| count.checked_mul(dimensions))
        .filter(|floats| *floats <= MAX_FILE_FLOATS)
        .ok_or_else(|| anyhow::anyhow!("vector file declares too many floats"))?;
    let mut bytes = vec![0u8; usize::try_from(floats)? * 4];
    file.read_exact(&mut bytes)?;
    let values: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect();
    let dimensions = usize::try_from(dimensions)?;
    let split = usize::try_from(base_count)? * dimensions;
    Ok((
        VectorSet {
            dimensions,
            data: values[..split].to_vec(),
        },
        VectorSet {
            dimensions,
            data: values[split..].to_vec(),
        },
    ))
}

/// One HNSW operating point of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct HnswPoint {
    /// Search width (`ef`).
    pub ef: usize,
    /// Queries per second, one thread.
    pub qps: f64,
    /// Recall@10 against the exact index.
    pub recall_at_10: f64,
}

/// Our HNSW on a vector file: build seconds, exact QPS and the (ef, QPS, recall) curve. The search width
/// is set through the request limit (the index searches `max(ef_search, limit)` wide), so one graph
/// serves every point.
pub fn bench_hnsw(
    base: &VectorSet,
    queries: &VectorSet,
    efs: &[usize],
    progress: &Progress,
) -> anyhow::Result<serde_json::Value> {
    let (exact, _) = build_exact(base, progress)?;
    let (_, truth, exact_qps) = time_queries(&exact, queries, SEARCH_LIMIT)?;
    drop(exact);
    let params = HnswParams {
        ef_search: SEARCH_LIMIT,
        ..HnswParams::default()
    };
    let (hnsw, build_seconds) = build_hnsw(base, params, progress)?;
    let mut points = Vec::new();
    for &ef in efs {
        let (_, found, qps) = time_queries(&hnsw, queries, ef.max(SEARCH_LIMIT))?;
        points.push(HnswPoint {
            ef,
            qps,
            recall_at_10: recall_at(&truth, &found),
        });
    }
    Ok(serde_json::json!({
        "vectors": base.len(),
        "queries": queries.len(),
        "dimensions": base.dimensions,
        "params": { "M": params.max_connections, "ef_construction": params.ef_construction },
        "build_seconds": build_seconds,
        "exact_qps": exact_qps,
        "points": points,
    }))
}
