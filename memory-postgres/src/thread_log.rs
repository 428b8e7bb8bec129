//! The thread log on PostgreSQL: append-only canonical records per thread (SPEC §3, §5).
//!
//! An append bumps the thread's row in `thread_heads` (`INSERT ... ON CONFLICT DO UPDATE ... RETURNING`),
//! whose row lock makes concurrent appenders to one thread, from any process, take turns and get
//! consecutive sequences; appends to different threads do not wait for each other. A trigger refuses
//! any update or delete of a record.

use memory_core::activity::thread::{
    BindingStep, binding_step, check_park_kind, check_record_page, check_thread_page,
    overview_destinations, rebinding,
};
use memory_core::activity::{
    ActivityError, FoldCheckpoint, LogEntry, NewRecord, PendingThread, RecordDigest, Sequence,
    ThreadBinding, ThreadDestination, ThreadId, ThreadLog, ThreadOverview, ThreadRecord,
    decode_stored_record,
};

use crate::db::{Handle, snapshot};
use crate::error::{Attempt, Fail, activity_corrupt, to_i64, to_u64};
use crate::retry::{Idempotent, Params, commit, execute};

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

/// A listed thread and its binding's stored (destination, generation) columns, unchecked.
type ListedThread = (ThreadId, (Option<String>, Option<i64>));

impl PostgresThreadLog {
    /// Up to `limit` threads with records after `after`, in id order, each with its binding's stored
    /// columns: what both listings read, in one query.
    fn listed_threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<ListedThread>, ActivityError> {
        check_thread_page(limit)?;
        let after = after.map_or_else(String::new, |thread| thread.as_str().to_owned());
        self.handle.call_blocking(
            "list threads",
            Idempotent::Yes,
            after,
            move |after, client| {
                Box::pin(async move {
                    // `thread_heads` has one row per thread that ever had a record (appends never
                    // roll back a committed head without its record: both are in one
                    // transaction), and holds the thread's binding.
                    let statement = client
                        .prepare_cached(
                            "SELECT thread, destination, generation FROM thread_heads \
                             WHERE thread > $1 ORDER BY thread LIMIT $2",
                        )
                        .await?;
                    let rows = client.query(&statement, &[&after, &(limit as i64)]).await?;
                    let mut threads = Vec::with_capacity(rows.len());
                    for row in rows {
                        let thread = stored_thread(row.try_get(0)?).map_err(Fail::Model)?;
                        threads.push((thread, (row.try_get(1)?, row.try_get(2)?)));
                    }
                    Ok(threads)
                })
            },
        )
    }
}

impl ThreadLog for PostgresThreadLog {
    fn append_to(
        &self,
        thread: &ThreadId,
        destination: Option<&ThreadDestination>,
        record: NewRecord,
    ) -> Result<ThreadRecord, ActivityError> {
        record.validate()?;
        let record_json =
            memory_core::activity::canonical_progress_json("record canonical JSON", &record)?;
        let thread = thread.clone();
        let destination = destination.cloned();
        // Not retried once COMMIT was sent: a second append would add the record twice.
        self.handle.call_blocking(
            "append record",
            Idempotent::No,
            (thread, destination, record, record_json),
            move |(thread, destination, record, record_json), mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    // The head's row lock orders appenders to one thread, and guards its binding too.
                    let bump = transaction
                        .prepare_cached(
                            "INSERT INTO thread_heads (thread, tail) VALUES ($1, 1) \
                             ON CONFLICT (thread) DO UPDATE SET tail = thread_heads.tail + 1 \
                             RETURNING tail, destination, generation",
                        )
                        .await?;
                    let head = transaction.query_one(&bump, &[&thread.as_str()]).await?;
                    let tail: i64 = head.try_get(0)?;
                    let current =
                        binding_of(head.try_get(1)?, head.try_get(2)?).map_err(Fail::Model)?;
                    let sequence =
                        Sequence::new(to_u64(tail, "record sequence").map_err(Fail::Model)?);
                    let before = sequence.saturating_previous();
                    // A refusal drops the transaction: the bumped head rolls back with it.
                    let step = binding_step(current.as_ref(), before, destination.as_ref())
                        .map_err(Fail::Model)?;
                    if let (BindingStep::Bind, Some(destination)) = (step, &destination) {
                        let bind = transaction
                            .prepare_cached(
                                "UPDATE thread_heads SET destination = $2, generation = 0 \
                                 WHERE thread = $1",
                            )
                            .await?;
                        transaction
                            .execute(&bind, &[&thread.as_str(), &destination.to_stored()])
                            .await?;
                    }
                    let digest = RecordDigest::of(thread, sequence, record);
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
                    mark_pending(&transaction, thread, tail).await?;
                    commit(transaction).await?;
                    Ok(ThreadRecord {
                        thread: thread.clone(),
                        sequence,
                        record: record.clone(),
                        digest,
                    })
                })
            },
        )
    }

    fn inspect_tail(&self, thread: &ThreadId) -> Result<Sequence, ActivityError> {
        let thread = thread.clone();
        self.handle.call_blocking(
            "inspect tail",
            Idempotent::Yes,
            thread,
            move |thread, client| {
                Box::pin(async move {
                    let statement = client
                        .prepare_cached(
                            "SELECT COALESCE(max(sequence), 0) FROM thread_records \
                             WHERE thread = $1",
                        )
                        .await?;
                    let tail: i64 = client
                        .query_one(&statement, &[&thread.as_str()])
                        .await?
                        .try_get(0)?;
                    to_u64(tail, "record sequence")
                        .map(Sequence::new)
                        .map_err(Fail::Model)
                })
            },
        )
    }

    fn read_entries(
        &self,
        thread: &ThreadId,
        after: Sequence,
        limit: usize,
    ) -> Result<Vec<LogEntry>, ActivityError> {
        check_record_page(limit)?;
        let after = to_i64(after.get(), "page start")?;
        let thread = thread.clone();
        self.handle.call_blocking(
            "read page",
            Idempotent::Yes,
            thread,
            move |thread, client| {
                Box::pin(async move {
                    let statement = client
                        .prepare_cached(
                            "SELECT sequence, record_json, digest FROM thread_records \
                             WHERE thread = $1 AND sequence > $2 ORDER BY sequence LIMIT $3",
                        )
                        .await?;
                    let rows = client
                        .query(&statement, &[&thread.as_str(), &after, &(limit as i64)])
                        .await?;
                    let mut entries = Vec::with_capacity(rows.len());
                    for row in rows {
                        let sequence: i64 = row.try_get(0)?;
                        let record_json: String = row.try_get(1)?;
                        let digest: String = row.try_get(2)?;
                        let sequence = Sequence::new(
                            to_u64(sequence, "record sequence").map_err(Fail::Model)?,
                        );
                        entries.push(decode_stored_record(
                            thread,
                            sequence,
                            &record_json,
                            &digest,
                        ));
                    }
                    Ok(entries)
                })
            },
        )
    }

    fn binding(&self, thread: &ThreadId) -> Result<Option<ThreadBinding>, ActivityError> {
        let thread = thread.clone();
        self.handle.call_blocking(
            "read binding",
            Idempotent::Yes,
            thread,
            move |thread, client| {
                Box::pin(async move {
                    let statement = client
                        .prepare_cached(
                            "SELECT destination, generation FROM thread_heads WHERE thread = $1",
                        )
                        .await?;
                    match client.query_opt(&statement, &[&thread.as_str()]).await? {
                        Some(row) => {
                            binding_of(row.try_get(0)?, row.try_get(1)?).map_err(Fail::Model)
                        }
                        None => Ok(None),
                    }
                })
            },
        )
    }

    fn rebind(
        &self,
        thread: &ThreadId,
        destination: &ThreadDestination,
    ) -> Result<ThreadBinding, ActivityError> {
        let thread = thread.clone();
        let destination = destination.clone();
        self.handle.call_blocking(
            "rebind thread",
            Idempotent::Yes,
            (thread, destination),
            move |(thread, destination), mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    let head = transaction
                        .prepare_cached(
                            "SELECT tail, destination, generation FROM thread_heads \
                             WHERE thread = $1 FOR UPDATE",
                        )
                        .await?;
                    let row = transaction.query_opt(&head, &[&thread.as_str()]).await?;
                    // A stored destination that no longer validates is what a rebind repairs: it is
                    // read leniently here.
                    let (tail, current) = match row {
                        Some(row) => {
                            let stored: Option<String> = row.try_get(1)?;
                            let generation: Option<i64> = row.try_get(2)?;
                            let current = match generation {
                                Some(generation) => Some((
                                    stored.and_then(|stored| {
                                        ThreadDestination::from_stored(&stored).ok()
                                    }),
                                    to_u64(generation, "binding generation")
                                        .map_err(Fail::Model)?,
                                )),
                                None => None,
                            };
                            (row.try_get::<_, i64>(0)?, current)
                        }
                        None => (0, None),
                    };
                    let sequence =
                        Sequence::new(to_u64(tail, "record sequence").map_err(Fail::Model)?);
                    let read = current
                        .as_ref()
                        .map(|(destination, generation)| (destination.as_ref(), *generation));
                    let Some(binding) =
                        rebinding(read, sequence, destination).map_err(Fail::Model)?
                    else {
                        return Ok(ThreadBinding {
                            destination: destination.clone(),
                            generation: current.map_or(0, |(_, generation)| generation),
                        });
                    };
                    let generation =
                        to_i64(binding.generation, "binding generation").map_err(Fail::Model)?;
                    let update = transaction
                        .prepare_cached(
                            "UPDATE thread_heads SET destination = $2, generation = $3 \
                             WHERE thread = $1",
                        )
                        .await?;
                    transaction
                        .execute(
                            &update,
                            &[
                                &thread.as_str(),
                                &binding.destination.to_stored(),
                                &generation,
                            ],
                        )
                        .await?;
                    let unpark = transaction
                        .prepare_cached("DELETE FROM thread_parks WHERE thread = $1")
                        .await?;
                    transaction.execute(&unpark, &[&thread.as_str()]).await?;
                    mark_pending(&transaction, thread, tail).await?;
                    commit(transaction).await?;
                    Ok(binding)
                })
            },
        )
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
            .map(|(thread, (destination, generation))| {
                Ok((thread, binding_of(destination, generation)?))
            })
            .collect()
    }

    fn pending_threads(
        &self,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Result<Vec<PendingThread>, ActivityError> {
        check_thread_page(limit)?;
        let after = after.map_or_else(String::new, |thread| thread.as_str().to_owned());
        self.handle.call_blocking(
            "list pending threads",
            Idempotent::Yes,
            after,
            move |after, client| {
                Box::pin(async move {
                    let statement = client
                        .prepare_cached(
                            "SELECT thread, tail FROM thread_pending AS pending WHERE thread > $1 \
                             AND NOT EXISTS (SELECT 1 FROM thread_parks AS parks \
                             WHERE parks.thread = pending.thread) \
                             ORDER BY thread LIMIT $2",
                        )
                        .await?;
                    let rows = client.query(&statement, &[&after, &(limit as i64)]).await?;
                    let mut threads = Vec::with_capacity(rows.len());
                    for row in rows {
                        let tail: i64 = row.try_get(1)?;
                        threads.push(PendingThread {
                            thread: stored_thread(row.try_get(0)?).map_err(Fail::Model)?,
                            tail: Sequence::new(to_u64(tail, "pending tail").map_err(Fail::Model)?),
                        });
                    }
                    Ok(threads)
                })
            },
        )
    }

    fn mark_all_pending(&self) -> Result<u64, ActivityError> {
        self.handle.call_blocking(
            "mark threads pending",
            Idempotent::Yes,
            Params::new(),
            execute(
                "INSERT INTO thread_pending (thread, tail) SELECT thread, tail FROM thread_heads \
                 ON CONFLICT (thread) DO UPDATE SET tail = excluded.tail",
            ),
        )
    }

    fn settle(&self, thread: &ThreadId, tail: Sequence) -> Result<bool, ActivityError> {
        let params: Params = vec![
            Box::new(thread.as_str().to_owned()),
            Box::new(to_i64(tail.get(), "pending tail")?),
        ];
        self.handle
            .call_blocking(
                "settle thread",
                Idempotent::Yes,
                params,
                execute("DELETE FROM thread_pending WHERE thread = $1 AND tail = $2"),
            )
            .map(|settled| settled == 1)
    }

    fn park(&self, thread: &ThreadId, sequence: Sequence, kind: &str) -> Result<(), ActivityError> {
        check_park_kind(kind)?;
        let params: Params = vec![
            Box::new(thread.as_str().to_owned()),
            Box::new(to_i64(sequence.get(), "parked sequence")?),
            Box::new(kind.to_owned()),
        ];
        self.handle
            .call_blocking(
                "park thread",
                Idempotent::Yes,
                params,
                execute(
                    "INSERT INTO thread_parks (thread, sequence, kind) VALUES ($1, $2, $3) \
                     ON CONFLICT (thread) DO UPDATE SET sequence = excluded.sequence, \
                     kind = excluded.kind",
                ),
            )
            .map(|_rows| ())
    }

    fn overview(&self) -> Result<ThreadOverview, ActivityError> {
        self.handle.call_blocking(
            "thread overview",
            Idempotent::Yes,
            (),
            move |(), mut client| {
                Box::pin(async move {
                    // One snapshot, so the counts agree with one another.
                    let transaction = snapshot(&mut client).await?;
                    let counted = counted_threads(
                        &transaction,
                        "SELECT destination, count(*) FROM thread_heads \
                         WHERE destination IS NOT NULL GROUP BY destination",
                    )
                    .await?;
                    let (destinations, unreadable) = overview_destinations(counted);
                    let counts = transaction
                        .query_one(
                            "SELECT (SELECT count(*) FROM thread_heads WHERE destination IS NULL), \
                             (SELECT count(*) FROM thread_pending)",
                            &[],
                        )
                        .await?;
                    let unbound: i64 = counts.try_get(0)?;
                    let pending: i64 = counts.try_get(1)?;
                    let parked = counted_threads(
                        &transaction,
                        "SELECT kind, count(*) FROM thread_parks GROUP BY kind ORDER BY kind",
                    )
                    .await?;
                    commit(transaction).await?;
                    Ok(ThreadOverview {
                        destinations,
                        unreadable,
                        unbound: to_u64(unbound, "thread count").map_err(Fail::Model)?,
                        pending: to_u64(pending, "thread count").map_err(Fail::Model)?,
                        parked,
                    })
                })
            },
        )
    }

    fn load_checkpoint(
        &self,
        thread: &ThreadId,
        fold: &str,
        version: u32,
    ) -> Result<Option<FoldCheckpoint>, ActivityError> {
        let key = (
            thread.as_str().to_owned(),
            fold.to_owned(),
            i64::from(version),
        );
        self.handle.call_blocking(
            "load checkpoint",
            Idempotent::Yes,
            key,
            move |(thread, fold, version), client| {
                Box::pin(async move {
                    let statement = client
                        .prepare_cached(
                            "SELECT through, forgotten, state FROM thread_fold_checkpoints \
                             WHERE thread = $1 AND fold = $2 AND version = $3",
                        )
                        .await?;
                    let Some(row) = client
                        .query_opt(&statement, &[&thread, &fold, &version])
                        .await?
                    else {
                        return Ok(None);
                    };
                    let through: i64 = row.try_get(0)?;
                    Ok(Some(FoldCheckpoint {
                        through: Sequence::new(
                            to_u64(through, "checkpoint sequence").map_err(Fail::Model)?,
                        ),
                        forgotten: row.try_get(1)?,
                        state: row.try_get(2)?,
                    }))
                })
            },
        )
    }

    fn save_checkpoint(
        &self,
        thread: &ThreadId,
        fold: &str,
        version: u32,
        checkpoint: &FoldCheckpoint,
    ) -> Result<(), ActivityError> {
        checkpoint.check(fold)?;
        let params: Params = vec![
            Box::new(thread.as_str().to_owned()),
            Box::new(fold.to_owned()),
            Box::new(i64::from(version)),
            Box::new(to_i64(checkpoint.through.get(), "checkpoint sequence")?),
            Box::new(checkpoint.forgotten.clone()),
            Box::new(checkpoint.state.clone()),
        ];
        self.handle
            .call_blocking(
                "save checkpoint",
                Idempotent::Yes,
                params,
                execute(
                    "INSERT INTO thread_fold_checkpoints \
                     (thread, fold, version, through, forgotten, state) \
                     VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (thread, fold, version) DO UPDATE SET \
                     through = excluded.through, forgotten = excluded.forgotten, \
                     state = excluded.state",
                ),
            )
            .map(|_rows| ())
    }
}

/// The binding a head row holds (both columns null: a thread from before bindings).
fn binding_of(
    destination: Option<String>,
    generation: Option<i64>,
) -> Result<Option<ThreadBinding>, ActivityError> {
    match (destination, generation) {
        (None, None) => Ok(None),
        (Some(destination), Some(generation)) => Ok(Some(ThreadBinding {
            destination: ThreadDestination::from_stored(&destination)?,
            generation: to_u64(generation, "binding generation")?,
        })),
        _ => Err(activity_corrupt("thread binding is half written")),
    }
}

/// The `(name, thread count)` rows of a grouped count.
async fn counted_threads(
    transaction: &deadpool_postgres::Transaction<'_>,
    sql: &str,
) -> Attempt<Vec<(String, u64)>, ActivityError> {
    let rows = transaction.query(sql, &[]).await?;
    let mut counted = Vec::with_capacity(rows.len());
    for row in rows {
        let threads: i64 = row.try_get(1)?;
        counted.push((
            row.try_get(0)?,
            to_u64(threads, "thread count").map_err(Fail::Model)?,
        ));
    }
    Ok(counted)
}

/// Marks `thread` pending at `tail`, inside the caller's transaction.
async fn mark_pending(
    transaction: &deadpool_postgres::Transaction<'_>,
    thread: &ThreadId,
    tail: i64,
) -> Result<(), tokio_postgres::Error> {
    let statement = transaction
        .prepare_cached(
            "INSERT INTO thread_pending (thread, tail) VALUES ($1, $2) \
             ON CONFLICT (thread) DO UPDATE SET tail = excluded.tail",
        )
        .await?;
    transaction
        .execute(&statement, &[&thread.as_str(), &tail])
        .await?;
    Ok(())
}

fn stored_thread(thread: String) -> Result<ThreadId, ActivityError> {
    ThreadId::new(thread).map_err(|_| activity_corrupt("stored thread id is invalid"))
}
