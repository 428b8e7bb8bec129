//! [`SemanticIndex`]: refresh, withdrawal and query (SPEC §4) over both indexes, persisted through a
//! [`VectorStore`], with the HNSW graph persisted beside the vectors.
//!
//! By concern: `refresh` (refresh, batched refresh, withdrawal), `query` (search and
//! revalidation), `graph` (the HNSW graph's lifecycle: load, background build and rebuild,
//! persistence), `state` (the in-memory state under one lock).
//!
//! - Refresh reads the source, chunks it, checks size and chunk limits and the index's capacity,
//!   embeds (on a blocking thread), then, under one apply lock, re-checks fencing and capacity,
//!   persists the source's new chunks in one store call and swaps them into both indexes. A failed
//!   or cancelled refresh changes nothing: the embedder runs before anything is written, and the store
//!   call and the in-memory swap have no await between them that could leave one without the other
//!   (the store is written first; a crash in between is healed by the reload). A refresh that would
//!   pass `max_chunks` live chunks is refused with `TooLarge { limit: "max_chunks" }`.
//! - Generations fence refreshes: an older generation than the recorded one is refused, the same
//!   generation with another revision is refused as divergent, the same one with the same revision is a
//!   replay. Withdrawal is terminal; replaying it charges nothing twice.
//! - A document that reads as absent is treated as withdrawn: stores never delete documents, so absence
//!   after a committed change means withdrawal. Refresh only keys that were written.
//! - Query embeds the text, searches among the chunks of the access's namespace (the filter applies
//!   before the candidate limit, so other namespaces' chunks never use it up), then revalidates every
//!   candidate against the current document. [`SemanticQueryResult::answered_by`] says which index
//!   ranked the candidates: an HNSW query is answered exactly while no graph is ready.
//! - Tombstones (replaced and withdrawn chunks) are reclaimed: the exact index is compacted once they
//!   pass a quarter of its rows, from a shared snapshot on a blocking thread, and swapped in
//!   (`compact`: queries read the old rows meanwhile); the HNSW graph, which
//!   cannot drop points, is rebuilt once they pass [`HnswParams::rebuild_tombstone_fraction`], from a
//!   snapshot of the exact index on a background thread, while the old graph keeps answering (every
//!   change is applied to it and logged for the new one, which replays the log before it is swapped
//!   in). No query waits for a build.
//! - Restart: [`SemanticIndex::open`] loads the stored vectors into the exact index and never calls
//!   the model. It also loads the persisted graph ([`VectorStore::load_graph`], read first and
//!   decoded on a blocking thread while the vectors load) and uses it when it is fresh: its
//!   vector-set digest must equal the digest of the loaded chunk set, and its encoding must pass every
//!   check (a corrupt one is a typed error, logged, and counted in
//!   [`IndexStats::graph_loads_rejected`]). A loaded graph's table shares the exact index's
//!   vectors. A stale, missing or rejected graph is rebuilt as [`HnswStartup`] says (by default on a
//!   background thread, exact answering meanwhile; [`HnswStartup::LoadOnly`] never builds one at
//!   open, for one-shot commands). [`StoredIndex`] is the same load without an embedder, so a
//!   caller can load the model at the same time.
//! - Persistence: a background build saves its graph when it completes; [`SemanticIndex::save_graph`]
//!   saves the answering graph if it changed since it was loaded or saved (the server calls it
//!   periodically and at shutdown), and [`SemanticIndex::persist_graph`] builds one first if there
//!   is none (what `memory sync` calls after catching up, so the next one-shot recall loads it). A
//!   loaded graph takes increments in place, so persisting after a small catch-up encodes the graph
//!   but builds nothing.

mod compact;
mod graph;
mod query;
mod refresh;
mod state;
#[cfg(test)]
mod test_support;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use memory_core::vectors::{
    ProfileDigest, SourceGeneration, StoredSourceState, UnindexedReason, VectorLoadLimits,
    VectorStore,
};
use memory_core::{ChangeSequence, MemoryAttribution, MemoryError, MemoryKey, Revision};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::chunk::ChunkId;
use crate::embed::Embedder;
use crate::error::SemanticError;
use crate::index::table::LoadedVectors;
use crate::index::{
    ChunkMeta, CompactVectors, ExactIndex, HnswIndex, HnswParams, IndexBounds, IndexKind,
    SourceVersion, VectorIndex,
};
use crate::limits::RefreshLimits;
use crate::profile::SemanticProfile;

pub use graph::PersistOutcome;
pub use query::SemanticCandidates;
pub(crate) use query::current_excerpt;
use state::{GraphSlot, IndexState, SourceRecord, identity_bytes};

/// Everything a [`SemanticIndex`] is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticIndexConfig {
    /// The profile; its digest keys stored vectors.
    pub profile: SemanticProfile,
    /// Bounds of both indexes (the capacity: [`IndexBounds::with_max_chunks`]).
    pub bounds: IndexBounds,
    /// HNSW parameters.
    pub hnsw: HnswParams,
    /// Refresh limits.
    pub refresh: RefreshLimits,
    /// What [`SemanticIndex::open`] does about the HNSW graph.
    pub hnsw_startup: HnswStartup,
    /// How both indexes hold the vectors in memory: f32 by default, or int8 codes whose
    /// candidates each query rescores with their stored f32 vectors (see
    /// [`crate::index::quantized`]).
    pub compact_vectors: CompactVectors,
}

impl SemanticIndexConfig {
    /// The profile with the default bounds for its dimensions and default parameters.
    pub fn new(profile: SemanticProfile) -> Self {
        let bounds = IndexBounds::for_dimensions(profile.dimensions);
        Self {
            profile,
            bounds,
            hnsw: HnswParams::default(),
            refresh: RefreshLimits::default(),
            hnsw_startup: HnswStartup::default(),
            compact_vectors: CompactVectors::default(),
        }
    }

    /// The same configuration with `compact` vectors in memory (checked when the index opens).
    #[must_use]
    pub fn with_compact_vectors(mut self, compact: CompactVectors) -> Self {
        self.compact_vectors = compact;
        self
    }

    /// The same configuration with `bounds` (for example `IndexBounds::with_max_chunks(d, n)`).
    #[must_use]
    pub fn with_bounds(mut self, bounds: IndexBounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// The same configuration with `startup`.
    #[must_use]
    pub fn with_hnsw_startup(mut self, startup: HnswStartup) -> Self {
        self.hnsw_startup = startup;
        self
    }
}

/// Loads of at most this many chunks build their HNSW graph inside [`SemanticIndex::open`] when no
/// fresh graph is persisted, whatever the [`HnswStartup`] (except [`HnswStartup::LoadOnly`]): such a
/// build takes milliseconds, less than starting a thread is worth.
pub const HNSW_INLINE_BUILD_MAX_CHUNKS: usize = 2_048;

/// What [`SemanticIndex::open`] does about the HNSW graph. In every mode a fresh persisted graph is
/// loaded (no embedder call, no build); the modes differ when there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HnswStartup {
    /// Build on a background thread: `open` returns once the exact index is loaded, and HNSW queries
    /// are answered by the exact index until the graph is ready (a 100,000-chunk graph takes a minute
    /// on two cores, while the exact load takes well under a second). For the server.
    #[default]
    Background,
    /// Build inside `open`, which returns only once the graph is ready.
    Blocking,
    /// Build only when [`SemanticIndex::start_hnsw_build`], [`SemanticIndex::hnsw_ready`] or
    /// [`SemanticIndex::persist_graph`] asks.
    OnDemand,
    /// Never build at open, not even a small graph: load a fresh persisted one or answer exactly. For
    /// one-shot commands (`memory recall`, `memory sync`), which must not pay for a build they would
    /// throw away; [`SemanticIndex::persist_graph`] still builds on request.
    LoadOnly,
}

/// Whether the HNSW graph answers queries yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HnswStatus {
    /// A graph answers HNSW queries (a rebuild may be replacing it in the background).
    Ready,
    /// The graph is being built; HNSW queries are answered by the exact index.
    Building,
    /// No build was asked for yet ([`HnswStartup::OnDemand`], [`HnswStartup::LoadOnly`]); HNSW
    /// queries are answered exactly.
    NotStarted,
    /// The last build failed; HNSW queries are answered exactly until a new build succeeds.
    Failed,
}

impl HnswStatus {
    /// The snake_case name (`ready`, `building`, `not_started`, `failed`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Building => "building",
            Self::NotStarted => "not_started",
            Self::Failed => "failed",
        }
    }
}

/// Where the answering graph came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphOrigin {
    /// Built in this process (at open, in the background, or on request).
    Built,
    /// Loaded from the vector store's persisted graph: no embedder call, no build.
    LoadedFromStore,
}

impl GraphOrigin {
    /// The snake_case name (`built`, `loaded_from_store`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Built => "built",
            Self::LoadedFromStore => "loaded_from_store",
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
    /// The index that answered: `Exact` for an HNSW query while the graph is not ready.
    pub answered_by: IndexKind,
}

/// One answer per source of [`SemanticIndex::refresh_many`], in the caller's order.
pub type RefreshResults = Vec<Result<RefreshOutcome, SemanticError>>;

/// Counts describing the index (what `memory status` shows, with [`IndexStatus`]'s stored parts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IndexStats {
    /// Sources known, tombstones included.
    pub sources: usize,
    /// Withdrawn sources.
    pub withdrawn: usize,
    /// Chunks searchable.
    pub live_chunks: usize,
    /// Replaced or withdrawn chunk rows of the exact index not compacted away yet.
    pub tombstones: usize,
    /// The capacity: most live chunks ([`IndexBounds::max_chunks`]).
    pub max_chunks: usize,
    /// Whether the vectors are held as int8 codes ([`CompactVectors::Int8`]) rather than f32.
    pub compact_vectors: bool,
    /// Aggregate bytes of source identities.
    pub identity_bytes: usize,
    /// Whether the HNSW graph answers.
    pub hnsw: HnswStatus,
    /// The search width HNSW queries use now ([`HnswParams::width_for`] the live chunks: the
    /// default width grows with the index, a chosen one does not): every graph this index builds
    /// or loads searches with it (it is not part of a graph, so a persisted graph stays fresh
    /// when it changes).
    pub hnsw_ef_search: usize,
    /// Where the answering graph came from, if one answers.
    pub hnsw_origin: Option<GraphOrigin>,
    /// Whether a replacement graph is being built while the current one answers.
    pub hnsw_rebuilding: bool,
    /// Tombstoned points of the answering graph (filtered from its searches until the next rebuild).
    pub hnsw_tombstones: usize,
    /// Whether the answering graph changed since it was loaded or last persisted.
    pub hnsw_unsaved: bool,
    /// Graphs built by this index (at open, in the background, or on request).
    pub graph_builds: u64,
    /// Persisted graphs loaded by this index.
    pub graphs_loaded: u64,
    /// Persisted graphs refused as corrupt (a rebuild followed as [`HnswStartup`] says).
    pub graph_loads_rejected: u64,
}

/// [`IndexStats`] plus what the vector store records: the indexed position and the sources
/// recorded as not searchable, by reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexStatus {
    /// The in-memory counts.
    pub stats: IndexStats,
    /// The stored change-feed position up to which every change is indexed or recorded unindexed.
    pub indexed_position: u64,
    /// Sources recorded as not searchable, per reason (`too_large`, `too_many_chunks`, `capacity`,
    /// `invalid`); reasons with none are left out.
    pub unindexed: Vec<(String, u64)>,
}

/// Graph events, shared with background builds.
#[derive(Debug, Default)]
pub(crate) struct GraphCounters {
    builds: AtomicU64,
    loads: AtomicU64,
    rejected: AtomicU64,
}

/// Called by a background build after its snapshot, before it builds (tests hold a build there).
pub(crate) type BuildHook = Arc<dyn Fn() + Send + Sync>;

/// How many chunks `stored` holds.
/// Every [`VectorStore`] call of the engine, off the async workers: on the blocking pool (through
/// the crate's one boundary, [`memory_core::blocking::store_call`]) when called from a runtime, so a store
/// that blocks (SQLite) never stalls one; awaited in place on a thread of the engine's own (the
/// background graph build, driven by its own `block_on`), where blocking is what the thread is for.
/// The call owns what it needs (`'static`), since it may run on another thread.
pub(crate) async fn vector_call<S, T, Fut>(
    store: &Arc<S>,
    call: impl FnOnce(Arc<S>) -> Fut,
) -> Result<T, memory_core::MemoryError>
where
    S: VectorStore + 'static,
    T: Send + 'static,
    Fut: Future<Output = Result<T, memory_core::MemoryError>> + Send + 'static,
{
    let work = call(Arc::clone(store));
    if tokio::runtime::Handle::try_current().is_ok() {
        memory_core::blocking::store_call(work).await
    } else {
        work.await
    }
}

fn vectors_loaded_rows(stored: &[memory_core::vectors::StoredSource]) -> usize {
    stored
        .iter()
        .map(|source| match &source.state {
            StoredSourceState::Indexed { chunks, .. } => chunks.len(),
            StoredSourceState::Withdrawn => 0,
        })
        .sum()
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
    counters: Arc<GraphCounters>,
    build_hook: Mutex<Option<BuildHook>>,
    /// Called before each exact compaction's copy (tests hold one there).
    compaction_hook: Mutex<Option<BuildHook>>,
    /// Serializes graph saves (the caller's and a background build's), and holds the indexer's
    /// changes back while a save encodes the graph: a change queued on the state lock instead would
    /// block every search behind it for the whole encoding (std's `RwLock` lets no reader pass a
    /// waiting writer), a stall the server's periodic save showed under load.
    save_lock: Arc<tokio::sync::Mutex<()>>,
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

/// What [`SemanticIndex::open`] loads from the store (the stored vectors in the exact index, the
/// persisted graph if it is fresh, or one built as the configuration says), before an embedder is
/// attached: loading needs no model, so a caller can load the model meanwhile and then call
/// [`Self::with_embedder`].
pub struct StoredIndex<S> {
    config: SemanticIndexConfig,
    digest: ProfileDigest,
    store: Arc<S>,
    state: IndexState,
    counters: Arc<GraphCounters>,
}

impl<S> std::fmt::Debug for StoredIndex<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("StoredIndex")
            .field("digest", &self.digest)
            .field("chunks", &self.state.exact.live_chunks())
            .finish_non_exhaustive()
    }
}

/// Refuses an embedder whose vectors are not of the profile's dimensions.
fn check_embedder<E: Embedder>(
    profile: &SemanticProfile,
    embedder: &E,
) -> Result<(), SemanticError> {
    let dimensions = profile.dimensions;
    if embedder.dimensions() != dimensions {
        return Err(SemanticError::invalid(
            "embedder",
            format!(
                "produces {} dimensions, the profile says {dimensions}",
                embedder.dimensions()
            ),
        ));
    }
    Ok(())
}

impl<S: VectorStore + 'static> StoredIndex<S> {
    /// Validates the configuration and loads every vector stored for the profile into the exact
    /// index, and the persisted graph if it is fresh (a stale or missing one is built here only
    /// with [`HnswStartup::Blocking`], or when small; see [`HnswStartup`]).
    pub async fn load(config: SemanticIndexConfig, store: Arc<S>) -> Result<Self, SemanticError> {
        config.profile.validate()?;
        config.refresh.validate()?;
        let dimensions = config.profile.dimensions;
        let mut exact =
            ExactIndex::with_compact(dimensions, config.bounds, config.compact_vectors)?;
        // Checked before any loading, so a bad value costs no load.
        config.hnsw.validate()?;
        let digest = config.profile.digest()?;
        let counters = Arc::new(GraphCounters::default());
        let started = std::time::Instant::now();
        let pending_graph = graph::read_persisted(
            &store,
            digest,
            dimensions,
            config.bounds,
            config.hnsw,
            &counters,
        )
        .await?;
        // The vectors go straight into the exact index's segments as the store reads them.
        let mut vectors = LoadedVectors::with_encoding(
            dimensions,
            config.bounds.max_chunks,
            config.compact_vectors,
        );
        let limits = VectorLoadLimits {
            dimensions,
            max_sources: config.bounds.max_sources,
            max_chunks: config.bounds.max_chunks,
        };
        let (stored, vectors) = vector_call(&store, move |store| async move {
            let stored = store
                .load_sources_into(&digest, limits, &mut vectors)
                .await?;
            Ok((stored, vectors))
        })
        .await
        .map_err(|error| match error {
            // More stored than this process may hold (opened with a smaller `max_chunks` than the
            // store was filled with): named as the setting to raise, as a refresh past it is. The
            // SQLite and PostgreSQL stores refuse from the count they keep, before reading a chunk;
            // a store without one stops at the first chunk past the bound (`actual` a lower bound).
            MemoryError::TooLarge {
                limit: "stored chunks",
                max,
                actual,
            } => SemanticError::TooLarge {
                limit: "max_chunks",
                max,
                actual,
            },
            other => other.into(),
        })?;
        let mut sources = HashMap::with_capacity(stored.len());
        // Every row's metadata in the store's order (by key: the canonical order a persisted graph
        // numbers its points in), the order the vectors arrived in.
        let mut metas = Vec::with_capacity(vectors_loaded_rows(&stored));
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
                    metas.extend(chunks.into_iter().map(|chunk| ChunkMeta {
                        source: Arc::clone(&version),
                        ordinal: chunk.ordinal,
                        start: usize::try_from(chunk.start).unwrap_or(usize::MAX),
                        end: usize::try_from(chunk.end).unwrap_or(usize::MAX),
                        excerpt_digest: chunk.excerpt_digest,
                    }));
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
        exact.load_rows(metas, vectors)?;
        let chunks = exact.live_chunks();
        let vectors_loaded = started.elapsed();
        let loaded_graph =
            graph::attach_persisted(pending_graph, &exact, config.bounds, config.hnsw, &counters)
                .await;
        let slot = match loaded_graph {
            Some(graph) => GraphSlot::with(graph, GraphOrigin::LoadedFromStore, config.bounds),
            None => {
                let build_now = match config.hnsw_startup {
                    HnswStartup::Blocking => true,
                    HnswStartup::Background => chunks <= HNSW_INLINE_BUILD_MAX_CHUNKS,
                    HnswStartup::OnDemand | HnswStartup::LoadOnly => false,
                };
                if build_now {
                    let built = HnswIndex::build_over(&exact, config.bounds, config.hnsw)?;
                    counters.builds.fetch_add(1, Ordering::Relaxed);
                    GraphSlot::with(built, GraphOrigin::Built, config.bounds)
                } else {
                    GraphSlot::empty()
                }
            }
        };
        tracing::debug!(
            sources = sources.len(),
            chunks,
            hnsw = slot.status().as_str(),
            vectors_millis = vectors_loaded.as_millis() as u64,
            millis = started.elapsed().as_millis() as u64,
            "semantic index loaded"
        );
        Ok(Self {
            config,
            digest,
            store,
            state: IndexState {
                sources,
                identity_bytes: total_identity,
                exact,
                graph: slot,
            },
            counters,
        })
    }

    /// Live chunks loaded.
    pub fn live_chunks(&self) -> usize {
        self.state.exact.live_chunks()
    }

    /// The index over these vectors, embedding with `embedder` (refused when its dimensions are not
    /// the profile's). With [`HnswStartup::Background`], a missing graph's build starts now.
    pub fn with_embedder<E: Embedder>(
        self,
        embedder: Arc<E>,
    ) -> Result<SemanticIndex<E, S>, SemanticError> {
        check_embedder(&self.config.profile, &*embedder)?;
        let Self {
            config,
            digest,
            store,
            state,
            counters,
        } = self;
        let (hnsw_status, _) = watch::channel(state.graph.status());
        let index = SemanticIndex {
            profile: config.profile,
            digest,
            bounds: config.bounds,
            refresh_limits: config.refresh,
            hnsw_params: config.hnsw,
            embedder,
            store,
            state: Arc::new(RwLock::new(state)),
            hnsw_status: Arc::new(hnsw_status),
            counters,
            build_hook: Mutex::new(None),
            compaction_hook: Mutex::new(None),
            save_lock: Arc::new(tokio::sync::Mutex::new(())),
            apply: tokio::sync::Mutex::new(()),
        };
        if config.hnsw_startup == HnswStartup::Background {
            index.start_hnsw_build();
        }
        Ok(index)
    }
}

impl<E: Embedder, S: VectorStore + 'static> SemanticIndex<E, S> {
    /// Opens the index: validates the configuration, loads every vector stored for the profile (never
    /// calling the embedder) into the exact index, then loads the persisted graph if it is fresh or
    /// deals with its absence as `config.hnsw_startup` says (see the module docs). The same as
    /// [`StoredIndex::load`] followed by [`StoredIndex::with_embedder`], which a caller that loads
    /// the model too can run side by side with the model's load.
    pub async fn open(
        config: SemanticIndexConfig,
        embedder: Arc<E>,
        store: Arc<S>,
    ) -> Result<Self, SemanticError> {
        // Checked before anything is loaded.
        check_embedder(&config.profile, &*embedder)?;
        StoredIndex::load(config, store)
            .await?
            .with_embedder(embedder)
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
        let graph = &state.graph;
        IndexStats {
            sources: state.sources.len(),
            withdrawn: state
                .sources
                .values()
                .filter(|record| record.revision.is_none())
                .count(),
            live_chunks: state.exact.live_chunks(),
            tombstones: state.exact.tombstones(),
            max_chunks: self.bounds.max_chunks,
            compact_vectors: state.exact.compact() != CompactVectors::F32,
            identity_bytes: state.identity_bytes,
            hnsw: graph.status(),
            hnsw_ef_search: self.hnsw_params.width_for(state.exact.live_chunks()),
            hnsw_origin: graph.current().and(graph.origin()),
            hnsw_rebuilding: graph.rebuilding(),
            hnsw_tombstones: graph.current().map_or(0, |current| current.tombstones()),
            hnsw_unsaved: graph.is_dirty(),
            graph_builds: self.counters.builds.load(Ordering::Relaxed),
            graphs_loaded: self.counters.loads.load(Ordering::Relaxed),
            graph_loads_rejected: self.counters.rejected.load(Ordering::Relaxed),
        }
    }

    /// [`Self::stats`] with the stored indexed position and the sources recorded as not searchable:
    /// everything `memory status` prints.
    pub async fn status(&self) -> Result<IndexStatus, SemanticError> {
        let stats = self.stats();
        let digest = self.digest;
        let indexed_position: ChangeSequence = vector_call(&self.store, move |store| async move {
            store.indexed_position(&digest).await
        })
        .await?;
        let unindexed = self.unindexed_counts().await?;
        Ok(IndexStatus {
            stats,
            indexed_position: indexed_position.get(),
            unindexed: unindexed
                .into_iter()
                .map(|(reason, count)| (reason.as_str().to_owned(), count))
                .collect(),
        })
    }

    /// Sources recorded as not searchable, per reason.
    pub async fn unindexed_counts(&self) -> Result<Vec<(UnindexedReason, u64)>, SemanticError> {
        let digest = self.digest;
        let counts = vector_call(&self.store, move |store| async move {
            store.unindexed_counts(&digest).await
        })
        .await?;
        Ok(counts)
    }
}
