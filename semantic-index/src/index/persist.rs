//! The persisted form of an [`HnswIndex`]'s graph: a format of this crate's own, checked before
//! hnsw_rs sees anything.
//!
//! hnsw_rs's own dump is not safe to reload from bytes anyone could have written: its reader exits
//! the process or reads out of bounds on malformed input, and it stores a second copy of every vector
//! (the vector store already holds them). So a graph is encoded here as its neighbour lists only,
//! with points numbered by their chunk's position in the canonical order of the chunk set (source
//! key, then ordinal), and a sha256 of the whole encoding at its end. Decoding checks the digest,
//! every count against the bytes left and the table it is for, every point and neighbour reference,
//! and every distance, and only then writes hnsw_rs's file format (graph and vectors, the vectors
//! taken from the loaded table) into a temporary directory and reloads it with hnsw_rs (whose
//! reload is file-based only).
//!
//! Tombstoned points are left out of an encoding: a live point that listed one as a neighbour gets
//! that point's live neighbours as candidates instead, keeping the closest (the usual HNSW deletion
//! repair), so a graph reloaded over the stored vectors alone stays connected.
//!
//! hnsw_rs ties a reloaded graph's lifetime to its loader; the loader (a few hundred bytes: paths and
//! options) is leaked so the graph can be `'static`, once per load.

use std::collections::HashSet;
use std::io::Write;

use hnsw_rs::hnsw::Hnsw;
use hnsw_rs::hnswio::HnswIo;
use sha2::{Digest, Sha256};

use super::hnsw::{HnswIndex, HnswParams, UnitCosineDistance};
use super::table::ChunkTable;
use super::{IndexBounds, dot};
use crate::error::SemanticError;

/// The first bytes of every encoding.
const MAGIC: &[u8; 8] = b"SIHNSW01";
/// Layers hnsw_rs keeps at most (its `NB_LAYER_MAX`).
const LAYERS: usize = 16;
/// Bytes of the header after the magic: dimensions, connections, ef, level scale, layers, points.
const HEADER_BYTES: usize = 4 + 4 + 4 + 8 + 4 + 4;
/// Bytes of one neighbour: its point and the distance to it.
const NEIGHBOUR_BYTES: usize = 4 + 4;
const DIGEST_BYTES: usize = 32;

// hnsw_rs's file-format constants (hnswio.rs, format 4, "full" dump mode).
const MAGIC_DESCRIPTION: u32 = 0x002a_6779;
const MAGIC_LAYER: u32 = 0x000a_676f;
const MAGIC_POINT: u32 = 0x000a_678f;
const MAGIC_DATA: u32 = 0xa67f_0000;

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
            meta.source.key.namespace.as_str(),
            meta.source.key.id.as_str(),
            meta.source.revision.as_str(),
        ] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        hasher.update(meta.source.generation.0.to_le_bytes());
        hasher.update(meta.ordinal.to_le_bytes());
        hasher.update((meta.start as u64).to_le_bytes());
        hasher.update((meta.end as u64).to_le_bytes());
        hasher.update(meta.excerpt_digest);
    }
    hasher.finalize().into()
}

fn corrupt(reason: impl Into<String>) -> SemanticError {
    SemanticError::invalid("persisted graph", reason)
}

/// The most neighbours hnsw_rs keeps at `layer` for `connections` per node.
fn neighbour_cap(layer: usize, connections: usize) -> usize {
    if layer == 0 {
        2 * connections
    } else {
        connections
    }
}

/// A graph point's level and neighbour lists (data ids and distances), by its data id (row).
type RowLists = Vec<Option<(usize, Vec<Vec<(usize, f32)>>)>>;

/// One point of a graph: its row, and its neighbours (rows and distances) for every layer.
struct PointLists {
    row: u32,
    lists: Vec<Vec<(u32, f32)>>,
}

/// Encodes `index`'s graph over its live rows.
pub(crate) fn encode(index: &HnswIndex) -> Result<EncodedGraph, SemanticError> {
    let table = &index.table;
    let order = table.canonical_order();
    let mut canonical = vec![u32::MAX; table.rows()];
    for (position, &row) in order.iter().enumerate() {
        canonical[row] = u32::try_from(position).map_err(|_| corrupt("too many points"))?;
    }
    let connections = index.params.max_connections;
    if connections > usize::from(u8::MAX) {
        return Err(SemanticError::invalid(
            "hnsw.max_connections",
            "graphs of more than 255 connections per node cannot be persisted",
        ));
    }
    let indexation = index.graph.get_point_indexation();
    let layers = index.graph.get_max_level().min(LAYERS);
    // Neighbour lists of every point, tombstones included, by data id (row), for the repair.
    let mut by_row: RowLists = vec![None; table.rows()];
    for layer in 0..layers {
        for point in indexation.get_layer_iterator(layer) {
            let row = point.get_origin_id();
            let Some(slot) = by_row.get_mut(row) else {
                return Err(corrupt("graph point outside the table"));
            };
            // Every layer's list, not only those up to the point's own: hnsw_rs also keeps lists
            // above it (points met while descending), and its searches read them.
            let lists = point
                .get_neighborhood_id()
                .into_iter()
                .take(LAYERS)
                .map(|list| {
                    list.into_iter()
                        .map(|neighbour| (neighbour.d_id, neighbour.distance))
                        .collect()
                })
                .collect();
            *slot = Some((layer, lists));
        }
    }
    let mut per_layer: Vec<Vec<PointLists>> = (0..LAYERS).map(|_| Vec::new()).collect();
    for &row in &order {
        let Some((level, lists)) = &by_row[row] else {
            return Err(corrupt("a live row is missing from the graph"));
        };
        let mut repaired = Vec::with_capacity(lists.len());
        for (layer, list) in lists.iter().enumerate() {
            repaired.push(repair(
                table,
                &by_row,
                &canonical,
                row,
                layer,
                list,
                neighbour_cap(layer, connections),
            ));
        }
        per_layer[*level].push(PointLists {
            row: canonical[row],
            lists: repaired,
        });
    }
    let mut bytes = Vec::new();
    bytes.extend_from_slice(MAGIC);
    for value in [
        table.dimensions(),
        connections,
        index.graph.get_ef_construction(),
    ] {
        bytes.extend_from_slice(&u32::try_from(value).unwrap_or(u32::MAX).to_le_bytes());
    }
    bytes.extend_from_slice(&indexation.get_level_scale().to_le_bytes());
    bytes.extend_from_slice(&(LAYERS as u32).to_le_bytes());
    bytes.extend_from_slice(&(order.len() as u32).to_le_bytes());
    for points in &per_layer {
        bytes.extend_from_slice(&(points.len() as u32).to_le_bytes());
        for point in points {
            bytes.extend_from_slice(&point.row.to_le_bytes());
            for list in &point.lists {
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

/// `row`'s neighbour list at `layer` in canonical numbering, with tombstoned neighbours replaced by
/// their live neighbours (closest first, at most `cap`).
fn repair(
    table: &ChunkTable,
    by_row: &RowLists,
    canonical: &[u32],
    row: usize,
    layer: usize,
    list: &[(usize, f32)],
    cap: usize,
) -> Vec<(u32, f32)> {
    let live = |candidate: usize| candidate != row && table.is_live(candidate);
    let mut seen: HashSet<usize> = HashSet::new();
    let mut kept: Vec<(usize, f32)> = Vec::with_capacity(list.len());
    let mut lost = false;
    for &(neighbour, distance) in list {
        if live(neighbour) {
            if seen.insert(neighbour) {
                kept.push((neighbour, distance));
            }
        } else {
            lost = true;
        }
    }
    if lost {
        for &(neighbour, _) in list {
            if live(neighbour) {
                continue;
            }
            let Some(Some((_, lists))) = by_row.get(neighbour) else {
                continue;
            };
            for &(candidate, _) in lists.get(layer).map_or(&[][..], Vec::as_slice) {
                if live(candidate) && seen.insert(candidate) {
                    let distance = UnitCosineDistanceValue::between(
                        table.vector(row),
                        table.vector(candidate),
                    );
                    kept.push((candidate, distance));
                }
            }
        }
        kept.sort_by(|left, right| left.1.total_cmp(&right.1));
        kept.truncate(cap);
    }
    kept.into_iter()
        .filter_map(|(neighbour, distance)| {
            let position = *canonical.get(neighbour)?;
            (position != u32::MAX).then_some((position, distance))
        })
        .collect()
}

/// The distance hnsw_rs orders neighbours by, for two stored vectors.
struct UnitCosineDistanceValue;

impl UnitCosineDistanceValue {
    fn between(left: &[f32], right: &[f32]) -> f32 {
        let distance = 1.0 - dot(left, right);
        if distance.is_nan() {
            2.0
        } else {
            distance.clamp(0.0, 2.0)
        }
    }
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

/// A decoded, fully checked graph, ready to be written in hnsw_rs's format.
struct CheckedGraph {
    connections: usize,
    ef_construction: usize,
    level_scale: f64,
    /// Per layer, its points in rank order.
    layers: Vec<Vec<PointLists>>,
    /// `(layer, rank)` of every row.
    position_of: Vec<(u8, u32)>,
}

/// Decodes and checks `bytes` as a graph over `table` (compacted, in canonical order) for `params`.
fn check(
    bytes: &[u8],
    table: &ChunkTable,
    params: &HnswParams,
) -> Result<CheckedGraph, SemanticError> {
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
    let dimensions = reader.u32()? as usize;
    let connections = reader.u32()? as usize;
    let ef_construction = reader.u32()? as usize;
    let level_scale = reader.f64()?;
    let layer_count = reader.u32()? as usize;
    let points = reader.u32()? as usize;
    if dimensions != table.dimensions() {
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
    if points != table.rows() || points != table.live_count() || points == 0 {
        return Err(corrupt("point count differs from the vectors"));
    }
    let mut position_of: Vec<(u8, u32)> = vec![(u8::MAX, u32::MAX); points];
    let mut layers: Vec<Vec<PointLists>> = Vec::with_capacity(LAYERS);
    let mut total = 0usize;
    for layer in 0..LAYERS {
        let count = reader.u32()? as usize;
        total = total.saturating_add(count);
        // Each point takes at least its row and one count per layer.
        if total > points || count.saturating_mul(4 + 2 * LAYERS) > reader.remaining() {
            return Err(corrupt("layer size"));
        }
        let mut layer_points = Vec::with_capacity(count);
        for rank in 0..count {
            let row = reader.u32()?;
            let slot = position_of
                .get_mut(row as usize)
                .ok_or_else(|| corrupt("point outside the vectors"))?;
            if slot.0 != u8::MAX {
                return Err(corrupt("point listed twice"));
            }
            *slot = (layer as u8, rank as u32);
            let mut lists = Vec::with_capacity(LAYERS);
            for _ in 0..LAYERS {
                let length = usize::from(reader.u16()?);
                if length > 2 * connections
                    || length.saturating_mul(NEIGHBOUR_BYTES) > reader.remaining()
                {
                    return Err(corrupt("neighbour list size"));
                }
                let mut list = Vec::with_capacity(length);
                for _ in 0..length {
                    let neighbour = reader.u32()?;
                    let distance = reader.f32()?;
                    if neighbour as usize >= points {
                        return Err(corrupt("neighbour outside the vectors"));
                    }
                    if !(0.0..=2.0).contains(&distance) {
                        return Err(corrupt("distance out of range"));
                    }
                    list.push((neighbour, distance));
                }
                lists.push(list);
            }
            layer_points.push(PointLists { row, lists });
        }
        layers.push(layer_points);
    }
    if total != points || reader.remaining() != 0 {
        return Err(corrupt("point count"));
    }
    Ok(CheckedGraph {
        connections,
        ef_construction,
        level_scale,
        layers,
        position_of,
    })
}

/// Reloads a graph from `bytes` over `table` (compacted, in canonical order: the rows the graph's
/// points number), with `params` and `bounds`. Any defect is a typed error; nothing reaches hnsw_rs
/// before every reference in it was checked.
pub(crate) fn decode(
    bytes: &[u8],
    table: ChunkTable,
    params: HnswParams,
    bounds: IndexBounds,
) -> Result<HnswIndex, SemanticError> {
    bounds.validate(table.dimensions())?;
    params.validate()?;
    let checked = check(bytes, &table, &params)?;
    let directory = tempfile::tempdir().map_err(|_| SemanticError::Task {
        what: "graph reload directory",
    })?;
    write_hnsw_files(directory.path(), &checked, &table).map_err(|_| SemanticError::Task {
        what: "graph reload files",
    })?;
    let loader: &'static HnswIo = Box::leak(Box::new(HnswIo::new(directory.path(), "graph")));
    let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        loader.load_hnsw_with_dist(UnitCosineDistance)
    }));
    let graph: Hnsw<'static, f32, UnitCosineDistance> = match loaded {
        Ok(Ok(graph)) => graph,
        Ok(Err(_)) | Err(_) => return Err(corrupt("hnsw_rs refused the graph")),
    };
    Ok(HnswIndex::from_parts(params, table, graph))
}

/// Writes `graph` in hnsw_rs's dump format: `graph.hnsw.graph` and `graph.hnsw.data`.
fn write_hnsw_files(
    directory: &std::path::Path,
    graph: &CheckedGraph,
    table: &ChunkTable,
) -> std::io::Result<()> {
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(directory.join("graph.hnsw.graph"))?);
    let distance_name = std::any::type_name::<UnitCosineDistance>();
    let value_name = std::any::type_name::<f32>();
    out.write_all(&MAGIC_DESCRIPTION.to_ne_bytes())?;
    out.write_all(&1u8.to_ne_bytes())?;
    out.write_all(&(graph.connections as u8).to_ne_bytes())?;
    out.write_all(&graph.level_scale.to_ne_bytes())?;
    out.write_all(&(LAYERS as u8).to_ne_bytes())?;
    out.write_all(&graph.ef_construction.to_ne_bytes())?;
    out.write_all(&table.rows().to_ne_bytes())?;
    out.write_all(&table.dimensions().to_ne_bytes())?;
    for name in [distance_name, value_name] {
        out.write_all(&name.len().to_ne_bytes())?;
        out.write_all(name.as_bytes())?;
    }
    let mut data =
        std::io::BufWriter::new(std::fs::File::create(directory.join("graph.hnsw.data"))?);
    data.write_all(&MAGIC_DATA.to_ne_bytes())?;
    data.write_all(&table.dimensions().to_ne_bytes())?;
    out.write_all(&(LAYERS as u8).to_ne_bytes())?;
    for (layer, points) in graph.layers.iter().enumerate() {
        out.write_all(&MAGIC_LAYER.to_ne_bytes())?;
        out.write_all(&points.len().to_ne_bytes())?;
        for (rank, point) in points.iter().enumerate() {
            let row = point.row as usize;
            out.write_all(&MAGIC_POINT.to_ne_bytes())?;
            out.write_all(&row.to_ne_bytes())?;
            out.write_all(&(layer as u8).to_ne_bytes())?;
            out.write_all(&(rank as i32).to_ne_bytes())?;
            for list_layer in 0..LAYERS {
                let list = point.lists.get(list_layer).map_or(&[][..], Vec::as_slice);
                out.write_all(&list.len().to_ne_bytes())?;
                for (neighbour, distance) in list {
                    let (neighbour_layer, neighbour_rank) = graph.position_of[*neighbour as usize];
                    out.write_all(&(*neighbour as usize).to_ne_bytes())?;
                    out.write_all(&neighbour_layer.to_ne_bytes())?;
                    out.write_all(&(neighbour_rank as i32).to_ne_bytes())?;
                    out.write_all(&distance.to_ne_bytes())?;
                }
            }
            let vector = table.vector(row);
            data.write_all(&MAGIC_DATA.to_ne_bytes())?;
            data.write_all(&(row as u64).to_ne_bytes())?;
            data.write_all(&((vector.len() * 4) as u64).to_ne_bytes())?;
            for value in vector {
                data.write_all(&value.to_ne_bytes())?;
            }
        }
    }
    // The entry point: a point of the highest non-empty layer.
    let (entry_layer, entry) = graph
        .layers
        .iter()
        .enumerate()
        .rev()
        .find_map(|(layer, points)| points.first().map(|point| (layer, point)))
        .ok_or_else(|| std::io::Error::other("empty graph"))?;
    out.write_all(&(entry.row as usize).to_ne_bytes())?;
    out.write_all(&(entry_layer as u8).to_ne_bytes())?;
    out.write_all(&0i32.to_ne_bytes())?;
    out.flush()?;
    data.flush()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::index::test_support::{key, meta, unit};
    use crate::index::{SearchRequest, VectorIndex};

    fn params() -> HnswParams {
        HnswParams {
            max_connections: 4,
            ef_construction: 16,
            ef_search: 16,
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

    fn ids(index: &HnswIndex) -> Vec<(String, u32)> {
        let request = SearchRequest {
            limit: 5,
            min_score: -1.0,
            max_scanned_chunks: 1_000,
        };
        index
            .search(&unit(&[1.0, 0.2]), request)
            .unwrap()
            .hits
            .iter()
            .map(|hit| (hit.chunk.source.key.id.to_string(), hit.score.to_bits()))
            .collect()
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
