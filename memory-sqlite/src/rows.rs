//! The row codecs of [`memory_core::storage`], as this crate stores them: SQLite has no boolean, so the
//! withdrawal flag is an integer that must be 0 or 1.

use memory_core::storage::{DocumentColumns, withdrawal_disagrees};
use memory_core::{MemoryDocument, MemoryError};

pub(crate) use memory_core::storage::{
    decode_key, decode_receipt, decode_revision, decode_sequence, encode, speakers,
};

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
        let withdrawn = match self.withdrawn {
            0 => false,
            1 => true,
            _ => return Err(withdrawal_disagrees()),
        };
        DocumentColumns {
            namespace: self.namespace,
            id: self.id,
            revision: self.revision,
            withdrawn,
            locator: self.locator,
            body: self.body,
        }
        .decode()
    }
}
