//! The remembering store in SQLite: admitted intents, their saved proposals and commands, suppression,
//! source-to-target references and the admission outbox (SPEC §5). See
//! [`memory_core::activity::intents`] for the rules.

use std::path::Path;
use std::sync::Mutex;

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
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use crate::thread_log::{lock, open_connection, sql_error};

/// The SQLite remembering store.
pub struct SqliteRememberingStore {
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteRememberingStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SqliteRememberingStore")
            .finish_non_exhaustive()
    }
}

impl SqliteRememberingStore {
    /// Opens the remembering store in the file at `path`, creating or migrating the file's schema
    /// ([`crate::SCHEMA_VERSION`]).
    pub fn open(path: &Path) -> Result<Self, ActivityError> {
        Ok(Self {
            connection: Mutex::new(open_connection(path)?),
        })
    }
}

/// Inserts or reopens an intent inside `transaction`, as [`PreparedAdmission::plan`] decides.
fn admit_in(
    transaction: &Transaction<'_>,
    admission: &PreparedAdmission,
    now: EpochMillis,
) -> Result<Admitted, ActivityError> {
    let id = admission.id().as_str();
    let existing: Option<String> = transaction
        .query_row(
            "SELECT state FROM remembering_intents WHERE id = ?1",
            [id],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error("admit intent"))?;
    match admission.plan(existing.as_deref().map(parse_state)) {
        AdmissionStep::Known(admitted) => return Ok(admitted),
        AdmissionStep::Reopen(admitted) => {
            transaction
                .execute(
                    "UPDATE remembering_intents SET state = 'queued', outcome_json = NULL,
                         owner = NULL, lease_expires_at = NULL
                     WHERE id = ?1",
                    [id],
                )
                .map_err(sql_error("admit intent"))?;
            return Ok(admitted);
        }
        AdmissionStep::Insert => {}
    }
    if admission.is_counted() {
        let open: i64 = transaction
            .query_row(
                "SELECT COUNT(*) FROM remembering_intents WHERE state = 'queued' AND counted = 1",
                [],
                |row| row.get(0),
            )
            .map_err(sql_error("admit intent"))?;
        admission.check_room(stored_u64(open, "open intents")?)?;
    }
    transaction
        .execute(
            "INSERT INTO remembering_intents (id, intent_json, counted, state, admitted_at)
             VALUES (?1, ?2, ?3, 'queued', ?4)",
            params![id, admission.intent_json, admission.is_counted(), now],
        )
        .map_err(sql_error("admit intent"))?;
    Ok(admission.admitted(false))
}

/// Runs a fenced `UPDATE` on one intent; zero changed rows means the lease is stale (or the intent done).
fn fenced_update(
    transaction: &Transaction<'_>,
    lease: &IntentLease,
    now: EpochMillis,
    assignments: &str,
    values: &[&dyn rusqlite::ToSql],
    operation: &'static str,
) -> Result<(), ActivityError> {
    let sql = format!(
        "UPDATE remembering_intents SET {assignments}
         WHERE id = ?1 AND epoch = ?2 AND owner = ?3 AND lease_expires_at > ?4 AND state = 'queued'"
    );
    let epoch = column_i64(lease.epoch.get(), "fencing epoch")?;
    let id_text = lease.id.as_str();
    let owner = lease.owner.as_str();
    let mut all: Vec<&dyn rusqlite::ToSql> = vec![&id_text, &epoch, &owner, &now];
    all.extend_from_slice(values);
    let changed = transaction
        .execute(&sql, all.as_slice())
        .map_err(sql_error(operation))?;
    if changed != 1 {
        return Err(stale(lease));
    }
    Ok(())
}

/// Keeps one reference; an operation already referenced in its namespace is kept once.
fn insert_reference(
    transaction: &Transaction<'_>,
    reference: &SourceReference,
    operation: &'static str,
) -> Result<(), ActivityError> {
    transaction
        .execute(
            "INSERT OR IGNORE INTO remembering_references
                 (source, source_revision, target_namespace, target_id, operation_id, revision)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            ReferenceColumns::of(reference),
        )
        .map_err(sql_error(operation))?;
    Ok(())
}

impl RememberingStore for SqliteRememberingStore {
    fn admit(
        &self,
        intent: &Intent,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<Admitted, ActivityError> {
        let admission = PreparedAdmission::queued(intent, capacity)?;
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("admit intent"))?;
        let admitted = admit_in(&transaction, &admission, now)?;
        transaction.commit().map_err(sql_error("admit intent"))?;
        Ok(admitted)
    }

    fn claim_next(
        &self,
        owner: &WorkerId,
        lease_ms: u64,
        now: EpochMillis,
    ) -> Result<Option<IntentClaim>, ActivityError> {
        let request = IntentClaimRequest::new(owner, lease_ms, now)?;
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("claim intent"))?;
        let found = transaction
            .query_row(
                &format!(
                    "SELECT {CLAIM_COLUMNS} FROM remembering_intents
                     WHERE state = 'queued' AND (owner IS NULL OR lease_expires_at <= ?1)
                     ORDER BY row LIMIT 1"
                ),
                [now],
                |row| {
                    Ok(ClaimColumns {
                        id: row.get(0)?,
                        intent_json: row.get(1)?,
                        epoch: row.get(2)?,
                        proposal_json: row.get(3)?,
                        command_json: row.get(4)?,
                        command_attempt: row.get(5)?,
                    })
                },
            )
            .optional()
            .map_err(sql_error("claim intent"))?;
        let Some(columns) = found else {
            return Ok(None);
        };
        let claim = request.plan(columns)?;
        transaction
            .execute(
                "UPDATE remembering_intents SET epoch = ?2, owner = ?3, lease_expires_at = ?4
                 WHERE id = ?1",
                params![
                    claim.lease.id.as_str(),
                    column_i64(claim.lease.epoch.get(), "fencing epoch")?,
                    claim.lease.owner.as_str(),
                    claim.lease.expires_at
                ],
            )
            .map_err(sql_error("claim intent"))?;
        transaction.commit().map_err(sql_error("claim intent"))?;
        Ok(Some(claim))
    }

    fn save_proposal(
        &self,
        lease: &IntentLease,
        proposal: &MemoryContent,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let proposal_json = canonical_progress_json("proposal canonical JSON", proposal)?;
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("save proposal"))?;
        fenced_update(
            &transaction,
            lease,
            now,
            "proposal_json = COALESCE(proposal_json, ?5)",
            &[&proposal_json],
            "save proposal",
        )?;
        transaction.commit().map_err(sql_error("save proposal"))
    }

    fn save_command(
        &self,
        lease: &IntentLease,
        command: &SavedCommand,
        reference: &SourceReference,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let prepared = PreparedCommand::new(command)?;
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("save command"))?;
        let stored_attempt: Option<Option<i64>> = transaction
            .query_row(
                "SELECT command_attempt FROM remembering_intents WHERE id = ?1",
                [lease.id.as_str()],
                |row| row.get(0),
            )
            .optional()
            .map_err(sql_error("save command"))?;
        prepared.check_attempt(stored_attempt.flatten())?;
        fenced_update(
            &transaction,
            lease,
            now,
            "command_json = ?5, command_attempt = ?6",
            &[&prepared.command_json, &prepared.attempt],
            "save command",
        )?;
        insert_reference(&transaction, reference, "save command")?;
        transaction.commit().map_err(sql_error("save command"))
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
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("complete intent"))?;
        fenced_update(
            &transaction,
            lease,
            now,
            "state = 'done', outcome_json = ?5, owner = NULL, lease_expires_at = NULL",
            &[&outcome_json],
            "complete intent",
        )?;
        if let Some(successor) = &successor {
            admit_in(&transaction, successor, now)?;
        }
        transaction.commit().map_err(sql_error("complete intent"))
    }

    fn release(&self, lease: &IntentLease, now: EpochMillis) -> Result<(), ActivityError> {
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("release intent"))?;
        fenced_update(
            &transaction,
            lease,
            now,
            "owner = NULL, lease_expires_at = NULL",
            &[],
            "release intent",
        )?;
        transaction.commit().map_err(sql_error("release intent"))
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
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("suppress source"))?;
        let added = transaction
            .execute(
                "INSERT OR IGNORE INTO remembering_suppressions (source, revision, suppressed_at)
                 VALUES (?1, ?2, ?3)",
                params![source.as_str(), suppression_revision(revision), now],
            )
            .map_err(sql_error("suppress source"))?;
        if added > 0 {
            transaction
                .execute(
                    "UPDATE remembering_suppression_count SET suppressions = suppressions + 1",
                    [],
                )
                .map_err(sql_error("suppress source"))?;
        }
        let admitted = admit_in(&transaction, &cleanup, now)?;
        transaction.commit().map_err(sql_error("suppress source"))?;
        Ok(admitted.id)
    }

    fn thread_suppressions(&self, thread: &ThreadId) -> Result<ThreadSuppressions, ActivityError> {
        let mut connection = lock(&self.connection);
        // One read transaction: the generation and the rows are of the same moment.
        let transaction = connection
            .transaction()
            .map_err(sql_error("read thread suppressions"))?;
        let generation: i64 = transaction
            .query_row(
                "SELECT suppressions FROM remembering_suppression_count",
                [],
                |row| row.get(0),
            )
            .map_err(sql_error("read thread suppressions"))?;
        // The thread's rows through the index on their thread (schema step 13); the exact spelling
        // is memory-core's `record_suppression`.
        let mut statement = transaction
            .prepare_cached(
                "SELECT source, revision, suppressed_at FROM remembering_suppressions
                 WHERE thread = ?1",
            )
            .map_err(sql_error("read thread suppressions"))?;
        let rows = statement
            .query_map(params![thread.as_str()], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get(2)?,
                ))
            })
            .map_err(sql_error("read thread suppressions"))?;
        let mut records = Vec::new();
        for row in rows {
            let (source, revision, at) = row.map_err(sql_error("read thread suppressions"))?;
            records.extend(record_suppression(thread, &source, &revision, at));
        }
        records.sort_by(|a, b| (a.sequence, &a.revision).cmp(&(b.sequence, &b.revision)));
        Ok(ThreadSuppressions {
            records,
            generation: u64::try_from(generation).unwrap_or_default(),
        })
    }

    fn is_suppressed(
        &self,
        source: &SourceId,
        revision: &SourceRevision,
    ) -> Result<bool, ActivityError> {
        let connection = lock(&self.connection);
        connection
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM remembering_suppressions
                 WHERE source = ?1 AND revision IN (?2, ?3))",
                params![source.as_str(), revision.as_str(), ALL_REVISIONS],
                |row| row.get(0),
            )
            .map_err(sql_error("check suppression"))
    }

    fn save_references(&self, references: &[SourceReference]) -> Result<(), ActivityError> {
        check_batch(references.len(), "references per save")?;
        if references.is_empty() {
            return Ok(());
        }
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("save references"))?;
        for reference in references {
            insert_reference(&transaction, reference, "save references")?;
        }
        transaction.commit().map_err(sql_error("save references"))
    }

    fn references(
        &self,
        source: &SourceId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, SourceReference)>, ActivityError> {
        check_page(limit, MAX_PAGE_ROWS, "reference page limit")?;
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare_cached(&format!(
                "SELECT {REFERENCE_COLUMNS} FROM remembering_references
                 WHERE source = ?1 AND row > ?2 ORDER BY row LIMIT ?3"
            ))
            .map_err(sql_error("read references"))?;
        let rows = statement
            .query_map(
                params![
                    source.as_str(),
                    column_i64(after, "reference row")?,
                    limit as i64
                ],
                |row| {
                    Ok(ReferenceColumns {
                        row: row.get(0)?,
                        source_revision: row.get(1)?,
                        target_namespace: row.get(2)?,
                        target_id: row.get(3)?,
                        operation_id: row.get(4)?,
                        revision: row.get(5)?,
                    })
                },
            )
            .map_err(sql_error("read references"))?;
        let mut references = Vec::new();
        for row in rows {
            references.push(row.map_err(sql_error("read references"))?.decode(source)?);
        }
        Ok(references)
    }

    fn suppressed_contributions(
        &self,
        documents: &[(MemoryKey, Revision)],
    ) -> Result<Vec<bool>, ActivityError> {
        check_batch(documents.len(), "documents per suppression check")?;
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM remembering_references AS r
                     JOIN remembering_suppressions AS s
                       ON s.source = r.source AND s.revision IN (r.source_revision, ?4)
                     WHERE r.target_namespace = ?1 AND r.target_id = ?2 AND r.revision = ?3)",
            )
            .map_err(sql_error("check suppression"))?;
        documents
            .iter()
            .map(|(key, revision)| {
                statement
                    .query_row(
                        params![
                            key.namespace.as_str(),
                            key.id.as_str(),
                            revision.as_str(),
                            ALL_REVISIONS
                        ],
                        |row| row.get(0),
                    )
                    .map_err(sql_error("check suppression"))
            })
            .collect()
    }

    fn inspect_intent(&self, id: &IntentId) -> Result<Option<IntentView>, ActivityError> {
        let connection = lock(&self.connection);
        let found = connection
            .query_row(
                &format!("SELECT {VIEW_COLUMNS} FROM remembering_intents WHERE id = ?1"),
                [id.as_str()],
                |row| {
                    Ok(ViewColumns {
                        intent_json: row.get(0)?,
                        state: row.get(1)?,
                        proposal_json: row.get(2)?,
                        command_json: row.get(3)?,
                        command_attempt: row.get(4)?,
                        outcome_json: row.get(5)?,
                        epoch: row.get(6)?,
                    })
                },
            )
            .optional()
            .map_err(sql_error("inspect intent"))?;
        found.map(ViewColumns::decode).transpose()
    }

    fn open_intents(&self) -> Result<u64, ActivityError> {
        let connection = lock(&self.connection);
        let open: i64 = connection
            .query_row(
                "SELECT COUNT(*) FROM remembering_intents WHERE state = 'queued'",
                [],
                |row| row.get(0),
            )
            .map_err(sql_error("count intents"))?;
        stored_u64(open, "open intents")
    }

    fn outbox_put(
        &self,
        intent: &Intent,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<(), ActivityError> {
        let intent_json = canonical_progress_json("intent canonical JSON", intent)?;
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("park intent"))?;
        let parked: i64 = transaction
            .query_row("SELECT COUNT(*) FROM remembering_outbox", [], |row| {
                row.get(0)
            })
            .map_err(sql_error("park intent"))?;
        check_room(stored_u64(parked, "parked intents")?, capacity)?;
        transaction
            .execute(
                "INSERT INTO remembering_outbox (intent_json, parked_at) VALUES (?1, ?2)",
                params![intent_json, now],
            )
            .map_err(sql_error("park intent"))?;
        transaction.commit().map_err(sql_error("park intent"))
    }

    fn outbox_peek(&self, limit: usize) -> Result<Vec<(u64, Intent)>, ActivityError> {
        check_page(limit, MAX_PAGE_ROWS, "outbox page limit")?;
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare_cached("SELECT row, intent_json FROM remembering_outbox ORDER BY row LIMIT ?1")
            .map_err(sql_error("read outbox"))?;
        let rows = statement
            .query_map([limit as i64], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(sql_error("read outbox"))?;
        let mut entries = Vec::new();
        for row in rows {
            let (row_number, json) = row.map_err(sql_error("read outbox"))?;
            entries.push(parked(row_number, &json)?);
        }
        Ok(entries)
    }

    fn outbox_admit(
        &self,
        row: u64,
        capacity: u64,
        now: EpochMillis,
    ) -> Result<Admitted, ActivityError> {
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("admit parked intent"))?;
        let row_value = column_i64(row, "outbox row")?;
        let json: Option<String> = transaction
            .query_row(
                "SELECT intent_json FROM remembering_outbox WHERE row = ?1",
                [row_value],
                |found| found.get(0),
            )
            .optional()
            .map_err(sql_error("admit parked intent"))?;
        let Some(json) = json else {
            return Err(parked_gone());
        };
        let intent: Intent = parse_stored(&json, "parked intent")?;
        let admitted = admit_in(
            &transaction,
            &PreparedAdmission::queued(&intent, capacity)?,
            now,
        )?;
        transaction
            .execute("DELETE FROM remembering_outbox WHERE row = ?1", [row_value])
            .map_err(sql_error("admit parked intent"))?;
        transaction
            .commit()
            .map_err(sql_error("admit parked intent"))?;
        Ok(admitted)
    }
}
