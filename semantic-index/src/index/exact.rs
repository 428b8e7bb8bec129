//! The exact cosine index: one scan over the vectors a search may return. A search filtered to a
//! namespace (every search the product makes) visits that namespace's rows only, found through the
//! table's per-namespace source sets, so its cost follows the namespace's size, not the index's:
//! `benches/namespace_isolation.rs` measures a 100-chunk namespace among 1,000,000 chunks in 10,000
//! namespaces against the namespace alone.
//!
//! Its rows are shared ([`Arc`]) so an owner can compact them off the query path: replacing a source
//! only tombstones rows (compacting inline only when the buffer would pass its bound), and once
//! tombstones pass [`EXACT_COMPACT_TOMBSTONE_FRACTION`] ([`ExactIndex::needs_compaction`]) the owner
//! builds a compacted copy from a shared snapshot of the rows with no lock held and swaps it in. The
//! engine does this while it holds its apply lock, so the rows cannot change meanwhile and the shared
//! snapshot is never copied on write.
//!
//! With compact vectors ([`ExactIndex::with_compact`]) the scan scores int8 codes and returns the
//! best `rescore_factor * limit` rows for [`super::rescore`] (see [`super::quantized`]).

use std::sync::Arc;

use memory_core::MemoryKey;

use super::quantized::CompactVectors;
use super::table::{ChunkTable, LoadedVectors, RowVector};
use super::{
    ChunkMeta, IndexBounds, IndexKind, SearchOutcome, SearchRequest, SourceChunks, SourceFilter,
    VectorIndex, admitted_rows, check_query, check_request, scan_table,
};
use crate::error::SemanticError;

/// Tombstones are compacted away once they pass this share of the rows: scans touch every row, so dead
/// rows cost time, while compaction copies the live ones.
pub const EXACT_COMPACT_TOMBSTONE_FRACTION: f64 = 0.25;

/// Scores every live chunk; refuses to run when that is more than `max_scanned_chunks`.
#[derive(Debug)]
pub struct ExactIndex {
    table: Arc<ChunkTable>,
}

impl ExactIndex {
    /// An empty index for vectors of `dimensions` within `bounds` (checked here, before allocating).
    pub fn new(dimensions: usize, bounds: IndexBounds) -> Result<Self, SemanticError> {
        Self::with_compact(dimensions, bounds, CompactVectors::F32)
    }

    /// [`Self::new`] holding the vectors as `compact` says; `compact` is checked with the bounds.
    pub fn with_compact(
        dimensions: usize,
        bounds: IndexBounds,
        compact: CompactVectors,
    ) -> Result<Self, SemanticError> {
        bounds.validate(dimensions)?;
        compact.validate(dimensions)?;
        Ok(Self {
            table: Arc::new(ChunkTable::with_encoding(
                dimensions,
                bounds.max_chunks,
                bounds.max_chunks,
                compact,
            )),
        })
    }

    /// How the vectors are held in memory.
    pub fn compact(&self) -> CompactVectors {
        self.table.encoding()
    }

    /// Bytes the vectors take in memory (codes and scales for a compact index).
    pub fn reserved_vector_bytes(&self) -> usize {
        self.table.reserved_bytes()
    }

    /// The rows, copied on the next change if shared meanwhile (the engine changes them only while
    /// no compaction holds a snapshot).
    fn rows_mut(&mut self) -> &mut ChunkTable {
        Arc::make_mut(&mut self.table)
    }

    /// Whether tombstones passed [`EXACT_COMPACT_TOMBSTONE_FRACTION`] of the rows: the owner should
    /// compact from a shared snapshot of the rows and swap the copy in.
    pub fn needs_compaction(&self) -> bool {
        self.table.tombstones() as f64 / self.table.rows().max(1) as f64
            > EXACT_COMPACT_TOMBSTONE_FRACTION
    }

    /// The rows as they are, shared: a compaction copies the live ones from this without a lock.
    pub(crate) fn shared_rows(&self) -> Arc<ChunkTable> {
        Arc::clone(&self.table)
    }

    /// Answers with `compacted` (a compacted copy of [`Self::shared_rows`] taken while the rows
    /// could not change).
    pub(crate) fn install_compacted(&mut self, compacted: ChunkTable) {
        self.table = Arc::new(compacted);
    }

    /// Live chunks of `key`.
    pub fn chunks_of(&self, key: &MemoryKey) -> usize {
        self.table.chunks_of(key)
    }

    /// Fills this empty index with a restart's rows in one pass ([`ChunkTable::load_rows`]):
    /// `metas` in row order, each source's rows consecutive and sharing one source version, and
    /// the vectors the store decoded for them.
    pub(crate) fn load_rows(
        &mut self,
        metas: Vec<ChunkMeta>,
        vectors: LoadedVectors,
    ) -> Result<(), SemanticError> {
        self.rows_mut().load_rows(metas, vectors)
    }

    /// Replaces `key`'s chunks with rows whose vectors are shared (with the HNSW graph's table):
    /// [`VectorIndex::replace_source`] without copying the vectors.
    pub(crate) fn replace_shared(
        &mut self,
        key: &MemoryKey,
        rows: Vec<(ChunkMeta, RowVector)>,
    ) -> Result<(), SemanticError> {
        self.rows_mut()
            .replace_shared(key, rows, f64::INFINITY)
            .map(|_| ())
    }

    /// A copy of the rows (sharing their vectors), from which an HNSW graph can be built off the
    /// query path.
    pub(crate) fn snapshot(&self) -> ChunkTable {
        (*self.table).clone()
    }

    /// The rows themselves (a persisted graph's vector set is checked against them).
    pub(crate) fn table(&self) -> &ChunkTable {
        &self.table
    }

    /// Rows replaced or withdrawn but not compacted away yet.
    pub fn tombstones(&self) -> usize {
        self.table.tombstones()
    }

    /// Floats the vector buffer has allocated room for: it grows as chunks arrive, never up front.
    pub fn reserved_floats(&self) -> usize {
        self.table.reserved_floats()
    }
}

impl VectorIndex for ExactIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::Exact
    }

    fn dimensions(&self) -> usize {
        self.table.dimensions()
    }

    fn live_chunks(&self) -> usize {
        self.table.live_count()
    }

    fn replace_source(
        &mut self,
        key: &MemoryKey,
        chunks: Vec<(ChunkMeta, Vec<f32>)>,
    ) -> Result<(), SemanticError> {
        // Compaction is the owner's, off the query path; inline only when the buffer is full.
        self.rows_mut()
            .replace_source(key, chunks, f64::INFINITY)
            .map(|_| ())
    }

    fn remove_source(&mut self, key: &MemoryKey) {
        self.rows_mut().remove_source(key);
    }

    fn search_in(
        &self,
        query: &[f32],
        request: SearchRequest,
        filter: SourceFilter<'_>,
    ) -> Result<SearchOutcome, SemanticError> {
        check_request(&request)?;
        check_query(query, self.table.dimensions())?;
        // Only admitted rows are scored, so only they count against the scan budget.
        let scanned = admitted_rows(&self.table, filter);
        if scanned > request.max_scanned_chunks {
            return Err(SemanticError::Budget {
                limit: "max_scanned_chunks",
                max: request.max_scanned_chunks as u64,
                actual: scanned as u64,
            });
        }
        Ok(SearchOutcome {
            hits: scan_table(&self.table, query, &request, filter)?,
            scanned_chunks: scanned,
            rescore: self.table.encoding().is_compact(),
        })
    }

    fn replace_sources(&mut self, sources: Vec<SourceChunks>) -> Result<(), SemanticError> {
        // One reservation for the whole load instead of geometric regrowth (each regrowth copies
        // every vector so far).
        let total: usize = sources.iter().map(|(_, chunks)| chunks.len()).sum();
        let table = self.rows_mut();
        table.reserve_rows(total);
        for (key, chunks) in sources {
            table.replace_source(&key, chunks, EXACT_COMPACT_TOMBSTONE_FRACTION)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::index::test_support::{key, meta, unit};

    fn request(limit: usize) -> SearchRequest {
        SearchRequest {
            limit,
            min_score: -1.0,
            max_scanned_chunks: 100,
        }
    }

    #[test]
    fn ties_order_by_source_then_ordinal_and_scan_limit_fails() {
        let mut index = ExactIndex::new(2, IndexBounds::for_dimensions(2)).unwrap();
        for id in ["c", "a", "b"] {
            index
                .replace_source(
                    &key(id),
                    vec![
                        (meta(id, 1), unit(&[1.0, 0.0])),
                        (meta(id, 0), unit(&[1.0, 0.0])),
                    ],
                )
                .unwrap();
        }
        index
            .replace_source(&key("z"), vec![(meta("z", 0), unit(&[0.0, 1.0]))])
            .unwrap();
        let outcome = index.search(&unit(&[1.0, 0.1]), request(3)).unwrap();
        let order: Vec<(String, u32)> = outcome
            .hits
            .iter()
            .map(|hit| (hit.chunk.source.key.id.to_string(), hit.chunk.ordinal))
            .collect();
        assert_eq!(
            order,
            vec![("a".into(), 0), ("a".into(), 1), ("b".into(), 0)]
        );
        assert_eq!(outcome.scanned_chunks, 7);
        let tight = SearchRequest {
            max_scanned_chunks: 6,
            ..request(3)
        };
        assert!(matches!(
            index.search(&unit(&[1.0, 0.0]), tight),
            Err(SemanticError::Budget {
                limit: "max_scanned_chunks",
                ..
            })
        ));
        let min = SearchRequest {
            min_score: 0.5,
            ..request(10)
        };
        let hits = index.search(&unit(&[0.0, 1.0]), min).unwrap().hits;
        assert_eq!(hits.len(), 1);
        index.remove_source(&key("z"));
        assert!(
            index
                .search(&unit(&[0.0, 1.0]), min)
                .unwrap()
                .hits
                .is_empty()
        );
    }

    #[test]
    fn bounds_over_the_float_cap_are_refused_before_allocation() {
        let bounds = IndexBounds {
            max_chunks: crate::index::DEFAULT_MAX_CHUNKS + 1,
            ..IndexBounds::for_dimensions(384)
        };
        assert!(matches!(
            ExactIndex::new(384, bounds),
            Err(SemanticError::TooLarge {
                limit: "max_chunks * dimensions",
                ..
            })
        ));
        assert!(ExactIndex::new(384, IndexBounds::for_dimensions(384)).is_ok());
    }
}
