//! SQLite persistence of semantic chunk vectors ([`memory_core::vectors::VectorStore`]).
//!
//! The tables live in the same file as the memory store (or any other file) and are created by
//! [`SqliteVectorStore::open`] only; they are keyed by profile digest so vectors of different profiles never
//! mix. Vectors are little-endian f32 BLOBs whose length is checked on load. One source's replacement is
//! one transaction whose first statement is the generation fence (an upsert that changes the source
//! row only when the stored state admits the new one), so several processes may share the tables. A
//! load reads both tables once each, in primary-key order, and merges them.
//!
//! Two more tables keep what the index cannot hold and what it built: `semantic_unindexed` (sources
//! refused by a limit, with the reason; an admitted replacement deletes the key's row in its own
//! transaction) and `semantic_graphs` (one persisted search graph per profile, an opaque BLOB with the
//! position and vector-set digest it was built over).

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use memory_core::StoreFault;
use memory_core::storage::{decode_vector, decode_vector_key as parse_key, encode_vector};
use memory_core::vectors::{
    ChunkVectorRef, GraphSnapshot, ProfileDigest, ReplaceOutcome, SourceGeneration, StoredChunk,
    StoredSource, StoredSourceState, UnindexedReason, UnindexedSource, VectorLoadLimits,
    VectorSink, VectorStore, check_chunk_vectors_request,
};
use memory_core::{ChangeSequence, DocumentId, MemoryError, MemoryKey, NamespaceAddress, Revision};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS semantic_sources (
    profile BLOB NOT NULL,
    namespace TEXT NOT NULL,
    document_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    revision TEXT,
    withdrawn INTEGER NOT NULL,
    PRIMARY KEY (profile, namespace, document_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS semantic_chunks (
    profile BLOB NOT NULL,
    namespace TEXT NOT NULL,
    document_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    start_byte INTEGER NOT NULL,
    end_byte INTEGER NOT NULL,
    excerpt_digest BLOB NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (profile, namespace, document_id, ordinal)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS semantic_positions (
    profile BLOB NOT NULL PRIMARY KEY,
    position INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS semantic_unindexed (
    profile BLOB NOT NULL,
    namespace TEXT NOT NULL,
    document_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (profile, namespace, document_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS semantic_unindexed_by_reason
    ON semantic_unindexed (profile, reason, namespace, document_id);
CREATE TABLE IF NOT EXISTS semantic_graphs (
    profile BLOB NOT NULL PRIMARY KEY,
    position INTEGER NOT NULL,
    vector_set BLOB NOT NULL,
    chunks INTEGER NOT NULL,
    graph BLOB NOT NULL
) WITHOUT ROWID;
";

/// The most of the file the vector store's connection maps (SQLite caps it at its compile-time
/// maximum); address space, not memory.
const MMAP_BYTES: i64 = 1 << 34;

/// How long a connection waits for another writer before reporting busy.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Chunk vectors and indexer positions in a SQLite file.
pub struct SqliteVectorStore {
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteVectorStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SqliteVectorStore")
            .finish_non_exhaustive()
    }
}

use crate::error::memory_error as storage;

fn corrupt(what: impl Into<String>) -> MemoryError {
    MemoryError::Store(StoreFault::Corrupt { what: what.into() })
}

impl SqliteVectorStore {
    /// Opens (creating if needed) the vector tables in the SQLite file at `path`, in WAL mode with
    /// `synchronous = FULL` so an acknowledged replacement survives a process crash.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, MemoryError> {
        let connection = Connection::open(path).map_err(storage("open vector store"))?;
        connection
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(storage("open vector store"))?;
        connection
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(storage("open vector store"))?;
        connection
            .pragma_update(None, "synchronous", "FULL")
            .map_err(storage("open vector store"))?;
        // A load reads every stored vector: through a memory map, SQLite reads its pages in place
        // instead of copying each into its page cache with a system call (at 100,000 chunks the scan
        // takes about half the time). The store never shrinks the file (no VACUUM), the hazard of
        // a mapped file.
        connection
            .pragma_update(None, "mmap_size", MMAP_BYTES)
            .map_err(storage("open vector store"))?;
        connection
            .execute_batch(SCHEMA)
            .map_err(storage("create vector tables"))?;
        Ok(Self {
            connection: Mutex::new(connection),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // Every statement runs inside a transaction that rolls back on drop, so a panic while holding the
        // lock leaves no half-written state behind.
        self.connection
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Loads `profile`'s sources; with a `sink`, each chunk's vector goes there as it is read, as
    /// stored (the returned chunks' vectors left empty).
    fn load_now(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
        mut sink: Option<&mut dyn VectorSink>,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        let mut connection = self.lock();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(storage("load vectors"))?;
        let profile_bytes = &profile.0[..];
        let source_count: i64 = transaction
            .query_row(
                "SELECT count(*) FROM semantic_sources WHERE profile = ?1",
                [profile_bytes],
                |row| row.get(0),
            )
            .map_err(storage("count vector sources"))?;
        check_count("stored sources", source_count, limits.max_sources)?;
        // Chunks are not counted up front: their rows hold the vectors, so a count walks as many
        // pages as the load itself. The chunk bound is enforced while reading instead, before the
        // row past it is materialized.

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

    fn replace_now(
        &self,
        profile: &ProfileDigest,
        source: &StoredSource,
    ) -> Result<ReplaceOutcome, MemoryError> {
        let mut connection = self.lock();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(storage("replace vector source"))?;
        let profile_bytes = &profile.0[..];
        let namespace = source.key.namespace.as_str();
        let document_id = source.key.id.as_str();
        let generation = i64::try_from(source.generation.0)
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
                current: SourceGeneration(
                    u64::try_from(current).map_err(|_| corrupt("negative source generation"))?,
                ),
                withdrawn,
            });
        }
        transaction
            .execute(
                "DELETE FROM semantic_chunks WHERE profile = ?1 AND namespace = ?2 AND document_id = ?3",
                params![profile_bytes, namespace, document_id],
            )
            .map_err(storage("replace vector source"))?;
        if let StoredSourceState::Indexed { chunks, .. } = &source.state {
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

    /// One primary-key lookup per chunk, joined to its source so only the named revision of an
    /// indexed (not withdrawn) source answers; all in one read transaction, so the answers are of
    /// one state of the store.
    fn chunk_vectors_now(
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
                            &profile.0[..],
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

    fn position_now(&self, profile: &ProfileDigest) -> Result<ChangeSequence, MemoryError> {
        let connection = self.lock();
        let position: Option<i64> = connection
            .query_row(
                "SELECT position FROM semantic_positions WHERE profile = ?1",
                [&profile.0[..]],
                |row| row.get(0),
            )
            .optional()
            .map_err(storage("read indexed position"))?;
        match position {
            None => Ok(ChangeSequence(0)),
            Some(value) => u64::try_from(value)
                .map(ChangeSequence)
                .map_err(|_| corrupt("negative indexed position")),
        }
    }

    fn set_position_now(
        &self,
        profile: &ProfileDigest,
        position: ChangeSequence,
    ) -> Result<(), MemoryError> {
        let value = i64::try_from(position.0)
            .map_err(|_| MemoryError::invalid("position", "exceeds 2^63 - 1"))?;
        let connection = self.lock();
        connection
            .execute(
                "INSERT INTO semantic_positions (profile, position) VALUES (?1, ?2) \
                 ON CONFLICT (profile) DO UPDATE SET position = max(position, excluded.position)",
                params![&profile.0[..], value],
            )
            .map_err(storage("write indexed position"))?;
        Ok(())
    }
}

impl SqliteVectorStore {
    fn record_unindexed_now(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
        reason: UnindexedReason,
    ) -> Result<(), MemoryError> {
        let generation = i64::try_from(generation.0)
            .map_err(|_| MemoryError::invalid("generation", "exceeds 2^63 - 1"))?;
        self.lock()
            .execute(
                "INSERT INTO semantic_unindexed (profile, namespace, document_id, generation, reason) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (profile, namespace, document_id) DO UPDATE SET \
                 generation = excluded.generation, reason = excluded.reason \
                 WHERE excluded.generation >= semantic_unindexed.generation",
                params![
                    &profile.0[..],
                    key.namespace.as_str(),
                    key.id.as_str(),
                    generation,
                    reason.as_str()
                ],
            )
            .map_err(storage("record unindexed source"))?;
        Ok(())
    }

    fn clear_unindexed_now(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<(), MemoryError> {
        let generation = i64::try_from(generation.0)
            .map_err(|_| MemoryError::invalid("generation", "exceeds 2^63 - 1"))?;
        self.lock()
            .execute(
                "DELETE FROM semantic_unindexed WHERE profile = ?1 AND namespace = ?2 \
                 AND document_id = ?3 AND generation <= ?4",
                params![
                    &profile.0[..],
                    key.namespace.as_str(),
                    key.id.as_str(),
                    generation
                ],
            )
            .map_err(storage("clear unindexed source"))?;
        Ok(())
    }

    fn unindexed_sources_now(
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
                &profile.0[..],
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
                generation: SourceGeneration(
                    u64::try_from(generation).map_err(|_| corrupt("negative generation"))?,
                ),
                reason,
            });
        }
        Ok(sources)
    }

    fn unindexed_counts_now(
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
            .query([&profile.0[..]])
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

    fn save_graph_now(
        &self,
        profile: &ProfileDigest,
        graph: &GraphSnapshot,
    ) -> Result<(), MemoryError> {
        let position = i64::try_from(graph.position.0)
            .map_err(|_| MemoryError::invalid("position", "exceeds 2^63 - 1"))?;
        let chunks = i64::try_from(graph.chunks)
            .map_err(|_| MemoryError::invalid("chunks", "exceeds 2^63 - 1"))?;
        self.lock()
            .execute(
                "INSERT INTO semantic_graphs (profile, position, vector_set, chunks, graph) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (profile) DO UPDATE SET position = excluded.position, \
                 vector_set = excluded.vector_set, chunks = excluded.chunks, graph = excluded.graph",
                params![
                    &profile.0[..],
                    position,
                    &graph.vector_set[..],
                    chunks,
                    &graph.bytes
                ],
            )
            .map_err(storage("save graph"))?;
        Ok(())
    }

    fn load_graph_now(
        &self,
        profile: &ProfileDigest,
        max_bytes: usize,
    ) -> Result<Option<GraphSnapshot>, MemoryError> {
        let connection = self.lock();
        // The length is read first, so an oversized blob is refused before it is materialized.
        let length: Option<i64> = connection
            .query_row(
                "SELECT length(graph) FROM semantic_graphs WHERE profile = ?1",
                [&profile.0[..]],
                |row| row.get(0),
            )
            .optional()
            .map_err(storage("load graph"))?;
        let Some(length) = length else {
            return Ok(None);
        };
        let length = u64::try_from(length).map_err(|_| corrupt("negative graph length"))?;
        if length > max_bytes as u64 {
            return Err(MemoryError::TooLarge {
                limit: "stored graph bytes",
                max: max_bytes as u64,
                actual: length,
            });
        }
        connection
            .query_row(
                "SELECT position, vector_set, chunks, graph FROM semantic_graphs WHERE profile = ?1",
                [&profile.0[..]],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, Vec<u8>>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, Vec<u8>>(3)?,
                    ))
                },
            )
            .optional()
            .map_err(storage("load graph"))?
            .map(|(position, vector_set, chunks, bytes)| {
                Ok(GraphSnapshot {
                    position: ChangeSequence(
                        u64::try_from(position).map_err(|_| corrupt("negative graph position"))?,
                    ),
                    vector_set: vector_set
                        .try_into()
                        .map_err(|_| corrupt("graph vector-set digest length"))?,
                    chunks: u64::try_from(chunks).map_err(|_| corrupt("negative graph chunks"))?,
                    bytes,
                })
            })
            .transpose()
    }
}

fn check_count(limit: &'static str, count: i64, max: usize) -> Result<(), MemoryError> {
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
fn text_column<'r>(row: &'r Row<'_>, index: usize) -> Result<&'r str, MemoryError> {
    row.get_ref(index)
        .map_err(storage("load vectors"))?
        .as_str()
        .map_err(|_| corrupt("stored source identity is not text"))
}

/// A source row of a load (its chunks are added as the chunk rows follow).
fn source_from_row(
    row: &Row<'_>,
    namespace: NamespaceAddress,
    document_id: &str,
) -> Result<StoredSource, MemoryError> {
    let generation: i64 = row.get(2).map_err(storage("load vector sources"))?;
    let revision: Option<String> = row.get(3).map_err(storage("load vector sources"))?;
    let withdrawn: bool = row.get(4).map_err(storage("load vector sources"))?;
    let generation = SourceGeneration(
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
fn chunk_from_row(
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

impl VectorStore for SqliteVectorStore {
    async fn load_sources(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        self.load_now(profile, limits, None)
    }

    async fn load_sources_into(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
        sink: &mut dyn VectorSink,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        self.load_now(profile, limits, Some(sink))
    }

    async fn replace_source(
        &self,
        profile: &ProfileDigest,
        source: &StoredSource,
    ) -> Result<ReplaceOutcome, MemoryError> {
        self.replace_now(profile, source)
    }

    async fn indexed_position(
        &self,
        profile: &ProfileDigest,
    ) -> Result<ChangeSequence, MemoryError> {
        self.position_now(profile)
    }

    async fn set_indexed_position(
        &self,
        profile: &ProfileDigest,
        position: ChangeSequence,
    ) -> Result<(), MemoryError> {
        self.set_position_now(profile, position)
    }

    async fn record_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
        reason: UnindexedReason,
    ) -> Result<(), MemoryError> {
        self.record_unindexed_now(profile, key, generation, reason)
    }

    async fn clear_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<(), MemoryError> {
        self.clear_unindexed_now(profile, key, generation)
    }

    async fn unindexed_sources(
        &self,
        profile: &ProfileDigest,
        reason: UnindexedReason,
        after: Option<&MemoryKey>,
        limit: usize,
    ) -> Result<Vec<UnindexedSource>, MemoryError> {
        self.unindexed_sources_now(profile, reason, after, limit)
    }

    async fn unindexed_counts(
        &self,
        profile: &ProfileDigest,
    ) -> Result<Vec<(UnindexedReason, u64)>, MemoryError> {
        self.unindexed_counts_now(profile)
    }

    async fn load_chunk_vectors(
        &self,
        profile: &ProfileDigest,
        chunks: &[ChunkVectorRef],
        dimensions: usize,
    ) -> Result<Vec<Option<Vec<f32>>>, MemoryError> {
        self.chunk_vectors_now(profile, chunks, dimensions)
    }

    async fn save_graph(
        &self,
        profile: &ProfileDigest,
        graph: &GraphSnapshot,
    ) -> Result<(), MemoryError> {
        self.save_graph_now(profile, graph)
    }

    async fn load_graph(
        &self,
        profile: &ProfileDigest,
        max_bytes: usize,
    ) -> Result<Option<GraphSnapshot>, MemoryError> {
        self.load_graph_now(profile, max_bytes)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use memory_core::{DocumentId, NamespaceAddress};

    use super::*;

    fn key(id: &str) -> MemoryKey {
        MemoryKey {
            namespace: NamespaceAddress::parse(r#"[1,"notes",1,{"user":"u"}]"#).unwrap(),
            id: DocumentId::new(id).unwrap(),
        }
    }

    fn limits() -> VectorLoadLimits {
        VectorLoadLimits {
            dimensions: 2,
            max_sources: 10,
            max_chunks: 10,
        }
    }

    fn indexed(id: &str, generation: u64, vectors: &[[f32; 2]]) -> StoredSource {
        StoredSource {
            key: key(id),
            generation: SourceGeneration(generation),
            state: StoredSourceState::Indexed {
                revision: Revision::new(format!("r{generation}")).unwrap(),
                chunks: vectors
                    .iter()
                    .enumerate()
                    .map(|(ordinal, vector)| StoredChunk {
                        ordinal: ordinal as u32,
                        start: ordinal as u64 * 3,
                        end: ordinal as u64 * 3 + 3,
                        excerpt_digest: [ordinal as u8; 32],
                        vector: vector.to_vec(),
                    })
                    .collect(),
            },
        }
    }

    #[test]
    fn replaced_sources_round_trip_per_profile() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("vectors.sqlite");
        let profile = ProfileDigest([1; 32]);
        let other_profile = ProfileDigest([2; 32]);
        {
            let store = SqliteVectorStore::open(&path).unwrap();
            store
                .replace_now(&profile, &indexed("a", 1, &[[1.0, 0.0], [0.0, 1.0]]))
                .unwrap();
            store
                .replace_now(&profile, &indexed("a", 2, &[[0.6, 0.8]]))
                .unwrap();
            store
                .replace_now(
                    &profile,
                    &StoredSource {
                        key: key("b"),
                        generation: SourceGeneration(3),
                        state: StoredSourceState::Withdrawn,
                    },
                )
                .unwrap();
            store.set_position_now(&profile, ChangeSequence(7)).unwrap();
            store.set_position_now(&profile, ChangeSequence(5)).unwrap();
        }
        let store = SqliteVectorStore::open(&path).unwrap();
        let sources = store.load_now(&profile, limits(), None).unwrap();
        assert_eq!(sources.len(), 2);
        assert_eq!(sources[0], indexed("a", 2, &[[0.6, 0.8]]));
        assert_eq!(sources[1].state, StoredSourceState::Withdrawn);
        assert!(
            store
                .load_now(&other_profile, limits(), None)
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.position_now(&profile).unwrap(), ChangeSequence(7));
        assert_eq!(
            store.position_now(&other_profile).unwrap(),
            ChangeSequence(0)
        );
    }

    /// Collects what a load hands over.
    struct Collected(Vec<Vec<f32>>);

    impl VectorSink for Collected {
        fn push_vector(&mut self, vector: &[f32]) -> Result<(), MemoryError> {
            self.0.push(vector.to_vec());
            Ok(())
        }
    }

    #[test]
    fn a_load_into_a_sink_hands_over_the_vectors_in_order() {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap();
        let profile = ProfileDigest([1; 32]);
        store
            .replace_now(&profile, &indexed("b", 1, &[[0.6, 0.8]]))
            .unwrap();
        store
            .replace_now(&profile, &indexed("a", 1, &[[1.0, 0.0], [0.0, 1.0]]))
            .unwrap();
        let whole = store.load_now(&profile, limits(), None).unwrap();
        let mut collected = Collected(Vec::new());
        let emptied = store
            .load_now(&profile, limits(), Some(&mut collected))
            .unwrap();
        let mut expected = Vec::new();
        let mut stripped = whole.clone();
        for source in &mut stripped {
            if let StoredSourceState::Indexed { chunks, .. } = &mut source.state {
                for chunk in chunks {
                    expected.push(std::mem::take(&mut chunk.vector));
                }
            }
        }
        assert_eq!(collected.0, expected);
        assert_eq!(expected.len(), 3);
        assert_eq!(
            emptied, stripped,
            "everything else is as a plain load returns it"
        );
        let wrong = VectorLoadLimits {
            dimensions: 3,
            ..limits()
        };
        assert!(matches!(
            store.load_now(&profile, wrong, Some(&mut Collected(Vec::new()))),
            Err(MemoryError::Store(StoreFault::Corrupt { .. }))
        ));
    }

    #[test]
    fn load_refuses_counts_over_limits_and_wrong_dimensions() {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap();
        let profile = ProfileDigest([1; 32]);
        store
            .replace_now(&profile, &indexed("a", 1, &[[1.0, 0.0], [0.0, 1.0]]))
            .unwrap();
        let tight = VectorLoadLimits {
            max_chunks: 1,
            ..limits()
        };
        assert!(matches!(
            store.load_now(&profile, tight, None),
            Err(MemoryError::TooLarge {
                limit: "stored chunks",
                ..
            })
        ));
        let wrong = VectorLoadLimits {
            dimensions: 3,
            ..limits()
        };
        assert!(matches!(
            store.load_now(&profile, wrong, None),
            Err(MemoryError::Store(StoreFault::Corrupt { .. }))
        ));
    }

    #[test]
    fn stale_replacements_change_no_rows_and_are_reported() {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap();
        let profile = ProfileDigest([1; 32]);
        let current = indexed("a", 5, &[[1.0, 0.0], [0.0, 1.0]]);
        assert_eq!(
            store.replace_now(&profile, &current).unwrap(),
            ReplaceOutcome::Replaced
        );
        let stale = ReplaceOutcome::Stale {
            current: SourceGeneration(5),
            withdrawn: false,
        };
        let older = indexed("a", 3, &[[0.6, 0.8]]);
        assert_eq!(store.replace_now(&profile, &older).unwrap(), stale);
        let divergent = StoredSource {
            state: StoredSourceState::Indexed {
                revision: Revision::new("other").unwrap(),
                chunks: Vec::new(),
            },
            ..indexed("a", 5, &[])
        };
        assert_eq!(store.replace_now(&profile, &divergent).unwrap(), stale);
        let older_withdrawal = StoredSource {
            key: key("a"),
            generation: SourceGeneration(4),
            state: StoredSourceState::Withdrawn,
        };
        assert_eq!(
            store.replace_now(&profile, &older_withdrawal).unwrap(),
            stale
        );
        assert_eq!(
            store.load_now(&profile, limits(), None).unwrap(),
            vec![current.clone()]
        );
        assert_eq!(
            store.replace_now(&profile, &current).unwrap(),
            ReplaceOutcome::Replaced,
            "a replay of the stored state is admitted"
        );

        let withdrawal = StoredSource {
            generation: SourceGeneration(5),
            ..older_withdrawal
        };
        assert_eq!(
            store.replace_now(&profile, &withdrawal).unwrap(),
            ReplaceOutcome::Replaced,
            "a withdrawal at the same generation is admitted"
        );
        let withdrawn = ReplaceOutcome::Stale {
            current: SourceGeneration(5),
            withdrawn: true,
        };
        assert_eq!(
            store
                .replace_now(&profile, &indexed("a", 9, &[[1.0, 0.0]]))
                .unwrap(),
            withdrawn,
            "withdrawal is terminal"
        );
        assert_eq!(store.replace_now(&profile, &withdrawal).unwrap(), withdrawn);
        assert_eq!(
            store.load_now(&profile, limits(), None).unwrap(),
            vec![withdrawal]
        );
    }

    #[test]
    fn load_keeps_chunkless_sources_and_refuses_orphan_chunks() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("v.sqlite");
        let store = SqliteVectorStore::open(&path).unwrap();
        let profile = ProfileDigest([1; 32]);
        let empty = indexed("a", 1, &[]);
        let full = indexed("b", 2, &[[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]);
        store.replace_now(&profile, &empty).unwrap();
        store.replace_now(&profile, &full).unwrap();
        assert_eq!(
            store.load_now(&profile, limits(), None).unwrap(),
            vec![empty, full]
        );
        store
            .lock()
            .execute("DELETE FROM semantic_sources WHERE document_id = 'b'", [])
            .unwrap();
        assert!(matches!(
            store.load_now(&profile, limits(), None),
            Err(MemoryError::Store(StoreFault::Corrupt { .. }))
        ));
    }

    #[test]
    fn unindexed_records_page_count_and_clear_with_the_vectors() {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap();
        let profile = ProfileDigest([1; 32]);
        for (id, generation, reason) in [
            ("a", 1, UnindexedReason::Capacity),
            ("b", 2, UnindexedReason::Capacity),
            ("c", 3, UnindexedReason::TooLarge),
        ] {
            store
                .record_unindexed_now(&profile, &key(id), SourceGeneration(generation), reason)
                .unwrap();
        }
        // An older generation's record never replaces a newer one.
        store
            .record_unindexed_now(
                &profile,
                &key("c"),
                SourceGeneration(1),
                UnindexedReason::Invalid,
            )
            .unwrap();
        assert_eq!(
            store.unindexed_counts_now(&profile).unwrap(),
            vec![
                (UnindexedReason::TooLarge, 1),
                (UnindexedReason::Capacity, 2)
            ]
        );
        let first = store
            .unindexed_sources_now(&profile, UnindexedReason::Capacity, None, 1)
            .unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].key, key("a"));
        let second = store
            .unindexed_sources_now(&profile, UnindexedReason::Capacity, Some(&first[0].key), 5)
            .unwrap();
        assert_eq!(second.len(), 1);
        assert_eq!(
            (second[0].key.clone(), second[0].generation),
            (key("b"), SourceGeneration(2))
        );
        // Indexing a source clears its record in the same transaction; a replay is cleared by
        // generation.
        store
            .replace_now(&profile, &indexed("a", 4, &[[1.0, 0.0]]))
            .unwrap();
        store
            .clear_unindexed_now(&profile, &key("b"), SourceGeneration(1))
            .unwrap();
        assert_eq!(
            store.unindexed_counts_now(&profile).unwrap(),
            vec![
                (UnindexedReason::TooLarge, 1),
                (UnindexedReason::Capacity, 1)
            ]
        );
        store
            .clear_unindexed_now(&profile, &key("b"), SourceGeneration(2))
            .unwrap();
        assert!(
            store
                .unindexed_counts_now(&ProfileDigest([2; 32]))
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store.unindexed_counts_now(&profile).unwrap(),
            vec![(UnindexedReason::TooLarge, 1)]
        );
    }

    #[test]
    fn graphs_round_trip_per_profile_and_oversized_ones_are_refused_unread() {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap();
        let profile = ProfileDigest([1; 32]);
        assert_eq!(store.load_graph_now(&profile, 1_000).unwrap(), None);
        let graph = GraphSnapshot {
            position: ChangeSequence(9),
            vector_set: [7; 32],
            chunks: 3,
            bytes: vec![1, 2, 3, 4],
        };
        store.save_graph_now(&profile, &graph).unwrap();
        assert_eq!(
            store.load_graph_now(&profile, 4).unwrap(),
            Some(graph.clone())
        );
        assert!(matches!(
            store.load_graph_now(&profile, 3),
            Err(MemoryError::TooLarge { .. })
        ));
        assert_eq!(
            store
                .load_graph_now(&ProfileDigest([2; 32]), 1_000)
                .unwrap(),
            None
        );
        let newer = GraphSnapshot {
            position: ChangeSequence(10),
            bytes: vec![5],
            ..graph
        };
        store.save_graph_now(&profile, &newer).unwrap();
        assert_eq!(store.load_graph_now(&profile, 4).unwrap(), Some(newer));
    }
}
