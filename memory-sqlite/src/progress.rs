//! Committed-activity progress in SQLite: fenced leases, cursors and pending output (SPEC §5).
//!
//! Every fenced write is one `UPDATE ... WHERE epoch = ? AND owner = ? AND lease_expires_at > now` that
//! must change exactly one row; when it changes none, the same transaction reads the row to say why, and
//! rolls back. See [`memory_core::activity::progress`] for the rules.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use memory_core::activity::{
    ActivityError, Claim, FencingEpoch, Lease, PendingOutput, ProcessorId, ProcessorVersion,
    ProgressKey, ProgressStore, ProgressView, Sequence, ThreadId, WorkId, WorkerId,
    canonical_progress_json,
};
use memory_core::document::EpochMillis;
use rusqlite::{
    Connection, OptionalExtension, Row, ToSql, Transaction, TransactionBehavior, params,
    params_from_iter,
};

use crate::thread_log::{BUSY_TIMEOUT, lock, open_component, sql_error, to_i64, to_u64};

/// How long `release` waits for the store before leaving the lease to expire.
pub const RELEASE_WAIT: Duration = Duration::from_millis(500);
/// Most rows `inspect_all` returns.
pub const MAX_INSPECT_ROWS: usize = 10_000;

const PROGRESS_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS activity_progress (
        processor TEXT NOT NULL,
        version INTEGER NOT NULL,
        thread TEXT NOT NULL,
        cursor INTEGER NOT NULL DEFAULT 0 CHECK (cursor >= 0),
        epoch INTEGER NOT NULL DEFAULT 0,
        owner TEXT,
        lease_expires_at INTEGER,
        pending_sequence INTEGER,
        pending_work_id TEXT,
        pending_json TEXT,
        last_advance_at INTEGER,
        PRIMARY KEY (processor, version, thread)
    ) WITHOUT ROWID;
";

/// The SQLite progress store.
pub struct SqliteProgressStore {
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteProgressStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SqliteProgressStore")
            .finish_non_exhaustive()
    }
}

impl SqliteProgressStore {
    /// Opens (creating if needed) the progress tables in the file at `path`.
    pub fn open(path: &Path) -> Result<Self, ActivityError> {
        Ok(Self {
            connection: Mutex::new(open_component(path, "activity_progress", PROGRESS_SCHEMA)?),
        })
    }
}

struct ProgressRow {
    cursor: Sequence,
    epoch: FencingEpoch,
    owner: Option<String>,
    lease_expires_at: Option<i64>,
    pending: Option<PendingOutput>,
    last_advance_at: Option<i64>,
}

const ROW_COLUMNS: &str = "cursor, epoch, owner, lease_expires_at, pending_sequence, \
                           pending_work_id, pending_json, last_advance_at";

fn raw_row(row: &Row<'_>) -> rusqlite::Result<RawRow> {
    Ok(RawRow {
        cursor: row.get(0)?,
        epoch: row.get(1)?,
        owner: row.get(2)?,
        lease_expires_at: row.get(3)?,
        pending_sequence: row.get(4)?,
        pending_work_id: row.get(5)?,
        pending_json: row.get(6)?,
        last_advance_at: row.get(7)?,
    })
}

struct RawRow {
    cursor: i64,
    epoch: i64,
    owner: Option<String>,
    lease_expires_at: Option<i64>,
    pending_sequence: Option<i64>,
    pending_work_id: Option<String>,
    pending_json: Option<String>,
    last_advance_at: Option<i64>,
}

fn decode(raw: RawRow) -> Result<ProgressRow, ActivityError> {
    let pending = match (raw.pending_sequence, raw.pending_work_id, raw.pending_json) {
        (None, None, None) => None,
        (Some(sequence), Some(work_id), Some(json)) => Some(PendingOutput {
            sequence: Sequence(to_u64(sequence, "pending sequence")?),
            work_id: WorkId::new(work_id).map_err(|_| ActivityError::Corrupt {
                what: "stored pending work id is invalid".to_owned(),
            })?,
            output: serde_json::from_str(&json).map_err(|error| ActivityError::Corrupt {
                what: format!("pending output does not parse: {error}"),
            })?,
        }),
        _ => {
            return Err(ActivityError::Corrupt {
                what: "pending output is partly stored".to_owned(),
            });
        }
    };
    Ok(ProgressRow {
        cursor: Sequence(to_u64(raw.cursor, "cursor")?),
        epoch: FencingEpoch(to_u64(raw.epoch, "epoch")?),
        owner: raw.owner,
        lease_expires_at: raw.lease_expires_at,
        pending,
        last_advance_at: raw.last_advance_at,
    })
}

fn read_row(
    transaction: &Connection,
    key: &ProgressKey,
) -> Result<Option<ProgressRow>, ActivityError> {
    let raw = transaction
        .query_row(
            &format!(
                "SELECT {ROW_COLUMNS} FROM activity_progress
                 WHERE processor = ?1 AND version = ?2 AND thread = ?3"
            ),
            params![
                key.processor.as_str(),
                to_i64(key.version.0, "processor version")?,
                key.thread.as_str()
            ],
            raw_row,
        )
        .optional()
        .map_err(sql_error("read progress"))?;
    raw.map(decode).transpose()
}

/// Explains a fenced write that changed no row: stale lease first, then the caller's specific mismatch.
fn explain(
    transaction: &Transaction<'_>,
    lease: &Lease,
    now: EpochMillis,
    otherwise: impl FnOnce(&ProgressRow) -> ActivityError,
) -> ActivityError {
    match read_row(transaction, &lease.key) {
        Err(error) => error,
        Ok(None) => ActivityError::StaleLease { epoch: lease.epoch },
        Ok(Some(row)) => {
            let current = row.epoch == lease.epoch
                && row.owner.as_deref() == Some(lease.owner.as_str())
                && row.lease_expires_at.is_some_and(|expiry| expiry > now);
            if current {
                otherwise(&row)
            } else {
                ActivityError::StaleLease { epoch: lease.epoch }
            }
        }
    }
}

/// Checks `pending` against `lease` and encodes it, before any transaction: a refused output leaves
/// the stored progress (and any saved output) untouched. Returns its sequence and canonical JSON.
fn pending_values(lease: &Lease, pending: &PendingOutput) -> Result<(i64, String), ActivityError> {
    if pending.work_id != lease.key.work_id(pending.sequence) {
        return Err(ActivityError::ProgressMismatch {
            what: "work id does not derive from the record's position",
        });
    }
    let output_json = canonical_progress_json("pending output canonical JSON", &pending.output)?;
    Ok((to_i64(pending.sequence.0, "pending sequence")?, output_json))
}

fn key_params(key: &ProgressKey) -> Result<(String, i64, String), ActivityError> {
    Ok((
        key.processor.as_str().to_owned(),
        to_i64(key.version.0, "processor version")?,
        key.thread.as_str().to_owned(),
    ))
}

/// What one fenced write changes ([`SqliteProgressStore::fenced_update`]). In `set` and `condition`,
/// `?1` to `?6` are the lease's processor, version, thread, epoch, owner and `now`, and `values` bind
/// `?7` on. Both are fixed SQL text from this file, never input.
struct FencedWrite<'a> {
    /// Names the write in storage errors.
    operation: &'static str,
    /// The `SET` list.
    set: &'a str,
    /// What the row must be, beside holding the lease.
    condition: &'a str,
    values: &'a [&'a dyn ToSql],
}

impl SqliteProgressStore {
    /// One fenced write (see the module docs) in its own immediate transaction:
    /// `UPDATE ... SET {set} WHERE <the lease's fence> AND {condition}`. It commits only when exactly
    /// one row changed; otherwise [`explain`] reads the row to say why (`otherwise` when the lease
    /// itself is still current) and dropping the transaction rolls it back.
    fn fenced_update(
        &self,
        lease: &Lease,
        now: EpochMillis,
        write: FencedWrite<'_>,
        otherwise: impl FnOnce(&ProgressRow) -> ActivityError,
    ) -> Result<(), ActivityError> {
        let FencedWrite {
            operation,
            set,
            condition,
            values,
        } = write;
        let (processor, version, thread) = key_params(&lease.key)?;
        let epoch = to_i64(lease.epoch.0, "fencing epoch")?;
        let owner = lease.owner.as_str();
        let fence: [&dyn ToSql; 6] = [&processor, &version, &thread, &epoch, &owner, &now];
        let update = format!(
            "UPDATE activity_progress SET {set}
             WHERE processor = ?1 AND version = ?2 AND thread = ?3
               AND epoch = ?4 AND owner = ?5 AND lease_expires_at > ?6
               AND {condition}"
        );
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error(operation))?;
        let changed = transaction
            .execute(&update, params_from_iter(fence.iter().chain(values)))
            .map_err(sql_error(operation))?;
        if changed != 1 {
            return Err(explain(&transaction, lease, now, otherwise));
        }
        transaction.commit().map_err(sql_error(operation))
    }
}

impl ProgressStore for SqliteProgressStore {
    fn claim(
        &self,
        key: &ProgressKey,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Claim, ActivityError> {
        if lease_ms == 0 {
            return Err(ActivityError::invalid("lease_ms", "must be positive"));
        }
        let expires_at = now.saturating_add(to_i64(lease_ms, "lease_ms")?);
        let (processor, version, thread) = key_params(key)?;
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("claim lease"))?;
        let existing = read_row(&transaction, key)?;
        if let Some(row) = &existing
            && let (Some(holder), Some(expiry)) = (&row.owner, row.lease_expires_at)
            && expiry > now
            && holder != owner.as_str()
        {
            return Err(ActivityError::LeaseHeld { until: expiry });
        }
        let epoch = FencingEpoch(
            existing
                .as_ref()
                .map_or(0, |row| row.epoch.0)
                .checked_add(1)
                .ok_or(ActivityError::TooLarge {
                    limit: "fencing epoch",
                    max: u64::MAX,
                    actual: u64::MAX,
                })?,
        );
        transaction
            .execute(
                "INSERT INTO activity_progress (processor, version, thread, epoch, owner, lease_expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (processor, version, thread) DO UPDATE SET
                     epoch = excluded.epoch, owner = excluded.owner,
                     lease_expires_at = excluded.lease_expires_at",
                params![
                    processor,
                    version,
                    thread,
                    to_i64(epoch.0, "fencing epoch")?,
                    owner.as_str(),
                    expires_at
                ],
            )
            .map_err(sql_error("claim lease"))?;
        transaction.commit().map_err(sql_error("claim lease"))?;
        let (cursor, pending) =
            existing.map_or((Sequence::ZERO, None), |row| (row.cursor, row.pending));
        Ok(Claim {
            lease: Lease {
                key: key.clone(),
                owner: owner.clone(),
                epoch,
                expires_at,
            },
            cursor,
            pending,
        })
    }

    fn save_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let (sequence, output_json) = pending_values(lease, pending)?;
        self.fenced_update(
            lease,
            now,
            FencedWrite {
                operation: "save pending output",
                set: "pending_sequence = ?7, pending_work_id = ?8, pending_json = ?9",
                condition: "pending_sequence IS NULL AND cursor + 1 = ?7",
                values: &[&sequence, &pending.work_id.as_str(), &output_json],
            },
            |row| {
                if row.pending.is_some() {
                    ActivityError::ProgressMismatch {
                        what: "pending output is already saved",
                    }
                } else {
                    ActivityError::Noncontiguous {
                        expected: Sequence(row.cursor.0.saturating_add(1)),
                        found: pending.sequence,
                    }
                }
            },
        )
    }

    fn replace_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let (sequence, output_json) = pending_values(lease, pending)?;
        self.fenced_update(
            lease,
            now,
            FencedWrite {
                operation: "replace pending output",
                set: "pending_json = ?8",
                condition: "pending_sequence = ?7",
                values: &[&sequence, &output_json],
            },
            |_| ActivityError::ProgressMismatch {
                what: "no pending output is saved for this record",
            },
        )
    }

    fn advance(&self, lease: &Lease, to: Sequence, now: EpochMillis) -> Result<(), ActivityError> {
        let Some(from) = to.0.checked_sub(1) else {
            return Err(ActivityError::invalid("advance target", "must be positive"));
        };
        let (to_cursor, from_cursor) = (to_i64(to.0, "cursor")?, to_i64(from, "cursor")?);
        self.fenced_update(
            lease,
            now,
            FencedWrite {
                operation: "advance cursor",
                set: "cursor = ?7, pending_sequence = NULL, pending_work_id = NULL,
             pending_json = NULL, last_advance_at = ?6",
                condition: "cursor = ?8",
                values: &[&to_cursor, &from_cursor],
            },
            |row| ActivityError::Noncontiguous {
                expected: Sequence(row.cursor.0.saturating_add(1)),
                found: to,
            },
        )
    }

    fn release(&self, lease: &Lease, now: EpochMillis) -> Result<(), ActivityError> {
        let (processor, version, thread) = key_params(&lease.key)?;
        let connection = lock(&self.connection);
        // Releasing is a courtesy: wait at most RELEASE_WAIT for the store, after which the lease expires.
        connection
            .busy_timeout(RELEASE_WAIT)
            .map_err(sql_error("release lease"))?;
        let result = connection.execute(
            "UPDATE activity_progress SET owner = NULL, lease_expires_at = NULL
             WHERE processor = ?1 AND version = ?2 AND thread = ?3
               AND epoch = ?4 AND owner = ?5 AND lease_expires_at > ?6",
            params![
                processor,
                version,
                thread,
                to_i64(lease.epoch.0, "fencing epoch")?,
                lease.owner.as_str(),
                now
            ],
        );
        connection
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(sql_error("release lease"))?;
        match result.map_err(sql_error("release lease"))? {
            1 => Ok(()),
            _ => Err(ActivityError::StaleLease { epoch: lease.epoch }),
        }
    }

    fn inspect(&self, key: &ProgressKey) -> Result<Option<ProgressView>, ActivityError> {
        let connection = lock(&self.connection);
        let row = read_row(&connection, key)?;
        Ok(row.map(|row| view(key.clone(), row)))
    }

    fn inspect_all(&self, limit: usize) -> Result<Vec<ProgressView>, ActivityError> {
        if limit == 0 || limit > MAX_INSPECT_ROWS {
            return Err(ActivityError::invalid(
                "inspect limit",
                format!("must be between 1 and {MAX_INSPECT_ROWS}"),
            ));
        }
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare(&format!(
                "SELECT processor, version, thread, {ROW_COLUMNS} FROM activity_progress
                 ORDER BY processor, version, thread LIMIT ?1"
            ))
            .map_err(sql_error("inspect progress"))?;
        let rows = statement
            .query_map([limit as i64], |row| {
                let processor: String = row.get(0)?;
                let version: i64 = row.get(1)?;
                let thread: String = row.get(2)?;
                let raw = RawRow {
                    cursor: row.get(3)?,
                    epoch: row.get(4)?,
                    owner: row.get(5)?,
                    lease_expires_at: row.get(6)?,
                    pending_sequence: row.get(7)?,
                    pending_work_id: row.get(8)?,
                    pending_json: row.get(9)?,
                    last_advance_at: row.get(10)?,
                };
                Ok((processor, version, thread, raw))
            })
            .map_err(sql_error("inspect progress"))?;
        let mut views = Vec::new();
        for row in rows {
            let (processor, version, thread, raw) = row.map_err(sql_error("inspect progress"))?;
            let corrupt = |_| ActivityError::Corrupt {
                what: "stored progress key is invalid".to_owned(),
            };
            let key = ProgressKey {
                processor: ProcessorId::new(processor).map_err(corrupt)?,
                version: ProcessorVersion(to_u64(version, "processor version")?),
                thread: ThreadId::new(thread).map_err(corrupt)?,
            };
            views.push(view(key, decode(raw)?));
        }
        Ok(views)
    }
}

fn view(key: ProgressKey, row: ProgressRow) -> ProgressView {
    let lease = match (row.owner, row.lease_expires_at) {
        (Some(owner), Some(expiry)) => WorkerId::new(owner).ok().map(|owner| (owner, expiry)),
        _ => None,
    };
    ProgressView {
        key,
        cursor: row.cursor,
        pending: row.pending,
        last_advance_at: row.last_advance_at,
        epoch: row.epoch,
        lease,
    }
}
