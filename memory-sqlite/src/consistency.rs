//! The whole-file consistency check used after crashes and in tests.

use std::collections::HashSet;

use memory_core::{MemoryError, NamespaceAddress};
use rusqlite::Connection;

use crate::error::{corrupt, sqlite};
use crate::reader::ConsistencyReport;
use crate::rows::{DocumentRow, decode_receipt};

const OPERATION: &str = "check consistency";

pub(crate) fn check(connection: &Connection) -> Result<ConsistencyReport, MemoryError> {
    let verdicts: Vec<String> = connection
        .prepare("PRAGMA integrity_check")
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<_, _>>()
        })
        .map_err(sqlite(OPERATION))?;
    if verdicts != ["ok"] {
        return Err(corrupt(format!(
            "integrity_check reported {} problem(s): {}",
            verdicts.len(),
            verdicts.join("; ")
        )));
    }
    let mut report = ConsistencyReport::default();

    // Every current row decodes and was written by exactly the receipt that carries it.
    let mut documents = connection
        .prepare("SELECT namespace, id, revision, withdrawn, locator, body FROM memory_documents")
        .map_err(sqlite(OPERATION))?;
    let mut receipt_for_revision = connection
        .prepare(
            "SELECT operation_id, body FROM memory_receipts \
             WHERE namespace = ?1 AND id = ?2 AND revision = ?3",
        )
        .map_err(sqlite(OPERATION))?;
    let mut successor = connection
        .prepare(
            "SELECT count(*) FROM memory_revisions \
             WHERE namespace = ?1 AND id = ?2 AND predecessor = ?3",
        )
        .map_err(sqlite(OPERATION))?;
    let mut rows = documents.query([]).map_err(sqlite(OPERATION))?;
    while let Some(row) = rows.next().map_err(sqlite(OPERATION))? {
        let document = DocumentRow {
            namespace: row.get(0).map_err(sqlite(OPERATION))?,
            id: row.get(1).map_err(sqlite(OPERATION))?,
            revision: row.get(2).map_err(sqlite(OPERATION))?,
            withdrawn: row.get(3).map_err(sqlite(OPERATION))?,
            locator: row.get(4).map_err(sqlite(OPERATION))?,
            body: row.get(5).map_err(sqlite(OPERATION))?,
        }
        .decode()?;
        report.documents += 1;
        let key = &document.key;
        let receipts: Vec<(String, String)> = receipt_for_revision
            .query_map(
                [
                    key.namespace.as_str(),
                    key.id.as_str(),
                    document.revision.as_str(),
                ],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .and_then(|rows| rows.collect())
            .map_err(sqlite(OPERATION))?;
        let [(operation_id, body)] = receipts.as_slice() else {
            return Err(corrupt(format!(
                "a current document has {} receipts instead of one",
                receipts.len()
            )));
        };
        let receipt = decode_receipt(body, &key.namespace, operation_id)?;
        if receipt.document != document {
            return Err(corrupt("a current document differs from its receipt"));
        }
        let successors: i64 = successor
            .query_row(
                [
                    key.namespace.as_str(),
                    key.id.as_str(),
                    document.revision.as_str(),
                ],
                |row| row.get(0),
            )
            .map_err(sqlite(OPERATION))?;
        if successors != 0 {
            return Err(corrupt("a current document has a newer revision"));
        }
    }

    // Every receipt decodes, names a committed revision of its key, and no two share one.
    let mut receipts = connection
        .prepare(
            "SELECT namespace, operation_id, id, revision, body, redacted FROM memory_receipts",
        )
        .map_err(sqlite(OPERATION))?;
    let mut revision_exists = connection
        .prepare(
            "SELECT count(*) FROM memory_revisions \
             WHERE namespace = ?1 AND id = ?2 AND revision = ?3",
        )
        .map_err(sqlite(OPERATION))?;
    let mut seen_revisions: HashSet<(String, String, String)> = HashSet::new();
    let mut rows = receipts.query([]).map_err(sqlite(OPERATION))?;
    while let Some(row) = rows.next().map_err(sqlite(OPERATION))? {
        let namespace: String = row.get(0).map_err(sqlite(OPERATION))?;
        let operation_id: String = row.get(1).map_err(sqlite(OPERATION))?;
        let id: String = row.get(2).map_err(sqlite(OPERATION))?;
        let revision: String = row.get(3).map_err(sqlite(OPERATION))?;
        let body: String = row.get(4).map_err(sqlite(OPERATION))?;
        let redacted: i64 = row.get(5).map_err(sqlite(OPERATION))?;
        let address = NamespaceAddress::parse(&namespace)
            .map_err(|_| corrupt("stored namespace address is invalid"))?;
        let receipt = decode_receipt(&body, &address, &operation_id)?;
        if receipt.document.key.id.as_str() != id || receipt.document.revision.as_str() != revision
        {
            return Err(corrupt("a receipt disagrees with its row"));
        }
        let redacted = match redacted {
            0 => false,
            1 => true,
            _ => return Err(corrupt("a receipt's redaction flag is not 0 or 1")),
        };
        memory_core::revisions::check_stored_redaction(&receipt, redacted)?;
        let found: i64 = revision_exists
            .query_row([&namespace, &id, &revision], |row| row.get(0))
            .map_err(sqlite(OPERATION))?;
        if found != 1 {
            return Err(corrupt(
                "a receipt names a revision that was never committed",
            ));
        }
        if !seen_revisions.insert((namespace, id, revision)) {
            return Err(corrupt("two receipts claim one revision"));
        }
        report.receipts += 1;
    }

    let count = |sql: &str| -> Result<u64, MemoryError> {
        connection
            .query_row(sql, [], |row| row.get::<_, i64>(0))
            .map_err(sqlite(OPERATION))
            .and_then(|count| u64::try_from(count).map_err(|_| corrupt("negative count")))
    };
    report.revisions = count("SELECT count(*) FROM memory_revisions")?;
    report.changes = count("SELECT count(*) FROM memory_changes")?;
    if report.revisions != report.receipts {
        return Err(corrupt("a committed revision has no receipt"));
    }
    let unmatched_changes = count(
        "SELECT count(*) FROM memory_revisions AS r LEFT JOIN memory_changes AS c \
         ON c.sequence = r.sequence AND c.namespace = r.namespace AND c.id = r.id \
         WHERE c.sequence IS NULL",
    )?;
    if unmatched_changes != 0 || report.changes != report.revisions {
        return Err(corrupt("the change sequence disagrees with the revisions"));
    }
    crate::lexical::check(connection)?;
    let stray_scopes = count(
        "SELECT count(*) FROM memory_document_scopes AS s \
         LEFT JOIN memory_documents AS d ON d.entry = s.entry \
         WHERE d.entry IS NULL OR d.withdrawn = 1 OR d.namespace != s.namespace",
    )?;
    if stray_scopes != 0 {
        return Err(corrupt(
            "scopes are listed for a missing or withdrawn document",
        ));
    }
    Ok(report)
}
