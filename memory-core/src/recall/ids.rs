//! Identifier newtypes of recall: source ids, passage ids, authorities, and the positional citation and
//! authority labels that the rendered text uses instead of private values.

use std::fmt;
use std::num::NonZeroU32;

use serde::{Deserialize, Serialize};

use crate::error::MemoryError;

/// A recall identifier refused with [`MemoryError`]; Debug and Display are written below, per id.
macro_rules! recall_id {
    ($(#[$meta:meta])* $name:ident, $field:literal, $max:expr) => {
        $crate::ids::validated_string_id!($(#[$meta])* $name, $field, $max, MemoryError);
    };
}

recall_id!(
    /// The id of a source: a recall declaration's id, or the id a passage gives its authoritative source
    /// (for revalidated memory, the document id). Ids are local to an authority.
    SourceId,
    "source id",
    1_024
);
recall_id!(
    /// The id of a passage within its source at one revision (a whole document, or one excerpt of it).
    PassageId,
    "passage id",
    1_024
);
recall_id!(
    /// An identity boundary for source ids: passages of one authority with the same source id and
    /// revision are the same evidence. It may hold private values (revalidation uses the namespace
    /// address), so its `Debug` form is redacted and it never appears in rendered text.
    Authority,
    "authority",
    8_192
);

impl From<&crate::ids::DocumentId> for SourceId {
    fn from(id: &crate::ids::DocumentId) -> Self {
        // Both are 1 to 1,024 bytes without control characters, so the document id is already valid.
        Self(id.as_str().into())
    }
}

impl From<&crate::ids::DocumentId> for PassageId {
    fn from(id: &crate::ids::DocumentId) -> Self {
        Self(id.as_str().into())
    }
}

impl From<&SourceId> for Authority {
    fn from(id: &SourceId) -> Self {
        Self(id.0.clone())
    }
}

impl From<&crate::namespace::NamespaceAddress> for Authority {
    fn from(address: &crate::namespace::NamespaceAddress) -> Self {
        // Addresses are at most 4,096 bytes of JSON without raw control characters.
        Self(address.as_str().into())
    }
}

impl fmt::Debug for SourceId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "SourceId({:?})", self.0)
    }
}

impl fmt::Debug for PassageId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "PassageId({:?})", self.0)
    }
}

impl fmt::Debug for Authority {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "Authority(<{} bytes>)", self.0.len())
    }
}

impl fmt::Display for SourceId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl fmt::Display for PassageId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// A positional citation id, rendered `memory:N`; local to one recall result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Citation(NonZeroU32);

impl Citation {
    pub(crate) fn from_position(position: usize) -> Self {
        Self(nonzero_from_position(position))
    }

    /// The citation's number N.
    pub fn number(self) -> u32 {
        self.0.get()
    }
}

impl fmt::Display for Citation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "memory:{}", self.0)
    }
}

/// A positional authority label, rendered `memory-authority:N`; local to one recall result. Different
/// labels say only that the authorities differ, not that the evidence is independent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AuthorityLabel(NonZeroU32);

impl AuthorityLabel {
    pub(crate) fn from_position(position: usize) -> Self {
        Self(nonzero_from_position(position))
    }

    /// The label's number N.
    pub fn number(self) -> u32 {
        self.0.get()
    }
}

impl fmt::Display for AuthorityLabel {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "memory-authority:{}", self.0)
    }
}

/// 1-based numbering of a 0-based position. Positions are bounded by `max_items`, itself a `u32`, so the
/// saturation never happens in practice; it only keeps the conversion total.
fn nonzero_from_position(position: usize) -> NonZeroU32 {
    let number = u32::try_from(position)
        .unwrap_or(u32::MAX - 1)
        .saturating_add(1);
    NonZeroU32::new(number).unwrap_or(NonZeroU32::MIN)
}
