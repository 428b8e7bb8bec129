//! The write transaction on PostgreSQL: one batch of prepared writes planned and persisted under the
//! store's write lock (the change-head row): each write's document with its searchable text and
//! scopes, its receipt, revision and change, and the older receipts whose words the retention drops,
//! redacted in the same transaction.

use deadpool_postgres::Object;
use memory_core::{
    Clock, MemoryDocument, MemoryError, MemoryReceipt, MemoryWrite, PreparedWrite,
    RevisionRetention, WordsToDrop, WriteOutcome, WritePlan,
};

use crate::error::{Attempt, Fail};
use crate::retry::commit;
use crate::rows::{decode_receipt, encode, indexed_text, speakers};
use crate::store::{read_current, read_receipt};

type Result<T, E = MemoryError> = std::result::Result<T, E>;

/// Refuses, before any transaction, what PostgreSQL text columns cannot hold.
pub(crate) fn check_storable(write: &PreparedWrite) -> Result<()> {
    if let MemoryWrite::Put { locator, .. } = write.write()
        && locator.contains('\0')
    {
        return Err(MemoryError::invalid(
            "locator",
            "PostgreSQL text cannot hold U+0000",
        ));
    }
    Ok(())
}

/// What a batch transaction decided for each write, in input order.
pub(crate) type BatchOutcome = Vec<Result<WriteOutcome, MemoryError>>;

/// One attempt at a write transaction.
///
/// It runs at READ COMMITTED and first locks the change-head row: that lock is the store's write lock,
/// held until commit, so writers from every process take turns, each statement after it sees every
/// earlier commit, plans are computed against the latest state, and change sequences follow commit
/// order. The conditional update on the expected revision and the receipt's primary key still guard
/// each row in SQL, so a plan that no longer matched would fail rather than overwrite.
pub(crate) async fn write_attempt(
    mut client: Object,
    clock: &dyn Clock,
    retention: RevisionRetention,
    writes: &[PreparedWrite],
) -> Attempt<BatchOutcome> {
    let transaction = client.transaction().await?;
    let lock = transaction
        .prepare_cached("SELECT head FROM memory_change_head FOR UPDATE")
        .await?;
    let head: i64 = transaction.query_one(&lock, &[]).await?.try_get(0)?;
    // Taken under the write lock, so `modified_at` follows commit order on one clock.
    let now = clock.now_millis();
    let mut sequence = head;
    let mut outcomes = Vec::with_capacity(writes.len());
    for write in writes {
        outcomes.push(apply_one(&transaction, write, now, retention, &mut sequence).await?);
    }
    if sequence == head {
        // Refusals and replays wrote nothing.
        transaction.rollback().await?;
        return Ok(outcomes);
    }
    let advance = transaction
        .prepare_cached(
            "UPDATE memory_change_head SET head = $1 \
             RETURNING pg_notify('memory_changes', current_schema() || ':' || head::text)",
        )
        .await?;
    transaction.query_one(&advance, &[&sequence]).await?;
    commit(transaction).await?;
    tracing::debug!(
        writes = writes.len(),
        committed = sequence - head,
        "write transaction committed"
    );
    Ok(outcomes)
}

/// Plans one write against the transaction's view and persists it. The inner result is the write's own
/// answer (a refusal changes nothing); the outer one fails the whole transaction.
async fn apply_one(
    transaction: &deadpool_postgres::Transaction<'_>,
    write: &PreparedWrite,
    now: i64,
    retention: RevisionRetention,
    sequence: &mut i64,
) -> Attempt<Result<WriteOutcome, MemoryError>> {
    let key = write.write().key();
    let stored = match read_receipt(
        transaction,
        &key.namespace,
        write.write().operation_id().as_str(),
    )
    .await
    {
        Ok(receipt) => match read_current(transaction, key).await {
            Ok(current) => Ok((receipt, current)),
            Err(error) => Err(error),
        },
        Err(error) => Err(error),
    };
    let planned = match stored {
        // The database failing fails the transaction; a row that does not decode refuses this write.
        Err(Fail::Model(refusal)) => Err(refusal),
        Err(error) => return Err(error),
        Ok((receipt, current)) => write.plan(receipt.as_ref(), current.as_ref(), now),
    };
    match planned {
        Err(refusal) => Ok(Err(refusal)),
        Ok(WritePlan::Replay(receipt)) => Ok(Ok(WriteOutcome {
            receipt,
            replayed: true,
        })),
        Ok(WritePlan::Commit { document, receipt }) => {
            *sequence += 1;
            persist(transaction, &document, &receipt, *sequence).await?;
            drop_words(transaction, &document, retention.words_to_drop(&document)).await?;
            Ok(Ok(WriteOutcome {
                receipt,
                replayed: false,
            }))
        }
    }
}

async fn persist(
    transaction: &deadpool_postgres::Transaction<'_>,
    document: &MemoryDocument,
    receipt: &MemoryReceipt,
    sequence: i64,
) -> Attempt<()> {
    let namespace = document.key.namespace.as_str();
    let id = document.key.id.as_str();
    let revision = document.revision.as_str();
    let document_body = encode(document).map_err(Fail::Model)?;
    let receipt_body = encode(receipt).map_err(Fail::Model)?;
    let withdrawn = document.withdrawn.is_some();
    let (text, speakers) = if withdrawn {
        (None, None)
    } else {
        (
            Some(indexed_text(&document.content.text)),
            Some(speakers(document)),
        )
    };
    let entry: i64 = match &document.predecessor {
        // The conditional update on the expected revision: exactly one row, or the write is refused.
        Some(predecessor) => {
            let update = transaction
                .prepare_cached(
                    "UPDATE memory_documents SET revision = $3, withdrawn = $4, locator = $5, \
                     body = $6, search = to_tsvector('english'::regconfig, $7::text) || to_tsvector('english'::regconfig, $8::text) \
                     WHERE namespace = $1 AND id = $2 AND revision = $9 RETURNING entry",
                )
                .await?;
            let rows = transaction
                .query(
                    &update,
                    &[
                        &namespace,
                        &id,
                        &revision,
                        &withdrawn,
                        &document.locator,
                        &document_body,
                        &text,
                        &speakers,
                        &predecessor.as_str(),
                    ],
                )
                .await?;
            let [row] = rows.as_slice() else {
                return Err(Fail::Model(MemoryError::Conflict { current: None }));
            };
            let entry: i64 = row.try_get(0)?;
            let clear = transaction
                .prepare_cached("DELETE FROM memory_document_scopes WHERE entry = $1")
                .await?;
            transaction.execute(&clear, &[&entry]).await?;
            entry
        }
        None => {
            let insert = transaction
                .prepare_cached(
                    "INSERT INTO memory_documents \
                     (namespace, id, revision, withdrawn, locator, body, search) \
                     VALUES ($1, $2, $3, $4, $5, $6, \
                             to_tsvector('english'::regconfig, $7::text) || to_tsvector('english'::regconfig, $8::text)) \
                     RETURNING entry",
                )
                .await?;
            transaction
                .query_one(
                    &insert,
                    &[
                        &namespace,
                        &id,
                        &revision,
                        &withdrawn,
                        &document.locator,
                        &document_body,
                        &text,
                        &speakers,
                    ],
                )
                .await?
                .try_get(0)?
        }
    };
    if !withdrawn && !document.scopes.is_empty() {
        let scopes: Vec<&str> = document.scopes.iter().map(|scope| scope.as_str()).collect();
        let insert = transaction
            .prepare_cached(
                "INSERT INTO memory_document_scopes (entry, scope, namespace) \
                 SELECT $1, scope, $3 FROM unnest($2::text[]) AS scope",
            )
            .await?;
        transaction
            .execute(&insert, &[&entry, &scopes, &namespace])
            .await?;
    }
    let change = transaction
        .prepare_cached("INSERT INTO memory_changes (sequence, namespace, id) VALUES ($1, $2, $3)")
        .await?;
    transaction
        .execute(&change, &[&sequence, &namespace, &id])
        .await?;
    let link = transaction
        .prepare_cached(
            "INSERT INTO memory_revisions (namespace, id, revision, predecessor, sequence) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .await?;
    transaction
        .execute(
            &link,
            &[
                &namespace,
                &id,
                &revision,
                &document
                    .predecessor
                    .as_ref()
                    .map(|revision| revision.as_str()),
                &sequence,
            ],
        )
        .await?;
    let store_receipt = transaction
        .prepare_cached(
            "INSERT INTO memory_receipts (namespace, operation_id, id, revision, body) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .await?;
    transaction
        .execute(
            &store_receipt,
            &[
                &namespace,
                &receipt.operation_id.as_str(),
                &id,
                &revision,
                &receipt_body,
            ],
        )
        .await?;
    Ok(())
}

/// Redacts the receipts of `document`'s key that `drop` leaves without words: the oldest ones that
/// still hold words, past the newest `drop.kept()` revisions (the committed one counted). The
/// revisions holding words are always a key's newest, so the `redacted` column finds them alone.
async fn drop_words(
    transaction: &deadpool_postgres::Transaction<'_>,
    document: &MemoryDocument,
    drop: WordsToDrop,
) -> Attempt<()> {
    let namespace = document.key.namespace.as_str();
    let kept = i64::try_from(drop.kept()).unwrap_or(i64::MAX);
    let select = transaction
        .prepare_cached(
            "SELECT r.operation_id, r.body FROM memory_receipts AS r \
             JOIN memory_revisions AS v \
             ON v.namespace = r.namespace AND v.id = r.id AND v.revision = r.revision \
             WHERE r.namespace = $1 AND r.id = $2 AND NOT r.redacted \
             ORDER BY v.sequence DESC OFFSET $3",
        )
        .await?;
    let rows = transaction
        .query(&select, &[&namespace, &document.key.id.as_str(), &kept])
        .await?;
    if rows.is_empty() {
        return Ok(());
    }
    let update = transaction
        .prepare_cached(
            "UPDATE memory_receipts SET body = $3, redacted = TRUE \
             WHERE namespace = $1 AND operation_id = $2",
        )
        .await?;
    for row in rows {
        let operation_id: String = row.try_get(0)?;
        let body: String = row.try_get(1)?;
        let receipt =
            decode_receipt(&body, &document.key.namespace, &operation_id).map_err(Fail::Model)?;
        let body = encode(&memory_core::revisions::redact(receipt)).map_err(Fail::Model)?;
        transaction
            .execute(&update, &[&namespace, &operation_id, &body])
            .await?;
    }
    Ok(())
}
