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
//! - Query embeds the text, searches among the chunks of the access's namespace (the filter applies
//!   before the candidate limit, so other namespaces' chunks never use it up), then revalidates every
//!   candidate against the current document.
//! - Restart: [`SemanticIndex::open`] loads the stored vectors into the exact index and never calls the
//!   model. The HNSW graph is not persisted; by default ([`HnswStartup::Background`]) it is rebuilt
//!   from a copy of the loaded rows on a background thread, so `open` does not wait for it. Until it is
//!   ready, queries asking for HNSW are answered by the exact index and say so
//!   ([`SemanticQueryResult::answered_by`]); refreshes and withdrawals made meanwhile are replayed onto
//!   the graph before it starts answering. A graph is only ever built from the rows this process loaded
//!   or applied, so it can never disagree with the stored vectors. [`SemanticIndex::hnsw_ready`] waits
//!   for it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Duration;

use memory_core::vectors::{
    ProfileDigest, ReplaceOutcome, SourceGeneration, StoredChunk, StoredSource, StoredSourceState,
    VectorLoadLimits, VectorStore,
};
use memory_core::{
    MemoryAccess, MemoryAttribution, MemoryDocument, MemoryKey, MemoryReader, NamespaceAddress,
    Revision,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::chunk::{ChunkId, chunk_text};
use crate::embed::{Embedder, checked_embeddings};
use crate::error::SemanticError;
use crate::index::{
    ChunkMeta, ExactIndex, HnswIndex, HnswParams, IndexBounds, IndexKind, SearchHit, SearchRequest,
    SourceFilter, SourceVersion, VectorIndex,
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
    /// When [`SemanticIndex::open`] builds the HNSW graph.
    pub hnsw_startup: HnswStartup,
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
            hnsw_startup: HnswStartup::default(),
        }
    }
}

/// Loads of at most this many chunks build their HNSW graph inside [`SemanticIndex::open`] whatever
/// the [`HnswStartup`]: such a build takes milliseconds, less than starting a thread is worth.
pub const HNSW_INLINE_BUILD_MAX_CHUNKS: usize = 2_048;

/// When a restart builds the HNSW graph (it is rebuilt from the stored vectors, never persisted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HnswStartup {
    /// On a background thread: `open` returns once the exact index is loaded, and HNSW queries are
    /// answered by the exact index until the graph is ready (a 100,000-chunk graph takes a minute on
    /// two cores, while the exact load takes well under a second).
    #[default]
    Background,
    /// Inside `open`, which returns only once the graph is built.
    Blocking,
    /// Only when [`SemanticIndex::start_hnsw_build`] or [`SemanticIndex::hnsw_ready`] asks: for a
    /// short-lived process that answers exact queries only.
    OnDemand,
}

/// Whether the HNSW graph answers queries yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HnswStatus {
    /// The graph answers HNSW queries.
    Ready,
    /// The graph is being built; HNSW queries are answered by the exact index.
    Building,
    /// No build was asked for yet ([`HnswStartup::OnDemand`]); HNSW queries are answered exactly.
    NotStarted,
    /// The last build failed; HNSW queries are answered exactly until a new build succeeds.
    Failed,
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
    /// The index that answered: `Exact` for an HNSW query while the graph is not ready.
    pub answered_by: IndexKind,
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

/// A source read, chunked and checked, waiting for its vectors.
struct PreparedSource {
    /// Its position in the caller's list.
    slot: usize,
    key: MemoryKey,
    generation: SourceGeneration,
    document: MemoryDocument,
    chunks: Vec<crate::chunk::Chunk>,
    /// What the embedder is given, one per chunk; callers move it out (`std::mem::take`) to embed, so
    /// its size is kept apart in `usage`.
    texts: Vec<String>,
    usage: EmbeddingUsage,
}

/// One answer per source of [`SemanticIndex::refresh_many`], in the caller's order.
pub type RefreshResults = Vec<Result<RefreshOutcome, SemanticError>>;

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
    hnsw: HnswSlot,
}

/// The HNSW graph, or why there is none yet.
enum HnswSlot {
    Ready(Box<HnswIndex>),
    NotStarted,
    /// A build thread was started and has not taken its snapshot yet: changes go to the exact index
    /// only, which the snapshot will copy.
    Starting,
    /// A build from a snapshot of the exact index is running; `changes` made since the snapshot are
    /// replayed onto the graph, in order, before it answers.
    Building {
        changes: Vec<HnswChange>,
    },
    Failed,
}

enum HnswChange {
    Replace(MemoryKey, Vec<(ChunkMeta, Vec<f32>)>),
    Remove(MemoryKey),
}

impl HnswSlot {
    fn status(&self) -> HnswStatus {
        match self {
            Self::Ready(_) => HnswStatus::Ready,
            Self::NotStarted => HnswStatus::NotStarted,
            Self::Starting | Self::Building { .. } => HnswStatus::Building,
            Self::Failed => HnswStatus::Failed,
        }
    }

    /// Applies a source's replacement to the graph, or logs it for the running build.
    fn replace_source(
        &mut self,
        key: &MemoryKey,
        rows: Vec<(ChunkMeta, Vec<f32>)>,
    ) -> Result<(), SemanticError> {
        match self {
            Self::Ready(index) => index.replace_source(key, rows),
            Self::Building { changes } => {
                changes.push(HnswChange::Replace(key.clone(), rows));
                Ok(())
            }
            // The next snapshot copies the exact index, which holds the change.
            Self::NotStarted | Self::Starting | Self::Failed => Ok(()),
        }
    }

    fn remove_source(&mut self, key: &MemoryKey) {
        match self {
            Self::Ready(index) => index.remove_source(key),
            Self::Building { changes } => changes.push(HnswChange::Remove(key.clone())),
            Self::NotStarted | Self::Starting | Self::Failed => {}
        }
    }
}

/// Installs a graph built from a snapshot: replays the changes logged since, then answers with it.
/// Anything but a running build (the index was reset meanwhile) keeps its slot.
fn install_built(state: &mut IndexState, mut index: HnswIndex) -> Result<(), SemanticError> {
    let HnswSlot::Building { changes } = &mut state.hnsw else {
        return Ok(());
    };
    for change in std::mem::take(changes) {
        match change {
            HnswChange::Replace(key, rows) => index.replace_source(&key, rows)?,
            HnswChange::Remove(key) => index.remove_source(&key),
        }
    }
    state.hnsw = HnswSlot::Ready(Box::new(index));
    Ok(())
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
    hnsw_params: HnswParams,
    embedder: Arc<E>,
    store: Arc<S>,
    /// Shared only with a background HNSW build, which holds it weakly: dropping the index cancels
    /// the build.
    state: Arc<RwLock<IndexState>>,
    hnsw_status: Arc<watch::Sender<HnswStatus>>,
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
        // Checked before any loading: hnsw_rs exits the process on some bad values.
        config.hnsw.validate()?;
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
        exact.replace_sources(loaded)?;
        let chunks = exact.live_chunks();
        let build_now = config.hnsw_startup == HnswStartup::Blocking
            || (config.hnsw_startup == HnswStartup::Background
                && chunks <= HNSW_INLINE_BUILD_MAX_CHUNKS);
        let hnsw = if build_now {
            let built =
                HnswIndex::build_from_table(exact.snapshot(), config.bounds, config.hnsw, &|| {
                    false
                })?;
            HnswSlot::Ready(Box::new(
                built.ok_or(SemanticError::Task { what: "hnsw build" })?,
            ))
        } else {
            HnswSlot::NotStarted
        };
        tracing::debug!(sources = sources.len(), chunks, "semantic index loaded");
        let (hnsw_status, _) = watch::channel(hnsw.status());
        let index = Self {
            profile: config.profile,
            digest,
            bounds: config.bounds,
            refresh_limits: config.refresh,
            hnsw_params: config.hnsw,
            embedder,
            store,
            state: Arc::new(RwLock::new(IndexState {
                sources,
                identity_bytes: total_identity,
                exact,
                hnsw,
            })),
            hnsw_status: Arc::new(hnsw_status),
            apply: tokio::sync::Mutex::new(()),
        };
        if config.hnsw_startup == HnswStartup::Background {
            index.start_hnsw_build();
        }
        Ok(index)
    }

    /// Whether the HNSW graph answers queries yet.
    pub fn hnsw_status(&self) -> HnswStatus {
        self.read_state().hnsw.status()
    }

    /// Starts building the HNSW graph on a background thread from a snapshot of the exact index,
    /// unless it is ready or being built. Refreshes and withdrawals made during the build are
    /// replayed onto the graph before it answers. The build stops early when the index is dropped.
    pub fn start_hnsw_build(&self) {
        {
            let mut state = self.write_state();
            if !matches!(state.hnsw, HnswSlot::NotStarted | HnswSlot::Failed) {
                return;
            }
            state.hnsw = HnswSlot::Starting;
        }
        self.hnsw_status.send_replace(HnswStatus::Building);
        let state = Arc::downgrade(&self.state);
        let status = self.hnsw_status.clone();
        let (bounds, params) = (self.bounds, self.hnsw_params);
        // The snapshot (a copy of every vector) is taken on the build thread, so `open` does not
        // wait for it.
        let spawned = std::thread::Builder::new()
            .name("semantic-hnsw-build".to_owned())
            .spawn(move || build_in_background(&state, &status, bounds, params));
        if let Err(error) = spawned {
            tracing::warn!(%error, "could not start the hnsw build thread");
            self.write_state().hnsw = HnswSlot::Failed;
            self.hnsw_status.send_replace(HnswStatus::Failed);
        }
    }

    /// Waits until the HNSW graph answers queries, starting its build if none is running. Fails with
    /// [`SemanticError::Task`] when the build fails.
    pub async fn hnsw_ready(&self) -> Result<(), SemanticError> {
        let mut receiver = self.hnsw_status.subscribe();
        self.start_hnsw_build();
        let status = *receiver
            .wait_for(|status| *status != HnswStatus::Building)
            .await
            .map_err(|_| SemanticError::Task { what: "hnsw build" })?;
        match status {
            HnswStatus::Ready => Ok(()),
            _ => Err(SemanticError::Task { what: "hnsw build" }),
        }
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
        let Some(mut prepared) = self.prepare_source(0, key, generation, document)? else {
            return Ok(RefreshOutcome::Unchanged);
        };
        let texts = std::mem::take(&mut prepared.texts);
        let vectors = if texts.is_empty() {
            Vec::new()
        } else {
            self.embed(texts).await?
        };
        self.apply_prepared(prepared, vectors).await
    }

    /// Refreshes several distinct sources, each as [`Self::refresh`] would, but with one grouped read
    /// of all of them and embedder calls shared between sources: consecutive sources are embedded
    /// together while their chunks fit `max_batch_texts` (a source is never split across calls, so one
    /// with more chunks than that gets a call of its own).
    ///
    /// Every source keeps refresh's guarantees: fencing is checked before the read and again under the
    /// apply lock, and its chunks are replaced atomically (the store first, then both indexes), so a
    /// source is either fully at its new revision or still at its previous chunks.
    ///
    /// `Ok` holds one answer per source, in order: what settles that source alone (`Fenced`,
    /// `Divergent`, `Withdrawn`, a size limit, a failed store write...). `Err` means the call stopped
    /// (the grouped read or an embedder call failed): sources of earlier embedder calls stay applied,
    /// the others keep their previous chunks, and retrying the same list is safe (applied sources
    /// replay as [`RefreshOutcome::Unchanged`]). The same key twice, or `max_batch_texts == 0`, is
    /// `InvalidInput`.
    pub async fn refresh_many<R: MemoryReader>(
        &self,
        reader: &R,
        sources: &[(MemoryKey, SourceGeneration)],
        max_batch_texts: usize,
    ) -> Result<RefreshResults, SemanticError> {
        if max_batch_texts == 0 {
            return Err(SemanticError::invalid(
                "max_batch_texts",
                "must be positive",
            ));
        }
        let mut distinct = std::collections::HashSet::with_capacity(sources.len());
        if !sources.iter().all(|(key, _)| distinct.insert(key)) {
            return Err(SemanticError::invalid(
                "sources",
                "a key may appear only once per batched refresh",
            ));
        }
        let mut results: Vec<Option<Result<RefreshOutcome, SemanticError>>> =
            (0..sources.len()).map(|_| None).collect();
        let mut to_read: Vec<usize> = Vec::with_capacity(sources.len());
        for (slot, (key, generation)) in sources.iter().enumerate() {
            let state = self.read_state();
            match admit(state.sources.get(key), *generation, None)
                .and_then(|_| self.check_source_bounds(&state, key))
            {
                Ok(()) => to_read.push(slot),
                Err(error) => results[slot] = Some(Err(error)),
            }
        }
        let keys: Vec<MemoryKey> = to_read
            .iter()
            .map(|&slot| sources[slot].0.clone())
            .collect();
        let documents = read_documents(reader, &keys).await?;
        let mut prepared = Vec::with_capacity(to_read.len());
        for (slot, document) in to_read.into_iter().zip(documents) {
            let (key, generation) = &sources[slot];
            let Some(document) = document else {
                results[slot] = Some(self.withdraw(key, *generation).await);
                continue;
            };
            match self.prepare_source(slot, key, *generation, document) {
                Ok(Some(source)) => prepared.push(source),
                Ok(None) => results[slot] = Some(Ok(RefreshOutcome::Unchanged)),
                Err(error) => results[slot] = Some(Err(error)),
            }
        }
        let mut pending = prepared.into_iter().peekable();
        while pending.peek().is_some() {
            let mut batch = Vec::new();
            let mut batch_texts = 0usize;
            while let Some(next) = pending.peek() {
                if !batch.is_empty() && batch_texts + next.texts.len() > max_batch_texts {
                    break;
                }
                batch_texts += next.texts.len();
                if let Some(source) = pending.next() {
                    batch.push(source);
                }
            }
            let texts: Vec<String> = batch
                .iter_mut()
                .flat_map(|source| std::mem::take(&mut source.texts))
                .collect();
            let mut vectors = if texts.is_empty() {
                Vec::new()
            } else {
                self.embed(texts).await?
            }
            .into_iter();
            for source in batch {
                let own: Vec<Vec<f32>> = vectors.by_ref().take(source.usage.texts).collect();
                let slot = source.slot;
                results[slot] = Some(self.apply_prepared(source, own).await);
            }
        }
        Ok(results
            .into_iter()
            .map(|result| {
                result.unwrap_or(Err(SemanticError::Task {
                    what: "batched refresh",
                }))
            })
            .collect())
    }

    /// The half of [`Self::refresh`] before the embedder call: checks, bounds and chunks a read source;
    /// `None` when it replays what is indexed. `slot` is the caller's position for it (`refresh_many`).
    fn prepare_source(
        &self,
        slot: usize,
        key: &MemoryKey,
        generation: SourceGeneration,
        document: MemoryDocument,
    ) -> Result<Option<PreparedSource>, SemanticError> {
        {
            let state = self.read_state();
            if let Admission::Replay =
                admit(state.sources.get(key), generation, Some(&document.revision))?
            {
                return Ok(None);
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
        Ok(Some(PreparedSource {
            slot,
            key: key.clone(),
            generation,
            document,
            chunks,
            texts,
            usage,
        }))
    }

    /// The half of [`Self::refresh`] after the embedder call: replaces one prepared source's chunks
    /// with `vectors` (one per chunk), fenced again under the apply lock.
    async fn apply_prepared(
        &self,
        source: PreparedSource,
        vectors: Vec<Vec<f32>>,
    ) -> Result<RefreshOutcome, SemanticError> {
        let PreparedSource {
            key,
            generation,
            document,
            chunks,
            usage,
            ..
        } = source;
        if vectors.len() != chunks.len() {
            return Err(SemanticError::Embed(crate::error::EmbedError::Count {
                expected: chunks.len(),
                actual: vectors.len(),
            }));
        }
        let _apply = self.apply.lock().await;
        {
            let state = self.read_state();
            if let Admission::Replay = admit(
                state.sources.get(&key),
                generation,
                Some(&document.revision),
            )? {
                return Ok(RefreshOutcome::Unchanged);
            }
            self.check_source_bounds(&state, &key)?;
        }
        self.check_chunk_capacity(&key, chunks.len())?;
        let text = &document.content.text;
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
        if let ReplaceOutcome::Stale { current, withdrawn } =
            self.store.replace_source(&self.digest, &stored).await?
        {
            // Another writer of the same store got further; this process's view is behind it.
            tracing::debug!(
                ?current,
                withdrawn,
                "stale semantic refresh refused by the store"
            );
            return Err(if withdrawn {
                SemanticError::Withdrawn
            } else {
                SemanticError::Fenced {
                    current,
                    attempted: generation,
                }
            });
        }
        let mut state = self.write_state();
        state.exact.replace_source(&key, rows.clone())?;
        state.hnsw.replace_source(&key, rows)?;
        self.record(
            &mut state,
            &key,
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
        let outcome = self.store.replace_source(&self.digest, &stored).await?;
        let mut state = self.write_state();
        // Another writer's withdrawal is terminal: catch up with it below.
        if let ReplaceOutcome::Stale {
            current,
            withdrawn: false,
        } = outcome
        {
            return Err(SemanticError::Fenced {
                current,
                attempted: generation,
            });
        }
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
            let candidates = self
                .candidates_within(query, Some(&access.namespace), &limits)
                .await?;
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
                answered_by: candidates.answered_by,
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
        within_deadline(
            limits.timeout_ms,
            self.candidates_within(query, None, &limits),
        )
        .await
    }

    /// As [`SemanticIndex::search_candidates`], among the chunks of `namespace` only: the filter
    /// applies while searching, so `max_candidates` counts only that namespace's chunks. Candidates
    /// still need revalidation (scopes, withdrawal, revision and excerpt are checked there).
    pub async fn search_candidates_in(
        &self,
        query: &str,
        namespace: &NamespaceAddress,
        limits: QueryLimits,
    ) -> Result<SemanticCandidates, SemanticError> {
        check_query_limits(query, &limits)?;
        within_deadline(
            limits.timeout_ms,
            self.candidates_within(query, Some(namespace), &limits),
        )
        .await
    }

    async fn candidates_within(
        &self,
        query: &str,
        namespace: Option<&NamespaceAddress>,
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
        let filter = namespace.map_or(SourceFilter::All, SourceFilter::Namespace);
        let (outcome, answered_by) = {
            let state = self.read_state();
            match (limits.index, &state.hnsw) {
                (IndexKind::Hnsw, HnswSlot::Ready(hnsw)) => {
                    (hnsw.search_in(&vector, request, filter)?, IndexKind::Hnsw)
                }
                // No graph yet: the exact index answers, under the same scan budget.
                (IndexKind::Hnsw, _) | (IndexKind::Exact, _) => (
                    state.exact.search_in(&vector, request, filter)?,
                    IndexKind::Exact,
                ),
            }
        };
        Ok(SemanticCandidates {
            hits: outcome.hits,
            scanned_chunks: outcome.scanned_chunks,
            embedding,
            answered_by,
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
    /// The index that answered: `Exact` for an HNSW search while the graph is not ready.
    pub answered_by: IndexKind,
}

/// The body of a background HNSW build: snapshots the exact index, builds from the snapshot, then
/// installs the graph unless the index was dropped meanwhile.
fn build_in_background(
    state: &Weak<RwLock<IndexState>>,
    status: &watch::Sender<HnswStatus>,
    bounds: IndexBounds,
    params: HnswParams,
) {
    let started = std::time::Instant::now();
    let snapshot = {
        let Some(state) = state.upgrade() else {
            return;
        };
        let mut guard = state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !matches!(guard.hnsw, HnswSlot::Starting) {
            return;
        }
        // Snapshot and slot change under one write lock: every later change reaches the log.
        guard.hnsw = HnswSlot::Building {
            changes: Vec::new(),
        };
        guard.exact.snapshot()
    };
    let cancelled = || state.strong_count() == 0;
    // A panic inside hnsw_rs must not leave the slot `Building` forever (its change log would grow
    // with every refresh and `hnsw_ready` would never return): it ends as a failed build.
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        HnswIndex::build_from_table(snapshot, bounds, params, &cancelled)
    }))
    .unwrap_or(Err(SemanticError::Task { what: "hnsw build" }));
    let Some(state) = state.upgrade() else {
        return;
    };
    let mut guard = state
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let installed = match built {
        Ok(Some(index)) => install_built(&mut guard, index),
        Ok(None) => return,
        Err(error) => Err(error),
    };
    match installed {
        Ok(()) => {
            tracing::debug!(
                millis = started.elapsed().as_millis() as u64,
                "hnsw graph ready"
            );
        }
        Err(error) => {
            tracing::warn!(%error, "hnsw build failed; the exact index answers hnsw queries");
            guard.hnsw = HnswSlot::Failed;
        }
    }
    status.send_replace(guard.hnsw.status());
}

/// One grouped read of `keys`, answered in their order; a reader that answers another number of
/// documents is corrupt (positions would no longer match keys).
async fn read_documents<R: MemoryReader>(
    reader: &R,
    keys: &[MemoryKey],
) -> Result<Vec<Option<MemoryDocument>>, SemanticError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let documents = reader.read_many(keys).await?;
    if documents.len() != keys.len() {
        return Err(SemanticError::Store(memory_core::MemoryError::Corrupt {
            what: "read_many answered another number of documents".to_owned(),
        }));
    }
    Ok(documents)
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
    let documents = read_documents(reader, &keys).await?;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::index::test_support::{key, meta, unit};

    fn point(id: &str, angle: f32) -> Vec<(ChunkMeta, Vec<f32>)> {
        vec![(meta(id, 0), unit(&[angle.cos(), angle.sin()]))]
    }

    fn ids(index: &dyn VectorIndex) -> Vec<String> {
        let request = SearchRequest {
            limit: 6,
            min_score: -1.0,
            max_scanned_chunks: 1_000,
        };
        index
            .search(&unit(&[1.0, 0.0]), request)
            .unwrap()
            .hits
            .iter()
            .map(|hit| hit.chunk.source.key.id.to_string())
            .collect()
    }

    #[test]
    fn changes_made_during_a_build_are_replayed_before_the_graph_answers() {
        let bounds = IndexBounds::for_dimensions(2);
        let params = HnswParams {
            max_connections: 4,
            ef_construction: 64,
            ef_search: 64,
            max_layers: 4,
            rebuild_tombstone_fraction: 0.5,
        };
        let mut exact = ExactIndex::new(2, bounds).unwrap();
        for i in 0..40u16 {
            let id = format!("s{i:02}");
            exact
                .replace_source(&key(&id), point(&id, f32::from(i) * 0.05))
                .unwrap();
        }
        let mut state = IndexState {
            sources: HashMap::new(),
            identity_bytes: 0,
            exact,
            hnsw: HnswSlot::Building {
                changes: Vec::new(),
            },
        };
        let snapshot = state.exact.snapshot();
        // After the snapshot: the best source moves away, the second leaves, a new best arrives.
        let changes = [("s00", 3.0f32), ("new", 0.01)];
        for (id, angle) in changes {
            state
                .exact
                .replace_source(&key(id), point(id, angle))
                .unwrap();
            state
                .hnsw
                .replace_source(&key(id), point(id, angle))
                .unwrap();
        }
        state.exact.remove_source(&key("s01"));
        state.hnsw.remove_source(&key("s01"));
        assert_eq!(state.hnsw.status(), HnswStatus::Building);

        assert!(
            HnswIndex::build_from_table(snapshot.clone(), bounds, params, &|| true)
                .unwrap()
                .is_none(),
            "a cancelled build yields no graph"
        );
        let built = HnswIndex::build_from_table(snapshot, bounds, params, &|| false)
            .unwrap()
            .unwrap();
        assert_eq!(
            ids(&built)[..2],
            ["s00", "s01"],
            "the snapshot predates the changes"
        );
        install_built(&mut state, built).unwrap();
        let HnswSlot::Ready(hnsw) = &state.hnsw else {
            panic!("the installed graph answers");
        };
        let expected = ids(&state.exact);
        assert_eq!(expected[..3], ["new", "s02", "s03"]);
        assert_eq!(ids(hnsw.as_ref()), expected);
        assert_eq!(hnsw.live_chunks(), state.exact.live_chunks());
    }
}
