//! The exact cosine index: one scan over the contiguous vector buffer.

use memory_core::MemoryKey;

use super::table::ChunkTable;
use super::{
    ChunkMeta, IndexBounds, IndexKind, SearchHit, SearchOutcome, SearchRequest, VectorIndex,
    check_query, check_request, dot, rank_order,
};
use crate::error::SemanticError;

/// Tombstones are compacted away once they pass this share of the rows: scans touch every row, so dead
/// rows cost time, while compaction copies the live ones.
pub const EXACT_COMPACT_TOMBSTONE_FRACTION: f64 = 0.25;

/// Scores every live chunk; refuses to run when that is more than `max_scanned_chunks`.
#[derive(Debug)]
pub struct ExactIndex {
    table: ChunkTable,
}

impl ExactIndex {
    /// An empty index for vectors of `dimensions` within `bounds` (checked here, before allocating).
    pub fn new(dimensions: usize, bounds: IndexBounds) -> Result<Self, SemanticError> {
        bounds.validate(dimensions)?;
        Ok(Self {
            table: ChunkTable::new(dimensions, bounds.max_chunks),
        })
    }

    /// Live chunks of `key`.
    pub fn chunks_of(&self, key: &MemoryKey) -> usize {
        self.table.chunks_of(key)
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
        self.table
            .replace_source(key, chunks, EXACT_COMPACT_TOMBSTONE_FRACTION)
            .map(|_| ())
    }

    fn remove_source(&mut self, key: &MemoryKey) {
        self.table.remove_source(key);
    }

    fn search(
        &self,
        query: &[f32],
        request: SearchRequest,
    ) -> Result<SearchOutcome, SemanticError> {
        check_request(&request)?;
        check_query(query, self.table.dimensions())?;
        let live = self.table.live_count();
        if live > request.max_scanned_chunks {
            return Err(SemanticError::Budget {
                limit: "max_scanned_chunks",
                max: request.max_scanned_chunks as u64,
                actual: live as u64,
            });
        }
        let dimensions = self.table.dimensions();
        let mut scored: Vec<(usize, f32)> = Vec::with_capacity(live.min(request.limit * 4));
        for (row, vector) in self
            .table
            .all_vectors()
            .chunks_exact(dimensions)
            .enumerate()
        {
            if !self.table.is_live(row) {
                continue;
            }
            let score = dot(query, vector);
            if score >= request.min_score {
                scored.push((row, score));
            }
        }
        let order = |left: &(usize, f32), right: &(usize, f32)| {
            rank_order(
                (self.table.meta(left.0), left.1),
                (self.table.meta(right.0), right.1),
            )
        };
        if scored.len() > request.limit {
            scored.select_nth_unstable_by(request.limit - 1, order);
            scored.truncate(request.limit);
        }
        scored.sort_unstable_by(order);
        Ok(SearchOutcome {
            hits: scored
                .into_iter()
                .map(|(row, score)| SearchHit {
                    chunk: self.table.meta(row).clone(),
                    score,
                })
                .collect(),
            scanned_chunks: live,
        })
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
            max_chunks: 43_691,
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
