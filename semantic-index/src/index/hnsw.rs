//! The approximate index: an HNSW graph ([`Graph`]) over the rows of a [`ChunkTable`].
//!
//! [`Graph`] holds the neighbour lists and reads the vectors from the table instead of keeping a
//! copy; a build inserts every row on every core ([`Graph::insert_all`]), and the increments applied
//! to a built or loaded graph insert one row at a time. Deleting points
//! is not supported, so replaced chunks stay in the graph as tombstones that the search filter
//! skips; once tombstones pass [`HnswParams::rebuild_tombstone_fraction`] of the rows (or new rows
//! would not fit the table), the table is compacted and the graph rebuilt from the live rows. A
//! standalone index rebuilds inline; the one a [`crate::SemanticIndex`] holds defers rebuilds
//! ([`HnswIndex::needs_rebuild`]): the engine builds a new graph from a snapshot on a background
//! thread while this one keeps answering, so no query waits for a rebuild. Parameters are
//! validated before any graph is built.
//!
//! A namespace-filtered search scans the namespace's rows instead of walking when that is the
//! cheaper (`scan_beats_walk`: up to about `sqrt(5 * width * live rows)` of them, 8,000 in a
//! 100,000-row index at the default width), so a small tenant in a large shared index costs what
//! its own rows cost and its recall is exact.
//!
//! The graph is always built and walked over int8 codes (`walk.rs`). With compact vectors
//! ([`HnswIndex::with_compact`]) those are the table's own rows, and a search returns its best
//! `rescore_factor * limit` candidates for [`super::rescore`] (its candidate list is at least that
//! wide); a build reads the codes as they are: no f32 copy of a row is made. An f32 table keeps a
//! coded copy of its rows beside them for the graph ([`WalkCodes`], a quarter of the rows' memory
//! again), and a search ranks as many of the walk's best candidates as a compact index would
//! rescore by their exact scores from the table, so every score it answers is exact.

use memory_core::MemoryKey;

use super::exact::ExactIndex;
use super::graph::Graph;
use super::quantized::CompactVectors;
use super::table::{ChunkTable, Replacement, RowVector};
use super::walk::{WalkCodes, WalkRows};
use super::{
    ChunkMeta, IndexBounds, IndexKind, SearchOutcome, SearchRequest, SourceChunks, SourceFilter,
    VectorIndex, admitted_rows, check_query, check_request, rank_order, scan_table,
};
use crate::error::SemanticError;

/// Layers a graph may have (the persisted format's).
const MAX_LAYERS: usize = super::graph::LAYERS;
/// Most connections per node: the persisted format counts them in a byte, and far past any useful
/// graph.
const MAX_CONNECTIONS_LIMIT: usize = 256;
/// Upper bound on `ef_construction` and `ef_search`: beyond this the graph is slower than a scan.
const MAX_EF: usize = 10_000;

/// Rows up to which a growing search width stays at [`HnswParams::ef_search`]
/// ([`HnswParams::width_for`]).
pub const WIDTH_BASE_ROWS: usize = 100_000;
/// How fast a growing search width follows the index past [`WIDTH_BASE_ROWS`]: the width is
/// `ef_search * (rows / WIDTH_BASE_ROWS)^WIDTH_EXPONENT`, at most [`WIDTH_MAX_FACTOR`] times
/// `ef_search` (see [`HnswParams::width_for`] for what was measured).
pub const WIDTH_EXPONENT: f64 = 1.5;
/// The most a growing search width grows: this many times [`HnswParams::ef_search`].
pub const WIDTH_MAX_FACTOR: usize = 10;

/// HNSW parameters. The defaults reach recall@10 of at least 0.95 against the exact index on 10,000
/// all-MiniLM-L6-v2 vectors (the crate's `hnsw_recall` test).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HnswParams {
    /// Neighbours kept per node and layer (twice that at layer 0), 2 to 256.
    pub max_connections: usize,
    /// Candidate-list width while building, at least `max_connections`.
    pub ef_construction: usize,
    /// Candidate-list width while searching an index of up to [`WIDTH_BASE_ROWS`] rows, or of any
    /// size when `width_grows` is false (raised to the request's limit when that is larger).
    pub ef_search: usize,
    /// Whether the search width follows the index's size past [`WIDTH_BASE_ROWS`]
    /// ([`Self::width_for`]): the default; a width the caller chose (`--hnsw-ef-search`,
    /// [`HnswIndex::set_ef_search`]) is used as it is at every size.
    pub width_grows: bool,
    /// Graph layers, 1 to 16.
    pub max_layers: usize,
    /// Share of tombstoned rows above which the graph is rebuilt, in (0, 1).
    pub rebuild_tombstone_fraction: f64,
}

impl Default for HnswParams {
    fn default() -> Self {
        Self {
            max_connections: 24,
            ef_construction: 200,
            ef_search: 128,
            width_grows: true,
            max_layers: MAX_LAYERS,
            rebuild_tombstone_fraction: 0.2,
        }
    }
}

impl HnswParams {
    /// The search width in effect over `rows` live rows: [`Self::ef_search`] up to
    /// [`WIDTH_BASE_ROWS`] rows or when the width does not grow, else `ef_search` times
    /// `(rows / WIDTH_BASE_ROWS)^WIDTH_EXPONENT`, at most [`WIDTH_MAX_FACTOR`] times `ef_search`
    /// (and the parameters' upper bound). By default: 128 up to 100,000 rows, 363 at 200,000 and
    /// 1,280 from about 465,000 on.
    ///
    /// Why it grows: a graph walk of fixed width finds a shrinking share of the true neighbours as
    /// the graph grows. On real-model-derived vectors (`memory-eval dump-vectors`), recall@10 at
    /// width 128 was 0.95 at 100,000 rows but 0.70 at 1,000,000 (hnswlib with the same M and
    /// `ef_construction` level with it), so a large store quietly lost a third of its nearest
    /// neighbours at the old fixed default.
    ///
    /// How fast, measured on that file (480 real-model queries, one thread, 2 cores;
    /// `memory-eval bench-hnsw --vectors ... --ef ...` and `scripts/compare.sh`; width: recall@10,
    /// p50 / p95 ms):
    /// - at 200,000 f32 rows, before adoption (`COMPARE_SIZE=200000 scripts/compare.sh`): 256:
    ///   0.928; 384: 0.962; 512: 0.974. Faster than linearly, then: a linear rule's 256 fell short
    ///   of 0.95, the exponent 1.5 gives 363;
    /// - at 1,000,000 f32 rows, before adoption: 128: 0.724; 512: 0.880; 1,024: 0.920; 1,280:
    ///   0.933; 2,048: 0.943; 3,072: 0.948 (4,096: 0.949). The curve flattened because 14% of the
    ///   rows were in no layer-0 list, so no width reached them;
    /// - at 1,000,000 f32 rows, with adoption (`Graph::adopt`, 2026-12-06): 640: 0.888, 0.46 /
    ///   0.76; **1,280 (the cap, the default at this size): 0.955, 0.79 / 1.32**; 2,048: 0.974,
    ///   1.36 / 2.05; 3,072: 0.983, 2.14 / 3.05. The build took 93 s;
    /// - at 200,000 f32 rows, with adoption (`scripts/compare.sh`): 256: 0.932; 363 (the default
    ///   there): 0.965; 384: 0.967; 512: 0.980;
    /// - at 1,000,000 f32 rows, with the vectors and lists on huge pages (`index/pages.rs`) and
    ///   three spare slots: 640: 0.887, 0.38 / 0.55; **1,280: 0.954, 0.68 / 0.97**; 2,048: 0.974,
    ///   1.11 / 1.50; 3,072: 0.983, 1.77 / 2.31. The build took 84 s;
    /// - at 1,000,000 f32 rows, the graph built and walked over int8 codes of the rows and the
    ///   best 40 candidates ranked by their exact scores (`walk.rs`): 640: 0.887, 0.32 / 0.51;
    ///   **1,280: 0.958, 0.55 / 0.86**; 2,048: 0.976, 0.88 / 1.29; 3,072: 0.985, 1.36 / 1.89. The
    ///   build took 68 s.
    ///
    /// The cap stays at 1,280: it reaches 0.95 at a million rows of this file with p95 well under
    /// 5 ms; a caller who needs more fixes a wider width or searches `exact`.
    pub fn width_for(&self, rows: usize) -> usize {
        if !self.width_grows || rows <= WIDTH_BASE_ROWS {
            return self.ef_search;
        }
        let scale = (rows as f64 / WIDTH_BASE_ROWS as f64).powf(WIDTH_EXPONENT);
        let most = self.ef_search.saturating_mul(WIDTH_MAX_FACTOR).min(MAX_EF);
        ((self.ef_search as f64 * scale).ceil() as usize).clamp(self.ef_search, most)
    }

    /// Checks every parameter's range.
    pub fn validate(&self) -> Result<(), SemanticError> {
        if !(2..=MAX_CONNECTIONS_LIMIT).contains(&self.max_connections) {
            return Err(SemanticError::invalid(
                "hnsw.max_connections",
                format!("must be 2 to {MAX_CONNECTIONS_LIMIT}"),
            ));
        }
        if self.ef_construction < self.max_connections || self.ef_construction > MAX_EF {
            return Err(SemanticError::invalid(
                "hnsw.ef_construction",
                format!("must be max_connections to {MAX_EF}"),
            ));
        }
        if self.ef_search == 0 || self.ef_search > MAX_EF {
            return Err(SemanticError::invalid(
                "hnsw.ef_search",
                format!("must be 1 to {MAX_EF}"),
            ));
        }
        if !(1..=MAX_LAYERS).contains(&self.max_layers) {
            return Err(SemanticError::invalid(
                "hnsw.max_layers",
                format!("must be 1 to {MAX_LAYERS}"),
            ));
        }
        if !(self.rebuild_tombstone_fraction > 0.0 && self.rebuild_tombstone_fraction < 1.0) {
            return Err(SemanticError::invalid(
                "hnsw.rebuild_tombstone_fraction",
                "must be between 0 and 1, exclusive",
            ));
        }
        Ok(())
    }
}

/// An HNSW graph plus the rows it indexes.
pub struct HnswIndex {
    pub(super) params: HnswParams,
    pub(super) table: ChunkTable,
    /// Over rows `0..table.rows()`, tombstones included.
    pub(super) graph: Graph,
    /// The int8 codes of an f32 table's rows, which its graph is built and walked over
    /// (`walk.rs`); `None` for a compact table, which is walked itself.
    walk: Option<WalkCodes>,
    /// Whether tombstones past the rebuild fraction are left for a background rebuild (the engine's
    /// graph) instead of rebuilding inline.
    deferred: bool,
}

/// Room for tombstones in the table of a graph whose rebuilds are deferred: while a background
/// rebuild runs, replaced rows accumulate past the rebuild fraction; only past this share of the
/// capacity does the graph fall back to rebuilding inline.
const DEFERRED_ROW_HEADROOM: usize = 2;

fn deferred_rows(max_chunks: usize) -> usize {
    max_chunks.saturating_add(max_chunks / DEFERRED_ROW_HEADROOM)
}

impl std::fmt::Debug for HnswIndex {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("HnswIndex")
            .field("params", &self.params)
            .field("rows", &self.table.rows())
            .field("live", &self.table.live_count())
            .finish_non_exhaustive()
    }
}

impl HnswIndex {
    /// An empty index; bounds and parameters are checked before anything is built.
    pub fn new(
        dimensions: usize,
        bounds: IndexBounds,
        params: HnswParams,
    ) -> Result<Self, SemanticError> {
        Self::with_compact(dimensions, bounds, params, CompactVectors::F32)
    }

    /// [`Self::new`] holding the vectors as `compact` says (checked with the rest).
    pub fn with_compact(
        dimensions: usize,
        bounds: IndexBounds,
        params: HnswParams,
        compact: CompactVectors,
    ) -> Result<Self, SemanticError> {
        bounds.validate(dimensions)?;
        params.validate()?;
        compact.validate(dimensions)?;
        let table =
            ChunkTable::with_encoding(dimensions, bounds.max_chunks, bounds.max_chunks, compact);
        Ok(Self::from_parts(params, table, empty_graph(&params)))
    }

    /// Leaves rebuilds to the owner ([`Self::needs_rebuild`]) instead of running them inline, and
    /// gives the table headroom for the tombstones that accumulate meanwhile (up to half the
    /// capacity again, `bounds.max_chunks * 3 / 2` rows, within which memory stays bounded).
    pub(crate) fn defer_rebuilds(&mut self, bounds: IndexBounds) {
        self.deferred = true;
        self.table.set_max_rows(deferred_rows(bounds.max_chunks));
    }

    /// Whether tombstones passed [`HnswParams::rebuild_tombstone_fraction`] of the rows: a deferred
    /// graph's owner should build a replacement.
    pub fn needs_rebuild(&self) -> bool {
        self.table.tombstones() as f64 / self.table.rows().max(1) as f64
            > self.params.rebuild_tombstone_fraction
    }

    /// Rows replaced or withdrawn but still in the graph (filtered out of every search).
    pub fn tombstones(&self) -> usize {
        self.table.tombstones()
    }

    /// Bytes of the int8 copy of an f32 table's rows that the graph walks (`walk.rs`); 0 for a
    /// compact index, whose graph walks the table's own codes.
    pub fn reserved_walk_bytes(&self) -> usize {
        self.walk.as_ref().map_or(0, WalkCodes::reserved_bytes)
    }

    /// Changes the search width ([`HnswParams::ef_search`]) of later searches, at every size (the
    /// width no longer grows with the index); the graph is unchanged. Refused, changing nothing, outside 1 to the parameters' upper bound.
    pub fn set_ef_search(&mut self, ef_search: usize) -> Result<(), SemanticError> {
        let params = HnswParams {
            ef_search,
            width_grows: false,
            ..self.params
        };
        params.validate()?;
        self.params = params;
        Ok(())
    }

    /// An index of `graph` over `table` (a loaded graph, or an empty one), coding an f32 table's
    /// rows for the walk.
    pub(super) fn from_parts(params: HnswParams, table: ChunkTable, graph: Graph) -> Self {
        let walk = walk_codes(&table);
        Self::with_walk(params, table, graph, walk)
    }

    fn with_walk(
        params: HnswParams,
        table: ChunkTable,
        graph: Graph,
        walk: Option<WalkCodes>,
    ) -> Self {
        Self {
            params,
            table,
            graph,
            walk,
            deferred: false,
        }
    }

    /// Builds an index over `table`'s live rows (compacted first, so row numbers are dense), checking
    /// `cancelled` between batches of insertions: `None` when it was cancelled. This is how a restart
    /// builds its graph off the query path; `params` and the table's bounds are checked first.
    pub(crate) fn build_from_table(
        mut table: ChunkTable,
        bounds: IndexBounds,
        params: HnswParams,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<Self>, SemanticError> {
        bounds.validate(table.dimensions())?;
        params.validate()?;
        table.compact();
        let walk = walk_codes(&table);
        let Some(graph) = build_graph(&table, walk.as_ref(), &params, cancelled) else {
            return Ok(None);
        };
        Ok(Some(Self::with_walk(params, table, graph, walk)))
    }

    /// A graph over `exact`'s live rows, in the calling thread (on every core): what the engine
    /// builds beside the exact index it keeps answering from. The new index shares `exact`'s
    /// vectors (no copy) and holds its own row metadata and graph; `bounds` and `params` are
    /// checked first.
    pub fn build_over(
        exact: &ExactIndex,
        bounds: IndexBounds,
        params: HnswParams,
    ) -> Result<Self, SemanticError> {
        Self::build_from_table(exact.snapshot(), bounds, params, &|| false)?
            .ok_or(SemanticError::Task { what: "hnsw build" })
    }

    /// Replaces `key`'s chunks with rows whose vectors are shared (with the exact index's table):
    /// [`VectorIndex::replace_source`] without copying the vectors.
    pub(crate) fn replace_shared(
        &mut self,
        key: &MemoryKey,
        rows: Vec<(ChunkMeta, RowVector)>,
    ) -> Result<(), SemanticError> {
        let replacement = self.table.replace_shared(key, rows, f64::INFINITY)?;
        self.follow(replacement);
        Ok(())
    }

    /// Brings the graph in step with a replacement in the table: inserts the new rows, or rebuilds
    /// when the table was compacted (every row renumbered) or tombstones passed the fraction.
    fn follow(&mut self, replacement: Replacement) {
        if replacement.compacted || (!self.deferred && self.needs_rebuild()) {
            self.rebuild();
        } else if let Some(codes) = &mut self.walk {
            codes.extend(&self.table);
            for _ in replacement.new_rows {
                self.graph.insert(codes);
            }
        } else {
            for _ in replacement.new_rows {
                self.graph.insert(&self.table);
            }
        }
    }

    /// Rebuilds the graph from the table's live rows (after compaction, so row numbers are dense).
    fn rebuild(&mut self) {
        self.table.compact();
        self.walk = walk_codes(&self.table);
        if let Some(graph) = build_graph(&self.table, self.walk.as_ref(), &self.params, &|| false) {
            self.graph = graph;
        }
    }
}

/// A graph over every row of a compacted `table`, walking `walk` when it has one (an f32 table's
/// codes), inserted on every core, or `None` when `cancelled` said so between batches.
fn build_graph(
    table: &ChunkTable,
    walk: Option<&WalkCodes>,
    params: &HnswParams,
    cancelled: &dyn Fn() -> bool,
) -> Option<Graph> {
    match walk {
        Some(codes) => build_over(codes, params, cancelled),
        None => build_over(table, params, cancelled),
    }
}

/// [`build_graph`] over `rows`.
fn build_over<R: WalkRows + ?Sized>(
    rows: &R,
    params: &HnswParams,
    cancelled: &dyn Fn() -> bool,
) -> Option<Graph> {
    let mut graph = empty_graph(params);
    graph.reserve(rows.rows());
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    graph.insert_all(rows, threads, cancelled).then_some(graph)
}

/// The codes an f32 table's graph walks; `None` for a compact table (`walk.rs`).
fn walk_codes(table: &ChunkTable) -> Option<WalkCodes> {
    (!table.encoding().is_compact()).then(|| WalkCodes::of(table))
}

fn empty_graph(params: &HnswParams) -> Graph {
    Graph::new(
        params.max_connections,
        params.ef_construction,
        params.max_layers,
        Graph::default_level_scale(params.max_connections),
    )
}

impl VectorIndex for HnswIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::Hnsw
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
        // Compaction is decided here (not by the table's own threshold) because it forces a rebuild.
        let replacement = self.table.replace_source(key, chunks, f64::INFINITY)?;
        self.follow(replacement);
        Ok(())
    }

    fn replace_sources(&mut self, sources: Vec<SourceChunks>) -> Result<(), SemanticError> {
        // Rows first, graph once: one parallel build instead of one insertion per chunk.
        let mut result = Ok(());
        for (key, chunks) in sources {
            if let Err(error) = self.table.replace_source(&key, chunks, f64::INFINITY) {
                result = Err(error);
                break;
            }
        }
        self.rebuild();
        result
    }

    fn remove_source(&mut self, key: &MemoryKey) {
        if self.table.remove_source(key) > 0 && !self.deferred && self.needs_rebuild() {
            self.rebuild();
        }
    }

    fn search_in(
        &self,
        query: &[f32],
        request: SearchRequest,
        filter: SourceFilter<'_>,
    ) -> Result<SearchOutcome, SemanticError> {
        check_request(&request)?;
        check_query(query, self.table.dimensions())?;
        let compact = self.table.encoding();
        let keep = compact.candidates(request.limit);
        let width = self.params.width_for(self.table.live_count()).max(keep);
        if width > request.max_scanned_chunks {
            return Err(SemanticError::Budget {
                limit: "max_scanned_chunks",
                max: request.max_scanned_chunks as u64,
                actual: width as u64,
            });
        }
        let admitted = admitted_rows(&self.table, filter);
        if admitted == 0 {
            return Ok(SearchOutcome::default());
        }
        if filter != SourceFilter::All
            && admitted <= request.max_scanned_chunks
            && scan_beats_walk(admitted, width, self.table.live_count())
        {
            // A small filtered set is scanned exactly: cheaper than the graph walk, and a walk
            // through mostly filtered-out nodes could miss some of it.
            return Ok(SearchOutcome {
                hits: scan_table(&self.table, query, &request, filter)?,
                scanned_chunks: admitted,
                rescore: compact.is_compact(),
            });
        }
        // An unfiltered walk reads no row's metadata: its namespace is in the source's record,
        // two dependent reads away, for every candidate the walk keeps.
        let admits = |row: usize| {
            self.table.is_live(row)
                && (filter == SourceFilter::All
                    || filter.admits_namespace(self.table.meta(row).source.namespace()))
        };
        let neighbours = match &self.walk {
            // As many candidates as a compact index rescores, ranked below by their exact
            // scores: the codes only steered the walk.
            Some(codes) => {
                let candidates = codes.encoding().candidates(keep);
                self.graph.search(codes, query, candidates, width, &admits)
            }
            None => self.graph.search(&self.table, query, keep, width, &admits),
        };
        // Scores are recomputed from the rows so both indexes rank with identical numbers (code
        // scores for a compact table, which are then rescored, unfiltered, by the caller).
        let prepared = super::quantized::QueryRow::prepare(compact, query);
        let min_score = if compact.is_compact() {
            f32::NEG_INFINITY
        } else {
            request.min_score
        };
        let mut hits: Vec<(usize, f32)> = neighbours
            .into_iter()
            .map(|(row, _)| (row, prepared.as_row().similarity(self.table.row(row))))
            .filter(|(_, score)| *score >= min_score)
            .collect();
        hits.sort_unstable_by(|left, right| {
            rank_order(
                (self.table.meta(left.0), left.1),
                (self.table.meta(right.0), right.1),
            )
        });
        hits.truncate(keep);
        let scanned = width.min(admitted);
        if filter != SourceFilter::All
            && hits.len() < keep
            && scanned + admitted <= request.max_scanned_chunks
        {
            // A filtered walk can come back short when the admitted nodes are a small,
            // poorly connected share of the graph; a scan of the admitted rows, when the budget
            // allows it, returns the full candidate count instead.
            return Ok(SearchOutcome {
                hits: scan_table(&self.table, query, &request, filter)?,
                scanned_chunks: scanned + admitted,
                rescore: compact.is_compact(),
            });
        }
        Ok(SearchOutcome {
            hits: hits
                .into_iter()
                .map(|(row, score)| self.table.hit(row, score))
                .collect::<Result<_, _>>()?,
            scanned_chunks: scanned,
            rescore: compact.is_compact(),
        })
    }
}

/// Rows a filtered walk scores, per row of its width, once the walk has to pass through
/// `live / admitted` rows for each admitted one it keeps (fitted below).
const WALK_ROWS_PER_WIDTH: f64 = 5.0;

/// Whether a search whose filter admits `admitted` of `live` rows should scan them rather than
/// walk the graph at `width`. A walk keeps only admitted rows, so to fill its candidate list it
/// scores about `WALK_ROWS_PER_WIDTH * width * live / admitted` rows, while the scan scores
/// `admitted`: the scan is the cheaper while `admitted^2 <= WALK_ROWS_PER_WIDTH * width * live`,
/// which holds for every set no larger than the width (`admitted <= live`). `cargo bench -p semantic-index --bench
/// filtered_walk` (100,000 rows, namespaces scattered through them, width 128, 2 cores) timed
/// the walk against the exact index's scan of the same namespace, p50 in ms, when only a set of
/// at most `width` rows was scanned: 256 rows 38.4 / 0.12 (the walk passed through nearly the
/// whole graph, and its recall@10 was 0.988), 512 22.5 / 0.20, 1,024 12.7 / 0.35, 2,048 6.1 /
/// 0.53, 4,096 3.5 / 0.91, 8,192 1.63 / 2.45, 16,384 1.13 / 4.59: level between 4,096 and 8,192
/// rows, where `admitted^2` is 1.3 to 5.2 times `width * live`. With this rule (8,000 rows here)
/// the HNSW index answered 256 rows in 0.017 ms, 1,024 in 0.068, 4,096 in 0.61 (scans), 8,192 in
/// 1.53 and 16,384 in 1.09 (walks), recall@10 1.0 at every size. A scan is also what keeps
/// a small tenant's recall exact. The rule needs the scan within the request's
/// `max_scanned_chunks`; past it the walk runs.
fn scan_beats_walk(admitted: usize, width: usize, live: usize) -> bool {
    let admitted = admitted as f64;
    admitted * admitted <= WALK_ROWS_PER_WIDTH * width as f64 * live as f64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::index::ExactIndex;
    use crate::index::test_support::{key, meta, unit};
    use memory_core::NamespaceAddress;

    #[test]
    fn bad_parameters_are_refused_before_any_graph_is_built() {
        let bounds = IndexBounds::for_dimensions(2);
        for params in [
            HnswParams {
                max_connections: 257,
                ef_construction: 300,
                ..HnswParams::default()
            },
            HnswParams {
                max_connections: 1,
                ..HnswParams::default()
            },
            HnswParams {
                ef_search: 0,
                ..HnswParams::default()
            },
            HnswParams {
                max_layers: 17,
                ..HnswParams::default()
            },
            HnswParams {
                rebuild_tombstone_fraction: 1.0,
                ..HnswParams::default()
            },
        ] {
            assert!(HnswIndex::new(2, bounds, params).is_err(), "{params:?}");
        }
    }

    #[test]
    fn the_default_width_follows_the_index_and_a_chosen_one_does_not() {
        let params = HnswParams::default();
        assert!(params.width_grows);
        assert_eq!(params.width_for(0), params.ef_search);
        assert_eq!(params.width_for(WIDTH_BASE_ROWS), params.ef_search);
        let larger = params.width_for(WIDTH_BASE_ROWS * 2);
        let largest = params.width_for(WIDTH_BASE_ROWS * 4);
        assert!(
            params.ef_search < larger && larger < largest,
            "{larger} {largest}"
        );
        // 128 x 2^1.5 and 128 x 4^1.5, rounded up.
        assert_eq!((larger, largest), (363, 1_024));
        let cap = params.ef_search * WIDTH_MAX_FACTOR;
        assert_eq!(params.width_for(WIDTH_BASE_ROWS * 5), cap);
        assert_eq!(params.width_for(usize::MAX), cap);
        let chosen = HnswParams {
            ef_search: 40,
            width_grows: false,
            ..params
        };
        assert_eq!(chosen.width_for(WIDTH_BASE_ROWS * 10), 40);
        // Setting a width on an index fixes it at every size.
        let mut index =
            HnswIndex::new(2, IndexBounds::for_dimensions(2), HnswParams::default()).unwrap();
        index.set_ef_search(40).unwrap();
        assert_eq!(index.params.width_for(WIDTH_BASE_ROWS * 10), 40);
    }

    #[test]
    fn tombstones_are_filtered_and_rebuild_keeps_results() {
        let params = HnswParams {
            max_connections: 4,
            ef_construction: 8,
            ef_search: 8,
            width_grows: false,
            max_layers: 4,
            rebuild_tombstone_fraction: 0.3,
        };
        let mut index = HnswIndex::new(2, IndexBounds::for_dimensions(2), params).unwrap();
        for i in 0..20u32 {
            let id = format!("s{i:02}");
            let angle = i as f32 * 0.07;
            index
                .replace_source(
                    &key(&id),
                    vec![(meta(&id, 0), unit(&[angle.cos(), angle.sin()]))],
                )
                .unwrap();
        }
        let request = SearchRequest {
            limit: 3,
            min_score: -1.0,
            max_scanned_chunks: 100,
        };
        let best = index.search(&unit(&[1.0, 0.0]), request).unwrap();
        assert_eq!(best.hits[0].chunk.source.key, key("s00"));
        index.remove_source(&key("s00"));
        let after = index.search(&unit(&[1.0, 0.0]), request).unwrap();
        assert_eq!(after.hits[0].chunk.source.key, key("s01"));
        for i in 1..10u32 {
            index.remove_source(&key(&format!("s{i:02}")));
        }
        assert!(index.table.tombstones() as f64 <= 0.3 * index.table.rows() as f64);
        let rebuilt = index.search(&unit(&[1.0, 0.0]), request).unwrap();
        assert_eq!(rebuilt.hits[0].chunk.source.key, key("s10"));
        assert_eq!(index.live_chunks(), 10);
    }

    /// An f32 index's coded copy of its rows stays row for row with the table through insertions,
    /// removals and the rebuild that compacts the table; a compact index keeps no copy.
    #[test]
    fn the_walked_codes_follow_the_table_and_only_an_f32_index_has_them() {
        let params = HnswParams {
            rebuild_tombstone_fraction: 0.3,
            ..HnswParams::default()
        };
        let bounds = IndexBounds::for_dimensions(3);
        let vector = |i: u32| {
            let angle = i as f32 * 0.05;
            unit(&[angle.cos(), angle.sin(), 0.3])
        };
        let mut index = HnswIndex::new(3, bounds, params).unwrap();
        let mut compact =
            HnswIndex::with_compact(3, bounds, params, CompactVectors::int8()).unwrap();
        for i in 0..60u32 {
            let id = format!("s{i:02}");
            for index in [&mut index, &mut compact] {
                index
                    .replace_source(&key(&id), vec![(meta(&id, 0), vector(i))])
                    .unwrap();
            }
        }
        let agrees = |index: &HnswIndex| {
            let codes = index.walk.as_ref().unwrap();
            assert_eq!(codes.rows(), index.table.rows());
            (0..index.table.rows()).all(|row| {
                let own = index.table.row(row).similarity(index.table.row(row));
                (index.table.row(row).similarity(codes.row(row)) - own).abs() < 0.01
            })
        };
        assert!(agrees(&index));
        assert!(index.reserved_walk_bytes() >= 60 * 3);
        assert!(compact.walk.is_none() && compact.reserved_walk_bytes() == 0);
        for i in 0..30u32 {
            index.remove_source(&key(&format!("s{i:02}")));
        }
        // Past 30% tombstones (the 19th removal) the rebuild compacted the table to 41 rows.
        assert_eq!(index.table.rows(), 41, "the rebuild compacted the table");
        assert!(agrees(&index));
        let request = SearchRequest {
            limit: 3,
            min_score: -1.0,
            max_scanned_chunks: 1_000,
        };
        let query = vector(45);
        let hits = index.search(&query, request).unwrap().hits;
        assert_eq!(hits[0].chunk.source.key, key("s45"));
        assert_eq!(hits[0].score, crate::index::dot(&query, &query));
    }

    /// 2,000 rows on a circle, every fifth of the first 1,500 in a "small" namespace (300 rows),
    /// the rest in the test's usual one; width 16, so the rule scans up to
    /// `sqrt(5 * 16 * 2000) = 400` admitted rows.
    #[test]
    fn a_small_namespace_in_a_large_graph_is_scanned_within_the_budget() {
        let small = NamespaceAddress::parse(r#"[1,"notes",1,{"user":"small"}]"#).unwrap();
        let params = HnswParams {
            max_connections: 8,
            ef_construction: 32,
            ef_search: 16,
            width_grows: false,
            ..HnswParams::default()
        };
        let bounds = IndexBounds::for_chunks(2, 2_000).unwrap();
        let mut hnsw = HnswIndex::new(2, bounds, params).unwrap();
        let mut exact = ExactIndex::new(2, bounds).unwrap();
        for i in 0..2_000u32 {
            let id = format!("s{i:04}");
            let mut chunk = meta(&id, 0);
            if i % 5 == 0 && i < 1_500 {
                let mut source = (*chunk.source).clone();
                source.key.namespace = small.clone();
                chunk.source = std::sync::Arc::new(source);
            }
            let angle = i as f32 * 0.003;
            let rows = vec![(chunk, unit(&[angle.cos(), angle.sin()]))];
            let key = rows[0].0.source.key.clone();
            hnsw.replace_source(&key, rows.clone()).unwrap();
            exact.replace_source(&key, rows).unwrap();
        }
        let filter = SourceFilter::Namespace(&small);
        let query = unit(&[0.3f32.cos(), 0.3f32.sin()]);
        let request = SearchRequest {
            limit: 5,
            min_score: -1.0,
            max_scanned_chunks: 10_000,
        };
        let scanned = hnsw.search_in(&query, request, filter).unwrap();
        assert_eq!(
            scanned.scanned_chunks, 300,
            "the namespace is scanned, not walked"
        );
        assert_eq!(
            scanned.hits,
            exact.search_in(&query, request, filter).unwrap().hits
        );
        // A budget below the namespace's size walks the graph instead of refusing the search.
        let tight = SearchRequest {
            max_scanned_chunks: 200,
            ..request
        };
        let walked = hnsw.search_in(&query, tight, filter).unwrap();
        assert!(walked.scanned_chunks <= 200, "{}", walked.scanned_chunks);
        assert!(
            walked
                .hits
                .iter()
                .all(|hit| hit.chunk.source.key.namespace == small)
        );
        // The large namespace (1,700 rows, past 400) is walked.
        let large = key("s0001").namespace;
        let walked = hnsw
            .search_in(&query, request, SourceFilter::Namespace(&large))
            .unwrap();
        assert_eq!(walked.scanned_chunks, 16);
    }
}
