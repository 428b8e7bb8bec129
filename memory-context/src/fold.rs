//! Folds: typed state derived from a thread's log, read incrementally.
//!
//! A [`Fold`] says how each record changes its state; a [`FoldReader`] keeps the folded state of each
//! thread it has read with the sequence it was folded through, so a read folds only the records
//! appended since the previous one. The cache is bounded (least recently read threads are evicted, which
//! costs only a rebuild) and single-flight: concurrent readers of one thread take turns on its entry, each
//! continuing from where the previous one stopped, so no record is ever folded twice. The log is the
//! source of truth; a state is persisted only as a checkpoint (below), a cache of the log, and
//! [`FoldReader::rebuild`] folds a thread from its first record again.
//!
//! A record that no longer decodes, or that a fold cannot place, is skipped and counted in the read's
//! [`FoldReport`], never a reason a thread cannot be read.
//!
//! A reader given the store of suppressions ([`FoldReader::forgetting`]) reads the thread's forgotten
//! records once per read ([`ForgottenRecords::read`]) and folds each forgotten record as its placeholder
//! (memory-core's `forgotten_placeholder`), telling the fold when it was forgotten. A cached state
//! remembers the forgotten records it was folded with: when they changed (a forget since, rare), the
//! read folds the thread from its first record again; otherwise it stays incremental.
//!
//! # Checkpoints
//! A fold that encodes its state ([`Fold::encode`]) is checkpointed beside the log (the
//! [`ThreadLog`] port's `save_checkpoint`): whenever a cached read has folded
//! [`CHECKPOINT_EVERY`] records past the last checkpoint, the state is stored with the fold's name
//! and version, the sequence it was folded through, what folding reported and the fingerprint of the
//! forgotten records it was folded with. A cold read (after a restart, an eviction or a forget) starts
//! from that checkpoint instead of record 1, and folds only what follows it. A checkpoint is a cache
//! of the log, never a source: one of another version, one that does not decode, one folded through a
//! record the log does not have, or one folded with other forgotten records is ignored (and counted),
//! so a forget hides a checkpoint's copy of the record's text as it hides the record, and the next
//! checkpoint replaces it. A state over memory-core's `MAX_CHECKPOINT_BYTES` is not stored, and a
//! checkpoint the log fails to load or store is counted (`checkpoints_ignored`,
//! `checkpoints_unsaved`): the read answers from the log all the same.
//!
//! # The cache
//! At most `max_threads` states (default [`DEFAULT_CACHED_THREADS`]); the least recently read is
//! evicted first, and a state not read for [`DEFAULT_IDLE_EXPIRY_MS`] (30 minutes) is evicted by the
//! next sweep, which a read of any thread runs at most once a minute (lazily, no timer). [`FoldReader::stats`] counts hits (warm reads), misses
//! (cold reads), rebuilds (a forget since, or [`FoldReader::rebuild`]), evictions, and checkpoints
//! restored, ignored and saved.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use memory_core::activity::FoldCheckpoint;
use memory_core::activity::ThreadId;
use memory_core::activity::forgotten::ForgottenRecords;
use memory_core::activity::{
    LogEntry, RecordBody, RememberingStore, Sequence, ThreadLog, ThreadRecord,
};
use memory_core::{Clock, EpochMillis, SystemClock};
use serde::{Deserialize, Serialize};

use crate::ContextError;

/// Records read from the log per page while folding.
pub const FOLD_PAGE_RECORDS: usize = 1_000;
/// Threads a reader keeps folded state for by default.
pub const DEFAULT_CACHED_THREADS: usize = 1_000;
/// Skipped records a report lists by sequence (all are counted).
pub const MAX_REPORTED_SKIPS: usize = 32;
/// Records a cached read folds past the last checkpoint before it stores a new one: a cold read
/// then folds at most this many records past its checkpoint.
pub const CHECKPOINT_EVERY: u64 = 128;
/// Milliseconds a cached state may go unread before it is evicted.
pub const DEFAULT_IDLE_EXPIRY_MS: i64 = 30 * 60 * 1_000;

/// Why a fold left a record out.
pub type SkipReason = &'static str;

/// The reason for a record whose stored form no longer decodes.
pub const SKIP_UNDECODABLE: SkipReason = "undecodable";

/// How records change a state. Handlers must be pure: the same records always fold to the same state,
/// which is what lets a cached state stand for a rebuild.
pub trait Fold: Send + Sync {
    /// The folded state.
    type State: Clone + Send + Sync;

    /// The state before any record.
    fn initial(&self) -> Self::State;

    /// Folds one record into `state`, or says why it was left out (the state must then be unchanged).
    /// A forgotten record comes as its placeholder, with `forgotten_at` the time it was forgotten.
    fn apply(
        &self,
        state: &mut Self::State,
        record: &ThreadRecord,
        forgotten_at: Option<EpochMillis>,
    ) -> Result<(), SkipReason>;

    /// The fold's name: with [`Fold::version`], what its checkpoints are stored and found by.
    fn name(&self) -> &'static str {
        "fold"
    }

    /// The version of the state's shape. Bump it whenever the state (or its encoding) changes: a
    /// checkpoint of another version is never read, so an old state is never misread.
    fn version(&self) -> u32 {
        1
    }

    /// Whether the fold keeps checkpoints (it encodes and decodes its state).
    fn checkpoints(&self) -> bool {
        false
    }

    /// The state as a checkpoint stores it (JSON text); `None` (the default): the fold keeps no
    /// checkpoints.
    fn encode(&self, state: &Self::State) -> Option<String> {
        let _ = state;
        None
    }

    /// A checkpoint's state; `None` when it does not decode (the checkpoint is then ignored).
    fn decode(&self, encoded: &str) -> Option<Self::State> {
        let _ = encoded;
        None
    }
}

/// Which records a fold reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FoldScope {
    /// Every record of the thread.
    #[default]
    Thread,
    /// The current run only: the state starts again after each `run_completed` record.
    Run,
}

/// A record a fold left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SkippedRecord {
    /// Its sequence.
    pub sequence: Sequence,
    /// Why.
    pub reason: String,
}

/// What folding a thread left out: counted by reason, the first [`MAX_REPORTED_SKIPS`] listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FoldReport {
    /// Records folded into the state since it was last built from scratch.
    pub records: u64,
    /// Records left out, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// The first records left out.
    pub skipped_records: Vec<SkippedRecord>,
}

impl FoldReport {
    fn skip(&mut self, sequence: Sequence, reason: SkipReason) {
        *self.skipped.entry(reason.to_owned()).or_default() += 1;
        if self.skipped_records.len() < MAX_REPORTED_SKIPS {
            self.skipped_records.push(SkippedRecord {
                sequence,
                reason: reason.to_owned(),
            });
        }
    }

    /// Records left out, all reasons together.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }
}

/// How a read started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadStart {
    /// Nothing was cached: folded from the thread's first record.
    Cold,
    /// Nothing was cached: folded from a persisted checkpoint.
    Checkpoint,
    /// Continued the cached state.
    Warm,
}

/// What a reader's cache did since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FoldStats {
    /// Reads that continued a cached state.
    pub hits: u64,
    /// Reads that found nothing cached (restored from a checkpoint or folded from record 1).
    pub misses: u64,
    /// Cached states folded again from scratch: a forget since, or an explicit rebuild.
    pub rebuilds: u64,
    /// States evicted: the least recently read past the bound, or idle past the expiry.
    pub evictions: u64,
    /// Cold reads that started from a persisted checkpoint.
    pub checkpoint_restores: u64,
    /// Checkpoints found but not used: another forgotten set, a state that does not decode, a
    /// sequence the log does not have, or a load that failed.
    pub checkpoints_ignored: u64,
    /// Checkpoints stored.
    pub checkpoint_saves: u64,
    /// Checkpoints not stored: too large (memory-core's `MAX_CHECKPOINT_BYTES`), or the log failed.
    pub checkpoints_unsaved: u64,
    /// States cached now.
    pub cached: u64,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    rebuilds: AtomicU64,
    evictions: AtomicU64,
    checkpoint_restores: AtomicU64,
    checkpoints_ignored: AtomicU64,
    checkpoint_saves: AtomicU64,
    checkpoints_unsaved: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// A checkpoint's header: the fold it belongs to and what folding reported. The stored form is the
/// header's JSON, a line feed, then the fold's encoded state, so a restore parses the state once,
/// straight into its type.
#[derive(Serialize, Deserialize)]
struct Header {
    fold: String,
    version: u32,
    report: FoldReport,
}

/// A fold's state as read.
#[derive(Debug, Clone)]
pub struct FoldRead<S> {
    /// The state, folded through `through`.
    pub state: S,
    /// The newest record folded (or skipped).
    pub through: Sequence,
    /// Records this read folded or skipped.
    pub read_now: u64,
    /// How the read started.
    pub start: ReadStart,
    /// What folding left out, since the state was built.
    pub report: FoldReport,
    /// The thread's forgotten records as this read found them.
    pub forgotten: ForgottenRecords,
}

struct Folded<S> {
    state: S,
    through: Sequence,
    report: FoldReport,
    forgotten: ForgottenRecords,
    /// The newest record a stored checkpoint of this state was folded through.
    checkpointed: Sequence,
}

type Entry<S> = Arc<Mutex<Option<Folded<S>>>>;

struct Cache<S> {
    /// Each thread's state, with the tick and the time it was last read.
    entries: HashMap<ThreadId, (Entry<S>, u64, EpochMillis)>,
    tick: u64,
    /// When a read next looks for idle states: not on every read, which would walk every entry.
    next_sweep: EpochMillis,
}

/// Most milliseconds between two sweeps for idle states.
const MAX_SWEEP_INTERVAL_MS: i64 = 60_000;

/// Reads a fold's state per thread, incrementally, through a bounded single-flight cache.
pub struct FoldReader<F: Fold> {
    fold: F,
    scope: FoldScope,
    log: Arc<dyn ThreadLog>,
    suppressions: Option<Arc<dyn RememberingStore>>,
    max_threads: usize,
    idle_expiry_ms: i64,
    clock: Arc<dyn Clock>,
    /// Records folded past a checkpoint before the next is stored; `None`: no checkpoints.
    checkpoint_every: Option<u64>,
    counters: Counters,
    cache: Mutex<Cache<F::State>>,
}

impl<F: Fold> std::fmt::Debug for FoldReader<F> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FoldReader")
            .field("scope", &self.scope)
            .field("max_threads", &self.max_threads)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking fold leaves at worst a state folded through its cursor: still consistent.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<F: Fold> FoldReader<F> {
    /// A reader of `fold` over `log`, caching up to [`DEFAULT_CACHED_THREADS`] threads.
    pub fn new(fold: F, scope: FoldScope, log: Arc<dyn ThreadLog>) -> Self {
        Self::with_capacity(fold, scope, log, DEFAULT_CACHED_THREADS)
    }

    /// A reader caching up to `max_threads` threads (at least one).
    pub fn with_capacity(
        fold: F,
        scope: FoldScope,
        log: Arc<dyn ThreadLog>,
        max_threads: usize,
    ) -> Self {
        Self {
            fold,
            scope,
            log,
            suppressions: None,
            max_threads: max_threads.max(1),
            idle_expiry_ms: DEFAULT_IDLE_EXPIRY_MS,
            clock: Arc::new(SystemClock),
            checkpoint_every: Some(CHECKPOINT_EVERY),
            counters: Counters::default(),
            cache: Mutex::new(Cache {
                entries: HashMap::new(),
                tick: 0,
                next_sweep: EpochMillis::MIN,
            }),
        }
    }

    /// The reader, folding the records `store` says are forgotten as their placeholders. Without it
    /// nothing is forgotten: every interface builds its reader with it.
    pub fn forgetting(mut self, store: Arc<dyn RememberingStore>) -> Self {
        self.suppressions = Some(store);
        self
    }

    /// The reader, evicting a state not read for `idle_expiry_ms` milliseconds of `clock`'s time.
    #[must_use]
    pub fn with_idle_expiry(mut self, idle_expiry_ms: i64, clock: Arc<dyn Clock>) -> Self {
        self.idle_expiry_ms = idle_expiry_ms.max(0);
        self.clock = clock;
        self
    }

    /// The reader, storing a checkpoint every `records` records folded past the last (`None`:
    /// neither storing nor reading checkpoints, so every cold read folds from record 1).
    #[must_use]
    pub fn checkpointing(mut self, records: Option<u64>) -> Self {
        self.checkpoint_every = records.map(|records| records.max(1));
        self
    }

    /// What the cache did since the reader was made.
    pub fn stats(&self) -> FoldStats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        FoldStats {
            hits: load(&self.counters.hits),
            misses: load(&self.counters.misses),
            rebuilds: load(&self.counters.rebuilds),
            evictions: load(&self.counters.evictions),
            checkpoint_restores: load(&self.counters.checkpoint_restores),
            checkpoints_ignored: load(&self.counters.checkpoints_ignored),
            checkpoint_saves: load(&self.counters.checkpoint_saves),
            checkpoints_unsaved: load(&self.counters.checkpoints_unsaved),
            cached: lock(&self.cache).entries.len() as u64,
        }
    }

    /// The thread's forgotten records (none without a suppression store): one store call.
    pub fn forgotten(&self, thread: &ThreadId) -> Result<ForgottenRecords, ContextError> {
        Ok(match &self.suppressions {
            Some(store) => ForgottenRecords::read(&**store, thread)?,
            None => ForgottenRecords::none(),
        })
    }

    /// The fold it reads.
    pub fn fold(&self) -> &F {
        &self.fold
    }

    /// The log it reads.
    pub fn log(&self) -> &Arc<dyn ThreadLog> {
        &self.log
    }

    fn entry(&self, thread: &ThreadId) -> Entry<F::State> {
        let now = self.clock.now_millis();
        let mut cache = lock(&self.cache);
        cache.tick += 1;
        let tick = cache.tick;
        let expiry = self.idle_expiry_ms;
        if now >= cache.next_sweep {
            let before = cache.entries.len();
            cache
                .entries
                .retain(|_, (_, _, used_at)| now.saturating_sub(*used_at) <= expiry);
            self.counters
                .evictions
                .fetch_add((before - cache.entries.len()) as u64, Ordering::Relaxed);
            cache.next_sweep = now.saturating_add(expiry.clamp(1, MAX_SWEEP_INTERVAL_MS));
        }
        if let Some((entry, used, used_at)) = cache.entries.get_mut(thread) {
            *used = tick;
            *used_at = now;
            return Arc::clone(entry);
        }
        if cache.entries.len() >= self.max_threads
            && let Some(oldest) = cache
                .entries
                .iter()
                .min_by_key(|(_, (_, used, _))| *used)
                .map(|(thread, _)| thread.clone())
        {
            cache.entries.remove(&oldest);
            bump(&self.counters.evictions);
        }
        let entry: Entry<F::State> = Arc::new(Mutex::new(None));
        cache
            .entries
            .insert(thread.clone(), (Arc::clone(&entry), tick, now));
        entry
    }

    /// The thread's state, folding only the records appended since the last read.
    pub fn read(&self, thread: &ThreadId) -> Result<FoldRead<F::State>, ContextError> {
        let entry = self.entry(thread);
        let mut slot = lock(&entry);
        // Read under the entry's lock, so concurrent readers of the thread agree on what they folded.
        let forgotten = self.forgotten(thread)?;
        if slot
            .as_ref()
            .is_some_and(|folded| !folded.forgotten.same_records(&forgotten))
        {
            *slot = None;
            bump(&self.counters.rebuilds);
        }
        let (folded, start) = match slot.take() {
            Some(folded) => {
                bump(&self.counters.hits);
                (folded, ReadStart::Warm)
            }
            None => {
                bump(&self.counters.misses);
                self.cold_start(thread, &forgotten)?
            }
        };
        let folded = slot.insert(folded);
        folded.forgotten = forgotten;
        let read_now = self.catch_up(thread, folded)?;
        self.checkpoint(thread, folded);
        Ok(FoldRead {
            state: folded.state.clone(),
            through: folded.through,
            read_now,
            start,
            report: folded.report.clone(),
            forgotten: folded.forgotten.clone(),
        })
    }

    /// A state before the thread's first record.
    fn scratch(&self) -> Folded<F::State> {
        Folded {
            state: self.fold.initial(),
            through: Sequence::ZERO,
            report: FoldReport::default(),
            forgotten: ForgottenRecords::none(),
            checkpointed: Sequence::ZERO,
        }
    }

    /// Where a read with nothing cached starts: the thread's checkpoint when one is usable, else
    /// before its first record. A checkpoint the log fails to load is counted as ignored: it is a
    /// cache, and the log itself still answers.
    fn cold_start(
        &self,
        thread: &ThreadId,
        forgotten: &ForgottenRecords,
    ) -> Result<(Folded<F::State>, ReadStart), ContextError> {
        let scratch = self.scratch();
        if self.scope != FoldScope::Thread
            || self.checkpoint_every.is_none()
            || !self.fold.checkpoints()
        {
            return Ok((scratch, ReadStart::Cold));
        }
        let checkpoint =
            match self
                .log
                .load_checkpoint(thread, self.fold.name(), self.fold.version())
            {
                Ok(Some(checkpoint)) => checkpoint,
                Ok(None) => return Ok((scratch, ReadStart::Cold)),
                Err(_) => {
                    bump(&self.counters.checkpoints_ignored);
                    return Ok((scratch, ReadStart::Cold));
                }
            };
        let restored = (checkpoint.forgotten == forgotten.fingerprint()
            && checkpoint.through <= self.log.inspect_tail(thread)?)
        .then(|| checkpoint.state.split_once('\n'))
        .flatten()
        .and_then(|(header, state)| {
            let header: Header = serde_json::from_str(header).ok()?;
            (header.fold == self.fold.name() && header.version == self.fold.version())
                .then(|| self.fold.decode(state).map(|state| (state, header.report)))
                .flatten()
        });
        match restored {
            Some((state, report)) => {
                bump(&self.counters.checkpoint_restores);
                Ok((
                    Folded {
                        state,
                        through: checkpoint.through,
                        report,
                        forgotten: ForgottenRecords::none(),
                        checkpointed: checkpoint.through,
                    },
                    ReadStart::Checkpoint,
                ))
            }
            None => {
                bump(&self.counters.checkpoints_ignored);
                Ok((scratch, ReadStart::Cold))
            }
        }
    }

    /// Stores a checkpoint of `folded` when it is [`CHECKPOINT_EVERY`] records past the last one. A
    /// checkpoint is a cache: one too large to store, or one the log fails to store, is counted
    /// (`checkpoints_unsaved`) and the read answers all the same.
    fn checkpoint(&self, thread: &ThreadId, folded: &mut Folded<F::State>) {
        let Some(every) = self.checkpoint_every else {
            return;
        };
        if self.scope != FoldScope::Thread
            || folded.through.get() < folded.checkpointed.get().saturating_add(every)
        {
            return;
        }
        let Some(state) = self.fold.encode(&folded.state) else {
            return;
        };
        // Either way this state is settled: one that cannot be stored is not encoded again for
        // another CHECKPOINT_EVERY records.
        folded.checkpointed = folded.through;
        let header = Header {
            fold: self.fold.name().to_owned(),
            version: self.fold.version(),
            report: folded.report.clone(),
        };
        let Ok(mut encoded) = serde_json::to_string(&header) else {
            bump(&self.counters.checkpoints_unsaved);
            return;
        };
        encoded.push('\n');
        encoded.push_str(&state);
        let checkpoint = FoldCheckpoint {
            through: folded.through,
            forgotten: folded.forgotten.fingerprint(),
            state: encoded,
        };
        // The log checks the size (memory-core's MAX_CHECKPOINT_BYTES) before it stores anything.
        match self
            .log
            .save_checkpoint(thread, self.fold.name(), self.fold.version(), &checkpoint)
        {
            Ok(()) => bump(&self.counters.checkpoint_saves),
            Err(_) => bump(&self.counters.checkpoints_unsaved),
        }
    }

    /// Folds the thread from its first record again, replacing what was cached.
    pub fn rebuild(&self, thread: &ThreadId) -> Result<FoldRead<F::State>, ContextError> {
        let entry = self.entry(thread);
        // From the first record, not from a checkpoint: a rebuild checks the log itself.
        *lock(&entry) = Some(self.scratch());
        bump(&self.counters.rebuilds);
        self.read(thread)
    }

    /// Folds the thread from its first record without touching the cache.
    pub fn read_uncached(&self, thread: &ThreadId) -> Result<FoldRead<F::State>, ContextError> {
        let mut folded = Folded {
            forgotten: self.forgotten(thread)?,
            ..self.scratch()
        };
        let read_now = self.catch_up(thread, &mut folded)?;
        Ok(FoldRead {
            state: folded.state,
            through: folded.through,
            read_now,
            start: ReadStart::Cold,
            report: folded.report,
            forgotten: folded.forgotten,
        })
    }

    fn catch_up(
        &self,
        thread: &ThreadId,
        folded: &mut Folded<F::State>,
    ) -> Result<u64, ContextError> {
        let mut read_now = 0u64;
        loop {
            let page = self
                .log
                .read_entries(thread, folded.through, FOLD_PAGE_RECORDS)?;
            let full = page.len() == FOLD_PAGE_RECORDS;
            for entry in page {
                read_now += 1;
                match entry {
                    LogEntry::Record(record) => {
                        let (record, forgotten_at) = folded.forgotten.shown(record);
                        folded.through = record.sequence;
                        folded.report.records += 1;
                        if self.scope == FoldScope::Run
                            && matches!(record.record.body, RecordBody::RunCompleted { .. })
                        {
                            folded.state = self.fold.initial();
                            continue;
                        }
                        if let Err(reason) =
                            self.fold.apply(&mut folded.state, &record, forgotten_at)
                        {
                            folded.report.skip(record.sequence, reason);
                        }
                    }
                    LogEntry::Undecodable(undecodable) => {
                        folded.through = undecodable.sequence;
                        folded.report.skip(undecodable.sequence, SKIP_UNDECODABLE);
                    }
                }
            }
            if !full {
                return Ok(read_now);
            }
        }
    }
}
