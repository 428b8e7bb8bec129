//! [`SemanticIndex`]: refresh, withdrawal and query (SPEC §4) over both indexes, persisted through a
//! [`VectorStore`].
//!
//! - Refresh reads the source, chunks it, checks size and chunk limits, embeds (on a blocking thread),
//!   then, under one apply lock, re-checks fencing, persists the source's new chunks in one store call
//!   and swaps them into both indexes. A failed or cancelled refresh changes nothing: the embedder runs
//!   before anything is written, and the store call and the in-memory swap have no await between them
//!   that could leave one without the other (the store is written first; a crash in between is healed by
//!   the reload).
//! - Generations fence refreshes: an older generation than the recorded one is refused, the same
//!   generation with another revision is refused as divergent, the same one with the same revision is a
//!   replay. Withdrawal is terminal; replaying it charges nothing twice.
//! - A document that reads as absent is treated as withdrawn: stores never delete documents, so absence
//!   after a committed change means withdrawal. Refresh only keys that were written.
//! - Query embeds the text, searches, then revalidates every candidate against the current document.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use memory_core::vectors::{
    ProfileDigest, SourceGeneration, StoredChunk, StoredSource, StoredSourceState,
    VectorLoadLimits, VectorStore,
};
use memory_core::{
    MemoryAccess, MemoryAttribution, MemoryDocument, MemoryKey, MemoryReader, Revision,
};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::chunk::{ChunkId, chunk_text};
use crate::embed::{Embedder, checked_embeddings};
use crate::error::SemanticError;
use crate::index::{
    ChunkMeta, ExactIndex, HnswIndex, HnswParams, IndexBounds, IndexKind, SearchHit, SearchRequest,
    SourceVersion, VectorIndex,
};
use crate::limits::{QueryLimits, RefreshLimits};
use crate::profile::{Preprocessing, SemanticProfile};

/// Everything a [`SemanticIndex`] is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticIndexConfig {
    /// The profile; its digest keys stored vectors.
    pub profile: SemanticProfile,
    /// Bounds of both indexes.
    pub bounds: IndexBounds,
    /// HNSW parameters.
    pub hnsw: HnswParams,
    /// Refresh limits.
    pub refresh: RefreshLimits,
}

impl SemanticIndexConfig {
    /// The profile with the largest SPEC bounds for its dimensions and default parameters.
    pub fn new(profile: SemanticProfile) -> Self {
        let bounds = IndexBounds::for_dimensions(profile.dimensions);
        Self {
            profile,
            bounds,
            hnsw: HnswParams::default(),
            refresh: RefreshLimits::default(),
        }
    }
}

/// What a refresh or withdrawal did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefreshOutcome {
    /// The source's chunks were replaced.
    Indexed {
        /// The embedded revision.
        revision: Revision,
        /// How many chunks it has now.
        chunks: usize,
        /// What the embedder was asked to do.
        embedding: EmbeddingUsage,
    },
    /// The same generation and revision were already indexed; nothing was done.
    Unchanged,
    /// The source was withdrawn now.
    Withdrawn,
    /// The source was already withdrawn; nothing was charged again.
    AlreadyWithdrawn,
}

/// Embedder work done by one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct EmbeddingUsage {
    /// Texts embedded.
    pub texts: usize,
    /// Their UTF-8 bytes, after preprocessing.
    pub bytes: usize,
}

/// One revalidated query hit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SemanticHit {
    /// The source document's key.
    pub key: MemoryKey,
    /// Its current revision (equal to the embedded one, or the hit would have been dropped).
    pub revision: Revision,
    /// The generation that embedded it.
    pub generation: SourceGeneration,
    /// The chunk's ordinal.
    pub ordinal: u32,
    /// The chunk's UTF-8 byte range in the document text.
    pub start: usize,
    /// End of that range.
    pub end: usize,
    /// Cosine similarity with the query.
    pub score: f32,
    /// The chunk's exact text, taken from the current document.
    pub excerpt: String,
    /// The document's locator.
    pub locator: String,
    /// The document's attributions.
    pub attributions: Vec<MemoryAttribution>,
}

impl SemanticHit {
    /// The chunk's id under `profile`.
    pub fn chunk_id(&self, profile: ProfileDigest) -> ChunkId {
        ChunkId {
            profile,
            source: self.key.clone(),
            revision: self.revision.clone(),
            ordinal: self.ordinal,
        }
    }
}

/// A query's answer and its accounting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SemanticQueryResult {
    /// Hits in rank order.
    pub hits: Vec<SemanticHit>,
    /// Chunks the index scored.
    pub scanned_chunks: usize,
    /// Candidates dropped because their source is missing, withdrawn, at another revision, or no longer
    /// holds the excerpt.
    pub excluded_stale: usize,
    /// Candidates dropped because the access may not read their source.
    pub excluded_unauthorized: usize,
    /// Embedder work for the query text.
    pub embedding: EmbeddingUsage,
}

/// Counts describing the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexStats {
    /// Sources known, tombstones included.
    pub sources: usize,
    /// Withdrawn sources.
    pub withdrawn: usize,
    /// Chunks searchable.
    pub live_chunks: usize,
    /// Aggregate bytes of source identities.
    pub identity_bytes: usize,
}

#[derive(Debug, Clone)]
struct SourceRecord {
    generation: SourceGeneration,
    /// `None` once withdrawn.
    revision: Option<Revision>,
}

struct IndexState {
    sources: HashMap<MemoryKey, SourceRecord>,
    identity_bytes: usize,
    exact: ExactIndex,
    hnsw: HnswIndex,
}

fn identity_bytes(key: &MemoryKey) -> usize {
    key.namespace.as_str().len() + key.id.as_str().len()
}

pub(crate) fn excerpt_digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Semantic recall over one profile.
pub struct SemanticIndex<E, S> {
    profile: SemanticProfile,
    digest: ProfileDigest,
    bounds: IndexBounds,
    refresh_limits: RefreshLimits,
    embedder: Arc<E>,
    store: Arc<S>,
    state: RwLock<IndexState>,
    apply: tokio::sync::Mutex<()>,
}

impl<E, S> std::fmt::Debug for SemanticIndex<E, S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SemanticIndex")
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

/// Whether a change at `generation` may apply over `record`.
enum Admission {
    Proceed,
    Replay,
}

fn admit(
    record: Option<&SourceRecord>,
    generation: SourceGeneration,
    revision: Option<&Revision>,
) -> Result<Admission, SemanticError> {
    let Some(record) = record else {
        return Ok(Admission::Proceed);
    };
    if record.revision.is_none() {
        return Err(SemanticError::Withdrawn);
    }
    if generation < record.generation {
        return Err(SemanticError::Fenced {
            current: record.generation,
            attempted: generation,
        });
    }
    if generation == record.generation {
        return match revision {
            Some(revision) if record.revision.as_ref() == Some(revision) => Ok(Admission::Replay),
            Some(_) => Err(SemanticError::Divergent { generation }),
            None => Ok(Admission::Proceed),
        };
    }
    Ok(Admission::Proceed)
}

impl<E: Embedder, S: VectorStore> SemanticIndex<E, S> {
    /// Opens the index: validates the configuration, then loads every vector stored for the profile
    /// (never calling the embedder) into both indexes.
    pub async fn open(
        config: SemanticIndexConfig,
        embedder: Arc<E>,
        store: Arc<S>,
    ) -> Result<Self, SemanticError> {
        config.profile.validate()?;
        config.refresh.validate()?;
        let dimensions = config.profile.dimensions;
        if embedder.dimensions() != dimensions {
            return Err(SemanticError::invalid(
                "embedder",
                format!(
                    "produces {} dimensions, the profile says {dimensions}",
                    embedder.dimensions()
                ),
            ));
        }
        let mut exact = ExactIndex::new(dimensions, config.bounds)?;
        let mut hnsw = HnswIndex::new(dimensions, config.bounds, config.hnsw)?;
        let digest = config.profile.digest()?;
        let stored = store
            .load_sources(
                &digest,
                VectorLoadLimits {
                    dimensions,
                    max_sources: config.bounds.max_sources,
                    max_chunks: config.bounds.max_chunks,
                },
            )
            .await?;
        let mut sources = HashMap::with_capacity(stored.len());
        let mut loaded = Vec::with_capacity(stored.len());
        let mut total_identity = 0usize;
        for source in stored {
            total_identity += identity_bytes(&source.key);
            if total_identity > config.bounds.max_source_identity_bytes {
                return Err(SemanticError::TooLarge {
                    limit: "max_source_identity_bytes",
                    max: config.bounds.max_source_identity_bytes as u64,
                    actual: total_identity as u64,
                });
            }
            let revision = match source.state {
                StoredSourceState::Withdrawn => None,
                StoredSourceState::Indexed { revision, chunks } => {
                    let version = Arc::new(SourceVersion {
                        key: source.key.clone(),
                        revision: revision.clone(),
                        generation: source.generation,
                    });
                    let mut rows = Vec::with_capacity(chunks.len());
                    for chunk in chunks {
                        let mut vector = chunk.vector;
                        crate::embed::normalize(&mut vector, dimensions)?;
                        rows.push((
                            ChunkMeta {
                                source: version.clone(),
                                ordinal: chunk.ordinal,
                                start: usize::try_from(chunk.start).unwrap_or(usize::MAX),
                                end: usize::try_from(chunk.end).unwrap_or(usize::MAX),
                                excerpt_digest: chunk.excerpt_digest,
                            },
                            vector,
                        ));
                    }
                    loaded.push((source.key.clone(), rows));
                    Some(revision)
                }
            };
            sources.insert(
                source.key,
                SourceRecord {
                    generation: source.generation,
                    revision,
                },
            );
        }
        exact.replace_sources(loaded.clone())?;
        hnsw.replace_sources(loaded)?;
        tracing::debug!(
            sources = sources.len(),
            chunks = exact.live_chunks(),
            "semantic index loaded"
        );
        Ok(Self {
            profile: config.profile,
            digest,
            bounds: config.bounds,
            refresh_limits: config.refresh,
            embedder,
            store,
            state: RwLock::new(IndexState {
                sources,
                identity_bytes: total_identity,
                exact,
                hnsw,
            }),
            apply: tokio::sync::Mutex::new(()),
        })
    }

    /// The profile.
    pub fn profile(&self) -> &SemanticProfile {
        &self.profile
    }

    /// The profile's digest.
    pub fn digest(&self) -> ProfileDigest {
        self.digest
    }

    /// The bounds both indexes were built with (a query that must scan every chunk can use
    /// `bounds().max_chunks` as its `max_scanned_chunks`).
    pub fn bounds(&self) -> IndexBounds {
        self.bounds
    }

    /// The vector store.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    fn read_state(&self) -> RwLockReadGuard<'_, IndexState> {
        // Every mutation checks before it changes anything, so a panic cannot leave half-applied state.
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_state(&self) -> RwLockWriteGuard<'_, IndexState> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts describing the index.
    pub fn stats(&self) -> IndexStats {
        let state = self.read_state();
        IndexStats {
            sources: state.sources.len(),
            withdrawn: state
                .sources
                .values()
                .filter(|record| record.revision.is_none())
                .count(),
            live_chunks: state.exact.live_chunks(),
            identity_bytes: state.identity_bytes,
        }
    }

    /// Checks that recording `key` keeps the source bounds, without changing anything.
    fn check_source_bounds(
        &self,
        state: &IndexState,
        key: &MemoryKey,
    ) -> Result<(), SemanticError> {
        if state.sources.contains_key(key) {
            return Ok(());
        }
        if state.sources.len() + 1 > self.bounds.max_sources {
            return Err(SemanticError::TooLarge {
                limit: "max_sources",
                max: self.bounds.max_sources as u64,
                actual: (state.sources.len() + 1) as u64,
            });
        }
        let identity = state.identity_bytes + identity_bytes(key);
        if identity > self.bounds.max_source_identity_bytes {
            return Err(SemanticError::TooLarge {
                limit: "max_source_identity_bytes",
                max: self.bounds.max_source_identity_bytes as u64,
                actual: identity as u64,
            });
        }
        Ok(())
    }

    fn record(&self, state: &mut IndexState, key: &MemoryKey, record: SourceRecord) {
        if state.sources.insert(key.clone(), record).is_none() {
            state.identity_bytes += identity_bytes(key);
        }
    }

    /// Embeds `texts` on a blocking thread and checks the vectors.
    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, SemanticError> {
        let embedder = self.embedder.clone();
        let count = texts.len();
        let vectors = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            embedder.embed(&refs)
        })
        .await
        .map_err(|_| SemanticError::Task { what: "embedding" })??;
        Ok(checked_embeddings(vectors, count, self.profile.dimensions)?)
    }

    fn embedded_text(&self, document: &MemoryDocument, chunk: &str) -> String {
        match (
            self.profile.preprocessing,
            document.content.attributions.first(),
        ) {
            (Preprocessing::SpeakerThenText, Some(attribution)) => {
                format!("{}: {chunk}", attribution.speaker)
            }
            _ => chunk.to_owned(),
        }
    }

    /// Re-embeds `key` from `reader` at `generation` and replaces its chunks atomically.
    pub async fn refresh<R: MemoryReader>(
        &self,
        reader: &R,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<RefreshOutcome, SemanticError> {
        {
            let state = self.read_state();
            admit(state.sources.get(key), generation, None)?;
            self.check_source_bounds(&state, key)?;
        }
        let Some(document) = reader.read(key).await? else {
            return self.withdraw(key, generation).await;
        };
        {
            let state = self.read_state();
            if let Admission::Replay =
                admit(state.sources.get(key), generation, Some(&document.revision))?
            {
                return Ok(RefreshOutcome::Unchanged);
            }
        }
        let text = &document.content.text;
        if text.len() > self.refresh_limits.max_source_bytes {
            return Err(SemanticError::TooLarge {
                limit: "max_source_bytes",
                max: self.refresh_limits.max_source_bytes as u64,
                actual: text.len() as u64,
            });
        }
        let chunks = chunk_text(text, self.profile.chunking);
        if chunks.len() > self.refresh_limits.max_chunks_per_source {
            return Err(SemanticError::TooLarge {
                limit: "max_chunks_per_source",
                max: self.refresh_limits.max_chunks_per_source as u64,
                actual: chunks.len() as u64,
            });
        }
        self.check_chunk_capacity(key, chunks.len())?;
        let texts: Vec<String> = chunks
            .iter()
            .map(|chunk| self.embedded_text(&document, chunk.text(text)))
            .collect();
        let usage = EmbeddingUsage {
            texts: texts.len(),
            bytes: texts.iter().map(String::len).sum(),
        };
        let vectors = if texts.is_empty() {
            Vec::new()
        } else {
            self.embed(texts).await?
        };

        let _apply = self.apply.lock().await;
        {
            let state = self.read_state();
            if let Admission::Replay =
                admit(state.sources.get(key), generation, Some(&document.revision))?
            {
                return Ok(RefreshOutcome::Unchanged);
            }
            self.check_source_bounds(&state, key)?;
        }
        self.check_chunk_capacity(key, chunks.len())?;
        let version = Arc::new(SourceVersion {
            key: key.clone(),
            revision: document.revision.clone(),
            generation,
        });
        let mut stored_chunks = Vec::with_capacity(chunks.len());
        let mut rows = Vec::with_capacity(chunks.len());
        for (chunk, vector) in chunks.iter().zip(vectors) {
            let digest = excerpt_digest(chunk.text(text));
            stored_chunks.push(StoredChunk {
                ordinal: chunk.ordinal,
                start: chunk.start as u64,
                end: chunk.end as u64,
                excerpt_digest: digest,
                vector: vector.clone(),
            });
            rows.push((
                ChunkMeta {
                    source: version.clone(),
                    ordinal: chunk.ordinal,
                    start: chunk.start,
                    end: chunk.end,
                    excerpt_digest: digest,
                },
                vector,
            ));
        }
        let stored = StoredSource {
            key: key.clone(),
            generation,
            state: StoredSourceState::Indexed {
                revision: document.revision.clone(),
                chunks: stored_chunks,
            },
        };
        self.store.replace_source(&self.digest, &stored).await?;
        let mut state = self.write_state();
        state.exact.replace_source(key, rows.clone())?;
        state.hnsw.replace_source(key, rows)?;
        self.record(
            &mut state,
            key,
            SourceRecord {
                generation,
                revision: Some(document.revision.clone()),
            },
        );
        tracing::debug!(chunks = chunks.len(), "semantic source refreshed");
        Ok(RefreshOutcome::Indexed {
            revision: document.revision,
            chunks: chunks.len(),
            embedding: usage,
        })
    }

    fn check_chunk_capacity(
        &self,
        key: &MemoryKey,
        new_chunks: usize,
    ) -> Result<(), SemanticError> {
        let state = self.read_state();
        // The replaced revision's chunks leave the index, so only the net growth counts.
        let old = state.exact.chunks_of(key);
        let live_after = state.exact.live_chunks() - old + new_chunks;
        if live_after > self.bounds.max_chunks {
            return Err(SemanticError::TooLarge {
                limit: "max_chunks",
                max: self.bounds.max_chunks as u64,
                actual: live_after as u64,
            });
        }
        Ok(())
    }

    /// Withdraws `key` at `generation`: terminal, and replaying it charges nothing twice.
    pub async fn withdraw(
        &self,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> Result<RefreshOutcome, SemanticError> {
        let _apply = self.apply.lock().await;
        {
            let state = self.read_state();
            match state.sources.get(key) {
                Some(record) if record.revision.is_none() => {
                    return Ok(RefreshOutcome::AlreadyWithdrawn);
                }
                Some(record) if generation < record.generation => {
                    return Err(SemanticError::Fenced {
                        current: record.generation,
                        attempted: generation,
                    });
                }
                _ => {}
            }
            self.check_source_bounds(&state, key)?;
        }
        let stored = StoredSource {
            key: key.clone(),
            generation,
            state: StoredSourceState::Withdrawn,
        };
        self.store.replace_source(&self.digest, &stored).await?;
        let mut state = self.write_state();
        state.exact.remove_source(key);
        state.hnsw.remove_source(key);
        self.record(
            &mut state,
            key,
            SourceRecord {
                generation,
                revision: None,
            },
        );
        tracing::debug!("semantic source withdrawn");
        Ok(RefreshOutcome::Withdrawn)
    }

    /// Answers `query` for `access` within `limits`; see the module docs.
    pub async fn query<R: MemoryReader>(
        &self,
        reader: &R,
        access: &MemoryAccess,
        query: &str,
        limits: QueryLimits,
    ) -> Result<SemanticQueryResult, SemanticError> {
        check_query_limits(query, &limits)?;
        within_deadline(limits.timeout_ms, async {
            let candidates = self.candidates_within(query, &limits).await?;
            let revalidated = revalidate(reader, access, candidates.hits, &limits).await?;
            tracing::debug!(
                scanned = candidates.scanned_chunks,
                hits = revalidated.hits.len(),
                stale = revalidated.excluded_stale,
                unauthorized = revalidated.excluded_unauthorized,
                "semantic query answered"
            );
            Ok(SemanticQueryResult {
                hits: revalidated.hits,
                scanned_chunks: candidates.scanned_chunks,
                excluded_stale: revalidated.excluded_stale,
                excluded_unauthorized: revalidated.excluded_unauthorized,
                embedding: candidates.embedding,
            })
        })
        .await
    }

    /// Embeds `query` and searches, WITHOUT revalidation: the candidates may be stale, withdrawn or
    /// belong to any namespace, so they must go through a revalidation (as [`SemanticIndex::query`]
    /// and the recall sources of [`crate::recall`] do) before anything reaches a model. The same limits
    /// apply as for a query, except the byte budgets of revalidation.
    pub async fn search_candidates(
        &self,
        query: &str,
        limits: QueryLimits,
    ) -> Result<SemanticCandidates, SemanticError> {
        check_query_limits(query, &limits)?;
        within_deadline(limits.timeout_ms, self.candidates_within(query, &limits)).await
    }

    async fn candidates_within(
        &self,
        query: &str,
        limits: &QueryLimits,
    ) -> Result<SemanticCandidates, SemanticError> {
        let embedding = EmbeddingUsage {
            texts: 1,
            bytes: query.len(),
        };
        let vector = self
            .embed(vec![query.to_owned()])
            .await?
            .pop()
            .ok_or(SemanticError::Task { what: "embedding" })?;
        let request = SearchRequest {
            limit: limits.max_candidates,
            min_score: limits.min_score,
            max_scanned_chunks: limits.max_scanned_chunks,
        };
        let outcome = {
            let state = self.read_state();
            match limits.index {
                IndexKind::Exact => state.exact.search(&vector, request)?,
                IndexKind::Hnsw => state.hnsw.search(&vector, request)?,
            }
        };
        Ok(SemanticCandidates {
            hits: outcome.hits,
            scanned_chunks: outcome.scanned_chunks,
            embedding,
        })
    }
}

/// Unrevalidated search candidates; see [`SemanticIndex::search_candidates`].
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticCandidates {
    /// Chunk hits in rank order, at most `max_candidates`, each scoring at least `min_score`.
    pub hits: Vec<SearchHit>,
    /// Chunks the index scored.
    pub scanned_chunks: usize,
    /// Embedder work for the query text.
    pub embedding: EmbeddingUsage,
}

fn check_query_limits(query: &str, limits: &QueryLimits) -> Result<(), SemanticError> {
    limits.validate()?;
    if query.len() > limits.max_query_bytes {
        return Err(SemanticError::TooLarge {
            limit: "max_query_bytes",
            max: limits.max_query_bytes as u64,
            actual: query.len() as u64,
        });
    }
    Ok(())
}

/// Runs `work` under the query deadline.
pub(crate) async fn within_deadline<T>(
    timeout_ms: u64,
    work: impl std::future::Future<Output = Result<T, SemanticError>>,
) -> Result<T, SemanticError> {
    tokio::time::timeout(Duration::from_millis(timeout_ms), work)
        .await
        .map_err(|_| SemanticError::Deadline { timeout_ms })?
}

/// How a chunk candidate fares against its source's current document.
pub(crate) enum ChunkCheck<'d> {
    /// The document holds the chunk at the embedded revision.
    Current {
        /// The current document.
        document: &'d MemoryDocument,
        /// The chunk's exact text in it.
        excerpt: &'d str,
    },
    /// Missing, withdrawn, at another revision, or no longer holding the excerpt.
    Stale,
    /// Another key or a document the access may not read.
    Unauthorized,
}

/// Checks a chunk against the current document (`None`: missing or withdrawn): key, access, revision,
/// byte range and exact excerpt.
pub(crate) fn check_chunk<'d>(
    document: Option<&'d MemoryDocument>,
    chunk: &ChunkMeta,
    access: &MemoryAccess,
) -> ChunkCheck<'d> {
    let Some(document) = document else {
        return ChunkCheck::Stale;
    };
    if document.key != chunk.source.key || !document.is_visible_to(access) {
        return ChunkCheck::Unauthorized;
    }
    if document.revision != chunk.source.revision {
        return ChunkCheck::Stale;
    }
    match document.content.text.get(chunk.start..chunk.end) {
        Some(excerpt) if excerpt_digest(excerpt) == chunk.excerpt_digest => {
            ChunkCheck::Current { document, excerpt }
        }
        _ => ChunkCheck::Stale,
    }
}

struct Revalidated {
    hits: Vec<SemanticHit>,
    excluded_stale: usize,
    excluded_unauthorized: usize,
}

/// Rereads each candidate's source once, drops what is stale or unauthorized, keeps rank order and
/// enforces the byte budgets.
async fn revalidate<R: MemoryReader>(
    reader: &R,
    access: &MemoryAccess,
    candidates: Vec<SearchHit>,
    limits: &QueryLimits,
) -> Result<Revalidated, SemanticError> {
    let mut keys: Vec<MemoryKey> = Vec::new();
    let mut slot_of: HashMap<MemoryKey, usize> = HashMap::new();
    for candidate in &candidates {
        let key = &candidate.chunk.source.key;
        if !slot_of.contains_key(key) {
            slot_of.insert(key.clone(), keys.len());
            keys.push(key.clone());
        }
    }
    let documents = if keys.is_empty() {
        Vec::new()
    } else {
        reader.read_many(&keys).await?
    };
    if documents.len() != keys.len() {
        return Err(SemanticError::Store(memory_core::MemoryError::Corrupt {
            what: "read_many answered another number of documents".to_owned(),
        }));
    }
    let mut result = Revalidated {
        hits: Vec::new(),
        excluded_stale: 0,
        excluded_unauthorized: 0,
    };
    let mut source_bytes = 0usize;
    let mut charged = vec![false; keys.len()];
    let mut output_bytes = 2usize;
    for candidate in candidates {
        let chunk = &candidate.chunk;
        let slot = slot_of[&chunk.source.key];
        let (document, excerpt) = match check_chunk(documents[slot].as_ref(), chunk, access) {
            ChunkCheck::Current { document, excerpt } => (document, excerpt),
            ChunkCheck::Stale => {
                result.excluded_stale += 1;
                continue;
            }
            ChunkCheck::Unauthorized => {
                result.excluded_unauthorized += 1;
                continue;
            }
        };
        if !charged[slot] {
            charged[slot] = true;
            source_bytes = source_bytes.saturating_add(
                serde_json::to_vec(document)
                    .map(|json| json.len())
                    .unwrap_or(usize::MAX),
            );
            if source_bytes > limits.max_source_bytes {
                return Err(SemanticError::Budget {
                    limit: "max_source_bytes",
                    max: limits.max_source_bytes as u64,
                    actual: source_bytes as u64,
                });
            }
        }
        let hit = SemanticHit {
            key: document.key.clone(),
            revision: document.revision.clone(),
            generation: chunk.source.generation,
            ordinal: chunk.ordinal,
            start: chunk.start,
            end: chunk.end,
            score: candidate.score,
            excerpt: excerpt.to_owned(),
            locator: document.locator.clone(),
            attributions: document.content.attributions.clone(),
        };
        output_bytes = output_bytes.saturating_add(
            serde_json::to_vec(&hit)
                .map(|json| json.len() + 1)
                .unwrap_or(usize::MAX),
        );
        if output_bytes > limits.max_output_bytes {
            return Err(SemanticError::Budget {
                limit: "max_output_bytes",
                max: limits.max_output_bytes as u64,
                actual: output_bytes as u64,
            });
        }
        result.hits.push(hit);
    }
    Ok(result)
}
