//! Keys, scopes, access, content, attributions and documents (SPEC §2.2).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::MemoryError;
use crate::ids::{DocumentId, Revision};
use crate::namespace::NamespaceAddress;

/// Epoch milliseconds.
pub type EpochMillis = i64;

/// A document's address: namespace plus id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MemoryKey {
    /// The namespace's canonical address.
    pub namespace: NamespaceAddress,
    /// The document id within the namespace.
    pub id: DocumentId,
}

/// A scope name. A document lists the scopes allowed to recall it; no scope is granted by default.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct MemoryScope(String);

impl MemoryScope {
    /// Most UTF-8 bytes in a scope name.
    pub const MAX_BYTES: usize = 256;

    /// Validates a scope name: 1 to 256 bytes, no control characters.
    pub fn new(value: impl Into<String>) -> Result<Self, MemoryError> {
        let value = value.into();
        if value.is_empty() {
            return Err(MemoryError::invalid("scope", "must not be empty"));
        }
        if value.len() > Self::MAX_BYTES {
            return Err(MemoryError::TooLarge {
                limit: "scope bytes",
                max: Self::MAX_BYTES as u64,
                actual: value.len() as u64,
            });
        }
        if value.chars().any(char::is_control) {
            return Err(MemoryError::invalid(
                "scope",
                "must not contain control characters",
            ));
        }
        Ok(Self(value))
    }

    /// The scope's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for MemoryScope {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        Self::new(value).map_err(serde::de::Error::custom)
    }
}

/// Who may read: one namespace, through one scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MemoryAccess {
    /// The namespace being read.
    pub namespace: NamespaceAddress,
    /// The scope the reader holds.
    pub scope: MemoryScope,
}

/// Where a remembered statement came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryAttribution {
    /// The id of the originating record (for example a thread record).
    pub origin_id: String,
    /// Who said it.
    pub speaker: String,
    /// Who else witnessed it.
    pub observers: Vec<String>,
    /// Where in the origin it sits.
    pub locator: String,
    /// When it was said, in epoch milliseconds; `None` when unknown. Recorded and extracted times never
    /// stand in for it.
    pub activity_at: Option<EpochMillis>,
    /// How the statement was taken (for example `stated`, `inferred`, `corrected`).
    pub interpretation: String,
}

/// The content of a memory document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryContent {
    /// The remembered text.
    pub text: String,
    /// Its provenance.
    pub attributions: Vec<MemoryAttribution>,
    /// Application metadata; equality ignores member order.
    pub metadata: Map<String, Value>,
    /// When the memory was recorded, epoch milliseconds.
    pub recorded_at: EpochMillis,
    /// When it was extracted, epoch milliseconds.
    pub extracted_at: EpochMillis,
}

impl MemoryContent {
    /// Content holding only text, with no attribution or metadata; handy for tests and examples.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            attributions: Vec::new(),
            metadata: Map::new(),
            recorded_at: 0,
            extracted_at: 0,
        }
    }

    /// The empty content a withdrawal tombstone carries: withdrawn text is not kept in the current row.
    pub fn tombstone() -> Self {
        Self::text("")
    }
}

/// Why a document was withdrawn, and who asked: the tombstone's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Withdrawal {
    /// The reason given by the withdrawing write.
    pub reason: String,
    /// Who withdrew it, as the door that took the command named the caller ([`MemoryWrite::Withdraw`]'s
    /// `by`); `None` for tombstones written before it was kept, or by a caller that named no one.
    /// Absent from the stored JSON while `None`, so older tombstones read back unchanged.
    ///
    /// [`MemoryWrite::Withdraw`]: crate::write::MemoryWrite::Withdraw
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A stored memory document at one revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryDocument {
    /// Its key.
    pub key: MemoryKey,
    /// Its revision.
    pub revision: Revision,
    /// The revision it replaced; `None` for the first.
    pub predecessor: Option<Revision>,
    /// Where the document came from, as the writer named it.
    pub locator: String,
    /// Its content (empty once withdrawn).
    pub content: MemoryContent,
    /// The scopes allowed to recall it; an empty list grants none.
    pub scopes: Vec<MemoryScope>,
    /// When this revision was written, epoch milliseconds.
    pub modified_at: EpochMillis,
    /// Set once withdrawn; withdrawal is terminal.
    pub withdrawn: Option<Withdrawal>,
}

impl MemoryDocument {
    /// Whether `access` may recall this document: same namespace, a listed scope, not withdrawn.
    pub fn is_visible_to(&self, access: &MemoryAccess) -> bool {
        self.withdrawn.is_none()
            && self.key.namespace == access.namespace
            && self.scopes.iter().any(|scope| scope == &access.scope)
    }
}
