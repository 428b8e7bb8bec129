//! The thread log in SQLite: append-only canonical records per thread (SPEC §3, §5).
//!
//! The thread log, activity progress and remembering stores each open their own connection to the same
//! file and create only their own tables, so they depend on nothing inside the memory store. Every
//! connection uses WAL with `synchronous = FULL`, like the memory store: an acknowledged append,
//! suppression or progress write is synced before it is acknowledged, so neither a process crash nor a
//! power loss (on a disk that honours `fsync`) loses it.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use memory_core::StoreFault;
use memory_core::activity::thread::MAX_PAGE_RECORDS;
use memory_core::activity::{
    ActivityError, NewRecord, RecordDigest, Sequence, ThreadId, ThreadLog, ThreadRecord,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// The storage format of the activity tables (thread log, progress, remembering).
pub const ACTIVITY_FORMAT: i64 = 1;

/// How long a connection waits for another writer before reporting `Busy`.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) use crate::error::activity_error as sql_error;

/// Opens a connection for one activity component, creating its tables with `schema` and checking that the
/// file's recorded format for that component is [`ACTIVITY_FORMAT`].
pub(crate) fn open_component(
    path: &Path,
    component: &'static str,
    schema: &str,
) -> Result<Connection, ActivityError> {
    let connection = Connection::open(path).map_err(sql_error("open"))?;
    connection
        .busy_timeout(BUSY_TIMEOUT)
        .map_err(sql_error("open"))?;
    connection
        .pragma_update(None, "journal_mode", "WAL")
        .map_err(sql_error("open"))?;
    // FULL like the memory store: an acknowledged append, forget (suppression plus its cleanup
    // intent) or lease advance must survive a power loss too, not only a process crash.
    connection
        .pragma_update(None, "synchronous", "FULL")
        .map_err(sql_error("open"))?;
    let mut connection = connection;
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error("create schema"))?;
    transaction
        .execute_batch(
            "CREATE TABLE IF NOT EXISTS activity_formats (
                component TEXT PRIMARY KEY,
                format INTEGER NOT NULL
            ) WITHOUT ROWID;",
        )
        .map_err(sql_error("create schema"))?;
    let recorded: Option<i64> = transaction
        .query_row(
            "SELECT format FROM activity_formats WHERE component = ?1",
            [component],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error("read format"))?;
    match recorded {
        Some(ACTIVITY_FORMAT) => {}
        Some(other) => {
            return Err(ActivityError::Store(StoreFault::Corrupt {
                what: format!(
                    "{component} tables have storage format {other}, this build reads {ACTIVITY_FORMAT}"
                ),
            }));
        }
        None => {
            transaction
                .execute(
                    "INSERT INTO activity_formats (component, format) VALUES (?1, ?2)",
                    params![component, ACTIVITY_FORMAT],
                )
                .map_err(sql_error("record format"))?;
        }
    }
    transaction
        .execute_batch(schema)
        .map_err(sql_error("create schema"))?;
    transaction.commit().map_err(sql_error("create schema"))?;
    Ok(connection)
}

/// Locks a connection mutex. A panic while holding it cannot leave a half-done transaction: rusqlite
/// rolls an unfinished transaction back when it is dropped during unwinding.
pub(crate) fn lock(connection: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    connection
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) use memory_core::activity::rules::{column_i64 as to_i64, stored_u64 as to_u64};

const THREAD_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS thread_records (
        thread TEXT NOT NULL,
        sequence INTEGER NOT NULL CHECK (sequence > 0),
        record_json TEXT NOT NULL,
        digest TEXT NOT NULL,
        PRIMARY KEY (thread, sequence)
    ) WITHOUT ROWID;
    CREATE TRIGGER IF NOT EXISTS thread_records_append_only_update
        BEFORE UPDATE ON thread_records
        BEGIN SELECT RAISE(ABORT, 'thread records are append-only'); END;
    CREATE TRIGGER IF NOT EXISTS thread_records_append_only_delete
        BEFORE DELETE ON thread_records
        BEGIN SELECT RAISE(ABORT, 'thread records are append-only'); END;
";

/// The SQLite thread log.
pub struct SqliteThreadLog {
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteThreadLog {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SqliteThreadLog")
            .finish_non_exhaustive()
    }
}

impl SqliteThreadLog {
    /// Opens (creating if needed) the thread log tables in the file at `path`.
    pub fn open(path: &Path) -> Result<Self, ActivityError> {
        Ok(Self {
            connection: Mutex::new(open_component(path, "thread_log", THREAD_SCHEMA)?),
        })
    }
}

fn decode_record(
    thread: &ThreadId,
    sequence: i64,
    record_json: &str,
    digest: String,
) -> Result<ThreadRecord, ActivityError> {
    let sequence = Sequence(to_u64(sequence, "record sequence")?);
    let record: NewRecord = serde_json::from_str(record_json).map_err(|error| {
        ActivityError::Store(StoreFault::Corrupt {
            what: format!("thread record does not parse: {error}"),
        })
    })?;
    let digest = RecordDigest::from_hex(digest)?;
    if RecordDigest::of(thread, sequence, &record) != digest {
        return Err(ActivityError::Store(StoreFault::Corrupt {
            what: format!("thread record {sequence} does not match its digest"),
        }));
    }
    Ok(ThreadRecord {
        thread: thread.clone(),
        sequence,
        record,
        digest,
    })
}

impl ThreadLog for SqliteThreadLog {
    fn append(&self, thread: &ThreadId, record: NewRecord) -> Result<ThreadRecord, ActivityError> {
        record.validate()?;
        let record_json =
            memory_core::activity::canonical_progress_json("record canonical JSON", &record)?;
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("append record"))?;
        let tail: i64 = transaction
            .query_row(
                "SELECT COALESCE(MAX(sequence), 0) FROM thread_records WHERE thread = ?1",
                [thread.as_str()],
                |row| row.get(0),
            )
            .map_err(sql_error("append record"))?;
        let sequence =
            Sequence(to_u64(tail, "record sequence")?)
                .next()
                .ok_or(ActivityError::TooLarge {
                    limit: "thread sequence",
                    max: u64::MAX,
                    actual: u64::MAX,
                })?;
        let digest = RecordDigest::of(thread, sequence, &record);
        transaction
            .execute(
                "INSERT INTO thread_records (thread, sequence, record_json, digest)
                 VALUES (?1, ?2, ?3, ?4)",
                params![
                    thread.as_str(),
                    to_i64(sequence.0, "thread sequence")?,
                    record_json,
                    digest.as_str()
                ],
            )
            .map_err(sql_error("append record"))?;
        transaction.commit().map_err(sql_error("append record"))?;
        Ok(ThreadRecord {
            thread: thread.clone(),
            sequence,
            record,
            digest,
        })
    }

    fn inspect_tail(&self, thread: &ThreadId) -> Result<Sequence, ActivityError> {
        let connection = lock(&self.connection);
        let tail: i64 = connection
            .query_row(
                "SELECT COALESCE(MAX(sequence), 0) FROM thread_records WHERE thread = ?1",
                [thread.as_str()],
                |row| row.get(0),
            )
            .map_err(sql_error("inspect tail"))?;
        Ok(Sequence(to_u64(tail, "record sequence")?))
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
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare_cached(
                "SELECT sequence, record_json, digest FROM thread_records
                 WHERE thread = ?1 AND sequence > ?2 ORDER BY sequence LIMIT ?3",
            )
            .map_err(sql_error("read page"))?;
        let rows = statement
            .query_map(
                params![
                    thread.as_str(),
                    to_i64(after.0, "page start")?,
                    limit as i64
                ],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                },
            )
            .map_err(sql_error("read page"))?;
        let mut records = Vec::with_capacity(limit.min(64));
        for row in rows {
            let (sequence, record_json, digest) = row.map_err(sql_error("read page"))?;
            records.push(decode_record(thread, sequence, &record_json, digest)?);
        }
        Ok(records)
    }
}

impl SqliteThreadLog {
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
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare_cached(
                "SELECT DISTINCT thread FROM thread_records WHERE thread > ?1 ORDER BY thread LIMIT ?2",
            )
            .map_err(sql_error("list threads"))?;
        let rows = statement
            .query_map(
                params![after.map_or("", ThreadId::as_str), limit as i64],
                |row| row.get::<_, String>(0),
            )
            .map_err(sql_error("list threads"))?;
        let mut threads = Vec::new();
        for row in rows {
            let thread = row.map_err(sql_error("list threads"))?;
            threads.push(ThreadId::new(thread).map_err(|_| {
                ActivityError::Store(StoreFault::Corrupt {
                    what: "stored thread id is invalid".to_owned(),
                })
            })?);
        }
        Ok(threads)
    }
}
