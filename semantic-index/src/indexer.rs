//! The background indexer: follows a store's [`ChangeFeed`], refreshes the changed sources, and records
//! its position through the [`VectorStore`] so a restart resumes where it stopped.
//!
//! Within one batch, a key changed several times is refreshed once, at its latest sequence (the
//! generation). The batch's sources are refreshed together ([`SemanticIndex::refresh_many`]): one
//! grouped read, and embedder calls of up to [`IndexerOptions::max_embed_texts`] chunks shared by
//! several documents, while each source keeps its own fencing and atomic replacement. Refreshes that
//! are fenced, withdrawn or refused by a size limit are settled (the limit refusal is counted and
//! logged by count only); any other failure (embedder, store) stops the batch, and the batch is retried
//! after `retry_delay` without advancing the position, so nothing is skipped (sources already applied
//! replay as unchanged).
//!
//! [`catch_up`] runs the same batches in the caller's task, once, up to a given position: what a
//! one-shot command uses instead of a background [`Indexer`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memory_core::vectors::{SourceGeneration, VectorStore};
use memory_core::{ChangeFeed, ChangeSequence, MemoryKey, MemoryReader};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::embed::Embedder;
use crate::engine::SemanticIndex;
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
        let start = index.store().indexed_position(&index.digest()).await?;
        let (position_sender, position) = watch::channel(start);
        let (stop, mut stopped) = watch::channel(false);
        let skipped = Arc::new(AtomicU64::new(0));
        let skipped_in_task = skipped.clone();
        let task = tokio::spawn(async move {
            let mut current = start;
            loop {
                if *stopped.borrow() {
                    return;
                }
                let wait = match step(&index, &*feed, &*reader, current, options, &skipped_in_task)
                    .await
                {
                    Ok(Some(next)) => {
                        current = next;
                        position_sender.send_replace(next);
                        continue;
                    }
                    Ok(None) => options.poll_interval,
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

    /// Changes settled without indexing because a size limit refused them.
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
    /// The position every change up to which is now indexed (and stored as the indexed position).
    pub position: ChangeSequence,
    /// Changes settled without indexing because a size limit refused them.
    pub skipped: u64,
}

/// Indexes, in the calling task, every change after `from` up to at least `until` (usually the
/// feed's `head()` read just before: "everything committed up to now"), in the batches a background
/// [`Indexer`] would use, storing the indexed position after each batch. Returns at once when `from`
/// is already at or past `until`.
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
    S: VectorStore,
    F: ChangeFeed,
    R: MemoryReader,
{
    options.validate()?;
    let skipped = AtomicU64::new(0);
    let mut position = from;
    while position < until {
        match step(index, feed, reader, position, options, &skipped).await? {
            Some(next) => position = next,
            None => break,
        }
    }
    let skipped = skipped.into_inner();
    if skipped > 0 {
        tracing::warn!(skipped, "catch-up skipped sources refused by a size limit");
    }
    Ok(CatchUp { position, skipped })
}

/// Indexes one batch after `current`; `None` when there was nothing new.
async fn step<E, S, F, R>(
    index: &SemanticIndex<E, S>,
    feed: &F,
    reader: &R,
    current: ChangeSequence,
    options: IndexerOptions,
    skipped: &AtomicU64,
) -> Result<Option<ChangeSequence>, SemanticError>
where
    E: Embedder,
    S: VectorStore,
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
    for outcome in outcomes {
        match outcome {
            Ok(_)
            | Err(SemanticError::Withdrawn)
            | Err(SemanticError::Fenced { .. })
            | Err(SemanticError::Divergent { .. }) => {}
            Err(SemanticError::TooLarge { .. } | SemanticError::InvalidInput { .. }) => {
                skipped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("indexer skipped a source refused by a limit");
            }
            Err(error) => return Err(error),
        }
    }
    index
        .store()
        .set_indexed_position(&index.digest(), last)
        .await?;
    Ok(Some(last))
}
