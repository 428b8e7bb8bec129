//! What every document store shares below the ports: call limits, the types of its inspection
//! answers, and the codecs of its rows.
//!
//! Bodies are stored as `serde_json` text, not canonical JSON: canonical JSON writes the float `5.0` as
//! `5`, which would read back as an integer and no longer compare equal to what was written. Every value
//! read back is parsed with the model's own validating deserializers and checked against the row's key
//! columns; any disagreement is [`crate::StoreFault::Corrupt`], never a panic.

use crate::StoreFault;
use crate::document::{MemoryDocument, MemoryKey};
use crate::error::MemoryError;
use crate::ids::{DocumentId, Revision};
use crate::namespace::NamespaceAddress;
use crate::ports::ChangeSequence;
use crate::write::{MemoryReceipt, MemoryWrite, PreparedWrite, WriteOutcome};

/// Most writes in one batch.
pub const MAX_BATCH_WRITES: usize = 10_000;
/// Most keys in one [`crate::MemoryReader::read_many`] call.
pub const MAX_READ_MANY_KEYS: usize = 10_000;
/// Most changes returned by one [`crate::ChangeFeed::changes_since`] call; larger limits are clamped.
pub const MAX_CHANGES_PER_CALL: usize = 10_000;
/// Most UTF-8 bytes in a lexical query.
pub const MAX_QUERY_BYTES: usize = 65_536;
/// Most distinct words of a query that are searched for.
pub const MAX_QUERY_TERMS: usize = 64;
/// Most hits one lexical search returns; larger limits are clamped.
pub const MAX_SEARCH_HITS: usize = 1_000;
/// Most ids in one [`crate::LexicalSearch::written_neighbours`] call: a hybrid recall's candidates
/// from both of its sides.
pub const MAX_NEIGHBOUR_IDS: usize = 2_048;
/// Largest `reach` of one [`crate::LexicalSearch::written_neighbours`] call.
pub const MAX_NEIGHBOUR_REACH: usize = 8;

/// Refuses a [`crate::LexicalSearch::written_neighbours`] call of more than [`MAX_NEIGHBOUR_IDS`]
/// ids or a reach above [`MAX_NEIGHBOUR_REACH`], before any work; every store calls it first.
pub fn check_neighbour_request(ids: &[DocumentId], reach: usize) -> Result<(), MemoryError> {
    if ids.len() > MAX_NEIGHBOUR_IDS {
        return Err(MemoryError::TooLarge {
            limit: "written_neighbours ids",
            max: MAX_NEIGHBOUR_IDS as u64,
            actual: ids.len() as u64,
        });
    }
    if reach > MAX_NEIGHBOUR_REACH {
        return Err(MemoryError::TooLarge {
            limit: "written_neighbours reach",
            max: MAX_NEIGHBOUR_REACH as u64,
            actual: reach as u64,
        });
    }
    Ok(())
}

/// One committed revision of a key and the revision it replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionLink {
    /// The revision.
    pub revision: Revision,
    /// The revision it replaced; `None` for the first.
    pub predecessor: Option<Revision>,
    /// The change sequence it was committed at.
    pub sequence: ChangeSequence,
}

/// What a store's consistency check counted in a consistent store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConsistencyReport {
    /// Current rows (withdrawn tombstones included).
    pub documents: u64,
    /// Stored receipts, one per committed write.
    pub receipts: u64,
    /// Committed revisions.
    pub revisions: u64,
    /// Entries of the change sequence.
    pub changes: u64,
}

/// A stored row that does not parse or contradicts itself.
pub fn corrupt(what: impl Into<String>) -> MemoryError {
    MemoryError::Store(StoreFault::corrupt(what))
}

/// Serializes a document or receipt body.
pub fn encode<T: serde::Serialize>(value: &T) -> Result<String, MemoryError> {
    serde_json::to_string(value)
        .map_err(|error| MemoryError::invalid("document", error.to_string()))
}

/// The narrow columns of a document row, next to its body.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct DocumentColumns {
    pub namespace: String,
    pub id: String,
    pub revision: String,
    pub withdrawn: bool,
    pub locator: String,
    pub body: String,
}

impl DocumentColumns {
    /// Parses the body and checks it against the row's columns.
    pub fn decode(self) -> Result<MemoryDocument, MemoryError> {
        let document: MemoryDocument = serde_json::from_str(&self.body)
            .map_err(|_| corrupt("stored document does not parse"))?;
        if document.key.namespace.as_str() != self.namespace || document.key.id.as_str() != self.id
        {
            return Err(corrupt("stored document is filed under another key"));
        }
        if document.revision.as_str() != self.revision {
            return Err(corrupt("stored document revision disagrees with its row"));
        }
        if document.withdrawn.is_some() != self.withdrawn {
            return Err(withdrawal_disagrees());
        }
        if document.locator != self.locator {
            return Err(corrupt("stored document locator disagrees with its row"));
        }
        Ok(document)
    }
}

/// The refusal of a withdrawal flag that disagrees with the body (or is not a flag at all).
pub fn withdrawal_disagrees() -> MemoryError {
    corrupt("stored document withdrawal flag disagrees with its row")
}

/// Parses a stored receipt and checks it against the slot it was found in.
pub fn decode_receipt(
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
pub fn decode_key(namespace: &str, id: &str) -> Result<MemoryKey, MemoryError> {
    Ok(MemoryKey {
        namespace: NamespaceAddress::parse(namespace)
            .map_err(|_| corrupt("stored namespace address is invalid"))?,
        id: decode_document_id(id)?,
    })
}

/// Rebuilds a document id from a stored column.
pub fn decode_document_id(id: &str) -> Result<DocumentId, MemoryError> {
    DocumentId::new(id).map_err(|_| corrupt("stored document id is invalid"))
}

/// Rebuilds a revision from a stored column.
pub fn decode_revision(revision: &str) -> Result<Revision, MemoryError> {
    Revision::new(revision).map_err(|_| corrupt("stored revision is invalid"))
}

/// Rebuilds a change sequence from a stored column.
pub fn decode_sequence(sequence: i64) -> Result<ChangeSequence, MemoryError> {
    u64::try_from(sequence)
        .map(ChangeSequence::new)
        .map_err(|_| corrupt("stored change sequence is negative"))
}

/// The speakers of a document's attributions, deduplicated, one per line, for full-text search.
pub fn speakers(document: &MemoryDocument) -> String {
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

/// Rebuilds the key of a stored vector chunk (messages name the vector tables' columns).
pub fn decode_vector_key(namespace: &str, document_id: &str) -> Result<MemoryKey, MemoryError> {
    Ok(MemoryKey {
        namespace: NamespaceAddress::parse(namespace)
            .map_err(|_| corrupt("invalid stored namespace address"))?,
        id: DocumentId::new(document_id).map_err(|_| corrupt("invalid stored document id"))?,
    })
}

/// A vector as stored: its components as little-endian `f32`s.
pub fn encode_vector(vector: &[f32]) -> Vec<u8> {
    vector
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

/// Reads a stored vector of `dimensions` components; any other length is corrupt.
pub fn decode_vector(bytes: &[u8], dimensions: usize) -> Result<Vec<f32>, MemoryError> {
    if bytes.len() != dimensions.saturating_mul(4) {
        return Err(corrupt(format!(
            "stored vector has {} bytes, expected {}",
            bytes.len(),
            dimensions.saturating_mul(4)
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|quad| f32::from_le_bytes([quad[0], quad[1], quad[2], quad[3]]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_columns_that_disagree_are_corrupt() {
        assert!(matches!(
            decode_sequence(-1),
            Err(MemoryError::Store(StoreFault::Corrupt { .. }))
        ));
        assert_eq!(decode_sequence(4).expect("valid"), ChangeSequence::new(4));
        assert!(decode_key("not an address", "d").is_err());
        assert!(decode_revision("").is_err());
        let columns = DocumentColumns {
            namespace: String::new(),
            id: String::new(),
            revision: String::new(),
            withdrawn: false,
            locator: String::new(),
            body: "{".to_owned(),
        };
        assert!(matches!(
            columns.decode(),
            Err(MemoryError::Store(StoreFault::Corrupt { .. }))
        ));
    }

    #[test]
    fn vectors_round_trip_and_other_lengths_are_corrupt() {
        let vector = [0.5_f32, -1.0, 3.25];
        assert_eq!(
            decode_vector(&encode_vector(&vector), 3).expect("round trip"),
            vector
        );
        assert!(decode_vector(&encode_vector(&vector), 4).is_err());
    }
}

/// The answers of a batch whose valid writes went to one transaction: at each position, the write's
/// own refusal (it did not prepare) or the next of the transaction's outcomes. Every store's
/// `apply_batch` is [`prepare_batch`], its transaction over the prepared writes, then
/// [`BatchAnswers::splice`].
#[derive(Debug)]
pub struct BatchAnswers(Vec<Option<Result<WriteOutcome, MemoryError>>>);

/// Checks the batch's size ([`MAX_BATCH_WRITES`]) before any work, then prepares each write
/// ([`PreparedWrite::prepare`], then the store's own `check`): the writes to run in one transaction,
/// in order, and the answers the refused ones already have.
pub fn prepare_batch(
    writes: Vec<MemoryWrite>,
    check: impl Fn(&PreparedWrite) -> Result<(), MemoryError>,
) -> Result<(Vec<PreparedWrite>, BatchAnswers), MemoryError> {
    if writes.len() > MAX_BATCH_WRITES {
        return Err(MemoryError::TooLarge {
            limit: "writes per batch",
            max: MAX_BATCH_WRITES as u64,
            actual: writes.len() as u64,
        });
    }
    let mut answers = Vec::with_capacity(writes.len());
    let mut prepared = Vec::with_capacity(writes.len());
    for write in writes {
        match PreparedWrite::prepare(write).and_then(|write| check(&write).map(|()| write)) {
            Ok(write) => {
                prepared.push(write);
                answers.push(None);
            }
            Err(refusal) => answers.push(Some(Err(refusal))),
        }
    }
    Ok((prepared, BatchAnswers(answers)))
}

impl BatchAnswers {
    /// One answer per write of the batch, in order, with `outcomes` (one per prepared write, in
    /// order) in the prepared writes' places. A missing outcome is a storage failure of that write.
    pub fn splice(
        self,
        outcomes: Vec<Result<WriteOutcome, MemoryError>>,
    ) -> Vec<Result<WriteOutcome, MemoryError>> {
        let mut outcomes = outcomes.into_iter();
        self.0
            .into_iter()
            .map(|answer| {
                answer.unwrap_or_else(|| {
                    outcomes.next().unwrap_or_else(|| {
                        Err(MemoryError::storage("write", "a write produced no outcome"))
                    })
                })
            })
            .collect()
    }
}
