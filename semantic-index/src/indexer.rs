//! The background indexer: follows a store's [`ChangeFeed`], refreshes the changed sources, and records
//! its position through the [`VectorStore`] so a restart resumes where it stopped.
//!
//! Within one batch, a key changed several times is refreshed once, at its latest sequence (the
//! generation). The batch's sources are refreshed together ([`SemanticIndex::refresh_many`]): one
//! grouped read, and embedder calls of up to [`IndexerOptions::max_embed_texts`] chunks shared by
//! several documents, while each source keeps its own fencing and atomic replacement. Refreshes that
//! are fenced or withdrawn are settled. A source a limit refuses is never reported as searchable: it
//! is recorded durably as unindexed, with its reason ([`UnindexedReason`]: `too_large`,
//! `too_many_chunks`, `capacity`, `invalid`), through [`VectorStore::record_unindexed`] before the
//! position moves past it, and the record is cleared (in the same transaction as the vectors) once
//! a later change indexes or withdraws the source. Any other failure (embedder, store) stops the
//! batch, and the batch is retried after `retry_delay` without advancing the position, so nothing is
//! skipped (sources already applied replay as unchanged).
//!
//! Capacity: a source refused because the index is full (`max_chunks`, `max_sources` or the
//! identity bound) is recorded as `capacity` and retried when space may have freed: at the start of
//! every [`catch_up`] and again at its end if its batches freed room, and by the background indexer
//! whenever it is idle after the index lost live chunks. A retry that is still refused stops the retries until the next occasion.
//!
//! [`catch_up`] runs the same batches in the caller's task, once, up to a given position: what a
//! one-shot command uses instead of a background [`Indexer`]. It answers `TooLarge` (naming the
//! capacity bound, usually `max_chunks`) when sources remain unindexed for capacity, so `memory sync`
//! refuses instead of answering that everything is searchable; [`catch_up_report`] does the same
//! work and reports the counts instead.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memory_core::vectors::{SourceGeneration, UnindexedReason, VectorStore};
use memory_core::{ChangeFeed, ChangeSequence, MemoryKey, MemoryReader};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::embed::Embedder;
use crate::engine::{RefreshResults, SemanticIndex, vector_call};
use crate::error::SemanticError;

/// Indexer settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexerOptions {
    /// Most changes read per batch.
    pub batch_size: usize,
    /// Wait between polls when the feed has nothing new.
    pub poll_interval: Duration,
    /// Wait before retrying a batch that failed.
    pub retry_delay: Duration,
    /// Most chunks per embedder call; chunks of several documents share a call up to this (a document
    /// is never split, so one with more chunks gets a call of its own).
    pub max_embed_texts: usize,
}

/// Default [`IndexerOptions::max_embed_texts`]: large enough that the per-call overhead of the model
/// is amortized over many short documents, small enough that one call stays well under a second on a
/// laptop CPU with all-MiniLM-L6-v2 (about 250 short chunks/s on two cores).
pub const DEFAULT_MAX_EMBED_TEXTS: usize = 64;

impl IndexerOptions {
    fn validate(&self) -> Result<(), SemanticError> {
        if self.batch_size == 0 {
            return Err(SemanticError::invalid("batch_size", "must be positive"));
        }
        if self.max_embed_texts == 0 {
            return Err(SemanticError::invalid(
                "max_embed_texts",
                "must be positive",
            ));
        }
        Ok(())
    }
}

impl Default for IndexerOptions {
    fn default() -> Self {
        Self {
            batch_size: 256,
            poll_interval: Duration::from_millis(20),
            retry_delay: Duration::from_millis(200),
            max_embed_texts: DEFAULT_MAX_EMBED_TEXTS,
        }
    }
}

/// A running indexer. Dropping it stops the task.
#[derive(Debug)]
pub struct Indexer {
    position: watch::Receiver<ChangeSequence>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    skipped: Arc<AtomicU64>,
}

impl Indexer {
    /// Starts following `feed` from the position stored for `index`'s profile.
    pub async fn spawn<E, S, F, R>(
        index: Arc<SemanticIndex<E, S>>,
        feed: Arc<F>,
        reader: Arc<R>,
        options: IndexerOptions,
    ) -> Result<Self, SemanticError>
    where
        E: Embedder,
        S: VectorStore + 'static,
        F: ChangeFeed + 'static,
        R: MemoryReader + 'static,
    {
        options.validate()?;
        let digest = index.digest();
        let start = vector_call(index.store(), move |store| async move {
            store.indexed_position(&digest).await
        })
        .await?;
        let (position_sender, position) = watch::channel(start);
        let (stop, mut stopped) = watch::channel(false);
        let skipped = Arc::new(AtomicU64::new(0));
        let skipped_in_task = skipped.clone();
        let task = tokio::spawn(async move {
            let mut current = start;
            let mut capacity = CapacityRetry::default();
            loop {
                if *stopped.borrow() {
                    return;
                }
                let wait = match step(
                    &index,
                    &*feed,
                    &*reader,
                    current,
                    options,
                    &skipped_in_task,
                    &mut capacity,
                )
                .await
                {
                    Ok(Some(next)) => {
                        current = next;
                        position_sender.send_replace(next);
                        continue;
                    }
                    Ok(None) => {
                        if capacity.due(index.stats().live_chunks)
                            && let Err(error) =
                                retry_capacity(&index, &*reader, options, &mut capacity).await
                        {
                            tracing::warn!(
                                kind = error.kind().as_str(),
                                "retry of sources unindexed for capacity failed"
                            );
                        }
                        options.poll_interval
                    }
                    Err(error) => {
                        tracing::warn!(
                            kind = error.kind().as_str(),
                            "indexer batch failed; retrying"
                        );
                        options.retry_delay
                    }
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stopped.changed() => return,
                }
            }
        });
        Ok(Self {
            position,
            stop,
            task: Some(task),
            skipped,
        })
    }

    /// The position up to which every committed change is indexed.
    pub fn position(&self) -> ChangeSequence {
        *self.position.borrow()
    }

    /// Sources this indexer recorded as unindexed because a limit refused them.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Waits until every change up to `head` is indexed (use the feed's `head()` for "everything
    /// committed up to now"). Fails if the indexer stopped first.
    pub async fn wait_until_indexed(&self, head: ChangeSequence) -> Result<(), SemanticError> {
        let mut position = self.position.clone();
        position
            .wait_for(|position| *position >= head)
            .await
            .map(|_| ())
            .map_err(|_| SemanticError::Task { what: "indexer" })
    }

    /// Stops the task and waits for it to end.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Indexer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// What [`catch_up`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatchUp {
    /// The position every change up to which is now indexed or recorded as unindexed (and stored as
    /// the indexed position).
    pub position: ChangeSequence,
    /// Sources this call recorded as unindexed because a limit refused them.
    pub skipped: u64,
    /// Sources recorded as unindexed after this call, for any reason: never reported as searchable.
    pub unindexed: u64,
    /// Of those, sources unindexed because the index is full.
    pub capacity_unindexed: u64,
}

/// Indexes, in the calling task, every change after `from` up to at least `until` (usually the
/// feed's `head()` read just before: "everything committed up to now"), in the batches a background
/// [`Indexer`] would use, storing the indexed position after each batch, as [`catch_up_report`]
/// does; then refuses with `TooLarge` when sources remain unindexed because the index is full (the
/// limit is the one that refused them, `max_chunks` for the chunk capacity), so a sync does not
/// report them as searchable. The work before the refusal is kept: positions are stored, and every
/// refused source is recorded as unindexed (and retried by the next catch-up).
///
/// `from` is the position `index`'s in-memory state reflects (the stored position read before the
/// index was opened, then what the previous catch-up returned), not the stored position read now: a
/// concurrent process may have advanced that one past changes this index has not loaded.
///
/// A failure (embedder, store) stops the catch-up: the batches before it stay indexed and their
/// position stored, so calling again from the same `from` redoes only replays and the rest.
pub async fn catch_up<E, S, F, R>(
    index: &SemanticIndex<E, S>,
    feed: &F,
    reader: &R,
    from: ChangeSequence,
    until: ChangeSequence,
    options: IndexerOptions,
) -> Result<CatchUp, SemanticError>
where
    E: Embedder,
    S: VectorStore + 'static,
    F: ChangeFeed,
    R: MemoryReader,
{
    let mut capacity = CapacityRetry::default();
    let caught = catch_up_with(index, feed, reader, from, until, options, &mut capacity).await?;
    if caught.capacity_unindexed > 0 {
        return Err(capacity.refusal(index, caught.capacity_unindexed));
    }
    Ok(caught)
}

/// [`catch_up`] without the capacity refusal: the same work, and the counts in the answer (a caller
/// that keeps its in-memory position with the answer, then refuses on `capacity_unindexed`).
pub async fn catch_up_report<E, S, F, R>(
    index: &SemanticIndex<E, S>,
    feed: &F,
    reader: &R,
    from: ChangeSequence,
    until: ChangeSequence,
    options: IndexerOptions,
) -> Result<CatchUp, SemanticError>
where
    E: Embedder,
    S: VectorStore + 'static,
    F: ChangeFeed,
    R: MemoryReader,
{
    let mut capacity = CapacityRetry::default();
    catch_up_with(index, feed, reader, from, until, options, &mut capacity).await
}

async fn catch_up_with<E, S, F, R>(
    index: &SemanticIndex<E, S>,
    feed: &F,
    reader: &R,
    from: ChangeSequence,
    until: ChangeSequence,
    options: IndexerOptions,
    capacity: &mut CapacityRetry,
) -> Result<CatchUp, SemanticError>
where
    E: Embedder,
    S: VectorStore + 'static,
    F: ChangeFeed,
    R: MemoryReader,
{
    options.validate()?;
    let skipped = AtomicU64::new(0);
    // Space may have freed since the last call (withdrawals, a raised capacity): retry first, so a
    // source refused for capacity gets its place before newer ones.
    capacity.pending = true;
    retry_capacity(index, reader, options, capacity).await?;
    let mut position = from;
    while position < until {
        match step(index, feed, reader, position, options, &skipped, capacity).await? {
            Some(next) => position = next,
            None => break,
        }
    }
    // The batches may have freed room (withdrawals) after a refusal: retry once more.
    retry_capacity(index, reader, options, capacity).await?;
    let skipped = skipped.into_inner();
    let counts = index.unindexed_counts().await?;
    let unindexed = counts.iter().map(|(_, count)| count).sum();
    let capacity_unindexed = counts
        .iter()
        .find(|(reason, _)| *reason == UnindexedReason::Capacity)
        .map_or(0, |(_, count)| *count);
    if skipped > 0 {
        tracing::warn!(
            skipped,
            unindexed,
            "catch-up recorded sources refused by a limit as unindexed"
        );
    }
    Ok(CatchUp {
        position,
        skipped,
        unindexed,
        capacity_unindexed,
    })
}

/// When sources unindexed for capacity are worth retrying, and the last capacity refusal seen.
#[derive(Debug, Default)]
struct CapacityRetry {
    /// Sources may be waiting for capacity.
    pending: bool,
    /// Live chunks when the last retry was refused: retry once fewer are live.
    refused_at_live: Option<usize>,
    /// The last capacity refusal's limit and bound.
    last: Option<(&'static str, u64, u64)>,
}

impl CapacityRetry {
    fn due(&self, live_chunks: usize) -> bool {
        self.pending
            && self
                .refused_at_live
                .is_none_or(|refused| live_chunks < refused)
    }

    fn refusal<E: Embedder, S: VectorStore + 'static>(
        &self,
        index: &SemanticIndex<E, S>,
        waiting: u64,
    ) -> SemanticError {
        let (limit, max, actual) = self.last.unwrap_or_else(|| {
            let max = index.bounds().max_chunks as u64;
            ("max_chunks", max, max.saturating_add(waiting.min(1)))
        });
        SemanticError::TooLarge { limit, max, actual }
    }
}

/// Why a limit refusal leaves a source unindexed; `None` for errors that are not limit refusals.
fn unindexed_reason(error: &SemanticError) -> Option<UnindexedReason> {
    match error {
        SemanticError::TooLarge {
            limit: "max_chunks" | "max_sources" | "max_source_identity_bytes",
            ..
        } => Some(UnindexedReason::Capacity),
        SemanticError::TooLarge {
            limit: "max_chunks_per_source",
            ..
        } => Some(UnindexedReason::TooManyChunks),
        SemanticError::TooLarge { .. } => Some(UnindexedReason::TooLarge),
        SemanticError::InvalidInput { .. } => Some(UnindexedReason::Invalid),
        _ => None,
    }
}

/// Settles one batch's outcomes: limit refusals are recorded as unindexed (durably, before the
/// caller moves its position); any failure that is neither settled nor a limit is returned.
async fn settle<E, S>(
    index: &SemanticIndex<E, S>,
    sources: &[(MemoryKey, SourceGeneration)],
    outcomes: RefreshResults,
    skipped: &AtomicU64,
    capacity: &mut CapacityRetry,
) -> Result<(), SemanticError>
where
    E: Embedder,
    S: VectorStore + 'static,
{
    for ((key, generation), outcome) in sources.iter().zip(outcomes) {
        let error = match outcome {
            Ok(_)
            | Err(SemanticError::Withdrawn)
            | Err(SemanticError::Fenced { .. })
            | Err(SemanticError::Divergent { .. }) => continue,
            Err(error) => error,
        };
        let Some(reason) = unindexed_reason(&error) else {
            return Err(error);
        };
        if reason == UnindexedReason::Capacity {
            capacity.pending = true;
            capacity.refused_at_live = Some(index.stats().live_chunks);
            if let SemanticError::TooLarge { limit, max, actual } = error {
                capacity.last = Some((limit, max, actual));
            }
        }
        let (digest, key, generation) = (index.digest(), key.clone(), *generation);
        vector_call(index.store(), move |store| async move {
            store
                .record_unindexed(&digest, &key, generation, reason)
                .await
        })
        .await?;
        skipped.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            reason = reason.as_str(),
            "indexer recorded an unindexed source"
        );
    }
    Ok(())
}

/// Refreshes sources recorded as unindexed for capacity, a page at a time, until a page is still
/// refused for capacity (the index is full) or none are left.
async fn retry_capacity<E, S, R>(
    index: &SemanticIndex<E, S>,
    reader: &R,
    options: IndexerOptions,
    capacity: &mut CapacityRetry,
) -> Result<(), SemanticError>
where
    E: Embedder,
    S: VectorStore + 'static,
    R: MemoryReader,
{
    if !capacity.due(index.stats().live_chunks) {
        return Ok(());
    }
    let mut after: Option<MemoryKey> = None;
    loop {
        let (digest, from, limit) = (index.digest(), after.clone(), options.batch_size);
        let page = vector_call(index.store(), move |store| async move {
            store
                .unindexed_sources(&digest, UnindexedReason::Capacity, from.as_ref(), limit)
                .await
        })
        .await?;
        let Some(last) = page.last() else {
            capacity.pending = false;
            capacity.refused_at_live = None;
            capacity.last = None;
            return Ok(());
        };
        after = Some(last.key.clone());
        let sources: Vec<(MemoryKey, SourceGeneration)> = page
            .iter()
            .map(|source| (source.key.clone(), source.generation))
            .collect();
        let outcomes = index
            .refresh_many(reader, &sources, options.max_embed_texts)
            .await?;
        let mut still_full = false;
        for ((key, generation), outcome) in sources.iter().zip(&outcomes) {
            match outcome {
                Err(error) if unindexed_reason(error) == Some(UnindexedReason::Capacity) => {
                    still_full = true;
                }
                // Replays and already-withdrawn sources wrote nothing, so their record is cleared
                // here; indexed and withdrawn ones were cleared with their vectors.
                Ok(_) | Err(SemanticError::Withdrawn | SemanticError::Fenced { .. }) => {
                    let (digest, key, generation) = (index.digest(), key.clone(), *generation);
                    vector_call(index.store(), move |store| async move {
                        store.clear_unindexed(&digest, &key, generation).await
                    })
                    .await?;
                }
                _ => {}
            }
        }
        let skipped = AtomicU64::new(0);
        settle(index, &sources, outcomes, &skipped, capacity).await?;
        if still_full {
            return Ok(());
        }
    }
}

/// Indexes one batch after `current`; `None` when there was nothing new.
async fn step<E, S, F, R>(
    index: &SemanticIndex<E, S>,
    feed: &F,
    reader: &R,
    current: ChangeSequence,
    options: IndexerOptions,
    skipped: &AtomicU64,
    capacity: &mut CapacityRetry,
) -> Result<Option<ChangeSequence>, SemanticError>
where
    E: Embedder,
    S: VectorStore + 'static,
    F: ChangeFeed,
    R: MemoryReader,
{
    let changes = feed.changes_since(current, options.batch_size).await?;
    let Some(last) = changes.last().map(|change| change.sequence) else {
        return Ok(None);
    };
    let mut latest: HashMap<MemoryKey, ChangeSequence> = HashMap::with_capacity(changes.len());
    for change in changes {
        latest.insert(change.key, change.sequence);
    }
    let mut ordered: Vec<(MemoryKey, SourceGeneration)> = latest
        .into_iter()
        .map(|(key, sequence)| (key, SourceGeneration::from(sequence)))
        .collect();
    ordered.sort_by_key(|(_, generation)| *generation);
    let outcomes = index
        .refresh_many(reader, &ordered, options.max_embed_texts)
        .await?;
    settle(index, &ordered, outcomes, skipped, capacity).await?;
    let digest = index.digest();
    vector_call(index.store(), move |store| async move {
        store.set_indexed_position(&digest, last).await
    })
    .await?;
    Ok(Some(last))
}
