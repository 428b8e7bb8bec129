//! The background indexer: follows a store's [`ChangeFeed`], refreshes the changed sources, and records
//! its position through the [`VectorStore`] so a restart resumes where it stopped.
//!
//! Within one batch, a key changed several times is refreshed once, at its latest sequence (the
//! generation). Refreshes that are fenced, withdrawn or refused by a size limit are settled (the limit
//! refusal is counted and logged by count only); any other failure (embedder, store) stops the batch, and
//! the batch is retried after `retry_delay` without advancing the position, so nothing is skipped.

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
}

impl Default for IndexerOptions {
    fn default() -> Self {
        Self {
            batch_size: 256,
            poll_interval: Duration::from_millis(20),
            retry_delay: Duration::from_millis(200),
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
        if options.batch_size == 0 {
            return Err(SemanticError::invalid("batch_size", "must be positive"));
        }
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
    let mut ordered: Vec<(MemoryKey, ChangeSequence)> = latest.into_iter().collect();
    ordered.sort_by_key(|(_, sequence)| *sequence);
    for (key, sequence) in ordered {
        match index
            .refresh(reader, &key, SourceGeneration::from(sequence))
            .await
        {
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
