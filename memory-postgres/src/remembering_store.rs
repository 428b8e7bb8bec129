//! The remembering store on PostgreSQL: admitted intents, their saved proposals and commands,
//! suppression, source-to-target references and the admission outbox (SPEC §5). See
//! [`memory_core::activity::intents`] for the rules.
//!
//! Concurrency across processes:
//! - `claim_next` takes the oldest claimable intent with `FOR UPDATE SKIP LOCKED`, so workers never wait
//!   on each other's candidates and never claim the same intent at once; every claim raises the epoch.
//! - Fenced writes are single `UPDATE`s that must change exactly one row (re-checked by PostgreSQL
//!   against the latest committed row), or they are refused as stale.
//! - Admission (its capacity count), the outbox and reference inserts take one transaction-level
//!   advisory lock, so a capacity is never exceeded by two admitters at once and reference and outbox
//!   rows get their numbers in commit order (pages read by number never skip a late commit).

use memory_core::activity::forgotten::record_suppression;
use memory_core::activity::intents::Admitted;
pub use memory_core::activity::rules::MAX_PAGE_ROWS;
use memory_core::activity::rules::intents::{
    ALL_REVISIONS, AdmissionStep, CLAIM_COLUMNS, ClaimColumns, IntentClaimRequest,
    PreparedAdmission, PreparedCommand, REFERENCE_COLUMNS, ReferenceColumns, VIEW_COLUMNS,
    ViewColumns, check_room, parked, parked_gone, parse_state, stale, suppression_revision,
};
use memory_core::activity::rules::{check_batch, check_page, column_i64, parse_stored, stored_u64};
use memory_core::activity::{
    ActivityError, Intent, IntentClaim, IntentId, IntentLease, IntentOutcome, IntentView,
    RememberingStore, SavedCommand, SourceId, SourceReference, SourceRevision, ThreadId,
    ThreadSuppressions, WorkerId, canonical_progress_json,
};
use memory_core::document::{EpochMillis, MemoryContent, MemoryKey};
use memory_core::ids::Revision;
use tokio_postgres::types::ToSql;

use crate::db::Handle;
use crate::error::{Attempt, Fail};
use crate::retry::{Idempotent, commit};

/// The advisory lock key of admission, the outbox and references ("memory-r" in ASCII).
const REMEMBERING_LOCK: i64 = 0x6d65_6d6f_7279_2d72;

/// The PostgreSQL remembering store; get one from [`crate::PostgresStore::remembering`].
#[derive(Clone)]
pub struct PostgresRememberingStore {
    pub(crate) handle: Handle,
}

impl std::fmt::Debug for PostgresRememberingStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PostgresRememberingStore")
            .finish_non_exhaustive()
    }
}

async fn lock_remembering(
    transaction: &deadpool_postgres::Transaction<'_>,
) -> Attempt<(), ActivityError> {
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&REMEMBERING_LOCK])
        .await?;
    Ok(())
}

/// Inserts or reopens an intent inside `transaction` (which holds the remembering lock), as
/// [`PreparedAdmission::plan`] decides.
async fn admit_in(
    transaction: &deadpool_postgres::Transaction<'_>,
    admission: &PreparedAdmission,
    now: EpochMillis,
) -> Attempt<Admitted, ActivityError> {
    let id = admission.id().as_str();
    let existing: Option<String> = transaction
        .query_opt(
            "SELECT state FROM remembering_intents WHERE id = $1 FOR UPDATE",
            &[&id],
        )
        .await?
        .map(|row| row.try_get(0))
        .transpose()?;
    match admission.plan(existing.as_deref().map(parse_state)) {
        AdmissionStep::Known(admitted) => return Ok(admitted),
        AdmissionStep::Reopen(admitted) => {
            transaction
                .execute(
                    "UPDATE remembering_intents SET state = 'queued', outcome_json = NULL, \
                     owner = NULL, lease_expires_at = NULL WHERE id = $1",
                    &[&id],
                )
                .await?;
            return Ok(admitted);
        }
        AdmissionStep::Insert => {}
    }
    if admission.is_counted() {
        let open: i64 = transaction
            .query_one(
                "SELECT count(*) FROM remembering_intents WHERE state = 'queued' AND counted",
                &[],
            )
            .await?
            .try_get(0)?;
        admission.check_room(stored_u64(open, "open intents")?)?;
    }
    transaction
        .execute(
            "INSERT INTO remembering_intents (id, intent_json, counted, state, admitted_at) \
             VALUES ($1, $2, $3, 'queued', $4)",
            &[&id, &admission.intent_json, &admission.is_counted(), &now],
        )
        .await?;
    Ok(admission.admitted(false))
}

/// Runs a fenced `UPDATE` on one intent; zero changed rows means the lease is stale (or the intent
/// done). `assignments` use `$5` onwards for `values`.
async fn fenced_update(
    transaction: &deadpool_postgres::Transaction<'_>,
    lease: &IntentLease,
    now: EpochMillis,
    assignments: &str,
    values: &[&(dyn ToSql + Sync)],
) -> Attempt<(), ActivityError> {
    let sql = format!(
        "UPDATE remembering_intents SET {assignments} \
         WHERE id = $1 AND epoch = $2 AND owner = $3 AND lease_expires_at > $4 AND state = 'queued'"
    );
    let epoch = column_i64(lease.epoch.get(), "fencing epoch")?;
    let id = lease.id.as_str();
    let owner = lease.owner.as_str();
    let mut all: Vec<&(dyn ToSql + Sync)> = vec![&id, &epoch, &owner, &now];
    all.extend_from_slice(values);
    let statement = transaction.prepare_cached(&sql).await?;
    let changed = transaction.execute(&statement, &all).await?;
    if changed != 1 {
        return Err(Fail::Model(stale(lease)));
    }
    Ok(())
}

/// Keeps one reference (inside a transaction holding the remembering lock); an operation already
/// referenced in its namespace is kept once.
async fn insert_reference(
    transaction: &deadpool_postgres::Transaction<'_>,
    reference: &SourceReference,
) -> Attempt<(), ActivityError> {
    let statement = transaction
        .prepare_cached(
            "INSERT INTO remembering_references \
             (source, source_revision, target_namespace, target_id, operation_id, revision) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .await?;
    let columns = ReferenceColumns::of(reference);
    let parameters: Vec<&(dyn ToSql + Sync)> = columns
        .iter()
        .map(|column| column as &(dyn ToSql + Sync))
        .collect();
    transaction.execute(&statement, &parameters).await?;
    Ok(())
}

impl RememberingStore for PostgresRememberingStore {
    fn admit(
        &self,
        intent: &Intent,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<Admitted, ActivityError> {
        let admission = PreparedAdmission::queued(intent, capacity)?;
        self.handle.call_blocking(
            "admit intent",
            Idempotent::No,
            admission,
            move |admission, mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    lock_remembering(&transaction).await?;
                    let admitted = admit_in(&transaction, admission, now).await?;
                    commit(transaction).await?;
                    Ok(admitted)
                })
            },
        )
    }

    fn claim_next(
        &self,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Option<IntentClaim>, ActivityError> {
        let request = IntentClaimRequest::new(owner, lease_ms, now)?;
        self.handle.call_blocking(
            "claim intent",
            Idempotent::No,
            request,
            move |request, mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    let found = transaction
                        .query_opt(
                            &format!(
                                "SELECT {CLAIM_COLUMNS} FROM remembering_intents \
                                 WHERE state = 'queued' AND (owner IS NULL OR lease_expires_at <= $1) \
                                 ORDER BY row LIMIT 1 FOR UPDATE SKIP LOCKED"
                            ),
                            &[&now],
                        )
                        .await?;
                    let Some(row) = found else {
                        return Ok(None);
                    };
                    let claim = request.clone().plan(ClaimColumns {
                        id: row.try_get(0)?,
                        intent_json: row.try_get(1)?,
                        epoch: row.try_get(2)?,
                        proposal_json: row.try_get(3)?,
                        command_json: row.try_get(4)?,
                        command_attempt: row.try_get(5)?,
                    })?;
                    let epoch = column_i64(claim.lease.epoch.get(), "fencing epoch")?;
                    transaction
                        .execute(
                            "UPDATE remembering_intents \
                             SET epoch = $2, owner = $3, lease_expires_at = $4 \
                             WHERE id = $1",
                            &[
                                &claim.lease.id.as_str(),
                                &epoch,
                                &claim.lease.owner.as_str(),
                                &claim.lease.expires_at,
                            ],
                        )
                        .await?;
                    commit(transaction).await?;
                    Ok(Some(claim))
                })
            },
        )
    }

    fn save_proposal(
        &self,
        lease: &IntentLease,
        proposal: &MemoryContent,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let proposal_json = canonical_progress_json("proposal canonical JSON", proposal)?;
        let lease = lease.clone();
        self.handle.call_blocking(
            "save proposal",
            Idempotent::No,
            (lease, proposal_json),
            move |(lease, proposal_json), mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    fenced_update(
                        &transaction,
                        lease,
                        now,
                        "proposal_json = COALESCE(proposal_json, $5)",
                        &[&proposal_json],
                    )
                    .await?;
                    commit(transaction).await?;
                    Ok(())
                })
            },
        )
    }

    fn save_command(
        &self,
        lease: &IntentLease,
        command: &SavedCommand,
        reference: &SourceReference,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let prepared = PreparedCommand::new(command)?;
        let (lease, reference) = (lease.clone(), reference.clone());
        self.handle.call_blocking(
            "save command",
            Idempotent::No,
            (lease, prepared, reference),
            move |(lease, prepared, reference), mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    lock_remembering(&transaction).await?;
                    let stored_attempt: Option<Option<i64>> = transaction
                        .query_opt(
                            "SELECT command_attempt FROM remembering_intents \
                             WHERE id = $1 FOR UPDATE",
                            &[&lease.id.as_str()],
                        )
                        .await?
                        .map(|row| row.try_get(0))
                        .transpose()?;
                    prepared.check_attempt(stored_attempt.flatten())?;
                    fenced_update(
                        &transaction,
                        lease,
                        now,
                        "command_json = $5, command_attempt = $6",
                        &[&prepared.command_json, &prepared.attempt],
                    )
                    .await?;
                    insert_reference(&transaction, reference).await?;
                    commit(transaction).await?;
                    Ok(())
                })
            },
        )
    }

    fn complete(
        &self,
        lease: &IntentLease,
        outcome: &IntentOutcome,
        successor: Option<&Intent>,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let outcome_json = canonical_progress_json("outcome canonical JSON", outcome)?;
        let successor = successor.map(PreparedAdmission::uncounted).transpose()?;
        let lease = lease.clone();
        self.handle.call_blocking(
            "complete intent",
            Idempotent::No,
            (successor, lease, outcome_json),
            move |(successor, lease, outcome_json), mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    if successor.is_some() {
                        lock_remembering(&transaction).await?;
                    }
                    fenced_update(
                        &transaction,
                        lease,
                        now,
                        "state = 'done', outcome_json = $5, owner = NULL, lease_expires_at = NULL",
                        &[&outcome_json],
                    )
                    .await?;
                    if let Some(successor) = &successor {
                        admit_in(&transaction, successor, now).await?;
                    }
                    commit(transaction).await?;
                    Ok(())
                })
            },
        )
    }

    fn release(&self, lease: &IntentLease, now: EpochMillis) -> Result<(), ActivityError> {
        let lease = lease.clone();
        self.handle.call_blocking(
            "release intent",
            Idempotent::No,
            lease,
            move |lease, mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    fenced_update(
                        &transaction,
                        lease,
                        now,
                        "owner = NULL, lease_expires_at = NULL",
                        &[],
                    )
                    .await?;
                    commit(transaction).await?;
                    Ok(())
                })
            },
        )
    }

    fn suppress(
        &self,
        source: &SourceId,
        revision: Option<&SourceRevision>,
        now: EpochMillis,
    ) -> Result<IntentId, ActivityError> {
        let cleanup = PreparedAdmission::uncounted(&Intent::Cleanup {
            source: source.clone(),
            revision: revision.cloned(),
        })?;
        let source = source.as_str().to_owned();
        let revision = suppression_revision(revision).to_owned();
        self.handle.call_blocking(
            "suppress source",
            Idempotent::Yes,
            (source, revision, cleanup),
            move |(source, revision, cleanup), mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    lock_remembering(&transaction).await?;
                    let added = transaction
                        .execute(
                            "INSERT INTO remembering_suppressions \
                             (source, revision, suppressed_at) \
                             VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                            &[&source, &revision, &now],
                        )
                        .await?;
                    if added > 0 {
                        transaction
                            .execute(
                                "UPDATE remembering_suppression_count \
                                 SET suppressions = suppressions + 1",
                                &[],
                            )
                            .await?;
                    }
                    let admitted = admit_in(&transaction, cleanup, now).await?;
                    commit(transaction).await?;
                    Ok(admitted.id)
                })
            },
        )
    }

    fn thread_suppressions(&self, thread: &ThreadId) -> Result<ThreadSuppressions, ActivityError> {
        let thread = thread.clone();
        self.handle.call_blocking(
            "read thread suppressions",
            Idempotent::Yes,
            thread,
            move |thread, client| {
                Box::pin(async move {
                    // One statement, one snapshot: the count row (no source) and the thread's rows,
                    // found through the index on their thread (migration 6); the exact spelling is
                    // memory-core's `record_suppression`.
                    let statement = client
                        .prepare_cached(
                            "SELECT NULL::text, NULL::text, suppressions \
                             FROM remembering_suppression_count \
                             UNION ALL \
                             SELECT source, revision, suppressed_at FROM remembering_suppressions \
                             WHERE thread = $1",
                        )
                        .await?;
                    let rows = client.query(&statement, &[&thread.as_str()]).await?;
                    let mut suppressions = ThreadSuppressions::default();
                    for row in rows {
                        let source: Option<String> = row.try_get(0)?;
                        let at: i64 = row.try_get(2)?;
                        match source {
                            None => {
                                suppressions.generation = u64::try_from(at).unwrap_or_default();
                            }
                            Some(source) => {
                                let revision: String = row.try_get(1)?;
                                suppressions
                                    .records
                                    .extend(record_suppression(thread, &source, &revision, at));
                            }
                        }
                    }
                    suppressions
                        .records
                        .sort_by(|a, b| (a.sequence, &a.revision).cmp(&(b.sequence, &b.revision)));
                    Ok(suppressions)
                })
            },
        )
    }

    fn is_suppressed(
        &self,
        source: &SourceId,
        revision: &SourceRevision,
    ) -> Result<bool, ActivityError> {
        let (source, revision) = (source.as_str().to_owned(), revision.as_str().to_owned());
        self.handle.call_blocking(
            "check suppression",
            Idempotent::Yes,
            (source, revision),
            move |(source, revision), client| {
                Box::pin(async move {
                    let statement = client
                        .prepare_cached(
                            "SELECT EXISTS (SELECT 1 FROM remembering_suppressions \
                             WHERE source = $1 AND revision IN ($2, $3))",
                        )
                        .await?;
                    Ok(client
                        .query_one(&statement, &[&source, &revision, &ALL_REVISIONS])
                        .await?
                        .try_get(0)?)
                })
            },
        )
    }

    fn save_references(&self, references: &[SourceReference]) -> Result<(), ActivityError> {
        check_batch(references.len(), "references per save")?;
        if references.is_empty() {
            return Ok(());
        }
        let references = references.to_vec();
        // Idempotent: a reference already kept is not added twice.
        self.handle.call_blocking(
            "save references",
            Idempotent::Yes,
            references,
            move |references, mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    lock_remembering(&transaction).await?;
                    for reference in references {
                        insert_reference(&transaction, reference).await?;
                    }
                    commit(transaction).await?;
                    Ok(())
                })
            },
        )
    }

    fn references(
        &self,
        source: &SourceId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, SourceReference)>, ActivityError> {
        check_page(limit, MAX_PAGE_ROWS, "reference page limit")?;
        let after = column_i64(after, "reference row")?;
        let source = source.clone();
        self.handle.call_blocking(
            "read references",
            Idempotent::Yes,
            source,
            move |source, client| {
                Box::pin(async move {
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {REFERENCE_COLUMNS} FROM remembering_references \
                             WHERE source = $1 AND row > $2 ORDER BY row LIMIT $3"
                        ))
                        .await?;
                    let rows = client
                        .query(&statement, &[&source.as_str(), &after, &(limit as i64)])
                        .await?;
                    let mut references = Vec::with_capacity(rows.len());
                    for row in rows {
                        let columns = ReferenceColumns {
                            row: row.try_get(0)?,
                            source_revision: row.try_get(1)?,
                            target_namespace: row.try_get(2)?,
                            target_id: row.try_get(3)?,
                            operation_id: row.try_get(4)?,
                            revision: row.try_get(5)?,
                        };
                        references.push(columns.decode(source)?);
                    }
                    Ok(references)
                })
            },
        )
    }

    fn suppressed_contributions(
        &self,
        documents: &[(MemoryKey, Revision)],
    ) -> Result<Vec<bool>, ActivityError> {
        check_batch(documents.len(), "documents per suppression check")?;
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let namespaces: Vec<String> = documents
            .iter()
            .map(|(key, _)| key.namespace.as_str().to_owned())
            .collect();
        let ids: Vec<String> = documents
            .iter()
            .map(|(key, _)| key.id.as_str().to_owned())
            .collect();
        let revisions: Vec<String> = documents
            .iter()
            .map(|(_, revision)| revision.as_str().to_owned())
            .collect();
        self.handle.call_blocking(
            "check suppression",
            Idempotent::Yes,
            (namespaces, ids, revisions),
            move |(namespaces, ids, revisions), client| {
                Box::pin(async move {
                    let statement = client
                        .prepare_cached(
                            "SELECT EXISTS (SELECT 1 FROM remembering_references AS r \
                             JOIN remembering_suppressions AS s \
                             ON s.source = r.source AND s.revision IN (r.source_revision, $4) \
                             WHERE r.target_namespace = d.namespace AND r.target_id = d.id \
                             AND r.revision = d.revision) \
                             FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY \
                             AS d (namespace, id, revision, position) \
                             ORDER BY d.position",
                        )
                        .await?;
                    let rows = client
                        .query(&statement, &[&namespaces, &ids, &revisions, &ALL_REVISIONS])
                        .await?;
                    rows.iter()
                        .map(|row| row.try_get(0).map_err(Fail::Db))
                        .collect()
                })
            },
        )
    }

    fn inspect_intent(&self, id: &IntentId) -> Result<Option<IntentView>, ActivityError> {
        let id = id.as_str().to_owned();
        self.handle
            .call_blocking("inspect intent", Idempotent::Yes, id, move |id, client| {
                Box::pin(async move {
                    let found = client
                        .query_opt(
                            &format!(
                                "SELECT {VIEW_COLUMNS} FROM remembering_intents WHERE id = $1"
                            ),
                            &[&id],
                        )
                        .await?;
                    let Some(row) = found else {
                        return Ok(None);
                    };
                    let columns = ViewColumns {
                        intent_json: row.try_get(0)?,
                        state: row.try_get(1)?,
                        proposal_json: row.try_get(2)?,
                        command_json: row.try_get(3)?,
                        command_attempt: row.try_get(4)?,
                        outcome_json: row.try_get(5)?,
                        epoch: row.try_get(6)?,
                    };
                    Ok(Some(columns.decode()?))
                })
            })
    }

    fn open_intents(&self) -> Result<u64, ActivityError> {
        self.handle
            .call_blocking("count intents", Idempotent::Yes, (), move |(), client| {
                Box::pin(async move {
                    let open: i64 = client
                        .query_one(
                            "SELECT count(*) FROM remembering_intents WHERE state = 'queued'",
                            &[],
                        )
                        .await?
                        .try_get(0)?;
                    Ok(stored_u64(open, "open intents")?)
                })
            })
    }

    fn outbox_put(
        &self,
        intent: &Intent,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let intent_json = canonical_progress_json("intent canonical JSON", intent)?;
        self.handle.call_blocking(
            "park intent",
            Idempotent::No,
            intent_json,
            move |intent_json, mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    lock_remembering(&transaction).await?;
                    let parked: i64 = transaction
                        .query_one("SELECT count(*) FROM remembering_outbox", &[])
                        .await?
                        .try_get(0)?;
                    check_room(stored_u64(parked, "parked intents")?, capacity)?;
                    transaction
                        .execute(
                            "INSERT INTO remembering_outbox (intent_json, parked_at) \
                             VALUES ($1, $2)",
                            &[&intent_json, &now],
                        )
                        .await?;
                    commit(transaction).await?;
                    Ok(())
                })
            },
        )
    }

    fn outbox_peek(&self, limit: usize) -> Result<Vec<(u64, Intent)>, ActivityError> {
        check_page(limit, MAX_PAGE_ROWS, "outbox page limit")?;
        self.handle
            .call_blocking("read outbox", Idempotent::Yes, (), move |(), client| {
                Box::pin(async move {
                    let rows = client
                        .query(
                            "SELECT row, intent_json FROM remembering_outbox ORDER BY row LIMIT $1",
                            &[&(limit as i64)],
                        )
                        .await?;
                    let mut entries = Vec::with_capacity(rows.len());
                    for row in rows {
                        let json: String = row.try_get(1)?;
                        entries.push(parked(row.try_get(0)?, &json)?);
                    }
                    Ok(entries)
                })
            })
    }

    fn outbox_admit(
        &self,
        row: u64,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<Admitted, ActivityError> {
        let row_value = column_i64(row, "outbox row")?;
        self.handle.call_blocking(
            "admit parked intent",
            Idempotent::No,
            (),
            move |(), mut client| {
                Box::pin(async move {
                    let transaction = client.transaction().await?;
                    lock_remembering(&transaction).await?;
                    let json: Option<String> = transaction
                        .query_opt(
                            "SELECT intent_json FROM remembering_outbox WHERE row = $1",
                            &[&row_value],
                        )
                        .await?
                        .map(|found| found.try_get(0))
                        .transpose()?;
                    let Some(json) = json else {
                        return Err(Fail::Model(parked_gone()));
                    };
                    let intent: Intent = parse_stored(&json, "parked intent")?;
                    let admission = PreparedAdmission::queued(&intent, capacity)?;
                    let admitted = admit_in(&transaction, &admission, now).await?;
                    transaction
                        .execute(
                            "DELETE FROM remembering_outbox WHERE row = $1",
                            &[&row_value],
                        )
                        .await?;
                    commit(transaction).await?;
                    Ok(admitted)
                })
            },
        )
    }
}
