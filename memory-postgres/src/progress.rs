//! Committed-activity progress on PostgreSQL: fenced leases, cursors and pending output (SPEC §5).
//!
//! Every fenced write is one `UPDATE ... WHERE epoch = $ AND owner = $ AND lease_expires_at > now` that
//! must change exactly one row; when it changes none, the same transaction reads the row to say why,
//! and rolls back. At READ COMMITTED, PostgreSQL re-checks that `WHERE` against the latest committed row
//! after waiting for a concurrent writer of it, so a claim committed by another process in between
//! makes the fenced write change nothing: it is refused, never applied under a superseded epoch.
//! A claim locks the row (`SELECT ... FOR UPDATE`, after creating it if missing), so two processes
//! claiming at once get strictly increasing epochs and at most one unexpired lease.

use std::time::Duration;

use memory_core::activity::{
    ActivityError, Claim, FencingEpoch, Lease, PendingOutput, ProcessorId, ProcessorVersion,
    ProgressKey, ProgressStore, ProgressView, Sequence, ThreadId, WorkId, WorkerId,
    canonical_progress_json,
};
use memory_core::document::EpochMillis;
use tokio_postgres::Row;

use crate::db::{Handle, block_activity};
use crate::error::{Fail, activity_corrupt, to_i64, to_u64};

/// How long `release` waits for a row lock before leaving the lease to expire.
pub const RELEASE_WAIT: Duration = Duration::from_millis(500);
/// Most rows `inspect_all` returns.
pub const MAX_INSPECT_ROWS: usize = 10_000;

type Attempt<T> = Result<T, Fail<ActivityError>>;

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

/// Decodes the [`ROW_COLUMNS`] starting at column `offset`.
fn decode(row: &Row, offset: usize) -> Attempt<ProgressRow> {
    let cursor: i64 = row.try_get(offset)?;
    let epoch: i64 = row.try_get(offset + 1)?;
    let owner: Option<String> = row.try_get(offset + 2)?;
    let lease_expires_at: Option<i64> = row.try_get(offset + 3)?;
    let pending_sequence: Option<i64> = row.try_get(offset + 4)?;
    let pending_work_id: Option<String> = row.try_get(offset + 5)?;
    let pending_json: Option<String> = row.try_get(offset + 6)?;
    let last_advance_at: Option<i64> = row.try_get(offset + 7)?;
    let pending = match (pending_sequence, pending_work_id, pending_json) {
        (None, None, None) => None,
        (Some(sequence), Some(work_id), Some(json)) => Some(PendingOutput {
            sequence: Sequence(to_u64(sequence, "pending sequence").map_err(Fail::Model)?),
            work_id: WorkId::new(work_id)
                .map_err(|_| Fail::Model(activity_corrupt("stored pending work id is invalid")))?,
            output: serde_json::from_str(&json).map_err(|error| {
                Fail::Model(activity_corrupt(format!(
                    "pending output does not parse: {error}"
                )))
            })?,
        }),
        _ => {
            return Err(Fail::Model(activity_corrupt(
                "pending output is partly stored",
            )));
        }
    };
    Ok(ProgressRow {
        cursor: Sequence(to_u64(cursor, "cursor").map_err(Fail::Model)?),
        epoch: FencingEpoch(to_u64(epoch, "epoch").map_err(Fail::Model)?),
        owner,
        lease_expires_at,
        pending,
        last_advance_at,
    })
}

/// The owned key columns of a progress row.
#[derive(Clone)]
struct KeyParams {
    processor: String,
    version: i64,
    thread: String,
}

impl KeyParams {
    fn of(key: &ProgressKey) -> Result<Self, ActivityError> {
        Ok(Self {
            processor: key.processor.as_str().to_owned(),
            version: to_i64(key.version.0, "processor version")?,
            thread: key.thread.as_str().to_owned(),
        })
    }
}

async fn read_row<C: deadpool_postgres::GenericClient + Sync>(
    client: &C,
    key: &KeyParams,
    lock: bool,
) -> Attempt<Option<ProgressRow>> {
    let statement = client
        .prepare_cached(&format!(
            "SELECT {ROW_COLUMNS} FROM activity_progress \
             WHERE processor = $1 AND version = $2 AND thread = $3{}",
            if lock { " FOR UPDATE" } else { "" }
        ))
        .await?;
    let row = client
        .query_opt(&statement, &[&key.processor, &key.version, &key.thread])
        .await?;
    row.map(|row| decode(&row, 0)).transpose()
}

/// Explains a fenced write that changed no row: stale lease first, then the caller's specific mismatch.
async fn explain<C: deadpool_postgres::GenericClient + Sync>(
    client: &C,
    key: &KeyParams,
    lease: &Lease,
    now: EpochMillis,
    otherwise: impl FnOnce(&ProgressRow) -> ActivityError,
) -> Fail<ActivityError> {
    match read_row(client, key, false).await {
        Err(error) => error,
        Ok(None) => Fail::Model(ActivityError::StaleLease { epoch: lease.epoch }),
        Ok(Some(row)) => {
            let current = row.epoch == lease.epoch
                && row.owner.as_deref() == Some(lease.owner.as_str())
                && row.lease_expires_at.is_some_and(|expiry| expiry > now);
            Fail::Model(if current {
                otherwise(&row)
            } else {
                ActivityError::StaleLease { epoch: lease.epoch }
            })
        }
    }
}

/// One fenced write inside `transaction`: `UPDATE activity_progress SET {set} WHERE <lease> AND
/// {condition}`, the lease columns bound as `$1`..`$6` (processor, version, thread, epoch, owner, now)
/// and `values` from `$7` on. Exactly one row must change; otherwise the refusal is what [`explain`]
/// finds (stale lease first, then `otherwise`). `set` and `condition` are fixed strings of this module.
#[allow(clippy::too_many_arguments)]
async fn fenced_update(
    transaction: &deadpool_postgres::Transaction<'_>,
    set: &str,
    condition: &str,
    key: &KeyParams,
    lease: &Lease,
    epoch: i64,
    now: EpochMillis,
    values: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    otherwise: impl FnOnce(&ProgressRow) -> ActivityError,
) -> Attempt<()> {
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
        return Err(explain(transaction, key, lease, now, otherwise).await);
    }
    Ok(())
}

impl ProgressStore for PostgresProgressStore {
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
        let params = KeyParams::of(key)?;
        let (key, owner) = (key.clone(), owner.clone());
        // A retry after a lost COMMIT claims again: the first epoch is superseded before anyone used it.
        block_activity!(
            self.handle,
            "claim lease",
            idempotent = true,
            |client, commit_sent| {
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
                let existing = read_row(&transaction, &params, true).await?;
                if let Some(row) = &existing
                    && let (Some(holder), Some(expiry)) = (&row.owner, row.lease_expires_at)
                    && expiry > now
                    && holder != owner.as_str()
                {
                    return Err(Fail::Model(ActivityError::LeaseHeld { until: expiry }));
                }
                let epoch = FencingEpoch(
                    existing
                        .as_ref()
                        .map_or(0, |row| row.epoch.0)
                        .checked_add(1)
                        .ok_or(Fail::Model(ActivityError::TooLarge {
                            limit: "fencing epoch",
                            max: u64::MAX,
                            actual: u64::MAX,
                        }))?,
                );
                let epoch_value = to_i64(epoch.0, "fencing epoch").map_err(Fail::Model)?;
                let take = transaction
                .prepare_cached(
                    "UPDATE activity_progress SET epoch = $4, owner = $5, lease_expires_at = $6 \
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
                            &epoch_value,
                            &owner.as_str(),
                            &expires_at,
                        ],
                    )
                    .await?;
                commit_sent = true;
                transaction.commit().await?;
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
        )
    }

    fn save_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        if pending.work_id != lease.key.work_id(pending.sequence) {
            return Err(ActivityError::ProgressMismatch {
                what: "work id does not derive from the record's position",
            });
        }
        // Checked before the transaction: a refused output leaves prior progress untouched.
        let output_json =
            canonical_progress_json("pending output canonical JSON", &pending.output)?;
        let params = KeyParams::of(&lease.key)?;
        let epoch = to_i64(lease.epoch.0, "fencing epoch")?;
        let sequence = to_i64(pending.sequence.0, "pending sequence")?;
        let (lease, pending) = (lease.clone(), pending.clone());
        block_activity!(
            self.handle,
            "save pending output",
            idempotent = false,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                fenced_update(
                    &transaction,
                    "pending_sequence = $7, pending_work_id = $8, pending_json = $9",
                    "pending_sequence IS NULL AND cursor + 1 = $7",
                    &params,
                    &lease,
                    epoch,
                    now,
                    &[&sequence, &pending.work_id.as_str(), &output_json],
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
                .await?;
                commit_sent = true;
                transaction.commit().await?;
                Ok(())
            }
        )
    }

    fn replace_pending(
        &self,
        lease: &Lease,
        pending: &PendingOutput,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        if pending.work_id != lease.key.work_id(pending.sequence) {
            return Err(ActivityError::ProgressMismatch {
                what: "work id does not derive from the record's position",
            });
        }
        // Checked before the transaction: a refused output leaves the saved one untouched.
        let output_json =
            canonical_progress_json("pending output canonical JSON", &pending.output)?;
        let params = KeyParams::of(&lease.key)?;
        let epoch = to_i64(lease.epoch.0, "fencing epoch")?;
        let sequence = to_i64(pending.sequence.0, "pending sequence")?;
        let lease = lease.clone();
        // Idempotent: replacing with the same output twice leaves the same row.
        block_activity!(
            self.handle,
            "replace pending output",
            idempotent = true,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                fenced_update(
                    &transaction,
                    "pending_json = $8",
                    "pending_sequence = $7",
                    &params,
                    &lease,
                    epoch,
                    now,
                    &[&sequence, &output_json],
                    |_| ActivityError::ProgressMismatch {
                        what: "no pending output is saved for this record",
                    },
                )
                .await?;
                commit_sent = true;
                transaction.commit().await?;
                Ok(())
            }
        )
    }

    fn advance(&self, lease: &Lease, to: Sequence, now: EpochMillis) -> Result<(), ActivityError> {
        let Some(from) = to.0.checked_sub(1) else {
            return Err(ActivityError::invalid("advance target", "must be positive"));
        };
        let params = KeyParams::of(&lease.key)?;
        let epoch = to_i64(lease.epoch.0, "fencing epoch")?;
        let (to_value, from_value) = (to_i64(to.0, "cursor")?, to_i64(from, "cursor")?);
        let lease = lease.clone();
        block_activity!(
            self.handle,
            "advance cursor",
            idempotent = false,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                fenced_update(
                    &transaction,
                    "cursor = $7, pending_sequence = NULL, pending_work_id = NULL, \
                     pending_json = NULL, last_advance_at = $6",
                    "cursor = $8",
                    &params,
                    &lease,
                    epoch,
                    now,
                    &[&to_value, &from_value],
                    |row| ActivityError::Noncontiguous {
                        expected: Sequence(row.cursor.0.saturating_add(1)),
                        found: to,
                    },
                )
                .await?;
                commit_sent = true;
                transaction.commit().await?;
                Ok(())
            }
        )
    }

    fn release(&self, lease: &Lease, now: EpochMillis) -> Result<(), ActivityError> {
        let params = KeyParams::of(&lease.key)?;
        let epoch = to_i64(lease.epoch.0, "fencing epoch")?;
        let lease = lease.clone();
        block_activity!(
            self.handle,
            "release lease",
            idempotent = false,
            |client, commit_sent| {
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
                    return Err(Fail::Model(ActivityError::StaleLease {
                        epoch: lease.epoch,
                    }));
                }
                commit_sent = true;
                transaction.commit().await?;
                Ok(())
            }
        )
    }

    fn inspect(&self, key: &ProgressKey) -> Result<Option<ProgressView>, ActivityError> {
        let params = KeyParams::of(key)?;
        let key = key.clone();
        block_activity!(
            self.handle,
            "inspect progress",
            idempotent = true,
            |client, _commit_sent| {
                Ok(read_row(&client, &params, false)
                    .await?
                    .map(|row| view(key.clone(), row)))
            }
        )
    }

    fn inspect_all(&self, limit: usize) -> Result<Vec<ProgressView>, ActivityError> {
        if limit == 0 || limit > MAX_INSPECT_ROWS {
            return Err(ActivityError::invalid(
                "inspect limit",
                format!("must be between 1 and {MAX_INSPECT_ROWS}"),
            ));
        }
        block_activity!(
            self.handle,
            "inspect progress",
            idempotent = true,
            |client, _commit_sent| {
                let statement = client
                    .prepare_cached(&format!(
                        "SELECT processor, version, thread, {ROW_COLUMNS} FROM activity_progress \
                     ORDER BY processor, version, thread LIMIT $1"
                    ))
                    .await?;
                let rows = client.query(&statement, &[&(limit as i64)]).await?;
                let mut views = Vec::with_capacity(rows.len());
                for row in rows {
                    let processor: String = row.try_get(0)?;
                    let version: i64 = row.try_get(1)?;
                    let thread: String = row.try_get(2)?;
                    let bad = || Fail::Model(activity_corrupt("stored progress key is invalid"));
                    let key = ProgressKey {
                        processor: ProcessorId::new(processor).map_err(|_| bad())?,
                        version: ProcessorVersion(
                            to_u64(version, "processor version").map_err(Fail::Model)?,
                        ),
                        thread: ThreadId::new(thread).map_err(|_| bad())?,
                    };
                    views.push(view(key, decode(&row, 3)?));
                }
                Ok(views)
            }
        )
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
