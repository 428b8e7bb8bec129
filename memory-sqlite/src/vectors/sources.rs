//! Loading a profile's sources with their chunks, and replacing one source behind its generation
//! fence.
//!
//! One source's replacement is one transaction whose first statement is the fence (an upsert that
//! changes the source row only when the stored state admits the new one), so several processes may
//! share the tables. A load reads both tables once each, in primary-key order, and merges them. Each
//! replacement also moves its profile's count of stored chunks (`semantic_chunk_counts`) by what it
//! deleted and inserted, so the count is read without walking the vectors' pages.

use memory_core::storage::encode_vector;
use memory_core::vectors::{
    ProfileDigest, ReplaceOutcome, SourceGeneration, StoredSource, StoredSourceState,
    VectorLoadLimits, VectorSink,
};
use memory_core::{MemoryError, NamespaceAddress};
use rusqlite::{Connection, TransactionBehavior, params};

use super::SqliteVectorStore;
use super::codecs::{check_count, chunk_from_row, corrupt, source_from_row, text_column};
use crate::error::memory_error as storage;

impl SqliteVectorStore {
    /// Loads `profile`'s sources; with a `sink`, each chunk's vector goes there as it is read, as
    /// stored (the returned chunks' vectors left empty).
    pub(super) fn load_now(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
        mut sink: Option<&mut dyn VectorSink>,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        let mut connection = self.lock();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(storage("load vectors"))?;
        let profile_bytes = profile.as_bytes().as_slice();
        let source_count: i64 = transaction
            .query_row(
                "SELECT count(*) FROM semantic_sources WHERE profile = ?1",
                [profile_bytes],
                |row| row.get(0),
            )
            .map_err(storage("count vector sources"))?;
        check_count("stored sources", source_count, limits.max_sources)?;
        // The kept count refuses a load past the chunk bound before a row is read; the bound is
        // still enforced while reading, before the row past it is materialized, so a count that a
        // hand-edited file got wrong never lets more in.
        check_count(
            "stored chunks",
            stored_chunks(&transaction, profile_bytes)?,
            limits.max_chunks,
        )?;

        // Two scans in primary-key order, merged on (namespace, document_id): sequential reads of
        // each table, no lookup structure, and borrowed column values, so a chunk costs one
        // allocation (its vector), or none when a sink takes the vectors.
        let mut sources: Vec<StoredSource> =
            Vec::with_capacity(usize::try_from(source_count).unwrap_or(0));
        {
            let mut statement = transaction
                .prepare(
                    "SELECT namespace, document_id, generation, revision, withdrawn \
                     FROM semantic_sources WHERE profile = ?1 ORDER BY namespace, document_id",
                )
                .map_err(storage("load vector sources"))?;
            let mut rows = statement
                .query([profile_bytes])
                .map_err(storage("load vector sources"))?;
            // Rows come in namespace order, so most share the previous row's namespace: its
            // address is parsed (and checked canonical) once, not once per source.
            let mut namespace: Option<NamespaceAddress> = None;
            while let Some(row) = rows.next().map_err(storage("load vector sources"))? {
                let text = text_column(row, 0)?;
                let address = match namespace.take() {
                    Some(address) if address.as_str() == text => address,
                    _ => NamespaceAddress::parse(text)
                        .map_err(|_| corrupt("invalid stored namespace address"))?,
                };
                let source = source_from_row(row, address.clone(), text_column(row, 1)?)?;
                namespace = Some(address);
                sources.push(source);
            }
        }
        let mut statement = transaction
            .prepare(
                "SELECT namespace, document_id, ordinal, start_byte, end_byte, excerpt_digest, \
                 vector FROM semantic_chunks WHERE profile = ?1 \
                 ORDER BY namespace, document_id, ordinal",
            )
            .map_err(storage("load vector chunks"))?;
        let mut rows = statement
            .query([profile_bytes])
            .map_err(storage("load vector chunks"))?;
        let mut slot = 0usize;
        let mut chunks_read = 0usize;
        while let Some(row) = rows.next().map_err(storage("load vector chunks"))? {
            chunks_read += 1;
            if chunks_read > limits.max_chunks {
                return Err(MemoryError::TooLarge {
                    limit: "stored chunks",
                    max: limits.max_chunks as u64,
                    actual: chunks_read as u64,
                });
            }
            let identity = (text_column(row, 0)?, text_column(row, 1)?);
            // SQLite's BINARY collation orders TEXT as bytes, as `str`'s `Ord` does.
            while sources.get(slot).is_some_and(|source| {
                (source.key.namespace.as_str(), source.key.id.as_str()) < identity
            }) {
                slot += 1;
            }
            let source = sources
                .get_mut(slot)
                .filter(|source| {
                    (source.key.namespace.as_str(), source.key.id.as_str()) == identity
                })
                .ok_or_else(|| corrupt("chunk without its source row"))?;
            let chunk = match sink.as_deref_mut() {
                None => chunk_from_row(row, limits.dimensions, None)?,
                Some(sink) => chunk_from_row(row, limits.dimensions, Some(sink))?,
            };
            match &mut source.state {
                StoredSourceState::Indexed { chunks, .. } => chunks.push(chunk),
                StoredSourceState::Withdrawn => {
                    return Err(corrupt("chunk stored for a withdrawn source"));
                }
            }
        }
        Ok(sources)
    }

    /// `profile`'s stored chunks, from the count each replacement keeps.
    pub(super) fn stored_chunks_now(&self, profile: &ProfileDigest) -> Result<u64, MemoryError> {
        let count = stored_chunks(&self.lock(), profile.as_bytes().as_slice())?;
        u64::try_from(count).map_err(|_| corrupt("negative row count"))
    }

    pub(super) fn replace_now(
        &self,
        profile: &ProfileDigest,
        source: &StoredSource,
    ) -> Result<ReplaceOutcome, MemoryError> {
        let mut connection = self.lock();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(storage("replace vector source"))?;
        let profile_bytes = profile.as_bytes().as_slice();
        let namespace = source.key.namespace.as_str();
        let document_id = source.key.id.as_str();
        let generation = i64::try_from(source.generation.get())
            .map_err(|_| MemoryError::invalid("generation", "exceeds 2^63 - 1"))?;
        let (revision, withdrawn) = match &source.state {
            StoredSourceState::Indexed { revision, .. } => (Some(revision.as_str()), false),
            StoredSourceState::Withdrawn => (None, true),
        };
        // The fence is part of the write: the upsert changes the source row only when the stored state
        // admits the new one, and nothing else is written when it did not.
        let admitted = transaction
            .execute(
                "INSERT INTO semantic_sources \
                 (profile, namespace, document_id, generation, revision, withdrawn) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (profile, namespace, document_id) DO UPDATE SET \
                 generation = excluded.generation, revision = excluded.revision, \
                 withdrawn = excluded.withdrawn \
                 WHERE semantic_sources.withdrawn = 0 \
                 AND (excluded.generation > semantic_sources.generation \
                 OR (excluded.generation = semantic_sources.generation \
                 AND (excluded.withdrawn = 1 OR excluded.revision IS semantic_sources.revision)))",
                params![
                    profile_bytes,
                    namespace,
                    document_id,
                    generation,
                    revision,
                    withdrawn
                ],
            )
            .map_err(storage("replace vector source"))?;
        if admitted == 0 {
            let (current, withdrawn): (i64, bool) = transaction
                .query_row(
                    "SELECT generation, withdrawn FROM semantic_sources \
                     WHERE profile = ?1 AND namespace = ?2 AND document_id = ?3",
                    params![profile_bytes, namespace, document_id],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .map_err(storage("read fenced vector source"))?;
            return Ok(ReplaceOutcome::Stale {
                current: SourceGeneration::new(
                    u64::try_from(current).map_err(|_| corrupt("negative source generation"))?,
                ),
                withdrawn,
            });
        }
        let removed = transaction
            .execute(
                "DELETE FROM semantic_chunks WHERE profile = ?1 AND namespace = ?2 AND document_id = ?3",
                params![profile_bytes, namespace, document_id],
            )
            .map_err(storage("replace vector source"))?;
        let mut added = 0;
        if let StoredSourceState::Indexed { chunks, .. } = &source.state {
            added = chunks.len();
            let mut statement = transaction
                .prepare(
                    "INSERT INTO semantic_chunks (profile, namespace, document_id, ordinal, \
                     start_byte, end_byte, excerpt_digest, vector) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(storage("replace vector source"))?;
            for chunk in chunks {
                let start = i64::try_from(chunk.start)
                    .map_err(|_| MemoryError::invalid("chunk start", "exceeds 2^63 - 1"))?;
                let end = i64::try_from(chunk.end)
                    .map_err(|_| MemoryError::invalid("chunk end", "exceeds 2^63 - 1"))?;
                statement
                    .execute(params![
                        profile_bytes,
                        namespace,
                        document_id,
                        i64::from(chunk.ordinal),
                        start,
                        end,
                        &chunk.excerpt_digest[..],
                        encode_vector(&chunk.vector),
                    ])
                    .map_err(storage("replace vector source"))?;
            }
        }
        if added != removed {
            let change = i64::try_from(added)
                .ok()
                .zip(i64::try_from(removed).ok())
                .map(|(added, removed)| added - removed)
                .ok_or_else(|| MemoryError::invalid("chunks", "exceeds 2^63 - 1"))?;
            // The row first, then the change: an upsert's proposed row (a removal's negative
            // change) is checked against `chunks >= 0` before its conflict is found.
            transaction
                .execute(
                    "INSERT OR IGNORE INTO semantic_chunk_counts (profile, chunks) VALUES (?1, 0)",
                    [profile_bytes],
                )
                .map_err(storage("count stored chunks"))?;
            transaction
                .execute(
                    "UPDATE semantic_chunk_counts SET chunks = chunks + ?2 WHERE profile = ?1",
                    params![profile_bytes, change],
                )
                .map_err(storage("count stored chunks"))?;
        }
        // Indexed or withdrawn now: no longer unsearchable for any reason.
        transaction
            .execute(
                "DELETE FROM semantic_unindexed \
                 WHERE profile = ?1 AND namespace = ?2 AND document_id = ?3",
                params![profile_bytes, namespace, document_id],
            )
            .map_err(storage("replace vector source"))?;
        transaction
            .commit()
            .map_err(storage("commit vector source"))?;
        Ok(ReplaceOutcome::Replaced)
    }
}

/// The profile's count of stored chunks (`semantic_chunk_counts`; 0 before its first chunk).
fn stored_chunks(connection: &Connection, profile: &[u8]) -> Result<i64, MemoryError> {
    connection
        .query_row(
            "SELECT coalesce(sum(chunks), 0) FROM semantic_chunk_counts WHERE profile = ?1",
            [profile],
            |row| row.get(0),
        )
        .map_err(storage("count stored chunks"))
}
