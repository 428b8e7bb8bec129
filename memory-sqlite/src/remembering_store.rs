//! The remembering store in SQLite: admitted intents, their saved proposals and commands, suppression,
//! source-to-target references and the admission outbox (SPEC §5). See
//! [`memory_core::activity::intents`] for the rules.

use std::path::Path;
use std::sync::Mutex;

use memory_core::activity::intents::Admitted;
use memory_core::activity::{
    ActivityError, FencingEpoch, Intent, IntentClaim, IntentId, IntentLease, IntentOutcome,
    IntentState, IntentView, RememberingStore, SavedCommand, SourceId, SourceReference,
    SourceRevision, WorkerId, canonical_progress_json,
};
use memory_core::document::{EpochMillis, MemoryContent, MemoryKey};
use memory_core::ids::Revision;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use crate::thread_log::{lock, open_component, sql_error, to_i64, to_u64};

/// Most rows one page of references or outbox entries may hold.
pub const MAX_PAGE_ROWS: usize = 10_000;

const REMEMBERING_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS remembering_intents (
        row INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        intent_json TEXT NOT NULL,
        counted INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'done')),
        epoch INTEGER NOT NULL DEFAULT 0,
        owner TEXT,
        lease_expires_at INTEGER,
        proposal_json TEXT,
        command_json TEXT,
        command_attempt INTEGER,
        outcome_json TEXT,
        admitted_at INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS remembering_intents_open ON remembering_intents (state, row);
    CREATE TABLE IF NOT EXISTS remembering_suppressions (
        source TEXT NOT NULL,
        revision TEXT NOT NULL,
        suppressed_at INTEGER NOT NULL,
        PRIMARY KEY (source, revision)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS remembering_references (
        row INTEGER PRIMARY KEY AUTOINCREMENT,
        source TEXT NOT NULL,
        source_revision TEXT NOT NULL,
        target_namespace TEXT NOT NULL,
        target_id TEXT NOT NULL,
        operation_id TEXT NOT NULL,
        revision TEXT NOT NULL,
        UNIQUE (target_namespace, operation_id)
    );
    CREATE INDEX IF NOT EXISTS remembering_references_source ON remembering_references (source, row);
    CREATE INDEX IF NOT EXISTS remembering_references_target
        ON remembering_references (target_namespace, target_id, revision);
    CREATE TABLE IF NOT EXISTS remembering_outbox (
        row INTEGER PRIMARY KEY AUTOINCREMENT,
        intent_json TEXT NOT NULL,
        parked_at INTEGER NOT NULL
    );
";

/// The stored form of "every revision" in the suppression table.
const ALL_REVISIONS: &str = "";

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
    /// Opens (creating if needed) the remembering tables in the file at `path`.
    pub fn open(path: &Path) -> Result<Self, ActivityError> {
        Ok(Self {
            connection: Mutex::new(open_component(path, "remembering", REMEMBERING_SCHEMA)?),
        })
    }
}

fn corrupt(what: &str) -> impl FnOnce(serde_json::Error) -> ActivityError + '_ {
    move |error| ActivityError::Corrupt {
        what: format!("{what} does not parse: {error}"),
    }
}

fn parse<T: serde::de::DeserializeOwned>(
    json: Option<String>,
    what: &str,
) -> Result<Option<T>, ActivityError> {
    json.map(|json| serde_json::from_str(&json).map_err(corrupt(what)))
        .transpose()
}

/// Inserts or reopens an intent inside `transaction`; capacity applies to counted intents only.
fn admit_in(
    transaction: &Transaction<'_>,
    intent: &Intent,
    capacity: Option<u64>,
    now: EpochMillis,
) -> Result<Admitted, ActivityError> {
    let intent_json = canonical_progress_json("intent canonical JSON", intent)?;
    let id = intent.id();
    let existing: Option<String> = transaction
        .query_row(
            "SELECT state FROM remembering_intents WHERE id = ?1",
            [id.as_str()],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error("admit intent"))?;
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
                    "UPDATE remembering_intents SET state = 'queued', outcome_json = NULL,
                         owner = NULL, lease_expires_at = NULL
                     WHERE id = ?1",
                    [id.as_str()],
                )
                .map_err(sql_error("admit intent"))?;
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
            .query_row(
                "SELECT COUNT(*) FROM remembering_intents WHERE state = 'queued' AND counted = 1",
                [],
                |row| row.get(0),
            )
            .map_err(sql_error("admit intent"))?;
        if to_u64(open, "open intents")? >= capacity {
            return Err(ActivityError::AtCapacity { capacity });
        }
    }
    transaction
        .execute(
            "INSERT INTO remembering_intents (id, intent_json, counted, state, admitted_at)
             VALUES (?1, ?2, ?3, 'queued', ?4)",
            params![id.as_str(), intent_json, capacity.is_some(), now],
        )
        .map_err(sql_error("admit intent"))?;
    Ok(Admitted {
        id,
        already_admitted: false,
    })
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
    let epoch = to_i64(lease.epoch.0, "fencing epoch")?;
    let id_text = lease.id.as_str();
    let owner = lease.owner.as_str();
    let mut all: Vec<&dyn rusqlite::ToSql> = vec![&id_text, &epoch, &owner, &now];
    all.extend_from_slice(values);
    let changed = transaction
        .execute(&sql, all.as_slice())
        .map_err(sql_error(operation))?;
    if changed != 1 {
        return Err(ActivityError::StaleLease { epoch: lease.epoch });
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
            params![
                reference.source.as_str(),
                reference.source_revision.as_str(),
                reference.target.namespace.as_str(),
                reference.target.id.as_str(),
                reference.operation_id.as_str(),
                reference.revision.as_str()
            ],
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
        let counted = match intent {
            Intent::Remember { .. } => Some(capacity),
            Intent::Cleanup { .. } => None,
        };
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("admit intent"))?;
        let admitted = admit_in(&transaction, intent, counted, now)?;
        transaction.commit().map_err(sql_error("admit intent"))?;
        Ok(admitted)
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
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("claim intent"))?;
        let found = transaction
            .query_row(
                "SELECT id, intent_json, epoch, proposal_json, command_json, command_attempt
                 FROM remembering_intents
                 WHERE state = 'queued' AND (owner IS NULL OR lease_expires_at <= ?1)
                 ORDER BY row LIMIT 1",
                [now],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, Option<String>>(3)?,
                        row.get::<_, Option<String>>(4)?,
                        row.get::<_, Option<i64>>(5)?,
                    ))
                },
            )
            .optional()
            .map_err(sql_error("claim intent"))?;
        let Some((id, intent_json, epoch, proposal_json, command_json, attempt)) = found else {
            return Ok(None);
        };
        let epoch = FencingEpoch(to_u64(epoch, "epoch")?.saturating_add(1));
        transaction
            .execute(
                "UPDATE remembering_intents SET epoch = ?2, owner = ?3, lease_expires_at = ?4
                 WHERE id = ?1",
                params![
                    id,
                    to_i64(epoch.0, "fencing epoch")?,
                    owner.as_str(),
                    expires_at
                ],
            )
            .map_err(sql_error("claim intent"))?;
        transaction.commit().map_err(sql_error("claim intent"))?;
        let id = IntentId::new(id).map_err(|_| ActivityError::Corrupt {
            what: "stored intent id is invalid".to_owned(),
        })?;
        let intent: Intent = serde_json::from_str(&intent_json).map_err(corrupt("intent"))?;
        if intent.id() != id {
            return Err(ActivityError::Corrupt {
                what: "stored intent does not match its id".to_owned(),
            });
        }
        let command = match (parse(command_json, "saved command")?, attempt) {
            (Some(write), Some(attempt)) => Some(SavedCommand {
                attempt: u32::try_from(attempt).map_err(|_| ActivityError::Corrupt {
                    what: "command attempt out of range".to_owned(),
                })?,
                write,
            }),
            (None, None) => None,
            _ => {
                return Err(ActivityError::Corrupt {
                    what: "saved command is partly stored".to_owned(),
                });
            }
        };
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
        let command_json = canonical_progress_json("command canonical JSON", &command.write)?;
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
        if let Some(Some(stored)) = stored_attempt
            && stored >= i64::from(command.attempt)
        {
            return Err(ActivityError::ProgressMismatch {
                what: "a command of this or a later attempt is already saved",
            });
        }
        fenced_update(
            &transaction,
            lease,
            now,
            "command_json = ?5, command_attempt = ?6",
            &[&command_json, &i64::from(command.attempt)],
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
        if let Some(successor) = successor {
            admit_in(&transaction, successor, None, now)?;
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
        let cleanup = Intent::Cleanup {
            source: source.clone(),
            revision: revision.cloned(),
        };
        let mut connection = lock(&self.connection);
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("suppress source"))?;
        transaction
            .execute(
                "INSERT OR IGNORE INTO remembering_suppressions (source, revision, suppressed_at)
                 VALUES (?1, ?2, ?3)",
                params![
                    source.as_str(),
                    revision.map_or(ALL_REVISIONS, SourceRevision::as_str),
                    now
                ],
            )
            .map_err(sql_error("suppress source"))?;
        let admitted = admit_in(&transaction, &cleanup, None, now)?;
        transaction.commit().map_err(sql_error("suppress source"))?;
        Ok(admitted.id)
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
        if limit == 0 || limit > MAX_PAGE_ROWS {
            return Err(ActivityError::invalid(
                "reference page limit",
                format!("must be between 1 and {MAX_PAGE_ROWS}"),
            ));
        }
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare_cached(
                "SELECT row, source_revision, target_namespace, target_id, operation_id, revision
                 FROM remembering_references WHERE source = ?1 AND row > ?2 ORDER BY row LIMIT ?3",
            )
            .map_err(sql_error("read references"))?;
        let rows = statement
            .query_map(
                params![
                    source.as_str(),
                    to_i64(after, "reference row")?,
                    limit as i64
                ],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, String>(4)?,
                        row.get::<_, String>(5)?,
                    ))
                },
            )
            .map_err(sql_error("read references"))?;
        let mut references = Vec::new();
        for row in rows {
            let (row_number, source_revision, namespace, id, operation_id, revision) =
                row.map_err(sql_error("read references"))?;
            let bad = |what: &str| ActivityError::Corrupt {
                what: format!("stored reference has an invalid {what}"),
            };
            references.push((
                to_u64(row_number, "reference row")?,
                SourceReference {
                    source: source.clone(),
                    source_revision: SourceRevision::new(source_revision)
                        .map_err(|_| bad("source revision"))?,
                    target: MemoryKey {
                        namespace: memory_core::NamespaceAddress::parse(&namespace)
                            .map_err(|_| bad("namespace"))?,
                        id: memory_core::DocumentId::new(id).map_err(|_| bad("document id"))?,
                    },
                    operation_id: memory_core::OperationId::new(operation_id)
                        .map_err(|_| bad("operation id"))?,
                    revision: Revision::new(revision).map_err(|_| bad("revision"))?,
                },
            ));
        }
        Ok(references)
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
                "SELECT intent_json, state, proposal_json, command_json, command_attempt,
                        outcome_json, epoch
                 FROM remembering_intents WHERE id = ?1",
                [id.as_str()],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, Option<String>>(2)?,
                        row.get::<_, Option<String>>(3)?,
                        row.get::<_, Option<i64>>(4)?,
                        row.get::<_, Option<String>>(5)?,
                        row.get::<_, i64>(6)?,
                    ))
                },
            )
            .optional()
            .map_err(sql_error("inspect intent"))?;
        let Some((intent_json, state, proposal, command, attempt, outcome, epoch)) = found else {
            return Ok(None);
        };
        let command = match (parse(command, "saved command")?, attempt) {
            (Some(write), Some(attempt)) => Some(SavedCommand {
                attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                write,
            }),
            _ => None,
        };
        Ok(Some(IntentView {
            intent: serde_json::from_str(&intent_json).map_err(corrupt("intent"))?,
            state: if state == "done" {
                IntentState::Done
            } else {
                IntentState::Queued
            },
            proposal: parse(proposal, "saved proposal")?,
            command,
            outcome: parse(outcome, "outcome")?,
            epoch: FencingEpoch(to_u64(epoch, "epoch")?),
        }))
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
        to_u64(open, "open intents")
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
        if to_u64(parked, "parked intents")? >= capacity {
            return Err(ActivityError::AtCapacity { capacity });
        }
        transaction
            .execute(
                "INSERT INTO remembering_outbox (intent_json, parked_at) VALUES (?1, ?2)",
                params![intent_json, now],
            )
            .map_err(sql_error("park intent"))?;
        transaction.commit().map_err(sql_error("park intent"))
    }

    fn outbox_peek(&self, limit: usize) -> Result<Vec<(u64, Intent)>, ActivityError> {
        if limit == 0 || limit > MAX_PAGE_ROWS {
            return Err(ActivityError::invalid(
                "outbox page limit",
                format!("must be between 1 and {MAX_PAGE_ROWS}"),
            ));
        }
        let connection = lock(&self.connection);
        let mut statement = connection
            .prepare_cached("SELECT row, intent_json FROM remembering_outbox ORDER BY row LIMIT ?1")
            .map_err(sql_error("read outbox"))?;
        let rows = statement
            .query_map([limit as i64], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(sql_error("read outbox"))?;
        let mut parked = Vec::new();
        for row in rows {
            let (row_number, json) = row.map_err(sql_error("read outbox"))?;
            parked.push((
                to_u64(row_number, "outbox row")?,
                serde_json::from_str(&json).map_err(corrupt("parked intent"))?,
            ));
        }
        Ok(parked)
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
        let row_value = to_i64(row, "outbox row")?;
        let json: Option<String> = transaction
            .query_row(
                "SELECT intent_json FROM remembering_outbox WHERE row = ?1",
                [row_value],
                |found| found.get(0),
            )
            .optional()
            .map_err(sql_error("admit parked intent"))?;
        let Some(json) = json else {
            return Err(ActivityError::ProgressMismatch {
                what: "parked intent is gone",
            });
        };
        let intent: Intent = serde_json::from_str(&json).map_err(corrupt("parked intent"))?;
        let counted = match intent {
            Intent::Remember { .. } => Some(capacity),
            Intent::Cleanup { .. } => None,
        };
        let admitted = admit_in(&transaction, &intent, counted, now)?;
        transaction
            .execute("DELETE FROM remembering_outbox WHERE row = ?1", [row_value])
            .map_err(sql_error("admit parked intent"))?;
        transaction
            .commit()
            .map_err(sql_error("admit parked intent"))?;
        Ok(admitted)
    }
}
