//! Files from before the version table: each store created its own tables with `IF NOT EXISTS` and
//! kept its own marker (the memory store's format in `memory_meta`, the activity stores' in
//! `activity_formats`, none for the vector store), so a file may hold any mix of stores, each as the
//! build that last opened it left it. Such a file is read step by step: which of migrations 1 to 10
//! it already holds, by the markers where there were markers and by the tables where there were not.
//! The steps touch separate tables and each depends only on earlier ones, so applying just the
//! missing ones, in order, gives the file every step.

use rusqlite::{Connection, OptionalExtension};

use super::{SchemaError, object_exists};
use crate::error::StoreFailure;

/// The memory store's format marker: 1 with `memory_fts`, 2 with the lexical index by namespace.
const MEMORY_FORMAT_KEY: &str = "memory_store_format";

/// The versions of the steps a file without a version table already holds, ascending; empty for a
/// fresh or foreign file. A marker of a format no build wrote is refused rather than guessed at.
pub(super) fn recognise(connection: &Connection) -> Result<Vec<i64>, SchemaError> {
    let memory_format = marker(
        connection,
        "memory_meta",
        "SELECT value FROM memory_meta WHERE key = ?1",
        MEMORY_FORMAT_KEY,
    )?;
    let activity = |component: &'static str| {
        marker(
            connection,
            "activity_formats",
            "SELECT format FROM activity_formats WHERE component = ?1",
            component,
        )
    };
    let thread_log = activity("thread_log")?;
    let progress = activity("activity_progress")?;
    let remembering = activity("remembering")?;
    let pending_marker = activity("thread_log.pending")?;
    let tables = |names: &[&str]| -> Result<bool, SchemaError> {
        for name in names {
            if !object_exists(connection, "table", name)? {
                return Ok(false);
            }
        }
        Ok(true)
    };

    let mut held = Vec::new();
    let mut hold = |version: i64, present: bool| {
        if present {
            held.push(version);
        }
    };
    hold(1, known("memory_store_format", memory_format, &[1, 2])?);
    hold(2, memory_format == Some(2));
    hold(
        3,
        object_exists(connection, "index", "memory_document_scopes_by_scope")?,
    );
    hold(4, known("thread_log", thread_log, &[1])?);
    hold(5, known("activity_progress", progress, &[1])?);
    hold(6, known("remembering", remembering, &[1])?);
    hold(
        7,
        tables(&["semantic_sources", "semantic_chunks", "semantic_positions"])?,
    );
    hold(8, tables(&["semantic_unindexed", "semantic_graphs"])?);
    // The marker was written in the statement batch that created these tables and backfilled them.
    hold(9, known("thread_log.pending", pending_marker, &[1])?);
    hold(10, tables(&["extraction_notes", "extraction_totals"])?);
    Ok(held)
}

/// One marker row, or `None` when its table or row is missing.
fn marker(
    connection: &Connection,
    table: &str,
    sql: &str,
    key: &str,
) -> Result<Option<i64>, SchemaError> {
    if !object_exists(connection, "table", table)? {
        return Ok(None);
    }
    connection
        .query_row(sql, [key], |row| row.get::<_, i64>(0))
        .optional()
        .map_err(|error| SchemaError::Sqlite {
            operation: "read schema",
            error,
        })
}

/// Whether a marker is present, refusing a value that no build before the version table wrote.
fn known(marker: &'static str, value: Option<i64>, written: &[i64]) -> Result<bool, SchemaError> {
    match value {
        None => Ok(false),
        Some(found) if written.contains(&found) => Ok(true),
        Some(found) => Err(SchemaError::Refused(StoreFailure::UnknownLegacyFormat {
            marker,
            found,
        })),
    }
}
