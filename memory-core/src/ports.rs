//! The ports every store implements. Reading and writing are separate traits so a read-only corpus
//! implements only [`MemoryReader`].
//!
//! The methods return `Send` futures so stores can be used from any tokio task.

use std::future::Future;

use crate::document::{MemoryDocument, MemoryKey};
use crate::error::MemoryError;
use crate::write::{MemoryWrite, WriteOutcome};

/// Reads current documents. Withdrawn documents read as `None`.
pub trait MemoryReader: Send + Sync {
    /// Reads one key.
    fn read(
        &self,
        key: &MemoryKey,
    ) -> impl Future<Output = Result<Option<MemoryDocument>, MemoryError>> + Send;

    /// Reads many keys at once; the answer is in the order of `keys`.
    fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> impl Future<Output = Result<Vec<Option<MemoryDocument>>, MemoryError>> + Send;
}

/// Applies writes: one write is one atomic, durable step.
pub trait MemoryWriter: Send + Sync {
    /// Applies one write. See [`crate::write`] for the rules.
    fn apply(
        &self,
        write: MemoryWrite,
    ) -> impl Future<Output = Result<WriteOutcome, MemoryError>> + Send;
}

/// Reads a document's history: its committed revisions, newest first, each as its write left it
/// (see [`crate::revisions`] for what is kept of each).
pub trait RevisionHistory: Send + Sync {
    /// Up to `limit` (at most [`crate::revisions::MAX_REVISIONS_PER_READ`]; larger limits are
    /// clamped) of `key`'s revisions, newest first: the withdrawal tombstone first for a withdrawn
    /// document, revisions past the bound or withdrawn without their words. Empty for a key never
    /// written.
    fn revisions(
        &self,
        key: &MemoryKey,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<crate::revisions::StoredRevision>, MemoryError>> + Send;
}

/// A source of the current time, injectable so tests are deterministic.
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_millis(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: std::sync::atomic::AtomicI64,
}

impl ManualClock {
    /// A clock standing at `now`.
    pub fn new(now: i64) -> Self {
        Self {
            now: std::sync::atomic::AtomicI64::new(now),
        }
    }

    /// Moves the clock forward by `millis`.
    pub fn advance(&self, millis: i64) {
        self.now
            .fetch_add(millis, std::sync::atomic::Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, now: i64) {
        self.now.store(now, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> i64 {
        self.now.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A position in a store's change sequence: every committed write gets the next, strictly larger number,
/// written in the same transaction as the write.
///
/// The number inside is private: a sequence is made with [`ChangeSequence::new`] and read with
/// [`ChangeSequence::get`]; it serializes as the bare number.
///
/// ```
/// use memory_core::ChangeSequence;
///
/// let sequence = ChangeSequence::new(3);
/// assert_eq!(sequence.get(), 3);
/// assert!(ChangeSequence::ZERO < sequence);
/// assert_eq!(serde_json::to_string(&sequence).unwrap(), "3");
/// ```
///
/// Neither building one from its number nor taking the number out bypasses that API:
///
/// ```compile_fail,E0423
/// let sequence = memory_core::ChangeSequence(3);
/// ```
///
/// ```compile_fail,E0616
/// let number: u64 = memory_core::ChangeSequence::new(3).0;
/// ```
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct ChangeSequence(u64);

impl ChangeSequence {
    /// Before the first change: the head of an empty feed and the position of an index that has
    /// indexed nothing.
    pub const ZERO: Self = Self(0);

    /// The sequence numbered `value`.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The sequence's number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// One committed change: which key changed, at which position of the sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The change's position.
    pub sequence: ChangeSequence,
    /// The key whose current document changed (put or withdrawal).
    pub key: MemoryKey,
}

/// The ordered feed of committed changes that indexers follow.
pub trait ChangeFeed: Send + Sync {
    /// The sequence of the latest committed change ([`ChangeSequence::ZERO`] when there is none).
    fn head(&self) -> impl Future<Output = Result<ChangeSequence, MemoryError>> + Send;

    /// Up to `limit` changes with a sequence greater than `after`, in sequence order.
    fn changes_since(
        &self,
        after: ChangeSequence,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Change>, MemoryError>> + Send;
}

/// One lexical search hit: a current, visible document and its relevance score (higher is better).
#[derive(Debug, Clone, PartialEq)]
pub struct LexicalHit {
    /// The document's key.
    pub key: MemoryKey,
    /// The revision that was indexed.
    pub revision: crate::ids::Revision,
    /// The document's locator.
    pub locator: String,
    /// Relevance; higher is better (BM25 negated where the engine ranks lower-is-better).
    pub score: f64,
}

/// Full-text search over current, non-withdrawn documents, filtered by namespace and scope inside the
/// engine. Query text is taken as words, never as query syntax.
pub trait LexicalSearch: Send + Sync {
    /// Up to `limit` hits for `query`, best first, visible to `access` only.
    fn search(
        &self,
        access: &crate::document::MemoryAccess,
        query: &str,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<LexicalHit>, MemoryError>> + Send;

    /// For each of `ids` (documents of `access.namespace`), in order, the up to `reach` documents
    /// written just before it and just after it, nearest first: the namespace's current,
    /// non-withdrawn documents visible in `access.scope`, ordered by each key's first write (a
    /// replacement keeps its key's place; a document of another scope or a withdrawn one is
    /// skipped, never named). An id with no current document visible to `access` has no
    /// neighbours. Hybrid recall reads these to let a conversation turn borrow relevance from the
    /// turns around it (`semantic_index::recall::fusion`). More than
    /// [`crate::storage::MAX_NEIGHBOUR_IDS`] ids, or a `reach` above
    /// [`crate::storage::MAX_NEIGHBOUR_REACH`], are refused with `TooLarge` before any work.
    fn written_neighbours(
        &self,
        access: &crate::document::MemoryAccess,
        ids: &[crate::ids::DocumentId],
        reach: usize,
    ) -> impl Future<Output = Result<Vec<WrittenNeighbours>, MemoryError>> + Send;
}

/// A document's neighbours in its namespace's write order, as one scope sees them
/// ([`LexicalSearch::written_neighbours`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WrittenNeighbours {
    /// The visible documents written before it, nearest first.
    pub before: Vec<crate::ids::DocumentId>,
    /// The visible documents written after it, nearest first.
    pub after: Vec<crate::ids::DocumentId>,
}
