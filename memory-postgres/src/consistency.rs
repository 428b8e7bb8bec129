//! The whole-database consistency check used after faults and in tests; runs in one read-only snapshot.

use std::collections::HashSet;

use deadpool_postgres::GenericClient;
use memory_core::{MemoryError, NamespaceAddress};

use crate::error::{Attempt, Fail, corrupt};
use crate::rows::{DOCUMENT_COLUMNS, decode_document, decode_receipt};
use crate::store::ConsistencyReport;

fn fail(what: impl Into<String>) -> Fail<MemoryError> {
    Fail::Model(corrupt(what))
}

async fn count<C: GenericClient + Sync>(client: &C, sql: &str) -> Attempt<u64> {
    let value: i64 = client.query_one(sql, &[]).await?.try_get(0)?;
    u64::try_from(value).map_err(|_| fail("negative count"))
}

pub(crate) async fn check<C: GenericClient + Sync>(client: &C) -> Attempt<ConsistencyReport> {
    let mut report = ConsistencyReport::default();
    let mut live_documents = 0_u64;

    // Every current row decodes and was written by exactly the receipt that carries it.
    let rows = client
        .query(
            &format!("SELECT {DOCUMENT_COLUMNS} FROM memory_documents ORDER BY entry"),
            &[],
        )
        .await?;
    let receipt_for_revision = client
        .prepare(
            "SELECT operation_id, body FROM memory_receipts \
             WHERE namespace = $1 AND id = $2 AND revision = $3",
        )
        .await?;
    let successor = client
        .prepare(
            "SELECT count(*) FROM memory_revisions \
             WHERE namespace = $1 AND id = $2 AND predecessor = $3",
        )
        .await?;
    for row in rows {
        let document = decode_document(&row).map_err(Fail::Model)?;
        report.documents += 1;
        live_documents += u64::from(document.withdrawn.is_none());
        let key = &document.key;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [
            &key.namespace.as_str(),
            &key.id.as_str(),
            &document.revision.as_str(),
        ];
        let receipts = client.query(&receipt_for_revision, &params).await?;
        let [receipt_row] = receipts.as_slice() else {
            return Err(fail(format!(
                "a current document has {} receipts instead of one",
                receipts.len()
            )));
        };
        let operation_id: String = receipt_row.try_get(0)?;
        let body: String = receipt_row.try_get(1)?;
        let receipt = decode_receipt(&body, &key.namespace, &operation_id).map_err(Fail::Model)?;
        if receipt.document != document {
            return Err(fail("a current document differs from its receipt"));
        }
        let successors: i64 = client.query_one(&successor, &params).await?.try_get(0)?;
        if successors != 0 {
            return Err(fail("a current document has a newer revision"));
        }
    }

    // Every receipt decodes, names a committed revision of its key, and no two share one.
    let rows = client
        .query(
            "SELECT r.namespace, r.operation_id, r.id, r.revision, r.body, r.redacted, \
                    (SELECT count(*) FROM memory_revisions AS v \
                     WHERE v.namespace = r.namespace AND v.id = r.id AND v.revision = r.revision) \
             FROM memory_receipts AS r",
            &[],
        )
        .await?;
    let mut seen_revisions: HashSet<(String, String, String)> = HashSet::new();
    for row in rows {
        let namespace: String = row.try_get(0)?;
        let operation_id: String = row.try_get(1)?;
        let id: String = row.try_get(2)?;
        let revision: String = row.try_get(3)?;
        let body: String = row.try_get(4)?;
        let redacted: bool = row.try_get(5)?;
        let found: i64 = row.try_get(6)?;
        let address = NamespaceAddress::parse(&namespace)
            .map_err(|_| fail("stored namespace address is invalid"))?;
        let receipt = decode_receipt(&body, &address, &operation_id).map_err(Fail::Model)?;
        if receipt.document.key.id.as_str() != id || receipt.document.revision.as_str() != revision
        {
            return Err(fail("a receipt disagrees with its row"));
        }
        memory_core::revisions::check_stored_redaction(&receipt, redacted).map_err(Fail::Model)?;
        if found != 1 {
            return Err(fail("a receipt names a revision that was never committed"));
        }
        if !seen_revisions.insert((namespace, id, revision)) {
            return Err(fail("two receipts claim one revision"));
        }
        report.receipts += 1;
    }

    report.revisions = count(client, "SELECT count(*) FROM memory_revisions").await?;
    report.changes = count(client, "SELECT count(*) FROM memory_changes").await?;
    if report.revisions != report.receipts {
        return Err(fail("a committed revision has no receipt"));
    }
    let unmatched_changes = count(
        client,
        "SELECT count(*) FROM memory_revisions AS r LEFT JOIN memory_changes AS c \
         ON c.sequence = r.sequence AND c.namespace = r.namespace AND c.id = r.id \
         WHERE c.sequence IS NULL",
    )
    .await?;
    if unmatched_changes != 0 || report.changes != report.revisions {
        return Err(fail("the change sequence disagrees with the revisions"));
    }
    let head = count(client, "SELECT head FROM memory_change_head").await?;
    let last = count(
        client,
        "SELECT COALESCE(max(sequence), 0) FROM memory_changes",
    )
    .await?;
    if head != last || head != report.changes {
        return Err(fail("the change head disagrees with the change sequence"));
    }
    let indexed = count(
        client,
        "SELECT count(*) FROM memory_documents WHERE search IS NOT NULL",
    )
    .await?;
    if indexed != live_documents {
        return Err(fail(
            "the search index disagrees with the current documents",
        ));
    }
    let stray_scopes = count(
        client,
        "SELECT count(*) FROM memory_document_scopes AS s \
         LEFT JOIN memory_documents AS d ON d.entry = s.entry \
         WHERE d.entry IS NULL OR d.withdrawn OR d.namespace != s.namespace",
    )
    .await?;
    if stray_scopes != 0 {
        return Err(fail(
            "scopes are listed for a missing or withdrawn document",
        ));
    }
    Ok(report)
}
