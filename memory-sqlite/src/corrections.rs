//! The reverse of correction links ([`CorrectionIndex::corrections_of`]): which current documents
//! name a document in their `corrects` member. The partial expression index
//! `memory_documents_by_correction` (schema step 14: by namespace and the `corrects.id` of a body that
//! is JSON) holds only the documents that carry a link, so each id is one index range read;
//! the caller's scope is checked on `memory_document_scopes`, which holds only current,
//! non-withdrawn documents.
//!
//! [`CorrectionIndex::corrections_of`]: memory_core::recall::corrections::CorrectionIndex::corrections_of

use memory_core::recall::corrections::{MAX_CORRECTIONS_PER_DOCUMENT, check_correction_request};
use memory_core::storage::decode_document_id;
use memory_core::{DocumentId, MemoryAccess, MemoryError};
use rusqlite::Connection;

use crate::error::sqlite;

const OPERATION: &str = "corrections of";

/// The expression is spelled as the index spells it, so the planner uses the index.
const CORRECTIONS_SQL: &str = "SELECT d.id FROM memory_documents AS d \
    JOIN memory_document_scopes AS s ON s.entry = d.entry AND s.scope = ?3 \
    WHERE d.namespace = ?1 \
    AND iif(instr(d.body, '\"corrects\"') AND json_valid(d.body), \
    json_extract(d.body, '$.content.metadata.corrects.id'), NULL) = ?2 \
    AND d.withdrawn = 0 \
    ORDER BY d.entry DESC LIMIT ?4";

/// The corrections of each of `ids`, newest write first, read in one snapshot.
pub(crate) fn corrections_of(
    connection: &Connection,
    access: &MemoryAccess,
    ids: &[DocumentId],
) -> Result<Vec<Vec<DocumentId>>, MemoryError> {
    check_correction_request(ids)?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let snapshot = connection
        .unchecked_transaction()
        .map_err(sqlite(OPERATION))?;
    let mut statement = snapshot
        .prepare_cached(CORRECTIONS_SQL)
        .map_err(sqlite(OPERATION))?;
    let namespace = access.namespace.as_str();
    let scope = access.scope.as_str();
    let mut answers = Vec::with_capacity(ids.len());
    for id in ids {
        let found = statement
            .query_map(
                rusqlite::params![
                    namespace,
                    id.as_str(),
                    scope,
                    MAX_CORRECTIONS_PER_DOCUMENT as i64
                ],
                |row| row.get::<_, String>(0),
            )
            .map_err(sqlite(OPERATION))?
            .map(|found| decode_document_id(&found.map_err(sqlite(OPERATION))?))
            .collect::<Result<Vec<_>, MemoryError>>()?;
        answers.push(found);
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    /// The query reads the partial index, not every document of the namespace: its expression is
    /// spelled as the index's, which SQLite matches literally.
    #[test]
    fn the_query_uses_the_corrections_index() {
        let mut connection = rusqlite::Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut connection).unwrap();
        let plan: Vec<String> = connection
            .prepare(&format!("EXPLAIN QUERY PLAN {}", super::CORRECTIONS_SQL))
            .unwrap()
            .query_map(rusqlite::params!["n", "d", "s", 16], |row| row.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            plan.iter()
                .any(|step| step.contains("memory_documents_by_correction")),
            "{plan:?}"
        );
    }
}
