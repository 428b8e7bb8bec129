//! PostgreSQL persistence of semantic chunk vectors ([`memory_core::vectors::VectorStore`]).
//!
//! Rows are keyed by profile digest, so vectors of different profiles never mix. Vectors are
//! little-endian f32 `bytea` values whose length is checked on load. One source's replacement is one
//! transaction; a load reads sources and chunks in one repeatable-read snapshot, after counting them
//! against the limits. `semantic_unindexed` keeps the sources a limit refused (an admitted replacement
//! deletes the key's row in its transaction) and `semantic_graphs` one persisted search graph per
//! profile, opaque bytes tagged with the position and vector-set digest they were built over.

use memory_core::storage::{decode_vector, decode_vector_key as parse_key, encode_vector};
use memory_core::vectors::{
    ChunkVectorRef, GraphSnapshot, ProfileDigest, ReplaceOutcome, SourceGeneration, StoredChunk,
    StoredSource, StoredSourceState, UnindexedReason, UnindexedSource, VectorLoadLimits,
    VectorStore, check_chunk_vectors_request,
};
use memory_core::{ChangeSequence, MemoryError, MemoryKey, Revision};

use crate::db::{Handle, snapshot};
use crate::error::{Attempt, Fail, corrupt};
use crate::retry::{Idempotent, Params, commit, execute};
use deadpool_postgres::GenericClient;

/// Chunk vectors and indexer positions in PostgreSQL; get one from [`crate::PostgresStore::vectors`].
#[derive(Clone)]
pub struct PostgresVectorStore {
    pub(crate) handle: Handle,
}

impl std::fmt::Debug for PostgresVectorStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PostgresVectorStore")
            .finish_non_exhaustive()
    }
}

fn model(error: MemoryError) -> Fail<MemoryError> {
    Fail::Model(error)
}

fn check_count(what: &'static str, count: i64, max: usize) -> Attempt<()> {
    let count = u64::try_from(count).map_err(|_| model(corrupt("negative row count")))?;
    if count > max as u64 {
        return Err(model(MemoryError::TooLarge {
            limit: what,
            max: max as u64,
            actual: count,
        }));
    }
    Ok(())
}

async fn load(
    mut client: deadpool_postgres::Object,
    profile: &[u8],
    limits: VectorLoadLimits,
) -> Attempt<Vec<StoredSource>> {
    let transaction = snapshot(&mut client).await?;
    let source_count: i64 = transaction
        .query_one(
            "SELECT count(*) FROM semantic_sources WHERE profile = $1",
            &[&profile],
        )
        .await?
        .try_get(0)?;
    check_count("stored sources", source_count, limits.max_sources)?;
    check_count(
        "stored chunks",
        stored_chunks(&transaction, profile).await?,
        limits.max_chunks,
    )?;

    let rows = transaction
        .query(
            "SELECT namespace, document_id, generation, revision, withdrawn \
             FROM semantic_sources WHERE profile = $1 ORDER BY namespace, document_id",
            &[&profile],
        )
        .await?;
    let mut sources = Vec::with_capacity(rows.len());
    let mut index_of = std::collections::HashMap::with_capacity(rows.len());
    for row in rows {
        let namespace: String = row.try_get(0)?;
        let document_id: String = row.try_get(1)?;
        let generation: i64 = row.try_get(2)?;
        let revision: Option<String> = row.try_get(3)?;
        let withdrawn: bool = row.try_get(4)?;
        let key = parse_key(&namespace, &document_id).map_err(model)?;
        let generation = SourceGeneration::new(
            u64::try_from(generation).map_err(|_| model(corrupt("negative source generation")))?,
        );
        let state = match (withdrawn, revision) {
            (true, _) => StoredSourceState::Withdrawn,
            (false, Some(revision)) => StoredSourceState::Indexed {
                revision: Revision::new(revision)
                    .map_err(|_| model(corrupt("invalid stored revision")))?,
                chunks: Vec::new(),
            },
            (false, None) => return Err(model(corrupt("indexed source without a revision"))),
        };
        index_of.insert((namespace, document_id), sources.len());
        sources.push(StoredSource {
            key,
            generation,
            state,
        });
    }
    let rows = transaction
        .query(
            "SELECT namespace, document_id, ordinal, start_byte, end_byte, excerpt_digest, vector \
             FROM semantic_chunks WHERE profile = $1 ORDER BY namespace, document_id, ordinal",
            &[&profile],
        )
        .await?;
    for row in rows {
        let namespace: String = row.try_get(0)?;
        let document_id: String = row.try_get(1)?;
        let ordinal: i64 = row.try_get(2)?;
        let start: i64 = row.try_get(3)?;
        let end: i64 = row.try_get(4)?;
        let digest: &[u8] = row.try_get(5)?;
        let vector: &[u8] = row.try_get(6)?;
        let slot = index_of
            .get(&(namespace, document_id))
            .copied()
            .ok_or_else(|| model(corrupt("chunk without its source row")))?;
        let chunk = StoredChunk {
            ordinal: u32::try_from(ordinal).map_err(|_| model(corrupt("chunk ordinal")))?,
            start: u64::try_from(start).map_err(|_| model(corrupt("chunk start")))?,
            end: u64::try_from(end).map_err(|_| model(corrupt("chunk end")))?,
            excerpt_digest: digest
                .try_into()
                .map_err(|_| model(corrupt("excerpt digest length")))?,
            vector: decode_vector(vector, limits.dimensions).map_err(model)?,
        };
        if chunk.start > chunk.end {
            return Err(model(corrupt("chunk range is reversed")));
        }
        match &mut sources[slot].state {
            StoredSourceState::Indexed { chunks, .. } => chunks.push(chunk),
            StoredSourceState::Withdrawn => {
                return Err(model(corrupt("chunk stored for a withdrawn source")));
            }
        }
    }
    commit(transaction).await?;
    Ok(sources)
}

/// The owned columns of one chunk row.
struct ChunkRow {
    ordinal: i64,
    start: i64,
    end: i64,
    digest: Vec<u8>,
    vector: Vec<u8>,
}

#[allow(clippy::too_many_arguments)]
async fn replace(
    mut client: deadpool_postgres::Object,
    profile: &[u8],
    namespace: &str,
    document_id: &str,
    generation: i64,
    revision: Option<&str>,
    chunks: &[ChunkRow],
) -> Attempt<ReplaceOutcome> {
    let transaction = client.transaction().await?;
    // The fence is part of the write: the upsert changes the source row only when the stored state
    // admits the new one (it locks the row, so a concurrent replacement waits and is re-checked), and
    // nothing else is written when it did not.
    let admitted = transaction
        .execute(
            "INSERT INTO semantic_sources \
             (profile, namespace, document_id, generation, revision, withdrawn) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (profile, namespace, document_id) DO UPDATE SET \
             generation = excluded.generation, revision = excluded.revision, \
             withdrawn = excluded.withdrawn \
             WHERE NOT semantic_sources.withdrawn \
             AND (excluded.generation > semantic_sources.generation \
             OR (excluded.generation = semantic_sources.generation \
             AND (excluded.withdrawn \
             OR excluded.revision IS NOT DISTINCT FROM semantic_sources.revision)))",
            &[
                &profile,
                &namespace,
                &document_id,
                &generation,
                &revision,
                &revision.is_none(),
            ],
        )
        .await?;
    if admitted == 0 {
        let row = transaction
            .query_one(
                "SELECT generation, withdrawn FROM semantic_sources \
                 WHERE profile = $1 AND namespace = $2 AND document_id = $3",
                &[&profile, &namespace, &document_id],
            )
            .await?;
        let current: i64 = row.try_get(0)?;
        let withdrawn: bool = row.try_get(1)?;
        return Ok(ReplaceOutcome::Stale {
            current: SourceGeneration::new(
                u64::try_from(current).map_err(|_| model(corrupt("negative source generation")))?,
            ),
            withdrawn,
        });
    }
    let removed = transaction
        .execute(
            "DELETE FROM semantic_chunks WHERE profile = $1 AND namespace = $2 AND document_id = $3",
            &[&profile, &namespace, &document_id],
        )
        .await?;
    if !chunks.is_empty() {
        let insert = transaction
            .prepare_cached(
                "INSERT INTO semantic_chunks (profile, namespace, document_id, ordinal, \
                 start_byte, end_byte, excerpt_digest, vector) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .await?;
        for chunk in chunks {
            transaction
                .execute(
                    &insert,
                    &[
                        &profile,
                        &namespace,
                        &document_id,
                        &chunk.ordinal,
                        &chunk.start,
                        &chunk.end,
                        &chunk.digest,
                        &chunk.vector,
                    ],
                )
                .await?;
        }
    }
    let change = i64::try_from(chunks.len())
        .ok()
        .zip(i64::try_from(removed).ok())
        .map(|(added, removed)| added - removed)
        .ok_or_else(|| model(MemoryError::invalid("chunks", "exceeds 2^63 - 1")))?;
    if change != 0 {
        // The row first, then the change: PostgreSQL checks an upsert's proposed row (a removal's
        // negative change) against `chunks >= 0` before it finds the conflict.
        transaction
            .execute(
                "INSERT INTO semantic_chunk_counts (profile, chunks) VALUES ($1, 0) \
                 ON CONFLICT (profile) DO NOTHING",
                &[&profile],
            )
            .await?;
        transaction
            .execute(
                "UPDATE semantic_chunk_counts SET chunks = chunks + $2 WHERE profile = $1",
                &[&profile, &change],
            )
            .await?;
    }
    // Indexed or withdrawn now: no longer unsearchable for any reason.
    transaction
        .execute(
            "DELETE FROM semantic_unindexed \
             WHERE profile = $1 AND namespace = $2 AND document_id = $3",
            &[&profile, &namespace, &document_id],
        )
        .await?;
    commit(transaction).await?;
    Ok(ReplaceOutcome::Replaced)
}

/// The profile's count of stored chunks, kept by every replacement (`semantic_chunk_counts`; 0 before
/// its first chunk), so neither a load's bound nor `stored_chunks` walks the vectors.
async fn stored_chunks<C: GenericClient + Sync>(client: &C, profile: &[u8]) -> Attempt<i64> {
    Ok(client
        .query_one(
            "SELECT coalesce(sum(chunks), 0)::BIGINT FROM semantic_chunk_counts WHERE profile = $1",
            &[&profile],
        )
        .await?
        .try_get(0)?)
}

fn non_negative(value: i64, what: &'static str) -> Attempt<u64> {
    u64::try_from(value).map_err(|_| model(corrupt(what)))
}

impl VectorStore for PostgresVectorStore {
    async fn load_sources(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
    ) -> Result<Vec<StoredSource>, MemoryError> {
        let profile = profile.as_bytes().to_vec();
        self.handle
            .call(
                "load vectors",
                Idempotent::Yes,
                profile,
                move |profile, client| Box::pin(load(client, profile, limits)),
            )
            .await
    }

    async fn replace_source(
        &self,
        profile: &ProfileDigest,
        source: &StoredSource,
    ) -> Result<ReplaceOutcome, MemoryError> {
        let generation = i64::try_from(source.generation.get())
            .map_err(|_| MemoryError::invalid("generation", "exceeds 2^63 - 1"))?;
        let (revision, chunks) = match &source.state {
            StoredSourceState::Indexed { revision, chunks } => {
                let mut rows = Vec::with_capacity(chunks.len());
                for chunk in chunks {
                    rows.push(ChunkRow {
                        ordinal: i64::from(chunk.ordinal),
                        start: i64::try_from(chunk.start)
                            .map_err(|_| MemoryError::invalid("chunk start", "exceeds 2^63 - 1"))?,
                        end: i64::try_from(chunk.end)
                            .map_err(|_| MemoryError::invalid("chunk end", "exceeds 2^63 - 1"))?,
                        digest: chunk.excerpt_digest.to_vec(),
                        vector: encode_vector(&chunk.vector),
                    });
                }
                (Some(revision.as_str().to_owned()), rows)
            }
            StoredSourceState::Withdrawn => (None, Vec::new()),
        };
        let profile = profile.as_bytes().to_vec();
        let namespace = source.key.namespace.as_str().to_owned();
        let document_id = source.key.id.as_str().to_owned();
        // Idempotent: a replacement that already landed is admitted again (same generation and
        // revision) or, for a withdrawal, answered as already done.
        self.handle
            .call(
                "replace vector source",
                Idempotent::Yes,
                (profile, namespace, document_id, revision, chunks),
                move |(profile, namespace, document_id, revision, chunks), client| {
                    Box::pin(replace(
                        client,
                        profile,
                        namespace,
                        document_id,
                        generation,
                        revision.as_deref(),
                        chunks,
                    ))
                },
            )
            .await
    }

    async fn indexed_position(
        &self,
        profile: &ProfileDigest,
    ) -> Result<ChangeSequence, MemoryError> {
        let profile = profile.as_bytes().to_vec();
        self.handle
            .call(
                "read indexed position",
                Idempotent::Yes,
                profile,
                move |profile, client| {
                    Box::pin(async move {
                        let position: Option<i64> = client
                            .query_opt(
                                "SELECT position FROM semantic_positions WHERE profile = $1",
                                &[&profile],
                            )
                            .await?
                            .map(|row| row.try_get(0))
                            .transpose()?;
                        match position {
                            None => Ok(ChangeSequence::ZERO),
                            Some(value) => u64::try_from(value)
                                .map(ChangeSequence::new)
                                .map_err(|_| model(corrupt("negative indexed position"))),
                        }
                    })
                },
            )
            .await
    }

    async fn set_indexed_position(
        &self,
        profile: &ProfileDigest,
        position: ChangeSequence,
    ) -> Result<(), MemoryError> {
        let value = i64::try_from(position.get())
            .map_err(|_| MemoryError::invalid("position", "exceeds 2^63 - 1"))?;
        let profile = profile.as_bytes().to_vec();
        // Idempotent: positions only move forward.
        let params: Params = vec![Box::new(profile), Box::new(value)];
        self.handle
            .call(
                "write indexed position",
                Idempotent::Yes,
                params,
                execute(
                    "INSERT INTO semantic_positions (profile, position) \
                                 VALUES ($1, $2) \
                                 ON CONFLICT (profile) DO UPDATE \
                                 SET position = \
                                 GREATEST(semantic_positions.position, excluded.position)",
                ),
            )
            .await
            .map(|_rows| ())
    }

    async fn record_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
        reason: UnindexedReason,
    ) -> Result<(), MemoryError> {
        let generation = i64::try_from(generation.get())
            .map_err(|_| MemoryError::invalid("generation", "exceeds 2^63 - 1"))?;
        let profile = profile.as_bytes().to_vec();
        let namespace = key.namespace.as_str().to_owned();
        let document_id = key.id.as_str().to_owned();
        let reason = reason.as_str();
        // Idempotent: the upsert keeps the newest generation's record.
        let params: Params = vec![
            Box::new(profile),
            Box::new(namespace),
            Box::new(document_id),
            Box::new(generation),
            Box::new(reason),
        ];
        self.handle
            .call(
                "record unindexed source",
                Idempotent::Yes,
                params,
                execute(
                    "INSERT INTO semantic_unindexed \
                                 (profile, namespace, document_id, generation, reason) \
                                 VALUES ($1, $2, $3, $4, $5) \
                                 ON CONFLICT (profile, namespace, document_id) DO UPDATE SET \
                                 generation = excluded.generation, reason = excluded.reason \
                                 WHERE excluded.generation >= semantic_unindexed.generation",
                ),
            )
            .await
            .map(|_rows| ())
    }

    async fn clear_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<(), MemoryError> {
        let generation = i64::try_from(generation.get())
            .map_err(|_| MemoryError::invalid("generation", "exceeds 2^63 - 1"))?;
        let profile = profile.as_bytes().to_vec();
        let namespace = key.namespace.as_str().to_owned();
        let document_id = key.id.as_str().to_owned();
        // Idempotent: deleting twice leaves the same rows.
        let params: Params = vec![
            Box::new(profile),
            Box::new(namespace),
            Box::new(document_id),
            Box::new(generation),
        ];
        self.handle
            .call(
                "clear unindexed source",
                Idempotent::Yes,
                params,
                execute(
                    "DELETE FROM semantic_unindexed WHERE profile = $1 \
                                 AND namespace = $2 AND document_id = $3 AND generation <= $4",
                ),
            )
            .await
            .map(|_rows| ())
    }

    async fn unindexed_sources(
        &self,
        profile: &ProfileDigest,
        reason: UnindexedReason,
        after: Option<&MemoryKey>,
        limit: usize,
    ) -> Result<Vec<UnindexedSource>, MemoryError> {
        let profile = profile.as_bytes().to_vec();
        let (namespace, document_id) = after.map_or((String::new(), String::new()), |key| {
            (
                key.namespace.as_str().to_owned(),
                key.id.as_str().to_owned(),
            )
        });
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let name = reason.as_str();
        self.handle
            .call(
                "read unindexed sources",
                Idempotent::Yes,
                (profile, namespace, document_id),
                move |(profile, namespace, document_id), client| {
                    Box::pin(async move {
                        let rows = client
                            .query(
                                "SELECT namespace, document_id, generation FROM semantic_unindexed \
                                 WHERE profile = $1 AND reason = $2 \
                                 AND (namespace, document_id) > ($3, $4) \
                                 ORDER BY namespace, document_id LIMIT $5",
                                &[&profile, &name, &namespace, &document_id, &limit],
                            )
                            .await?;
                        let mut sources = Vec::with_capacity(rows.len());
                        for row in rows {
                            let namespace: String = row.try_get(0)?;
                            let document_id: String = row.try_get(1)?;
                            let generation: i64 = row.try_get(2)?;
                            sources.push(UnindexedSource {
                                key: parse_key(&namespace, &document_id).map_err(model)?,
                                generation: SourceGeneration::new(non_negative(
                                    generation,
                                    "negative generation",
                                )?),
                                reason,
                            });
                        }
                        Ok(sources)
                    })
                },
            )
            .await
    }

    async fn stored_chunks(&self, profile: &ProfileDigest) -> Result<u64, MemoryError> {
        let profile = profile.as_bytes().to_vec();
        self.handle
            .call(
                "count stored chunks",
                Idempotent::Yes,
                profile,
                move |profile, client| {
                    Box::pin(async move {
                        let count = stored_chunks(&client, profile).await?;
                        non_negative(count, "negative row count")
                    })
                },
            )
            .await
    }

    async fn unindexed_counts(
        &self,
        profile: &ProfileDigest,
    ) -> Result<Vec<(UnindexedReason, u64)>, MemoryError> {
        let profile = profile.as_bytes().to_vec();
        self.handle
            .call(
                "count unindexed sources",
                Idempotent::Yes,
                profile,
                move |profile, client| {
                    Box::pin(async move {
                        let rows = client
                            .query(
                                "SELECT reason, count(*) FROM semantic_unindexed \
                                 WHERE profile = $1 \
                                 GROUP BY reason",
                                &[&profile],
                            )
                            .await?;
                        let mut counts = Vec::with_capacity(rows.len());
                        for row in rows {
                            let reason: &str = row.try_get(0)?;
                            let count: i64 = row.try_get(1)?;
                            counts.push((
                                UnindexedReason::parse(reason)
                                    .ok_or_else(|| model(corrupt("unknown unindexed reason")))?,
                                non_negative(count, "negative row count")?,
                            ));
                        }
                        counts.sort();
                        Ok(counts)
                    })
                },
            )
            .await
    }

    async fn save_graph(
        &self,
        profile: &ProfileDigest,
        graph: &GraphSnapshot,
    ) -> Result<(), MemoryError> {
        let position = i64::try_from(graph.position.get())
            .map_err(|_| MemoryError::invalid("position", "exceeds 2^63 - 1"))?;
        let chunks = i64::try_from(graph.chunks)
            .map_err(|_| MemoryError::invalid("chunks", "exceeds 2^63 - 1"))?;
        let params: Params = vec![
            Box::new(profile.as_bytes().to_vec()),
            Box::new(position),
            Box::new(graph.vector_set.to_vec()),
            Box::new(chunks),
            Box::new(graph.bytes.clone()),
        ];
        // Idempotent: the same graph written twice is the same row.
        self.handle
            .call(
                "save graph",
                Idempotent::Yes,
                params,
                execute(
                    "INSERT INTO semantic_graphs (profile, position, vector_set, chunks, graph) \
                     VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (profile) DO UPDATE SET position = excluded.position, \
                     vector_set = excluded.vector_set, chunks = excluded.chunks, \
                     graph = excluded.graph",
                ),
            )
            .await
            .map(|_rows| ())
    }

    async fn load_chunk_vectors(
        &self,
        profile: &ProfileDigest,
        chunks: &[ChunkVectorRef],
        dimensions: usize,
    ) -> Result<Vec<Option<Vec<f32>>>, MemoryError> {
        check_chunk_vectors_request(chunks)?;
        let profile = profile.as_bytes().to_vec();
        let namespaces: Vec<String> = chunks
            .iter()
            .map(|chunk| chunk.key.namespace.as_str().to_owned())
            .collect();
        let ids: Vec<String> = chunks
            .iter()
            .map(|chunk| chunk.key.id.as_str().to_owned())
            .collect();
        let ordinals: Vec<i64> = chunks
            .iter()
            .map(|chunk| i64::from(chunk.ordinal))
            .collect();
        let revisions: Vec<String> = chunks
            .iter()
            .map(|chunk| chunk.revision.as_str().to_owned())
            .collect();
        let count = chunks.len();
        self.handle
            .call(
                "read chunk vectors",
                Idempotent::Yes,
                (profile, namespaces, ids, ordinals, revisions),
                move |(profile, namespaces, ids, ordinals, revisions), client| {
                    Box::pin(async move {
                        // One round trip: the wanted chunks as arrays, joined to their source (so
                        // only the named revision of a source that is not withdrawn answers) and to
                        // the chunk rows by primary key.
                        let rows = client
                            .query(
                                "SELECT w.at, c.vector \
                                 FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[]) \
                                 WITH ORDINALITY AS w(namespace, document_id, ordinal, revision, at) \
                                 JOIN semantic_sources s ON s.profile = $1 \
                                 AND s.namespace = w.namespace AND s.document_id = w.document_id \
                                 AND NOT s.withdrawn AND s.revision = w.revision \
                                 JOIN semantic_chunks c ON c.profile = $1 \
                                 AND c.namespace = w.namespace AND c.document_id = w.document_id \
                                 AND c.ordinal = w.ordinal",
                                &[&profile, &namespaces, &ids, &ordinals, &revisions],
                            )
                            .await?;
                        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; count];
                        for row in rows {
                            let at: i64 = row.try_get(0)?;
                            let bytes: &[u8] = row.try_get(1)?;
                            let slot = usize::try_from(at - 1)
                                .ok()
                                .and_then(|at| vectors.get_mut(at))
                                .ok_or_else(|| model(corrupt("chunk vector row out of range")))?;
                            *slot = Some(decode_vector(bytes, dimensions).map_err(model)?);
                        }
                        Ok(vectors)
                    })
                },
            )
            .await
    }

    async fn load_graph(
        &self,
        profile: &ProfileDigest,
        max_bytes: usize,
    ) -> Result<Option<GraphSnapshot>, MemoryError> {
        let profile = profile.as_bytes().to_vec();
        self.handle
            .call(
                "load graph",
                Idempotent::Yes,
                profile,
                move |profile, client| {
                    Box::pin(async move {
                        // The length is read first, so an oversized value is refused before it is
                        // transferred.
                        let length: Option<i32> = client
                            .query_opt(
                                "SELECT octet_length(graph) FROM semantic_graphs \
                                 WHERE profile = $1",
                                &[&profile],
                            )
                            .await?
                            .map(|row| row.try_get(0))
                            .transpose()?;
                        let Some(length) = length else {
                            return Ok(None);
                        };
                        let length = non_negative(i64::from(length), "negative graph length")?;
                        if length > max_bytes as u64 {
                            return Err(model(MemoryError::TooLarge {
                                limit: "stored graph bytes",
                                max: max_bytes as u64,
                                actual: length,
                            }));
                        }
                        let Some(row) = client
                            .query_opt(
                                "SELECT position, vector_set, chunks, graph FROM semantic_graphs \
                                 WHERE profile = $1",
                                &[&profile],
                            )
                            .await?
                        else {
                            return Ok(None);
                        };
                        let position: i64 = row.try_get(0)?;
                        let vector_set: &[u8] = row.try_get(1)?;
                        let chunks: i64 = row.try_get(2)?;
                        let bytes: Vec<u8> = row.try_get(3)?;
                        Ok(Some(GraphSnapshot {
                            position: ChangeSequence::new(non_negative(
                                position,
                                "negative graph position",
                            )?),
                            vector_set: vector_set
                                .try_into()
                                .map_err(|_| model(corrupt("graph vector-set digest length")))?,
                            chunks: non_negative(chunks, "negative graph chunks")?,
                            bytes,
                        }))
                    })
                },
            )
            .await
    }
}
