//! The vector indexes: [`ExactIndex`] and [`HnswIndex`] behind [`VectorIndex`].
//!
//! Both hold chunk rows in a chunk table: metadata plus one contiguous buffer of normalized f32
//! vectors, with tombstones for replaced chunks. Scores are cosine similarities (dot products of unit
//! vectors). Results order by score, then source key, revision and chunk ordinal, so equal scores rank the
//! same way in both indexes and across runs.

mod exact;
mod hnsw;
pub(crate) mod table;

use std::cmp::Ordering;
use std::sync::Arc;

use memory_core::vectors::SourceGeneration;
use memory_core::{MemoryKey, Revision};

pub use exact::{EXACT_COMPACT_TOMBSTONE_FRACTION, ExactIndex};
pub use hnsw::{HnswIndex, HnswParams, UnitCosineDistance};

use crate::error::SemanticError;

/// The SPEC's cap on `max_chunks * dimensions` (64 MiB of f32), checked before any allocation.
pub const MAX_INDEX_FLOATS: usize = 16_777_216;
/// Default bound on the aggregate bytes of source identities (namespace address plus document id).
pub const DEFAULT_MAX_SOURCE_IDENTITY_BYTES: usize = 16 * 1024 * 1024;
/// Largest accepted bound on the aggregate bytes of source identities.
pub const MAX_SOURCE_IDENTITY_BYTES: usize = 64 * 1024 * 1024;

/// Which index answers a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexKind {
    /// Scan every live chunk.
    Exact,
    /// Approximate nearest neighbours through the HNSW graph.
    Hnsw,
}

/// Bounds of one index, checked before anything is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexBounds {
    /// Most sources, withdrawal tombstones included.
    pub max_sources: usize,
    /// Most chunk rows (live rows and not yet compacted tombstones).
    pub max_chunks: usize,
    /// Most aggregate UTF-8 bytes of source identities (default 16 MiB, at most 64 MiB).
    pub max_source_identity_bytes: usize,
}

impl IndexBounds {
    /// The largest bounds the SPEC allows for `dimensions`: as many chunks as fit 16,777,216 floats, as
    /// many sources as chunks, and 16 MiB of source identities.
    pub fn for_dimensions(dimensions: usize) -> Self {
        let max_chunks = MAX_INDEX_FLOATS / dimensions.max(1);
        Self {
            max_sources: max_chunks,
            max_chunks,
            max_source_identity_bytes: DEFAULT_MAX_SOURCE_IDENTITY_BYTES,
        }
    }

    /// Checks the bounds against the SPEC's caps for vectors of `dimensions`.
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
        let floats = self.max_chunks.checked_mul(dimensions);
        if floats.is_none_or(|floats| floats > MAX_INDEX_FLOATS) {
            return Err(SemanticError::TooLarge {
                limit: "max_chunks * dimensions",
                max: MAX_INDEX_FLOATS as u64,
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

    /// The best chunks for a normalized `query`.
    fn search(&self, query: &[f32], request: SearchRequest)
    -> Result<SearchOutcome, SemanticError>;
}

/// Rank order: higher score first, then source key, revision, ordinal.
pub(crate) fn rank_order(left: (&ChunkMeta, f32), right: (&ChunkMeta, f32)) -> Ordering {
    right
        .1
        .total_cmp(&left.1)
        .then_with(|| left.0.source.key.cmp(&right.0.source.key))
        .then_with(|| left.0.source.revision.cmp(&right.0.source.revision))
        .then_with(|| left.0.ordinal.cmp(&right.0.ordinal))
}

/// The dot product of two equal-length slices, with eight accumulators so the compiler vectorizes it.
pub(crate) fn dot(left: &[f32], right: &[f32]) -> f32 {
    let mut sums = [0.0f32; 8];
    let left_chunks = left.chunks_exact(8);
    let right_chunks = right.chunks_exact(8);
    let left_rest = left_chunks.remainder();
    let right_rest = right_chunks.remainder();
    for (l, r) in left_chunks.zip(right_chunks) {
        for lane in 0..8 {
            sums[lane] += l[lane] * r[lane];
        }
    }
    let mut total: f32 = sums.iter().sum();
    for (l, r) in left_rest.iter().zip(right_rest) {
        total += l * r;
    }
    total
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
                generation: SourceGeneration(1),
            }),
            ordinal,
            start: 0,
            end: 1,
            excerpt_digest: [0; 32],
        }
    }

    pub(crate) fn unit(values: &[f32]) -> Vec<f32> {
        let norm = values.iter().map(|v| v * v).sum::<f32>().sqrt();
        values.iter().map(|v| v / norm).collect()
    }
}
