//! The read-write store: one writing connection behind a mutex, plus a [`SqliteReader`] for reads.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use memory_core::{
    Change, ChangeFeed, ChangeSequence, Clock, DocumentId, LexicalHit, LexicalSearch, MemoryAccess,
    MemoryDocument, MemoryError, MemoryKey, MemoryReader, MemoryWrite, MemoryWriter, PreparedWrite,
    RevisionHistory, RevisionRetention, StoredRevision, WriteOutcome, WrittenNeighbours,
};
use memory_core::{CorrectionIndex, StoreFault};
use rusqlite::{Connection, OpenFlags};

use crate::error::sqlite;
use crate::options::SqliteStoreBuilder;
use crate::reader::SqliteReader;
use crate::{schema, transaction};

pub use memory_core::storage::MAX_BATCH_WRITES;

/// A memory store in one SQLite file. See the crate documentation for durability and concurrency.
pub struct SqliteStore {
    writer: Mutex<Connection>,
    reader: SqliteReader,
    clock: Arc<dyn Clock>,
    retention: RevisionRetention,
    busy_retries: u32,
    poisoned: AtomicBool,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SqliteStore")
            .field("poisoned", &self.is_poisoned())
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Options for opening a store or reader.
    pub fn builder() -> SqliteStoreBuilder {
        SqliteStoreBuilder::default()
    }

    /// Opens (creating when needed) the store at `path` with default options: WAL, `synchronous=FULL`,
    /// a 5 s busy timeout, the system clock. Creates or migrates the file's schema (every store's tables);
    /// fails with [`crate::StoreFailure::SchemaTooNew`] inside a storage error when the file's schema
    /// is newer than this build's.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, MemoryError> {
        Self::builder().open(path)
    }

    pub(crate) fn open_with(path: &Path, options: SqliteStoreBuilder) -> Result<Self, MemoryError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let mut connection =
            Connection::open_with_flags(path, flags).map_err(sqlite("open store"))?;
        connection
            .busy_timeout(options.busy_timeout)
            .map_err(sqlite("open store"))?;
        let journal_mode: String = connection
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(sqlite("open store"))?;
        if !journal_mode.eq_ignore_ascii_case("wal") {
            return Err(MemoryError::storage(
                "open store",
                format!("the file system refused WAL mode (journal mode is {journal_mode})"),
            ));
        }
        connection
            .pragma_update(None, "synchronous", options.synchronous.pragma_value())
            .map_err(sqlite("open store"))?;
        schema::migrate(&mut connection).map_err(schema::SchemaError::into_memory_error)?;
        let reader = SqliteReader::open_with(path, &options)?;
        Ok(Self {
            writer: Mutex::new(connection),
            reader,
            clock: options.clock,
            retention: options.retention,
            busy_retries: options.busy_retries,
            poisoned: AtomicBool::new(false),
            path: path.to_owned(),
        })
    }

    /// The read side of this store.
    pub fn reader(&self) -> &SqliteReader {
        &self.reader
    }

    /// The file this store was opened on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether an earlier failure left the file's state unknown; writes are refused until reopened.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    /// Applies one write in its own transaction, on the calling thread.
    pub fn apply_blocking(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        // Size limits and field checks run before any lock or transaction, so a refused write leaves
        // the file and its WAL untouched.
        let prepared = PreparedWrite::prepare(write)?;
        let mut outcomes = self.run(std::slice::from_ref(&prepared))?;
        outcomes
            .pop()
            .unwrap_or_else(|| Err(MemoryError::storage("write", "a write produced no outcome")))
    }

    /// Applies up to [`MAX_BATCH_WRITES`] writes in one transaction, in order, with the same rules as
    /// single writes: each write is planned against the file as the earlier writes of the batch left it.
    /// The answer holds one result per write; a refused write (conflict, too large, ...) changes
    /// nothing and does not stop the others. A failure of the transaction itself commits none of them.
    pub fn apply_batch(
        &self,
        writes: Vec<MemoryWrite>,
    ) -> Result<Vec<Result<WriteOutcome, MemoryError>>, MemoryError> {
        let (prepared, answers) = memory_core::storage::prepare_batch(writes, |_| Ok(()))?;
        Ok(answers.splice(self.run(&prepared)?))
    }

    fn run(
        &self,
        prepared: &[PreparedWrite],
    ) -> Result<Vec<Result<WriteOutcome, MemoryError>>, MemoryError> {
        if self.is_poisoned() {
            return Err(MemoryError::Store(StoreFault::Poisoned));
        }
        if prepared.is_empty() {
            return Ok(Vec::new());
        }
        let Ok(mut connection) = self.writer.lock() else {
            // A thread panicked mid-transaction; the connection's state is not trusted any more.
            self.poisoned.store(true, Ordering::SeqCst);
            return Err(MemoryError::Store(StoreFault::Poisoned));
        };
        // Checked again under the lock: a writer that failed while this one waited poisons it too.
        if self.is_poisoned() {
            return Err(MemoryError::Store(StoreFault::Poisoned));
        }
        transaction::run(
            &mut connection,
            self.clock.as_ref(),
            self.retention,
            self.busy_retries,
            prepared,
        )
        .map_err(|(error, poisons)| {
            if poisons {
                self.poisoned.store(true, Ordering::SeqCst);
                tracing::error!("write failed with unknown outcome; store poisoned until reopened");
            }
            error
        })
    }
}

impl MemoryReader for SqliteStore {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        self.reader.read_blocking(key)
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        self.reader.read_many_blocking(keys)
    }
}

impl MemoryWriter for SqliteStore {
    async fn apply(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        self.apply_blocking(write)
    }
}

impl RevisionHistory for SqliteStore {
    async fn revisions(
        &self,
        key: &MemoryKey,
        limit: usize,
    ) -> Result<Vec<StoredRevision>, MemoryError> {
        self.reader.revisions_blocking(key, limit)
    }
}

impl ChangeFeed for SqliteStore {
    async fn head(&self) -> Result<ChangeSequence, MemoryError> {
        self.reader.head_blocking()
    }

    async fn changes_since(
        &self,
        after: ChangeSequence,
        limit: usize,
    ) -> Result<Vec<Change>, MemoryError> {
        self.reader.changes_since_blocking(after, limit)
    }
}

impl SqliteStore {
    /// [`LexicalSearch::written_neighbours`] on the calling thread (the eval harness reads a whole
    /// conversation's at once).
    pub fn written_neighbours_blocking(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
        reach: usize,
    ) -> Result<Vec<WrittenNeighbours>, MemoryError> {
        self.reader.written_neighbours_blocking(access, ids, reach)
    }

    /// Lexical search under explicit [`crate::lexical::LexicalRules`]: what the eval harness tunes.
    /// [`LexicalSearch::search`] is this with the default rules.
    pub fn search_with_rules(
        &self,
        access: &MemoryAccess,
        query: &str,
        limit: usize,
        rules: &crate::lexical::LexicalRules,
    ) -> Result<Vec<LexicalHit>, MemoryError> {
        self.reader
            .search_with_rules_blocking(access, query, limit, rules)
    }
}

impl LexicalSearch for SqliteStore {
    async fn search(
        &self,
        access: &MemoryAccess,
        query: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>, MemoryError> {
        // Straight to the rules-taking search: the walk from a recall to SQL has no frame that only
        // hands its arguments on.
        self.reader.search_with_rules_blocking(
            access,
            query,
            limit,
            &crate::lexical::LexicalRules::default(),
        )
    }

    async fn written_neighbours(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
        reach: usize,
    ) -> Result<Vec<WrittenNeighbours>, MemoryError> {
        self.reader.written_neighbours_blocking(access, ids, reach)
    }
}

impl CorrectionIndex for SqliteStore {
    async fn corrections_of(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
    ) -> Result<Vec<Vec<DocumentId>>, MemoryError> {
        self.reader.corrections_of_blocking(access, ids)
    }
}
