//! Passages: one piece of recalled evidence pointing back at its authoritative source (SPEC §2.3).

use serde::{Deserialize, Serialize};

use crate::document::{MemoryContent, MemoryDocument};
use crate::ids::Revision;
use crate::recall::ids::{Authority, PassageId, SourceId};

/// The passage format version. Only version 1 exists; anything else is refused when decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PassageVersion;

impl PassageVersion {
    /// The number written on the wire.
    pub const NUMBER: u64 = 1;
}

impl Serialize for PassageVersion {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(Self::NUMBER)
    }
}

impl<'de> Deserialize<'de> for PassageVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let number = u64::deserialize(deserializer)?;
        if number == Self::NUMBER {
            Ok(Self)
        } else {
            Err(serde::de::Error::custom(format_args!(
                "unsupported passage version {number}"
            )))
        }
    }
}

/// Where a passage comes from: the source's id (local to the passage's authority), its locator, and the
/// revision the passage was taken from when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PassageSource {
    /// The source's id within its authority.
    pub id: SourceId,
    /// Where the source lives, as its owner names it.
    pub locator: String,
    /// The source revision the passage was taken from; `None` when the source has no known revision.
    pub revision: Option<Revision>,
}

/// One passage of recalled evidence.
///
/// Equality compares every field; JSON metadata compares without regard to object member order (nested
/// objects too) and with regard to array order, which is what recall's duplicate and conflict checks use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryPassage {
    /// Always 1.
    pub version: PassageVersion,
    /// The authoritative source.
    pub source: PassageSource,
    /// The passage's id within its source.
    pub passage_id: PassageId,
    /// Text, attributions and metadata.
    pub content: MemoryContent,
    /// The identity boundary of `source.id`; `None` means the declaring recall source's id.
    pub authority: Option<Authority>,
    /// The source (same authority) of a passage that corrects this one, derived at read time
    /// ([`crate::recall::corrections`]): the rendering labels this passage "corrected by" that
    /// passage's citation. Absent from the encoding when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected_by: Option<SourceId>,
}

impl MemoryPassage {
    /// A passage of `document` as it is now, bound to `authority`: the current revision and locator, the
    /// current attribution and metadata (never a candidate's), and `text` (the whole current text or an
    /// excerpt the caller verified against it) under `passage_id`. Every revalidating source builds its
    /// passages here, so none can carry stale provenance.
    pub fn of_current_document(
        document: &MemoryDocument,
        passage_id: PassageId,
        text: String,
        authority: &Authority,
    ) -> Self {
        Self {
            version: PassageVersion,
            source: PassageSource {
                id: SourceId::from(&document.key.id),
                locator: document.locator.clone(),
                revision: Some(document.revision.clone()),
            },
            passage_id,
            content: MemoryContent {
                text,
                attributions: document.content.attributions.clone(),
                metadata: document.content.metadata.clone(),
                recorded_at: document.content.recorded_at,
                extracted_at: document.content.extracted_at,
            },
            authority: Some(authority.clone()),
            corrected_by: None,
        }
    }

    /// A version 1 passage without an explicit authority.
    pub fn new(source: PassageSource, passage_id: PassageId, content: MemoryContent) -> Self {
        Self {
            version: PassageVersion,
            source,
            passage_id,
            content,
            authority: None,
            corrected_by: None,
        }
    }

    /// The same passage with an explicit authority.
    #[must_use]
    pub fn with_authority(mut self, authority: Authority) -> Self {
        self.authority = Some(authority);
        self
    }

    /// The size of this passage's compact UTF-8 JSON encoding, measured without building it.
    pub fn encoded_len(&self) -> Result<u64, serde_json::Error> {
        let mut counter = ByteCounter(0);
        serde_json::to_writer(&mut counter, self)?;
        Ok(counter.0)
    }
}

struct ByteCounter(u64);

impl std::io::Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(bytes.len() as u64);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
