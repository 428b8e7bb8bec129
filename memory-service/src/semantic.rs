//! The semantic index behind the `exact`, `hnsw` and `hybrid` recall modes, and what `memory_sync` waits
//! for.
//!
//! - The embedder is always the real model ([`FastembedEmbedder`] with the default profile, files found
//!   by [`ModelAssets::from_env`]); a deterministic embedder is never used by the binary. It is loaded
//!   lazily, at most once per process (the server loads it at start, before it reads a request), and
//!   only when a semantic recall, a sync with something left to index, or the server needs it: `put`, `get`, `withdraw` and lexical recall never touch it. A failed
//!   load is a typed `unavailable` refusal (naming `scripts/fetch-assets.sh` when files are missing) and
//!   is retried on the next need, so fetching the assets repairs a running server.
//!   The server's embedder is loaded isolated (`FastembedEmbedder::load_isolated`): recalls embed on
//!   a session of their own and the indexer on a low-priority thread, so a warm recall never waits
//!   for an indexing batch and keeps its latency while a writer and the indexer are busy.
//! - Vectors live in the store's own database ([`Store::Vectors`]: a `SqliteVectorStore` on the same
//!   file, or the PostgreSQL store's `vectors()`), keyed by the profile digest, together with the
//!   change-feed position they reflect: a later command or a restarted server embeds only the changes
//!   made since. With PostgreSQL several servers share those rows; each keeps its own in-memory index,
//!   so a change indexed by two servers is embedded by both and stored as a replay the second time.
//! - [`Freshness::CatchUp`] (one-shot commands, [`SemanticBackend::catching_up`]): before a semantic
//!   recall or a sync, this process indexes every change committed up to the store's head with
//!   semantic-index's `catch_up`, then answers. Failures are refusals, never a hang; a recall's
//!   catch-up is bounded by its `timeout_ms`.
//!   [`Freshness::Background`] (the MCP server, [`SemanticBackend::following`]): an [`Indexer`] follows
//!   [`Store::Feed`] (the SQLite store itself, or a PostgreSQL `ChangeFollower` that wakes on
//!   `NOTIFY`, so a write on another host is indexed without waiting for a poll); a semantic recall and
//!   a sync wait for it to pass the store's head read at the start of the call (a recall within its
//!   `timeout_ms`, waking the feed so another process's writes are read at once), so a served recall
//!   holds what a one-shot one would; a sync then saves the graph for one-shot readers. Changes another process indexed while this
//!   one loaded the stored vectors are indexed again at load, so the indexer's starting position never
//!   skips a change this process's index lacks.
//! - A withdrawn document is never recalled whatever the index holds: every semantic hit is revalidated
//!   against the current document before it is used.
//! - The HNSW graph is persisted beside the vectors. One-shot commands open with
//!   `HnswStartup::LoadOnly`: a fresh stored graph is loaded (no build, no embedding), otherwise `hnsw`
//!   recalls are answered exactly and say so; `memory sync` persists a graph over what it indexed (the
//!   loaded one with the increments applied, or a new one when there was none), so the next one-shot
//!   recall loads it. The server loads a fresh graph at start or builds one in the background, saves
//!   it every minute when it changed and at shutdown.
//! - Capacity: the index holds at most `--max-chunks` chunks (default 1,000,000, memory taken as chunks
//!   arrive). A document the index cannot take is recorded unindexed with its reason and never reported
//!   as searchable: `memory_sync` answers how many, and refuses (`too-large`, naming `max_chunks`) while
//!   any wait for room; each sync retries those first, so raising `--max-chunks` or withdrawing
//!   documents lets them in. A store already holding more chunks than `--max-chunks` is refused by
//!   every command that needs its index, a sync with nothing to index included (from the count of
//!   stored chunks the store keeps, without loading them).

use std::sync::Arc;
use std::time::Duration;

use memory_core::ChangeSequence;
use memory_core::vectors::{ProfileDigest, VectorStore};
use semantic_index::engine::StoredIndex;
use semantic_index::indexer::{catch_up, catch_up_report};
use semantic_index::{
    CompactVectors, CrossEncoder, FastembedCrossEncoder, FastembedEmbedder, HnswParams,
    HnswStartup, IndexBounds, Indexer, IndexerOptions, ModelAssets, SemanticError, SemanticIndex,
    SemanticIndexConfig, SemanticProfile, UnindexedReason,
};
use tokio::sync::{Mutex, OnceCell, RwLock};

/// What a sync reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Synced {
    /// The store's head, through which every change is indexed or recorded unindexed.
    pub head: ChangeSequence,
    /// Documents recorded as not searchable (too large, too many chunks, invalid), all reasons.
    pub unindexed: u64,
}

use crate::blocking::{blocking, on_blocking_pool};
use crate::database::Store;
use crate::feed::{CommitSignal, PoolFeed};
use crate::refusal::Refusal;

/// The semantic index the binary uses: the real model, vectors in the store's own database.
pub type MemorySemanticIndex<V> = SemanticIndex<FastembedEmbedder, V>;

/// How long the background indexer sleeps after an empty round. Short, because an empty round of a
/// [`Store::Feed`] that waits for changes (PostgreSQL's `ChangeFollower`) already waited up to its idle
/// wait: the follower's wake-up, not this timer, decides how soon a change is indexed. For SQLite's
/// feed, which answers empty at once, the default poll interval applies.
pub const WAITING_FEED_POLL_INTERVAL: Duration = Duration::from_millis(1);

/// Changes read per catch-up batch; the position is persisted after each, so an interrupted catch-up
/// resumes where it stopped.
pub const CATCH_UP_BATCH: usize = 256;

/// How long [`SemanticBackend::shutdown`] waits for syncs in flight to let go of the indexer.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How long shutdown waits for a model load in flight. The process must not exit while the model's
/// native runtime is still being set up on another thread: its exit-time destructors would run under
/// that thread and crash the process (seen as a SIGSEGV when a server was stopped while loading).
pub const LOAD_GRACE: Duration = Duration::from_secs(60);

/// How the index is kept up to date with the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Index the outstanding changes in the calling command, before it answers (one-shot commands).
    CatchUp,
    /// Follow the change feed with a background [`Indexer`] (the MCP server).
    Background,
}

/// How the background indexer reads changes.
struct Following<F> {
    feed: Arc<F>,
    options: IndexerOptions,
    /// Wakes the feed's wait for a commit (SQLite's [`crate::feed::WakingFeed`]), so a recall that
    /// finds the index behind has another process's writes read now, not after the fallback poll.
    wake: Option<CommitSignal>,
}

/// How often a served recall waiting for the indexer wakes the feed again: a wake that lands while
/// the indexer is between reads is not lost for longer than this.
pub const FRESHNESS_WAKE_INTERVAL: Duration = Duration::from_millis(25);

/// What the index of a semantic recall reflected when the search ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedAt {
    /// The change-feed position every change up to which the index holds.
    pub indexed: ChangeSequence,
    /// The store's head read when the recall began; `indexed` is at least this.
    pub head: ChangeSequence,
}

/// The semantic index over one store, loaded on first need.
pub struct SemanticBackend<S: Store> {
    store: Arc<S>,
    vectors: Arc<S::Vectors>,
    assets: ModelAssets,
    profile: SemanticProfile,
    digest: ProfileDigest,
    /// The index's configuration: its capacity (`--max-chunks`), how it holds its vectors
    /// (`--compact-vectors`) and its HNSW parameters (`--hnsw-ef-search`), from [`IndexOptions::config`].
    config: SemanticIndexConfig,
    /// The options `config` was built from (what `status` opens the index with).
    options: IndexOptions,
    /// `None` in catch-up mode.
    following: Option<Following<S::Feed>>,
    loaded: OnceCell<Loaded<S::Vectors>>,
    /// The rerank stage's cross-encoder, loaded apart from the index ([`Self::cross_encoder`]).
    cross: OnceCell<CrossState>,
    /// Held shared by every load for as long as any of its parts runs (the model's blocking task
    /// included, which outlives a load that gave up early); shutdown takes it exclusively, so it
    /// returns only once no load is in flight, and marks the backend closed (`true`) so that no load
    /// begins after it: a load spawned at start that had not yet begun when the stop came would
    /// otherwise set the model's native runtime up while the process exits.
    loads: Arc<RwLock<bool>>,
}

impl<S: Store> std::fmt::Debug for SemanticBackend<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SemanticBackend")
            .field("freshness", &self.freshness())
            .field("loaded", &self.loaded.initialized())
            .finish_non_exhaustive()
    }
}

struct Loaded<V> {
    index: Arc<MemorySemanticIndex<V>>,
    follower: Follower,
}

/// The rerank stage's cross-encoder as its load left it.
enum CrossState {
    /// Not loaded: the process runs with `--rerank-model off`.
    Off,
    /// Loaded.
    Ready(Arc<dyn CrossEncoder>),
    /// Loading failed; the message names the file and the fetch command (never input text).
    Failed(String),
}

enum Follower {
    /// The position this process's in-memory index reflects; the lock also serializes catch-ups.
    CatchUp(Mutex<ChangeSequence>),
    /// `None` once shut down.
    Background(RwLock<Option<Indexer>>),
}

impl<S: Store> SemanticBackend<S> {
    /// The semantic index over `store` for one-shot commands ([`Freshness::CatchUp`]), its vectors in
    /// `vectors` (the store's own database), its model found by [`ModelAssets::from_env`]. Loads no
    /// model.
    pub fn catching_up(store: Arc<S>, vectors: Arc<S::Vectors>) -> Result<Self, Refusal> {
        Self::with_assets(store, vectors, None, ModelAssets::from_env())
    }

    /// The semantic index over `store` for the server ([`Freshness::Background`]): once loaded, an
    /// [`Indexer`] follows `feed`. When the feed's `changes_since` itself waits for new changes
    /// ([`Store::FEED_WAITS`]), the indexer polls again after only [`WAITING_FEED_POLL_INTERVAL`].
    pub fn following(
        store: Arc<S>,
        vectors: Arc<S::Vectors>,
        feed: Arc<S::Feed>,
    ) -> Result<Self, Refusal> {
        let mut options = IndexerOptions::default();
        if S::FEED_WAITS {
            options.poll_interval = WAITING_FEED_POLL_INTERVAL;
        }
        Self::with_assets(
            store,
            vectors,
            Some(Following {
                feed,
                options,
                wake: None,
            }),
            ModelAssets::from_env(),
        )
    }

    /// A one-shot backend with an explicit assets folder (tests).
    pub fn catching_up_with_assets(
        store: Arc<S>,
        vectors: Arc<S::Vectors>,
        assets: ModelAssets,
    ) -> Result<Self, Refusal> {
        Self::with_assets(store, vectors, None, assets)
    }

    fn with_assets(
        store: Arc<S>,
        vectors: Arc<S::Vectors>,
        following: Option<Following<S::Feed>>,
        assets: ModelAssets,
    ) -> Result<Self, Refusal> {
        let profile = SemanticProfile::minilm_l6_v2();
        let digest = profile.digest()?;
        let config = IndexOptions::default().config(profile.clone())?;
        Ok(Self {
            store,
            vectors,
            assets,
            profile,
            digest,
            config,
            options: IndexOptions::default(),
            following,
            loaded: OnceCell::new(),
            cross: OnceCell::new(),
            loads: Arc::new(RwLock::new(false)),
        })
    }

    /// Sets the index's capacity, how it holds its vectors and how wide its HNSW searches are
    /// ([`IndexOptions`]: `--max-chunks`, `--compact-vectors`, `--hnsw-ef-search`). Refused
    /// (`invalid-input` or `too-large`) when the index cannot be set up that way; nothing is
    /// allocated for it up front.
    pub fn with_index_options(mut self, options: IndexOptions) -> Result<Self, Refusal> {
        self.config = options.config(self.profile.clone())?;
        self.options = options;
        Ok(self)
    }

    /// Lets a recall that finds the server's index behind the store wake the feed with `wake` (the
    /// signal the server's commits give a SQLite feed; `None` for a feed that wakes by itself).
    pub fn waking(mut self, wake: Option<CommitSignal>) -> Self {
        if let Some(following) = &mut self.following {
            following.wake = wake;
        }
        self
    }

    /// The index options it was built with ([`Self::with_index_options`]).
    pub fn index_options(&self) -> IndexOptions {
        self.options
    }

    /// The index's bounds.
    pub fn bounds(&self) -> IndexBounds {
        self.config.bounds
    }

    /// How this backend keeps its index up to date.
    pub fn freshness(&self) -> Freshness {
        if self.following.is_some() {
            Freshness::Background
        } else {
            Freshness::CatchUp
        }
    }

    /// Loads the model, the index and the rerank model now and waits for them, so the server's
    /// first recall pays for none of them. A failure is logged (by kind) and retried on the next need: the lexical mode and every
    /// write work without the model.
    pub async fn load_now(&self) {
        if let Err(refusal) = self.loaded().await {
            tracing::warn!(
                kind = refusal.kind().as_str(),
                "semantic index not loaded; semantic recall modes are unavailable"
            );
        }
        // A failure is logged by the load and answered to each recall that reranks.
        let _ = self.cross_encoder().await;
    }

    /// Loads the model and the index now, in the background, so the server's indexer starts following
    /// the feed without waiting for a first semantic call. A failure is logged (by kind) and retried on
    /// the next need.
    pub fn start_loading(self: &Arc<Self>) {
        let backend = Arc::clone(self);
        tokio::spawn(async move { backend.load_now().await });
    }

    /// The profile every vector of this index is computed under (its chunking also cuts lexical hits
    /// on long documents into excerpts).
    pub fn profile(&self) -> (&SemanticProfile, ProfileDigest) {
        (&self.profile, self.digest)
    }

    /// The index once the model and the stored vectors are loaded, `None` before (the HTTP server's
    /// `/healthz` and `/metrics` read it without waiting).
    pub fn loaded_index(&self) -> Option<Arc<MemorySemanticIndex<S::Vectors>>> {
        self.loaded.get().map(|loaded| Arc::clone(&loaded.index))
    }

    /// The index, holding every change committed before the call, in both modes: in catch-up mode
    /// this process indexes the changes first; in background mode the call waits for the server's
    /// indexer to pass the store's head read at its start, waking the feed so that another
    /// process's writes (the remembering worker's) are read at once rather than at the feed's
    /// fallback poll. Answers the index and what it reflected ([`IndexedAt`]).
    ///
    /// Why the server waits too: a served recall that took the indexer's progress as it was
    /// answered from an index behind the store, so the hook's prompt right after a worker pass got
    /// nothing (or less) where the one-shot hook, which catches up, got the worker's new memory
    /// (issue 42, item 3). A recall now means the same thing at every door. The wait costs one
    /// head read when the index is current, and an indexing batch when it is not.
    ///
    /// Both the model's load and the catch-up count against `deadline` (the recall's `timeout_ms`): a
    /// recall that cannot get the index up to date in time is refused as `unavailable`, saying how many
    /// changes the index is behind and that `memory sync` catches up. Batches indexed before the
    /// deadline stay indexed (the position is persisted after each), so a later call resumes there.
    pub async fn index_for_query(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<(Arc<MemorySemanticIndex<S::Vectors>>, IndexedAt), Refusal> {
        let loaded = match tokio::time::timeout_at(deadline, self.loaded()).await {
            Ok(loaded) => loaded?,
            Err(_) => {
                return Err(Refusal::unavailable(
                    "the embedding model did not load within timeout_ms; retry with a longer \
                     timeout, or keep a `memory serve` running (it loads the model at start)",
                ));
            }
        };
        let head = self.head().await?;
        let indexed = match &loaded.follower {
            Follower::CatchUp(position) => {
                let caught = tokio::time::timeout_at(
                    deadline,
                    self.catch_up(&loaded.index, position, head, false),
                )
                .await;
                match caught {
                    Ok(caught) => caught?,
                    Err(_) => {
                        let indexed = self.indexed_position().await.ok();
                        return Err(Self::behind(head, indexed));
                    }
                }
                (*position.lock().await).max(head)
            }
            Follower::Background(indexer) => {
                let indexer = indexer.read().await;
                let Some(indexer) = indexer.as_ref() else {
                    return Err(Refusal::unavailable("the semantic indexer has shut down"));
                };
                self.wait_for_indexer(indexer, head, deadline).await?
            }
        };
        Ok((Arc::clone(&loaded.index), IndexedAt { indexed, head }))
    }

    /// Waits until the background `indexer` has passed `head`, waking its feed every
    /// [`FRESHNESS_WAKE_INTERVAL`]; refused as `unavailable` (how many changes behind) at `deadline`.
    async fn wait_for_indexer(
        &self,
        indexer: &Indexer,
        head: ChangeSequence,
        deadline: tokio::time::Instant,
    ) -> Result<ChangeSequence, Refusal> {
        let wake = self
            .following
            .as_ref()
            .and_then(|following| following.wake.as_ref());
        loop {
            let position = indexer.position();
            if position >= head {
                return Ok(position);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Self::behind(head, Some(position)));
            }
            if let Some(wake) = wake {
                wake.committed();
            }
            let next = (tokio::time::Instant::now() + FRESHNESS_WAKE_INTERVAL).min(deadline);
            // A timeout here only means: wake the feed again.
            if let Ok(Err(error)) =
                tokio::time::timeout_at(next, indexer.wait_until_indexed(head)).await
            {
                return Err(Refusal::from(error));
            }
        }
    }

    /// The refusal of a recall whose index could not reach `head` in time (`indexed`: where it got).
    fn behind(head: ChangeSequence, indexed: Option<ChangeSequence>) -> Refusal {
        let behind = match indexed {
            Some(indexed) => head.get().saturating_sub(indexed.get()).to_string(),
            None => "an unknown number of".to_owned(),
        };
        Refusal::unavailable(format!(
            "the semantic index is {behind} changes behind the store and could not catch up \
             within timeout_ms; run `memory sync` to catch up, then recall again"
        ))
    }

    /// `memory_sync`: returns the store's head once every change up to it is indexed. Loads nothing when
    /// the stored vectors already reflect the head and the model is not loaded yet (a later load starts
    /// from them).
    pub async fn sync(&self) -> Result<Synced, Refusal> {
        let head = self.head().await?;
        let (vectors, digest) = (Arc::clone(&self.vectors), self.digest);
        let stored =
            on_blocking_pool(async move { vectors.unindexed_counts(&digest).await }).await??;
        // Documents refused for room are retried by every sync (the capacity may have been raised, or
        // documents withdrawn), so only a sync with none waiting may answer without loading.
        let retry = stored
            .iter()
            .any(|(reason, count)| *reason == UnindexedReason::Capacity && *count > 0);
        if !retry && self.loaded.get().is_none() && self.indexed_position().await? >= head {
            // Nothing to index, but the stored chunks must still fit the index this process may
            // hold (opened with a smaller --max-chunks than the store was filled with): refused as
            // a load of them is, so sync never answers what status and recall would refuse. The
            // store keeps the count: this reads no vector.
            let (vectors, digest) = (Arc::clone(&self.vectors), self.digest);
            let chunks =
                on_blocking_pool(async move { vectors.stored_chunks(&digest).await }).await??;
            let max = self.config.bounds.max_chunks as u64;
            if chunks > max {
                return Err(Refusal::from(SemanticError::TooLarge {
                    limit: "max_chunks",
                    max,
                    actual: chunks,
                }));
            }
            return self.synced(head, &stored, None);
        }
        let loaded = self.loaded().await?;
        match &loaded.follower {
            Follower::CatchUp(position) => {
                self.catch_up(&loaded.index, position, head, retry).await?;
                // The next one-shot command loads this graph instead of answering exactly: a small
                // catch-up over a loaded graph saves it as it is, only a missing one is built.
                loaded.index.persist_graph().await?;
            }
            Follower::Background(indexer) => {
                let guard = indexer.read().await;
                let Some(indexer) = guard.as_ref() else {
                    return Err(Refusal::unavailable("the semantic indexer has shut down"));
                };
                indexer.wait_until_indexed(head).await?;
                // The graph the indexer kept up to date is saved (a no-op when unchanged), so a
                // one-shot recall after this sync loads it and answers `hnsw` as the server does,
                // rather than `exact` until the next periodic save.
                drop(guard);
                self.save_graph().await;
            }
        }
        let unindexed = loaded.index.unindexed_counts().await?;
        self.synced(head, &unindexed, Some(loaded.index.stats().live_chunks))
    }

    /// The answer of a sync that reached `head`, or its refusal when documents wait for room in the
    /// index: a sync never reports as searchable what the index could not take.
    fn synced(
        &self,
        head: ChangeSequence,
        unindexed: &[(UnindexedReason, u64)],
        live_chunks: Option<usize>,
    ) -> Result<Synced, Refusal> {
        let waiting: u64 = unindexed
            .iter()
            .filter(|(reason, _)| *reason == UnindexedReason::Capacity)
            .map(|(_, count)| count)
            .sum();
        if waiting > 0 {
            let max = self.config.bounds.max_chunks as u64;
            let held =
                live_chunks.map_or_else(String::new, |live| format!(" holding {live} chunks"));
            return Err(Refusal::new(
                memory_core::ErrorKind::TooLarge,
                format!(
                    "max_chunks exceeds its limit: the semantic index{held} is at its capacity of \
                     {max} chunks and {waiting} documents are not searchable; raise --max-chunks \
                     (MEMORY_MAX_CHUNKS) or withdraw documents, then sync again"
                ),
            ));
        }
        Ok(Synced {
            head,
            unindexed: unindexed.iter().map(|(_, count)| count).sum(),
        })
    }

    /// Saves the server's graph if it changed since it was loaded or last saved (never builds one), so
    /// a restart loads it instead of rebuilding.
    pub async fn save_graph(&self) {
        let Some(loaded) = self.loaded.get() else {
            return;
        };
        if let Err(error) = loaded.index.save_graph().await {
            tracing::warn!(
                kind = error.kind().as_str(),
                "could not save the hnsw graph"
            );
        }
    }

    /// Stops the background indexer, letting its current batch finish. A sync still waiting for the
    /// indexer may hold it for at most [`SHUTDOWN_GRACE`]; after that the indexer is left to be
    /// aborted with the process (every vector write is one transaction, so nothing is half-written).
    pub async fn shutdown(&self) {
        // Held to the end: no load starts while the indexer stops and the graph is saved.
        let _no_load = match tokio::time::timeout(LOAD_GRACE, self.loads.write()).await {
            Ok(mut gate) => {
                *gate = true;
                Some(gate)
            }
            Err(_) => {
                tracing::warn!("the embedding model is still loading at shutdown; not waiting");
                None
            }
        };
        let Some(Loaded {
            follower: Follower::Background(indexer),
            ..
        }) = self.loaded.get()
        else {
            return;
        };
        match tokio::time::timeout(SHUTDOWN_GRACE, indexer.write()).await {
            Ok(mut indexer) => {
                if let Some(indexer) = indexer.take() {
                    indexer.shutdown().await;
                }
            }
            Err(_) => tracing::warn!("semantic indexer still busy at shutdown; abandoning it"),
        }
        // What the indexer applied since the last save, so the next start loads the graph.
        self.save_graph().await;
    }

    async fn loaded(&self) -> Result<&Loaded<S::Vectors>, Refusal> {
        self.loaded.get_or_try_init(|| self.load()).await
    }

    async fn load(&self) -> Result<Loaded<S::Vectors>, Refusal> {
        let assets = self.assets.clone();
        let profile = self.profile.clone();
        // The server indexes while it answers: its queries get a session of their own and its
        // indexer embeds on a low-priority thread, so a recall never waits for an indexing batch.
        // One-shot commands embed and then query, one after the other, on one session.
        let isolated = self.following.is_some();
        let in_flight = Arc::new(Arc::clone(&self.loads).read_owned().await);
        if **in_flight {
            return Err(Refusal::unavailable(
                "the server is shutting down; the embedding model is not loaded",
            ));
        }
        let model_in_flight = Arc::clone(&in_flight);
        // Reading and initializing the model takes a while; keep it off the async workers. The
        // stored vectors load meanwhile (`StoredIndex` needs no model), so a restart costs the
        // longer of the two, not their sum.
        // Spawned, so the load starts now and runs while this task reads the vectors.
        let model = tokio::spawn(blocking(move || {
            let _in_flight = model_in_flight;
            #[cfg(feature = "failpoints")]
            let load_mark = model_load_failpoint::before();
            let loaded = if isolated {
                FastembedEmbedder::load_isolated(&assets, &profile)
            } else {
                FastembedEmbedder::load(&assets, &profile)
            };
            #[cfg(feature = "failpoints")]
            model_load_failpoint::after(load_mark);
            loaded
        }));
        // Read before the vectors are loaded: those may run ahead of it (never behind), and changes
        // indexed twice are replays.
        let start = self.indexed_position().await?;
        // One-shot commands never build a graph they would throw away: they load a fresh persisted
        // one or answer exactly (`answered_by` says which). The server builds in the background.
        let startup = if self.following.is_some() {
            HnswStartup::Background
        } else {
            HnswStartup::LoadOnly
        };
        let stored = StoredIndex::load(
            self.config.clone().with_hnsw_startup(startup),
            Arc::clone(&self.vectors),
        )
        .await;
        // The model's failure is reported first, as when it was loaded alone: without it no
        // semantic mode works, whatever the vectors.
        let embedder = model
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or_else(|| Refusal::unavailable("loading the embedding model failed"))??;
        let index = Arc::new(stored.and_then(|stored| stored.with_embedder(Arc::new(embedder)))?);
        let follower = match &self.following {
            None => Follower::CatchUp(Mutex::new(start)),
            Some(Following { feed, options, .. }) => {
                let indexer = Indexer::spawn(
                    Arc::clone(&index),
                    Arc::clone(feed),
                    Arc::clone(feed),
                    *options,
                )
                .await?;
                // The indexer starts from the stored position as it reads it now, after the vectors
                // were loaded. Another process sharing the store (a second server, a one-shot
                // command) may have indexed and recorded changes in between: they are in the store
                // but not in this process's index, and the indexer would never revisit them. Index
                // that gap here; changes the load already brought in are replays.
                let resumed = indexer.position();
                if resumed > start {
                    let gap = catch_up(&index, &**feed, &**feed, start, resumed, *options).await;
                    if let Err(error) = gap {
                        indexer.shutdown().await;
                        return Err(Refusal::from(error));
                    }
                }
                Follower::Background(RwLock::new(Some(indexer)))
            }
        };
        tracing::debug!(chunks = index.stats().live_chunks, "semantic index ready");
        Ok(Loaded { index, follower })
    }

    /// The cross-encoder hybrid recall's rerank stage scores with, loaded on first need (only a
    /// hybrid recall that reranks asks, so a sync or another mode never loads it; the server loads
    /// it at start, [`Self::load_now`]): `None` when this process does not load one
    /// (`--rerank-model off`), refused (`unavailable`, naming the missing or mismatched file and the
    /// fetch command) when loading it failed: a recall that asks for the stage is never silently
    /// ranked without its model.
    pub async fn cross_encoder(&self) -> Result<Option<Arc<dyn CrossEncoder>>, Refusal> {
        let state = self.cross.get_or_init(|| self.load_cross_encoder()).await;
        match state {
            CrossState::Off => Ok(None),
            CrossState::Ready(cross) => Ok(Some(Arc::clone(cross))),
            CrossState::Failed(message) => Err(Refusal::unavailable(message.clone())),
        }
    }

    /// [`load_cross_encoder`] under the shutdown guard every load holds.
    async fn load_cross_encoder(&self) -> CrossState {
        let in_flight = Arc::clone(&self.loads).read_owned().await;
        if *in_flight {
            return CrossState::Failed(
                "the server is shutting down; the rerank model is not loaded".to_owned(),
            );
        }
        let (options, assets) = (self.options, self.assets.clone());
        let loaded = blocking(move || {
            let _in_flight = in_flight;
            load_cross_encoder(options, &assets)
        })
        .await;
        match loaded {
            Ok(Ok(None)) => CrossState::Off,
            Ok(Ok(Some(cross))) => CrossState::Ready(cross),
            Ok(Err(refusal)) | Err(refusal) => {
                tracing::warn!("rerank model not loaded: {}", refusal.message());
                CrossState::Failed(refusal.message().to_owned())
            }
        }
    }

    /// The store's head, read on the blocking pool.
    async fn head(&self) -> Result<ChangeSequence, Refusal> {
        let store = Arc::clone(&self.store);
        Ok(on_blocking_pool(async move { store.head().await }).await??)
    }

    /// The change the stored vectors reflect, read on the blocking pool.
    async fn indexed_position(&self) -> Result<ChangeSequence, Refusal> {
        let (vectors, digest) = (Arc::clone(&self.vectors), self.digest);
        Ok(on_blocking_pool(async move { vectors.indexed_position(&digest).await }).await??)
    }

    /// Indexes every change after `position` up to at least `head` with semantic-index's
    /// [`catch_up`] (the background indexer's batches, run once in this task), persisting the position
    /// after each batch. A source refused by a size limit is skipped (and counted in the log); any other
    /// failure stops the catch-up with a refusal and leaves `position` where it was (the batches already
    /// done replay as unchanged next time).
    async fn catch_up(
        &self,
        index: &MemorySemanticIndex<S::Vectors>,
        position: &Mutex<ChangeSequence>,
        head: ChangeSequence,
        retry_capacity: bool,
    ) -> Result<(), Refusal> {
        let mut position = position.lock().await;
        if *position >= head && !retry_capacity {
            return Ok(());
        }
        let options = IndexerOptions {
            batch_size: CATCH_UP_BATCH,
            ..IndexerOptions::default()
        };
        // The store's reads run on the blocking pool, like every store call of the services.
        let store = PoolFeed::new(Arc::clone(&self.store));
        // Sources the index cannot take are recorded unindexed (by reason) and the position moves on;
        // a sync refuses afterwards while any wait for room (see [`Self::synced`]), a recall answers
        // from what is indexed.
        let caught = catch_up_report(index, &store, &store, *position, head, options).await?;
        *position = caught.position;
        Ok(())
    }
}

/// Whether a process loads the rerank stage's cross-encoder (`--rerank-model`,
/// `MEMORY_RERANK_MODEL`; see semantic-index's `cross_encoder` module).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RerankModel {
    /// Loaded with the embedder; hybrid recall's rerank stage scores with it (the default of every
    /// door but the one-shot hook).
    #[default]
    On,
    /// Not loaded; the stage ranks by the signals recall already has (the one-shot hook's
    /// default: loading the model costs its path more than the 150 ms it may add).
    Off,
}

impl RerankModel {
    /// `on` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
        }
    }

    /// Parses the flag's and the variable's value by the one reading of an on/off setting
    /// ([`crate::settings::parse_switch`]: `on`/`off`, `1`/`0`, `true`/`false`, `yes`/`no`).
    pub fn parse(value: &str) -> Result<Self, Refusal> {
        match crate::settings::parse_switch(value) {
            Ok(true) => Ok(Self::On),
            Ok(false) => Ok(Self::Off),
            Err(message) => Err(Refusal::invalid_input(format!("rerank model: {message}"))),
        }
    }
}

/// The rerank stage's cross-encoder as `options` ask for it (`--rerank-model`): `None` when off,
/// else loaded from `assets` (blocking: reads and checks 34 MB), refused (`unavailable`, naming the
/// file and the fetch command) when it cannot be. Every process that ranks as the product does
/// loads it through here: the backend, and the eval harness over its own index.
pub fn load_cross_encoder(
    options: IndexOptions,
    assets: &ModelAssets,
) -> Result<Option<Arc<dyn CrossEncoder>>, Refusal> {
    match options.rerank_model {
        RerankModel::Off => Ok(None),
        RerankModel::On => match FastembedCrossEncoder::load(assets) {
            Ok(cross) => Ok(Some(Arc::new(cross))),
            Err(error) => Err(Refusal::unavailable(format!(
                "the rerank model is not loaded: {error}"
            ))),
        },
    }
}

/// What the global index flags ask of every semantic index a command opens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexOptions {
    /// Most chunks (`--max-chunks`; `None`: [`semantic_index::DEFAULT_MAX_CHUNKS`]).
    pub max_chunks: Option<usize>,
    /// Hold the vectors as int8 codes, each query's candidates rescored with their stored f32
    /// vectors (`--compact-vectors`; see `semantic_index::index::quantized`). Off by default.
    pub compact_vectors: bool,
    /// The HNSW search width (`--hnsw-ef-search`; `None`: [`HnswParams`]'s default).
    pub hnsw_ef_search: Option<usize>,
    /// Whether the rerank stage's cross-encoder is loaded with the embedder (`--rerank-model`).
    pub rerank_model: RerankModel,
}

impl IndexOptions {
    /// The HNSW parameters: the defaults with the asked search width, refused (`invalid-input`,
    /// naming `hnsw.ef_search`) when out of range, before any index is opened.
    pub fn hnsw_params(&self) -> Result<HnswParams, Refusal> {
        let mut params = HnswParams::default();
        if let Some(width) = self.hnsw_ef_search {
            // A chosen width holds at every size: it does not grow with the index.
            params.ef_search = width;
            params.width_grows = false;
        }
        params.validate()?;
        Ok(params)
    }

    /// Checks the options as [`SemanticBackend::with_index_options`] will take them, before any
    /// store is opened ([`crate::settings::Settings::new`]).
    pub fn check(&self) -> Result<(), Refusal> {
        self.config(SemanticProfile::minilm_l6_v2()).map(drop)
    }

    /// The configuration of `profile`'s index under these options: the one builder of every index
    /// the product opens (the backend's, and the eval harness's over its own embedder), so a flag
    /// never means one thing to a door and another to the measurement.
    pub fn config(&self, profile: SemanticProfile) -> Result<SemanticIndexConfig, Refusal> {
        let bounds = index_bounds(&profile, self.max_chunks)?;
        Ok(SemanticIndexConfig {
            hnsw: self.hnsw_params()?,
            ..SemanticIndexConfig::new(profile)
        }
        .with_bounds(bounds)
        .with_compact_vectors(self.compact()))
    }

    /// The index's in-memory encoding.
    pub fn compact(&self) -> CompactVectors {
        if self.compact_vectors {
            CompactVectors::int8()
        } else {
            CompactVectors::F32
        }
    }
}

/// The bounds of `profile`'s index holding at most `max_chunks` chunks (`--max-chunks`; `None`: the
/// default capacity), as every command opens it.
pub fn index_bounds(
    profile: &SemanticProfile,
    max_chunks: Option<usize>,
) -> Result<IndexBounds, Refusal> {
    match max_chunks {
        Some(max_chunks) => {
            IndexBounds::with_max_chunks(profile.dimensions, max_chunks).map_err(Refusal::from)
        }
        None => Ok(IndexBounds::for_dimensions(profile.dimensions)),
    }
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;
    use memory_sqlite::SqliteStore;
    use memory_sqlite::vectors::SqliteVectorStore;
    use semantic_index::FETCH_ASSETS_COMMAND;

    use super::*;

    #[test]
    fn a_chosen_search_width_holds_at_every_size_and_the_default_grows() {
        let default = IndexOptions::default().hnsw_params().expect("defaults");
        assert!(default.width_grows);
        let chosen = IndexOptions {
            hnsw_ef_search: Some(40),
            ..IndexOptions::default()
        }
        .hnsw_params()
        .expect("a width in range");
        assert_eq!((chosen.ef_search, chosen.width_grows), (40, false));
        assert_eq!(chosen.width_for(10_000_000), 40);
        assert!(default.width_for(1_000_000) > default.ef_search);
    }

    #[tokio::test]
    async fn missing_assets_are_unavailable_only_when_something_needs_the_model() {
        let directory = tempfile::tempdir().expect("temporary directory");
        let database = directory.path().join("memory.sqlite");
        let store = Arc::new(SqliteStore::open(&database).expect("store"));
        let vectors = Arc::new(SqliteVectorStore::open(&database).expect("vectors"));
        let backend = SemanticBackend::catching_up_with_assets(
            store,
            vectors,
            ModelAssets::at(directory.path().join("no-assets")),
        )
        .expect("backend");
        assert_eq!(backend.freshness(), Freshness::CatchUp);
        assert_eq!(
            backend.sync().await.expect("nothing to index"),
            Synced {
                head: ChangeSequence::ZERO,
                unindexed: 0
            }
        );
        let refusal = backend
            .index_for_query(tokio::time::Instant::now() + Duration::from_secs(60))
            .await
            .expect_err("a query needs the model");
        assert_eq!(refusal.kind(), ErrorKind::Unavailable);
        assert!(
            refusal.message().contains(FETCH_ASSETS_COMMAND),
            "{}",
            refusal.message()
        );
    }
}

/// Fault injection for tests (feature `failpoints`): `MEMORY_MODEL_LOAD_FAILPOINT=MS:PATH` makes every
/// model load write `started` to the file `PATH` as it begins, wait until a file `PATH.release`
/// exists (at most `MS` milliseconds), and write `loaded` once it has ended, so a test can stop a
/// server in the middle of a load (after it saw `started`, releasing the load only then) and see
/// whether the process waited for it. Without the feature the variable is ignored.
#[cfg(feature = "failpoints")]
mod model_load_failpoint {
    use std::path::PathBuf;

    const VARIABLE: &str = "MEMORY_MODEL_LOAD_FAILPOINT";

    /// Waits as the variable says; the marker to create after the load.
    pub(super) fn before() -> Option<PathBuf> {
        let spec = std::env::var(VARIABLE).ok()?;
        let (millis, path) = spec.split_once(':')?;
        let millis = millis.parse().ok()?;
        let _ = std::fs::write(path, b"started");
        let release = PathBuf::from(format!("{path}.release"));
        let held = std::time::Instant::now();
        while !release.exists() && held.elapsed() < std::time::Duration::from_millis(millis) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Some(PathBuf::from(path))
    }

    pub(super) fn after(mark: Option<PathBuf>) {
        if let Some(path) = mark {
            let _ = std::fs::write(path, b"loaded");
        }
    }
}
