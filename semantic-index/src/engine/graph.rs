//! The HNSW graph's lifecycle: loading a persisted graph at open, building and rebuilding off the
//! query path, and persisting it beside the vectors.
//!
//! A build takes a shared reference to the exact index's rows under the write lock (the slot then
//! logs every later change), copies them (sharing unchanged vector segments) and builds on its own
//! thread without any lock, then takes the write lock again only to replay the log and swap the
//! graph in. Queries meanwhile read the previous graph (a rebuild) or the exact
//! index (a first build).

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock, Weak};
use std::task::{Context, Poll, Wake, Waker};

use memory_core::vectors::{GraphSnapshot, ProfileDigest, VectorStore};
use tokio::sync::watch;

use super::state::{Build, IndexState};
use super::{BuildHook, GraphCounters, HnswStatus, SemanticIndex};
use crate::embed::Embedder;
use crate::error::SemanticError;
use crate::index::graph::{Graph, SPARE_SLOTS};
use crate::index::persist::{self, vector_set_digest};
use crate::index::{ExactIndex, HnswIndex, HnswParams, IndexBounds, VectorIndex};

/// What [`SemanticIndex::save_graph`] or [`SemanticIndex::persist_graph`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistOutcome {
    /// The graph was encoded and stored; it indexes this many chunks.
    Saved {
        /// Chunks the stored graph indexes.
        chunks: u64,
    },
    /// The stored graph already is the answering one; nothing was written.
    Unchanged,
    /// No graph answers (none was built yet, or the index is empty); nothing was written.
    NoGraph,
}

/// The most bytes a stored graph of `bounds` and `params` may take: a point's row, its list counts
/// and at most `2 * max_connections` neighbours and [`SPARE_SLOTS`] at layer 0 and
/// `max_connections` above, of 8 bytes.
fn max_graph_bytes(bounds: IndexBounds, params: HnswParams) -> usize {
    let per_point = 40usize
        .saturating_add(params.max_connections.saturating_mul(24))
        .saturating_add(SPARE_SLOTS * 8);
    bounds
        .max_chunks
        .saturating_mul(per_point)
        .saturating_add(1024)
}

/// A persisted graph read from the store, decoding on a blocking thread while the vectors load.
pub(super) struct PendingGraph {
    chunks: u64,
    vector_set: [u8; 32],
    decoded: tokio::task::JoinHandle<Result<Graph, SemanticError>>,
}

/// Reads `store`'s persisted graph, if any, and starts decoding it on a blocking thread (its checks
/// against the vectors wait for [`attach_persisted`]): the decode then overlaps the load of the
/// vectors instead of following it. An oversized graph is counted as rejected and left out; a
/// failing store read is an error (the caller should not silently rebuild over a broken store).
pub(super) async fn read_persisted<S: VectorStore + 'static>(
    store: &Arc<S>,
    digest: ProfileDigest,
    dimensions: usize,
    bounds: IndexBounds,
    params: HnswParams,
    counters: &GraphCounters,
) -> Result<Option<PendingGraph>, SemanticError> {
    let max_bytes = max_graph_bytes(bounds, params);
    let read = super::vector_call(store, move |store| async move {
        store.load_graph(&digest, max_bytes).await
    })
    .await;
    let snapshot = match read {
        Ok(Some(snapshot)) => snapshot,
        Ok(None) => return Ok(None),
        Err(memory_core::MemoryError::TooLarge { .. }) => {
            counters.rejected.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("persisted hnsw graph is larger than its bound; rebuilding");
            return Ok(None);
        }
        Err(error) => return Err(error.into()),
    };
    let GraphSnapshot {
        chunks,
        vector_set,
        bytes,
        ..
    } = snapshot;
    #[allow(
        clippy::disallowed_methods,
        reason = "CPU-bound decoding of bytes already read, no store call"
    )]
    let decoded =
        tokio::task::spawn_blocking(move || persist::decode_detached(&bytes, dimensions, &params));
    Ok(Some(PendingGraph {
        chunks,
        vector_set,
        decoded,
    }))
}

/// The persisted graph of [`read_persisted`] as the index answering over `exact`'s rows, if it was
/// built over exactly the chunk set `exact` holds; `None` when there is none, it is stale, or it
/// fails its checks (logged and counted as rejected).
pub(super) async fn attach_persisted(
    pending: Option<PendingGraph>,
    exact: &ExactIndex,
    bounds: IndexBounds,
    params: HnswParams,
    counters: &GraphCounters,
) -> Option<HnswIndex> {
    let pending = pending?;
    if exact.live_chunks() == 0 {
        return None;
    }
    // The rows are loaded in key order, which is the canonical order the graph numbers its points
    // in: finding that out takes one pass, and the graph's table then shares the exact index's
    // vectors.
    let order = exact.table().canonical_order();
    if pending.chunks != order.len() as u64
        || pending.vector_set != vector_set_digest(exact.table(), &order)
    {
        // Dropping the handle leaves the decode to finish on its own and be discarded.
        tracing::debug!("persisted hnsw graph is stale; rebuilding");
        return None;
    }
    let table = exact.table().reordered(&order, bounds.max_chunks);
    let decoded = pending.decoded.await.unwrap_or(Err(SemanticError::Task {
        what: "graph reload",
    }));
    match decoded.and_then(|graph| persist::attach(graph, table, params, bounds)) {
        Ok(graph) => {
            counters.loads.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(chunks = order.len(), "persisted hnsw graph loaded");
            Some(graph)
        }
        Err(error) => {
            counters.rejected.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%error, "persisted hnsw graph rejected; rebuilding");
            None
        }
    }
}

/// Everything a background build needs besides the state.
struct BuildJob<S> {
    state: Weak<RwLock<IndexState>>,
    status: Arc<watch::Sender<HnswStatus>>,
    counters: Arc<GraphCounters>,
    store: Arc<S>,
    digest: ProfileDigest,
    bounds: IndexBounds,
    params: HnswParams,
    hook: Option<BuildHook>,
    save_lock: Arc<tokio::sync::Mutex<()>>,
}

impl<E: Embedder, S: VectorStore + 'static> SemanticIndex<E, S> {
    /// Whether the HNSW graph answers queries yet.
    pub fn hnsw_status(&self) -> HnswStatus {
        self.read_state().graph.status()
    }

    /// Starts building the HNSW graph on a background thread from a snapshot of the exact index,
    /// unless a graph answers (and needs no rebuild) or a build is running. Refreshes and withdrawals
    /// made during the build are replayed onto the graph before it answers; the graph is saved to
    /// the store once installed. The build stops early when the index is dropped.
    pub fn start_hnsw_build(&self) {
        {
            let mut state = self.write_state();
            if !state.graph.wants_build() {
                return;
            }
            state.graph.build = Build::Starting;
            self.hnsw_status.send_replace(state.graph.status());
        }
        let job = BuildJob {
            state: Arc::downgrade(&self.state),
            status: Arc::clone(&self.hnsw_status),
            counters: Arc::clone(&self.counters),
            store: Arc::clone(&self.store),
            digest: self.digest,
            bounds: self.bounds,
            params: self.hnsw_params,
            save_lock: Arc::clone(&self.save_lock),
            hook: self
                .build_hook
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        };
        // The snapshot (a copy of every vector) is taken on the build thread, so the caller does not
        // wait for it.
        let spawned = std::thread::Builder::new()
            .name("semantic-hnsw-build".to_owned())
            .spawn(move || build_in_background(job));
        if let Err(error) = spawned {
            tracing::warn!(%error, "could not start the hnsw build thread");
            let mut state = self.write_state();
            state.graph.build_failed();
            self.hnsw_status.send_replace(state.graph.status());
        }
    }

    /// A rebuild asked for by a change (tombstones past the fraction).
    pub(super) fn start_rebuild(&self) {
        self.start_hnsw_build();
    }

    /// Waits until a HNSW graph answers queries, starting its build if none answers or runs. Fails
    /// with [`SemanticError::Task`] when the build fails.
    pub async fn hnsw_ready(&self) -> Result<(), SemanticError> {
        let mut receiver = self.hnsw_status.subscribe();
        if self.hnsw_status() != HnswStatus::Ready {
            self.start_hnsw_build();
        }
        let status = *receiver
            .wait_for(|status| *status != HnswStatus::Building)
            .await
            .map_err(|_| SemanticError::Task { what: "hnsw build" })?;
        match status {
            HnswStatus::Ready => Ok(()),
            _ => Err(SemanticError::Task { what: "hnsw build" }),
        }
    }

    /// Saves the answering graph to the store if it changed since it was loaded or last saved;
    /// never builds or waits for a build. For the server: periodically and at shutdown.
    pub async fn save_graph(&self) -> Result<PersistOutcome, SemanticError> {
        persist_current(
            &self.state,
            &self.store,
            self.digest,
            &self.save_lock,
            Encoder::BlockingPool,
        )
        .await
    }

    /// Makes sure a graph over the current chunks is persisted: saves the answering graph if it
    /// changed, and when none answers, builds one first (waiting for it). What a one-shot `memory
    /// sync` calls after catching up, so the next one-shot recall loads a fresh graph. Cheap after a
    /// small catch-up over a loaded graph: the increments were applied to it in place.
    pub async fn persist_graph(&self) -> Result<PersistOutcome, SemanticError> {
        if self.stats().live_chunks == 0 {
            return Ok(PersistOutcome::NoGraph);
        }
        self.hnsw_ready().await?;
        self.save_graph().await
    }

    /// Holds every later background build at `hook` (called after the snapshot, before building).
    #[cfg(test)]
    pub(crate) fn set_build_hook(&self, hook: BuildHook) {
        *self
            .build_hook
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(hook);
    }
}

/// Where a save encodes the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoder {
    /// On the calling thread: a build thread, which is no async worker.
    InPlace,
    /// On tokio's blocking pool: from async code, so the encoding (a distance per neighbour, a
    /// digest over the whole graph: a second or more at 100k chunks in a debug build) never holds an
    /// async worker, which would stall every request the server answers meanwhile.
    BlockingPool,
}

/// The encoded answering graph and its version, or why there is nothing to store.
fn encode_current(
    state: &RwLock<IndexState>,
) -> Result<Result<(persist::EncodedGraph, u64), PersistOutcome>, SemanticError> {
    let guard = state
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(current) = guard.graph.current() else {
        return Ok(Err(PersistOutcome::NoGraph));
    };
    if !guard.graph.is_dirty() {
        return Ok(Err(PersistOutcome::Unchanged));
    }
    if current.live_chunks() == 0 {
        return Ok(Err(PersistOutcome::NoGraph));
    }
    Ok(Ok((persist::encode(current)?, guard.graph.version())))
}

/// Encodes the answering graph under a read lock and stores it, unless it is unchanged.
async fn persist_current<S: VectorStore + 'static>(
    state: &Arc<RwLock<IndexState>>,
    store: &Arc<S>,
    digest: ProfileDigest,
    save_lock: &tokio::sync::Mutex<()>,
    encoder: Encoder,
) -> Result<PersistOutcome, SemanticError> {
    // One save at a time: a background build's save and a caller's never interleave, so once a
    // caller's save returns, no older graph can land after it.
    let _saving = save_lock.lock().await;
    let started = std::time::Instant::now();
    let encoded = match encoder {
        Encoder::InPlace => encode_current(state)?,
        Encoder::BlockingPool => {
            let state = Arc::clone(state);
            #[allow(
                clippy::disallowed_methods,
                reason = "CPU-bound encoding of the graph in memory, no store call"
            )]
            let encoding = tokio::task::spawn_blocking(move || encode_current(&state));
            encoding.await.map_err(|_| SemanticError::Task {
                what: "hnsw graph encoding",
            })??
        }
    };
    let (encoded, version) = match encoded {
        Ok(encoded) => encoded,
        Err(outcome) => return Ok(outcome),
    };
    let encode_millis = started.elapsed().as_millis() as u64;
    let chunks = encoded.chunks;
    super::vector_call(store, move |store| async move {
        let position = store.indexed_position(&digest).await?;
        let snapshot = GraphSnapshot {
            position,
            vector_set: encoded.vector_set,
            chunks,
            bytes: encoded.bytes,
        };
        store.save_graph(&digest, &snapshot).await
    })
    .await?;
    state
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .graph
        .mark_saved(version);
    tracing::debug!(
        chunks,
        encode_millis,
        total_millis = started.elapsed().as_millis() as u64,
        "hnsw graph persisted"
    );
    Ok(PersistOutcome::Saved { chunks })
}

/// The body of a background build: snapshots the exact index, builds from the snapshot, installs
/// the graph unless the index was dropped meanwhile, then saves it.
fn build_in_background<S: VectorStore + 'static>(job: BuildJob<S>) {
    let started = std::time::Instant::now();
    let snapshot = {
        let Some(state) = job.state.upgrade() else {
            return;
        };
        let mut guard = state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !matches!(guard.graph.build, Build::Starting) {
            return;
        }
        // Snapshot and slot change under one write lock: every later change reaches the log. The
        // snapshot is a shared reference to the rows (the exact index copies them on its next
        // change if still shared), copied below with no lock held.
        guard.graph.build = Build::Running {
            changes: Vec::new(),
        };
        guard.exact.shared_rows()
    };
    // Compacted right away and let go of, so a refresh meanwhile rarely finds the rows shared.
    // Unchanged vector segments stay shared with the exact index.
    let snapshot = snapshot.compacted_copy();
    if let Some(hook) = &job.hook {
        hook();
    }
    let cancelled = || job.state.strong_count() == 0;
    // A panic inside the build must not leave it running forever (its change log would grow
    // with every refresh and `hnsw_ready` would never return): it ends as a failed build.
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        HnswIndex::build_from_table(snapshot, job.bounds, job.params, &cancelled)
    }))
    .unwrap_or(Err(SemanticError::Task { what: "hnsw build" }));
    let Some(state) = job.state.upgrade() else {
        return;
    };
    {
        let mut guard = state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let installed = match built {
            Ok(Some(index)) => guard.graph.install_built(index, job.bounds),
            Ok(None) => {
                guard.graph.build_abandoned();
                job.status.send_replace(guard.graph.status());
                return;
            }
            Err(error) => Err(error),
        };
        match installed {
            Ok(()) => {
                job.counters.builds.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    millis = started.elapsed().as_millis() as u64,
                    "hnsw graph ready"
                );
            }
            Err(error) => {
                tracing::warn!(%error, "hnsw build failed; the exact index answers hnsw queries");
                guard.graph.build_failed();
            }
        }
        job.status.send_replace(guard.graph.status());
    }
    // Saved so a restart loads it instead of building again; a failure only costs that.
    if let Err(error) = block_on(persist_current(
        &state,
        &job.store,
        job.digest,
        &job.save_lock,
        Encoder::InPlace,
    )) {
        tracing::warn!(%error, "could not persist the hnsw graph");
    }
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Drives `future` to completion on this (non-async) thread. The vector store's futures either
/// complete without waiting (SQLite) or wait on another runtime's task (PostgreSQL), so parking the
/// thread until woken is enough.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    loop {
        match future.as_mut().poll(&mut context) {
            Poll::Ready(output) => return output,
            Poll::Pending => std::thread::park(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::mpsc;
    use std::time::Duration;

    use memory_core::InMemoryStore;
    use memory_core::vectors::SourceGeneration;
    use memory_sqlite::vectors::SqliteVectorStore;

    use super::*;
    use crate::DeterministicEmbedder;
    use crate::engine::test_support::{access, key, profile, put};
    use crate::engine::{HnswStartup, SemanticIndexConfig};
    use crate::index::IndexKind;
    use crate::limits::QueryLimits;

    /// Writes notes `d00`, `d01`, ... to `documents`; the sources to refresh them.
    async fn put_notes(
        documents: &InMemoryStore,
        count: usize,
    ) -> Vec<(memory_core::MemoryKey, SourceGeneration)> {
        let mut sources = Vec::new();
        for i in 0..count {
            let id = format!("d{i:02}");
            put(documents, &id, &format!("note number {i}"), i).await;
            sources.push((key(&id), SourceGeneration::new(1)));
        }
        sources
    }

    #[tokio::test]
    async fn queries_and_refreshes_do_not_wait_for_a_background_rebuild() {
        let directory = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap());
        let config = SemanticIndexConfig {
            hnsw: HnswParams {
                max_connections: 4,
                ef_construction: 16,
                // Wider than the namespace's chunks, so a search reads every row the graph holds
                // (the test checks what the graph holds, not the walk's recall).
                ef_search: 64,
                width_grows: false,
                max_layers: 4,
                rebuild_tombstone_fraction: 0.2,
            },
            ..SemanticIndexConfig::new(profile()).with_hnsw_startup(HnswStartup::OnDemand)
        };
        let index = SemanticIndex::open(config, Arc::new(DeterministicEmbedder::new(16)), store)
            .await
            .unwrap();
        let documents = InMemoryStore::default();
        let sources = put_notes(&documents, 40).await;
        index.refresh_many(&documents, &sources, 64).await.unwrap();
        index.hnsw_ready().await.unwrap();
        assert_eq!(index.stats().graph_builds, 1);

        let (started, on_started) = mpsc::channel::<()>();
        let (release, on_release) = mpsc::channel::<()>();
        let on_release = Arc::new(std::sync::Mutex::new(on_release));
        index.set_build_hook(Arc::new(move || {
            let _ = started.send(());
            let _ = on_release.lock().unwrap().recv();
        }));
        // A quarter of the chunks withdrawn: past the rebuild fraction, so a rebuild starts.
        for i in 0..10usize {
            index
                .withdraw(&key(&format!("d{i:02}")), SourceGeneration::new(2))
                .await
                .unwrap();
        }
        on_started
            .recv_timeout(Duration::from_secs(30))
            .expect("a background rebuild started");
        let stats = index.stats();
        assert!(stats.hnsw_rebuilding, "{stats:?}");
        assert_eq!(
            stats.hnsw,
            HnswStatus::Ready,
            "the old graph keeps answering"
        );

        // While the build is held: a query is answered by the old graph, a refresh applies.
        let access = access();
        let limits = QueryLimits::new(1_024, 5, 10_000, -1.0, 10_000, IndexKind::Hnsw);
        let answer = index
            .query(&documents, &access, "note number 3", limits)
            .await
            .unwrap();
        assert_eq!(answer.answered_by, IndexKind::Hnsw);
        assert!(answer.hits.iter().all(|hit| hit.key.id.as_str() >= "d10"));
        put(&documents, "late", "a late note", 100).await;
        index
            .refresh(&documents, &key("late"), SourceGeneration::new(3))
            .await
            .unwrap();

        release.send(()).unwrap();
        while index.stats().hnsw_rebuilding {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let stats = index.stats();
        assert_eq!(stats.graph_builds, 2);
        // Withdrawals after the snapshot (at most the one past the threshold) are replayed as
        // tombstones; the ten before it are gone.
        assert!(stats.hnsw_tombstones <= 1, "{stats:?}");
        let late = index
            .query(&documents, &access, "a late note", limits)
            .await
            .unwrap();
        assert_eq!(late.answered_by, IndexKind::Hnsw);
        assert_eq!(
            late.hits[0].key.id.as_str(),
            "late",
            "a change made during the build was replayed onto the new graph"
        );
    }

    #[tokio::test]
    async fn vectors_and_graph_load_before_the_embedder_is_attached() {
        use crate::engine::StoredIndex;

        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("v.sqlite");
        let config =
            || SemanticIndexConfig::new(profile()).with_hnsw_startup(HnswStartup::LoadOnly);
        let documents = InMemoryStore::default();
        {
            let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
            let index =
                SemanticIndex::open(config(), Arc::new(DeterministicEmbedder::new(16)), store)
                    .await
                    .unwrap();
            let sources = put_notes(&documents, 30).await;
            index.refresh_many(&documents, &sources, 64).await.unwrap();
            index.persist_graph().await.unwrap();
        }
        let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
        let stored = StoredIndex::load(config(), Arc::clone(&store))
            .await
            .unwrap();
        assert_eq!(stored.live_chunks(), 30);
        assert!(
            StoredIndex::load(config(), Arc::clone(&store))
                .await
                .unwrap()
                .with_embedder(Arc::new(DeterministicEmbedder::new(8)))
                .is_err(),
            "an embedder of other dimensions is refused"
        );
        let index = stored
            .with_embedder(Arc::new(DeterministicEmbedder::new(16)))
            .unwrap();
        let stats = index.stats();
        assert_eq!((stats.hnsw, stats.graphs_loaded), (HnswStatus::Ready, 1));
        let limits = QueryLimits::new(1_024, 3, 10_000, -1.0, 10_000, IndexKind::Hnsw);
        let answer = index
            .query(&documents, &access(), "note number 7", limits)
            .await
            .unwrap();
        assert_eq!(answer.answered_by, IndexKind::Hnsw);
        assert_eq!(answer.hits[0].key.id.as_str(), "d07");
    }
}
