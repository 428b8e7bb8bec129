//! `memory status`: what the store and its semantic index hold, read without loading the model.
//!
//! The index is opened from the stored vectors exactly as a one-shot recall opens it (a fresh persisted
//! graph is loaded, none is built), with an embedder that has the profile's dimensions and refuses to
//! embed: nothing here needs the model, so `status` works (and tells what is wrong) where the model
//! files are missing. It reports the change-feed head, the position the stored vectors reflect, live
//! chunks against the capacity (`--max-chunks`), tombstones, the documents recorded as unindexed by
//! reason (never reported as searchable), and the HNSW graph: whether a fresh one was loaded from the
//! store (`loaded_from_store`), or the embedding modes answer exactly until a sync or a server builds
//! one. The command line adds the last errors of `memory hook` (memory-cli's `status`); the Python
//! package answers this as `Memory.status()`.

use std::sync::Arc;

use semantic_index::{
    EmbedError, Embedder, HnswStartup, IndexStats, SemanticIndex, SemanticProfile,
};
use serde::Serialize;

use crate::blocking::{blocking, on_blocking_pool};
use crate::database::Store;
use crate::refusal::Refusal;
use crate::semantic::IndexOptions;
use memory_core::activity::ExtractionTotals;

/// The answer of `memory status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusResult {
    /// The latest committed change.
    pub head: u64,
    /// The change through which every committed change is embedded or recorded unindexed.
    pub indexed: u64,
    /// `head - indexed`: changes not yet embedded (a server's indexer or `memory sync` catches up).
    pub behind: u64,
    /// Chunks of the semantic index.
    pub chunks: ChunkStatus,
    /// Documents the index could not hold, by reason (`too_large`, `too_many_chunks`, `capacity`,
    /// `invalid`), and their total.
    pub unindexed: UnindexedStatus,
    /// The HNSW graph as a one-shot command finds it.
    pub hnsw: GraphStatus,
    /// Whether this process's hybrid recall reranks with the cross-encoder: `on` or `off`
    /// (`--rerank-model`, `MEMORY_RERANK_MODEL`; `memory doctor` says whether its files are there).
    pub rerank_model: &'static str,
    /// The thread log and what the worker made of it (see [`ThreadStatus`]).
    pub threads: ThreadStatus,
}

/// The thread log as the remembering worker sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ThreadStatus {
    /// Threads per destination, most first (at most 100): `{namespace, scopes, threads}`, the
    /// namespace as its canonical address.
    pub destinations: Vec<DestinationStatus>,
    /// Threads with no destination (appended before destinations existed; `memory thread rebind`
    /// binds them).
    pub unbound: u64,
    /// Threads whose stored destination no longer validates (the worker parks them; `memory thread
    /// rebind` repairs one).
    pub unreadable: u64,
    /// Threads with records the worker has not settled yet.
    pub pending: u64,
    /// Threads parked at a record that cannot be remembered, by kind (`extraction`,
    /// `destination`); `memory thread rebind` unparks one.
    pub parked: std::collections::BTreeMap<String, u64>,
    /// What extraction kept and dropped, the correcting statements it linked and refused, and what
    /// the model extractor's calls cost: `{records, kept, dropped: {REASON: count}, corrections:
    /// {linked, refused}, model: {calls, prompt_tokens, completion_tokens, latency_ms, fallbacks}}`
    /// (a model's rejected proposals are dropped parts: `unsupported_quote`, `unsupported_text`,
    /// `unsupported_correction`).
    pub extraction: ExtractionTotals,
}

/// One destination and its thread count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DestinationStatus {
    /// The namespace's canonical address.
    pub namespace: String,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// Threads bound to it.
    pub threads: u64,
}

impl ThreadStatus {
    /// Reads the thread log's overview and the extraction totals of `store`'s database (blocking).
    pub fn read<S: Store>(store: &S) -> Result<Self, Refusal> {
        let log = store.open_thread_log()?;
        let progress = store.open_progress()?;
        let overview = log.overview()?;
        let extraction = progress.extraction_totals()?;
        Ok(Self {
            destinations: overview
                .destinations
                .into_iter()
                .map(|count| DestinationStatus {
                    namespace: count.destination.namespace().as_str().to_owned(),
                    scopes: count
                        .destination
                        .scopes()
                        .iter()
                        .map(|scope| scope.as_str().to_owned())
                        .collect(),
                    threads: count.threads,
                })
                .collect(),
            unbound: overview.unbound,
            unreadable: overview.unreadable,
            pending: overview.pending,
            parked: overview.parked.into_iter().collect(),
            extraction,
        })
    }
}

/// Chunk counts against the capacity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChunkStatus {
    /// Searchable chunks.
    pub live: usize,
    /// Most live chunks (`--max-chunks`).
    pub capacity: usize,
    /// Replaced or withdrawn chunk rows not reclaimed yet.
    pub tombstones: usize,
    /// Sources known, withdrawn ones included.
    pub sources: usize,
    /// How the index holds the vectors in memory: `f32`, or `int8` codes (`--compact-vectors`).
    pub encoding: &'static str,
}

/// Unindexed documents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnindexedStatus {
    /// All reasons together.
    pub total: u64,
    /// Per reason; reasons with none are left out.
    pub by_reason: std::collections::BTreeMap<String, u64>,
}

/// The graph's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GraphStatus {
    /// `ready` when a fresh persisted graph answers `hnsw` recalls, `not_started` when they are
    /// answered exactly (no graph stored, or a stale one).
    pub state: String,
    /// `loaded_from_store` when the persisted graph was fresh; `null` otherwise.
    pub origin: Option<String>,
    /// The search width of `hnsw` recalls (`--hnsw-ef-search`; 128 by default).
    pub ef_search: usize,
    /// Graphs built while opening (a one-shot open never builds: 0).
    pub builds: u64,
    /// Persisted graphs refused as corrupt while opening.
    pub rejected: u64,
}

/// An embedder with the profile's dimensions that refuses every text: opening the index needs the
/// dimensions, never a vector.
struct NoModel(usize);

impl Embedder for NoModel {
    fn dimensions(&self) -> usize {
        self.0
    }

    fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::Model {
            detail: "`memory status` loads no model".to_owned(),
        })
    }
}

/// Reads the status of `store` and its vectors with the index `options` ask for (bounds and
/// encoding, as the other commands open it).
pub async fn status<S: Store>(
    store: Arc<S>,
    vectors: Arc<S::Vectors>,
    options: IndexOptions,
) -> Result<StatusResult, Refusal> {
    let profile = SemanticProfile::minilm_l6_v2();
    let dimensions = profile.dimensions;
    // The index every other command opens (one builder), loading a fresh graph and building none.
    let config = options
        .config(profile)?
        .with_hnsw_startup(HnswStartup::LoadOnly);
    let thread_store = Arc::clone(&store);
    let threads = blocking(move || ThreadStatus::read(&*thread_store)).await??;
    let head = on_blocking_pool(async move { store.head().await }).await??;
    let embedder = Arc::new(NoModel(dimensions));
    let index = SemanticIndex::open(config, embedder, vectors).await?;
    let status = index.status().await?;
    let IndexStats {
        sources,
        live_chunks,
        tombstones,
        max_chunks,
        compact_vectors,
        hnsw,
        hnsw_ef_search,
        hnsw_origin,
        graph_loads_rejected,
        graph_builds,
        ..
    } = status.stats;
    let by_reason: std::collections::BTreeMap<String, u64> = status.unindexed.into_iter().collect();
    Ok(StatusResult {
        head: head.get(),
        indexed: status.indexed_position,
        behind: head.get().saturating_sub(status.indexed_position),
        chunks: ChunkStatus {
            live: live_chunks,
            capacity: max_chunks,
            tombstones,
            sources,
            encoding: if compact_vectors { "int8" } else { "f32" },
        },
        unindexed: UnindexedStatus {
            total: by_reason.values().sum(),
            by_reason,
        },
        hnsw: GraphStatus {
            state: hnsw.as_str().to_owned(),
            origin: hnsw_origin.map(|origin| origin.as_str().to_owned()),
            ef_search: hnsw_ef_search,
            builds: graph_builds,
            rejected: graph_loads_rejected,
        },
        rerank_model: options.rerank_model.as_str(),
        threads,
    })
}
