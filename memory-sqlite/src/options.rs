//! Options for opening a store or a reader.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use memory_core::{Clock, MemoryError, RevisionRetention, SystemClock};

use crate::reader::SqliteReader;
use crate::store::SqliteStore;

/// How far SQLite syncs before a commit returns (`PRAGMA synchronous`), in WAL mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Synchronous {
    /// `FULL` (the default): the WAL is synced at every commit. An acknowledged write survives a process
    /// crash and a power loss or operating-system crash, as far as the disk honours `fsync`.
    #[default]
    Full,
    /// `NORMAL`: the WAL is synced only at checkpoints. An acknowledged write survives a process crash
    /// (the commit is in the operating system's cache); a power loss or operating-system crash may lose
    /// the most recent acknowledged writes, never the file's consistency. For bulk loads and benchmarks.
    Normal,
}

impl Synchronous {
    pub(crate) fn pragma_value(self) -> &'static str {
        match self {
            Self::Full => "FULL",
            Self::Normal => "NORMAL",
        }
    }
}

/// Builds a [`SqliteStore`] or a [`SqliteReader`]. Start from [`SqliteStore::builder`].
#[derive(Clone)]
pub struct SqliteStoreBuilder {
    pub(crate) busy_timeout: Duration,
    pub(crate) busy_retries: u32,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) synchronous: Synchronous,
    pub(crate) read_connections: usize,
    pub(crate) retention: RevisionRetention,
}

impl std::fmt::Debug for SqliteStoreBuilder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SqliteStoreBuilder")
            .field("busy_timeout", &self.busy_timeout)
            .field("busy_retries", &self.busy_retries)
            .field("synchronous", &self.synchronous)
            .field("read_connections", &self.read_connections)
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

impl Default for SqliteStoreBuilder {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            busy_retries: 4,
            clock: Arc::new(SystemClock),
            synchronous: Synchronous::Full,
            read_connections: crate::read_pool::DEFAULT_READ_CONNECTIONS,
            retention: RevisionRetention::default(),
        }
    }
}

impl SqliteStoreBuilder {
    /// How long SQLite itself waits for another connection's lock before reporting busy (default 5 s).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// How many more times a whole transaction is retried after SQLite reported busy past its timeout
    /// (default 4, with a short growing pause between tries). Only then does a caller see
    /// [`memory_core::StoreFault::Busy`].
    pub fn busy_retries(mut self, retries: u32) -> Self {
        self.busy_retries = retries;
        self
    }

    /// The clock that stamps `modified_at` (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The sync level of the writing connection (default [`Synchronous::Full`]).
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// How many read-only connections serve reads, the change feed and lexical search at once
    /// (default [`crate::DEFAULT_READ_CONNECTIONS`], clamped to 1..=[`crate::MAX_READ_CONNECTIONS`]).
    /// They are opened as concurrent readers need them, so a single reader opens one.
    pub fn read_connections(mut self, connections: usize) -> Self {
        self.read_connections = connections;
        self
    }

    /// How many of each document's newest revisions keep their words (default
    /// [`memory_core::revisions::DEFAULT_MAX_REVISIONS`]); a write past it drops the oldest ones'
    /// words in its own transaction ([`memory_core::revisions`]).
    pub fn retention(mut self, retention: RevisionRetention) -> Self {
        self.retention = retention;
        self
    }

    /// Opens (creating when needed) a store at `path`.
    pub fn open(self, path: impl AsRef<Path>) -> Result<SqliteStore, MemoryError> {
        SqliteStore::open_with(path.as_ref(), self)
    }

    /// Opens a read-only view of an existing store at `path`.
    pub fn open_reader(self, path: impl AsRef<Path>) -> Result<SqliteReader, MemoryError> {
        SqliteReader::open_with(path.as_ref(), &self)
    }
}
