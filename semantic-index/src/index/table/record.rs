//! What a table keeps of each source revision and of each row.
//!
//! A source's namespace, generation, document id and revision live in one allocation behind a
//! one-word pointer ([`SourceRecord`], a `triomphe::ThinArc`: a header and the id and revision
//! bytes in one block), shared by the source's rows and by every copy of the table. The public
//! [`SourceVersion`] is a reference-counted block plus a separate allocation for the id and one
//! for the revision: about 160 bytes a source at a million one-chunk sources (80 for the block, 32
//! for an 8-byte id, 48 for the store's 33-character revision), where the record takes 96 (the
//! id's length is the text's first two bytes rather than a header field, which keeps the block
//! within the allocator's 96-byte size class for such sources instead of its 112). A
//! search returns tens of hits, and each hit rebuilds its [`SourceVersion`] from the record
//! ([`RowMeta::chunk`]); nothing on the scan path allocates.
//!
//! A row ([`RowMeta`]) keeps its byte range in two `u32`s (56 bytes a row instead of
//! [`ChunkMeta`]'s 64): a chunk whose range does not fit is refused before anything changes
//! ([`RowMeta::check`]), though documents are bounded far below 4 GiB long before that.

use std::fmt;
use std::sync::Arc;

use memory_core::vectors::SourceGeneration;
use memory_core::{DocumentId, MemoryKey, NamespaceAddress, Revision};
use triomphe::ThinArc;

use crate::error::SemanticError;
use crate::index::{ChunkMeta, Ranked, SourceVersion};

/// The fixed part of a record. The bytes after it are the id's length (two bytes, little-endian),
/// the id's bytes, then the revision's.
#[derive(Debug)]
struct RecordHead {
    namespace: NamespaceAddress,
    generation: SourceGeneration,
}

/// Bytes of the id's length at the start of a record's text: an id is at most
/// [`DocumentId::MAX_BYTES`] (1,024) bytes.
const LENGTH_BYTES: usize = 2;

/// One source revision as a table holds it (module docs). Clones share the allocation.
#[derive(Clone)]
pub(crate) struct SourceRecord(ThinArc<RecordHead, u8>);

impl SourceRecord {
    /// `source` as a record whose namespace is `namespace` (the table's interned copy of
    /// `source.key.namespace`, equal to it).
    pub(crate) fn new(source: &SourceVersion, namespace: NamespaceAddress) -> Self {
        let (id, revision) = (source.key.id.as_str(), source.revision.as_str());
        let length = u16::try_from(id.len()).unwrap_or(u16::MAX);
        let mut text = Vec::with_capacity(LENGTH_BYTES + id.len() + revision.len());
        text.extend_from_slice(&length.to_le_bytes());
        text.extend_from_slice(id.as_bytes());
        text.extend_from_slice(revision.as_bytes());
        let head = RecordHead {
            namespace,
            generation: source.generation,
        };
        Self(ThinArc::from_header_and_slice(head, &text))
    }

    fn head(&self) -> &RecordHead {
        &self.0.header.header
    }

    /// Where the id's bytes end (and the revision's start) in the text.
    fn split(&self) -> usize {
        let text = &self.0.slice;
        let length = match text {
            [low, high, ..] => usize::from(u16::from_le_bytes([*low, *high])),
            _ => 0,
        };
        (LENGTH_BYTES + length).min(text.len())
    }

    /// Text `bytes` of the record as a `str`. The record's text is an id's bytes followed by a
    /// revision's, split at their boundary, so each part is whole UTF-8 and the fallback is never
    /// taken.
    fn text(bytes: &[u8]) -> &str {
        std::str::from_utf8(bytes).unwrap_or_default()
    }

    pub(crate) fn namespace(&self) -> &NamespaceAddress {
        &self.head().namespace
    }

    /// The document id's bytes: what a table's span maps hash and compare.
    pub(crate) fn id_bytes(&self) -> &[u8] {
        self.0
            .slice
            .get(LENGTH_BYTES..self.split())
            .unwrap_or_default()
    }

    pub(crate) fn id(&self) -> &str {
        Self::text(self.id_bytes())
    }

    pub(crate) fn revision(&self) -> &str {
        Self::text(self.0.slice.get(self.split()..).unwrap_or_default())
    }

    pub(crate) fn generation(&self) -> SourceGeneration {
        self.head().generation
    }

    /// Whether both are the same allocation (a source's rows share one record).
    pub(crate) fn same(&self, other: &Self) -> bool {
        std::ptr::eq(self.0.as_ptr(), other.0.as_ptr())
    }

    /// Whether this is a revision of the same source as `other`.
    pub(crate) fn same_key(&self, other: &Self) -> bool {
        self.same(other)
            || (self.id_bytes() == other.id_bytes() && self.namespace() == other.namespace())
    }

    /// The source as the index's public types hold it. The id and revision were validated when
    /// the record was made from a [`SourceVersion`], so validating them again cannot fail.
    pub(crate) fn version(&self) -> Result<SourceVersion, SemanticError> {
        Ok(SourceVersion {
            key: MemoryKey {
                namespace: self.namespace().clone(),
                id: DocumentId::new(self.id())?,
            },
            revision: Revision::new(self.revision())?,
            generation: self.generation(),
        })
    }
}

impl PartialEq for SourceRecord {
    fn eq(&self, other: &Self) -> bool {
        self.same(other)
            || (self.namespace() == other.namespace()
                && self.generation() == other.generation()
                && self.0.slice == other.0.slice)
    }
}

impl Eq for SourceRecord {}

impl fmt::Debug for SourceRecord {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("SourceRecord")
            .field("namespace", self.namespace())
            .field("id", &self.id())
            .field("revision", &self.revision())
            .field("generation", &self.generation())
            .finish()
    }
}

/// What a table knows about a row besides its vector: [`ChunkMeta`] with its source as a
/// [`SourceRecord`] and its byte range in `u32`s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowMeta {
    pub(crate) source: SourceRecord,
    pub(crate) ordinal: u32,
    pub(crate) start: u32,
    pub(crate) end: u32,
    pub(crate) excerpt_digest: [u8; 32],
}

impl RowMeta {
    /// Refuses a chunk whose byte range does not fit a row's `u32`s.
    pub(crate) fn check(meta: &ChunkMeta) -> Result<(), SemanticError> {
        if u32::try_from(meta.end).is_err() || u32::try_from(meta.start).is_err() {
            return Err(SemanticError::TooLarge {
                limit: "chunk byte offset",
                max: u64::from(u32::MAX),
                actual: meta.end.max(meta.start) as u64,
            });
        }
        Ok(())
    }

    /// `meta`'s row, its source held as `source` (checked by [`Self::check`] first; an offset
    /// past `u32::MAX` would be clamped).
    pub(crate) fn new(meta: &ChunkMeta, source: SourceRecord) -> Self {
        let narrow = |offset: usize| u32::try_from(offset).unwrap_or(u32::MAX);
        Self {
            source,
            ordinal: meta.ordinal,
            start: narrow(meta.start),
            end: narrow(meta.end),
            excerpt_digest: meta.excerpt_digest,
        }
    }

    /// The row as a hit's [`ChunkMeta`].
    pub(crate) fn chunk(&self) -> Result<ChunkMeta, SemanticError> {
        Ok(ChunkMeta {
            source: Arc::new(self.source.version()?),
            ordinal: self.ordinal,
            start: self.start as usize,
            end: self.end as usize,
            excerpt_digest: self.excerpt_digest,
        })
    }
}

impl Ranked for RowMeta {
    fn rank_key(&self) -> (&NamespaceAddress, &str, &str, u32) {
        (
            self.source.namespace(),
            self.source.id(),
            self.source.revision(),
            self.ordinal,
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::index::test_support::meta;

    #[test]
    fn a_record_gives_back_the_source_it_was_made_from() {
        let chunk = ChunkMeta {
            start: 7,
            end: 19,
            ..meta("déjà-vu", 3)
        };
        let source = &chunk.source;
        let record = SourceRecord::new(source, source.key.namespace.clone());
        assert_eq!(record.id(), "déjà-vu");
        assert_eq!(record.revision(), "r1");
        assert_eq!(record.version().unwrap(), **source);
        let row = RowMeta::new(&chunk, record.clone());
        assert_eq!(row.chunk().unwrap(), chunk);
        assert!(row.source.same(&record.clone()));
        let twin = SourceRecord::new(source, source.key.namespace.clone());
        assert!(!twin.same(&record) && twin == record && twin.same_key(&record));
    }

    #[test]
    fn a_row_and_its_record_stay_as_small_as_the_module_docs_say() {
        assert_eq!(std::mem::size_of::<SourceRecord>(), 8);
        assert_eq!(std::mem::size_of::<RecordHead>(), 24);
        assert_eq!(std::mem::size_of::<RowMeta>(), 56);
    }

    #[test]
    fn an_offset_past_u32_is_refused() {
        let chunk = ChunkMeta {
            end: u32::MAX as usize + 1,
            ..meta("a", 0)
        };
        assert!(matches!(
            RowMeta::check(&chunk),
            Err(SemanticError::TooLarge {
                limit: "chunk byte offset",
                ..
            })
        ));
        assert!(RowMeta::check(&meta("a", 0)).is_ok());
    }
}
