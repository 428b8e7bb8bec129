//! Stored rows into the model's types: vectors are little-endian f32 BLOBs whose length is checked
//! on load, and every column that does not decode is corrupt.

use memory_core::StoreFault;
use memory_core::storage::decode_vector;
use memory_core::vectors::{
    SourceGeneration, StoredChunk, StoredSource, StoredSourceState, VectorSink,
};
use memory_core::{DocumentId, MemoryError, MemoryKey, NamespaceAddress, Revision};
use rusqlite::Row;

use crate::error::memory_error as storage;

pub(super) fn corrupt(what: impl Into<String>) -> MemoryError {
    MemoryError::Store(StoreFault::Corrupt { what: what.into() })
}

pub(super) fn check_count(limit: &'static str, count: i64, max: usize) -> Result<(), MemoryError> {
    let count = u64::try_from(count).map_err(|_| corrupt("negative row count"))?;
    if count > max as u64 {
        return Err(MemoryError::TooLarge {
            limit,
            max: max as u64,
            actual: count,
        });
    }
    Ok(())
}

/// A TEXT column, borrowed from the row.
pub(super) fn text_column<'r>(row: &'r Row<'_>, index: usize) -> Result<&'r str, MemoryError> {
    row.get_ref(index)
        .map_err(storage("load vectors"))?
        .as_str()
        .map_err(|_| corrupt("stored source identity is not text"))
}

/// A source row of a load (its chunks are added as the chunk rows follow).
pub(super) fn source_from_row(
    row: &Row<'_>,
    namespace: NamespaceAddress,
    document_id: &str,
) -> Result<StoredSource, MemoryError> {
    let generation: i64 = row.get(2).map_err(storage("load vector sources"))?;
    let revision: Option<String> = row.get(3).map_err(storage("load vector sources"))?;
    let withdrawn: bool = row.get(4).map_err(storage("load vector sources"))?;
    let generation = SourceGeneration::new(
        u64::try_from(generation).map_err(|_| corrupt("negative source generation"))?,
    );
    let state = match (withdrawn, revision) {
        (true, _) => StoredSourceState::Withdrawn,
        (false, Some(revision)) => StoredSourceState::Indexed {
            revision: Revision::new(revision).map_err(|_| corrupt("invalid stored revision"))?,
            chunks: Vec::new(),
        },
        (false, None) => return Err(corrupt("indexed source without a revision")),
    };
    Ok(StoredSource {
        key: MemoryKey {
            namespace,
            id: DocumentId::new(document_id).map_err(|_| corrupt("invalid stored document id"))?,
        },
        generation,
        state,
    })
}

/// A chunk row of a load: `namespace, document_id, ordinal, start, end, digest, vector`. With
/// `sink`, the vector goes there as stored (checked for length) and the chunk's is left empty.
pub(super) fn chunk_from_row(
    row: &Row<'_>,
    dimensions: usize,
    sink: Option<&mut dyn VectorSink>,
) -> Result<StoredChunk, MemoryError> {
    let ordinal: i64 = row.get(2).map_err(storage("load vector chunks"))?;
    let start: i64 = row.get(3).map_err(storage("load vector chunks"))?;
    let end: i64 = row.get(4).map_err(storage("load vector chunks"))?;
    let blob = |index: usize| -> Result<&[u8], MemoryError> {
        row.get_ref(index)
            .map_err(storage("load vector chunks"))?
            .as_blob()
            .map_err(|_| corrupt("stored chunk column is not a blob"))
    };
    let chunk = StoredChunk {
        ordinal: u32::try_from(ordinal).map_err(|_| corrupt("chunk ordinal"))?,
        start: u64::try_from(start).map_err(|_| corrupt("chunk start"))?,
        end: u64::try_from(end).map_err(|_| corrupt("chunk end"))?,
        excerpt_digest: blob(5)?
            .try_into()
            .map_err(|_| corrupt("excerpt digest length"))?,
        vector: match sink {
            None => decode_vector(blob(6)?, dimensions)?,
            Some(sink) => {
                let bytes = blob(6)?;
                if bytes.len() != dimensions.saturating_mul(4) {
                    // The same refusal as a load without a sink.
                    decode_vector(bytes, dimensions)?;
                }
                sink.push_le_bytes(bytes)?;
                Vec::new()
            }
        },
    };
    if chunk.start > chunk.end {
        return Err(corrupt("chunk range is reversed"));
    }
    Ok(chunk)
}
