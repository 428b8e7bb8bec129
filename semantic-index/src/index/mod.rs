//! The vector indexes: [`ExactIndex`] and [`HnswIndex`] behind [`VectorIndex`].
//!
//! Both hold chunk rows in a chunk table: metadata plus normalized f32 vectors (shared between the
//! tables holding the same rows), with tombstones for replaced chunks. Scores are cosine similarities (dot products of unit
//! vectors). Results order by score, then source key, revision and chunk ordinal, so equal scores rank the
//! same way in both indexes and across runs.
//!
//! Either index may hold its rows as int8 codes instead ([`CompactVectors`], [`quantized`]): its
//! searches then return candidates by code score, marked [`SearchOutcome::rescore`], that
//! [`rescore`] turns into f32-scored hits with the stored vectors. f32 is the default.

mod exact;
pub(crate) mod graph;
mod hnsw;
mod pages;
pub(crate) mod persist;
pub mod quantized;
pub(crate) mod table;
mod walk;

use std::cmp::Ordering;
use std::sync::Arc;

use memory_core::vectors::SourceGeneration;
use memory_core::{MemoryKey, NamespaceAddress, Revision};

pub use exact::{EXACT_COMPACT_TOMBSTONE_FRACTION, ExactIndex};
pub use hnsw::{HnswIndex, HnswParams, WIDTH_BASE_ROWS, WIDTH_EXPONENT, WIDTH_MAX_FACTOR};
pub use quantized::{CompactVectors, DEFAULT_RESCORE_FACTOR, MAX_RESCORE_FACTOR, rescore};

use crate::error::SemanticError;

/// The SPEC's cap on `max_chunks * dimensions` (64 MiB of f32). No longer the default: see
/// [`IndexBounds`].
pub const MAX_INDEX_FLOATS: usize = 16_777_216;
/// The hard ceiling a float bound may reach: 2^29 floats, 2 GiB of f32 per copy of the vectors
/// (1,398,101 chunks at 384 dimensions).
pub const MAX_INDEX_FLOATS_CEILING: usize = 1 << 29;
/// Default capacity of an index, in chunks (issue 13: at least 1,000,000).
pub const DEFAULT_MAX_CHUNKS: usize = 1_000_000;
/// The SPEC's default bound on the aggregate bytes of source identities (namespace address plus
/// document id); bounds of more than [`SPEC_DEFAULT_CHUNKS`] chunks raise it (see [`IndexBounds`]).
pub const DEFAULT_MAX_SOURCE_IDENTITY_BYTES: usize = 16 * 1024 * 1024;
/// Sources allowed per chunk of capacity: withdrawn sources stay recorded (withdrawal is terminal)
/// and hold no chunk, so a full index must still admit them. Their memory is bounded by the
/// identity bound.
pub const SOURCES_PER_CHUNK: usize = 4;
/// Chunk capacities up to this keep the SPEC's 16 MiB identity bound.
pub const SPEC_DEFAULT_CHUNKS: usize = 262_144;
/// Largest accepted bound on the aggregate bytes of source identities.
pub const MAX_SOURCE_IDENTITY_BYTES: usize = 64 * 1024 * 1024;

/// Which index answers a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexKind {
    /// Scan every live chunk.
    Exact,
    /// Approximate nearest neighbours through the HNSW graph.
    Hnsw,
}

/// Bounds of one index, checked before anything is allocated.
///
/// **Capacity decision (issue 13, overriding SPEC §4's `max_chunks * dimensions <= 16,777,216`).**
/// That SPEC bound held 43,690 chunks at 384 dimensions, and a server past it silently stopped
/// indexing. The default capacity is now [`DEFAULT_MAX_CHUNKS`] (1,000,000) chunks, configurable
/// with [`IndexBounds::with_max_chunks`] (the product's `--max-chunks N`). Nothing is allocated up
/// front: vector buffers grow as chunks arrive, and every bound is still checked before any growth
/// (a refresh that would pass `max_chunks` is refused with `TooLarge { limit: "max_chunks" }` and
/// changes nothing). `max_floats` (`max_chunks * dimensions`) stays bounded by the hard ceiling
/// [`MAX_INDEX_FLOATS_CEILING`]. At full default capacity and 384 dimensions one copy of the vectors
/// is 1.5 GiB (370 MiB as [`CompactVectors::Int8`] codes; `benches/compact_rss.rs` measures the
/// process). The exact index and the HNSW graph's table share each row's vector (one copy between
/// them), and the graph itself holds none.
///
/// Sources default to [`SOURCES_PER_CHUNK`] per chunk of capacity. The aggregate source-identity bound keeps the SPEC's
/// 16 MiB up to [`SPEC_DEFAULT_CHUNKS`] chunks and is raised to its 64 MiB maximum above that:
/// a million one-chunk documents with typical identities (about 50 bytes each) need about 50 MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexBounds {
    /// Most sources, withdrawal tombstones included.
    pub max_sources: usize,
    /// Most live chunks (the capacity). Tombstones of replaced chunks do not count: they are
    /// reclaimed by compaction.
    pub max_chunks: usize,
    /// Most aggregate UTF-8 bytes of source identities (16 MiB by default, at most 64 MiB).
    pub max_source_identity_bytes: usize,
    /// Most floats of live vectors, bounding `max_chunks * dimensions`; at most
    /// [`MAX_INDEX_FLOATS_CEILING`].
    pub max_floats: usize,
}

impl IndexBounds {
    /// The default bounds for `dimensions`: [`DEFAULT_MAX_CHUNKS`] chunks (fewer only when
    /// `dimensions` is so large that they would pass [`MAX_INDEX_FLOATS_CEILING`]).
    pub fn for_dimensions(dimensions: usize) -> Self {
        let max_chunks = DEFAULT_MAX_CHUNKS.min(MAX_INDEX_FLOATS_CEILING / dimensions.max(1));
        Self::unchecked(dimensions, max_chunks.max(1))
    }

    fn unchecked(dimensions: usize, max_chunks: usize) -> Self {
        let max_source_identity_bytes = if max_chunks <= SPEC_DEFAULT_CHUNKS {
            DEFAULT_MAX_SOURCE_IDENTITY_BYTES
        } else {
            MAX_SOURCE_IDENTITY_BYTES
        };
        Self {
            max_sources: max_chunks.saturating_mul(SOURCES_PER_CHUNK),
            max_chunks,
            max_source_identity_bytes,
            max_floats: max_chunks.saturating_mul(dimensions.max(1)),
        }
    }

    /// Bounds holding `max_chunks` chunks of `dimensions`: what
    /// `--max-chunks N` asks for. Refused when `max_chunks` is zero or `max_chunks * dimensions`
    /// passes [`MAX_INDEX_FLOATS_CEILING`] (`TooLarge { limit: "max_chunks" }`).
    pub fn with_max_chunks(dimensions: usize, max_chunks: usize) -> Result<Self, SemanticError> {
        if dimensions == 0 {
            return Err(SemanticError::invalid("dimensions", "must be positive"));
        }
        if max_chunks == 0 {
            return Err(SemanticError::invalid("max_chunks", "must be positive"));
        }
        let ceiling = MAX_INDEX_FLOATS_CEILING / dimensions;
        if max_chunks > ceiling {
            return Err(SemanticError::TooLarge {
                limit: "max_chunks",
                max: ceiling as u64,
                actual: max_chunks as u64,
            });
        }
        let bounds = Self::unchecked(dimensions, max_chunks);
        bounds.validate(dimensions)?;
        Ok(bounds)
    }

    /// Bounds for as many chunks as fit `max_floats` floats of `dimensions`. Refused when
    /// `max_floats` is zero, passes [`MAX_INDEX_FLOATS_CEILING`], or holds no whole vector.
    pub fn with_max_floats(dimensions: usize, max_floats: usize) -> Result<Self, SemanticError> {
        let probe = Self {
            max_floats,
            ..Self::for_dimensions(dimensions)
        };
        probe.check_float_bound()?;
        let max_chunks = max_floats / dimensions.max(1);
        if max_chunks == 0 {
            return Err(SemanticError::invalid(
                "max_floats",
                "holds no whole vector",
            ));
        }
        let bounds = Self {
            max_floats,
            ..Self::unchecked(dimensions, max_chunks)
        };
        bounds.validate(dimensions)?;
        Ok(bounds)
    }

    /// Bounds that hold at least `chunks` chunks of `dimensions`: the default when that suffices,
    /// otherwise exactly `chunks` (refused past the ceiling).
    pub fn for_chunks(dimensions: usize, chunks: usize) -> Result<Self, SemanticError> {
        let default = Self::for_dimensions(dimensions);
        if chunks <= default.max_chunks {
            return Ok(default);
        }
        Self::with_max_chunks(dimensions, chunks)
    }

    fn check_float_bound(&self) -> Result<(), SemanticError> {
        if self.max_floats == 0 {
            return Err(SemanticError::invalid("max_floats", "must be positive"));
        }
        if self.max_floats > MAX_INDEX_FLOATS_CEILING {
            return Err(SemanticError::TooLarge {
                limit: "max_floats",
                max: MAX_INDEX_FLOATS_CEILING as u64,
                actual: self.max_floats as u64,
            });
        }
        Ok(())
    }

    /// Checks the bounds for vectors of `dimensions`: the float bound within its ceiling, and
    /// `max_chunks * dimensions` within the float bound.
    pub fn validate(&self, dimensions: usize) -> Result<(), SemanticError> {
        if dimensions == 0 {
            return Err(SemanticError::invalid("dimensions", "must be positive"));
        }
        if self.max_chunks == 0 || self.max_sources == 0 {
            return Err(SemanticError::invalid(
                "index bounds",
                "max_chunks and max_sources must be positive",
            ));
        }
        self.check_float_bound()?;
        let floats = self.max_chunks.checked_mul(dimensions);
        if floats.is_none_or(|floats| floats > self.max_floats) {
            return Err(SemanticError::TooLarge {
                limit: "max_chunks * dimensions",
                max: self.max_floats as u64,
                actual: (self.max_chunks as u64).saturating_mul(dimensions as u64),
            });
        }
        if self.max_source_identity_bytes == 0
            || self.max_source_identity_bytes > MAX_SOURCE_IDENTITY_BYTES
        {
            return Err(SemanticError::TooLarge {
                limit: "max_source_identity_bytes",
                max: MAX_SOURCE_IDENTITY_BYTES as u64,
                actual: self.max_source_identity_bytes as u64,
            });
        }
        Ok(())
    }
}

/// The source revision a chunk belongs to, shared by all of that revision's chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceVersion {
    /// The source document's key.
    pub key: MemoryKey,
    /// The embedded revision.
    pub revision: Revision,
    /// The generation of the refresh that embedded it.
    pub generation: SourceGeneration,
}

/// What an index knows about a chunk besides its vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkMeta {
    /// The source revision.
    pub source: Arc<SourceVersion>,
    /// Ordinal within the revision.
    pub ordinal: u32,
    /// UTF-8 byte offset of the chunk's start in the source text.
    pub start: usize,
    /// UTF-8 byte offset just past its end.
    pub end: usize,
    /// sha256 of the chunk's exact text.
    pub excerpt_digest: [u8; 32],
}

/// One source's chunks with their normalized vectors, as [`VectorIndex::replace_sources`] takes them.
pub type SourceChunks = (MemoryKey, Vec<(ChunkMeta, Vec<f32>)>);

/// One search request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchRequest {
    /// Most hits to return.
    pub limit: usize,
    /// Hits scoring below this are dropped.
    pub min_score: f32,
    /// The search fails, rather than ranking a prefix, when it would score more chunks than this.
    pub max_scanned_chunks: usize,
}

/// Which sources a search may return. The filter is applied while searching, before the candidate
/// limit, so a namespace whose chunks are few among many others' still gets its full candidate count
/// (filtering afterwards would spend the limit on chunks revalidation must drop).
///
/// Only the namespace is known to the index: a document's scopes and withdrawal are read at
/// revalidation, which still checks every candidate against the access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceFilter<'a> {
    /// Every source.
    #[default]
    All,
    /// Only sources in this namespace.
    Namespace(&'a NamespaceAddress),
}

impl SourceFilter<'_> {
    /// Whether chunks of `source` may be returned.
    pub fn admits(&self, source: &SourceVersion) -> bool {
        self.admits_namespace(&source.key.namespace)
    }

    /// Whether chunks of sources in `namespace` may be returned.
    pub(crate) fn admits_namespace(&self, namespace: &NamespaceAddress) -> bool {
        match self {
            Self::All => true,
            Self::Namespace(admitted) => namespace == *admitted,
        }
    }
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The chunk.
    pub chunk: ChunkMeta,
    /// Cosine similarity with the query, in [-1, 1].
    pub score: f32,
}

/// What a search returns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchOutcome {
    /// Hits in rank order.
    pub hits: Vec<SearchHit>,
    /// Chunks scored: every live chunk for the exact index, the candidate-list width for HNSW.
    pub scanned_chunks: usize,
    /// The hits are a compact index's candidates, ranked and scored by their int8 codes, more than
    /// the request's limit and not yet filtered by its `min_score`: [`rescore`] gives the result.
    pub rescore: bool,
}

/// A cosine index over chunk vectors.
pub trait VectorIndex: Send + Sync {
    /// Which kind it is.
    fn kind(&self) -> IndexKind;

    /// The vectors' length.
    fn dimensions(&self) -> usize;

    /// Chunks that searches can return.
    fn live_chunks(&self) -> usize;

    /// Replaces every chunk of `key` with `chunks` (normalized vectors of the index's dimensions). Every
    /// check runs before anything changes: on error the index is as it was.
    fn replace_source(
        &mut self,
        key: &MemoryKey,
        chunks: Vec<(ChunkMeta, Vec<f32>)>,
    ) -> Result<(), SemanticError>;

    /// Removes every chunk of `key`.
    fn remove_source(&mut self, key: &MemoryKey);

    /// Replaces many sources at once (a restart's reload, a bulk import). Indexes that build structures
    /// override it to build once; on error, sources before the failing one stay replaced.
    fn replace_sources(&mut self, sources: Vec<SourceChunks>) -> Result<(), SemanticError> {
        for (key, chunks) in sources {
            self.replace_source(&key, chunks)?;
        }
        Ok(())
    }

    /// The best chunks for a normalized `query`, from every source.
    fn search(
        &self,
        query: &[f32],
        request: SearchRequest,
    ) -> Result<SearchOutcome, SemanticError> {
        self.search_in(query, request, SourceFilter::All)
    }

    /// The best chunks for a normalized `query` among the sources `filter` admits; the filter applies
    /// before `request.limit` is counted.
    fn search_in(
        &self,
        query: &[f32],
        request: SearchRequest,
        filter: SourceFilter<'_>,
    ) -> Result<SearchOutcome, SemanticError>;
}

/// Scores the live rows of `table` that `filter` admits and keeps the best `request.limit` in rank
/// order: the exact scan, shared by the exact index and by HNSW for small filtered sets.
pub(crate) fn scan_table(
    table: &table::ChunkTable,
    query: &[f32],
    request: &SearchRequest,
    filter: SourceFilter<'_>,
) -> Result<Vec<SearchHit>, SemanticError> {
    let compact = table.encoding();
    // A compact table's code scores are approximate: its candidates are filtered by `min_score`
    // only once rescored, or a chunk just above it could be lost to rounding.
    let min_score = if compact.is_compact() {
        f32::NEG_INFINITY
    } else {
        request.min_score
    };
    let keep = compact.candidates(request.limit);
    let prepared = quantized::QueryRow::prepare(compact, query);
    let query = prepared.as_row();
    let mut scored: Vec<(usize, f32)> = Vec::new();
    match filter {
        SourceFilter::All => {
            for (row, vector) in table.row_refs().enumerate() {
                if table.is_live(row) {
                    let score = query.similarity(vector);
                    if score >= min_score {
                        scored.push((row, score));
                    }
                }
            }
        }
        // Only the namespace's own rows are visited: the scan's cost follows the namespace, not
        // the table (every row a namespace's sources span is live).
        SourceFilter::Namespace(namespace) => {
            for row in table.rows_in(namespace) {
                let score = query.similarity(table.row(row));
                if score >= min_score {
                    scored.push((row, score));
                }
            }
        }
    }
    let order = |left: &(usize, f32), right: &(usize, f32)| {
        rank_order((table.meta(left.0), left.1), (table.meta(right.0), right.1))
    };
    if scored.len() > keep {
        scored.select_nth_unstable_by(keep - 1, order);
        scored.truncate(keep);
    }
    scored.sort_unstable_by(order);
    scored
        .into_iter()
        .map(|(row, score)| table.hit(row, score))
        .collect()
}

/// Live rows of `table` that `filter` admits.
pub(crate) fn admitted_rows(table: &table::ChunkTable, filter: SourceFilter<'_>) -> usize {
    match filter {
        SourceFilter::All => table.live_count(),
        SourceFilter::Namespace(namespace) => table.live_in(namespace),
    }
}

/// What ties between equal scores are broken by: namespace, document id, revision, ordinal. A
/// hit's [`ChunkMeta`] and a table's row both give it, so both rank the same way.
pub(crate) trait Ranked {
    fn rank_key(&self) -> (&NamespaceAddress, &str, &str, u32);
}

impl Ranked for ChunkMeta {
    fn rank_key(&self) -> (&NamespaceAddress, &str, &str, u32) {
        (
            &self.source.key.namespace,
            self.source.key.id.as_str(),
            self.source.revision.as_str(),
            self.ordinal,
        )
    }
}

/// Rank order: higher score first, then source key, revision, ordinal.
pub(crate) fn rank_order<M: Ranked>(left: (&M, f32), right: (&M, f32)) -> Ordering {
    right
        .1
        .total_cmp(&left.1)
        .then_with(|| left.0.rank_key().cmp(&right.0.rank_key()))
}

/// The dot product of two equal-length slices, on the best instruction set present
/// ([`crate::kernels`]).
#[inline]
pub(crate) fn dot(left: &[f32], right: &[f32]) -> f32 {
    crate::kernels::dot(left, right)
}

pub(crate) fn check_query(query: &[f32], dimensions: usize) -> Result<(), SemanticError> {
    if query.len() != dimensions {
        return Err(SemanticError::invalid(
            "query vector",
            format!("has {} dimensions, expected {dimensions}", query.len()),
        ));
    }
    if query.iter().any(|value| !value.is_finite()) {
        return Err(SemanticError::invalid(
            "query vector",
            "has a non-finite component",
        ));
    }
    Ok(())
}

pub(crate) fn check_request(request: &SearchRequest) -> Result<(), SemanticError> {
    if request.limit == 0 {
        return Err(SemanticError::invalid("limit", "must be positive"));
    }
    if !request.min_score.is_finite() {
        return Err(SemanticError::invalid("min_score", "must be finite"));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod test_support {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use memory_core::{DocumentId, NamespaceAddress};

    pub(crate) fn key(id: &str) -> MemoryKey {
        MemoryKey {
            namespace: NamespaceAddress::parse(r#"[1,"notes",1,{"user":"u"}]"#).unwrap(),
            id: DocumentId::new(id).unwrap(),
        }
    }

    pub(crate) fn meta(id: &str, ordinal: u32) -> ChunkMeta {
        ChunkMeta {
            source: Arc::new(SourceVersion {
                key: key(id),
                revision: Revision::new("r1").unwrap(),
                generation: SourceGeneration::new(1),
            }),
            ordinal,
            start: 0,
            end: 1,
            excerpt_digest: [0; 32],
        }
    }

    /// [`meta`] as a table's row.
    pub(crate) fn row(id: &str, ordinal: u32) -> table::record::RowMeta {
        let chunk = meta(id, ordinal);
        let source =
            table::record::SourceRecord::new(&chunk.source, chunk.source.key.namespace.clone());
        table::record::RowMeta::new(&chunk, source)
    }

    pub(crate) fn unit(values: &[f32]) -> Vec<f32> {
        let norm = values.iter().map(|v| v * v).sum::<f32>().sqrt();
        values.iter().map(|v| v / norm).collect()
    }

    /// A repeatable stream of values in `[-0.5, 0.5)` (xorshift64): the graph tests' fixtures.
    pub(crate) fn noise() -> impl FnMut() -> f32 {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn refused_limit(result: Result<impl std::fmt::Debug, SemanticError>) -> &'static str {
        match result {
            Err(SemanticError::TooLarge { limit, .. }) => limit,
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[test]
    fn default_capacity_holds_a_million_chunks_without_allocating() {
        let bounds = IndexBounds::for_dimensions(384);
        assert_eq!(bounds.max_chunks, DEFAULT_MAX_CHUNKS);
        assert_eq!(bounds.max_floats, 384 * DEFAULT_MAX_CHUNKS);
        assert_eq!(bounds.max_source_identity_bytes, MAX_SOURCE_IDENTITY_BYTES);
        let index = ExactIndex::new(384, bounds).unwrap();
        assert_eq!(
            index.reserved_floats(),
            0,
            "memory is taken as chunks arrive"
        );
        assert_eq!(IndexBounds::for_chunks(384, 1_000).unwrap(), bounds);
        let over = IndexBounds {
            max_chunks: DEFAULT_MAX_CHUNKS + 1,
            ..bounds
        };
        assert_eq!(
            refused_limit(ExactIndex::new(384, over)),
            "max_chunks * dimensions"
        );
    }

    #[test]
    fn capacity_is_configurable_in_chunks() {
        let small = IndexBounds::with_max_chunks(384, 10).unwrap();
        assert_eq!((small.max_chunks, small.max_sources), (10, 40));
        assert_eq!(
            small.max_source_identity_bytes,
            DEFAULT_MAX_SOURCE_IDENTITY_BYTES
        );
        let large = IndexBounds::with_max_chunks(384, 1_200_000).unwrap();
        assert_eq!(large.max_floats, 384 * 1_200_000);
        assert!(HnswIndex::new(384, large, HnswParams::default()).is_ok());
        assert_eq!(
            refused_limit(IndexBounds::with_max_chunks(384, 2_000_000)),
            "max_chunks"
        );
        assert!(matches!(
            IndexBounds::with_max_chunks(384, 0),
            Err(SemanticError::InvalidInput { .. })
        ));
        let million = IndexBounds::for_chunks(384, 1_000_000).unwrap();
        assert!(ExactIndex::new(384, million).is_ok());
    }

    #[test]
    fn bounds_past_the_ceiling_are_refused_before_allocation() {
        assert_eq!(
            refused_limit(IndexBounds::with_max_floats(
                384,
                MAX_INDEX_FLOATS_CEILING + 1
            )),
            "max_floats"
        );
        assert_eq!(
            refused_limit(IndexBounds::for_chunks(384, 2_000_000)),
            "max_chunks"
        );
        assert_eq!(
            refused_limit(IndexBounds::for_chunks(384, usize::MAX)),
            "max_chunks"
        );
        let hand_made = IndexBounds {
            max_floats: MAX_INDEX_FLOATS_CEILING + 1,
            ..IndexBounds::for_dimensions(384)
        };
        assert_eq!(refused_limit(ExactIndex::new(384, hand_made)), "max_floats");
        assert!(matches!(
            IndexBounds::with_max_floats(384, 100),
            Err(SemanticError::InvalidInput { .. })
        ));
        assert!(IndexBounds::with_max_floats(384, 0).is_err());
    }
}
