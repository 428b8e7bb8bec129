//! The layered neighbour lists an [`super::HnswIndex`] searches, over the rows of its chunk table.
//!
//! hnsw_rs builds graphs well (in parallel), but every point it holds owns a copy of its vector, 16
//! lock-guarded lists and an `Arc` per neighbour, and it reloads a graph only from files. So hnsw_rs
//! is used as the builder only: a finished build is converted to this form and dropped. Here the
//! lists are flat (layer 0: a fixed number of slots per row in one buffer; upper layers, which hold
//! about one row in `max_connections`, in small per-row lists), neighbours are row numbers of the
//! table, and the vectors are read from the table, so the graph holds no copy of them. Loading a
//! persisted graph fills these arrays directly (`persist.rs`), with no temporary files and no
//! allocation per neighbour.
//!
//! Search is the usual HNSW walk: a greedy descent through the upper layers, then a best-first
//! search of layer 0 with a candidate list of `ef`; rows the filter refuses are walked through but
//! never returned. Insertion (the increments applied to a built or loaded graph) follows hnsw_rs:
//! a search with `ef_construction` per layer, the neighbour-selection heuristic, and reverse links
//! that drop the farthest neighbour of a full list. A row's level is a function of its row number,
//! so the same insertions give the same graph in every run.
//!
//! Distances are between rows as the table holds them: over int8 codes in a compact table (the
//! query coded once per search), so the walk reads 388 bytes a row instead of 1,536; the index
//! rescores the candidates in f32 afterwards ([`super::quantized`]).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use hnsw_rs::hnsw::Hnsw;

use super::hnsw::UnitCosineDistance;
use super::quantized::{QueryRow, RowRef};
use super::table::ChunkTable;

/// One neighbour: its row and its distance to the list's owner.
pub(crate) type Neighbour = (u32, f32);

/// Layers a graph may have (hnsw_rs's `NB_LAYER_MAX`, and the persisted format's).
pub(crate) const LAYERS: usize = 16;

/// A row and its distance to the query, ordered by distance, then row.
#[derive(Debug, Clone, Copy)]
struct Scored {
    distance: f32,
    row: u32,
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.distance
            .total_cmp(&other.distance)
            .then_with(|| self.row.cmp(&other.row))
    }
}

/// Rows seen by one search: a bit per row.
struct Visited(Vec<u64>);

impl Visited {
    fn new(rows: usize) -> Self {
        Self(vec![0; rows.div_ceil(64)])
    }

    /// `true` the first time `row` is seen.
    fn insert(&mut self, row: u32) -> bool {
        let (word, bit) = (row as usize / 64, row % 64);
        match self.0.get_mut(word) {
            Some(bits) if *bits & (1 << bit) == 0 => {
                *bits |= 1 << bit;
                true
            }
            _ => false,
        }
    }
}

/// [`UnitCosineDistance`] between two rows of one encoding: `1 - similarity`, clamped to [0, 2].
pub(crate) fn distance(left: RowRef<'_>, right: RowRef<'_>) -> f32 {
    let distance = 1.0 - left.similarity(right);
    if distance.is_nan() {
        2.0
    } else {
        distance.clamp(0.0, 2.0)
    }
}

/// An HNSW graph over rows `0..rows()` of a chunk table.
#[derive(Debug, Clone)]
pub(crate) struct Graph {
    connections: usize,
    ef_construction: usize,
    /// Levels are below this (at most [`LAYERS`]).
    max_layers: usize,
    /// The level distribution's scale (hnsw_rs's: `1 / ln(connections)`).
    level_scale: f64,
    /// Each row's top layer.
    levels: Vec<u8>,
    /// Layer-0 lists: [`Self::base_cap`] slots per row, the first `base_len[row]` used, nearest first.
    base: Vec<Neighbour>,
    base_len: Vec<u16>,
    /// Lists of layers `1..=levels[row]` (empty for rows of level 0), nearest first.
    upper: Vec<Vec<Vec<Neighbour>>>,
    /// Where searches start: a row of the highest level.
    entry: Option<u32>,
}

impl Graph {
    /// An empty graph for `connections` neighbours per node and layer (twice that at layer 0).
    pub(crate) fn new(
        connections: usize,
        ef_construction: usize,
        max_layers: usize,
        level_scale: f64,
    ) -> Self {
        Self {
            connections,
            ef_construction,
            max_layers: max_layers.clamp(1, LAYERS),
            level_scale,
            levels: Vec::new(),
            base: Vec::new(),
            base_len: Vec::new(),
            upper: Vec::new(),
            entry: None,
        }
    }

    /// hnsw_rs's default level scale for `connections`.
    pub(crate) fn default_level_scale(connections: usize) -> f64 {
        1.0 / (connections.max(2) as f64).ln()
    }

    pub(crate) fn connections(&self) -> usize {
        self.connections
    }

    pub(crate) fn ef_construction(&self) -> usize {
        self.ef_construction
    }

    pub(crate) fn level_scale(&self) -> f64 {
        self.level_scale
    }

    pub(crate) fn rows(&self) -> usize {
        self.levels.len()
    }

    pub(crate) fn level(&self, row: usize) -> usize {
        usize::from(self.levels[row])
    }

    pub(crate) fn entry(&self) -> Option<usize> {
        self.entry.map(|row| row as usize)
    }

    /// The most neighbours a list of `layer` holds.
    pub(crate) fn cap(&self, layer: usize) -> usize {
        if layer == 0 {
            self.base_cap()
        } else {
            self.connections
        }
    }

    fn base_cap(&self) -> usize {
        2 * self.connections
    }

    /// `row`'s neighbours at `layer`, nearest first (empty above its level).
    pub(crate) fn list(&self, row: usize, layer: usize) -> &[Neighbour] {
        if layer == 0 {
            let start = row * self.base_cap();
            let length = self.base_len.get(row).map_or(0, |length| *length as usize);
            self.base.get(start..start + length).unwrap_or(&[])
        } else {
            self.upper
                .get(row)
                .and_then(|lists| lists.get(layer - 1))
                .map_or(&[], Vec::as_slice)
        }
    }

    /// Appends a row of `level` with empty lists; its lists are set with [`Self::set_list`].
    pub(crate) fn push_row(&mut self, level: usize) {
        let level = level.min(self.max_layers - 1);
        self.levels.push(level as u8);
        self.base
            .extend(std::iter::repeat_n((u32::MAX, 0.0), self.base_cap()));
        self.base_len.push(0);
        self.upper.push(vec![Vec::new(); level]);
    }

    /// Sets `row`'s level (a decoded point's), with empty lists above layer 0.
    pub(crate) fn raise_level(&mut self, row: usize, level: usize) {
        let level = level.min(self.max_layers - 1);
        self.levels[row] = level as u8;
        self.upper[row] = vec![Vec::new(); level];
    }

    /// Room for `additional` more rows.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.levels.reserve(additional);
        self.base.reserve(additional * self.base_cap());
        self.base_len.reserve(additional);
        self.upper.reserve(additional);
    }

    /// Sets `row`'s list at `layer` (at most [`Self::cap`] neighbours, nearest first; `layer` at
    /// most the row's level).
    pub(crate) fn set_list(&mut self, row: usize, layer: usize, list: &[Neighbour]) {
        let list = &list[..list.len().min(self.cap(layer))];
        if layer == 0 {
            let start = row * self.base_cap();
            self.base[start..start + list.len()].copy_from_slice(list);
            self.base_len[row] = list.len() as u16;
        } else if let Some(slot) = self.upper[row].get_mut(layer - 1) {
            slot.clear();
            slot.extend_from_slice(list);
        }
    }

    /// Makes `row` the entry point (a row of the highest level).
    pub(crate) fn set_entry(&mut self, row: usize) {
        self.entry = Some(row as u32);
    }

    /// The level row `row` gets when inserted: hnsw_rs's distribution (`floor(-ln(u) * scale)`),
    /// with `u` derived from the row number, so inserting the same rows gives the same graph.
    fn level_for(&self, row: usize) -> usize {
        let mut state = (row as u64) ^ 0x9e37_79b9_7f4a_7c15;
        state = (state ^ (state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        state = (state ^ (state >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        state ^= state >> 31;
        let uniform = ((state >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let level = (-uniform.ln() * self.level_scale).floor();
        (level as usize).min(self.max_layers - 1)
    }

    /// Moves from `current` to ever closer neighbours at `layer` until none is closer.
    fn greedy(
        &self,
        table: &ChunkTable,
        query: RowRef<'_>,
        mut current: Scored,
        layer: usize,
    ) -> Scored {
        loop {
            let mut moved = false;
            for &(neighbour, _) in self.list(current.row as usize, layer) {
                let candidate = distance(query, table.row(neighbour as usize));
                if candidate < current.distance {
                    current = Scored {
                        distance: candidate,
                        row: neighbour,
                    };
                    moved = true;
                }
            }
            if !moved {
                return current;
            }
        }
    }

    /// The best-first search of one layer from `entries`: at most `ef` rows that `admits` accepts,
    /// nearest first. Refused rows are walked through, never returned.
    fn search_layer(
        &self,
        table: &ChunkTable,
        query: RowRef<'_>,
        entries: &[Scored],
        ef: usize,
        layer: usize,
        admits: &dyn Fn(usize) -> bool,
    ) -> Vec<Scored> {
        let mut visited = Visited::new(self.rows());
        let mut candidates: BinaryHeap<std::cmp::Reverse<Scored>> = BinaryHeap::new();
        let mut found: BinaryHeap<Scored> = BinaryHeap::with_capacity(ef + 1);
        for &entry in entries {
            if visited.insert(entry.row) {
                candidates.push(std::cmp::Reverse(entry));
                if admits(entry.row as usize) {
                    found.push(entry);
                    if found.len() > ef {
                        found.pop();
                    }
                }
            }
        }
        while let Some(std::cmp::Reverse(closest)) = candidates.pop() {
            if found.len() >= ef
                && found
                    .peek()
                    .is_some_and(|farthest| closest.distance > farthest.distance)
            {
                break;
            }
            for &(neighbour, _) in self.list(closest.row as usize, layer) {
                if !visited.insert(neighbour) {
                    continue;
                }
                let candidate = Scored {
                    distance: distance(query, table.row(neighbour as usize)),
                    row: neighbour,
                };
                let worth = found.len() < ef
                    || found
                        .peek()
                        .is_some_and(|farthest| candidate.distance < farthest.distance);
                if worth {
                    candidates.push(std::cmp::Reverse(candidate));
                    if admits(neighbour as usize) {
                        found.push(candidate);
                        if found.len() > ef {
                            found.pop();
                        }
                    }
                }
            }
        }
        found.into_sorted_vec()
    }

    /// At most `limit` rows nearest `query` that `admits` accepts, with their distances, nearest
    /// first, searching layer 0 with a candidate list of `ef` (at least `limit`).
    pub(crate) fn search(
        &self,
        table: &ChunkTable,
        query: &[f32],
        limit: usize,
        ef: usize,
        admits: &dyn Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        let Some(entry) = self.entry else {
            return Vec::new();
        };
        let prepared = QueryRow::prepare(table.encoding(), query);
        let query = prepared.as_row();
        let mut current = Scored {
            distance: distance(query, table.row(entry as usize)),
            row: entry,
        };
        for layer in (1..=self.level(entry as usize)).rev() {
            current = self.greedy(table, query, current, layer);
        }
        let mut found = self.search_layer(table, query, &[current], ef.max(limit), 0, admits);
        found.truncate(limit);
        found
            .into_iter()
            .map(|scored| (scored.row as usize, scored.distance))
            .collect()
    }

    /// The neighbour-selection heuristic (hnsw_rs's, without extending the candidates): nearest
    /// first, a candidate is kept only when it is closer to the new row than to every neighbour
    /// kept so far, up to `cap`.
    fn select(&self, table: &ChunkTable, candidates: &[Scored], cap: usize) -> Vec<Neighbour> {
        if candidates.len() <= cap {
            return candidates
                .iter()
                .map(|scored| (scored.row, scored.distance))
                .collect();
        }
        let mut kept: Vec<Neighbour> = Vec::with_capacity(cap);
        for candidate in candidates {
            if kept.len() >= cap {
                break;
            }
            let vector = table.row(candidate.row as usize);
            let dominated = kept.iter().any(|&(other, _)| {
                distance(vector, table.row(other as usize)) <= candidate.distance
            });
            if !dominated {
                kept.push((candidate.row, candidate.distance));
            }
        }
        kept
    }

    /// Adds `new` to `row`'s list at `layer`, keeping it sorted and within its cap (a full list
    /// drops its farthest neighbour, as hnsw_rs's reverse update does).
    fn link(&mut self, row: usize, layer: usize, new: Neighbour) {
        let cap = self.cap(layer);
        let list = self.list(row, layer);
        if list.iter().any(|&(neighbour, _)| neighbour == new.0) {
            return;
        }
        if list.len() >= cap && list.last().is_some_and(|last| last.1 <= new.1) {
            return;
        }
        let at = list.partition_point(|existing| existing.1 <= new.1);
        let mut updated = Vec::with_capacity(list.len() + 1);
        updated.extend_from_slice(&list[..at]);
        updated.push(new);
        updated.extend_from_slice(&list[at..]);
        updated.truncate(cap);
        self.set_list(row, layer, &updated);
    }

    /// Inserts row `rows()` of `table` (rows are inserted in order).
    pub(crate) fn insert(&mut self, table: &ChunkTable) {
        let row = self.rows();
        let level = self.level_for(row);
        self.push_row(level);
        let Some(entry) = self.entry else {
            self.entry = Some(row as u32);
            return;
        };
        let query = table.row(row);
        let top = self.level(entry as usize);
        let mut current = Scored {
            distance: distance(query, table.row(entry as usize)),
            row: entry,
        };
        for layer in (level + 1..=top).rev() {
            current = self.greedy(table, query, current, layer);
        }
        let mut entries = vec![current];
        let own = row as u32;
        for layer in (0..=level.min(top)).rev() {
            let found = self.search_layer(
                table,
                query,
                &entries,
                self.ef_construction,
                layer,
                &|candidate| candidate != row,
            );
            let chosen = self.select(table, &found, self.cap(layer));
            self.set_list(row, layer, &chosen);
            for &(neighbour, distance) in &chosen {
                self.link(neighbour as usize, layer, (own, distance));
            }
            if !found.is_empty() {
                entries = found;
            }
        }
        if level > top {
            self.entry = Some(own);
        }
    }

    /// The graph hnsw_rs built over rows `0..rows` (data ids are rows), in this form. Lists hnsw_rs
    /// keeps above a point's own level (points met while descending) are never searched and are
    /// left out.
    pub(crate) fn from_hnsw(
        built: &Hnsw<'_, f32, UnitCosineDistance>,
        rows: usize,
        max_layers: usize,
    ) -> Option<Self> {
        let indexation = built.get_point_indexation();
        let connections = usize::from(built.get_max_nb_connection());
        let mut graph = Self::new(
            connections,
            built.get_ef_construction(),
            max_layers,
            indexation.get_level_scale(),
        );
        let mut levels = vec![u8::MAX; rows];
        let mut lists: Vec<Vec<Vec<Neighbour>>> = vec![Vec::new(); rows];
        let mut entry = None;
        for layer in 0..built.get_max_level().min(LAYERS) {
            for point in indexation.get_layer_iterator(layer) {
                let row = point.get_origin_id();
                let slot = levels.get_mut(row)?;
                *slot = layer as u8;
                entry = Some(row);
                lists[row] = point
                    .get_neighborhood_id()
                    .into_iter()
                    .take(layer + 1)
                    .map(|list| {
                        list.into_iter()
                            .filter(|neighbour| neighbour.d_id < rows)
                            .map(|neighbour| (neighbour.d_id as u32, neighbour.distance))
                            .collect()
                    })
                    .collect();
            }
        }
        // The entry: the first point of the highest layer (hnsw_rs's own is not public).
        if let Some(top) = entry.map(|row| levels[row]) {
            entry = indexation
                .get_layer_iterator(usize::from(top))
                .next()
                .map(|point| point.get_origin_id());
        }
        graph.reserve(rows);
        for (row, level) in levels.iter().enumerate() {
            if *level == u8::MAX {
                return None;
            }
            graph.push_row(usize::from(*level));
            for (layer, list) in lists[row].iter().enumerate() {
                graph.set_list(row, layer, list);
            }
        }
        graph.entry = entry.map(|row| row as u32);
        Some(graph)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashSet;

    use super::*;
    use crate::index::test_support::{key, meta};

    /// `count` unit vectors of `dimensions` around a few centres, from a fixed seed.
    fn clustered(count: usize, dimensions: usize) -> Vec<Vec<f32>> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let centres: Vec<Vec<f32>> = (0..8)
            .map(|_| (0..dimensions).map(|_| next()).collect())
            .collect();
        (0..count)
            .map(|i| {
                let centre = &centres[i % centres.len()];
                let raw: Vec<f32> = centre.iter().map(|value| value + next() * 0.6).collect();
                let norm = raw.iter().map(|v| v * v).sum::<f32>().sqrt();
                raw.iter().map(|v| v / norm).collect()
            })
            .collect()
    }

    fn table_of(vectors: &[Vec<f32>]) -> ChunkTable {
        let dimensions = vectors[0].len();
        let mut table = ChunkTable::new(dimensions, vectors.len(), vectors.len());
        for (i, vector) in vectors.iter().enumerate() {
            let id = format!("s{i:05}");
            table
                .replace_source(&key(&id), vec![(meta(&id, 0), vector.clone())], 1.0)
                .unwrap();
        }
        table
    }

    fn truth(table: &ChunkTable, query: &[f32], limit: usize) -> HashSet<usize> {
        let mut scored: Vec<(usize, f32)> = (0..table.rows())
            .map(|row| (row, distance(RowRef::F32(query), table.row(row))))
            .collect();
        scored.sort_by(|left, right| left.1.total_cmp(&right.1));
        scored.into_iter().take(limit).map(|(row, _)| row).collect()
    }

    fn recall(graph: &Graph, table: &ChunkTable, queries: &[Vec<f32>]) -> f64 {
        let mut found = 0;
        for query in queries {
            let expected = truth(table, query, 10);
            found += graph
                .search(table, query, 10, 64, &|_| true)
                .iter()
                .filter(|(row, _)| expected.contains(row))
                .count();
        }
        found as f64 / (queries.len() * 10) as f64
    }

    #[test]
    fn inserted_and_converted_graphs_find_the_nearest_rows() {
        let vectors = clustered(2_000, 24);
        let queries = clustered(2_040, 24).split_off(2_000);
        let table = table_of(&vectors);
        let mut inserted = Graph::new(8, 64, 16, Graph::default_level_scale(8));
        for _ in 0..table.rows() {
            inserted.insert(&table);
        }
        let by_insertion = recall(&inserted, &table, &queries);
        assert!(
            by_insertion >= 0.95,
            "recall@10 by insertion {by_insertion}"
        );

        let built = Hnsw::new(8, table.rows(), 16, 64, UnitCosineDistance);
        let vectors: Vec<Vec<f32>> = (0..table.rows()).map(|row| table.vector(row)).collect();
        let points: Vec<(&[f32], usize)> = vectors
            .iter()
            .enumerate()
            .map(|(row, vector)| (vector.as_slice(), row))
            .collect();
        built.parallel_insert_slice(&points);
        let converted = Graph::from_hnsw(&built, table.rows(), 16).unwrap();
        let by_build = recall(&converted, &table, &queries);
        assert!(by_build >= 0.95, "recall@10 after conversion {by_build}");
        for row in 0..converted.rows() {
            for layer in 0..=converted.level(row) {
                assert!(converted.list(row, layer).len() <= converted.cap(layer));
            }
        }
    }

    #[test]
    fn refused_rows_are_walked_through_but_never_returned() {
        let vectors = clustered(500, 8);
        let table = table_of(&vectors);
        let mut graph = Graph::new(6, 32, 16, Graph::default_level_scale(6));
        for _ in 0..table.rows() {
            graph.insert(&table);
        }
        let even = |row: usize| row.is_multiple_of(2);
        let hits = graph.search(&table, &vectors[1], 20, 40, &even);
        assert_eq!(hits.len(), 20);
        assert!(hits.iter().all(|(row, _)| even(*row)));
        assert!(hits.windows(2).all(|pair| pair[0].1 <= pair[1].1));
    }

    #[test]
    fn levels_depend_on_the_row_only() {
        let graph = Graph::new(24, 200, 16, Graph::default_level_scale(24));
        let levels: Vec<usize> = (0..10_000).map(|row| graph.level_for(row)).collect();
        assert_eq!(
            levels,
            (0..10_000)
                .map(|row| graph.level_for(row))
                .collect::<Vec<_>>()
        );
        let above = levels.iter().filter(|level| **level > 0).count();
        // About one row in `connections` is above layer 0.
        assert!((250..=600).contains(&above), "{above}");
    }
}
