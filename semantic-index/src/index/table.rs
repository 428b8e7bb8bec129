//! Chunk rows shared by both indexes: metadata, one contiguous vector buffer, and tombstones.
//!
//! Rows are appended; replacing or removing a source tombstones its rows. At most `max_live` rows are
//! live (the index's capacity), and the buffer never holds more than `max_rows >= max_live` rows:
//! before an append would pass it, the table compacts (dropping tombstones, renumbering rows), so
//! memory stays within `max_rows * dimensions` floats, a bound checked before construction. The
//! exact index uses `max_rows == max_live`; an HNSW table whose rebuilds are deferred to a background
//! build gets headroom for the tombstones that accumulate meanwhile.

use std::collections::HashMap;

use memory_core::{MemoryKey, NamespaceAddress};

use super::ChunkMeta;
use crate::error::SemanticError;

#[derive(Debug, Clone)]
pub(crate) struct ChunkTable {
    dimensions: usize,
    max_live: usize,
    max_rows: usize,
    vectors: Vec<f32>,
    metas: Vec<ChunkMeta>,
    live: Vec<bool>,
    live_count: usize,
    by_source: HashMap<MemoryKey, Vec<usize>>,
    /// Live rows per namespace, so a namespace-filtered search knows how many chunks it will score
    /// before it scores any (its scan budget is checked up front, like an unfiltered one's).
    live_by_namespace: HashMap<NamespaceAddress, usize>,
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
    pub(crate) fn new(dimensions: usize, max_live: usize, max_rows: usize) -> Self {
        Self {
            dimensions,
            max_live,
            max_rows: max_rows.max(max_live),
            vectors: Vec::new(),
            metas: Vec::new(),
            live: Vec::new(),
            live_count: 0,
            by_source: HashMap::new(),
            live_by_namespace: HashMap::new(),
        }
    }

    pub(crate) fn dimensions(&self) -> usize {
        self.dimensions
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
        self.live_by_namespace.get(namespace).copied().unwrap_or(0)
    }

    fn count_namespace(&mut self, namespace: &NamespaceAddress, added: usize, removed: usize) {
        if added == removed {
            return;
        }
        // Looked up before inserting: most calls find the namespace, and `entry` would clone it.
        let count = match self.live_by_namespace.get_mut(namespace) {
            Some(count) => count,
            None => self.live_by_namespace.entry(namespace.clone()).or_insert(0),
        };
        *count = (*count + added).saturating_sub(removed);
        if *count == 0 {
            self.live_by_namespace.remove(namespace);
        }
    }

    pub(crate) fn chunks_of(&self, key: &MemoryKey) -> usize {
        self.by_source.get(key).map_or(0, Vec::len)
    }

    pub(crate) fn is_live(&self, row: usize) -> bool {
        self.live.get(row).copied().unwrap_or(false)
    }

    pub(crate) fn meta(&self, row: usize) -> &ChunkMeta {
        &self.metas[row]
    }

    pub(crate) fn vector(&self, row: usize) -> &[f32] {
        &self.vectors[row * self.dimensions..(row + 1) * self.dimensions]
    }

    pub(crate) fn all_vectors(&self) -> &[f32] {
        &self.vectors
    }

    /// Raises (or lowers, never below `max_live`) the most rows the buffer may hold.
    pub(crate) fn set_max_rows(&mut self, max_rows: usize) {
        self.max_rows = max_rows.max(self.max_live);
    }

    /// Floats the vector buffer has allocated room for.
    pub(crate) fn reserved_floats(&self) -> usize {
        self.vectors.capacity()
    }

    /// The live rows in canonical order: by source key, then ordinal. A persisted graph numbers its
    /// points in this order, which depends only on the chunk set, not on the order chunks arrived.
    pub(crate) fn canonical_order(&self) -> Vec<usize> {
        let mut rows: Vec<usize> = (0..self.rows()).filter(|row| self.live[*row]).collect();
        rows.sort_by(|left, right| {
            let (left, right) = (&self.metas[*left], &self.metas[*right]);
            left.source
                .key
                .cmp(&right.source.key)
                .then_with(|| left.ordinal.cmp(&right.ordinal))
        });
        rows
    }

    /// A compacted copy holding `order`'s rows (live rows of this table), in that order.
    pub(crate) fn reordered(&self, order: &[usize], max_rows: usize) -> Self {
        let mut table = Self::new(self.dimensions, self.max_live, max_rows);
        table.reserve_rows(order.len());
        for &row in order {
            let meta = self.metas[row].clone();
            let key = meta.source.key.clone();
            table.vectors.extend_from_slice(self.vector(row));
            table.metas.push(meta);
            table.live.push(true);
            let new_row = table.metas.len() - 1;
            table.by_source.entry(key).or_default().push(new_row);
        }
        table.live_count = order.len();
        let namespaces: Vec<(NamespaceAddress, usize)> = table
            .by_source
            .iter()
            .map(|(key, rows)| (key.namespace.clone(), rows.len()))
            .collect();
        for (namespace, count) in namespaces {
            table.count_namespace(&namespace, count, 0);
        }
        table
    }

    /// A copy holding only the live rows, in their order: a compaction built without changing
    /// this table (so it can be answering queries meanwhile).
    pub(crate) fn compacted_copy(&self) -> Self {
        let live: Vec<usize> = (0..self.rows()).filter(|row| self.live[*row]).collect();
        self.reordered(&live, self.max_rows)
    }

    /// Checks new chunks without changing anything.
    fn check(
        &self,
        key: &MemoryKey,
        chunks: &[(ChunkMeta, Vec<f32>)],
    ) -> Result<(), SemanticError> {
        for (meta, vector) in chunks {
            if &meta.source.key != key {
                return Err(SemanticError::invalid(
                    "chunk source",
                    "differs from the replaced source",
                ));
            }
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
            if vector.iter().any(|value| !value.is_finite()) {
                return Err(SemanticError::invalid(
                    "chunk vector",
                    "has a non-finite component",
                ));
            }
        }
        let old = self.by_source.get(key).map_or(0, Vec::len);
        let live_after = self.live_count - old + chunks.len();
        if live_after > self.max_live {
            return Err(SemanticError::TooLarge {
                limit: "max_chunks",
                max: self.max_live as u64,
                actual: live_after as u64,
            });
        }
        Ok(())
    }

    pub(crate) fn remove_source(&mut self, key: &MemoryKey) -> usize {
        let Some(rows) = self.by_source.remove(key) else {
            return 0;
        };
        for row in &rows {
            self.live[*row] = false;
        }
        self.live_count -= rows.len();
        self.count_namespace(&key.namespace, 0, rows.len());
        rows.len()
    }

    /// Replaces `key`'s chunks: checks, tombstones the old rows, compacts when the new rows would not fit
    /// or `compact_above` of the rows would be tombstones, then appends.
    pub(crate) fn replace_source(
        &mut self,
        key: &MemoryKey,
        chunks: Vec<(ChunkMeta, Vec<f32>)>,
        compact_above: f64,
    ) -> Result<Replacement, SemanticError> {
        self.check(key, &chunks)?;
        self.remove_source(key);
        let rows_after = self.rows() + chunks.len();
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
        self.reserve_rows(chunks.len());
        let mut rows = Vec::with_capacity(chunks.len());
        for (meta, vector) in chunks {
            rows.push(self.metas.len());
            self.vectors.extend_from_slice(&vector);
            self.metas.push(meta);
            self.live.push(true);
        }
        self.live_count += rows.len();
        self.count_namespace(&key.namespace, rows.len(), 0);
        if !rows.is_empty() {
            self.by_source.insert(key.clone(), rows);
        }
        Ok(Replacement {
            compacted,
            new_rows: first..self.rows(),
        })
    }

    /// Grows the buffer geometrically but never past `max_rows` rows (a bulk load reserves its exact
    /// total once, so the 100,000-row buffer of a restart is never copied while it grows).
    pub(crate) fn reserve_rows(&mut self, additional: usize) {
        let needed_rows = self.rows() + additional;
        let capacity_rows = self.vectors.capacity() / self.dimensions;
        if needed_rows <= capacity_rows {
            return;
        }
        let target_rows = needed_rows
            .max(capacity_rows.saturating_mul(2))
            .min(self.max_rows)
            .max(needed_rows);
        self.vectors
            .reserve_exact(target_rows * self.dimensions - self.vectors.len());
        self.metas.reserve_exact(target_rows - self.metas.len());
        self.live.reserve_exact(target_rows - self.live.len());
    }

    /// Drops tombstones and renumbers rows in their existing order.
    pub(crate) fn compact(&mut self) {
        let mut write = 0;
        for read in 0..self.rows() {
            if !self.live[read] {
                continue;
            }
            if write != read {
                self.vectors.copy_within(
                    read * self.dimensions..(read + 1) * self.dimensions,
                    write * self.dimensions,
                );
                self.metas.swap(write, read);
            }
            write += 1;
        }
        self.vectors.truncate(write * self.dimensions);
        self.metas.truncate(write);
        self.live.clear();
        self.live.resize(write, true);
        self.by_source.clear();
        for (row, meta) in self.metas.iter().enumerate() {
            self.by_source
                .entry(meta.source.key.clone())
                .or_default()
                .push(row);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::index::test_support::{key, meta, unit};

    #[test]
    fn replacement_checks_before_changing_and_compacts_within_bounds() {
        let mut table = ChunkTable::new(2, 3, 3);
        table
            .replace_source(
                &key("a"),
                vec![
                    (meta("a", 0), unit(&[1.0, 0.0])),
                    (meta("a", 1), unit(&[0.0, 1.0])),
                ],
                0.5,
            )
            .unwrap();
        let too_many = vec![
            (meta("b", 0), unit(&[1.0, 1.0])),
            (meta("b", 1), unit(&[1.0, 1.0])),
        ];
        assert!(matches!(
            table.replace_source(&key("b"), too_many, 0.5),
            Err(SemanticError::TooLarge {
                limit: "max_chunks",
                ..
            })
        ));
        assert_eq!(table.live_count(), 2);
        let replacement = table
            .replace_source(
                &key("a"),
                vec![
                    (meta("a", 0), unit(&[1.0, 1.0])),
                    (meta("a", 1), unit(&[1.0, 1.0])),
                ],
                0.9,
            )
            .unwrap();
        assert!(replacement.compacted, "4 rows would exceed max_rows");
        assert_eq!(table.rows(), 2);
        assert!(table.vectors.capacity() <= 3 * 2);
        let wrong = vec![(meta("c", 0), vec![1.0, 0.0, 0.0])];
        assert!(table.replace_source(&key("c"), wrong, 0.5).is_err());
        assert_eq!(table.live_count(), 2);
    }
}
