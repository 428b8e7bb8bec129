//! Encoding of documents and receipts into rows, and the validation of every row read back.
//!
//! As in memory-sqlite, bodies are `serde_json` text (not canonical JSON, which would turn `5.0` into
//! `5`), stored in `TEXT` columns rather than `jsonb`, which would reorder keys and refuse `\u0000`.
//! Every value read back is parsed with the model's validating deserializers and checked against the
//! row's key columns; any disagreement is [`MemoryError::Corrupt`], never a panic.

use memory_core::{
    ChangeSequence, DocumentId, MemoryDocument, MemoryError, MemoryKey, MemoryReceipt,
    NamespaceAddress, Revision,
};
use tokio_postgres::Row;

use crate::error::corrupt;

/// Serializes a document or receipt body.
pub(crate) fn encode<T: serde::Serialize>(value: &T) -> Result<String, MemoryError> {
    serde_json::to_string(value)
        .map_err(|error| MemoryError::invalid("document", error.to_string()))
}

/// The columns selected for a document row, in this order.
pub(crate) const DOCUMENT_COLUMNS: &str = "namespace, id, revision, withdrawn, locator, body";

/// Parses a document row (selected with [`DOCUMENT_COLUMNS`]) and checks the body against its columns.
pub(crate) fn decode_document(row: &Row) -> Result<MemoryDocument, MemoryError> {
    let column = |index: usize| -> Result<String, MemoryError> {
        row.try_get::<_, String>(index)
            .map_err(|_| corrupt("stored document row has an unreadable column"))
    };
    let (namespace, id, revision, locator, body) =
        (column(0)?, column(1)?, column(2)?, column(4)?, column(5)?);
    let withdrawn: bool = row
        .try_get(3)
        .map_err(|_| corrupt("stored document row has an unreadable column"))?;
    let document: MemoryDocument =
        serde_json::from_str(&body).map_err(|_| corrupt("stored document does not parse"))?;
    if document.key.namespace.as_str() != namespace || document.key.id.as_str() != id {
        return Err(corrupt("stored document is filed under another key"));
    }
    if document.revision.as_str() != revision {
        return Err(corrupt("stored document revision disagrees with its row"));
    }
    if document.withdrawn.is_some() != withdrawn {
        return Err(corrupt(
            "stored document withdrawal flag disagrees with its row",
        ));
    }
    if document.locator != locator {
        return Err(corrupt("stored document locator disagrees with its row"));
    }
    Ok(document)
}

/// Parses a stored receipt and checks it against the slot it was found in.
pub(crate) fn decode_receipt(
    body: &str,
    namespace: &NamespaceAddress,
    operation_id: &str,
) -> Result<MemoryReceipt, MemoryError> {
    let receipt: MemoryReceipt =
        serde_json::from_str(body).map_err(|_| corrupt("stored receipt does not parse"))?;
    if receipt.document.key.namespace != *namespace || receipt.operation_id.as_str() != operation_id
    {
        return Err(corrupt("stored receipt is filed under another operation"));
    }
    Ok(receipt)
}

/// Rebuilds a key from stored columns.
pub(crate) fn decode_key(namespace: &str, id: &str) -> Result<MemoryKey, MemoryError> {
    Ok(MemoryKey {
        namespace: NamespaceAddress::parse(namespace)
            .map_err(|_| corrupt("stored namespace address is invalid"))?,
        id: DocumentId::new(id).map_err(|_| corrupt("stored document id is invalid"))?,
    })
}

/// Rebuilds a revision from a stored column.
pub(crate) fn decode_revision(revision: &str) -> Result<Revision, MemoryError> {
    Revision::new(revision).map_err(|_| corrupt("stored revision is invalid"))
}

/// Rebuilds a change sequence from a stored column.
pub(crate) fn decode_sequence(sequence: i64) -> Result<ChangeSequence, MemoryError> {
    u64::try_from(sequence)
        .map(ChangeSequence)
        .map_err(|_| corrupt("stored change sequence is negative"))
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

/// The speakers of a document's attributions, deduplicated, one per line.
pub(crate) fn speakers(document: &MemoryDocument) -> String {
    let mut seen = std::collections::HashSet::new();
    let names: Vec<&str> = document
        .content
        .attributions
        .iter()
        .map(|attribution| attribution.speaker.as_str())
        .filter(|speaker| seen.insert(*speaker))
        .collect();
    indexed_text(&names.join("\n"))
}
