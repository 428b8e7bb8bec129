//! The rows an HNSW graph walks: the table's own, or int8 codes of an f32 table's rows.
//!
//! The walk is bound by reading rows scattered over the whole table (`graph.rs`): an f32 row at 384
//! dimensions is 1,536 bytes, its int8 codes 388 (`quantized.rs`). So an f32 index's graph is built
//! and walked over [`WalkCodes`], a coded copy of its rows, and the index scores the walk's best
//! candidates (as many as a compact index rescores) in f32 from the table before it ranks
//! (`hnsw.rs`): the codes only steer the walk, every score an index answers is exact. A compact table holds codes already and is walked
//! itself. The copy costs a quarter of the f32 rows' memory again, and one coding pass over the
//! rows wherever an index gets its table whole (a build, a rebuild, a persisted graph's load); an
//! insertion codes only its new rows.
//!
//! Measured on 200,000 real-model-derived vectors (2 cores, 2026-12-06): `memory-eval bench-hnsw
//! --ef 256,363`, width 363, the default there: 4,136 queries a second at recall@10 0.965 walking
//! the f32 rows, 4,847 at 0.964 walking codes and ranking the best 40 candidates exactly (5,036
//! ranking 20, at the same recall; ranking all 363 fell to 3,980, the f32 rows' reads again); the
//! graph built in 13.5 s instead of 18.3. `scripts/compare.sh` (`COMPARE_SIZE=200000`, three rounds
//! taking turns with hnswlib): `hnsw_qps_ratio_at_recall_0.95` 1.54, where the f32 walk gave
//! 1.29, and `hnsw_build_time_ratio` 0.58 (0.82). At a million rows, [`super::HnswParams::width_for`]'s
//! docs.

use std::sync::Arc;

use super::quantized::{CompactVectors, RowRef, Segment};
use super::table::{ChunkTable, SEGMENT_ROWS, appendable, segment_rows};

/// Rows a graph reads: row numbers are the table's, `0..rows()`.
pub(crate) trait WalkRows: Sync {
    /// How many rows there are.
    fn rows(&self) -> usize;
    /// Row `row`'s vector as the walk reads it.
    fn row(&self, row: usize) -> RowRef<'_>;
    /// The encoding of the rows, which a query is coded to once per search.
    fn encoding(&self) -> CompactVectors;
}

impl WalkRows for ChunkTable {
    fn rows(&self) -> usize {
        ChunkTable::rows(self)
    }

    #[inline]
    fn row(&self, row: usize) -> RowRef<'_> {
        ChunkTable::row(self, row)
    }

    fn encoding(&self) -> CompactVectors {
        ChunkTable::encoding(self)
    }
}

/// Int8 codes of an f32 table's rows, row for row, in segments shared between copies the way the
/// table's are.
#[derive(Debug, Clone)]
pub(crate) struct WalkCodes {
    dimensions: usize,
    rows: usize,
    segments: Vec<Arc<Segment>>,
}

impl WalkCodes {
    /// The codes of every row of `table`.
    pub(crate) fn of(table: &ChunkTable) -> Self {
        let mut codes = Self {
            dimensions: table.dimensions(),
            rows: 0,
            segments: Vec::new(),
        };
        codes.extend(table);
        codes
    }

    /// Codes the rows `table` gained since (rows are only appended between compactions; a
    /// compacted table is coded anew with [`Self::of`]).
    pub(crate) fn extend(&mut self, table: &ChunkTable) {
        let dimensions = self.dimensions;
        while self.rows < table.rows() {
            let row = self.rows;
            let room = segment_rows(row - row % SEGMENT_ROWS, table.max_rows());
            if let Some(segment) = appendable(
                &mut self.segments,
                row,
                || Segment::with_rows(CompactVectors::int8(), room, dimensions),
                |shared| shared.copy_with_room(room, dimensions),
            ) {
                segment.push(table.row(row), room);
            }
            self.rows += 1;
        }
    }

    /// Bytes the codes have allocated room for.
    pub(crate) fn reserved_bytes(&self) -> usize {
        self.segments
            .iter()
            .map(|segment| segment.reserved_bytes())
            .sum()
    }
}

impl WalkRows for WalkCodes {
    fn rows(&self) -> usize {
        self.rows
    }

    #[inline]
    fn row(&self, row: usize) -> RowRef<'_> {
        self.segments[row / SEGMENT_ROWS].row(row % SEGMENT_ROWS, self.dimensions)
    }

    fn encoding(&self) -> CompactVectors {
        CompactVectors::int8()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::index::test_support::{key, meta, unit};

    #[test]
    fn codes_follow_the_rows_they_code() {
        let mut table = ChunkTable::new(4, 10_000, 10_000);
        let append = |table: &mut ChunkTable, rows: std::ops::Range<usize>| {
            for row in rows {
                let id = format!("s{row:05}");
                let angle = row as f32 * 0.01;
                let vector = unit(&[angle.cos(), angle.sin(), 0.5, -0.25]);
                table
                    .replace_source(&key(&id), vec![(meta(&id, 0), vector)], 1.0)
                    .unwrap();
            }
        };
        append(&mut table, 0..5_000);
        let mut codes = WalkCodes::of(&table);
        assert_eq!(codes.rows(), 5_000);
        append(&mut table, 5_000..9_000);
        // A copy shares the segments; extending one codes only the new rows.
        let before = codes.clone();
        codes.extend(&table);
        assert_eq!((before.rows(), codes.rows()), (5_000, 9_000));
        assert!(Arc::ptr_eq(&before.segments[0], &codes.segments[0]));
        for row in [0, 4_095, 4_096, 5_000, 8_999] {
            let other = (row + 1_000) % 9_000;
            let truth = table.row(other).similarity(table.row(row));
            let coded = table.row(other).similarity(codes.row(row));
            assert!((coded - truth).abs() < 0.02, "row {row}: {coded} {truth}");
            assert_eq!(codes.row(row).to_f32().len(), 4);
        }
        assert!(codes.reserved_bytes() >= 9_000 * 4);
    }
}
