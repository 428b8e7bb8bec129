//! Sources the index could not hold (`semantic_unindexed`), by reason: recorded by generation so an
//! older record never replaces a newer one, and cleared by an admitted replacement in its own
//! transaction (`sources`).

use memory_core::storage::decode_vector_key as parse_key;
use memory_core::vectors::{ProfileDigest, SourceGeneration, UnindexedReason, UnindexedSource};
use memory_core::{MemoryError, MemoryKey};
use rusqlite::params;

use super::SqliteVectorStore;
use super::codecs::{corrupt, text_column};
use crate::error::memory_error as storage;

impl SqliteVectorStore {
    pub(super) fn record_unindexed_now(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
        reason: UnindexedReason,
    ) -> Result<(), MemoryError> {
        let generation = i64::try_from(generation.get())
            .map_err(|_| MemoryError::invalid("generation", "exceeds 2^63 - 1"))?;
        self.lock()
            .execute(
                "INSERT INTO semantic_unindexed (profile, namespace, document_id, generation, reason) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (profile, namespace, document_id) DO UPDATE SET \
                 generation = excluded.generation, reason = excluded.reason \
                 WHERE excluded.generation >= semantic_unindexed.generation",
                params![
                    profile.as_bytes().as_slice(),
                    key.namespace.as_str(),
                    key.id.as_str(),
                    generation,
                    reason.as_str()
                ],
            )
            .map_err(storage("record unindexed source"))?;
        Ok(())
    }

    pub(super) fn clear_unindexed_now(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<(), MemoryError> {
        let generation = i64::try_from(generation.get())
            .map_err(|_| MemoryError::invalid("generation", "exceeds 2^63 - 1"))?;
        self.lock()
            .execute(
                "DELETE FROM semantic_unindexed WHERE profile = ?1 AND namespace = ?2 \
                 AND document_id = ?3 AND generation <= ?4",
                params![
                    profile.as_bytes().as_slice(),
                    key.namespace.as_str(),
                    key.id.as_str(),
                    generation
                ],
            )
            .map_err(storage("clear unindexed source"))?;
        Ok(())
    }

    pub(super) fn unindexed_sources_now(
        &self,
        profile: &ProfileDigest,
        reason: UnindexedReason,
        after: Option<&MemoryKey>,
        limit: usize,
    ) -> Result<Vec<UnindexedSource>, MemoryError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (namespace, document_id) =
            after.map_or(("", ""), |key| (key.namespace.as_str(), key.id.as_str()));
        let connection = self.lock();
        let mut statement = connection
            .prepare(
                "SELECT namespace, document_id, generation FROM semantic_unindexed \
                 WHERE profile = ?1 AND reason = ?2 AND (namespace, document_id) > (?3, ?4) \
                 ORDER BY namespace, document_id LIMIT ?5",
            )
            .map_err(storage("read unindexed sources"))?;
        let mut rows = statement
            .query(params![
                profile.as_bytes().as_slice(),
                reason.as_str(),
                namespace,
                document_id,
                limit
            ])
            .map_err(storage("read unindexed sources"))?;
        let mut sources = Vec::new();
        while let Some(row) = rows.next().map_err(storage("read unindexed sources"))? {
            let generation: i64 = row.get(2).map_err(storage("read unindexed sources"))?;
            sources.push(UnindexedSource {
                key: parse_key(text_column(row, 0)?, text_column(row, 1)?)?,
                generation: SourceGeneration::new(
                    u64::try_from(generation).map_err(|_| corrupt("negative generation"))?,
                ),
                reason,
            });
        }
        Ok(sources)
    }

    pub(super) fn unindexed_counts_now(
        &self,
        profile: &ProfileDigest,
    ) -> Result<Vec<(UnindexedReason, u64)>, MemoryError> {
        let connection = self.lock();
        let mut statement = connection
            .prepare(
                "SELECT reason, count(*) FROM semantic_unindexed WHERE profile = ?1 \
                 GROUP BY reason ORDER BY reason",
            )
            .map_err(storage("count unindexed sources"))?;
        let mut rows = statement
            .query([profile.as_bytes().as_slice()])
            .map_err(storage("count unindexed sources"))?;
        let mut counts = Vec::new();
        while let Some(row) = rows.next().map_err(storage("count unindexed sources"))? {
            let reason = UnindexedReason::parse(text_column(row, 0)?)
                .ok_or_else(|| corrupt("unknown unindexed reason"))?;
            let count: i64 = row.get(1).map_err(storage("count unindexed sources"))?;
            counts.push((
                reason,
                u64::try_from(count).map_err(|_| corrupt("negative row count"))?,
            ));
        }
        counts.sort();
        Ok(counts)
    }
}
