//! The thread log on PostgreSQL: append-only canonical records per thread (SPEC §3, §5).
//!
//! An append bumps the thread's row in `thread_heads` (`INSERT ... ON CONFLICT DO UPDATE ... RETURNING`),
//! whose row lock makes concurrent appenders to one thread, from any process, take turns and get
//! consecutive sequences; appends to different threads do not wait for each other. A trigger refuses
//! any update or delete of a record.

use memory_core::activity::thread::MAX_PAGE_RECORDS;
use memory_core::activity::{
    ActivityError, NewRecord, RecordDigest, Sequence, ThreadId, ThreadLog, ThreadRecord,
};

use crate::db::{Handle, block_activity};
use crate::error::{Fail, activity_corrupt, to_i64, to_u64};

/// The PostgreSQL thread log; get one from [`crate::PostgresStore::thread_log`].
#[derive(Clone)]
pub struct PostgresThreadLog {
    pub(crate) handle: Handle,
}

impl std::fmt::Debug for PostgresThreadLog {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PostgresThreadLog")
            .finish_non_exhaustive()
    }
}

fn decode_record(
    thread: &ThreadId,
    sequence: i64,
    record_json: &str,
    digest: String,
) -> Result<ThreadRecord, ActivityError> {
    let sequence = Sequence(to_u64(sequence, "record sequence")?);
    let record: NewRecord = serde_json::from_str(record_json)
        .map_err(|error| activity_corrupt(format!("thread record does not parse: {error}")))?;
    let digest = RecordDigest::from_hex(digest)?;
    if RecordDigest::of(thread, sequence, &record) != digest {
        return Err(activity_corrupt(format!(
            "thread record {sequence} does not match its digest"
        )));
    }
    Ok(ThreadRecord {
        thread: thread.clone(),
        sequence,
        record,
        digest,
    })
}

impl ThreadLog for PostgresThreadLog {
    fn append(&self, thread: &ThreadId, record: NewRecord) -> Result<ThreadRecord, ActivityError> {
        record.validate()?;
        let record_json =
            memory_core::activity::canonical_progress_json("record canonical JSON", &record)?;
        let thread = thread.clone();
        // Not retried once COMMIT was sent: a second append would add the record twice.
        block_activity!(
            self.handle,
            "append record",
            idempotent = false,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                let bump = transaction
                    .prepare_cached(
                        "INSERT INTO thread_heads (thread, tail) VALUES ($1, 1) \
                     ON CONFLICT (thread) DO UPDATE SET tail = thread_heads.tail + 1 \
                     RETURNING tail",
                    )
                    .await?;
                let tail: i64 = transaction
                    .query_one(&bump, &[&thread.as_str()])
                    .await?
                    .try_get(0)?;
                let sequence = Sequence(to_u64(tail, "record sequence").map_err(Fail::Model)?);
                let digest = RecordDigest::of(&thread, sequence, &record);
                let insert = transaction
                    .prepare_cached(
                        "INSERT INTO thread_records (thread, sequence, record_json, digest) \
                     VALUES ($1, $2, $3, $4)",
                    )
                    .await?;
                transaction
                    .execute(
                        &insert,
                        &[&thread.as_str(), &tail, &record_json, &digest.as_str()],
                    )
                    .await?;
                commit_sent = true;
                transaction.commit().await?;
                Ok(ThreadRecord {
                    thread: thread.clone(),
                    sequence,
                    record: record.clone(),
                    digest,
                })
            }
        )
    }

    fn inspect_tail(&self, thread: &ThreadId) -> Result<Sequence, ActivityError> {
        let thread = thread.clone();
        block_activity!(
            self.handle,
            "inspect tail",
            idempotent = true,
            |client, _commit_sent| {
                let statement = client
                    .prepare_cached(
                        "SELECT COALESCE(max(sequence), 0) FROM thread_records WHERE thread = $1",
                    )
                    .await?;
                let tail: i64 = client
                    .query_one(&statement, &[&thread.as_str()])
                    .await?
                    .try_get(0)?;
                to_u64(tail, "record sequence")
                    .map(Sequence)
                    .map_err(Fail::Model)
            }
        )
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
        let after = to_i64(after.0, "page start")?;
        let thread = thread.clone();
        block_activity!(
            self.handle,
            "read page",
            idempotent = true,
            |client, _commit_sent| {
                let statement = client
                    .prepare_cached(
                        "SELECT sequence, record_json, digest FROM thread_records \
                     WHERE thread = $1 AND sequence > $2 ORDER BY sequence LIMIT $3",
                    )
                    .await?;
                let rows = client
                    .query(&statement, &[&thread.as_str(), &after, &(limit as i64)])
                    .await?;
                let mut records = Vec::with_capacity(rows.len());
                for row in rows {
                    let sequence: i64 = row.try_get(0)?;
                    let record_json: String = row.try_get(1)?;
                    let digest: String = row.try_get(2)?;
                    records.push(
                        decode_record(&thread, sequence, &record_json, digest)
                            .map_err(Fail::Model)?,
                    );
                }
                Ok(records)
            }
        )
    }
}

impl PostgresThreadLog {
    /// Up to `limit` thread ids that have records, in id order, after `after` (exclusive).
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
        let after = after.map_or_else(String::new, |thread| thread.as_str().to_owned());
        block_activity!(
            self.handle,
            "list threads",
            idempotent = true,
            |client, _commit_sent| {
                // `thread_heads` has one row per thread that ever had a record (appends never roll back
                // a committed head without its record: both are in one transaction).
                let statement = client
                    .prepare_cached(
                        "SELECT thread FROM thread_heads WHERE thread > $1 \
                     ORDER BY thread LIMIT $2",
                    )
                    .await?;
                let rows = client.query(&statement, &[&after, &(limit as i64)]).await?;
                let mut threads = Vec::with_capacity(rows.len());
                for row in rows {
                    let thread: String = row.try_get(0)?;
                    threads.push(ThreadId::new(thread).map_err(|_| {
                        Fail::Model(activity_corrupt("stored thread id is invalid"))
                    })?);
                }
                Ok(threads)
            }
        )
    }
}
