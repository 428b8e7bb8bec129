//! Keeping the index in step with the documents, inside the memory store's write transaction: a
//! document is indexed when it becomes current and removed when it is replaced or withdrawn.

use memory_core::MemoryError;
use rusqlite::{Connection, OptionalExtension};

use super::tables::{TERM_ID_BYTES, decode_term_ids};
use super::tokenizer::tokenize_document;
use crate::error::sqlite;
use crate::transaction::TxError;

/// A failure while writing the index: SQLite's (the write transaction classifies it) or a stored row
/// that does not decode.
#[derive(Debug)]
pub(crate) enum IndexError {
    Sqlite(rusqlite::Error),
    Corrupt(MemoryError),
}

impl From<rusqlite::Error> for IndexError {
    fn from(error: rusqlite::Error) -> Self {
        Self::Sqlite(error)
    }
}

impl From<IndexError> for TxError {
    fn from(error: IndexError) -> Self {
        match error {
            IndexError::Sqlite(error) => Self::Sqlite(error),
            IndexError::Corrupt(error) => Self::Memory(error),
        }
    }
}

impl IndexError {
    pub(crate) fn into_memory_error(self, operation: &'static str) -> MemoryError {
        match self {
            Self::Sqlite(error) => sqlite(operation)(error),
            Self::Corrupt(error) => error,
        }
    }
}

/// Indexes a current, non-withdrawn document under its namespace, inside the caller's write
/// transaction. The entry must not be indexed already ([`remove_document`] first).
pub(crate) fn index_document(
    connection: &Connection,
    entry: i64,
    namespace: &str,
    text: &str,
    speakers: &str,
) -> Result<(), IndexError> {
    let terms = tokenize_document(text, speakers)?;
    let namespace_id: i64 = connection
        .prepare_cached(
            "INSERT INTO memory_lexical_namespaces (namespace, documents, tokens) VALUES (?1, 1, ?2) \
             ON CONFLICT (namespace) DO UPDATE SET documents = documents + 1, \
             tokens = tokens + excluded.tokens \
             RETURNING id",
        )?
        .query_row(rusqlite::params![namespace, terms.tokens], |row| row.get(0))?;
    let mut find_term =
        connection.prepare_cached("SELECT id FROM memory_lexical_terms WHERE term = ?1")?;
    let mut add_term = connection
        .prepare_cached("INSERT INTO memory_lexical_terms (term) VALUES (?1) RETURNING id")?;
    let mut add_posting = connection.prepare_cached(
        "INSERT INTO memory_lexical_postings \
         (namespace_id, term_id, entry, text_count, speakers_count, tokens) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut term_ids = Vec::with_capacity(terms.terms.len() * TERM_ID_BYTES);
    for (term, text_count, speakers_count) in &terms.terms {
        let term_id: i64 = match find_term.query_row([term], |row| row.get(0)).optional()? {
            Some(id) => id,
            None => add_term.query_row([term], |row| row.get(0))?,
        };
        add_posting.execute(rusqlite::params![
            namespace_id,
            term_id,
            entry,
            text_count,
            speakers_count,
            terms.tokens
        ])?;
        term_ids.extend_from_slice(&term_id.to_le_bytes());
    }
    connection
        .prepare_cached(
            "INSERT INTO memory_lexical_documents (entry, namespace_id, tokens, terms) \
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(rusqlite::params![
            entry,
            namespace_id,
            terms.tokens,
            term_ids
        ])?;
    Ok(())
}

/// Removes a document's postings and takes it out of its namespace's counts, inside the caller's write
/// transaction; nothing to do when it is not indexed. Its terms that no other document's postings
/// use leave the term dictionary too (the postings' index by term finds another user in one seek),
/// so the dictionary holds only words some current document says: a withdrawn or replaced
/// revision's words are not kept readable in the index.
pub(crate) fn remove_document(connection: &Connection, entry: i64) -> Result<(), IndexError> {
    let term_ids = remove_postings(connection, entry)?;
    let mut drop_term = connection.prepare_cached(
        "DELETE FROM memory_lexical_terms WHERE id = ?1 \
         AND NOT EXISTS (SELECT 1 FROM memory_lexical_postings WHERE term_id = ?1)",
    )?;
    for term_id in term_ids {
        drop_term.execute([term_id])?;
    }
    Ok(())
}

/// Removes the postings and counts of `entry`, answering the ids of the terms it used.
fn remove_postings(connection: &Connection, entry: i64) -> Result<Vec<i64>, IndexError> {
    let indexed: Option<(i64, i64, Vec<u8>)> = connection
        .prepare_cached(
            "SELECT namespace_id, tokens, terms FROM memory_lexical_documents WHERE entry = ?1",
        )?
        .query_row([entry], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .optional()?;
    let Some((namespace_id, tokens, term_ids)) = indexed else {
        return Ok(Vec::new());
    };
    let term_ids = decode_term_ids(&term_ids).map_err(IndexError::Corrupt)?;
    let mut delete = connection.prepare_cached(
        "DELETE FROM memory_lexical_postings \
         WHERE namespace_id = ?1 AND term_id = ?2 AND entry = ?3",
    )?;
    for &term_id in &term_ids {
        delete.execute([namespace_id, term_id, entry])?;
    }
    connection
        .prepare_cached("DELETE FROM memory_lexical_documents WHERE entry = ?1")?
        .execute([entry])?;
    connection
        .prepare_cached(
            "UPDATE memory_lexical_namespaces SET documents = documents - 1, tokens = tokens - ?2 \
             WHERE id = ?1",
        )?
        .execute([namespace_id, tokens])?;
    Ok(term_ids)
}
