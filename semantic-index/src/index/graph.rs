//! The layered neighbour lists an [`super::HnswIndex`] searches, over the rows of its chunk table.
//!
//! The lists are flat (layer 0: a fixed number of slots per row in one buffer; upper layers, which
//! hold about one row in `max_connections`, in small lists kept for those rows only), neighbours
//! are row numbers of the table, no distances are kept, and the vectors are read from the rows the
//! index hands it ([`WalkRows`]: the table's, or their codes), so the graph holds no copy of them.
//! Loading a persisted graph fills these arrays directly (`persist.rs`), with no allocation per
//! neighbour. This replaced hnsw_rs, which the crate first
//! used as the builder: every point it holds owns a copy of its vector, 16 lock-guarded lists and
//! an `Arc` per neighbour, so a build of 1,000,000 rows held a second copy of the vectors, and its
//! parallel insertion was slower on two cores than [`Graph::insert_all`].
//!
//! Search is the usual HNSW walk: a greedy descent through the upper layers, then a best-first
//! search of layer 0 with a candidate list of `ef`; rows the filter refuses are walked through but
//! never returned. Insertion follows the HNSW paper as hnsw_rs implements it: a search with
//! `ef_construction` per layer, the neighbour-selection heuristic, and reverse links that drop the
//! farthest neighbour of a full list; then, unlike either, a row that no layer-0 list took is
//! adopted into a spare slot of a near row's list ([`Graph::adopt`]), so the walk can reach it. A
//! row's level is a function of its row number, and a build's batches depend on the rows only
//! ([`Graph::insert_all`]), so the same rows give the same graph in every run, on every machine.
//!
//! The walk is bound by reading rows, not by arithmetic (a 20,000-row f32 table is larger than the
//! caches; 66% of a query's time was in the dot product's loads): each expanded node's unvisited
//! neighbours are gathered first and their distances computed in one loop with nothing else in it
//! ([`measure`]), so several rows' reads are in flight at once, and only then are the heaps
//! updated, in the same order as before (the same results). On `scripts/compare.sh`'s 20,000
//! vectors the best of four runs rose from 26,600 to 29,100 queries a second at width 16 and from
//! 5,500 to 5,900 at 128 (alternating runs on a noisy machine: a few percent, not a precise figure).
//!
//! The reads are also requested ahead ([`crate::kernels::prefetch`]): while a row is scored, the
//! lines of the row [`PREFETCH_AHEAD`] places later in the batch, and before a node's neighbours
//! are gathered, the list of the next candidate. On the same vectors at width 20 (2 cores, the
//! best of six runs of each binary, alternating), the walk answered 25,300 queries a second
//! without requests, 28,900 requesting one row ahead, 30,800 two, 32,500 four, 30,500 eight and
//! 30,100 with every row of the batch requested first; requesting only a row's first eight lines,
//! or every other line, fell back to about 25,000. Scoring a batch inside one dispatch of the
//! kernel (no call per distance) was also tried and measured level with four ahead, so the walk
//! keeps one call per distance. `scripts/compare.sh` (three rounds taking turns with hnswlib)
//! then gave `hnsw_qps_ratio_at_recall_0.95` 1.05 (1.04 at 0.80 and 0.90, 1.03 at 0.99), where
//! the last sessions' single rounds gave 0.82 and 0.84. At 200,000 vectors
//! (`COMPARE_SIZE=200000`) it was 1.12 after [`Graph::adopt`]; with the rows and lists on
//! transparent huge pages (`super::pages`), 1.31 (two rounds) and 1.29 (three rounds), with the
//! build 0.79 and 0.82 of hnswlib's time; built and walked over int8 codes of the rows
//! (`walk.rs`), 1.54, the build 0.58 (2026-12-06).
//!
//! Distances are between the rows the index hands the graph ([`WalkRows`]): int8 codes, a compact
//! table's own or a coded copy of an f32 table's (`walk.rs`), the query coded once per search, so
//! the walk reads 388 bytes a row instead of 1,536; the index ranks the candidates by their f32
//! scores afterwards ([`super::quantized`], `hnsw.rs`).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::pages::PageVec;
use super::quantized::{QueryRow, RowRef};
use super::walk::WalkRows;
use crate::kernels::{PREFETCH_AHEAD, prefetch};

/// One neighbour: its row. Distances are not stored (they would double a list's bytes: at the
/// default 24 connections, layer 0 takes 192 bytes a row instead of 384); the rare step that needs
/// them, a reverse link into a full list, recomputes them from the table.
pub(crate) type Neighbour = u32;

/// Layers a graph may have (the persisted format's).
pub(crate) const LAYERS: usize = 16;

/// Most rows of a parallel batch, as a share of the graph's rows: one in 16.
const BATCH_SHARE: usize = 16;
/// Most rows of one parallel batch.
const MAX_BATCH: usize = 4_096;
/// Rows inserted one by one before batches start (a small graph is quick to insert into, and a
/// batch would be a large share of it).
const SEQUENTIAL_ROWS: usize = 1_024;
/// Layer-0 slots a row has past its `2 * connections`, which only [`Graph::adopt`] fills and no
/// reverse link empties (12 bytes a row: 12 MB at 1,000,000 rows). Three rather than four keep a
/// million chunks with compact vectors under 800 MB (`benches/compact_rss.rs`: 761.3 MiB against
/// 765.2) for recall@10 0.954 against 0.955 at the default width on the same million vectors.
pub(crate) const SPARE_SLOTS: usize = 3;

/// Where one row goes ([`Graph::plan`]): its level and its chosen neighbours, layer 0 first.
struct Plan {
    row: usize,
    level: usize,
    layers: Vec<Vec<Scored>>,
    /// The layer-0 search's rows, nearest first: where [`Graph::adopt`] looks.
    candidates: Vec<Scored>,
}

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

/// Cosine distance between two rows of one encoding: `1 - similarity`, clamped to [0, 2] (rounding
/// can push the similarity of unit vectors slightly past 1), and 2 for NaN.
pub(crate) fn distance(left: RowRef<'_>, right: RowRef<'_>) -> f32 {
    let distance = 1.0 - left.similarity(right);
    if distance.is_nan() {
        2.0
    } else {
        distance.clamp(0.0, 2.0)
    }
}

/// The distances from `query` to each of `rows`, into `distances` (cleared first), in one loop
/// with nothing else in it: the rows' reads do not depend on each other, so the processor has
/// several of them in flight, where a loop that updated the search's heaps after each distance
/// would wait for one row at a time (the walk is bound by these reads, not by the arithmetic).
/// Each row's lines are requested [`PREFETCH_AHEAD`] rows before it is scored.
fn measure<R: WalkRows + ?Sized>(
    table: &R,
    query: RowRef<'_>,
    rows: &[Neighbour],
    distances: &mut Vec<f32>,
) {
    distances.clear();
    for &row in rows.iter().take(PREFETCH_AHEAD) {
        table.row(row as usize).prefetch();
    }
    for (at, &row) in rows.iter().enumerate() {
        if let Some(&ahead) = rows.get(at + PREFETCH_AHEAD) {
            table.row(ahead as usize).prefetch();
        }
        distances.push(distance(query, table.row(row as usize)));
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
    /// Layer-0 lists: [`Self::base_slots`] slots per row, the first `base_len[row]` used: up to
    /// [`Self::cap`] filled by selection and reverse links, then at most [`SPARE_SLOTS`] by
    /// [`Self::adopt`]. On huge pages once large (`pages.rs`): a walk reads one list per expanded
    /// row, scattered like the rows themselves.
    base: PageVec<Neighbour>,
    base_len: Vec<u16>,
    /// Lists of layers `1..=levels[row]`, for the rows above level 0 only: about one row in
    /// `connections`, so a slot per row (24 bytes, 23 MiB at 1,000,000 rows) would cost more than
    /// the lists themselves.
    upper: HashMap<u32, Box<[Vec<Neighbour>]>>,
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
            base: PageVec::with_capacity(0),
            base_len: Vec::new(),
            upper: HashMap::new(),
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

    /// The neighbours selection and reverse links keep in a list at `layer`.
    pub(crate) fn cap(&self, layer: usize) -> usize {
        if layer == 0 {
            2 * self.connections
        } else {
            self.connections
        }
    }

    /// The most neighbours a list at `layer` may hold: [`Self::cap`], and at layer 0 the
    /// [`SPARE_SLOTS`] past it.
    pub(crate) fn max_list(&self, layer: usize) -> usize {
        if layer == 0 {
            self.base_slots()
        } else {
            self.connections
        }
    }

    fn base_slots(&self) -> usize {
        2 * self.connections + SPARE_SLOTS
    }

    /// `row`'s neighbours at `layer`, in no particular order (empty above its level).
    pub(crate) fn list(&self, row: usize, layer: usize) -> &[Neighbour] {
        if layer == 0 {
            let start = row * self.base_slots();
            let length = self.base_len.get(row).map_or(0, |length| *length as usize);
            self.base.get(start..start + length).unwrap_or(&[])
        } else {
            self.upper
                .get(&(row as u32))
                .and_then(|lists| lists.get(layer - 1))
                .map_or(&[], Vec::as_slice)
        }
    }

    /// Appends a row of `level` with empty lists; its lists are set with [`Self::set_list`].
    pub(crate) fn push_row(&mut self, level: usize) {
        let level = level.min(self.max_layers - 1);
        let row = self.levels.len();
        self.levels.push(level as u8);
        self.base
            .extend(std::iter::repeat_n(u32::MAX, self.base_slots()));
        self.base_len.push(0);
        self.set_upper_level(row, level);
    }

    /// Sets `row`'s level (a decoded point's), with empty lists above layer 0.
    pub(crate) fn raise_level(&mut self, row: usize, level: usize) {
        let level = level.min(self.max_layers - 1);
        self.levels[row] = level as u8;
        self.set_upper_level(row, level);
    }

    /// Gives `row` empty lists for layers `1..=level` (none for level 0).
    fn set_upper_level(&mut self, row: usize, level: usize) {
        if level == 0 {
            self.upper.remove(&(row as u32));
        } else {
            self.upper
                .insert(row as u32, vec![Vec::new(); level].into_boxed_slice());
        }
    }

    /// Room for `additional` more rows.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.levels.reserve(additional);
        self.base.reserve(additional * self.base_slots());
        self.base_len.reserve(additional);
        self.upper.reserve(additional / self.connections.max(1));
    }

    /// Sets `row`'s list at `layer` (at most [`Self::max_list`] neighbours; `layer` at most the
    /// row's level).
    pub(crate) fn set_list(&mut self, row: usize, layer: usize, list: &[Neighbour]) {
        let list = &list[..list.len().min(self.max_list(layer))];
        if layer == 0 {
            let start = row * self.base_slots();
            self.base[start..start + list.len()].copy_from_slice(list);
            self.base_len[row] = list.len() as u16;
        } else if let Some(slot) = self
            .upper
            .get_mut(&(row as u32))
            .and_then(|lists| lists.get_mut(layer - 1))
        {
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
    fn greedy<R: WalkRows + ?Sized>(
        &self,
        table: &R,
        query: RowRef<'_>,
        mut current: Scored,
        layer: usize,
    ) -> Scored {
        let mut distances = Vec::with_capacity(self.cap(layer));
        loop {
            let list = self.list(current.row as usize, layer);
            measure(table, query, list, &mut distances);
            let mut moved = false;
            for (&neighbour, &candidate) in list.iter().zip(&distances) {
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
    fn search_layer<R: WalkRows + ?Sized>(
        &self,
        table: &R,
        query: RowRef<'_>,
        entries: &[Scored],
        ef: usize,
        layer: usize,
        admits: &dyn Fn(usize) -> bool,
    ) -> Vec<Scored> {
        let mut visited = Visited::new(self.rows());
        let mut candidates: BinaryHeap<std::cmp::Reverse<Scored>> = BinaryHeap::new();
        let mut found: BinaryHeap<Scored> = BinaryHeap::with_capacity(ef + 1);
        let mut fresh: Vec<Neighbour> = Vec::with_capacity(self.cap(layer));
        let mut distances: Vec<f32> = Vec::with_capacity(self.cap(layer));
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
            if let Some(std::cmp::Reverse(next)) = candidates.peek() {
                prefetch(self.list(next.row as usize, layer));
            }
            fresh.clear();
            fresh.extend(
                self.list(closest.row as usize, layer)
                    .iter()
                    .copied()
                    .filter(|&neighbour| visited.insert(neighbour)),
            );
            measure(table, query, &fresh, &mut distances);
            for (&neighbour, &distance) in fresh.iter().zip(&distances) {
                let candidate = Scored {
                    distance,
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
    pub(crate) fn search<R: WalkRows + ?Sized>(
        &self,
        table: &R,
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
    ///
    /// Filling a list's free slots with the nearest pruned candidates (hnswlib's
    /// `keepPrunedConnections`) was tried on 1,000,000 real-model-derived vectors (2026-12-06,
    /// `memory-eval bench-hnsw`): recall@10 fell from 0.724 to 0.250 at width 128 and from 0.943
    /// to 0.606 at 2,048. The extra links all point into the row's own cluster of near-duplicates,
    /// and the walk loses its ways out of it.
    fn select<R: WalkRows + ?Sized>(
        &self,
        table: &R,
        candidates: &[Scored],
        cap: usize,
    ) -> Vec<Scored> {
        if candidates.len() <= cap {
            return candidates.to_vec();
        }
        let mut kept: Vec<Scored> = Vec::with_capacity(cap);
        for candidate in candidates {
            if kept.len() >= cap {
                break;
            }
            let vector = table.row(candidate.row as usize);
            let dominated = kept
                .iter()
                .any(|other| distance(vector, table.row(other.row as usize)) <= candidate.distance);
            if !dominated {
                kept.push(*candidate);
            }
        }
        kept
    }

    /// Adds `new`, at `new_distance` from `row`, to `row`'s list at `layer`, within its cap: a
    /// list with room takes it; a full one replaces its farthest neighbour when `new` is closer
    /// (as hnsw_rs's reverse update drops the farthest), the distances recomputed from `table`.
    ///
    /// hnswlib instead runs the selection heuristic over a full list and the new row, which keeps
    /// fewer, more diverse neighbours. Tried (2026-12, on two cores, `memory-eval bench-hnsw`): at
    /// equal recall the two graphs answer at the same rate (100,000 real-model-derived vectors:
    /// recall@10 0.953 at about 5,200 queries a second either way; 20,000: 0.95 at 24,000-28,000
    /// either way, within the machine's noise), its build was up to 15% quicker, and its recall per
    /// search width a little lower (0.916 against 0.927 at 128). No gain at equal recall, so the
    /// simpler rule stays.
    ///
    /// A layer-0 list's spare slots ([`SPARE_SLOTS`], past the cap) are neither filled nor
    /// emptied here. Answers whether `row`'s list holds `new` afterwards.
    fn link<R: WalkRows + ?Sized>(
        &mut self,
        table: &R,
        row: usize,
        layer: usize,
        new: Neighbour,
        new_distance: f32,
    ) -> bool {
        let cap = self.cap(layer);
        let list = self.list(row, layer);
        if list.contains(&new) {
            return true;
        }
        if list.len() < cap {
            self.set_neighbour(row, layer, list.len(), new);
            return true;
        }
        let own = table.row(row);
        let farthest = list[..cap]
            .iter()
            .enumerate()
            .map(|(at, &neighbour)| (at, distance(own, table.row(neighbour as usize))))
            .max_by(|left, right| left.1.total_cmp(&right.1));
        match farthest {
            Some((at, farthest)) if new_distance < farthest => {
                self.set_neighbour(row, layer, at, new);
                true
            }
            _ => false,
        }
    }

    /// Gives `row`, which no layer-0 list took when it was inserted, a place in the list of the
    /// nearest of `candidates` (its layer-0 search's rows, nearest first) with a free slot,
    /// spare slots included. Without it, a row whose neighbours' lists are all full of closer rows
    /// is held by no list: the walk reaches it only through the upper layers, and a search misses
    /// it however wide.
    ///
    /// Why (2026-12-06, 1,000,000 real-model-derived vectors of `memory-eval dump-vectors`, 480
    /// real queries): the selection heuristic links a row of a cluster of near-duplicates to
    /// little more than the cluster's centre, whose list is full of closer rows, so 138,567 rows
    /// (14%) were held by no list, and nearly every true neighbour the search missed was one of
    /// them: recall@10 was 0.933 at width 1,280 and 0.949 at 4,096. With adoption from the
    /// search's rows and four spare slots (three since: [`SPARE_SLOTS`]), 26,051 rows are held by
    /// none (rows dropped later by a reverse link, as before), and `memory-eval bench-hnsw` gives
    /// recall@10 0.955 at 1,280 and 0.974 at 2,048, each width as fast as before. Adopting only
    /// among the chosen neighbours rescued almost none (they are the full centres); adopting in
    /// place of a list's farthest neighbour, instead of into a spare slot, cut recall to 0.74 (the
    /// farthest neighbours are the ways out of a cluster); eight spare slots instead of four
    /// gained 0.001.
    fn adopt(&mut self, row: usize, candidates: &[Scored]) {
        let own = row as Neighbour;
        let slots = self.base_slots();
        if let Some((host, at)) = candidates
            .iter()
            .map(|scored| (scored.row as usize, self.list(scored.row as usize, 0).len()))
            .find(|&(_, length)| length < slots)
        {
            self.set_neighbour(host, 0, at, own);
        }
    }

    /// Writes `new` into slot `at` of `row`'s list at `layer`, in place: `at` is a neighbour's
    /// slot, or the list's length when the list has room (the list grows by one).
    fn set_neighbour(&mut self, row: usize, layer: usize, at: usize, new: Neighbour) {
        if layer == 0 {
            let length = &mut self.base_len[row];
            if at == *length as usize {
                *length += 1;
            }
            let slot = row * self.base_slots() + at;
            self.base[slot] = new;
        } else if let Some(list) = self
            .upper
            .get_mut(&(row as u32))
            .and_then(|lists| lists.get_mut(layer - 1))
        {
            match list.get_mut(at) {
                Some(slot) => *slot = new,
                None => list.push(new),
            }
        }
    }

    /// Inserts row `rows()` of `table` (rows are inserted in order).
    pub(crate) fn insert<R: WalkRows + ?Sized>(&mut self, table: &R) {
        let plan = self.plan(table, self.rows());
        self.apply(table, plan);
    }

    /// Inserts rows `rows()..table.rows()`, on up to `threads` threads, checking `cancelled` between
    /// batches: `false` when it was cancelled (the rows inserted so far stay).
    ///
    /// A batch's rows search the graph as it stands before the batch, in parallel ([`Self::plan`]),
    /// then are linked in order ([`Self::apply`]): the searches are most of an insertion's work,
    /// the links a small part. A row cannot choose a neighbour of its own batch (reverse links from
    /// later rows still reach it), so a batch is at most [`BATCH_SHARE`] of the graph, and the
    /// first [`SEQUENTIAL_ROWS`] rows are inserted one by one. On the comparison's 20,000 real-model
    /// vectors (`scripts/compare.sh`'s), at the default parameters on two cores: recall@10 at search
    /// widths 16, 20 and 40 was 0.943, 0.959 and 0.991, against 0.950, 0.960 and 0.990 one by one
    /// and 0.950, 0.959 and 0.988 for hnsw_rs's parallel insertion; the build took 4.2 s, against
    /// 7.0 s one by one and 8.7 s for hnsw_rs (measured once in one process, with a test not kept).
    pub(crate) fn insert_all<R: WalkRows + ?Sized>(
        &mut self,
        table: &R,
        threads: usize,
        cancelled: &dyn Fn() -> bool,
    ) -> bool {
        let threads = threads.max(1);
        while self.rows() < table.rows() {
            if cancelled() {
                return false;
            }
            let start = self.rows();
            let batch = (start / BATCH_SHARE)
                .clamp(1, MAX_BATCH)
                .min(table.rows() - start);
            if start < SEQUENTIAL_ROWS {
                for _ in 0..batch {
                    self.insert(table);
                }
                continue;
            }
            // The batches and their plans depend on the rows only, never on `threads`: every
            // machine builds the same graph from the same rows.
            let per_thread = batch.div_ceil(threads.min(batch));
            let frozen = &*self;
            let plans: Vec<Plan> = std::thread::scope(|scope| {
                let workers: Vec<_> = (start..start + batch)
                    .step_by(per_thread)
                    .map(|first| {
                        let last = (first + per_thread).min(start + batch);
                        scope.spawn(move || {
                            (first..last)
                                .map(|row| frozen.plan(table, row))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .flat_map(|worker| match worker.join() {
                        Ok(plans) => plans,
                        Err(panic) => std::panic::resume_unwind(panic),
                    })
                    .collect()
            });
            for plan in plans {
                self.apply(table, plan);
            }
        }
        true
    }

    /// Where row `row` of `table` goes: its level and its chosen neighbours per layer, searched in
    /// the graph as it stands (which must not hold `row` yet).
    fn plan<R: WalkRows + ?Sized>(&self, table: &R, row: usize) -> Plan {
        let level = self.level_for(row);
        let Some(entry) = self.entry else {
            return Plan {
                row,
                level,
                layers: Vec::new(),
                candidates: Vec::new(),
            };
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
        let mut layers = vec![Vec::new(); level.min(top) + 1];
        for layer in (0..=level.min(top)).rev() {
            let found = self.search_layer(
                table,
                query,
                &entries,
                self.ef_construction,
                layer,
                &|candidate| candidate != row,
            );
            layers[layer] = self.select(table, &found, self.cap(layer));
            if !found.is_empty() {
                entries = found;
            }
        }
        // After the loop, `entries` holds the layer-0 search's rows (or the descent's last row).
        Plan {
            row,
            level,
            layers,
            candidates: entries,
        }
    }

    /// Adds the row `plan` is for (the next row) with its lists, and the reverse links.
    fn apply<R: WalkRows + ?Sized>(&mut self, table: &R, plan: Plan) {
        let Plan {
            row,
            level,
            layers,
            candidates,
        } = plan;
        debug_assert_eq!(row, self.rows());
        self.push_row(level);
        let own = row as u32;
        let top = self.entry.map(|entry| self.level(entry as usize));
        let mut held = false;
        for (layer, chosen) in layers.iter().enumerate() {
            let rows: Vec<Neighbour> = chosen.iter().map(|scored| scored.row).collect();
            self.set_list(row, layer, &rows);
            for scored in chosen {
                let linked = self.link(table, scored.row as usize, layer, own, scored.distance);
                held |= linked && layer == 0;
            }
        }
        if !held {
            self.adopt(row, &candidates);
        }
        if top.is_none_or(|top| self.level(row) > top) {
            self.entry = Some(own);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashSet;

    use super::*;
    use crate::index::table::ChunkTable;
    use crate::index::test_support::{key, meta, noise};

    /// `count` unit vectors of `dimensions` around a few centres, from a fixed seed.
    fn clustered(count: usize, dimensions: usize) -> Vec<Vec<f32>> {
        let mut next = noise();
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
    fn graphs_inserted_one_by_one_and_in_parallel_batches_find_the_nearest_rows() {
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

        let mut parallel = Graph::new(8, 64, 16, Graph::default_level_scale(8));
        assert!(parallel.insert_all(&table, 3, &|| false));
        let by_batches = recall(&parallel, &table, &queries);
        assert!(
            by_batches >= 0.95,
            "recall@10 by parallel batches {by_batches}"
        );
        for row in 0..parallel.rows() {
            for layer in 0..=parallel.level(row) {
                assert!(parallel.list(row, layer).len() <= parallel.cap(layer));
            }
        }
        // The same graph whatever the number of threads.
        let mut single = Graph::new(8, 64, 16, Graph::default_level_scale(8));
        assert!(single.insert_all(&table, 1, &|| false));
        assert_eq!(single.entry(), parallel.entry());
        for row in 0..table.rows() {
            assert_eq!(single.level(row), parallel.level(row));
            for layer in 0..=single.level(row) {
                assert_eq!(
                    single.list(row, layer),
                    parallel.list(row, layer),
                    "row {row}"
                );
            }
        }
    }

    #[test]
    fn distance_never_goes_negative_or_nan() {
        let v = crate::index::test_support::unit(&[1.0, 1.0, 1.0]);
        let scaled: Vec<f32> = v.iter().map(|x| x * 1.000_01).collect();
        assert_eq!(distance(RowRef::F32(&v), RowRef::F32(&scaled)), 0.0);
        assert_eq!(distance(RowRef::F32(&[f32::NAN]), RowRef::F32(&[1.0])), 2.0);
    }

    #[test]
    fn a_cancelled_build_stops_between_batches() {
        let vectors = clustered(3_000, 8);
        let table = table_of(&vectors);
        let mut graph = Graph::new(6, 32, 16, Graph::default_level_scale(6));
        let checks = std::cell::Cell::new(0);
        let cancelled = || {
            checks.set(checks.get() + 1);
            checks.get() > 3
        };
        assert!(!graph.insert_all(&table, 2, &cancelled));
        assert!(
            graph.rows() > 0 && graph.rows() < table.rows(),
            "{}",
            graph.rows()
        );
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
    fn a_full_list_takes_a_closer_neighbour_in_place_of_its_farthest() {
        // Row 0 at angle 0, rows 1-6 ever farther from it; one connection per layer, two at layer 0.
        let vectors: Vec<Vec<f32>> = (0..7)
            .map(|step| {
                let angle = step as f32 * 0.2;
                vec![angle.cos(), angle.sin()]
            })
            .collect();
        let table = table_of(&vectors);
        let mut graph = Graph::new(1, 8, 1, Graph::default_level_scale(1));
        for _ in 0..table.rows() {
            graph.push_row(0);
        }
        let own = table.row(0);
        let at = |row: usize| distance(own, table.row(row));
        graph.set_list(0, 0, &[5, 3]);
        // Farther than both: nothing changes.
        graph.link(&table, 0, 0, 6, at(6));
        assert_eq!(graph.list(0, 0), &[5, 3]);
        // Already listed: nothing changes.
        graph.link(&table, 0, 0, 3, at(3));
        assert_eq!(graph.list(0, 0), &[5, 3]);
        // Closer than the farthest (5): it takes 5's place, and the list stays at its cap.
        graph.link(&table, 0, 0, 1, at(1));
        assert_eq!(graph.list(0, 0), &[1, 3]);
        graph.link(&table, 0, 0, 2, at(2));
        assert_eq!(graph.list(0, 0), &[1, 2]);
        // A list with room takes any new neighbour.
        graph.link(&table, 4, 0, 6, distance(table.row(4), table.row(6)));
        assert_eq!(graph.list(4, 0), &[6]);
    }

    #[test]
    fn a_row_no_list_takes_is_adopted_by_a_near_row_with_a_free_slot() {
        // A centre first, then near-duplicates of it in 32 dimensions: a new row selects little
        // more than the centre (every other row is nearer the centre than to it), and the centre's
        // two layer-0 slots are soon full of closer rows. One layer, so layer 0 is the only way in.
        let mut vectors = vec![{
            let mut centre = vec![0.0f32; 32];
            centre[0] = 1.0;
            centre
        }];
        let noisy = clustered(60, 31);
        vectors.extend(noisy.iter().map(|noise| {
            let mut row = vec![1.0f32];
            row.extend(noise.iter().map(|value| value * 0.6));
            let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
            row.iter().map(|v| v / norm).collect::<Vec<f32>>()
        }));
        let table = table_of(&vectors);
        let mut graph = Graph::new(1, 16, 1, Graph::default_level_scale(1));
        for row in 0..table.rows() {
            graph.insert(&table);
            let held = (0..row).any(|other| graph.list(other, 0).contains(&(row as u32)));
            assert!(row == 0 || held, "row {row} is in no layer-0 list");
        }
        let adopted = (0..table.rows())
            .filter(|row| graph.list(*row, 0).len() > graph.cap(0))
            .count();
        assert!(adopted > 0, "no spare slot was used");
        assert!((0..table.rows()).all(|row| graph.list(row, 0).len() <= graph.max_list(0)));
    }

    #[test]
    fn with_room_in_every_list_each_link_has_its_reverse_at_every_layer() {
        // 60 rows, lists of 64 at layer 0 and 32 above, so no list ever drops a neighbour; a level
        // scale of 1 puts about a third of the rows above layer 0.
        let table = table_of(&clustered(60, 16));
        let mut graph = Graph::new(32, 64, 4, 1.0);
        graph.reserve(table.rows());
        for _ in 0..table.rows() {
            graph.insert(&table);
        }
        let upper_rows = (0..table.rows())
            .filter(|row| graph.level(*row) > 0)
            .count();
        assert!(upper_rows > 5, "{upper_rows} rows above layer 0");
        for row in 0..table.rows() {
            for layer in 0..=graph.level(row) {
                for &neighbour in graph.list(row, layer) {
                    assert!(
                        graph
                            .list(neighbour as usize, layer)
                            .contains(&(row as u32)),
                        "{row} -> {neighbour} at layer {layer} has no reverse link"
                    );
                }
            }
        }
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
