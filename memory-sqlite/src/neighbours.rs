//! Written-order neighbours ([`LexicalSearch::written_neighbours`]): a document's place in its
//! namespace is its `memory_documents.entry`, assigned by its key's first write and kept by every
//! replacement (the write is an upsert), so the visible documents written before and after it are
//! the nearest entries below and above it among the namespace's rows of `memory_document_scopes`
//! in the caller's scope (which hold only current, non-withdrawn documents). The index
//! `memory_document_scopes_by_scope (namespace, scope, entry)` makes each side one range read.
//!
//! [`LexicalSearch::written_neighbours`]: memory_core::LexicalSearch::written_neighbours

use memory_core::storage::{check_neighbour_request, decode_document_id};
use memory_core::{DocumentId, MemoryAccess, MemoryError, WrittenNeighbours};
use rusqlite::{Connection, OptionalExtension};

use crate::error::sqlite;

const OPERATION: &str = "written neighbours";

/// The up to `reach` neighbours on each side of each of `ids`, in order, read in one snapshot.
pub(crate) fn written_neighbours(
    connection: &Connection,
    access: &MemoryAccess,
    ids: &[DocumentId],
    reach: usize,
) -> Result<Vec<WrittenNeighbours>, MemoryError> {
    check_neighbour_request(ids, reach)?;
    if ids.is_empty() || reach == 0 {
        return Ok(vec![WrittenNeighbours::default(); ids.len()]);
    }
    let snapshot = connection
        .unchecked_transaction()
        .map_err(sqlite(OPERATION))?;
    let mut place = snapshot
        .prepare_cached(
            "SELECT s.entry FROM memory_documents AS d \
             JOIN memory_document_scopes AS s ON s.entry = d.entry AND s.scope = ?3 \
             WHERE d.namespace = ?1 AND d.id = ?2 AND d.withdrawn = 0",
        )
        .map_err(sqlite(OPERATION))?;
    let mut previous = snapshot
        .prepare_cached(
            "SELECT d.id FROM memory_document_scopes AS s \
             JOIN memory_documents AS d ON d.entry = s.entry \
             WHERE s.namespace = ?1 AND s.scope = ?2 AND s.entry < ?3 \
             ORDER BY s.entry DESC LIMIT ?4",
        )
        .map_err(sqlite(OPERATION))?;
    let mut next = snapshot
        .prepare_cached(
            "SELECT d.id FROM memory_document_scopes AS s \
             JOIN memory_documents AS d ON d.entry = s.entry \
             WHERE s.namespace = ?1 AND s.scope = ?2 AND s.entry > ?3 \
             ORDER BY s.entry ASC LIMIT ?4",
        )
        .map_err(sqlite(OPERATION))?;
    let namespace = access.namespace.as_str();
    let scope = access.scope.as_str();
    let mut answers = Vec::with_capacity(ids.len());
    for id in ids {
        let entry: Option<i64> = place
            .query_row(rusqlite::params![namespace, id.as_str(), scope], |row| {
                row.get(0)
            })
            .optional()
            .map_err(sqlite(OPERATION))?;
        let Some(entry) = entry else {
            answers.push(WrittenNeighbours::default());
            continue;
        };
        let side = |statement: &mut rusqlite::CachedStatement<'_>| {
            statement
                .query_map(
                    rusqlite::params![namespace, scope, entry, reach as i64],
                    |row| row.get::<_, String>(0),
                )
                .map_err(sqlite(OPERATION))?
                .map(|id| decode_document_id(&id.map_err(sqlite(OPERATION))?))
                .collect::<Result<Vec<_>, MemoryError>>()
        };
        answers.push(WrittenNeighbours {
            before: side(&mut previous)?,
            after: side(&mut next)?,
        });
    }
    Ok(answers)
}
