//! The rules of committed-activity progress (see [`crate::activity::progress`] for the port's contract).
//!
//! A backend runs every call as: check and encode the request here (nothing read yet), lock and read
//! the row ([`ProgressColumns`], decoded by [`ProgressColumns::decode`]), let the rules decide, then
//! write. Fenced writes are one conditional `UPDATE` that must change exactly one row; when it changes
//! none the backend reads the row again and [`refusal`] says why.

use super::{column_i64, corrupt, lease_expiry, next_epoch, stored_u64};
use crate::activity::{
    ActivityError, Claim, ExtractionNote, ExtractionTotals, FencingEpoch, Lease, PendingOutput,
    ProcessorId, ProcessorVersion, ProgressKey, ProgressView, Sequence, ThreadId, WorkId, WorkerId,
    canonical_progress_json,
};
use crate::document::EpochMillis;

/// The columns of a progress row after its key, in the order backends select them.
pub const PROGRESS_COLUMNS: &str = "cursor, epoch, owner, lease_expires_at, pending_sequence, \
                                    pending_work_id, pending_json, last_advance_at";

/// A progress row's [`PROGRESS_COLUMNS`] as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ProgressColumns {
    pub cursor: i64,
    pub epoch: i64,
    pub owner: Option<String>,
    pub lease_expires_at: Option<i64>,
    pub pending_sequence: Option<i64>,
    pub pending_work_id: Option<String>,
    pub pending_json: Option<String>,
    pub last_advance_at: Option<i64>,
}

/// A decoded progress row.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredProgress {
    /// The last processed sequence.
    pub cursor: Sequence,
    /// The latest epoch handed out.
    pub epoch: FencingEpoch,
    /// The latest lease's owner, until it is released.
    pub owner: Option<String>,
    /// The latest lease's expiry, until it is released.
    pub lease_expires_at: Option<EpochMillis>,
    /// Output saved for `cursor + 1`.
    pub pending: Option<PendingOutput>,
    /// When the cursor last moved.
    pub last_advance_at: Option<EpochMillis>,
}

impl ProgressColumns {
    /// Decodes and checks a stored row; any disagreement is [`crate::StoreFault::Corrupt`].
    pub fn decode(self) -> Result<StoredProgress, ActivityError> {
        let pending = match (
            self.pending_sequence,
            self.pending_work_id,
            self.pending_json,
        ) {
            (None, None, None) => None,
            (Some(sequence), Some(work_id), Some(json)) => Some(PendingOutput {
                sequence: Sequence::new(stored_u64(sequence, "pending sequence")?),
                work_id: WorkId::new(work_id)
                    .map_err(|_| corrupt("stored pending work id is invalid"))?,
                output: serde_json::from_str(&json)
                    .map_err(|error| corrupt(format!("pending output does not parse: {error}")))?,
            }),
            _ => return Err(corrupt("pending output is partly stored")),
        };
        Ok(StoredProgress {
            cursor: Sequence::new(stored_u64(self.cursor, "cursor")?),
            epoch: FencingEpoch::new(stored_u64(self.epoch, "epoch")?),
            owner: self.owner,
            lease_expires_at: self.lease_expires_at,
            pending,
            last_advance_at: self.last_advance_at,
        })
    }
}

impl StoredProgress {
    /// Whether `lease` is the row's current, unexpired lease at `now`.
    pub fn is_held_by(&self, lease: &Lease, now: EpochMillis) -> bool {
        self.epoch == lease.epoch
            && self.owner.as_deref() == Some(lease.owner.as_str())
            && self.lease_expires_at.is_some_and(|expiry| expiry > now)
    }

    /// What `inspect` shows of this row.
    pub fn view(self, key: ProgressKey) -> ProgressView {
        let lease = match (self.owner, self.lease_expires_at) {
            (Some(owner), Some(expiry)) => WorkerId::new(owner).ok().map(|owner| (owner, expiry)),
            _ => None,
        };
        ProgressView {
            key,
            cursor: self.cursor,
            pending: self.pending,
            last_advance_at: self.last_advance_at,
            epoch: self.epoch,
            lease,
        }
    }
}

/// A progress key as its three stored columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyColumns {
    /// The processor id.
    pub processor: String,
    /// The processor version.
    pub version: i64,
    /// The thread id.
    pub thread: String,
}

impl KeyColumns {
    /// The columns of `key`.
    pub fn of(key: &ProgressKey) -> Result<Self, ActivityError> {
        Ok(Self {
            processor: key.processor.as_str().to_owned(),
            version: column_i64(key.version.get(), "processor version")?,
            thread: key.thread.as_str().to_owned(),
        })
    }

    /// Rebuilds a stored key; an invalid one is corrupt.
    pub fn decode(self) -> Result<ProgressKey, ActivityError> {
        let invalid = |_| corrupt("stored progress key is invalid");
        Ok(ProgressKey {
            processor: ProcessorId::new(self.processor).map_err(invalid)?,
            version: ProcessorVersion::new(stored_u64(self.version, "processor version")?),
            thread: ThreadId::new(self.thread).map_err(invalid)?,
        })
    }
}

/// A checked claim, before the row is read.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    key: ProgressKey,
    owner: WorkerId,
    expires_at: EpochMillis,
}

impl ClaimRequest {
    /// Checks a claim of `key` for `owner`, lasting `lease_ms` from `now`.
    pub fn new(
        key: &ProgressKey,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Self, ActivityError> {
        Ok(Self {
            key: key.clone(),
            owner: owner.clone(),
            expires_at: lease_expiry(lease_ms, now)?,
        })
    }

    /// Decides the claim over the locked row (`None` when the key was never claimed): refused with
    /// [`ActivityError::LeaseHeld`] while another owner holds an unexpired lease, else the claim to
    /// persist (its lease's epoch, owner and expiry) and return.
    pub fn plan(
        self,
        existing: Option<StoredProgress>,
        now: EpochMillis,
    ) -> Result<Claim, ActivityError> {
        if let Some(row) = &existing
            && let (Some(holder), Some(expiry)) = (&row.owner, row.lease_expires_at)
            && expiry > now
            && holder != self.owner.as_str()
        {
            return Err(ActivityError::LeaseHeld { until: expiry });
        }
        let epoch = next_epoch(existing.as_ref().map(|row| row.epoch))?;
        let (cursor, pending) =
            existing.map_or((Sequence::ZERO, None), |row| (row.cursor, row.pending));
        Ok(Claim {
            lease: Lease {
                key: self.key,
                owner: self.owner,
                epoch,
                expires_at: self.expires_at,
            },
            cursor,
            pending,
        })
    }
}

/// Why a fenced write of `lease` changed no row: a stale lease first (the row is gone, or its epoch,
/// owner or expiry moved on), else what `otherwise` says of the row the lease still holds.
pub fn refusal(
    row: Option<&StoredProgress>,
    lease: &Lease,
    now: EpochMillis,
    otherwise: impl FnOnce(&StoredProgress) -> ActivityError,
) -> ActivityError {
    match row {
        Some(row) if row.is_held_by(lease, now) => otherwise(row),
        _ => stale(lease),
    }
}

/// The refusal of a write under a lease that is no longer current.
pub fn stale(lease: &Lease) -> ActivityError {
    ActivityError::StaleLease { epoch: lease.epoch }
}

/// Pending output checked against its lease and encoded, before any transaction: a refused output
/// leaves the stored progress (and any saved output) untouched.
#[derive(Debug, Clone)]
pub struct PreparedPending {
    /// The record's sequence, as stored.
    pub sequence: i64,
    /// The output's canonical JSON.
    pub output_json: String,
    found: Sequence,
}

impl PreparedPending {
    /// Checks that the work id derives from the record's position and that the output fits.
    pub fn new(lease: &Lease, pending: &PendingOutput) -> Result<Self, ActivityError> {
        if pending.work_id != lease.key.work_id(pending.sequence) {
            return Err(ActivityError::ProgressMismatch {
                what: "work id does not derive from the record's position",
            });
        }
        let output_json =
            canonical_progress_json("pending output canonical JSON", &pending.output)?;
        Ok(Self {
            sequence: column_i64(pending.sequence.get(), "pending sequence")?,
            output_json,
            found: pending.sequence,
        })
    }

    /// Why saving it changed nothing under a current lease: output is already saved, or it is not for
    /// `cursor + 1`.
    pub fn save_refused(&self, row: &StoredProgress) -> ActivityError {
        if row.pending.is_some() {
            ActivityError::ProgressMismatch {
                what: "pending output is already saved",
            }
        } else {
            ActivityError::Noncontiguous {
                expected: row.cursor.saturating_next(),
                found: self.found,
            }
        }
    }

    /// Why replacing it changed nothing under a current lease: no output is saved for its record.
    pub fn replace_refused(&self, _row: &StoredProgress) -> ActivityError {
        ActivityError::ProgressMismatch {
            what: "no pending output is saved for this record",
        }
    }
}

/// A cursor move by exactly one record, checked before any transaction.
#[derive(Debug, Clone, Copy)]
pub struct Advance {
    /// The cursor it sets, as stored.
    pub to: i64,
    /// The cursor it requires, as stored.
    pub from: i64,
    target: Sequence,
}

impl Advance {
    /// Checks a move to `to` (from `to - 1`).
    pub fn new(to: Sequence) -> Result<Self, ActivityError> {
        let Some(from) = to.get().checked_sub(1) else {
            return Err(ActivityError::invalid("advance target", "must be positive"));
        };
        Ok(Self {
            to: column_i64(to.get(), "cursor")?,
            from: column_i64(from, "cursor")?,
            target: to,
        })
    }

    /// Why the move changed nothing under a current lease: the cursor is elsewhere.
    pub fn refused(&self, row: &StoredProgress) -> ActivityError {
        ActivityError::Noncontiguous {
            expected: row.cursor.saturating_next(),
            found: self.target,
        }
    }
}

/// The total rows one [`ExtractionNote`] adds to (name, amount): `records`, `kept` and
/// `dropped:<reason>`. Both SQL stores keep totals as such rows, added to in the transaction that
/// first notes a record, so `memory status` reads a few rows, never every note.
pub fn note_total_rows(note: &ExtractionNote) -> Vec<(String, u64)> {
    let mut rows = vec![("records".to_owned(), 1), ("kept".to_owned(), note.kept)];
    if note.corrections.linked > 0 {
        rows.push((CORRECTIONS_LINKED.to_owned(), note.corrections.linked));
    }
    if note.corrections.refused > 0 {
        rows.push((CORRECTIONS_REFUSED.to_owned(), note.corrections.refused));
    }
    rows.extend(
        note.model
            .named()
            .into_iter()
            .filter(|(_, amount)| *amount > 0)
            .map(|(name, amount)| (name.to_owned(), amount)),
    );
    rows.extend(
        note.dropped
            .iter()
            .map(|(reason, count)| (format!("{DROPPED_PREFIX}{reason}"), *count)),
    );
    rows
}

/// The prefix of a dropped reason's total row.
pub const DROPPED_PREFIX: &str = "dropped:";
/// The total row of correcting statements linked.
pub const CORRECTIONS_LINKED: &str = "corrections:linked";
/// The total row of correcting statements refused a link.
pub const CORRECTIONS_REFUSED: &str = "corrections:refused";

/// The totals the rows of [`note_total_rows`] add up to; an unknown row name is corrupt.
pub fn totals_from_rows(
    rows: impl IntoIterator<Item = (String, i64)>,
) -> Result<ExtractionTotals, ActivityError> {
    let mut totals = ExtractionTotals::default();
    for (name, amount) in rows {
        let amount = stored_u64(amount, "extraction total")?;
        match name.as_str() {
            "records" => totals.records = amount,
            "kept" => totals.kept = amount,
            CORRECTIONS_LINKED => totals.corrections.linked = amount,
            CORRECTIONS_REFUSED => totals.corrections.refused = amount,
            other if totals.model.set_named(other, amount) => {}
            other => match other.strip_prefix(DROPPED_PREFIX) {
                Some(reason) => {
                    totals.dropped.insert(reason.to_owned(), amount);
                }
                None => return Err(corrupt("unknown extraction total row")),
            },
        }
    }
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key() -> ProgressKey {
        ProgressKey {
            processor: ProcessorId::new("facts").expect("valid"),
            version: ProcessorVersion::new(1),
            thread: ThreadId::new("t").expect("valid"),
        }
    }

    fn worker(name: &str) -> WorkerId {
        WorkerId::new(name).expect("valid")
    }

    fn row(owner: Option<&str>, expiry: Option<i64>, epoch: u64) -> StoredProgress {
        StoredProgress {
            cursor: Sequence::new(4),
            epoch: FencingEpoch::new(epoch),
            owner: owner.map(str::to_owned),
            lease_expires_at: expiry,
            pending: None,
            last_advance_at: None,
        }
    }

    fn lease(owner: &str, epoch: u64, expires_at: i64) -> Lease {
        Lease {
            key: key(),
            owner: worker(owner),
            epoch: FencingEpoch::new(epoch),
            expires_at,
        }
    }

    proptest! {
        /// A claim is refused exactly while another owner's lease is unexpired, and every claim
        /// that succeeds hands out a strictly larger epoch and keeps the cursor.
        #[test]
        fn claims_respect_held_leases_and_raise_epochs(
            holder in prop::option::of(prop::sample::select(vec!["a", "b"])),
            expiry in prop::option::of(0_i64..100),
            epoch in 0_u64..1_000,
            now in 0_i64..100,
            lease_ms in 1_u64..1_000,
        ) {
            let request = ClaimRequest::new(&key(), &worker("a"), lease_ms, now).expect("valid");
            let existing = row(holder, expiry, epoch);
            let held = holder == Some("b") && expiry.is_some_and(|until| until > now);
            match request.plan(Some(existing), now) {
                Err(ActivityError::LeaseHeld { until }) => {
                    prop_assert!(held);
                    prop_assert_eq!(Some(until), expiry);
                }
                Ok(claim) => {
                    prop_assert!(!held);
                    prop_assert_eq!(claim.lease.epoch, FencingEpoch::new(epoch + 1));
                    prop_assert_eq!(claim.lease.expires_at, now + lease_ms as i64);
                    prop_assert_eq!(claim.cursor, Sequence::new(4));
                }
                Err(other) => prop_assert!(false, "unexpected {other}"),
            }
        }

        /// A fenced write is explained as stale unless the very lease is current; then the
        /// operation's own reason applies.
        #[test]
        fn refusals_blame_the_lease_first(
            epoch in 1_u64..5,
            row_epoch in 1_u64..5,
            owner in prop::sample::select(vec!["a", "b"]),
            expiry in 0_i64..20,
            now in 0_i64..20,
        ) {
            let stored = row(Some(owner), Some(expiry), row_epoch);
            let held = epoch == row_epoch && owner == "a" && expiry > now;
            let error = refusal(Some(&stored), &lease("a", epoch, expiry), now, |_| {
                ActivityError::ProgressMismatch { what: "other" }
            });
            if held {
                let expected = matches!(error, ActivityError::ProgressMismatch { what: "other" });
                prop_assert!(expected, "{}", error);
            } else {
                let stale = matches!(error, ActivityError::StaleLease { .. });
                prop_assert!(stale, "{}", error);
            }
        }
    }

    #[test]
    fn a_fresh_key_is_claimed_at_epoch_one_from_the_start() {
        let claim = ClaimRequest::new(&key(), &worker("a"), 10, 5)
            .expect("valid")
            .plan(None, 5)
            .expect("claimed");
        assert_eq!(claim.lease.epoch, FencingEpoch::new(1));
        assert_eq!(claim.cursor, Sequence::ZERO);
        assert!(claim.pending.is_none());
        let same_owner = ClaimRequest::new(&key(), &worker("a"), 10, 5)
            .expect("valid")
            .plan(Some(row(Some("a"), Some(100), 3)), 5)
            .expect("a re-claim by the holder");
        assert_eq!(same_owner.lease.epoch, FencingEpoch::new(4));
        assert!(ClaimRequest::new(&key(), &worker("a"), 0, 5).is_err());
        assert!(matches!(
            refusal(None, &lease("a", 1, 10), 0, |_| unreachable!()),
            ActivityError::StaleLease { .. }
        ));
    }

    #[test]
    fn pending_output_is_checked_before_any_write() {
        let lease = lease("a", 1, 10);
        let pending = PendingOutput {
            sequence: Sequence::new(5),
            work_id: key().work_id(Sequence::new(5)),
            output: serde_json::json!({"facts": []}),
        };
        let prepared = PreparedPending::new(&lease, &pending).expect("valid");
        assert_eq!(prepared.sequence, 5);
        assert_eq!(prepared.output_json, r#"{"facts":[]}"#);
        let mut stored = row(Some("a"), Some(10), 1);
        assert!(matches!(
            prepared.save_refused(&stored),
            ActivityError::Noncontiguous { expected, found }
                if expected == Sequence::new(5) && found == Sequence::new(5)
        ));
        stored.pending = Some(pending.clone());
        assert!(matches!(
            prepared.save_refused(&stored),
            ActivityError::ProgressMismatch { .. }
        ));
        let foreign = PendingOutput {
            work_id: key().work_id(Sequence::new(6)),
            ..pending
        };
        assert!(matches!(
            PreparedPending::new(&lease, &foreign),
            Err(ActivityError::ProgressMismatch { .. })
        ));
    }

    #[test]
    fn advances_move_one_record_from_a_positive_target() {
        assert!(Advance::new(Sequence::ZERO).is_err());
        let advance = Advance::new(Sequence::new(3)).expect("valid");
        assert_eq!((advance.to, advance.from), (3, 2));
        assert!(matches!(
            advance.refused(&row(None, None, 1)),
            ActivityError::Noncontiguous { expected, found }
                if expected == Sequence::new(5) && found == Sequence::new(3)
        ));
    }

    #[test]
    fn stored_rows_decode_or_are_corrupt() {
        let columns = ProgressColumns {
            cursor: 2,
            epoch: 3,
            owner: Some("a".to_owned()),
            lease_expires_at: Some(9),
            pending_sequence: None,
            pending_work_id: None,
            pending_json: None,
            last_advance_at: Some(1),
        };
        let decoded = columns.clone().decode().expect("valid");
        assert_eq!(decoded.cursor, Sequence::new(2));
        let view = decoded.view(key());
        assert_eq!(view.lease, Some((worker("a"), 9)));
        for broken in [
            ProgressColumns {
                cursor: -1,
                ..columns.clone()
            },
            ProgressColumns {
                pending_sequence: Some(3),
                ..columns.clone()
            },
            ProgressColumns {
                pending_sequence: Some(3),
                pending_work_id: Some("w".to_owned()),
                pending_json: Some("{".to_owned()),
                ..columns
            },
        ] {
            assert!(matches!(
                broken.decode(),
                Err(ActivityError::Store(crate::StoreFault::Corrupt { .. }))
            ));
        }
        let key_columns = KeyColumns::of(&key()).expect("valid");
        assert_eq!(key_columns.clone().decode().expect("round trip"), key());
        assert!(
            KeyColumns {
                version: -1,
                ..key_columns
            }
            .decode()
            .is_err()
        );
    }
}
