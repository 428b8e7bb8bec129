//! Committed-activity progress in SQLite: fenced leases, cursors and pending output (SPEC §5).
//!
//! Every fenced write is one `UPDATE ... WHERE epoch = ? AND owner = ? AND lease_expires_at > now` that
//! must change exactly one row; when it changes none, the same transaction reads the row to say why, and
//! rolls back. See [`memory_core::activity::progress`] for the rules.

use std::path::Path;
use std::sync::Mutex;

use memory_core::activity::rules::progress::{
    Advance, ClaimRequest, KeyColumns, PROGRESS_COLUMNS, PreparedPending, ProgressColumns,
    StoredProgress, note_total_rows, refusal, stale, totals_from_rows,
};
pub use memory_core::activity::rules::{MAX_INSPECT_ROWS, RELEASE_WAIT};
use memory_core::activity::rules::{check_page, column_i64};
use memory_core::activity::{
    ActivityError, Claim, ExtractionNote, ExtractionTotals, Lease, PendingOutput, ProgressKey,
    ProgressStore, ProgressView, Sequence, WorkerId,
};
use memory_core::document::EpochMillis;
use rusqlite::{
    Connection, OptionalExtension, Row, ToSql, TransactionBehavior, params, params_from_iter,
};

use crate::thread_log::{BUSY_TIMEOUT, lock, open_connection, sql_error};

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
    /// Opens the progress store in the file at `path`, creating or migrating the file's schema
    /// ([`crate::SCHEMA_VERSION`]).
    pub fn open(path: &Path) -> Result<Self, ActivityError> {
        Ok(Self {
            connection: Mutex::new(open_connection(path)?),
        })
    }
}

/// Reads the [`PROGRESS_COLUMNS`] starting at column `offset`.
fn columns(row: &Row<'_>, offset: usize) -> rusqlite::Result<ProgressColumns> {
    Ok(ProgressColumns {
        cursor: row.get(offset)?,
        epoch: row.get(offset + 1)?,
        owner: row.get(offset + 2)?,
        lease_expires_at: row.get(offset + 3)?,
        pending_sequence: row.get(offset + 4)?,
        pending_work_id: row.get(offset + 5)?,
        pending_json: row.get(offset + 6)?,
        last_advance_at: row.get(offset + 7)?,
    })
}

fn read_row(
    transaction: &Connection,
    key: &KeyColumns,
) -> Result<Option<StoredProgress>, ActivityError> {
    let raw = transaction
        .query_row(
            &format!(
                "SELECT {PROGRESS_COLUMNS} FROM activity_progress
                 WHERE processor = ?1 AND version = ?2 AND thread = ?3"
            ),
            params![key.processor, key.version, key.thread],
            |row| columns(row, 0),
        )
        .optional()
        .map_err(sql_error("read progress"))?;
    raw.map(ProgressColumns::decode).transpose()
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
    /// one row changed; otherwise it reads the row for [`refusal`] to say why (`otherwise` when the
    /// lease itself is still current) and dropping the transaction rolls it back.
    fn fenced_update(
        &self,
        lease: &Lease,
        now: EpochMillis,
        write: FencedWrite<'_>,
        otherwise: impl FnOnce(&StoredProgress) -> ActivityError,
    ) -> Result<(), ActivityError> {
        let FencedWrite {
            operation,
            set,
            condition,
            values,
        } = write;
        let key = KeyColumns::of(&lease.key)?;
        let epoch = column_i64(lease.epoch.get(), "fencing epoch")?;
        let owner = lease.owner.as_str();
        let fence: [&dyn ToSql; 6] = [
            &key.processor,
            &key.version,
            &key.thread,
            &epoch,
            &owner,
            &now,
        ];
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
            return Err(match read_row(&transaction, &key) {
                Ok(row) => refusal(row.as_ref(), lease, now, otherwise),
                Err(error) => error,
            });
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
        let request = ClaimRequest::new(key, owner, lease_ms, now)?;
        let key = KeyColumns::of(key)?;
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("claim lease"))?;
        let claim = request.plan(read_row(&transaction, &key)?, now)?;
        transaction
            .execute(
                "INSERT INTO activity_progress (processor, version, thread, epoch, owner, lease_expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (processor, version, thread) DO UPDATE SET
                     epoch = excluded.epoch, owner = excluded.owner,
                     lease_expires_at = excluded.lease_expires_at",
                params![
                    key.processor,
                    key.version,
                    key.thread,
                    column_i64(claim.lease.epoch.get(), "fencing epoch")?,
                    claim.lease.owner.as_str(),
                    claim.lease.expires_at
                ],
            )
            .map_err(sql_error("claim lease"))?;
        transaction.commit().map_err(sql_error("claim lease"))?;
        Ok(claim)
    }

    fn save_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let prepared = PreparedPending::new(lease, pending)?;
        self.fenced_update(
            lease,
            now,
            FencedWrite {
                operation: "save pending output",
                set: "pending_sequence = ?7, pending_work_id = ?8, pending_json = ?9",
                condition: "pending_sequence IS NULL AND cursor + 1 = ?7",
                values: &[
                    &prepared.sequence,
                    &pending.work_id.as_str(),
                    &prepared.output_json,
                ],
            },
            |row| prepared.save_refused(row),
        )
    }

    fn replace_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let prepared = PreparedPending::new(lease, pending)?;
        self.fenced_update(
            lease,
            now,
            FencedWrite {
                operation: "replace pending output",
                set: "pending_json = ?8",
                condition: "pending_sequence = ?7",
                values: &[&prepared.sequence, &prepared.output_json],
            },
            |row| prepared.replace_refused(row),
        )
    }

    fn advance(&self, lease: &Lease, to: Sequence, now: EpochMillis) -> Result<(), ActivityError> {
        let advance = Advance::new(to)?;
        self.fenced_update(
            lease,
            now,
            FencedWrite {
                operation: "advance cursor",
                set: "cursor = ?7, pending_sequence = NULL, pending_work_id = NULL,
             pending_json = NULL, last_advance_at = ?6",
                condition: "cursor = ?8",
                values: &[&advance.to, &advance.from],
            },
            |row| advance.refused(row),
        )
    }

    fn release(&self, lease: &Lease, now: EpochMillis) -> Result<(), ActivityError> {
        let key = KeyColumns::of(&lease.key)?;
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
                key.processor,
                key.version,
                key.thread,
                column_i64(lease.epoch.get(), "fencing epoch")?,
                lease.owner.as_str(),
                now
            ],
        );
        connection
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(sql_error("release lease"))?;
        match result.map_err(sql_error("release lease"))? {
            1 => Ok(()),
            _ => Err(stale(lease)),
        }
    }

    fn inspect(&self, key: &ProgressKey) -> Result<Option<ProgressView>, ActivityError> {
        let columns = KeyColumns::of(key)?;
        let connection = lock(&self.connection);
        let row = read_row(&connection, &columns)?;
        Ok(row.map(|row| row.view(key.clone())))
    }

    fn note_extraction(
        &self,
        key: &ProgressKey,
        sequence: Sequence,
        note: &ExtractionNote,
    ) -> Result<(), ActivityError> {
        note.validate()?;
        let totals = note_total_rows(note)
            .into_iter()
            .map(|(name, amount)| Ok((name, column_i64(amount, "extraction total")?)))
            .collect::<Result<Vec<_>, ActivityError>>()?;
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("note extraction"))?;
        let inserted = transaction
            .execute(
                "INSERT OR IGNORE INTO extraction_notes (processor, version, thread, sequence)
                 VALUES (?1, ?2, ?3, ?4)",
                params![
                    key.processor.as_str(),
                    column_i64(key.version.get(), "processor version")?,
                    key.thread.as_str(),
                    column_i64(sequence.get(), "note sequence")?
                ],
            )
            .map_err(sql_error("note extraction"))?;
        if inserted == 1 {
            for (name, amount) in totals {
                transaction
                    .execute(
                        "INSERT INTO extraction_totals (name, amount) VALUES (?1, ?2)
                         ON CONFLICT (name) DO UPDATE SET amount = amount + excluded.amount",
                        params![name, amount],
                    )
                    .map_err(sql_error("note extraction"))?;
            }
        }
        transaction.commit().map_err(sql_error("note extraction"))
    }

    fn extraction_totals(&self) -> Result<ExtractionTotals, ActivityError> {
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare_cached("SELECT name, amount FROM extraction_totals")
            .map_err(sql_error("read extraction totals"))?;
        let rows = statement
            .query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
            })
            .map_err(sql_error("read extraction totals"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(sql_error("read extraction totals"))?;
        totals_from_rows(rows)
    }

    fn inspect_all(&self, limit: usize) -> Result<Vec<ProgressView>, ActivityError> {
        check_page(limit, MAX_INSPECT_ROWS, "inspect limit")?;
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare(&format!(
                "SELECT processor, version, thread, {PROGRESS_COLUMNS} FROM activity_progress
                 ORDER BY processor, version, thread LIMIT ?1"
            ))
            .map_err(sql_error("inspect progress"))?;
        let rows = statement
            .query_map([limit as i64], |row| {
                let key = KeyColumns {
                    processor: row.get(0)?,
                    version: row.get(1)?,
                    thread: row.get(2)?,
                };
                Ok((key, columns(row, 3)?))
            })
            .map_err(sql_error("inspect progress"))?;
        let mut views = Vec::new();
        for row in rows {
            let (key, columns) = row.map_err(sql_error("inspect progress"))?;
            views.push(columns.decode()?.view(key.decode()?));
        }
        Ok(views)
    }
}
