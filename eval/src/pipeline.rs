//! The pipeline users run, stage by stage: conversations into the thread log, committed-activity
//! processing into memory documents, and the semantic indexer following the store.
//!
//! Every stage lives in one SQLite file (the memory store, thread log, progress and vectors each keep
//! their own tables in it), opened with the stores' defaults (`synchronous = FULL`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use memory_core::activity::{
    NewRecord, ProcessorId, ProcessorVersion, ThreadDestination, ThreadId, ThreadLog, WorkerId,
};
use memory_core::{ChangeFeed, MemoryAccess, MemoryScope, NamespaceAddress, SystemClock};
use memory_sqlite::SqliteStore;
use memory_sqlite::progress::SqliteProgressStore;
use memory_sqlite::remembering_store::SqliteRememberingStore;
use memory_sqlite::thread_log::SqliteThreadLog;
use memory_sqlite::vectors::SqliteVectorStore;
use remembering::{
    ActivityProcessor, ActivityProcessorParts, PassLimits, PassStop, UnboundThreads,
};
use semantic_index::{
    Embedder, Indexer, IndexerOptions, SemanticIndex, SemanticIndexConfig, SemanticProfile,
};
use serde::Serialize;

use crate::corpus::{Corpus, Role};
use crate::extract::CorpusExtractor;
use crate::progress::Progress;

/// The namespace definition every eval document is written to.
pub const NAMESPACE_NAME: &str = "eval.people-facts";
/// The scope eval documents are recallable through.
pub const SCOPE: &str = "assistant";
/// The store file's name inside the output folder.
pub const STORE_FILE: &str = "eval.sqlite";

/// The eval namespace of a corpus seed.
pub fn namespace(seed: u64) -> anyhow::Result<NamespaceAddress> {
    Ok(NamespaceAddress::encode(
        NAMESPACE_NAME,
        1,
        &serde_json::json!({ "corpus": format!("seed-{seed}") }),
    )?)
}

/// The access recall runs with.
pub fn access(seed: u64) -> anyhow::Result<MemoryAccess> {
    Ok(MemoryAccess {
        namespace: namespace(seed)?,
        scope: MemoryScope::new(SCOPE)?,
    })
}

/// The destination the eval's threads are bound to: the eval namespace, recallable through its scope.
pub fn destination(access: &MemoryAccess) -> anyhow::Result<ThreadDestination> {
    Ok(ThreadDestination::new(
        access.namespace.clone(),
        vec![access.scope.clone()],
    )?)
}

/// The stores of one pipeline, all in one file.
pub struct Stores {
    /// The file.
    pub path: PathBuf,
    /// Memory documents, lexical index, change feed.
    pub memory: Arc<SqliteStore>,
    /// The thread log.
    pub log: Arc<SqliteThreadLog>,
    /// Committed-activity progress.
    pub progress: Arc<SqliteProgressStore>,
    /// Chunk vectors.
    pub vectors: Arc<SqliteVectorStore>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Stores")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Stores {
    /// Opens (creating) every store in `path`.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            path: path.to_owned(),
            memory: Arc::new(SqliteStore::open(path)?),
            log: Arc::new(SqliteThreadLog::open(path)?),
            progress: Arc::new(SqliteProgressStore::open(path)?),
            vectors: Arc::new(SqliteVectorStore::open(path)?),
        })
    }

    /// Removes a previous run's file (and its WAL) so a run starts from an empty store.
    pub fn remove_previous(path: &Path) -> anyhow::Result<()> {
        for suffix in ["", "-wal", "-shm"] {
            let file = PathBuf::from(format!("{}{suffix}", path.display()));
            match std::fs::remove_file(&file) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }
}

/// Figures of the ingest stages.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IngestFigures {
    /// Thread records appended.
    pub records: usize,
    /// Seconds spent appending them (one durable transaction each).
    pub append_seconds: f64,
    /// Records processed by committed-activity passes.
    pub processed: usize,
    /// Memory writes applied (puts and withdrawals).
    pub writes: usize,
    /// Seconds the passes took, extraction, writes and progress included.
    pub extraction_seconds: f64,
    /// Records per second through the passes.
    pub extraction_records_per_second: f64,
}

/// The id of the eval's committed-activity processor.
pub const PROCESSOR: &str = "eval-corpus-extractor";

/// A committed-activity processor over the stores with the eval extractor.
pub fn processor(
    stores: &Stores,
    seed: u64,
) -> anyhow::Result<ActivityProcessor<SqliteStore, CorpusExtractor>> {
    let access = access(seed)?;
    Ok(ActivityProcessor::new(ActivityProcessorParts {
        log: stores.log.clone(),
        progress: stores.progress.clone(),
        references: Arc::new(SqliteRememberingStore::open(&stores.path)?),
        writer: stores.memory.clone(),
        extractor: CorpusExtractor,
        clock: Arc::new(SystemClock),
        processor: ProcessorId::new(PROCESSOR)?,
        version: ProcessorVersion::new(1),
        owner: WorkerId::new("eval-worker-1")?,
        limits: PassLimits::default(),
        // Every thread is bound when appended (see `ingest`); none is left to a default.
        unbound: UnboundThreads::Destination(destination(&access)?),
    })?)
}

/// Runs passes over `thread` until everything committed is processed; answers records and writes.
pub async fn drain_thread(
    processor: &ActivityProcessor<SqliteStore, CorpusExtractor>,
    thread: &ThreadId,
) -> anyhow::Result<(usize, usize)> {
    let (mut records, mut writes) = (0, 0);
    loop {
        let report = processor.run_pass(thread).await?;
        records += report.processed;
        writes += report.receipts.len();
        if report.stop == PassStop::ReachedTail && !report.pending_beyond_tail {
            return Ok((records, writes));
        }
    }
}

/// Appends every conversation to the thread log, then processes every thread.
pub async fn ingest(
    stores: &Stores,
    corpus: &Corpus,
    progress: &Progress,
) -> anyhow::Result<IngestFigures> {
    let mut figures = IngestFigures::default();
    let total_turns: usize = corpus.conversations.iter().map(|c| c.turns.len()).sum();
    let bar = progress.bar("thread log", total_turns as u64);
    let started = Instant::now();
    let mut threads = Vec::with_capacity(corpus.conversations.len());
    // As a host binds its threads: the first append names where their memory goes.
    let destination = destination(&access(corpus.shape.seed)?)?;
    for conversation in &corpus.conversations {
        let thread = ThreadId::new(conversation.thread.as_str())?;
        for turn in &conversation.turns {
            let record = match turn.role {
                Role::User => NewRecord::user(turn.speaker.as_str(), turn.text.as_str(), turn.at),
                Role::Assistant => NewRecord::assistant(turn.text.as_str(), turn.at),
            };
            stores.log.append_to(&thread, Some(&destination), record)?;
            figures.records += 1;
            bar.inc(1);
        }
        threads.push(thread);
    }
    bar.finish_and_clear();
    figures.append_seconds = started.elapsed().as_secs_f64();

    let processor = processor(stores, corpus.shape.seed)?;
    let bar = progress.bar("remembering", threads.len() as u64);
    let started = Instant::now();
    for thread in &threads {
        let (records, writes) = drain_thread(&processor, thread).await?;
        figures.processed += records;
        figures.writes += writes;
        bar.inc(1);
    }
    bar.finish_and_clear();
    figures.extraction_seconds = started.elapsed().as_secs_f64();
    figures.extraction_records_per_second = rate(figures.processed, figures.extraction_seconds);
    Ok(figures)
}

/// Items per second, 0 when no time passed.
pub fn rate(items: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        items as f64 / seconds
    } else {
        0.0
    }
}

/// Figures of the initial indexing.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IndexingFigures {
    /// Sources known to the index (withdrawn ones included).
    pub sources: usize,
    /// Live chunks.
    pub chunks: usize,
    /// Seconds from starting the indexer until it caught up with the change feed.
    pub seconds: f64,
    /// Changes indexed per second (each a read, chunk, embed and persist).
    pub changes_per_second: f64,
    /// Chunks embedded and indexed per second.
    pub chunks_per_second: f64,
}

/// The semantic side of a pipeline.
pub struct Semantic<E> {
    /// The index (exact and HNSW).
    pub index: Arc<SemanticIndex<E, SqliteVectorStore>>,
    /// The indexer following the store.
    pub indexer: Indexer,
}

impl<E> std::fmt::Debug for Semantic<E> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Semantic").finish_non_exhaustive()
    }
}

/// The profile the harness indexes with for an embedder of `dimensions`: the default profile, with the
/// dimensions of the embedder (the deterministic test embedder differs).
pub fn profile_for(dimensions: usize) -> SemanticProfile {
    let mut profile = SemanticProfile::minilm_l6_v2();
    profile.dimensions = dimensions;
    profile
}

/// The product's configuration of `profile`'s index ([`memory_service::semantic::IndexOptions::config`])
/// under the index settings `memory` reads from the environment (`MEMORY_MAX_CHUNKS`,
/// `MEMORY_COMPACT_VECTORS`, `MEMORY_HNSW_EF_SEARCH`), so the harness measures the index a binary opens.
pub fn index_config(profile: SemanticProfile) -> anyhow::Result<SemanticIndexConfig> {
    let settings = memory_service::settings::Settings::from_env()
        .map_err(|refusal| anyhow::anyhow!("{}", refusal.message()))?;
    settings
        .index
        .config(profile)
        .map_err(|refusal| anyhow::anyhow!("{}", refusal.message()))
}

/// Opens the index over the stored vectors (the product's configuration, [`index_config`]), starts the
/// indexer and waits until it has caught up.
pub async fn index<E: Embedder>(
    stores: &Stores,
    embedder: Arc<E>,
    profile: SemanticProfile,
) -> anyhow::Result<(Semantic<E>, IndexingFigures)> {
    let index = Arc::new(
        SemanticIndex::open(index_config(profile)?, embedder, stores.vectors.clone()).await?,
    );
    let started = Instant::now();
    let indexer = Indexer::spawn(
        index.clone(),
        stores.memory.clone(),
        stores.memory.clone(),
        IndexerOptions::default(),
    )
    .await?;
    let head = stores.memory.head().await?;
    indexer.wait_until_indexed(head).await?;
    let seconds = started.elapsed().as_secs_f64();
    let stats = index.stats();
    let figures = IndexingFigures {
        sources: stats.sources,
        chunks: stats.live_chunks,
        seconds,
        changes_per_second: rate(usize::try_from(head.get()).unwrap_or(usize::MAX), seconds),
        chunks_per_second: rate(stats.live_chunks, seconds),
    };
    Ok((Semantic { index, indexer }, figures))
}
