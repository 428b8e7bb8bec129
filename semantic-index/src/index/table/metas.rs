//! The rows' metadata, in segments of [`SEGMENT_ROWS`] rows behind reference counts, like the
//! vectors: a copy of a table (the HNSW graph's table taken from the exact index's, a build's
//! snapshot, a compaction's unchanged prefix) shares them instead of copying 56 bytes a row, and
//! appending to a shared segment copies that segment only. Rows are only ever appended; a row's
//! liveness is kept beside the column, so a shared segment is never written in place.

use std::ops::Index;
use std::sync::Arc;

use super::record::RowMeta;
use super::{SEGMENT_ROWS, appendable, segment_rows};

#[derive(Debug, Clone, Default)]
pub(super) struct MetaColumn {
    /// Row `r` is row `r % SEGMENT_ROWS` of segment `r / SEGMENT_ROWS`.
    segments: Vec<Arc<Vec<RowMeta>>>,
    len: usize,
}

impl MetaColumn {
    /// The column of `metas`, in row order.
    pub(super) fn from_rows(metas: Vec<RowMeta>) -> Self {
        let len = metas.len();
        let mut segments = Vec::with_capacity(len.div_ceil(SEGMENT_ROWS));
        let mut rows = metas.into_iter();
        while segments.len() * SEGMENT_ROWS < len {
            segments.push(Arc::new(rows.by_ref().take(SEGMENT_ROWS).collect()));
        }
        Self { segments, len }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The first `segments` whole segments, shared.
    pub(super) fn shared_prefix(&self, segments: usize) -> Self {
        let segments = self.segments[..segments.min(self.segments.len())].to_vec();
        let len = segments.iter().map(|segment| segment.len()).sum();
        Self { segments, len }
    }

    /// Appends a row to a table of at most `max_rows` rows.
    pub(super) fn push(&mut self, meta: RowMeta, max_rows: usize) {
        let row = self.len;
        let room = segment_rows(row - row % SEGMENT_ROWS, max_rows);
        if let Some(segment) = appendable(
            &mut self.segments,
            row,
            || Vec::with_capacity(room),
            |shared| {
                let mut copy = Vec::with_capacity(room.max(shared.len() + 1));
                copy.extend_from_slice(shared);
                copy
            },
        ) {
            segment.push(meta);
            self.len += 1;
        }
    }
}

impl Index<usize> for MetaColumn {
    type Output = RowMeta;

    fn index(&self, row: usize) -> &RowMeta {
        &self.segments[row / SEGMENT_ROWS][row % SEGMENT_ROWS]
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::index::test_support::row as meta;

    fn column(rows: usize) -> MetaColumn {
        let mut column = MetaColumn::default();
        for row in 0..rows {
            column.push(meta(&format!("d{row}"), 0), usize::MAX);
        }
        column
    }

    #[test]
    fn a_copy_shares_every_segment_and_an_append_copies_only_the_last() {
        let rows = SEGMENT_ROWS + 2;
        let original = column(rows);
        let mut copy = original.clone();
        copy.push(meta("new", 0), usize::MAX);
        assert!(Arc::ptr_eq(&original.segments[0], &copy.segments[0]));
        assert!(!Arc::ptr_eq(&original.segments[1], &copy.segments[1]));
        assert_eq!((original.len(), copy.len()), (rows, rows + 1));
        assert_eq!(copy[rows].source.id(), "new");
        for row in [0, SEGMENT_ROWS - 1, SEGMENT_ROWS, rows - 1] {
            assert_eq!(copy[row], original[row], "row {row}");
        }

        let prefix = original.shared_prefix(1);
        assert_eq!(prefix.len(), SEGMENT_ROWS);
        assert!(Arc::ptr_eq(&prefix.segments[0], &original.segments[0]));

        let rebuilt = MetaColumn::from_rows((0..rows).map(|row| original[row].clone()).collect());
        assert_eq!(rebuilt.len(), rows);
        assert_eq!(rebuilt.segments.len(), 2);
        assert!((0..rows).all(|row| rebuilt[row] == original[row]));
    }

    #[test]
    fn a_small_table_reserves_no_more_than_its_rows() {
        let mut column = MetaColumn::default();
        column.push(meta("a", 0), 3);
        assert_eq!(column.segments[0].capacity(), 3);
    }
}
