//! The row codecs of [`memory_core::storage`], as this crate stores them, and what full-text search
//! indexes of a document.
//!
//! As in memory-sqlite, bodies are `serde_json` text, stored in `TEXT` columns rather than `jsonb`,
//! which would reorder keys and refuse `\u0000`.

use memory_core::storage::DocumentColumns;
use memory_core::{MemoryDocument, MemoryError};
use tokio_postgres::Row;

pub(crate) use memory_core::storage::{
    decode_key, decode_receipt, decode_revision, decode_sequence, encode,
};

use crate::error::corrupt;

/// The columns selected for a document row, in this order.
pub(crate) const DOCUMENT_COLUMNS: &str = "namespace, id, revision, withdrawn, locator, body";

/// Parses a document row (selected with [`DOCUMENT_COLUMNS`]) and checks the body against its columns.
pub(crate) fn decode_document(row: &Row) -> Result<MemoryDocument, MemoryError> {
    let unreadable = |_| corrupt("stored document row has an unreadable column");
    DocumentColumns {
        namespace: row.try_get(0).map_err(unreadable)?,
        id: row.try_get(1).map_err(unreadable)?,
        revision: row.try_get(2).map_err(unreadable)?,
        withdrawn: row.try_get(3).map_err(unreadable)?,
        locator: row.try_get(4).map_err(unreadable)?,
        body: row.try_get(5).map_err(unreadable)?,
    }
    .decode()
}

/// Most UTF-8 bytes of a document's text (and, apart, of its speakers) that go into its full-text
/// vector. PostgreSQL refuses a `tsvector` over 1 MiB; 128 KiB of text stays below that whatever the
/// words, so a large document is stored whole and searchable by its first 128 KiB.
pub const MAX_INDEXED_TEXT_BYTES: usize = 131_072;

/// The text that is indexed: at most [`MAX_INDEXED_TEXT_BYTES`], cut at a character boundary, with
/// U+0000 (which PostgreSQL text cannot hold) read as a space.
pub(crate) fn indexed_text(text: &str) -> String {
    let mut end = text.len().min(MAX_INDEXED_TEXT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].replace('\0', " ")
}

/// The speakers of a document's attributions, deduplicated, one per line, as indexed.
pub(crate) fn speakers(document: &MemoryDocument) -> String {
    indexed_text(&memory_core::storage::speakers(document))
}
