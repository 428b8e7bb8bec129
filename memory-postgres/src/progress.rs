//! Committed-activity progress on PostgreSQL: fenced leases, cursors and pending output (SPEC §5).
//!
//! Every fenced write is one `UPDATE ... WHERE epoch = $ AND owner = $ AND lease_expires_at > now` that
//! must change exactly one row; when it changes none, the same transaction reads the row to say why,
//! and rolls back. At READ COMMITTED, PostgreSQL re-checks that `WHERE` against the latest committed row
//! after waiting for a concurrent writer of it, so a claim committed by another process in between
//! makes the fenced write change nothing: it is refused, never applied under a superseded epoch.
//! A claim locks the row (`SELECT ... FOR UPDATE`, after creating it if missing), so two processes
//! claiming at once get strictly increasing epochs and at most one unexpired lease.

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
use tokio_postgres::Row;

use crate::db::Handle;
use crate::error::{Attempt, Fail};
use crate::retry::{Idempotent, commit};

/// The PostgreSQL progress store; get one from [`crate::PostgresStore::progress`].
#[derive(Clone)]
pub struct PostgresProgressStore {
    pub(crate) handle: Handle,
}

impl std::fmt::Debug for PostgresProgressStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PostgresProgressStore")
            .finish_non_exhaustive()
    }
}

/// Reads the [`PROGRESS_COLUMNS`] starting at column `offset`.
fn columns(row: &Row, offset: usize) -> Result<ProgressColumns, tokio_postgres::Error> {
    Ok(ProgressColumns {
        cursor: row.try_get(offset)?,
        epoch: row.try_get(offset + 1)?,
        owner: row.try_get(offset + 2)?,
        lease_expires_at: row.try_get(offset + 3)?,
        pending_sequence: row.try_get(offset + 4)?,
        pending_work_id: row.try_get(offset + 5)?,
        pending_json: row.try_get(offset + 6)?,
        last_advance_at: row.try_get(offset + 7)?,
    })
}

async fn read_row<C: deadpool_postgres::GenericClient + Sync>(
    client: &C,
    key: &KeyColumns,
    lock: bool,
) -> Attempt<Option<StoredProgress>, ActivityError> {
    let statement = client
        .prepare_cached(&format!(
            "SELECT {PROGRESS_COLUMNS} FROM activity_progress \
             WHERE processor = $1 AND version = $2 AND thread = $3{}",
            if lock { " FOR UPDATE" } else { "" }
        ))
        .await?;
    let row = client
        .query_opt(&statement, &[&key.processor, &key.version, &key.thread])
        .await?;
    row.map(|row| columns(&row, 0)?.decode().map_err(Fail::Model))
        .transpose()
}

/// One fenced write in a transaction of its own: `UPDATE activity_progress SET {set} WHERE <lease> AND
/// {condition}`, the lease columns bound as `$1`..`$6` (processor, version, thread, epoch, owner, now)
/// and `values` from `$7` on. Exactly one row must change; otherwise the refusal is what [`refusal`]
/// finds in the row (stale lease first, then `otherwise`). `set` and `condition` are fixed strings of
/// this module.
async fn fenced_write(
    mut client: deadpool_postgres::Object,
    (set, condition): (&str, &str),
    lease: &Lease,
    now: EpochMillis,
    values: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    otherwise: impl FnOnce(&StoredProgress) -> ActivityError,
) -> Attempt<(), ActivityError> {
    let key = KeyColumns::of(&lease.key).map_err(Fail::Model)?;
    let epoch = column_i64(lease.epoch.get(), "fencing epoch").map_err(Fail::Model)?;
    let transaction = client.transaction().await?;
    let statement = transaction
        .prepare_cached(&format!(
            "UPDATE activity_progress SET {set} \
             WHERE processor = $1 AND version = $2 AND thread = $3 \
               AND epoch = $4 AND owner = $5 AND lease_expires_at > $6 AND {condition}"
        ))
        .await?;
    let owner = lease.owner.as_str();
    let mut parameters: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
        &key.processor,
        &key.version,
        &key.thread,
        &epoch,
        &owner,
        &now,
    ];
    parameters.extend_from_slice(values);
    let changed = transaction.execute(&statement, &parameters).await?;
    if changed != 1 {
        let row = read_row(&transaction, &key, false).await?;
        return Err(Fail::Model(refusal(row.as_ref(), lease, now, otherwise)));
    }
    commit(transaction).await
}

impl ProgressStore for PostgresProgressStore {
    fn claim(
        &self,
        key: &ProgressKey,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Claim, ActivityError> {
        let request = ClaimRequest::new(key, owner, lease_ms, now)?;
        let params = KeyColumns::of(key)?;
        // A retry after a lost COMMIT claims again: the first epoch is superseded before anyone used it.
        self.handle.call_blocking(
            "claim lease",
            Idempotent::Yes,
            (params, request),
            move |(params, request), mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    let create = transaction
                        .prepare_cached(
                            "INSERT INTO activity_progress (processor, version, thread) \
                             VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                        )
                        .await?;
                    transaction
                        .execute(
                            &create,
                            &[&params.processor, &params.version, &params.thread],
                        )
                        .await?;
                    let existing = read_row(&transaction, params, true).await?;
                    let claim = request.clone().plan(existing, now).map_err(Fail::Model)?;
                    let epoch = column_i64(claim.lease.epoch.get(), "fencing epoch")
                        .map_err(Fail::Model)?;
                    let take = transaction
                        .prepare_cached(
                            "UPDATE activity_progress \
                             SET epoch = $4, owner = $5, lease_expires_at = $6 \
                             WHERE processor = $1 AND version = $2 AND thread = $3",
                        )
                        .await?;
                    transaction
                        .execute(
                            &take,
                            &[
                                &params.processor,
                                &params.version,
                                &params.thread,
                                &epoch,
                                &claim.lease.owner.as_str(),
                                &claim.lease.expires_at,
                            ],
                        )
                        .await?;
                    commit(transaction).await?;
                    Ok(claim)
                })
            },
        )
    }

    fn save_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        // Checked before the transaction: a refused output leaves prior progress untouched.
        let prepared = PreparedPending::new(lease, pending)?;
        let (lease, work_id) = (lease.clone(), pending.work_id.clone());
        self.handle.call_blocking(
            "save pending output",
            Idempotent::No,
            (lease, prepared, work_id),
            move |(lease, prepared, work_id), client| {
                Box::pin(async move {
                    fenced_write(
                        client,
                        (
                            "pending_sequence = $7, pending_work_id = $8, pending_json = $9",
                            "pending_sequence IS NULL AND cursor + 1 = $7",
                        ),
                        lease,
                        now,
                        &[&prepared.sequence, &work_id.as_str(), &prepared.output_json],
                        |row| prepared.save_refused(row),
                    )
                    .await
                })
            },
        )
    }

    fn replace_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        // Checked before the transaction: a refused output leaves the saved one untouched.
        let prepared = PreparedPending::new(lease, pending)?;
        let lease = lease.clone();
        // Idempotent: replacing with the same output twice leaves the same row.
        self.handle.call_blocking(
            "replace pending output",
            Idempotent::Yes,
            (lease, prepared),
            move |(lease, prepared), client| {
                Box::pin(async move {
                    fenced_write(
                        client,
                        ("pending_json = $8", "pending_sequence = $7"),
                        lease,
                        now,
                        &[&prepared.sequence, &prepared.output_json],
                        |row| prepared.replace_refused(row),
                    )
                    .await
                })
            },
        )
    }

    fn advance(&self, lease: &Lease, to: Sequence, now: EpochMillis) -> Result<(), ActivityError> {
        let advance = Advance::new(to)?;
        let lease = lease.clone();
        self.handle.call_blocking(
            "advance cursor",
            Idempotent::No,
            lease,
            move |lease, client| {
                Box::pin(async move {
                    fenced_write(
                        client,
                        (
                            "cursor = $7, pending_sequence = NULL, pending_work_id = NULL, \
                             pending_json = NULL, last_advance_at = $6",
                            "cursor = $8",
                        ),
                        lease,
                        now,
                        &[&advance.to, &advance.from],
                        |row| advance.refused(row),
                    )
                    .await
                })
            },
        )
    }

    fn release(&self, lease: &Lease, now: EpochMillis) -> Result<(), ActivityError> {
        let params = KeyColumns::of(&lease.key)?;
        let epoch = column_i64(lease.epoch.get(), "fencing epoch")?;
        let lease = lease.clone();
        self.handle.call_blocking(
            "release lease",
            Idempotent::No,
            (lease, params),
            move |(lease, params), mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    // Releasing is a courtesy: wait at most RELEASE_WAIT for the row, after which the lease
                    // expires on its own.
                    transaction
                        .batch_execute(&format!(
                            "SET LOCAL lock_timeout = {}",
                            RELEASE_WAIT.as_millis()
                        ))
                        .await?;
                    let update = transaction
                        .prepare_cached(
                            "UPDATE activity_progress SET owner = NULL, lease_expires_at = NULL \
                             WHERE processor = $1 AND version = $2 AND thread = $3 \
                             AND epoch = $4 AND owner = $5 AND lease_expires_at > $6",
                        )
                        .await?;
                    let changed = transaction
                        .execute(
                            &update,
                            &[
                                &params.processor,
                                &params.version,
                                &params.thread,
                                &epoch,
                                &lease.owner.as_str(),
                                &now,
                            ],
                        )
                        .await?;
                    if changed != 1 {
                        return Err(Fail::Model(stale(lease)));
                    }
                    commit(transaction).await?;
                    Ok(())
                })
            },
        )
    }

    fn inspect(&self, key: &ProgressKey) -> Result<Option<ProgressView>, ActivityError> {
        let params = KeyColumns::of(key)?;
        let key = key.clone();
        self.handle.call_blocking(
            "inspect progress",
            Idempotent::Yes,
            (params, key),
            move |(params, key), client| {
                Box::pin(async move {
                    Ok(read_row(&client, params, false)
                        .await?
                        .map(|row| row.view(key.clone())))
                })
            },
        )
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
        let processor = key.processor.as_str().to_owned();
        let version = column_i64(key.version.get(), "processor version")?;
        let thread = key.thread.as_str().to_owned();
        let sequence = column_i64(sequence.get(), "note sequence")?;
        // Idempotent: a retry after an unknown commit finds the note and adds nothing.
        self.handle.call_blocking(
            "note extraction",
            Idempotent::Yes,
            (processor, thread, totals),
            move |(processor, thread, totals), mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    let note = transaction
                        .prepare_cached(
                            "INSERT INTO extraction_notes (processor, version, thread, sequence) \
                             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                        )
                        .await?;
                    let inserted = transaction
                        .execute(&note, &[&processor, &version, &thread, &sequence])
                        .await?;
                    if inserted == 1 {
                        let add = transaction
                            .prepare_cached(
                                "INSERT INTO extraction_totals (name, amount) VALUES ($1, $2) \
                                 ON CONFLICT (name) DO UPDATE \
                                 SET amount = extraction_totals.amount + excluded.amount",
                            )
                            .await?;
                        for (name, amount) in totals {
                            transaction.execute(&add, &[name, amount]).await?;
                        }
                    }
                    commit(transaction).await?;
                    Ok(())
                })
            },
        )
    }

    fn extraction_totals(&self) -> Result<ExtractionTotals, ActivityError> {
        self.handle.call_blocking(
            "read extraction totals",
            Idempotent::Yes,
            (),
            move |(), client| {
                Box::pin(async move {
                    let statement = client
                        .prepare_cached("SELECT name, amount FROM extraction_totals")
                        .await?;
                    let rows = client.query(&statement, &[]).await?;
                    let mut pairs = Vec::with_capacity(rows.len());
                    for row in rows {
                        pairs.push((row.try_get::<_, String>(0)?, row.try_get::<_, i64>(1)?));
                    }
                    totals_from_rows(pairs).map_err(Fail::Model)
                })
            },
        )
    }

    fn inspect_all(&self, limit: usize) -> Result<Vec<ProgressView>, ActivityError> {
        check_page(limit, MAX_INSPECT_ROWS, "inspect limit")?;
        self.handle.call_blocking(
            "inspect progress",
            Idempotent::Yes,
            (),
            move |(), client| {
                Box::pin(async move {
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT processor, version, thread, {PROGRESS_COLUMNS} \
                             FROM activity_progress \
                             ORDER BY processor, version, thread LIMIT $1"
                        ))
                        .await?;
                    let rows = client.query(&statement, &[&(limit as i64)]).await?;
                    let mut views = Vec::with_capacity(rows.len());
                    for row in rows {
                        let key = KeyColumns {
                            processor: row.try_get(0)?,
                            version: row.try_get(1)?,
                            thread: row.try_get(2)?,
                        };
                        let stored = columns(&row, 3)?.decode().map_err(Fail::Model)?;
                        views.push(stored.view(key.decode().map_err(Fail::Model)?));
                    }
                    Ok(views)
                })
            },
        )
    }
}
