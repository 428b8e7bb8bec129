//! Chunk rows shared by both indexes: metadata, normalized vectors in shared segments, and
//! tombstones.
//!
//! Rows are appended; replacing or removing a source tombstones its rows. At most `max_live` rows are
//! live (the index's capacity), and the table never holds more than `max_rows >= max_live` rows:
//! before an append would pass it, the table compacts (dropping tombstones, renumbering rows), so
//! memory stays within `max_rows * dimensions` floats, a bound checked before construction. The
//! exact index uses `max_rows == max_live`; an HNSW table whose rebuilds are deferred to a background
//! build gets headroom for the tombstones that accumulate meanwhile.
//!
//! The vectors live in segments of [`SEGMENT_ROWS`] rows behind reference counts: few allocations
//! (a restart's load decodes the stored vectors straight into them, [`LoadedVectors`], and freeing
//! them is cheap), and a copy of a table (the HNSW graph's table taken from the exact index's at load,
//! a build's snapshot, a compaction's unchanged prefix) shares them instead of copying them; a change
//! to a shared segment copies that segment only. The rows' metadata is segmented and shared the
//! same way (`metas.rs`); a row holds its source as a compact record shared by the source's rows
//! and by every copy of the table (`record.rs`), and the span maps find a source through its first
//! row's record, so no key is copied. A source's rows are always contiguous (they are appended together and compaction
//! keeps the order), so a source is recorded as a span (`sources.rs`, which also interns each
//! namespace's address).
//!
//! A table holds its rows in one encoding: f32, or int8 codes ([`super::quantized`], the compact
//! vectors), chosen at construction; rows are coded as they are appended or loaded, so a compact
//! table never holds a row in f32.

use std::sync::Arc;

use memory_core::StoreFault;
use memory_core::vectors::VectorSink;
use memory_core::{MemoryError, MemoryKey, NamespaceAddress};
use metas::MetaColumn;
use record::RowMeta;
use sources::{RowSpan, SourceRows};

use super::quantized::{CompactVectors, RowRef, Segment};
use super::{ChunkMeta, Ranked, SearchHit, dot};
use crate::error::SemanticError;

mod metas;
pub(crate) mod record;
mod sources;

/// Rows per vector segment: 6 MiB of f32 at 384 dimensions, exactly three 2 MiB huge pages
/// (`pages.rs`; at 1,024 rows a segment was 1.5 MiB, too small for one), and still small to copy
/// when a shared segment is appended to. An int8 segment (1.5 MiB of codes) stays a `Vec`.
pub(crate) const SEGMENT_ROWS: usize = 4096;

/// A namespace of at least [`DENSE_NAMESPACE_ROWS`] live rows holding at least one row in this
/// many of the table's is visited by a pass over all rows ([`ChunkTable::rows_in`]). Walking it
/// source by source costs a hash lookup of the source's key and a jump to its span per source,
/// about 400 ns each in a large table, against a few nanoseconds a row for the pass. With 100,000
/// one-chunk sources in one namespace, the `recall_path` bench's exact `embed + search +
/// revalidate` row was 42 ms above its `embed + search` row walking by source (the revalidation
/// itself is about 1 ms, as the HNSW rows show), and 4 ms above it with the pass. Below one row in
/// eight, the walk visits few enough sources that the pass would cost more.
const DENSE_NAMESPACE_SHARE: usize = 8;

/// A namespace with fewer live rows is always walked source by source, whatever else the table
/// holds: a small tenant's search then takes the same path, at the same cost, in a crowded table
/// as in a table of its own (the multi-tenant point's `namespace_isolation_ratio` compares exactly
/// that), and a walk of a few thousand sources costs well under a millisecond. With the share
/// alone deciding, a 100-row namespace alone took the pass and its crowded twin the walk, and the
/// ratio at 100,000 chunks went from 1.13 to 2.04 (exact) and 1.08 to 2.00 (HNSW, whose small
/// namespaces are scanned).
const DENSE_NAMESPACE_ROWS: usize = 4_096;

/// The exponent bits of an `f32`: all set is infinity or NaN.
const EXPONENT: u32 = 0x7f80_0000;

/// A vector handed to both indexes (and to a running build's log) without copying it.
pub(crate) type RowVector = Arc<Vec<f32>>;

/// A vector as [`ChunkTable::replace_source`] and [`ChunkTable::replace_shared`] take it.
trait RowData {
    fn floats(&self) -> &[f32];
}

impl RowData for Vec<f32> {
    fn floats(&self) -> &[f32] {
        self
    }
}

impl RowData for RowVector {
    fn floats(&self) -> &[f32] {
        self
    }
}

/// Rows of the segment starting at row `first` in a table of at most `max_rows` rows.
pub(crate) fn segment_rows(first: usize, max_rows: usize) -> usize {
    SEGMENT_ROWS.min(max_rows.saturating_sub(first).max(1))
}

/// The segment that row `row` (the next) is appended to, writable: a new one (`create`) at a
/// segment boundary, else the last, first copied (`copy`) when it is shared with another table, so
/// the other table's rows never change. Serves the vector segments and the metadata column alike.
pub(crate) fn appendable<T>(
    segments: &mut Vec<Arc<T>>,
    row: usize,
    create: impl FnOnce() -> T,
    copy: impl FnOnce(&T) -> T,
) -> Option<&mut T> {
    if row.is_multiple_of(SEGMENT_ROWS) {
        segments.push(Arc::new(create()));
    }
    let last = segments.last_mut()?;
    if Arc::get_mut(last).is_none() {
        *last = Arc::new(copy(last));
    }
    Arc::get_mut(last)
}

/// The vectors of a load, decoded by the store straight into segments
/// ([`memory_core::vectors::VectorStore::load_sources_into`]), for [`ChunkTable::load_rows`].
#[derive(Debug)]
pub(crate) struct LoadedVectors {
    dimensions: usize,
    max_rows: usize,
    rows: usize,
    compact: CompactVectors,
    segments: Vec<Segment>,
    /// A compact load codes each vector as it arrives, so a non-finite one is only remembered
    /// here and refused by [`ChunkTable::load_rows`].
    non_finite: bool,
}

impl LoadedVectors {
    /// Room for at most `max_rows` f32 vectors of `dimensions`, taken as they arrive.
    #[cfg(test)]
    pub(crate) fn new(dimensions: usize, max_rows: usize) -> Self {
        Self::with_encoding(dimensions, max_rows, CompactVectors::F32)
    }

    /// [`Self::new`] in `compact`'s encoding: compact vectors are coded as they arrive, so a
    /// restart never holds the f32 vectors of more than one chunk.
    pub(crate) fn with_encoding(
        dimensions: usize,
        max_rows: usize,
        compact: CompactVectors,
    ) -> Self {
        Self {
            dimensions,
            max_rows,
            rows: 0,
            compact,
            segments: Vec::new(),
            non_finite: false,
        }
    }

    /// Codes one f32 vector into a compact segment, normalized first unless already unit length.
    fn push_coded(&mut self, vector: &[f32]) -> Result<(), MemoryError> {
        let mut unit = vector.to_vec();
        // Written so a non-finite norm also takes the normalization, which refuses it.
        let is_unit = (dot(&unit, &unit) - 1.0).abs() <= 1e-5;
        if !is_unit && crate::embed::normalize(&mut unit, self.dimensions).is_err() {
            self.non_finite = true;
        }
        self.next_segment(vector.len())?
            .push(RowRef::F32(&unit), SEGMENT_ROWS);
        Ok(())
    }
}

impl LoadedVectors {
    /// The segment the next vector goes to, after checking its length and the bound.
    fn next_segment(&mut self, floats: usize) -> Result<&mut Segment, MemoryError> {
        if floats != self.dimensions {
            return Err(MemoryError::Store(StoreFault::Corrupt {
                what: format!(
                    "stored vector has {floats} dimensions, expected {}",
                    self.dimensions
                ),
            }));
        }
        if self.rows >= self.max_rows {
            return Err(MemoryError::TooLarge {
                limit: "stored chunks",
                max: self.max_rows as u64,
                actual: self.rows as u64 + 1,
            });
        }
        if self.rows.is_multiple_of(SEGMENT_ROWS) {
            self.segments.push(Segment::with_rows(
                self.compact,
                segment_rows(self.rows, self.max_rows),
                self.dimensions,
            ));
        }
        self.rows += 1;
        self.segments.last_mut().ok_or_else(|| {
            MemoryError::Store(StoreFault::Corrupt {
                what: "no vector segment".to_owned(),
            })
        })
    }
}

impl VectorSink for LoadedVectors {
    fn push_vector(&mut self, vector: &[f32]) -> Result<(), MemoryError> {
        if self.compact.is_compact() {
            return self.push_coded(vector);
        }
        self.next_segment(vector.len())?
            .push(RowRef::F32(vector), SEGMENT_ROWS);
        Ok(())
    }

    fn push_le_bytes(&mut self, bytes: &[u8]) -> Result<(), MemoryError> {
        if !bytes.len().is_multiple_of(4) {
            return Err(MemoryError::Store(StoreFault::Corrupt {
                what: "stored vector length is not a multiple of 4".to_owned(),
            }));
        }
        let decode = |quad: &[u8]| f32::from_le_bytes([quad[0], quad[1], quad[2], quad[3]]);
        if self.compact.is_compact() {
            let vector: Vec<f32> = bytes.chunks_exact(4).map(decode).collect();
            return self.push_coded(&vector);
        }
        // Decoded straight into the segment: no intermediate vector.
        if let Segment::F32(floats) = self.next_segment(bytes.len() / 4)? {
            floats.extend(bytes.chunks_exact(4).map(decode));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ChunkTable {
    dimensions: usize,
    max_live: usize,
    max_rows: usize,
    compact: CompactVectors,
    /// Row `r`'s vector is row `r % SEGMENT_ROWS` of segment `r / SEGMENT_ROWS`.
    segments: Vec<Arc<Segment>>,
    /// Row `r`'s metadata, in segments shared the same way.
    metas: MetaColumn,
    live: Vec<bool>,
    live_count: usize,
    /// Each live source's span, by namespace: a namespace-filtered search visits only that
    /// namespace's rows (its cost follows the namespace, not the table), and knows how many it
    /// will score before it scores any (its scan budget is checked up front, like an unfiltered
    /// one's).
    sources: SourceRows,
}

/// What [`ChunkTable::replace_source`] did, so an index can keep its own structures in step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replacement {
    /// The table was compacted: every row number changed.
    pub compacted: bool,
    /// The rows appended for the new chunks.
    pub new_rows: std::ops::Range<usize>,
}

impl ChunkTable {
    /// An empty table holding at most `max_live` live rows in a buffer of at most `max_rows` rows
    /// (raised to `max_live` if smaller); the caller has validated `max_rows * dimensions`.
    #[cfg(test)]
    pub(crate) fn new(dimensions: usize, max_live: usize, max_rows: usize) -> Self {
        Self::with_encoding(dimensions, max_live, max_rows, CompactVectors::F32)
    }

    /// [`Self::new`] holding its rows in `compact`'s encoding (validated by the caller).
    pub(crate) fn with_encoding(
        dimensions: usize,
        max_live: usize,
        max_rows: usize,
        compact: CompactVectors,
    ) -> Self {
        Self {
            dimensions,
            max_live,
            max_rows: max_rows.max(max_live),
            compact,
            segments: Vec::new(),
            metas: MetaColumn::default(),
            live: Vec::new(),
            live_count: 0,
            sources: SourceRows::default(),
        }
    }

    /// An empty table with this one's dimensions and bounds.
    fn empty_like(&self, max_rows: usize) -> Self {
        Self::with_encoding(self.dimensions, self.max_live, max_rows, self.compact)
    }

    /// How the rows are held.
    pub(crate) fn encoding(&self) -> CompactVectors {
        self.compact
    }

    pub(crate) fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// The most rows the buffer may hold.
    pub(crate) fn max_rows(&self) -> usize {
        self.max_rows
    }

    pub(crate) fn rows(&self) -> usize {
        self.metas.len()
    }

    pub(crate) fn live_count(&self) -> usize {
        self.live_count
    }

    pub(crate) fn tombstones(&self) -> usize {
        self.rows() - self.live_count
    }

    /// Live rows whose source lies in `namespace`.
    pub(crate) fn live_in(&self, namespace: &NamespaceAddress) -> usize {
        self.sources.live_in(namespace)
    }

    /// The live rows of `namespace`: what a search filtered to the namespace scores. A namespace
    /// below [`DENSE_NAMESPACE_ROWS`] rows or [`DENSE_NAMESPACE_SHARE`] of the table is walked
    /// source by source (in no particular order of sources), visiting no other row, so its cost
    /// follows the namespace; a larger one is found by one pass over the rows in order, which is
    /// cheaper than a hash lookup per source and a jump per span.
    pub(crate) fn rows_in<'t>(
        &'t self,
        namespace: &'t NamespaceAddress,
    ) -> impl Iterator<Item = usize> + 't {
        let (by_source, in_order) = if self.is_dense(namespace) {
            (None, Some(self.rows_in_order(namespace)))
        } else {
            (Some(self.rows_by_source(namespace)), None)
        };
        by_source
            .into_iter()
            .flatten()
            .chain(in_order.into_iter().flatten())
    }

    /// Whether [`Self::rows_in`] finds `namespace`'s rows by a pass over every row.
    fn is_dense(&self, namespace: &NamespaceAddress) -> bool {
        let live = self.live_in(namespace);
        live >= DENSE_NAMESPACE_ROWS && live.saturating_mul(DENSE_NAMESPACE_SHARE) >= self.rows()
    }

    /// [`Self::rows_in`] source by source.
    fn rows_by_source<'t>(
        &'t self,
        namespace: &NamespaceAddress,
    ) -> impl Iterator<Item = usize> + 't {
        self.sources.spans_in(namespace).flat_map(RowSpan::rows)
    }

    /// [`Self::rows_in`] by one pass over every row.
    fn rows_in_order<'t>(
        &'t self,
        namespace: &'t NamespaceAddress,
    ) -> impl Iterator<Item = usize> + 't {
        (0..self.rows())
            .filter(move |&row| self.live[row] && self.metas[row].source.namespace() == namespace)
    }

    pub(crate) fn chunks_of(&self, key: &MemoryKey) -> usize {
        self.sources
            .span(key, &self.metas)
            .map_or(0, RowSpan::count)
    }

    pub(crate) fn is_live(&self, row: usize) -> bool {
        self.live.get(row).copied().unwrap_or(false)
    }

    pub(crate) fn meta(&self, row: usize) -> &RowMeta {
        &self.metas[row]
    }

    /// Row `row` as a search hit scoring `score`.
    pub(crate) fn hit(&self, row: usize, score: f32) -> Result<SearchHit, SemanticError> {
        Ok(SearchHit {
            chunk: self.metas[row].chunk()?,
            score,
        })
    }

    /// Row `row`'s vector as held (f32 or codes).
    pub(crate) fn row(&self, row: usize) -> RowRef<'_> {
        self.segments[row / SEGMENT_ROWS].row(row % SEGMENT_ROWS, self.dimensions)
    }

    /// Row `row`'s vector in f32 (decoded from its codes in a compact table).
    #[cfg(test)]
    pub(crate) fn vector(&self, row: usize) -> Vec<f32> {
        self.row(row).to_f32()
    }

    /// Every row's vector, live or not, in row order.
    pub(crate) fn row_refs(&self) -> impl Iterator<Item = RowRef<'_>> {
        self.segments
            .iter()
            .flat_map(|segment| segment.rows(self.dimensions))
    }

    /// Raises (or lowers, never below `max_live`) the most rows the buffer may hold.
    pub(crate) fn set_max_rows(&mut self, max_rows: usize) {
        self.max_rows = max_rows.max(self.max_live);
    }

    /// Bytes the vector segments have allocated room for.
    pub(crate) fn reserved_bytes(&self) -> usize {
        self.segments
            .iter()
            .map(|segment| segment.reserved_bytes())
            .sum()
    }

    /// [`Self::reserved_bytes`] in f32 units (4 bytes).
    pub(crate) fn reserved_floats(&self) -> usize {
        self.reserved_bytes() / 4
    }

    /// Appends `vector` as the next row's (its metadata is pushed by the caller), coding it in a
    /// compact table. A row of this table's own encoding (a copy between tables) goes in as it is:
    /// decoding and recoding codes could move them by a step.
    fn push_vector(&mut self, vector: RowRef<'_>) {
        let row = self.metas.len();
        let room = segment_rows(row - row % SEGMENT_ROWS, self.max_rows);
        let (compact, dimensions) = (self.compact, self.dimensions);
        if let Some(segment) = appendable(
            &mut self.segments,
            row,
            || Segment::with_rows(compact, room, dimensions),
            |shared| shared.copy_with_room(room, dimensions),
        ) {
            segment.push(vector, room);
        }
    }

    /// Appends a live row in this table's encoding (a copy from a table of the same encoding).
    fn push_row_ref(&mut self, meta: RowMeta, row: RowRef<'_>) {
        self.push_vector(row);
        self.metas.push(meta, self.max_rows);
        self.live.push(true);
    }

    /// Appends a live row (the caller records its source's span).
    fn push_row(&mut self, meta: RowMeta, vector: &[f32]) {
        self.push_row_ref(meta, RowRef::F32(vector));
    }

    /// The live rows in canonical order: by source key, then ordinal. A persisted graph numbers its
    /// points in this order, which depends only on the chunk set, not on the order chunks arrived.
    /// A table loaded from a store that returns sources in key order is already in it, which one
    /// pass finds, without sorting.
    pub(crate) fn canonical_order(&self) -> Vec<usize> {
        let mut rows: Vec<usize> = (0..self.rows()).filter(|row| self.live[*row]).collect();
        // A live key has one revision, so the rank key orders rows by key, then ordinal.
        let order = |left: &usize, right: &usize| {
            self.metas[*left]
                .rank_key()
                .cmp(&self.metas[*right].rank_key())
        };
        if rows
            .windows(2)
            .any(|pair| order(&pair[0], &pair[1]) == std::cmp::Ordering::Greater)
        {
            rows.sort_by(order);
        }
        rows
    }

    /// Whether `order` lists every row of this table, each in its place (no tombstones, already in
    /// that order).
    fn is_identity(&self, order: &[usize]) -> bool {
        order.len() == self.rows() && order.iter().enumerate().all(|(at, row)| at == *row)
    }

    /// A compacted copy holding `order`'s rows (live rows of this table), in that order. When that
    /// is every row in place, the copy shares the vectors.
    pub(crate) fn reordered(&self, order: &[usize], max_rows: usize) -> Self {
        if self.is_identity(order) {
            let mut table = self.clone();
            table.set_max_rows(max_rows);
            return table;
        }
        let mut table = self.empty_like(max_rows);
        table.reserve_rows(order.len());
        for &row in order {
            table.push_row_ref(self.metas[row].clone(), self.row(row));
        }
        table.live_count = order.len();
        table.index_sources();
        table
    }

    /// A copy holding only the live rows, in their order: a compaction built without changing
    /// this table (so it can be answering queries meanwhile). Segments before the first tombstone
    /// are shared, not copied.
    pub(crate) fn compacted_copy(&self) -> Self {
        let Some(first_dead) = self.live.iter().position(|live| !live) else {
            return self.clone();
        };
        let kept_segments = first_dead / SEGMENT_ROWS;
        let kept_rows = kept_segments * SEGMENT_ROWS;
        let mut table = self.empty_like(self.max_rows);
        table.segments = self.segments[..kept_segments].to_vec();
        table.reserve_rows(self.live_count);
        table.metas = self.metas.shared_prefix(kept_segments);
        table.live.resize(kept_rows, true);
        for row in kept_rows..self.rows() {
            if self.live[row] {
                table.push_row_ref(self.metas[row].clone(), self.row(row));
            }
        }
        table.live_count = self.live_count;
        table.index_sources();
        table
    }

    /// Rebuilds the source spans from the rows (all live, each source's consecutive).
    fn index_sources(&mut self) {
        self.sources.clear();
        let mut row = 0;
        while row < self.metas.len() {
            let source = &self.metas[row].source;
            let mut end = row + 1;
            while end < self.metas.len() && self.metas[end].source.same_key(source) {
                end += 1;
            }
            self.sources
                .insert(RowSpan::new(row, end - row), &self.metas);
            row = end;
        }
    }

    /// Checks new chunks without changing anything.
    fn check<'c>(
        &self,
        key: &MemoryKey,
        chunks: impl ExactSizeIterator<Item = (&'c ChunkMeta, &'c [f32])>,
    ) -> Result<(), SemanticError> {
        let count = chunks.len();
        for (meta, vector) in chunks {
            if &meta.source.key != key {
                return Err(SemanticError::invalid(
                    "chunk source",
                    "differs from the replaced source",
                ));
            }
            RowMeta::check(meta)?;
            self.check_vector(vector)?;
        }
        let old = self.chunks_of(key);
        let live_after = self.live_count - old + count;
        if live_after > self.max_live {
            return Err(SemanticError::TooLarge {
                limit: "max_chunks",
                max: self.max_live as u64,
                actual: live_after as u64,
            });
        }
        Ok(())
    }

    /// Checks one vector's length and that every component is finite.
    fn check_vector(&self, vector: &[f32]) -> Result<(), SemanticError> {
        if vector.len() != self.dimensions {
            return Err(SemanticError::invalid(
                "chunk vector",
                format!(
                    "has {} dimensions, expected {}",
                    vector.len(),
                    self.dimensions
                ),
            ));
        }
        // Folded without short-circuiting, so the check vectorizes.
        let non_finite = vector.iter().fold(false, |found, value| {
            found | (value.to_bits() & EXPONENT == EXPONENT)
        });
        if non_finite {
            return Err(SemanticError::invalid(
                "chunk vector",
                "has a non-finite component",
            ));
        }
        Ok(())
    }

    pub(crate) fn remove_source(&mut self, key: &MemoryKey) -> usize {
        let Some(span) = self.sources.remove(key, &self.metas) else {
            return 0;
        };
        for live in &mut self.live[span.rows()] {
            *live = false;
        }
        self.live_count -= span.count();
        span.count()
    }

    /// Replaces `key`'s chunks: checks, tombstones the old rows, compacts when the new rows would not fit
    /// or `compact_above` of the rows would be tombstones, then appends.
    pub(crate) fn replace_source(
        &mut self,
        key: &MemoryKey,
        chunks: Vec<(ChunkMeta, Vec<f32>)>,
        compact_above: f64,
    ) -> Result<Replacement, SemanticError> {
        self.check(
            key,
            chunks
                .iter()
                .map(|(meta, vector)| (meta, vector.as_slice())),
        )?;
        self.replace_checked(key, chunks, compact_above)
    }

    /// [`Self::replace_source`] with vectors shared with the caller (the same rows going into both
    /// indexes, or into a graph being rebuilt); they are copied into this table's segments.
    pub(crate) fn replace_shared(
        &mut self,
        key: &MemoryKey,
        rows: Vec<(ChunkMeta, RowVector)>,
        compact_above: f64,
    ) -> Result<Replacement, SemanticError> {
        self.check(
            key,
            rows.iter().map(|(meta, vector)| (meta, vector.as_slice())),
        )?;
        self.replace_checked(key, rows, compact_above)
    }

    fn replace_checked<V: RowData>(
        &mut self,
        key: &MemoryKey,
        rows: Vec<(ChunkMeta, V)>,
        compact_above: f64,
    ) -> Result<Replacement, SemanticError> {
        self.remove_source(key);
        let rows_after = self.rows() + rows.len();
        let tombstone_share = if rows_after == 0 {
            0.0
        } else {
            self.tombstones() as f64 / rows_after as f64
        };
        let compacted = rows_after > self.max_rows || tombstone_share > compact_above;
        if compacted {
            self.compact();
        }
        let first = self.rows();
        self.reserve_rows(rows.len());
        let count = rows.len();
        if let Some((meta, _)) = rows.first() {
            let source = self.sources.record(&meta.source);
            for (meta, vector) in rows {
                self.push_row(RowMeta::new(&meta, source.clone()), vector.floats());
            }
            self.sources.insert(RowSpan::new(first, count), &self.metas);
        }
        self.live_count += count;
        Ok(Replacement {
            compacted,
            new_rows: first..self.rows(),
        })
    }

    /// Fills an empty table with a restart's rows in one pass: `metas` in row order (each
    /// source's rows consecutive, sharing one [`SourceVersion`]) and their vectors as the store
    /// decoded them. A vector that is not of unit length (one not written by this crate) is
    /// normalized, one that is not finite refused; a source appearing twice is refused (a store
    /// returns each once). Nothing is compacted and no key is copied.
    pub(crate) fn load_rows(
        &mut self,
        metas: Vec<ChunkMeta>,
        vectors: LoadedVectors,
    ) -> Result<(), SemanticError> {
        if self.rows() > 0 || vectors.dimensions != self.dimensions {
            return Err(SemanticError::invalid(
                "chunk table",
                "loads only into an empty table of the vectors' dimensions",
            ));
        }
        if metas.len() != vectors.rows {
            return Err(SemanticError::invalid(
                "stored chunks",
                "another number of vectors than of chunks",
            ));
        }
        for meta in &metas {
            RowMeta::check(meta)?;
        }
        if metas.len() > self.max_live {
            return Err(SemanticError::TooLarge {
                limit: "max_chunks",
                max: self.max_live as u64,
                actual: metas.len() as u64,
            });
        }
        if vectors.compact != self.compact || vectors.non_finite {
            return Err(SemanticError::invalid(
                "stored chunks",
                "a vector is not finite, or the load's encoding is not the table's",
            ));
        }
        let mut segments = vectors.segments;
        for segment in &mut segments {
            let Segment::F32(floats) = segment else {
                // Compact segments were normalized before they were coded.
                continue;
            };
            for vector in floats.chunks_exact_mut(self.dimensions) {
                // Vectors are normalized before they are stored: one squared norm (the fast dot
                // product) usually shows there is nothing to do, and the stored bits are kept. Any
                // non-finite component makes it non-finite, so it is also the finiteness check.
                let unit = (dot(vector, vector) - 1.0).abs() <= 1e-5;
                if !unit {
                    crate::embed::normalize(vector, self.dimensions)?;
                }
            }
        }
        let mut rows = Vec::with_capacity(metas.len());
        let mut spans = Vec::new();
        let mut start = 0;
        while start < metas.len() {
            let source = &metas[start].source;
            let mut end = start + 1;
            while end < metas.len() && Arc::ptr_eq(&metas[end].source, source) {
                end += 1;
            }
            let record = self.sources.record(source);
            rows.extend(
                metas[start..end]
                    .iter()
                    .map(|meta| RowMeta::new(meta, record.clone())),
            );
            spans.push(RowSpan::new(start, end - start));
            start = end;
        }
        drop(metas);
        let column = MetaColumn::from_rows(rows);
        for span in spans {
            if self.sources.insert(span, &column).is_some() {
                self.sources.clear();
                return Err(SemanticError::invalid(
                    "stored sources",
                    "a source is listed twice",
                ));
            }
        }
        self.segments = segments.into_iter().map(Arc::new).collect();
        self.live = vec![true; column.len()];
        self.live_count = column.len();
        self.metas = column;
        Ok(())
    }

    /// Room for `additional` more rows' liveness flags, never past `max_rows` rows (a bulk load
    /// reserves its exact total once). Vectors and metadata need no reservation: their segments
    /// are allocated whole as rows reach them, and never move.
    pub(crate) fn reserve_rows(&mut self, additional: usize) {
        let needed_rows = self.rows() + additional;
        let capacity_rows = self.live.capacity();
        if needed_rows <= capacity_rows {
            return;
        }
        let target_rows = needed_rows
            .max(capacity_rows.saturating_mul(2))
            .min(self.max_rows)
            .max(needed_rows);
        self.live.reserve_exact(target_rows - self.live.len());
    }

    /// Drops tombstones and renumbers rows in their existing order.
    pub(crate) fn compact(&mut self) {
        if self.tombstones() > 0 {
            *self = self.compacted_copy();
        }
    }
}

#[cfg(test)]
mod tests;
