//! The index's own consistency check, part of the store's (`crate::consistency`).

use memory_core::MemoryError;
use rusqlite::Connection;

use super::tables::TERM_ID_BYTES;
use crate::error::{corrupt, sqlite};

/// Checks the index against the current documents: exactly the live ones are indexed, each under its
/// own namespace, every posting belongs to its document, and each namespace's counts are the sums of
/// its documents'. Any disagreement is [`memory_core::StoreFault::Corrupt`].
pub(crate) fn check(connection: &Connection) -> Result<(), MemoryError> {
    const OPERATION: &str = "check consistency";
    let count = |sql: &str| -> Result<i64, MemoryError> {
        connection
            .query_row(sql, [], |row| row.get::<_, i64>(0))
            .map_err(sqlite(OPERATION))
    };
    let misindexed = count(
        "SELECT count(*) FROM memory_documents AS d \
         LEFT JOIN memory_lexical_documents AS l ON l.entry = d.entry \
         LEFT JOIN memory_lexical_namespaces AS n ON n.id = l.namespace_id \
         WHERE (d.withdrawn = 0) != (l.entry IS NOT NULL) \
            OR (l.entry IS NOT NULL AND (n.namespace IS NULL OR n.namespace != d.namespace))",
    )? + count(
        "SELECT count(*) FROM memory_lexical_documents AS l \
         LEFT JOIN memory_documents AS d ON d.entry = l.entry WHERE d.entry IS NULL",
    )?;
    if misindexed != 0 {
        return Err(corrupt(
            "the search index disagrees with the current documents",
        ));
    }
    let stray_postings = count(
        "SELECT count(*) FROM memory_lexical_postings AS p \
         LEFT JOIN memory_lexical_documents AS l ON l.entry = p.entry \
         WHERE l.entry IS NULL OR l.namespace_id != p.namespace_id OR l.tokens != p.tokens",
    )?;
    let listed = count(&format!(
        "SELECT coalesce(sum(length(terms) / {TERM_ID_BYTES}), 0) FROM memory_lexical_documents"
    ))?;
    if stray_postings != 0 || listed != count("SELECT count(*) FROM memory_lexical_postings")? {
        return Err(corrupt(
            "the search index's postings disagree with its documents",
        ));
    }
    let miscounted = count(
        "SELECT count(*) FROM memory_lexical_namespaces AS n \
         LEFT JOIN (SELECT namespace_id, count(*) AS documents, sum(tokens) AS tokens \
                    FROM memory_lexical_documents GROUP BY namespace_id) AS g \
             ON g.namespace_id = n.id \
         WHERE coalesce(g.documents, 0) != n.documents OR coalesce(g.tokens, 0) != n.tokens",
    )?;
    if miscounted != 0 {
        return Err(corrupt(
            "the search index's namespace counts disagree with its documents",
        ));
    }
    Ok(())
}
