//! The change feed the server's indexer follows on a SQLite file: woken by this process's commits
//! instead of polling.
//!
//! Every write through the server's [`crate::service::MemoryService`] signals [`CommitSignal`] once it
//! has committed, and [`WakingFeed::changes_since`] waits for that signal when it finds nothing new, so
//! an idle server runs no query at all between writes and a write is indexed as soon as it commits.
//! Other processes may write the same file (a one-shot `memory put`, the remembering worker); SQLite
//! has no cross-process notification, so an empty wait ends after [`FALLBACK_POLL`] and the feed looks
//! again: their writes are indexed within that interval. Every store call runs on the blocking pool
//! ([`PoolFeed`], which a one-shot command's catch-up reads through too).

use std::sync::Arc;
use std::time::Duration;

use memory_core::{
    Change, ChangeFeed, ChangeSequence, MemoryDocument, MemoryError, MemoryKey, MemoryReader,
};
use tokio::sync::Notify;

use crate::blocking::store_call;

/// How long an empty [`WakingFeed::changes_since`] waits for a commit of this process before it looks
/// at the file again for other processes' writes.
pub const FALLBACK_POLL: Duration = Duration::from_millis(500);

/// Signalled after each commit made by this process.
#[derive(Debug, Default, Clone)]
pub struct CommitSignal(Arc<Notify>);

impl CommitSignal {
    /// A signal nobody waits on yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wakes every feed waiting for a commit.
    pub fn committed(&self) {
        self.0.notify_waiters();
    }
}

/// The change feed and reads of `S`, each call on the blocking pool ([`crate::blocking`]): what the
/// semantic index's indexer and catch-up read the store through.
pub struct PoolFeed<S> {
    store: Arc<S>,
}

impl<S> std::fmt::Debug for PoolFeed<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("PoolFeed").finish_non_exhaustive()
    }
}

impl<S> PoolFeed<S> {
    /// The feed and reads of `store`.
    pub fn new(store: Arc<S>) -> Self {
        Self { store }
    }
}

impl<S: ChangeFeed + MemoryReader + 'static> ChangeFeed for PoolFeed<S> {
    async fn head(&self) -> Result<ChangeSequence, MemoryError> {
        let store = Arc::clone(&self.store);
        store_call(async move { store.head().await }).await
    }

    async fn changes_since(
        &self,
        after: ChangeSequence,
        limit: usize,
    ) -> Result<Vec<Change>, MemoryError> {
        let store = Arc::clone(&self.store);
        store_call(async move { store.changes_since(after, limit).await }).await
    }
}

impl<S: ChangeFeed + MemoryReader + 'static> MemoryReader for PoolFeed<S> {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        let store = Arc::clone(&self.store);
        let key = key.clone();
        store_call(async move { store.read(&key).await }).await
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        let store = Arc::clone(&self.store);
        let keys = keys.to_vec();
        store_call(async move { store.read_many(&keys).await }).await
    }
}

/// A change feed over `S` whose empty reads wait for a [`CommitSignal`] (or [`FALLBACK_POLL`]).
pub struct WakingFeed<S> {
    store: PoolFeed<S>,
    signal: CommitSignal,
    fallback: Duration,
}

impl<S> std::fmt::Debug for WakingFeed<S> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("WakingFeed")
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}

impl<S> WakingFeed<S> {
    /// The feed of `store`, woken by `signal`.
    pub fn new(store: Arc<S>, signal: CommitSignal) -> Self {
        Self {
            store: PoolFeed::new(store),
            signal,
            fallback: FALLBACK_POLL,
        }
    }

    /// The same feed with another fallback interval (tests).
    pub fn with_fallback(mut self, fallback: Duration) -> Self {
        self.fallback = fallback;
        self
    }
}

impl<S: ChangeFeed + MemoryReader + 'static> ChangeFeed for WakingFeed<S> {
    async fn head(&self) -> Result<ChangeSequence, MemoryError> {
        self.store.head().await
    }

    async fn changes_since(
        &self,
        after: ChangeSequence,
        limit: usize,
    ) -> Result<Vec<Change>, MemoryError> {
        // Registered before the read, so a commit between the read and the wait is not missed.
        let notified = self.signal.0.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let changes = self.store.changes_since(after, limit).await?;
        if !changes.is_empty() {
            return Ok(changes);
        }
        // Either way the file is read again: a timeout means another process may have written.
        let _ = tokio::time::timeout(self.fallback, notified).await;
        self.store.changes_since(after, limit).await
    }
}

impl<S: ChangeFeed + MemoryReader + 'static> MemoryReader for WakingFeed<S> {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        self.store.read(key).await
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        self.store.read_many(keys).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// An empty store that counts feed reads, so a test can tell a woken read from a polled one.
    struct Counting {
        reads: AtomicUsize,
    }

    impl ChangeFeed for Counting {
        async fn head(&self) -> Result<ChangeSequence, MemoryError> {
            Ok(ChangeSequence::ZERO)
        }

        async fn changes_since(
            &self,
            _after: ChangeSequence,
            _limit: usize,
        ) -> Result<Vec<Change>, MemoryError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(Vec::new())
        }
    }

    impl MemoryReader for Counting {
        async fn read(&self, _key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
            Ok(None)
        }

        async fn read_many(
            &self,
            keys: &[MemoryKey],
        ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
            Ok(vec![None; keys.len()])
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_empty_read_waits_for_a_commit_signal_instead_of_polling() {
        let store = Arc::new(Counting {
            reads: AtomicUsize::new(0),
        });
        let signal = CommitSignal::new();
        // A fallback far longer than the test: only the signal can end the wait.
        let feed = Arc::new(
            WakingFeed::new(Arc::clone(&store), signal.clone())
                .with_fallback(Duration::from_secs(3_600)),
        );
        let mut waiting = {
            let feed = Arc::clone(&feed);
            tokio::spawn(async move { feed.changes_since(ChangeSequence::ZERO, 10).await })
        };
        // With no commit, the read stays parked (a polling feed would have answered long before).
        assert!(
            tokio::time::timeout(Duration::from_millis(200), &mut waiting)
                .await
                .is_err(),
            "an empty read waits for a commit"
        );
        assert_eq!(
            store.reads.load(Ordering::SeqCst),
            1,
            "no read while parked"
        );
        signal.committed();
        let changes = waiting.await.expect("task").expect("feed");
        assert!(changes.is_empty(), "nothing was written");
        assert_eq!(
            store.reads.load(Ordering::SeqCst),
            2,
            "woken once, read once more"
        );
    }
}
