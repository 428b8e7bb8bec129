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

use memory_core::activity::intents::Admitted;
use memory_core::activity::{
    ActivityError, FencingEpoch, Intent, IntentClaim, IntentId, IntentLease, IntentOutcome,
    IntentState, IntentView, RememberingStore, SavedCommand, SourceId, SourceReference,
    SourceRevision, WorkerId, canonical_progress_json,
};
use memory_core::document::{EpochMillis, MemoryContent, MemoryKey};
use memory_core::ids::Revision;
use tokio_postgres::types::ToSql;

use crate::db::{Handle, block_activity};
use crate::error::{Fail, activity_corrupt, to_i64, to_u64};

/// Most rows one page of references or outbox entries may hold.
pub const MAX_PAGE_ROWS: usize = 10_000;

/// The stored form of "every revision" in the suppression table.
const ALL_REVISIONS: &str = "";

/// The advisory lock key of admission, the outbox and references ("memory-r" in ASCII).
const REMEMBERING_LOCK: i64 = 0x6d65_6d6f_7279_2d72;

type Attempt<T> = Result<T, Fail<ActivityError>>;

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

fn parse<T: serde::de::DeserializeOwned>(json: Option<String>, what: &str) -> Attempt<Option<T>> {
    json.map(|json| {
        serde_json::from_str(&json).map_err(|error| {
            Fail::Model(activity_corrupt(format!("{what} does not parse: {error}")))
        })
    })
    .transpose()
}

fn parse_one<T: serde::de::DeserializeOwned>(json: &str, what: &str) -> Attempt<T> {
    serde_json::from_str(json)
        .map_err(|error| Fail::Model(activity_corrupt(format!("{what} does not parse: {error}"))))
}

async fn lock_remembering(transaction: &deadpool_postgres::Transaction<'_>) -> Attempt<()> {
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&REMEMBERING_LOCK])
        .await?;
    Ok(())
}

/// Inserts or reopens an intent inside `transaction` (which holds the remembering lock); capacity
/// applies to counted intents only.
async fn admit_in(
    transaction: &deadpool_postgres::Transaction<'_>,
    intent: &Intent,
    capacity: Option<u64>,
    now: EpochMillis,
) -> Attempt<Admitted> {
    let intent_json =
        canonical_progress_json("intent canonical JSON", intent).map_err(Fail::Model)?;
    let id = intent.id();
    let existing: Option<String> = transaction
        .query_opt(
            "SELECT state FROM remembering_intents WHERE id = $1 FOR UPDATE",
            &[&id.as_str()],
        )
        .await?
        .map(|row| row.try_get(0))
        .transpose()?;
    match existing.as_deref() {
        Some("queued") => {
            return Ok(Admitted {
                id,
                already_admitted: true,
            });
        }
        // A cleanup can be needed again (a write landed after the last cleanup ran), so a finished one
        // reopens; a finished remember intent stays finished.
        Some(_) if matches!(intent, Intent::Cleanup { .. }) => {
            transaction
                .execute(
                    "UPDATE remembering_intents SET state = 'queued', outcome_json = NULL, \
                     owner = NULL, lease_expires_at = NULL WHERE id = $1",
                    &[&id.as_str()],
                )
                .await?;
            return Ok(Admitted {
                id,
                already_admitted: false,
            });
        }
        Some(_) => {
            return Ok(Admitted {
                id,
                already_admitted: true,
            });
        }
        None => {}
    }
    if let Some(capacity) = capacity {
        let open: i64 = transaction
            .query_one(
                "SELECT count(*) FROM remembering_intents WHERE state = 'queued' AND counted",
                &[],
            )
            .await?
            .try_get(0)?;
        if to_u64(open, "open intents").map_err(Fail::Model)? >= capacity {
            return Err(Fail::Model(ActivityError::AtCapacity { capacity }));
        }
    }
    transaction
        .execute(
            "INSERT INTO remembering_intents (id, intent_json, counted, state, admitted_at) \
             VALUES ($1, $2, $3, 'queued', $4)",
            &[&id.as_str(), &intent_json, &capacity.is_some(), &now],
        )
        .await?;
    Ok(Admitted {
        id,
        already_admitted: false,
    })
}

/// Runs a fenced `UPDATE` on one intent; zero changed rows means the lease is stale (or the intent
/// done). `assignments` use `$5` onwards for `values`.
async fn fenced_update(
    transaction: &deadpool_postgres::Transaction<'_>,
    lease: &IntentLease,
    now: EpochMillis,
    assignments: &str,
    values: &[&(dyn ToSql + Sync)],
) -> Attempt<()> {
    let sql = format!(
        "UPDATE remembering_intents SET {assignments} \
         WHERE id = $1 AND epoch = $2 AND owner = $3 AND lease_expires_at > $4 AND state = 'queued'"
    );
    let epoch = to_i64(lease.epoch.0, "fencing epoch").map_err(Fail::Model)?;
    let id = lease.id.as_str();
    let owner = lease.owner.as_str();
    let mut all: Vec<&(dyn ToSql + Sync)> = vec![&id, &epoch, &owner, &now];
    all.extend_from_slice(values);
    let statement = transaction.prepare_cached(&sql).await?;
    let changed = transaction.execute(&statement, &all).await?;
    if changed != 1 {
        return Err(Fail::Model(ActivityError::StaleLease {
            epoch: lease.epoch,
        }));
    }
    Ok(())
}

/// Keeps one reference (inside a transaction holding the remembering lock); an operation already
/// referenced in its namespace is kept once.
async fn insert_reference(
    transaction: &deadpool_postgres::Transaction<'_>,
    reference: &SourceReference,
) -> Attempt<()> {
    let statement = transaction
        .prepare_cached(
            "INSERT INTO remembering_references \
                 (source, source_revision, target_namespace, target_id, operation_id, revision) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .await?;
    transaction
        .execute(
            &statement,
            &[
                &reference.source.as_str(),
                &reference.source_revision.as_str(),
                &reference.target.namespace.as_str(),
                &reference.target.id.as_str(),
                &reference.operation_id.as_str(),
                &reference.revision.as_str(),
            ],
        )
        .await?;
    Ok(())
}

fn counted_capacity(intent: &Intent, capacity: u64) -> Option<u64> {
    match intent {
        Intent::Remember { .. } => Some(capacity),
        Intent::Cleanup { .. } => None,
    }
}

fn saved_command(
    write: Option<memory_core::MemoryWrite>,
    attempt: Option<i64>,
) -> Attempt<Option<SavedCommand>> {
    match (write, attempt) {
        (Some(write), Some(attempt)) => Ok(Some(SavedCommand {
            attempt: u32::try_from(attempt)
                .map_err(|_| Fail::Model(activity_corrupt("command attempt out of range")))?,
            write,
        })),
        (None, None) => Ok(None),
        _ => Err(Fail::Model(activity_corrupt(
            "saved command is partly stored",
        ))),
    }
}

impl RememberingStore for PostgresRememberingStore {
    fn admit(
        &self,
        intent: &Intent,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<Admitted, ActivityError> {
        let intent = intent.clone();
        block_activity!(
            self.handle,
            "admit intent",
            idempotent = false,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                lock_remembering(&transaction).await?;
                let admitted = admit_in(
                    &transaction,
                    &intent,
                    counted_capacity(&intent, capacity),
                    now,
                )
                .await?;
                commit_sent = true;
                transaction.commit().await?;
                Ok(admitted)
            }
        )
    }

    fn claim_next(
        &self,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Option<IntentClaim>, ActivityError> {
        if lease_ms == 0 {
            return Err(ActivityError::invalid("lease_ms", "must be positive"));
        }
        let expires_at = now.saturating_add(to_i64(lease_ms, "lease_ms")?);
        let owner = owner.clone();
        block_activity!(
            self.handle,
            "claim intent",
            idempotent = false,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                let found = transaction
                .query_opt(
                    "SELECT id, intent_json, epoch, proposal_json, command_json, command_attempt \
                     FROM remembering_intents \
                     WHERE state = 'queued' AND (owner IS NULL OR lease_expires_at <= $1) \
                     ORDER BY row LIMIT 1 FOR UPDATE SKIP LOCKED",
                    &[&now],
                )
                .await?;
                let Some(row) = found else {
                    return Ok(None);
                };
                let id: String = row.try_get(0)?;
                let intent_json: String = row.try_get(1)?;
                let epoch: i64 = row.try_get(2)?;
                let proposal_json: Option<String> = row.try_get(3)?;
                let command_json: Option<String> = row.try_get(4)?;
                let attempt: Option<i64> = row.try_get(5)?;
                let epoch = FencingEpoch(
                    to_u64(epoch, "epoch")
                        .map_err(Fail::Model)?
                        .saturating_add(1),
                );
                let epoch_value = to_i64(epoch.0, "fencing epoch").map_err(Fail::Model)?;
                transaction
                .execute(
                    "UPDATE remembering_intents SET epoch = $2, owner = $3, lease_expires_at = $4 \
                     WHERE id = $1",
                    &[&id, &epoch_value, &owner.as_str(), &expires_at],
                )
                .await?;
                commit_sent = true;
                transaction.commit().await?;
                let id = IntentId::new(id)
                    .map_err(|_| Fail::Model(activity_corrupt("stored intent id is invalid")))?;
                let intent: Intent = parse_one(&intent_json, "intent")?;
                if intent.id() != id {
                    return Err(Fail::Model(activity_corrupt(
                        "stored intent does not match its id",
                    )));
                }
                let command = saved_command(parse(command_json, "saved command")?, attempt)?;
                Ok(Some(IntentClaim {
                    lease: IntentLease {
                        id,
                        owner: owner.clone(),
                        epoch,
                        expires_at,
                    },
                    intent,
                    proposal: parse(proposal_json, "saved proposal")?,
                    command,
                }))
            }
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
        block_activity!(
            self.handle,
            "save proposal",
            idempotent = false,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                fenced_update(
                    &transaction,
                    &lease,
                    now,
                    "proposal_json = COALESCE(proposal_json, $5)",
                    &[&proposal_json],
                )
                .await?;
                commit_sent = true;
                transaction.commit().await?;
                Ok(())
            }
        )
    }

    fn save_command(
        &self,
        lease: &IntentLease,
        command: &SavedCommand,
        reference: &SourceReference,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let command_json = canonical_progress_json("command canonical JSON", &command.write)?;
        let attempt = i64::from(command.attempt);
        let (lease, reference) = (lease.clone(), reference.clone());
        block_activity!(
            self.handle,
            "save command",
            idempotent = false,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                lock_remembering(&transaction).await?;
                let stored_attempt: Option<Option<i64>> = transaction
                    .query_opt(
                        "SELECT command_attempt FROM remembering_intents WHERE id = $1 FOR UPDATE",
                        &[&lease.id.as_str()],
                    )
                    .await?
                    .map(|row| row.try_get(0))
                    .transpose()?;
                if let Some(Some(stored)) = stored_attempt
                    && stored >= attempt
                {
                    return Err(Fail::Model(ActivityError::ProgressMismatch {
                        what: "a command of this or a later attempt is already saved",
                    }));
                }
                fenced_update(
                    &transaction,
                    &lease,
                    now,
                    "command_json = $5, command_attempt = $6",
                    &[&command_json, &attempt],
                )
                .await?;
                insert_reference(&transaction, &reference).await?;
                commit_sent = true;
                transaction.commit().await?;
                Ok(())
            }
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
        let (lease, successor) = (lease.clone(), successor.cloned());
        block_activity!(
            self.handle,
            "complete intent",
            idempotent = false,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                if successor.is_some() {
                    lock_remembering(&transaction).await?;
                }
                fenced_update(
                    &transaction,
                    &lease,
                    now,
                    "state = 'done', outcome_json = $5, owner = NULL, lease_expires_at = NULL",
                    &[&outcome_json],
                )
                .await?;
                if let Some(successor) = &successor {
                    admit_in(&transaction, successor, None, now).await?;
                }
                commit_sent = true;
                transaction.commit().await?;
                Ok(())
            }
        )
    }

    fn release(&self, lease: &IntentLease, now: EpochMillis) -> Result<(), ActivityError> {
        let lease = lease.clone();
        block_activity!(
            self.handle,
            "release intent",
            idempotent = false,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                fenced_update(
                    &transaction,
                    &lease,
                    now,
                    "owner = NULL, lease_expires_at = NULL",
                    &[],
                )
                .await?;
                commit_sent = true;
                transaction.commit().await?;
                Ok(())
            }
        )
    }

    fn suppress(
        &self,
        source: &SourceId,
        revision: Option<&SourceRevision>,
        now: EpochMillis,
    ) -> Result<IntentId, ActivityError> {
        let cleanup = Intent::Cleanup {
            source: source.clone(),
            revision: revision.cloned(),
        };
        let source = source.as_str().to_owned();
        let revision = revision
            .map_or(ALL_REVISIONS, SourceRevision::as_str)
            .to_owned();
        block_activity!(
            self.handle,
            "suppress source",
            idempotent = true,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                lock_remembering(&transaction).await?;
                transaction
                    .execute(
                        "INSERT INTO remembering_suppressions (source, revision, suppressed_at) \
                     VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                        &[&source, &revision, &now],
                    )
                    .await?;
                let admitted = admit_in(&transaction, &cleanup, None, now).await?;
                commit_sent = true;
                transaction.commit().await?;
                Ok(admitted.id)
            }
        )
    }

    fn is_suppressed(
        &self,
        source: &SourceId,
        revision: &SourceRevision,
    ) -> Result<bool, ActivityError> {
        let (source, revision) = (source.as_str().to_owned(), revision.as_str().to_owned());
        block_activity!(
            self.handle,
            "check suppression",
            idempotent = true,
            |client, _commit_sent| {
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
            }
        )
    }

    fn save_references(&self, references: &[SourceReference]) -> Result<(), ActivityError> {
        if references.len() > MAX_PAGE_ROWS {
            return Err(ActivityError::TooLarge {
                limit: "references per save",
                max: MAX_PAGE_ROWS as u64,
                actual: references.len() as u64,
            });
        }
        if references.is_empty() {
            return Ok(());
        }
        let references = references.to_vec();
        // Idempotent: a reference already kept is not added twice.
        block_activity!(
            self.handle,
            "save references",
            idempotent = true,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                lock_remembering(&transaction).await?;
                for reference in &references {
                    insert_reference(&transaction, reference).await?;
                }
                commit_sent = true;
                transaction.commit().await?;
                Ok(())
            }
        )
    }

    fn references(
        &self,
        source: &SourceId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, SourceReference)>, ActivityError> {
        if limit == 0 || limit > MAX_PAGE_ROWS {
            return Err(ActivityError::invalid(
                "reference page limit",
                format!("must be between 1 and {MAX_PAGE_ROWS}"),
            ));
        }
        let after = to_i64(after, "reference row")?;
        let source = source.clone();
        block_activity!(
            self.handle,
            "read references",
            idempotent = true,
            |client, _commit_sent| {
                let statement = client
                .prepare_cached(
                    "SELECT row, source_revision, target_namespace, target_id, operation_id, revision \
                     FROM remembering_references WHERE source = $1 AND row > $2 \
                     ORDER BY row LIMIT $3",
                )
                .await?;
                let rows = client
                    .query(&statement, &[&source.as_str(), &after, &(limit as i64)])
                    .await?;
                let mut references = Vec::with_capacity(rows.len());
                for row in rows {
                    let row_number: i64 = row.try_get(0)?;
                    let source_revision: String = row.try_get(1)?;
                    let namespace: String = row.try_get(2)?;
                    let id: String = row.try_get(3)?;
                    let operation_id: String = row.try_get(4)?;
                    let revision: String = row.try_get(5)?;
                    let bad = |what: &str| {
                        Fail::Model(activity_corrupt(format!(
                            "stored reference has an invalid {what}"
                        )))
                    };
                    references.push((
                        to_u64(row_number, "reference row").map_err(Fail::Model)?,
                        SourceReference {
                            source: source.clone(),
                            source_revision: SourceRevision::new(source_revision)
                                .map_err(|_| bad("source revision"))?,
                            target: MemoryKey {
                                namespace: memory_core::NamespaceAddress::parse(&namespace)
                                    .map_err(|_| bad("namespace"))?,
                                id: memory_core::DocumentId::new(id)
                                    .map_err(|_| bad("document id"))?,
                            },
                            operation_id: memory_core::OperationId::new(operation_id)
                                .map_err(|_| bad("operation id"))?,
                            revision: Revision::new(revision).map_err(|_| bad("revision"))?,
                        },
                    ));
                }
                Ok(references)
            }
        )
    }

    fn suppressed_contributions(
        &self,
        documents: &[(MemoryKey, Revision)],
    ) -> Result<Vec<bool>, ActivityError> {
        if documents.len() > MAX_PAGE_ROWS {
            return Err(ActivityError::TooLarge {
                limit: "documents per suppression check",
                max: MAX_PAGE_ROWS as u64,
                actual: documents.len() as u64,
            });
        }
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
        block_activity!(
            self.handle,
            "check suppression",
            idempotent = true,
            |client, _commit_sent| {
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
            }
        )
    }

    fn inspect_intent(&self, id: &IntentId) -> Result<Option<IntentView>, ActivityError> {
        let id = id.as_str().to_owned();
        block_activity!(
            self.handle,
            "inspect intent",
            idempotent = true,
            |client, _commit_sent| {
                let found = client
                    .query_opt(
                        "SELECT intent_json, state, proposal_json, command_json, command_attempt, \
                            outcome_json, epoch \
                     FROM remembering_intents WHERE id = $1",
                        &[&id],
                    )
                    .await?;
                let Some(row) = found else {
                    return Ok(None);
                };
                let intent_json: String = row.try_get(0)?;
                let state: String = row.try_get(1)?;
                let command = match (
                    parse(row.try_get(3)?, "saved command")?,
                    row.try_get::<_, Option<i64>>(4)?,
                ) {
                    (Some(write), Some(attempt)) => Some(SavedCommand {
                        attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                        write,
                    }),
                    _ => None,
                };
                let epoch: i64 = row.try_get(6)?;
                Ok(Some(IntentView {
                    intent: parse_one(&intent_json, "intent")?,
                    state: if state == "done" {
                        IntentState::Done
                    } else {
                        IntentState::Queued
                    },
                    proposal: parse(row.try_get(2)?, "saved proposal")?,
                    command,
                    outcome: parse(row.try_get(5)?, "outcome")?,
                    epoch: FencingEpoch(to_u64(epoch, "epoch").map_err(Fail::Model)?),
                }))
            }
        )
    }

    fn open_intents(&self) -> Result<u64, ActivityError> {
        block_activity!(
            self.handle,
            "count intents",
            idempotent = true,
            |client, _commit_sent| {
                let open: i64 = client
                    .query_one(
                        "SELECT count(*) FROM remembering_intents WHERE state = 'queued'",
                        &[],
                    )
                    .await?
                    .try_get(0)?;
                to_u64(open, "open intents").map_err(Fail::Model)
            }
        )
    }

    fn outbox_put(
        &self,
        intent: &Intent,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let intent_json = canonical_progress_json("intent canonical JSON", intent)?;
        block_activity!(
            self.handle,
            "park intent",
            idempotent = false,
            |client, commit_sent| {
                let transaction = client.transaction().await?;
                lock_remembering(&transaction).await?;
                let parked: i64 = transaction
                    .query_one("SELECT count(*) FROM remembering_outbox", &[])
                    .await?
                    .try_get(0)?;
                if to_u64(parked, "parked intents").map_err(Fail::Model)? >= capacity {
                    return Err(Fail::Model(ActivityError::AtCapacity { capacity }));
                }
                transaction
                    .execute(
                        "INSERT INTO remembering_outbox (intent_json, parked_at) VALUES ($1, $2)",
                        &[&intent_json, &now],
                    )
                    .await?;
                commit_sent = true;
                transaction.commit().await?;
                Ok(())
            }
        )
    }

    fn outbox_peek(&self, limit: usize) -> Result<Vec<(u64, Intent)>, ActivityError> {
        if limit == 0 || limit > MAX_PAGE_ROWS {
            return Err(ActivityError::invalid(
                "outbox page limit",
                format!("must be between 1 and {MAX_PAGE_ROWS}"),
            ));
        }
        block_activity!(
            self.handle,
            "read outbox",
            idempotent = true,
            |client, _commit_sent| {
                let rows = client
                    .query(
                        "SELECT row, intent_json FROM remembering_outbox ORDER BY row LIMIT $1",
                        &[&(limit as i64)],
                    )
                    .await?;
                let mut parked = Vec::with_capacity(rows.len());
                for row in rows {
                    let row_number: i64 = row.try_get(0)?;
                    let json: String = row.try_get(1)?;
                    parked.push((
                        to_u64(row_number, "outbox row").map_err(Fail::Model)?,
                        parse_one(&json, "parked intent")?,
                    ));
                }
                Ok(parked)
            }
        )
    }

    fn outbox_admit(
        &self,
        row: u64,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<Admitted, ActivityError> {
        let row_value = to_i64(row, "outbox row")?;
        block_activity!(
            self.handle,
            "admit parked intent",
            idempotent = false,
            |client, commit_sent| {
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
                    return Err(Fail::Model(ActivityError::ProgressMismatch {
                        what: "parked intent is gone",
                    }));
                };
                let intent: Intent = parse_one(&json, "parked intent")?;
                let admitted = admit_in(
                    &transaction,
                    &intent,
                    counted_capacity(&intent, capacity),
                    now,
                )
                .await?;
                transaction
                    .execute(
                        "DELETE FROM remembering_outbox WHERE row = $1",
                        &[&row_value],
                    )
                    .await?;
                commit_sent = true;
                transaction.commit().await?;
                Ok(admitted)
            }
        )
    }
}
