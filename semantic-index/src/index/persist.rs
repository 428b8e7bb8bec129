//! The persisted form of an [`HnswIndex`]'s graph: a format of this crate's own, checked before
//! anything is built from it.
//!
//! A graph is encoded as its neighbour lists only (the vector store already holds the vectors),
//! with points numbered by their chunk's position in the canonical order of the chunk set (source
//! key, then ordinal), and a sha256 of the whole encoding at its end. Decoding checks the digest,
//! every count against the bytes left and the table it is for, every point and neighbour reference,
//! and every distance, and fills the [`Graph`] arrays directly: no temporary files, no copy of the
//! vectors (the graph reads them from the table), no allocation per neighbour.
//!
//! Each neighbour is written with its distance to the list's owner. The in-memory [`Graph`] keeps
//! no distances, so encoding computes them from the table and decoding checks and drops them; they
//! stay in the format so that graphs persisted before the graph dropped them still load.
//!
//! Tombstoned points are left out of an encoding: a live point that listed one as a neighbour gets
//! that point's live neighbours as candidates instead, keeping the closest (the usual HNSW deletion
//! repair), so a graph reloaded over the stored vectors alone stays connected.
//!
//! Every point carries one list per layer of the format ([`LAYERS`]); lists above a point's own
//! level are empty when this crate writes them (graphs written by earlier versions, which reloaded
//! through hnsw_rs, may hold some: they are checked and ignored, as searches never read them).

use std::collections::HashSet;

use sha2::{Digest, Sha256};

use super::IndexBounds;
use super::graph::{Graph, LAYERS, Neighbour, distance as graph_distance};
use super::hnsw::{HnswIndex, HnswParams};
use super::table::ChunkTable;
use crate::error::SemanticError;

/// The first bytes of every encoding.
const MAGIC: &[u8; 8] = b"SIHNSW01";
/// Bytes of the header after the magic: dimensions, connections, ef, level scale, layers, points.
const HEADER_BYTES: usize = 4 + 4 + 4 + 8 + 4 + 4;
/// Bytes of one neighbour: its point and the distance to it.
const NEIGHBOUR_BYTES: usize = 4 + 4;
const DIGEST_BYTES: usize = 32;

/// One encoded graph and what it was built over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EncodedGraph {
    /// The encoding.
    pub(crate) bytes: Vec<u8>,
    /// [`vector_set_digest`] of the live rows it indexes.
    pub(crate) vector_set: [u8; 32],
    /// How many points it has.
    pub(crate) chunks: u64,
}

/// A digest of `table`'s live chunk set taken in `order` (the canonical order): source keys,
/// revisions, generations, ordinals, byte ranges and excerpt digests. Two tables with the same digest
/// hold the same chunks (vectors are a function of them under one profile).
pub(crate) fn vector_set_digest(table: &ChunkTable, order: &[usize]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update((order.len() as u64).to_le_bytes());
    for &row in order {
        let meta = table.meta(row);
        for part in [
            meta.source.namespace().as_str(),
            meta.source.id(),
            meta.source.revision(),
        ] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        hasher.update(meta.source.generation().get().to_le_bytes());
        hasher.update(meta.ordinal.to_le_bytes());
        hasher.update(u64::from(meta.start).to_le_bytes());
        hasher.update(u64::from(meta.end).to_le_bytes());
        hasher.update(meta.excerpt_digest);
    }
    hasher.finalize().into()
}

fn corrupt(reason: impl Into<String>) -> SemanticError {
    SemanticError::invalid("persisted graph", reason)
}

/// Encodes `index`'s graph over its live rows.
pub(crate) fn encode(index: &HnswIndex) -> Result<EncodedGraph, SemanticError> {
    let table = &index.table;
    let graph = &index.graph;
    if graph.rows() != table.rows() {
        return Err(corrupt("the graph does not cover its table"));
    }
    let order = table.canonical_order();
    let mut canonical = vec![u32::MAX; table.rows()];
    for (position, &row) in order.iter().enumerate() {
        canonical[row] = u32::try_from(position).map_err(|_| corrupt("too many points"))?;
    }
    let connections = graph.connections();
    if connections > usize::from(u8::MAX) {
        return Err(SemanticError::invalid(
            "hnsw.max_connections",
            "graphs of more than 255 connections per node cannot be persisted",
        ));
    }
    // Points grouped by level, canonical order within a level, except that the entry point (when
    // live) comes first in its group: a reload starts its searches from the first point of the
    // highest level, so it starts where this graph does.
    let mut per_layer: Vec<Vec<usize>> = vec![Vec::new(); LAYERS];
    let entry = graph.entry().filter(|entry| table.is_live(*entry));
    if let Some(entry) = entry {
        per_layer[graph.level(entry)].push(entry);
    }
    for &row in &order {
        if Some(row) != entry {
            per_layer[graph.level(row)].push(row);
        }
    }
    let mut bytes = Vec::with_capacity(
        MAGIC.len()
            + HEADER_BYTES
            + order.len() * (4 + 2 * LAYERS + 3 * connections * NEIGHBOUR_BYTES),
    );
    bytes.extend_from_slice(MAGIC);
    for value in [table.dimensions(), connections, graph.ef_construction()] {
        bytes.extend_from_slice(&u32::try_from(value).unwrap_or(u32::MAX).to_le_bytes());
    }
    bytes.extend_from_slice(&graph.level_scale().to_le_bytes());
    bytes.extend_from_slice(&(LAYERS as u32).to_le_bytes());
    bytes.extend_from_slice(&(order.len() as u32).to_le_bytes());
    for (level, rows) in per_layer.iter().enumerate() {
        bytes.extend_from_slice(&(rows.len() as u32).to_le_bytes());
        for &row in rows {
            bytes.extend_from_slice(&canonical[row].to_le_bytes());
            for layer in 0..LAYERS {
                let list = if layer <= level {
                    repair(table, graph, &canonical, row, layer)
                } else {
                    Vec::new()
                };
                bytes.extend_from_slice(&(list.len() as u16).to_le_bytes());
                for (neighbour, distance) in list {
                    bytes.extend_from_slice(&neighbour.to_le_bytes());
                    bytes.extend_from_slice(&distance.to_le_bytes());
                }
            }
        }
    }
    let digest: [u8; 32] = Sha256::digest(&bytes).into();
    bytes.extend_from_slice(&digest);
    Ok(EncodedGraph {
        bytes,
        vector_set: vector_set_digest(table, &order),
        chunks: order.len() as u64,
    })
}

/// `row`'s neighbour list at `layer` in canonical numbering with each neighbour's distance (the
/// graph keeps none; they are computed from the table), tombstoned neighbours replaced by their
/// live neighbours (closest first, at most what the layer's list may hold, spare slots included).
fn repair(
    table: &ChunkTable,
    graph: &Graph,
    canonical: &[u32],
    row: usize,
    layer: usize,
) -> Vec<(u32, f32)> {
    let list = graph.list(row, layer);
    let live = |candidate: usize| candidate != row && table.is_live(candidate);
    let mut seen: HashSet<usize> = HashSet::new();
    let mut kept: Vec<(usize, f32)> = Vec::with_capacity(list.len());
    let mut lost = false;
    for &neighbour in list {
        let neighbour = neighbour as usize;
        if live(neighbour) {
            if seen.insert(neighbour) {
                kept.push((
                    neighbour,
                    graph_distance(table.row(row), table.row(neighbour)),
                ));
            }
        } else {
            lost = true;
        }
    }
    if lost {
        for &neighbour in list {
            let neighbour = neighbour as usize;
            if live(neighbour) || neighbour >= graph.rows() {
                continue;
            }
            for &candidate in graph.list(neighbour, layer) {
                let candidate = candidate as usize;
                if live(candidate) && seen.insert(candidate) {
                    let distance = graph_distance(table.row(row), table.row(candidate));
                    kept.push((candidate, distance));
                }
            }
        }
        kept.sort_by(|left, right| left.1.total_cmp(&right.1));
        kept.truncate(graph.max_list(layer));
    }
    kept.into_iter()
        .filter_map(|(neighbour, distance)| {
            let position = *canonical.get(neighbour)?;
            (position != u32::MAX).then_some((position, distance))
        })
        .collect()
}

/// A bounds-checked reader over an encoding.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, count: usize) -> Result<&[u8], SemanticError> {
        let end = self
            .at
            .checked_add(count)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| corrupt("truncated"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn u16(&mut self) -> Result<u16, SemanticError> {
        let bytes = self.take(2)?;
        Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
    }

    fn u32(&mut self) -> Result<u32, SemanticError> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn f32(&mut self) -> Result<f32, SemanticError> {
        Ok(f32::from_bits(self.u32()?))
    }

    fn f64(&mut self) -> Result<f64, SemanticError> {
        let bytes = self.take(8)?;
        let mut array = [0u8; 8];
        array.copy_from_slice(bytes);
        Ok(f64::from_le_bytes(array))
    }
}

/// Decodes `bytes` as a graph over vectors of `dimensions` for `params`, checking every count,
/// reference and distance before it is used. Which table it fits is checked by [`attach`]: this
/// half needs none, so it can run while the vectors are still loading.
pub(crate) fn decode_detached(
    bytes: &[u8],
    dimensions: usize,
    params: &HnswParams,
) -> Result<Graph, SemanticError> {
    if bytes.len() < MAGIC.len() + HEADER_BYTES + DIGEST_BYTES {
        return Err(corrupt("truncated"));
    }
    let (body, digest) = bytes.split_at(bytes.len() - DIGEST_BYTES);
    if Sha256::digest(body).as_slice() != digest {
        return Err(corrupt("digest mismatch"));
    }
    let mut reader = Reader { bytes: body, at: 0 };
    if reader.take(MAGIC.len())? != MAGIC {
        return Err(corrupt("not a graph of this format"));
    }
    let stored_dimensions = reader.u32()? as usize;
    let connections = reader.u32()? as usize;
    let ef_construction = reader.u32()? as usize;
    let level_scale = reader.f64()?;
    let layer_count = reader.u32()? as usize;
    let points = reader.u32()? as usize;
    if stored_dimensions != dimensions {
        return Err(corrupt("built for other dimensions"));
    }
    if connections != params.max_connections || ef_construction != params.ef_construction {
        return Err(corrupt("built with other parameters"));
    }
    if !(level_scale.is_finite() && level_scale > 0.0) {
        return Err(corrupt("level scale out of range"));
    }
    if layer_count != LAYERS {
        return Err(corrupt("layer count"));
    }
    // Each point takes at least its row and one count per layer.
    if points == 0 || points.saturating_mul(4 + 2 * LAYERS) > reader.remaining() {
        return Err(corrupt("point count"));
    }
    let mut graph = Graph::new(connections, ef_construction, params.max_layers, level_scale);
    graph.reserve(points);
    for _ in 0..points {
        graph.push_row(0);
    }
    let mut listed = vec![false; points];
    let mut list: Vec<Neighbour> = Vec::with_capacity(graph.max_list(0));
    let mut entry = None;
    let mut total = 0usize;
    for level in 0..LAYERS {
        let count = reader.u32()? as usize;
        total = total.saturating_add(count);
        // Each point takes at least its row and one count per layer.
        if total > points || count.saturating_mul(4 + 2 * LAYERS) > reader.remaining() {
            return Err(corrupt("layer size"));
        }
        if count > 0 && level >= params.max_layers {
            return Err(corrupt("a point above the layers of the parameters"));
        }
        for rank in 0..count {
            let row = reader.u32()? as usize;
            let seen = listed
                .get_mut(row)
                .ok_or_else(|| corrupt("point outside the vectors"))?;
            if *seen {
                return Err(corrupt("point listed twice"));
            }
            *seen = true;
            if rank == 0 {
                entry = Some(row);
            }
            graph.raise_level(row, level);
            for layer in 0..LAYERS {
                let length = usize::from(reader.u16()?);
                if length > graph.max_list(layer)
                    || length.saturating_mul(NEIGHBOUR_BYTES) > reader.remaining()
                {
                    return Err(corrupt("neighbour list size"));
                }
                list.clear();
                for _ in 0..length {
                    let neighbour = reader.u32()?;
                    let distance = reader.f32()?;
                    if neighbour as usize >= points {
                        return Err(corrupt("neighbour outside the vectors"));
                    }
                    if !(0.0..=2.0).contains(&distance) {
                        return Err(corrupt("distance out of range"));
                    }
                    list.push(neighbour);
                }
                if layer <= level {
                    graph.set_list(row, layer, &list);
                }
            }
        }
    }
    if total != points || reader.remaining() != 0 {
        return Err(corrupt("point count"));
    }
    if let Some(entry) = entry {
        graph.set_entry(entry);
    }
    Ok(graph)
}

/// The index answering with a decoded `graph` over `table` (compacted, in canonical order: the
/// rows the graph's points number), with `params` and `bounds`; refused when the graph has another
/// number of points.
pub(crate) fn attach(
    graph: Graph,
    table: ChunkTable,
    params: HnswParams,
    bounds: IndexBounds,
) -> Result<HnswIndex, SemanticError> {
    bounds.validate(table.dimensions())?;
    params.validate()?;
    if graph.rows() != table.rows() || graph.rows() != table.live_count() {
        return Err(corrupt("point count differs from the vectors"));
    }
    Ok(HnswIndex::from_parts(params, table, graph))
}

/// Reloads a graph from `bytes` over `table` ([`decode_detached`], then [`attach`]). Any defect
/// is a typed error.
#[cfg(test)]
pub(crate) fn decode(
    bytes: &[u8],
    table: ChunkTable,
    params: HnswParams,
    bounds: IndexBounds,
) -> Result<HnswIndex, SemanticError> {
    let graph = decode_detached(bytes, table.dimensions(), &params)?;
    attach(graph, table, params, bounds)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::index::test_support::{key, meta, noise, unit};
    use crate::index::{SearchRequest, VectorIndex};

    fn params() -> HnswParams {
        HnswParams {
            max_connections: 4,
            ef_construction: 16,
            ef_search: 16,
            width_grows: false,
            max_layers: 4,
            rebuild_tombstone_fraction: 0.5,
        }
    }

    fn index_of(count: u32) -> HnswIndex {
        let bounds = IndexBounds::with_max_chunks(2, 1_000).unwrap();
        let mut index = HnswIndex::new(2, bounds, params()).unwrap();
        for i in 0..count {
            let id = format!("s{i:03}");
            let angle = i as f32 * 0.05;
            index
                .replace_source(
                    &key(&id),
                    vec![(meta(&id, 0), unit(&[angle.cos(), angle.sin()]))],
                )
                .unwrap();
        }
        index
    }

    fn canonical_table(index: &HnswIndex) -> ChunkTable {
        let order = index.table.canonical_order();
        index.table.reordered(&order, 1_000)
    }

    /// The ids and exact score bits of `index`'s best `limit` hits for `query`.
    fn hits(index: &HnswIndex, query: &[f32], limit: usize) -> Vec<(String, u32)> {
        let request = SearchRequest {
            limit,
            min_score: -1.0,
            max_scanned_chunks: 1_000,
        };
        index
            .search(&unit(query), request)
            .unwrap()
            .hits
            .iter()
            .map(|hit| (hit.chunk.source.key.id.to_string(), hit.score.to_bits()))
            .collect()
    }

    fn ids(index: &HnswIndex) -> Vec<(String, u32)> {
        hits(index, &[1.0, 0.2], 5)
    }

    #[test]
    fn a_graph_round_trips_and_ranks_as_before() {
        let index = index_of(60);
        let encoded = encode(&index).unwrap();
        assert_eq!(encoded.chunks, 60);
        let bounds = IndexBounds::with_max_chunks(2, 1_000).unwrap();
        let decoded = decode(&encoded.bytes, canonical_table(&index), params(), bounds).unwrap();
        assert_eq!(ids(&decoded), ids(&index));
        assert_eq!(decoded.live_chunks(), 60);
    }

    /// A centre (`s000`) and 59 near-duplicates of it in 16 dimensions, one layer of two
    /// connections: rows that no list takes are adopted into spare slots (see `Graph::adopt`).
    fn centre_index() -> (HnswIndex, HnswParams, IndexBounds) {
        let params = HnswParams {
            max_connections: 2,
            max_layers: 1,
            ..params()
        };
        let bounds = IndexBounds::with_max_chunks(16, 1_000).unwrap();
        let mut index = HnswIndex::new(16, bounds, params).unwrap();
        let mut next = noise();
        for i in 0..60u32 {
            let mut row = vec![1.0f32];
            // The centre draws its 15 values too and zeroes them.
            row.extend(
                (0..15)
                    .map(|_| next())
                    .map(|value| if i == 0 { 0.0 } else { value * 0.4 }),
            );
            let id = format!("s{i:03}");
            index
                .replace_source(&key(&id), vec![(meta(&id, 0), unit(&row))])
                .unwrap();
        }
        (index, params, bounds)
    }

    /// Live rows whose layer-0 list uses a spare slot.
    fn spare(index: &HnswIndex) -> usize {
        (0..index.graph.rows())
            .filter(|row| index.table.is_live(*row))
            .filter(|row| index.graph.list(*row, 0).len() > index.graph.cap(0))
            .count()
    }

    fn centre_hits(index: &HnswIndex) -> Vec<(String, u32)> {
        let mut query = vec![0.0f32; 16];
        query[0] = 1.0;
        query[1] = 0.1;
        query[15] = 0.2;
        hits(index, &query, 10)
    }

    #[test]
    fn adopted_rows_in_spare_slots_round_trip() {
        let (index, params, bounds) = centre_index();
        assert!(spare(&index) > 0, "no row was adopted");
        let encoded = encode(&index).unwrap();
        let decoded = decode(&encoded.bytes, canonical_table(&index), params, bounds).unwrap();
        assert_eq!(spare(&decoded), spare(&index));
        assert_eq!(centre_hits(&decoded), centre_hits(&index));
    }

    #[test]
    fn a_list_repaired_around_a_tombstone_keeps_its_spare_slots() {
        // Tombstone a regular neighbour of a list that uses a spare slot: the saved list is
        // repaired around it, and must not be cut back to the regular cap (its adopted rows would
        // be in no list of the reloaded graph).
        let (mut index, params, bounds) = centre_index();
        let host = (0..index.graph.rows())
            .find(|row| index.graph.list(*row, 0).len() > index.graph.cap(0))
            .unwrap();
        let lost = index.graph.list(host, 0)[0] as usize;
        index.remove_source(&key(&format!("s{lost:03}")));
        let before = spare(&index);
        assert!(before > 0);
        let encoded = encode(&index).unwrap();
        let decoded = decode(&encoded.bytes, canonical_table(&index), params, bounds).unwrap();
        assert!(spare(&decoded) >= before, "{} < {before}", spare(&decoded));
    }

    #[test]
    fn tombstoned_points_are_left_out_and_their_neighbours_repaired() {
        let mut index = index_of(60);
        for i in (0..60).step_by(7) {
            index.remove_source(&key(&format!("s{i:03}")));
        }
        let encoded = encode(&index).unwrap();
        assert_eq!(encoded.chunks, 51);
        let bounds = IndexBounds::with_max_chunks(2, 1_000).unwrap();
        let decoded = decode(&encoded.bytes, canonical_table(&index), params(), bounds).unwrap();
        assert_eq!(ids(&decoded), ids(&index));
    }

    #[test]
    fn defects_are_typed_errors() {
        let index = index_of(30);
        let encoded = encode(&index).unwrap();
        let bounds = IndexBounds::with_max_chunks(2, 1_000).unwrap();
        let mut flipped = encoded.bytes.clone();
        flipped[20] ^= 1;
        for bytes in [
            flipped,
            encoded.bytes[..encoded.bytes.len() - 1].to_vec(),
            Vec::new(),
        ] {
            assert!(matches!(
                decode(&bytes, canonical_table(&index), params(), bounds),
                Err(SemanticError::InvalidInput { .. })
            ));
        }
        let other = HnswParams {
            max_connections: 5,
            ..params()
        };
        assert!(decode(&encoded.bytes, canonical_table(&index), other, bounds).is_err());
        let fewer = index_of(29);
        assert!(decode(&encoded.bytes, canonical_table(&fewer), params(), bounds).is_err());
    }
}
