//! The in-memory thread log and progress store, and the handle that carries all three activity ports.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::intents::RememberingState;
use super::stored;
use crate::activity::thread::MAX_PAGE_RECORDS;
use crate::activity::{
    ActivityError, Claim, FencingEpoch, Lease, NewRecord, PendingOutput, ProcessorId, ProgressKey,
    ProgressStore, ProgressView, RecordDigest, Sequence, ThreadId, ThreadLog, ThreadRecord,
    WorkerId,
};
use crate::document::EpochMillis;

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
    pub(super) remembering: RememberingState,
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

    /// Up to `limit` thread ids that have records, in id order, after `after` (exclusive); the SQL
    /// stores offer the same listing.
    pub fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadId>, ActivityError> {
        if limit == 0 || limit > MAX_PAGE_RECORDS {
            return Err(ActivityError::invalid(
                "thread page limit",
                format!("must be between 1 and {MAX_PAGE_RECORDS}"),
            ));
        }
        let state = self.lock();
        Ok(state
            .records
            .keys()
            .filter(|thread| after.is_none_or(|after| *thread > after))
            .take(limit)
            .cloned()
            .collect())
    }
}

impl ThreadLog for InMemoryActivity {
    fn append(&self, thread: &ThreadId, record: NewRecord) -> Result<ThreadRecord, ActivityError> {
        record.validate()?;
        let kept = stored("record canonical JSON", &record)?;
        let mut state = self.lock();
        let records = state.records.entry(thread.clone()).or_default();
        let tail = records.last().map_or(Sequence::ZERO, |last| last.sequence);
        let sequence = tail.next().ok_or(ActivityError::TooLarge {
            limit: "thread sequence",
            max: u64::MAX,
            actual: u64::MAX,
        })?;
        let digest = RecordDigest::of(thread, sequence, &record);
        records.push(ThreadRecord {
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

    fn read_page(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<ThreadRecord>, ActivityError> {
        if limit == 0 || limit > MAX_PAGE_RECORDS {
            return Err(ActivityError::invalid(
                "page limit",
                format!("must be between 1 and {MAX_PAGE_RECORDS}"),
            ));
        }
        let state = self.lock();
        Ok(state.records.get(thread).map_or_else(Vec::new, |records| {
            records
                .iter()
                .filter(|record| record.sequence > after)
                .take(limit)
                .cloned()
                .collect()
        }))
    }
}

fn slot(key: &ProgressKey) -> (ProcessorId, u64, ThreadId) {
    (key.processor.clone(), key.version.0, key.thread.clone())
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
            epoch: FencingEpoch(0),
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
        let epoch = row.epoch.0.checked_add(1).ok_or(ActivityError::TooLarge {
            limit: "fencing epoch",
            max: u64::MAX,
            actual: u64::MAX,
        })?;
        row.epoch = FencingEpoch(epoch);
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
            let expected = Sequence(row.cursor.0.saturating_add(1));
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
        let Some(from) = to.0.checked_sub(1) else {
            return Err(ActivityError::invalid("advance target", "must be positive"));
        };
        self.fenced(lease, now, |row| {
            if row.cursor.0 != from {
                return Err(ActivityError::Noncontiguous {
                    expected: Sequence(row.cursor.0.saturating_add(1)),
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
                    version: crate::activity::ProcessorVersion(*version),
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
