//! One write transaction: `BEGIN IMMEDIATE`, plan every prepared write against what the file holds,
//! persist document, scopes, search row, change, revision link and receipt, `COMMIT`.
//!
//! `BEGIN IMMEDIATE` takes the write lock up front, so a transaction never has to upgrade a read lock
//! (the deferred-transaction `SQLITE_BUSY` that no wait can resolve). Waiting for the lock is SQLite's
//! `busy_timeout`; if it still reports busy, the whole attempt is rolled back and retried a bounded number
//! of times before [`memory_core::StoreFault::Busy`] is returned. Plans are recomputed on every attempt, so a retry
//! sees what the competing writer committed.

use memory_core::StoreFault;
use memory_core::{
    Clock, MemoryDocument, MemoryError, MemoryReceipt, PreparedWrite, RevisionRetention,
    WordsToDrop, WriteOutcome, WritePlan,
};
use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::error::{FailureClass, StoreFailure, classify};
use crate::fault::failpoint;
use crate::reader::{backoff, read_current, read_receipt};
use crate::rows::{encode, speakers};

/// A failure of one transaction attempt.
#[derive(Debug)]
pub(crate) enum TxError {
    /// SQLite failed before `COMMIT`; the transaction rolled back.
    Sqlite(rusqlite::Error),
    /// `COMMIT` itself failed: whether the write is durable is unknown.
    Commit(rusqlite::Error),
    /// A failpoint fired.
    Injected { point: &'static str, io: bool },
    /// A failure of the model (for example encoding); the transaction rolled back.
    Memory(MemoryError),
}

impl From<rusqlite::Error> for TxError {
    fn from(error: rusqlite::Error) -> Self {
        Self::Sqlite(error)
    }
}

impl TxError {
    fn class(&self) -> FailureClass {
        match self {
            Self::Sqlite(error) => classify(error),
            Self::Commit(_) | Self::Injected { io: true, .. } => FailureClass::Poisoning,
            Self::Memory(error) => match crate::error::storage_failure(error) {
                Some(StoreFailure::Sqlite(error)) => classify(error),
                _ => FailureClass::Plain,
            },
            Self::Injected { io: false, .. } => FailureClass::Plain,
        }
    }

    fn into_memory_error(self) -> MemoryError {
        match self {
            Self::Sqlite(error) => MemoryError::storage("write", StoreFailure::Sqlite(error)),
            Self::Commit(error) => MemoryError::storage("commit", StoreFailure::Sqlite(error)),
            Self::Injected { point, io } => {
                MemoryError::storage("write", StoreFailure::Injected { point, io })
            }
            Self::Memory(error) => error,
        }
    }
}

/// What a batch transaction decided for each write, in input order.
pub(crate) type BatchOutcome = Vec<Result<WriteOutcome, MemoryError>>;

/// Runs the prepared writes in one transaction, retrying on busy. Returns the per-write outcomes, or
/// the failure of the transaction together with whether it must poison the store.
pub(crate) fn run(
    connection: &mut Connection,
    clock: &dyn Clock,
    retention: RevisionRetention,
    busy_retries: u32,
    writes: &[PreparedWrite],
) -> Result<BatchOutcome, (MemoryError, bool)> {
    let mut attempt = 0;
    loop {
        match attempt_once(connection, clock, retention, writes).and_then(acknowledge) {
            Ok(outcomes) => return Ok(outcomes),
            Err(error) => match error.class() {
                FailureClass::Busy if attempt < busy_retries => {
                    tracing::debug!(attempt, "write transaction busy, retrying");
                    std::thread::sleep(backoff(attempt));
                    attempt += 1;
                }
                FailureClass::Busy => {
                    return Err((
                        MemoryError::Store(StoreFault::Busy { operation: "write" }),
                        false,
                    ));
                }
                FailureClass::Poisoning => return Err((error.into_memory_error(), true)),
                FailureClass::Plain => return Err((error.into_memory_error(), false)),
            },
        }
    }
}

/// The last step before the caller is answered; the lost-acknowledgement failpoint sits here.
fn acknowledge(outcomes: BatchOutcome) -> Result<BatchOutcome, TxError> {
    failpoint!(crate::fault::LOST_ACKNOWLEDGEMENT);
    Ok(outcomes)
}

fn attempt_once(
    connection: &mut Connection,
    clock: &dyn Clock,
    retention: RevisionRetention,
    writes: &[PreparedWrite],
) -> Result<BatchOutcome, TxError> {
    failpoint!(crate::fault::BEFORE_BEGIN);
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Taken under the write lock, so `modified_at` follows commit order on one clock.
    let now = clock.now_millis();
    let mut outcomes = Vec::with_capacity(writes.len());
    let mut committed = 0_usize;
    for write in writes {
        let outcome = apply_one(&transaction, write, now, retention)?;
        committed += usize::from(matches!(&outcome, Ok(outcome) if !outcome.replayed));
        outcomes.push(outcome);
    }
    if committed == 0 {
        // Refusals and replays wrote nothing; rolling back keeps even the commit out of the WAL.
        transaction.rollback()?;
        return Ok(outcomes);
    }
    failpoint!(crate::fault::INSIDE_TRANSACTION);
    failpoint!(crate::fault::COMMIT);
    transaction.commit().map_err(TxError::Commit)?;
    failpoint!(crate::fault::AFTER_COMMIT);
    tracing::debug!(
        writes = writes.len(),
        committed,
        "write transaction committed"
    );
    Ok(outcomes)
}

/// Plans one write against the transaction's view and persists it. The inner result is the write's own
/// answer (a refusal changes nothing); the outer one fails the whole transaction.
fn apply_one(
    transaction: &Transaction<'_>,
    write: &PreparedWrite,
    now: i64,
    retention: RevisionRetention,
) -> Result<Result<WriteOutcome, MemoryError>, TxError> {
    let key = write.write().key();
    let stored = read_receipt(
        transaction,
        &key.namespace,
        write.write().operation_id().as_str(),
    )
    .and_then(|receipt| Ok((receipt, read_current(transaction, key)?)));
    let planned = match stored {
        // SQLite failing under a read fails the transaction; a row that does not decode refuses only
        // this write.
        Err(error @ MemoryError::Store(StoreFault::Storage { .. })) => {
            return Err(TxError::Memory(error));
        }
        Err(refusal) => Err(refusal),
        Ok((receipt, current)) => write.plan(receipt.as_ref(), current.as_ref(), now),
    };
    match planned {
        Err(refusal) => Ok(Err(refusal)),
        Ok(WritePlan::Replay(receipt)) => Ok(Ok(WriteOutcome {
            receipt,
            replayed: true,
        })),
        Ok(WritePlan::Commit { document, receipt }) => {
            persist(transaction, &document, &receipt)?;
            drop_words(transaction, &document, retention.words_to_drop(&document))?;
            Ok(Ok(WriteOutcome {
                receipt,
                replayed: false,
            }))
        }
    }
}

fn persist(
    transaction: &Transaction<'_>,
    document: &MemoryDocument,
    receipt: &MemoryReceipt,
) -> Result<(), TxError> {
    let namespace = document.key.namespace.as_str();
    let id = document.key.id.as_str();
    let document_body = encode(document).map_err(TxError::Memory)?;
    let receipt_body = encode(receipt).map_err(TxError::Memory)?;
    let withdrawn = document.withdrawn.is_some();

    let entry: i64 = transaction
        .prepare_cached(
            "INSERT INTO memory_documents (namespace, id, revision, withdrawn, locator, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
             ON CONFLICT (namespace, id) DO UPDATE SET revision = excluded.revision, \
             withdrawn = excluded.withdrawn, locator = excluded.locator, body = excluded.body \
             RETURNING entry",
        )?
        .query_row(
            rusqlite::params![
                namespace,
                id,
                document.revision.as_str(),
                withdrawn,
                document.locator,
                document_body
            ],
            |row| row.get(0),
        )?;
    if document.predecessor.is_some() {
        crate::lexical::remove_document(transaction, entry)?;
        transaction
            .prepare_cached("DELETE FROM memory_document_scopes WHERE entry = ?1")?
            .execute([entry])?;
    }
    if !withdrawn {
        crate::lexical::index_document(
            transaction,
            entry,
            namespace,
            &document.content.text,
            &speakers(document),
        )?;
        let mut insert_scope = transaction.prepare_cached(
            "INSERT INTO memory_document_scopes (entry, scope, namespace) VALUES (?1, ?2, ?3)",
        )?;
        for scope in &document.scopes {
            insert_scope.execute(rusqlite::params![entry, scope.as_str(), namespace])?;
        }
    }
    transaction
        .prepare_cached("INSERT INTO memory_changes (namespace, id) VALUES (?1, ?2)")?
        .execute([namespace, id])?;
    let sequence = transaction.last_insert_rowid();
    transaction
        .prepare_cached(
            "INSERT INTO memory_revisions (namespace, id, revision, predecessor, sequence) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(rusqlite::params![
            namespace,
            id,
            document.revision.as_str(),
            document
                .predecessor
                .as_ref()
                .map(|revision| revision.as_str()),
            sequence
        ])?;
    transaction
        .prepare_cached(
            "INSERT INTO memory_receipts (namespace, operation_id, id, revision, body) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(rusqlite::params![
            namespace,
            receipt.operation_id.as_str(),
            id,
            document.revision.as_str(),
            receipt_body
        ])?;
    Ok(())
}

/// Redacts the receipts of `document`'s key that `drop` leaves without words: the oldest ones that
/// still hold words, past the newest `drop.kept()` revisions (the committed one counted). The
/// revisions holding words are always a key's newest, so the ones to redact are found by the
/// `redacted` column alone, without decoding the others.
fn drop_words(
    transaction: &Transaction<'_>,
    document: &MemoryDocument,
    drop: WordsToDrop,
) -> Result<(), TxError> {
    let namespace = document.key.namespace.as_str();
    let kept = i64::try_from(drop.kept()).unwrap_or(i64::MAX);
    let stale: Vec<(String, String)> = transaction
        .prepare_cached(
            "SELECT r.operation_id, r.body FROM memory_receipts AS r \
             JOIN memory_revisions AS v \
             ON v.namespace = r.namespace AND v.id = r.id AND v.revision = r.revision \
             WHERE r.namespace = ?1 AND r.id = ?2 AND r.redacted = 0 \
             ORDER BY v.sequence DESC LIMIT -1 OFFSET ?3",
        )?
        .query_map(
            rusqlite::params![namespace, document.key.id.as_str(), kept],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?
        .collect::<Result<_, _>>()?;
    let mut update = transaction.prepare_cached(
        "UPDATE memory_receipts SET body = ?3, redacted = 1 \
         WHERE namespace = ?1 AND operation_id = ?2",
    )?;
    for (operation_id, body) in stale {
        let receipt = crate::rows::decode_receipt(&body, &document.key.namespace, &operation_id)
            .map_err(TxError::Memory)?;
        let body = encode(&memory_core::revisions::redact(receipt)).map_err(TxError::Memory)?;
        update.execute(rusqlite::params![namespace, operation_id, body])?;
    }
    Ok(())
}
