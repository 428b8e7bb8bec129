//! Folds: typed state derived from a thread's log, read incrementally.
//!
//! A [`Fold`] says how each record changes its state; a [`FoldReader`] keeps the folded state of each
//! thread it has read with the sequence it was folded through, so a read folds only the records
//! appended since the previous one. The cache is bounded (least recently read threads are evicted, which
//! costs only a rebuild) and single-flight: concurrent readers of one thread take turns on its entry, each
//! continuing from where the previous one stopped, so no record is ever folded twice. The log is the
//! source of truth; nothing but the log is persisted, and [`FoldReader::rebuild`] folds a thread from
//! its first record again.
//!
//! A record that no longer decodes, or that a fold cannot place, is skipped and counted in the read's
//! [`FoldReport`], never a reason a thread cannot be read.
//!
//! A reader given the store of suppressions ([`FoldReader::forgetting`]) reads the thread's forgotten
//! records once per read ([`ForgottenRecords::read`]) and folds each forgotten record as its placeholder
//! (memory-core's `forgotten_placeholder`), telling the fold when it was forgotten. A cached state
//! remembers the forgotten records it was folded with: when they changed (a forget since, rare), the
//! read folds the thread from its first record again; otherwise it stays incremental.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use memory_core::EpochMillis;
use memory_core::activity::ThreadId;
use memory_core::activity::forgotten::ForgottenRecords;
use memory_core::activity::{
    LogEntry, RecordBody, RememberingStore, Sequence, ThreadLog, ThreadRecord,
};
use serde::Serialize;

use crate::ContextError;

/// Records read from the log per page while folding.
pub const FOLD_PAGE_RECORDS: usize = 1_000;
/// Threads a reader keeps folded state for by default.
pub const DEFAULT_CACHED_THREADS: usize = 1_000;
/// Skipped records a report lists by sequence (all are counted).
pub const MAX_REPORTED_SKIPS: usize = 32;

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SkippedRecord {
    /// Its sequence.
    pub sequence: Sequence,
    /// Why.
    pub reason: String,
}

/// What folding a thread left out: counted by reason, the first [`MAX_REPORTED_SKIPS`] listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
    /// Continued the cached state.
    Warm,
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
}

type Entry<S> = Arc<Mutex<Option<Folded<S>>>>;

struct Cache<S> {
    entries: HashMap<ThreadId, (Entry<S>, u64)>,
    tick: u64,
}

/// Reads a fold's state per thread, incrementally, through a bounded single-flight cache.
pub struct FoldReader<F: Fold> {
    fold: F,
    scope: FoldScope,
    log: Arc<dyn ThreadLog>,
    suppressions: Option<Arc<dyn RememberingStore>>,
    max_threads: usize,
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
            cache: Mutex::new(Cache {
                entries: HashMap::new(),
                tick: 0,
            }),
        }
    }

    /// The reader, folding the records `store` says are forgotten as their placeholders. Without it
    /// nothing is forgotten: every interface builds its reader with it.
    pub fn forgetting(mut self, store: Arc<dyn RememberingStore>) -> Self {
        self.suppressions = Some(store);
        self
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
        let mut cache = lock(&self.cache);
        cache.tick += 1;
        let tick = cache.tick;
        if let Some((entry, used)) = cache.entries.get_mut(thread) {
            *used = tick;
            return Arc::clone(entry);
        }
        if cache.entries.len() >= self.max_threads
            && let Some(oldest) = cache
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(thread, _)| thread.clone())
        {
            cache.entries.remove(&oldest);
        }
        let entry: Entry<F::State> = Arc::new(Mutex::new(None));
        cache
            .entries
            .insert(thread.clone(), (Arc::clone(&entry), tick));
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
        }
        let start = if slot.is_some() {
            ReadStart::Warm
        } else {
            ReadStart::Cold
        };
        let folded = slot.get_or_insert_with(|| Folded {
            state: self.fold.initial(),
            through: Sequence::ZERO,
            report: FoldReport::default(),
            forgotten: ForgottenRecords::none(),
        });
        folded.forgotten = forgotten;
        let read_now = self.catch_up(thread, folded)?;
        Ok(FoldRead {
            state: folded.state.clone(),
            through: folded.through,
            read_now,
            start,
            report: folded.report.clone(),
            forgotten: folded.forgotten.clone(),
        })
    }

    /// Folds the thread from its first record again, replacing what was cached.
    pub fn rebuild(&self, thread: &ThreadId) -> Result<FoldRead<F::State>, ContextError> {
        let entry = self.entry(thread);
        *lock(&entry) = None;
        self.read(thread)
    }

    /// Folds the thread from its first record without touching the cache.
    pub fn read_uncached(&self, thread: &ThreadId) -> Result<FoldRead<F::State>, ContextError> {
        let mut folded = Folded {
            state: self.fold.initial(),
            through: Sequence::ZERO,
            report: FoldReport::default(),
            forgotten: self.forgotten(thread)?,
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
