//! Single chunks' stored vectors, for a compact index's rescoring.

use memory_core::MemoryError;
use memory_core::storage::decode_vector;
use memory_core::vectors::{ChunkVectorRef, ProfileDigest, check_chunk_vectors_request};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::SqliteVectorStore;
use crate::error::memory_error as storage;

impl SqliteVectorStore {
    /// One primary-key lookup per chunk, joined to its source so only the named revision of an
    /// indexed (not withdrawn) source answers; all in one read transaction, so the answers are of
    /// one state of the store.
    pub(super) fn chunk_vectors_now(
        &self,
        profile: &ProfileDigest,
        chunks: &[ChunkVectorRef],
        dimensions: usize,
    ) -> Result<Vec<Option<Vec<f32>>>, MemoryError> {
        check_chunk_vectors_request(chunks)?;
        let mut connection = self.lock();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(storage("read chunk vectors"))?;
        let mut vectors = Vec::with_capacity(chunks.len());
        {
            let mut statement = transaction
                .prepare_cached(
                    "SELECT c.vector FROM semantic_chunks c JOIN semantic_sources s \
                     ON s.profile = c.profile AND s.namespace = c.namespace \
                     AND s.document_id = c.document_id \
                     WHERE c.profile = ?1 AND c.namespace = ?2 AND c.document_id = ?3 \
                     AND c.ordinal = ?4 AND s.withdrawn = 0 AND s.revision = ?5",
                )
                .map_err(storage("read chunk vectors"))?;
            for chunk in chunks {
                let bytes: Option<Vec<u8>> = statement
                    .query_row(
                        params![
                            profile.as_bytes().as_slice(),
                            chunk.key.namespace.as_str(),
                            chunk.key.id.as_str(),
                            i64::from(chunk.ordinal),
                            chunk.revision.as_str(),
                        ],
                        |row| row.get(0),
                    )
                    .optional()
                    .map_err(storage("read chunk vectors"))?;
                vectors.push(
                    bytes
                        .map(|bytes| decode_vector(&bytes, dimensions))
                        .transpose()?,
                );
            }
        }
        transaction
            .commit()
            .map_err(storage("read chunk vectors"))?;
        Ok(vectors)
    }
}
