//! The in-memory thread log and progress store, and the handle that carries all three activity ports.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use super::intents::RememberingState;
use super::stored;
use memory_core::activity::thread::{
    BindingStep, binding_step, check_park_kind, check_record_page, check_thread_page,
    overview_destinations, rebinding,
};
use memory_core::activity::{
    ActivityError, Claim, ExtractionNote, ExtractionTotals, FencingEpoch, FoldCheckpoint, Lease,
    LogEntry, NewRecord, PendingOutput, PendingThread, ProcessorId, ProgressKey, ProgressStore,
    ProgressView, RecordDigest, Sequence, ThreadBinding, ThreadDestination, ThreadId, ThreadLog,
    ThreadOverview, ThreadRecord, WorkerId,
};
use memory_core::document::EpochMillis;

/// Most rows [`ProgressStore::inspect_all`] returns, as in the SQL stores.
pub(crate) const MAX_INSPECT_ROWS: usize = 10_000;

/// One progress row, as the SQL stores keep it.
#[derive(Debug, Clone)]
struct ProgressRow {
    cursor: Sequence,
    epoch: FencingEpoch,
    owner: Option<WorkerId>,
    lease_expires_at: Option<EpochMillis>,
    pending: Option<PendingOutput>,
    last_advance_at: Option<EpochMillis>,
}

#[derive(Debug, Default)]
pub(super) struct State {
    records: BTreeMap<ThreadId, Vec<ThreadRecord>>,
    progress: BTreeMap<(ProcessorId, u64, ThreadId), ProgressRow>,
    bindings: BTreeMap<ThreadId, ThreadBinding>,
    /// Pending threads and the tail each was marked with.
    pending: BTreeMap<ThreadId, Sequence>,
    /// Parked threads: the record and the kind.
    parked: BTreeMap<ThreadId, (Sequence, String)>,
    notes: BTreeSet<(ProcessorId, u64, ThreadId, Sequence)>,
    totals: ExtractionTotals,
    pub(super) remembering: RememberingState,
    /// Fold checkpoints by thread, fold name and version.
    checkpoints: BTreeMap<(ThreadId, String, u32), FoldCheckpoint>,
}

/// The thread log, progress store and remembering store, in process memory. Clones share one state.
#[derive(Debug, Clone, Default)]
pub struct InMemoryActivity {
    state: Arc<Mutex<State>>,
}

impl InMemoryActivity {
    /// Empty stores.
    pub fn new() -> Self {
        Self::default()
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // Every operation checks before it changes anything, so a panic cannot leave half a change.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ThreadLog for InMemoryActivity {
    fn append_to(
        &self,
        thread: &ThreadId,
        destination: Option<&ThreadDestination>,
        record: NewRecord,
    ) -> Result<ThreadRecord, ActivityError> {
        record.validate()?;
        let kept = stored("record canonical JSON", &record)?;
        let mut state = self.lock();
        let tail = state
            .records
            .get(thread)
            .and_then(|records| records.last())
            .map_or(Sequence::ZERO, |last| last.sequence);
        let step = binding_step(state.bindings.get(thread), tail, destination)?;
        let sequence = tail.next().ok_or(ActivityError::TooLarge {
            limit: "thread sequence",
            max: u64::MAX,
            actual: u64::MAX,
        })?;
        if let (BindingStep::Bind, Some(destination)) = (step, destination) {
            state.bindings.insert(
                thread.clone(),
                ThreadBinding {
                    destination: destination.clone(),
                    generation: 0,
                },
            );
        }
        state.pending.insert(thread.clone(), sequence);
        let digest = RecordDigest::of(thread, sequence, &record);
        state
            .records
            .entry(thread.clone())
            .or_default()
            .push(ThreadRecord {
                thread: thread.clone(),
                sequence,
                record: kept,
                digest: digest.clone(),
            });
        Ok(ThreadRecord {
            thread: thread.clone(),
            sequence,
            record,
            digest,
        })
    }

    fn inspect_tail(&self, thread: &ThreadId) -> Result<Sequence, ActivityError> {
        Ok(self
            .lock()
            .records
            .get(thread)
            .and_then(|records| records.last())
            .map_or(Sequence::ZERO, |last| last.sequence))
    }

    fn read_entries(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<LogEntry>, ActivityError> {
        check_record_page(limit)?;
        let state = self.lock();
        Ok(state.records.get(thread).map_or_else(Vec::new, |records| {
            records
                .iter()
                .filter(|record| record.sequence > after)
                .take(limit)
                .cloned()
                .map(LogEntry::Record)
                .collect()
        }))
    }

    fn binding(&self, thread: &ThreadId) -> Result<Option<ThreadBinding>, ActivityError> {
        Ok(self.lock().bindings.get(thread).cloned())
    }

    fn rebind(
        &self,
        thread: &ThreadId,
        destination: &ThreadDestination,
    ) -> Result<ThreadBinding, ActivityError> {
        let mut state = self.lock();
        let tail = state
            .records
            .get(thread)
            .and_then(|records| records.last())
            .map_or(Sequence::ZERO, |last| last.sequence);
        let current = state.bindings.get(thread).cloned();
        let read = current
            .as_ref()
            .map(|binding| (Some(&binding.destination), binding.generation));
        let Some(binding) = rebinding(read, tail, destination)? else {
            return current.ok_or_else(|| ActivityError::invalid("thread", "has no binding"));
        };
        state.bindings.insert(thread.clone(), binding.clone());
        state.parked.remove(thread);
        state.pending.insert(thread.clone(), tail);
        Ok(binding)
    }

    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadId>, ActivityError> {
        check_thread_page(limit)?;
        let state = self.lock();
        Ok(state
            .records
            .keys()
            .filter(|thread| after.is_none_or(|after| *thread > after))
            .take(limit)
            .cloned()
            .collect())
    }

    fn pending_threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<PendingThread>, ActivityError> {
        check_thread_page(limit)?;
        let state = self.lock();
        Ok(state
            .pending
            .iter()
            .filter(|(thread, _)| after.is_none_or(|after| *thread > after))
            .filter(|(thread, _)| !state.parked.contains_key(*thread))
            .take(limit)
            .map(|(thread, tail)| PendingThread {
                thread: thread.clone(),
                tail: *tail,
            })
            .collect())
    }

    fn mark_all_pending(&self) -> Result<u64, ActivityError> {
        let mut state = self.lock();
        let tails: Vec<(ThreadId, Sequence)> = state
            .records
            .iter()
            .filter_map(|(thread, records)| {
                records.last().map(|last| (thread.clone(), last.sequence))
            })
            .collect();
        let marked = tails.len() as u64;
        state.pending.extend(tails);
        Ok(marked)
    }

    fn settle(&self, thread: &ThreadId, tail: Sequence) -> Result<bool, ActivityError> {
        let mut state = self.lock();
        if state.pending.get(thread) == Some(&tail) {
            state.pending.remove(thread);
            return Ok(true);
        }
        Ok(false)
    }

    fn park(&self, thread: &ThreadId, sequence: Sequence, kind: &str) -> Result<(), ActivityError> {
        check_park_kind(kind)?;
        self.lock()
            .parked
            .insert(thread.clone(), (sequence, kind.to_owned()));
        Ok(())
    }

    fn overview(&self) -> Result<ThreadOverview, ActivityError> {
        let state = self.lock();
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for binding in state.bindings.values() {
            *counts.entry(binding.destination.to_stored()).or_default() += 1;
        }
        let (destinations, unreadable) = overview_destinations(counts);
        let mut parked: BTreeMap<String, u64> = BTreeMap::new();
        for (_, kind) in state.parked.values() {
            *parked.entry(kind.clone()).or_default() += 1;
        }
        Ok(ThreadOverview {
            destinations,
            unreadable,
            unbound: state
                .records
                .keys()
                .filter(|thread| !state.bindings.contains_key(*thread))
                .count() as u64,
            pending: state.pending.len() as u64,
            parked: parked.into_iter().collect(),
        })
    }

    fn load_checkpoint(
        &self,
        thread: &ThreadId,
        fold: &str,
        version: u32,
    ) -> Result<Option<FoldCheckpoint>, ActivityError> {
        Ok(self
            .lock()
            .checkpoints
            .get(&(thread.clone(), fold.to_owned(), version))
            .cloned())
    }

    fn save_checkpoint(
        &self,
        thread: &ThreadId,
        fold: &str,
        version: u32,
        checkpoint: &FoldCheckpoint,
    ) -> Result<(), ActivityError> {
        checkpoint.check(fold)?;
        self.lock().checkpoints.insert(
            (thread.clone(), fold.to_owned(), version),
            checkpoint.clone(),
        );
        Ok(())
    }
}

fn slot(key: &ProgressKey) -> (ProcessorId, u64, ThreadId) {
    (key.processor.clone(), key.version.get(), key.thread.clone())
}

fn lease_is_current(row: &ProgressRow, lease: &Lease, now: EpochMillis) -> bool {
    row.epoch == lease.epoch
        && row.owner.as_ref() == Some(&lease.owner)
        && row.lease_expires_at.is_some_and(|expiry| expiry > now)
}

pub(super) fn lease_expiry(now: EpochMillis, lease_ms: u64) -> Result<EpochMillis, ActivityError> {
    if lease_ms == 0 {
        return Err(ActivityError::invalid("lease_ms", "must be positive"));
    }
    let lease_ms = i64::try_from(lease_ms).map_err(|_| ActivityError::TooLarge {
        limit: "lease_ms",
        max: i64::MAX as u64,
        actual: lease_ms,
    })?;
    Ok(now.saturating_add(lease_ms))
}

impl InMemoryActivity {
    /// One fenced write: `change` runs only while `lease` is current, and says itself why the row does
    /// not fit; a stale lease is reported first, as the SQL stores do.
    fn fenced(
        &self,
        lease: &Lease,
        now: EpochMillis,
        change: impl FnOnce(&mut ProgressRow) -> Result<(), ActivityError>,
    ) -> Result<(), ActivityError> {
        let mut state = self.lock();
        let stale = ActivityError::StaleLease { epoch: lease.epoch };
        let row = state.progress.get_mut(&slot(&lease.key)).ok_or(stale)?;
        if !lease_is_current(row, lease, now) {
            return Err(ActivityError::StaleLease { epoch: lease.epoch });
        }
        let mut changed = row.clone();
        change(&mut changed)?;
        *row = changed;
        Ok(())
    }
}

/// Checks a pending output against its lease and returns it as stored, before anything changes.
fn pending_as_stored(
    lease: &Lease,
    pending: &PendingOutput,
) -> Result<PendingOutput, ActivityError> {
    if pending.work_id != lease.key.work_id(pending.sequence) {
        return Err(ActivityError::ProgressMismatch {
            what: "work id does not derive from the record's position",
        });
    }
    Ok(PendingOutput {
        output: stored("pending output canonical JSON", &pending.output)?,
        ..pending.clone()
    })
}

impl ProgressStore for InMemoryActivity {
    fn claim(
        &self,
        key: &ProgressKey,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Claim, ActivityError> {
        let expires_at = lease_expiry(now, lease_ms)?;
        let mut state = self.lock();
        let row = state.progress.entry(slot(key)).or_insert(ProgressRow {
            cursor: Sequence::ZERO,
            epoch: FencingEpoch::new(0),
            owner: None,
            lease_expires_at: None,
            pending: None,
            last_advance_at: None,
        });
        if let (Some(holder), Some(until)) = (&row.owner, row.lease_expires_at)
            && until > now
            && holder != owner
        {
            return Err(ActivityError::LeaseHeld { until });
        }
        let epoch = row
            .epoch
            .get()
            .checked_add(1)
            .ok_or(ActivityError::TooLarge {
                limit: "fencing epoch",
                max: u64::MAX,
                actual: u64::MAX,
            })?;
        row.epoch = FencingEpoch::new(epoch);
        row.owner = Some(owner.clone());
        row.lease_expires_at = Some(expires_at);
        Ok(Claim {
            lease: Lease {
                key: key.clone(),
                owner: owner.clone(),
                epoch: row.epoch,
                expires_at,
            },
            cursor: row.cursor,
            pending: row.pending.clone(),
        })
    }

    fn save_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let pending = pending_as_stored(lease, pending)?;
        self.fenced(lease, now, |row| {
            if row.pending.is_some() {
                return Err(ActivityError::ProgressMismatch {
                    what: "pending output is already saved",
                });
            }
            let expected = row.cursor.saturating_next();
            if pending.sequence != expected {
                return Err(ActivityError::Noncontiguous {
                    expected,
                    found: pending.sequence,
                });
            }
            row.pending = Some(pending);
            Ok(())
        })
    }

    fn replace_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let pending = pending_as_stored(lease, pending)?;
        self.fenced(lease, now, |row| match &mut row.pending {
            Some(saved) if saved.sequence == pending.sequence => {
                saved.output = pending.output;
                Ok(())
            }
            _ => Err(ActivityError::ProgressMismatch {
                what: "no pending output is saved for this record",
            }),
        })
    }

    fn advance(&self, lease: &Lease, to: Sequence, now: EpochMillis) -> Result<(), ActivityError> {
        let Some(from) = to.get().checked_sub(1) else {
            return Err(ActivityError::invalid("advance target", "must be positive"));
        };
        self.fenced(lease, now, |row| {
            if row.cursor.get() != from {
                return Err(ActivityError::Noncontiguous {
                    expected: row.cursor.saturating_next(),
                    found: to,
                });
            }
            row.cursor = to;
            row.pending = None;
            row.last_advance_at = Some(now);
            Ok(())
        })
    }

    fn release(&self, lease: &Lease, now: EpochMillis) -> Result<(), ActivityError> {
        self.fenced(lease, now, |row| {
            row.owner = None;
            row.lease_expires_at = None;
            Ok(())
        })
    }

    fn inspect(&self, key: &ProgressKey) -> Result<Option<ProgressView>, ActivityError> {
        Ok(self
            .lock()
            .progress
            .get(&slot(key))
            .map(|row| view(key.clone(), row)))
    }

    fn note_extraction(
        &self,
        key: &ProgressKey,
        sequence: Sequence,
        note: &ExtractionNote,
    ) -> Result<(), ActivityError> {
        note.validate()?;
        let mut state = self.lock();
        let (processor, version, thread) = slot(key);
        if !state.notes.insert((processor, version, thread, sequence)) {
            return Ok(());
        }
        state.totals.records += 1;
        state.totals.kept += note.kept;
        state.totals.corrections.linked += note.corrections.linked;
        state.totals.corrections.refused += note.corrections.refused;
        state.totals.model = state.totals.model.plus(note.model);
        for (reason, count) in &note.dropped {
            *state.totals.dropped.entry(reason.clone()).or_default() += count;
        }
        Ok(())
    }

    fn extraction_totals(&self) -> Result<ExtractionTotals, ActivityError> {
        Ok(self.lock().totals.clone())
    }

    fn inspect_all(&self, limit: usize) -> Result<Vec<ProgressView>, ActivityError> {
        if limit == 0 || limit > MAX_INSPECT_ROWS {
            return Err(ActivityError::invalid(
                "inspect limit",
                format!("must be between 1 and {MAX_INSPECT_ROWS}"),
            ));
        }
        let state = self.lock();
        Ok(state
            .progress
            .iter()
            .take(limit)
            .map(|((processor, version, thread), row)| {
                let key = ProgressKey {
                    processor: processor.clone(),
                    version: memory_core::activity::ProcessorVersion::new(*version),
                    thread: thread.clone(),
                };
                view(key, row)
            })
            .collect())
    }
}

fn view(key: ProgressKey, row: &ProgressRow) -> ProgressView {
    ProgressView {
        key,
        cursor: row.cursor,
        pending: row.pending.clone(),
        last_advance_at: row.last_advance_at,
        epoch: row.epoch,
        lease: row.owner.clone().zip(row.lease_expires_at),
    }
}
