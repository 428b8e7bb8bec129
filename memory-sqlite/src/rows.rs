//! Encoding of documents and receipts into rows, and the validation of every row read back.
//!
//! Bodies are stored as `serde_json` text, not canonical JSON: canonical JSON writes the float `5.0` as
//! `5`, which would read back as an integer and no longer compare equal to what was written. Every value
//! read back is parsed with the model's own validating deserializers and checked against the row's key
//! columns; any disagreement is [`MemoryError::Corrupt`], never a panic.

use memory_core::{
    ChangeSequence, DocumentId, MemoryDocument, MemoryError, MemoryKey, MemoryReceipt,
    NamespaceAddress, Revision,
};

use crate::error::corrupt;

/// Serializes a document or receipt body.
pub(crate) fn encode<T: serde::Serialize>(value: &T) -> Result<String, MemoryError> {
    serde_json::to_string(value)
        .map_err(|error| MemoryError::invalid("document", error.to_string()))
}

/// The narrow columns of a `memory_documents` row, next to its body.
pub(crate) struct DocumentRow {
    pub namespace: String,
    pub id: String,
    pub revision: String,
    pub withdrawn: i64,
    pub locator: String,
    pub body: String,
}

impl DocumentRow {
    /// Parses the body and checks it against the row's columns.
    pub(crate) fn decode(self) -> Result<MemoryDocument, MemoryError> {
        let document: MemoryDocument = serde_json::from_str(&self.body)
            .map_err(|_| corrupt("stored document does not parse"))?;
        if document.key.namespace.as_str() != self.namespace || document.key.id.as_str() != self.id
        {
            return Err(corrupt("stored document is filed under another key"));
        }
        if document.revision.as_str() != self.revision {
            return Err(corrupt("stored document revision disagrees with its row"));
        }
        if i64::from(document.withdrawn.is_some()) != self.withdrawn {
            return Err(corrupt(
                "stored document withdrawal flag disagrees with its row",
            ));
        }
        if document.locator != self.locator {
            return Err(corrupt("stored document locator disagrees with its row"));
        }
        Ok(document)
    }
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

/// The speakers of a document's attributions, deduplicated, one per line, for the FTS `speakers` column.
pub(crate) fn speakers(document: &MemoryDocument) -> String {
    let mut seen = std::collections::HashSet::new();
    let names: Vec<&str> = document
        .content
        .attributions
        .iter()
        .map(|attribution| attribution.speaker.as_str())
        .filter(|speaker| seen.insert(*speaker))
        .collect();
    names.join("\n")
}
