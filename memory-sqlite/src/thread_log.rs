//! The thread log in SQLite: append-only canonical records per thread (SPEC §3, §5).
//!
//! The thread log, activity progress and remembering stores each open their own connection to the same
//! file, so they depend on nothing inside the memory store; their tables are in the crate's one
//! versioned schema (`crate::schema`), created or migrated by whichever store opens the file first.
//! Every connection uses WAL with `synchronous = FULL`, like the memory store: an acknowledged
//! append, suppression or progress write is synced before it is acknowledged, so neither a process
//! crash nor a power loss (on a disk that honours `fsync`) loses it.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use memory_core::StoreFault;
use memory_core::activity::thread::{
    BindingStep, binding_step, check_park_kind, check_record_page, check_thread_page,
    overview_destinations, rebinding,
};
use memory_core::activity::{
    ActivityError, FoldCheckpoint, LogEntry, NewRecord, PendingThread, RecordDigest, Sequence,
    ThreadBinding, ThreadDestination, ThreadId, ThreadLog, ThreadOverview, ThreadRecord,
    decode_stored_record,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// How long a connection waits for another writer before reporting `Busy`.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) use crate::error::activity_error as sql_error;

/// Opens a connection for one activity store, bringing the file's schema (every store's tables) to
/// this build's version.
pub(crate) fn open_connection(path: &Path) -> Result<Connection, ActivityError> {
    let mut connection = Connection::open(path).map_err(sql_error("open"))?;
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
    crate::schema::migrate(&mut connection)?;
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

/// A listed thread and its binding's stored (destination, generation), unchecked.
type ListedThread = (ThreadId, Option<(String, i64)>);

impl SqliteThreadLog {
    /// Up to `limit` threads with records after `after`, in id order, each with its binding's stored
    /// columns: what both listings read, in one query.
    fn listed_threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ListedThread>, ActivityError> {
        check_thread_page(limit)?;
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare_cached(
                "SELECT listed.thread, bindings.destination, bindings.generation \
                 FROM (SELECT DISTINCT thread FROM thread_records WHERE thread > ?1 \
                       ORDER BY thread LIMIT ?2) AS listed \
                 LEFT JOIN thread_bindings AS bindings ON bindings.thread = listed.thread \
                 ORDER BY listed.thread",
            )
            .map_err(sql_error("list threads"))?;
        let rows = statement
            .query_map(
                params![after.map_or("", ThreadId::as_str), limit as i64],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, Option<String>>(1)?,
                        row.get::<_, Option<i64>>(2)?,
                    ))
                },
            )
            .map_err(sql_error("list threads"))?;
        let mut threads = Vec::new();
        for row in rows {
            let (thread, destination, generation) = row.map_err(sql_error("list threads"))?;
            // The join leaves both columns null for an unbound thread (both are NOT NULL in
            // `thread_bindings`).
            threads.push((stored_thread(thread)?, destination.zip(generation)));
        }
        Ok(threads)
    }

    /// Opens the thread log in the file at `path`, creating or migrating the file's schema
    /// ([`crate::SCHEMA_VERSION`]).
    pub fn open(path: &Path) -> Result<Self, ActivityError> {
        Ok(Self {
            connection: Mutex::new(open_connection(path)?),
        })
    }
}

impl ThreadLog for SqliteThreadLog {
    fn append_to(
        &self,
        thread: &ThreadId,
        destination: Option<&ThreadDestination>,
        record: NewRecord,
    ) -> Result<ThreadRecord, ActivityError> {
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
        let tail = Sequence::new(to_u64(tail, "record sequence")?);
        let current = if destination.is_some() {
            read_binding(&transaction, thread)?
        } else {
            None
        };
        let step = binding_step(current.as_ref(), tail, destination)?;
        let sequence = tail.next().ok_or(ActivityError::TooLarge {
            limit: "thread sequence",
            max: u64::MAX,
            actual: u64::MAX,
        })?;
        let digest = RecordDigest::of(thread, sequence, &record);
        let sequence_column = to_i64(sequence.get(), "thread sequence")?;
        transaction
            .execute(
                "INSERT INTO thread_records (thread, sequence, record_json, digest)
                 VALUES (?1, ?2, ?3, ?4)",
                params![
                    thread.as_str(),
                    sequence_column,
                    record_json,
                    digest.as_str()
                ],
            )
            .map_err(sql_error("append record"))?;
        if let (BindingStep::Bind, Some(destination)) = (step, destination) {
            transaction
                .execute(
                    "INSERT INTO thread_bindings (thread, destination, generation) VALUES (?1, ?2, 0)",
                    params![thread.as_str(), destination.to_stored()],
                )
                .map_err(sql_error("bind thread"))?;
        }
        mark_pending(&transaction, thread, sequence_column)?;
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
        Ok(Sequence::new(to_u64(tail, "record sequence")?))
    }

    fn read_entries(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<LogEntry>, ActivityError> {
        check_record_page(limit)?;
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
                    to_i64(after.get(), "page start")?,
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
        let mut entries = Vec::with_capacity(limit.min(64));
        for row in rows {
            let (sequence, record_json, digest) = row.map_err(sql_error("read page"))?;
            let sequence = Sequence::new(to_u64(sequence, "record sequence")?);
            entries.push(decode_stored_record(
                thread,
                sequence,
                &record_json,
                &digest,
            ));
        }
        Ok(entries)
    }

    fn binding(&self, thread: &ThreadId) -> Result<Option<ThreadBinding>, ActivityError> {
        read_binding(&lock(&self.connection), thread)
    }

    fn rebind(
        &self,
        thread: &ThreadId,
        destination: &ThreadDestination,
    ) -> Result<ThreadBinding, ActivityError> {
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("rebind thread"))?;
        let tail: i64 = transaction
            .query_row(
                "SELECT COALESCE(MAX(sequence), 0) FROM thread_records WHERE thread = ?1",
                [thread.as_str()],
                |row| row.get(0),
            )
            .map_err(sql_error("rebind thread"))?;
        // A stored destination that no longer validates is what a rebind repairs: read leniently.
        let current = binding_row(&transaction, thread)?
            .map(|(stored, generation)| {
                Ok::<_, ActivityError>((
                    ThreadDestination::from_stored(&stored).ok(),
                    to_u64(generation, "binding generation")?,
                ))
            })
            .transpose()?;
        let read = current
            .as_ref()
            .map(|(destination, generation)| (destination.as_ref(), *generation));
        let tail_sequence = Sequence::new(to_u64(tail, "record sequence")?);
        let Some(binding) = rebinding(read, tail_sequence, destination)? else {
            return Ok(ThreadBinding {
                destination: destination.clone(),
                generation: current.map_or(0, |(_, generation)| generation),
            });
        };
        transaction
            .execute(
                "INSERT INTO thread_bindings (thread, destination, generation) VALUES (?1, ?2, ?3)
                 ON CONFLICT (thread) DO UPDATE SET destination = excluded.destination,
                     generation = excluded.generation",
                params![
                    thread.as_str(),
                    binding.destination.to_stored(),
                    to_i64(binding.generation, "binding generation")?
                ],
            )
            .map_err(sql_error("rebind thread"))?;
        transaction
            .execute(
                "DELETE FROM thread_parks WHERE thread = ?1",
                [thread.as_str()],
            )
            .map_err(sql_error("rebind thread"))?;
        mark_pending(&transaction, thread, tail)?;
        transaction.commit().map_err(sql_error("rebind thread"))?;
        Ok(binding)
    }

    fn threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ThreadId>, ActivityError> {
        // The bindings' columns are left unread: a listing of ids never fails on a binding.
        Ok(self
            .listed_threads(after, limit)?
            .into_iter()
            .map(|(thread, _)| thread)
            .collect())
    }

    fn threads_with_bindings(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<(ThreadId, Option<ThreadBinding>)>, ActivityError> {
        self.listed_threads(after, limit)?
            .into_iter()
            .map(|(thread, binding)| {
                let binding = binding
                    .map(|(destination, generation)| stored_binding(&destination, generation))
                    .transpose()?;
                Ok((thread, binding))
            })
            .collect()
    }

    fn pending_threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<PendingThread>, ActivityError> {
        check_thread_page(limit)?;
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare_cached(
                "SELECT thread, tail FROM thread_pending AS pending
                 WHERE thread > ?1
                   AND NOT EXISTS (SELECT 1 FROM thread_parks AS parks WHERE parks.thread = pending.thread)
                 ORDER BY thread LIMIT ?2",
            )
            .map_err(sql_error("list pending threads"))?;
        let rows = statement
            .query_map(
                params![after.map_or("", ThreadId::as_str), limit as i64],
                |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?)),
            )
            .map_err(sql_error("list pending threads"))?;
        let mut threads = Vec::new();
        for row in rows {
            let (thread, tail) = row.map_err(sql_error("list pending threads"))?;
            threads.push(PendingThread {
                thread: stored_thread(thread)?,
                tail: Sequence::new(to_u64(tail, "pending tail")?),
            });
        }
        Ok(threads)
    }

    fn mark_all_pending(&self) -> Result<u64, ActivityError> {
        let connection = lock(&self.connection);
        let marked = connection
            .execute(
                "INSERT INTO thread_pending (thread, tail)
                 SELECT thread, MAX(sequence) FROM thread_records GROUP BY thread
                 ON CONFLICT (thread) DO UPDATE SET tail = excluded.tail",
                [],
            )
            .map_err(sql_error("mark threads pending"))?;
        Ok(marked as u64)
    }

    fn settle(&self, thread: &ThreadId, tail: Sequence) -> Result<bool, ActivityError> {
        let connection = lock(&self.connection);
        let settled = connection
            .execute(
                "DELETE FROM thread_pending WHERE thread = ?1 AND tail = ?2",
                params![thread.as_str(), to_i64(tail.get(), "pending tail")?],
            )
            .map_err(sql_error("settle thread"))?;
        Ok(settled == 1)
    }

    fn park(&self, thread: &ThreadId, sequence: Sequence, kind: &str) -> Result<(), ActivityError> {
        check_park_kind(kind)?;
        let connection = lock(&self.connection);
        connection
            .execute(
                "INSERT INTO thread_parks (thread, sequence, kind) VALUES (?1, ?2, ?3)
                 ON CONFLICT (thread) DO UPDATE SET sequence = excluded.sequence, kind = excluded.kind",
                params![thread.as_str(), to_i64(sequence.get(), "parked sequence")?, kind],
            )
            .map_err(sql_error("park thread"))?;
        Ok(())
    }

    fn overview(&self) -> Result<ThreadOverview, ActivityError> {
        let mut connection = lock(&self.connection);
        // One snapshot, so the counts agree with one another.
        let transaction = connection
            .transaction()
            .map_err(sql_error("thread overview"))?;
        let (destinations, unreadable) = {
            let mut statement = transaction
                .prepare("SELECT destination, COUNT(*) FROM thread_bindings GROUP BY destination")
                .map_err(sql_error("thread overview"))?;
            let rows = statement
                .query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
                })
                .map_err(sql_error("thread overview"))?;
            let mut counted = Vec::new();
            for row in rows {
                let (destination, threads) = row.map_err(sql_error("thread overview"))?;
                counted.push((destination, to_u64(threads, "thread count")?));
            }
            overview_destinations(counted)
        };
        let count = |sql: &str| -> Result<u64, ActivityError> {
            let value: i64 = transaction
                .query_row(sql, [], |row| row.get(0))
                .map_err(sql_error("thread overview"))?;
            to_u64(value, "thread count")
        };
        let unbound = count(
            "SELECT COUNT(*) FROM (SELECT DISTINCT thread FROM thread_records) AS threads
             WHERE NOT EXISTS (SELECT 1 FROM thread_bindings AS b WHERE b.thread = threads.thread)",
        )?;
        let pending = count("SELECT COUNT(*) FROM thread_pending")?;
        let parked = {
            let mut statement = transaction
                .prepare("SELECT kind, COUNT(*) FROM thread_parks GROUP BY kind ORDER BY kind")
                .map_err(sql_error("thread overview"))?;
            let rows = statement
                .query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
                })
                .map_err(sql_error("thread overview"))?;
            let mut parked = Vec::new();
            for row in rows {
                let (kind, threads) = row.map_err(sql_error("thread overview"))?;
                parked.push((kind, to_u64(threads, "thread count")?));
            }
            parked
        };
        Ok(ThreadOverview {
            destinations,
            unreadable,
            unbound,
            pending,
            parked,
        })
    }

    fn load_checkpoint(
        &self,
        thread: &ThreadId,
        fold: &str,
        version: u32,
    ) -> Result<Option<FoldCheckpoint>, ActivityError> {
        let connection = lock(&self.connection);
        let row = connection
            .query_row(
                "SELECT through, forgotten, state FROM thread_fold_checkpoints
                 WHERE thread = ?1 AND fold = ?2 AND version = ?3",
                params![thread.as_str(), fold, i64::from(version)],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                },
            )
            .optional()
            .map_err(sql_error("load checkpoint"))?;
        row.map(|(through, forgotten, state)| {
            Ok(FoldCheckpoint {
                through: Sequence::new(to_u64(through, "checkpoint sequence")?),
                forgotten,
                state,
            })
        })
        .transpose()
    }

    fn save_checkpoint(
        &self,
        thread: &ThreadId,
        fold: &str,
        version: u32,
        checkpoint: &FoldCheckpoint,
    ) -> Result<(), ActivityError> {
        checkpoint.check(fold)?;
        let through = to_i64(checkpoint.through.get(), "checkpoint sequence")?;
        lock(&self.connection)
            .execute(
                "INSERT INTO thread_fold_checkpoints (thread, fold, version, through, forgotten, state)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (thread, fold, version) DO UPDATE SET
                     through = excluded.through, forgotten = excluded.forgotten,
                     state = excluded.state",
                params![
                    thread.as_str(),
                    fold,
                    i64::from(version),
                    through,
                    checkpoint.forgotten,
                    checkpoint.state
                ],
            )
            .map_err(sql_error("save checkpoint"))?;
        Ok(())
    }
}

fn read_binding(
    connection: &Connection,
    thread: &ThreadId,
) -> Result<Option<ThreadBinding>, ActivityError> {
    binding_row(connection, thread)?
        .map(|(destination, generation)| stored_binding(&destination, generation))
        .transpose()
}

/// A binding from its stored destination JSON and generation, checked.
fn stored_binding(destination: &str, generation: i64) -> Result<ThreadBinding, ActivityError> {
    Ok(ThreadBinding {
        destination: ThreadDestination::from_stored(destination)?,
        generation: to_u64(generation, "binding generation")?,
    })
}

/// The stored (destination JSON, generation) of `thread`'s binding, unchecked.
fn binding_row(
    connection: &Connection,
    thread: &ThreadId,
) -> Result<Option<(String, i64)>, ActivityError> {
    connection
        .query_row(
            "SELECT destination, generation FROM thread_bindings WHERE thread = ?1",
            [thread.as_str()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()
        .map_err(sql_error("read binding"))
}

/// Marks `thread` pending at `tail` (an append's or a rebind's).
fn mark_pending(
    connection: &Connection,
    thread: &ThreadId,
    tail: i64,
) -> Result<(), ActivityError> {
    connection
        .execute(
            "INSERT INTO thread_pending (thread, tail) VALUES (?1, ?2)
             ON CONFLICT (thread) DO UPDATE SET tail = excluded.tail",
            params![thread.as_str(), tail],
        )
        .map_err(sql_error("mark thread pending"))?;
    Ok(())
}

fn stored_thread(thread: String) -> Result<ThreadId, ActivityError> {
    ThreadId::new(thread).map_err(|_| {
        ActivityError::Store(StoreFault::Corrupt {
            what: "stored thread id is invalid".to_owned(),
        })
    })
}
