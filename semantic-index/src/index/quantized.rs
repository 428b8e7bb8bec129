//! Compact vectors: the rows an index holds in memory as int8 codes, rescored in f32.
//!
//! **What is compact.** With [`CompactVectors::Int8`] a chunk table keeps each row as 384 int8 codes
//! plus one f32 scale (388 bytes instead of 1,536 at 384 dimensions), and both the exact scan and
//! the HNSW graph's distances score codes against the query's codes ([`crate::kernels::dot_i8`]).
//! The stored vectors stay f32: the store is the port's, and nothing here changes its format.
//!
//! **Per-row scale, not per-dimension.** Each row is scaled by its own largest magnitude
//! (`scale = max |x_i| / 127`, codes `round(x_i / scale)`), symmetric around zero. A
//! per-dimension scale must be trained on the whole corpus before the first row is coded and
//! re-trained (every row re-coded) when later rows fall outside it, which an index that receives
//! its rows one refresh at a time, from many tenants, cannot do without stalls; a per-row scale
//! needs nothing but the row, so a row is coded once, on arrival, and never again. The vectors are
//! unit length, so every row spends its full code range; the cost is 4 bytes a row.
//!
//! **Rescoring, and where its f32 vectors come from.** Code scores rank well but not exactly
//! (a near tie can swap), and results must keep exact f32 scores, so a compact index returns the
//! best `rescore_factor * limit` candidates by code score, marked [`SearchOutcome::rescore`], and
//! the caller rescores them with their f32 vectors ([`rescore`]) and keeps `limit`. Those f32
//! vectors cannot stay in memory (1,000,000 of 384 dimensions are 1.5 GB, the memory the codes
//! save), so they are read from where they already are: the vector store, through the port,
//! for the candidates only (`memory_core::vectors::VectorStore::load_chunk_vectors`, which the
//! engine calls between the search and [`rescore`]; memory-sqlite and memory-postgres implement it
//! and memory-core's vector suite checks it for both). This keeps the layering
//! of ARCHITECTURE.md: the index knows no store, the store knows nothing about codes, and the only
//! copy of the f32 vectors is the persisted one. The index's search stays synchronous (it runs
//! under the engine's state lock); the read happens after it, where the engine is async anyway.
//! A candidate whose stored vector is gone or of another revision is dropped: its document
//! changed, and revalidation would drop it too.
//!
//! **The default is f32** ([`CompactVectors::F32`]): compact vectors are opt-in. Recall is not
//! the reason: on 2,000 real MiniLM vectors (`tests/compact_recall.rs`) the rescored int8 results
//! matched exact f32 search exactly (recall@10 1.0, exact scan and HNSW, filtered or not), and the
//! codes' own top 10 already reached 0.999. The reasons are the costs: every query adds a read
//! through the port (a round trip for a PostgreSQL store) not yet measured against the issue's
//! warm-recall latency goal, and below a few hundred
//! thousand chunks the memory saved does not matter. A deployment at the million-chunk scale turns
//! it on (`SemanticIndexConfig::with_compact_vectors`).

use super::pages::PageVec;
use super::{SearchHit, SearchOutcome, SearchRequest, dot, rank_order};
use crate::error::SemanticError;
use crate::kernels::{MAX_I8_DOT_LEN, dot_i8};

/// Candidates rescored per requested hit. Codes misorder only near ties (a row's code score is
/// within 0.002 of its f32 score on the test's real vectors), so the true top `limit` lies well inside
/// the best `4 * limit` codes; the read stays small (40 vectors, 60 KiB, for a top 10). Measured:
/// recall@10 1.0 against exact f32 on real vectors (`tests/compact_recall.rs`).
pub const DEFAULT_RESCORE_FACTOR: usize = 4;
/// Largest accepted rescore factor: past this the store read costs more than the scan it refines.
pub const MAX_RESCORE_FACTOR: usize = 64;

/// How an index holds its vectors in memory. See the module docs for why f32 is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompactVectors {
    /// Normalized f32 rows; scores are exact.
    #[default]
    F32,
    /// Int8 codes with a per-row scale; the best `rescore_factor * limit` candidates are rescored
    /// in f32 from the stored vectors.
    Int8 {
        /// Candidates rescored per requested hit, 1 to [`MAX_RESCORE_FACTOR`].
        rescore_factor: usize,
    },
}

impl CompactVectors {
    /// Int8 codes with [`DEFAULT_RESCORE_FACTOR`].
    pub fn int8() -> Self {
        Self::Int8 {
            rescore_factor: DEFAULT_RESCORE_FACTOR,
        }
    }

    /// Checks the option for vectors of `dimensions`: a typed error, never a panic.
    pub fn validate(&self, dimensions: usize) -> Result<(), SemanticError> {
        if let Self::Int8 { rescore_factor } = *self {
            if !(1..=MAX_RESCORE_FACTOR).contains(&rescore_factor) {
                return Err(SemanticError::invalid(
                    "compact_vectors.rescore_factor",
                    format!("must be 1 to {MAX_RESCORE_FACTOR}"),
                ));
            }
            if dimensions > MAX_I8_DOT_LEN {
                return Err(SemanticError::invalid(
                    "compact_vectors",
                    format!("int8 codes hold at most {MAX_I8_DOT_LEN} dimensions"),
                ));
            }
        }
        Ok(())
    }

    /// Candidates a search keeps for a request of `limit` hits.
    pub(crate) fn candidates(&self, limit: usize) -> usize {
        match *self {
            Self::F32 => limit,
            Self::Int8 { rescore_factor } => limit.saturating_mul(rescore_factor),
        }
    }

    pub(crate) fn is_compact(&self) -> bool {
        matches!(self, Self::Int8 { .. })
    }
}

/// One segment of a table's rows, in the table's encoding.
#[derive(Debug, Clone)]
pub(crate) enum Segment {
    F32(PageVec<f32>),
    Int8 { codes: Vec<i8>, scales: Vec<f32> },
}

impl Segment {
    /// An empty segment with room for `rows` rows of `dimensions`.
    pub(crate) fn with_rows(compact: CompactVectors, rows: usize, dimensions: usize) -> Self {
        if compact.is_compact() {
            Self::Int8 {
                codes: Vec::with_capacity(rows * dimensions),
                scales: Vec::with_capacity(rows),
            }
        } else {
            Self::F32(PageVec::with_capacity(rows * dimensions))
        }
    }

    /// A copy with room for `rows` rows (a shared segment about to be appended to).
    pub(crate) fn copy_with_room(&self, rows: usize, dimensions: usize) -> Self {
        match self {
            Self::F32(floats) => {
                let mut copy = PageVec::with_capacity((rows * dimensions).max(floats.len()));
                copy.extend_from_slice(floats);
                Self::F32(copy)
            }
            Self::Int8 { codes, scales } => {
                let mut copy = Vec::with_capacity((rows * dimensions).max(codes.len()));
                copy.extend_from_slice(codes);
                let mut row_scales = Vec::with_capacity(rows.max(scales.len()));
                row_scales.extend_from_slice(scales);
                Self::Int8 {
                    codes: copy,
                    scales: row_scales,
                }
            }
        }
    }

    /// Appends a unit row, coding an f32 one when the segment is compact (and decoding codes in an
    /// f32 segment, which no table does); `room` rows are reserved first when it is full.
    pub(crate) fn push(&mut self, row: RowRef<'_>, room: usize) {
        match (self, row) {
            (Self::F32(floats), row) => {
                let decoded;
                let vector = match row {
                    RowRef::F32(vector) => vector,
                    coded @ RowRef::Int8 { .. } => {
                        decoded = coded.to_f32();
                        &decoded
                    }
                };
                let dimensions = vector.len();
                if floats.len() + dimensions > floats.capacity() {
                    floats.reserve_exact(
                        (room * dimensions).max(floats.len() + dimensions) - floats.len(),
                    );
                }
                floats.extend_from_slice(vector);
            }
            (Self::Int8 { codes, scales }, row) => {
                let dimensions = match row {
                    RowRef::F32(vector) => vector.len(),
                    RowRef::Int8 { codes, .. } => codes.len(),
                };
                if codes.len() + dimensions > codes.capacity() {
                    codes.reserve_exact(
                        (room * dimensions).max(codes.len() + dimensions) - codes.len(),
                    );
                    scales.reserve_exact(room.max(scales.len() + 1) - scales.len());
                }
                let scale = match row {
                    RowRef::F32(vector) => quantize_into(vector, codes),
                    RowRef::Int8 {
                        codes: row_codes,
                        scale,
                    } => {
                        codes.extend_from_slice(row_codes);
                        scale
                    }
                };
                scales.push(scale);
            }
        }
    }

    /// Bytes allocated for the rows.
    pub(crate) fn reserved_bytes(&self) -> usize {
        match self {
            Self::F32(floats) => floats.capacity() * 4,
            Self::Int8 { codes, scales } => codes.capacity() + scales.capacity() * 4,
        }
    }

    /// Row `at` of this segment.
    pub(crate) fn row(&self, at: usize, dimensions: usize) -> RowRef<'_> {
        let start = at * dimensions;
        match self {
            Self::F32(floats) => RowRef::F32(&floats[start..start + dimensions]),
            Self::Int8 { codes, scales } => RowRef::Int8 {
                codes: &codes[start..start + dimensions],
                scale: scales[at],
            },
        }
    }

    /// The rows, in order.
    pub(crate) fn rows(&self, dimensions: usize) -> SegmentRows<'_> {
        let dimensions = dimensions.max(1);
        match self {
            Self::F32(floats) => SegmentRows::F32(floats.as_slice().chunks_exact(dimensions)),
            Self::Int8 { codes, scales } => {
                SegmentRows::Int8(codes.chunks_exact(dimensions).zip(scales.iter()))
            }
        }
    }
}

/// The rows of one segment, in order, cut from slices resolved once for the whole segment. An exact
/// scan reads every row: with the segments in [`PageVec`]s, looking each row up through the
/// segment's storage (as [`Segment::row`] does for the graph walk's scattered reads) cut the scan
/// from 72 to 25-28 queries a second on 200,000 vectors; cut from the segment's slice, it gave 74.
pub(crate) enum SegmentRows<'a> {
    F32(std::slice::ChunksExact<'a, f32>),
    Int8(std::iter::Zip<std::slice::ChunksExact<'a, i8>, std::slice::Iter<'a, f32>>),
}

impl<'a> Iterator for SegmentRows<'a> {
    type Item = RowRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<RowRef<'a>> {
        match self {
            Self::F32(rows) => rows.next().map(RowRef::F32),
            Self::Int8(rows) => rows
                .next()
                .map(|(codes, &scale)| RowRef::Int8 { codes, scale }),
        }
    }
}

/// Codes `vector` (appended to `codes`) and returns its scale: `max |x_i| / 127`, so the largest
/// component codes to ±127. A zero vector gets scale 0 (every code 0, every score 0).
pub(crate) fn quantize_into(vector: &[f32], codes: &mut Vec<i8>) -> f32 {
    let largest = vector
        .iter()
        .fold(0.0f32, |max, value| max.max(value.abs()));
    if !(largest.is_finite() && largest > 0.0) {
        codes.extend(std::iter::repeat_n(0, vector.len()));
        return 0.0;
    }
    let scale = largest / 127.0;
    let inverse = 127.0 / largest;
    codes.extend(
        vector
            .iter()
            .map(|value| (value * inverse).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

/// One row as a table holds it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RowRef<'a> {
    F32(&'a [f32]),
    Int8 { codes: &'a [i8], scale: f32 },
}

impl RowRef<'_> {
    /// Requests the row's bytes ahead of a read ([`crate::kernels::prefetch`]).
    #[inline]
    pub(crate) fn prefetch(self) {
        match self {
            Self::F32(floats) => crate::kernels::prefetch(floats),
            Self::Int8 { codes, .. } => crate::kernels::prefetch(codes),
        }
    }

    /// The (approximate, for codes) cosine similarity of two unit rows of the same encoding. Rows
    /// of different encodings never meet (a table has one, and a query is prepared in it); should
    /// they, the f32 side is coded on the spot rather than panicking.
    #[inline]
    pub(crate) fn similarity(self, other: RowRef<'_>) -> f32 {
        match (self, other) {
            (Self::F32(left), RowRef::F32(right)) => dot(left, right),
            (
                Self::Int8 {
                    codes: left,
                    scale: left_scale,
                },
                RowRef::Int8 {
                    codes: right,
                    scale: right_scale,
                },
            ) => dot_i8(left, right) as f32 * left_scale * right_scale,
            (Self::F32(floats), coded @ RowRef::Int8 { .. }) => coded_similarity(floats, coded),
            (coded @ Self::Int8 { .. }, RowRef::F32(floats)) => coded_similarity(floats, coded),
        }
    }

    /// The row in f32 (decoded, for codes).
    pub(crate) fn to_f32(self) -> Vec<f32> {
        match self {
            Self::F32(floats) => floats.to_vec(),
            Self::Int8 { codes, scale } => {
                codes.iter().map(|code| f32::from(*code) * scale).collect()
            }
        }
    }
}

/// `floats` coded on the spot, against `coded`.
fn coded_similarity(floats: &[f32], coded: RowRef<'_>) -> f32 {
    let mut codes = Vec::with_capacity(floats.len());
    let scale = quantize_into(floats, &mut codes);
    RowRef::Int8 {
        codes: &codes,
        scale,
    }
    .similarity(coded)
}

/// A query in a table's encoding, coded once per search.
#[derive(Debug, Clone)]
pub(crate) enum QueryRow<'q> {
    F32(&'q [f32]),
    Int8 { codes: Vec<i8>, scale: f32 },
}

impl<'q> QueryRow<'q> {
    pub(crate) fn prepare(compact: CompactVectors, query: &'q [f32]) -> Self {
        if compact.is_compact() {
            let mut codes = Vec::with_capacity(query.len());
            let scale = quantize_into(query, &mut codes);
            Self::Int8 { codes, scale }
        } else {
            Self::F32(query)
        }
    }

    pub(crate) fn as_row(&self) -> RowRef<'_> {
        match self {
            Self::F32(floats) => RowRef::F32(floats),
            Self::Int8 { codes, scale } => RowRef::Int8 {
                codes,
                scale: *scale,
            },
        }
    }
}

/// Rescores `outcome`'s candidates against `query` with `exact`, their f32 vectors in the order of
/// `outcome.hits` (`None` for a chunk whose stored vector is gone: it is dropped), and keeps the
/// best `request.limit` at or above `request.min_score`, in rank order. An outcome not marked
/// [`SearchOutcome::rescore`] (an f32 index's) is returned as it is.
pub fn rescore(
    query: &[f32],
    outcome: SearchOutcome,
    request: &SearchRequest,
    exact: Vec<Option<Vec<f32>>>,
) -> Result<SearchOutcome, SemanticError> {
    if !outcome.rescore {
        return Ok(outcome);
    }
    if exact.len() != outcome.hits.len() {
        return Err(SemanticError::invalid(
            "rescoring vectors",
            "another number of vectors than of candidates",
        ));
    }
    let mut hits: Vec<SearchHit> = outcome
        .hits
        .into_iter()
        .zip(exact)
        .filter_map(|(hit, vector)| {
            let vector = vector?;
            (vector.len() == query.len()).then(|| SearchHit {
                score: dot(query, &vector),
                chunk: hit.chunk,
            })
        })
        .filter(|hit| hit.score >= request.min_score)
        .collect();
    hits.sort_unstable_by(|left, right| {
        rank_order((&left.chunk, left.score), (&right.chunk, right.score))
    });
    hits.truncate(request.limit);
    Ok(SearchOutcome {
        hits,
        scanned_chunks: outcome.scanned_chunks,
        rescore: false,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::index::test_support::unit;

    #[test]
    fn codes_score_close_to_f32_and_round_trip() {
        let left = unit(&[0.3, -0.9, 0.2, 0.05, 0.6, -0.1]);
        let right = unit(&[0.25, -0.8, 0.4, 0.0, 0.5, -0.3]);
        let (mut left_codes, mut right_codes) = (Vec::new(), Vec::new());
        let left_scale = quantize_into(&left, &mut left_codes);
        let right_scale = quantize_into(&right, &mut right_codes);
        assert_eq!(left_codes.iter().map(|c| c.unsigned_abs()).max(), Some(127));
        let coded = RowRef::Int8 {
            codes: &left_codes,
            scale: left_scale,
        }
        .similarity(RowRef::Int8 {
            codes: &right_codes,
            scale: right_scale,
        });
        let exact = dot(&left, &right);
        // Each code is off by at most half a step (scale / 2); over 6 unit components the score
        // moves by well under 0.02.
        assert!((coded - exact).abs() < 0.02, "{coded} vs {exact}");
        let decoded = RowRef::Int8 {
            codes: &left_codes,
            scale: left_scale,
        }
        .to_f32();
        for (value, back) in left.iter().zip(&decoded) {
            assert!((value - back).abs() <= left_scale / 2.0 + 1e-6);
        }
        let mut zero = Vec::new();
        assert_eq!(quantize_into(&[0.0, 0.0], &mut zero), 0.0);
        assert_eq!(zero, vec![0, 0]);
    }

    #[test]
    fn invalid_options_are_typed_errors() {
        for factor in [0, MAX_RESCORE_FACTOR + 1] {
            assert!(matches!(
                CompactVectors::Int8 {
                    rescore_factor: factor
                }
                .validate(384),
                Err(SemanticError::InvalidInput { .. })
            ));
        }
        assert!(CompactVectors::int8().validate(384).is_ok());
        assert!(CompactVectors::int8().validate(MAX_I8_DOT_LEN + 1).is_err());
        assert!(CompactVectors::F32.validate(MAX_I8_DOT_LEN + 1).is_ok());
        assert_eq!(CompactVectors::default(), CompactVectors::F32);
    }
}
