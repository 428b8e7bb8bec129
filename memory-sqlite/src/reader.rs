//! The read side: a read-only connection that serves reads, the change feed, lexical search, receipts,
//! history and the consistency check. [`SqliteStore`](crate::SqliteStore) reads through one of these too.
//!
//! The connection is opened with `SQLITE_OPEN_READ_ONLY` and `query_only`, so it can neither create
//! nor change anything. In WAL mode it never blocks the writer, and each call sees every transaction
//! committed before it started.

use std::path::Path;
use std::time::Duration;

use memory_core::revisions::clamp_revisions_limit;
use memory_core::{
    Change, ChangeFeed, ChangeSequence, DocumentId, LexicalHit, LexicalSearch, MemoryAccess,
    MemoryDocument, MemoryError, MemoryKey, MemoryReader, MemoryReceipt, NamespaceAddress,
    OperationId, RevisionHistory, StoredRevision, WrittenNeighbours,
};
use memory_core::{CorrectionIndex, StoreFault};
use rusqlite::{Connection, OptionalExtension};

use crate::error::{FailureClass, classify, sqlite};
use crate::options::SqliteStoreBuilder;
use crate::read_pool::ReadPool;
use crate::rows::{DocumentRow, decode_key, decode_receipt, decode_revision, decode_sequence};
use crate::{lexical, schema};

pub use memory_core::storage::{
    ConsistencyReport, MAX_CHANGES_PER_CALL, MAX_READ_MANY_KEYS, RevisionLink,
};

/// A read-only view of a store file, served by a small pool of read-only connections (see
/// [`SqliteStoreBuilder::read_connections`]), so concurrent readers never wait for one another.
pub struct SqliteReader {
    pool: ReadPool,
    busy_retries: u32,
}

impl std::fmt::Debug for SqliteReader {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SqliteReader")
            .finish_non_exhaustive()
    }
}

impl SqliteReader {
    /// Opens a read-only view of the store at `path` with default options. Fails with a storage error
    /// ([`crate::StoreFailure::SchemaMissing`], [`crate::StoreFailure::SchemaTooOld`] or
    /// [`crate::StoreFailure::SchemaTooNew`]) when the file does not hold the schema at this build's
    /// version; creates and migrates nothing.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, MemoryError> {
        SqliteStoreBuilder::default().open_reader(path)
    }

    pub(crate) fn open_with(
        path: &Path,
        options: &SqliteStoreBuilder,
    ) -> Result<Self, MemoryError> {
        let connection = ReadPool::open_connection(path, options.busy_timeout)?;
        let reader = Self {
            pool: ReadPool::new(
                path,
                options.busy_timeout,
                options.read_connections,
                connection,
            ),
            busy_retries: options.busy_retries,
        };
        reader.with_connection("open reader", |connection| {
            schema::check_current(connection).map_err(schema::SchemaError::into_memory_error)
        })?;
        Ok(reader)
    }

    /// Runs `work` on the connection, retrying it a bounded number of times when SQLite reports busy
    /// (rare for WAL readers: a wal-index recovery in progress), so busy never reaches a caller spuriously.
    pub(crate) fn with_connection<T>(
        &self,
        operation: &'static str,
        work: impl Fn(&Connection) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let connection = self.pool.get()?;
        let mut attempt = 0;
        loop {
            match work(&connection) {
                Err(error) if is_busy(&error) && attempt < self.busy_retries => {
                    std::thread::sleep(backoff(attempt));
                    attempt += 1;
                }
                Err(error) if is_busy(&error) => {
                    return Err(MemoryError::Store(StoreFault::Busy { operation }));
                }
                other => return other,
            }
        }
    }

    /// Reads the current, non-withdrawn document of `key`.
    pub fn read_blocking(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        self.with_connection("read", |connection| {
            Ok(read_current(connection, key)?.filter(|document| document.withdrawn.is_none()))
        })
    }

    /// Reads many keys in one snapshot; the answer is in the order of `keys`.
    pub fn read_many_blocking(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        if keys.len() > MAX_READ_MANY_KEYS {
            return Err(MemoryError::TooLarge {
                limit: "keys per read",
                max: MAX_READ_MANY_KEYS as u64,
                actual: keys.len() as u64,
            });
        }
        self.with_connection("read many", |connection| {
            let snapshot = connection
                .unchecked_transaction()
                .map_err(sqlite("read many"))?;
            let mut documents = Vec::with_capacity(keys.len());
            for key in keys {
                documents.push(
                    read_current(&snapshot, key)?.filter(|document| document.withdrawn.is_none()),
                );
            }
            snapshot.finish().map_err(sqlite("read many"))?;
            Ok(documents)
        })
    }

    /// The stored receipt of `operation_id` in `namespace`, exactly as it was returned when issued.
    pub fn receipt(
        &self,
        namespace: &NamespaceAddress,
        operation_id: &OperationId,
    ) -> Result<Option<MemoryReceipt>, MemoryError> {
        self.with_connection("read receipt", |connection| {
            read_receipt(connection, namespace, operation_id.as_str())
        })
    }

    /// The stored JSON text of a receipt, for checks that a receipt reads back byte for byte.
    pub fn receipt_json(
        &self,
        namespace: &NamespaceAddress,
        operation_id: &OperationId,
    ) -> Result<Option<String>, MemoryError> {
        self.with_connection("read receipt", |connection| {
            connection
                .prepare_cached(
                    "SELECT body FROM memory_receipts WHERE namespace = ?1 AND operation_id = ?2",
                )
                .and_then(|mut statement| {
                    statement
                        .query_row([namespace.as_str(), operation_id.as_str()], |row| {
                            row.get::<_, String>(0)
                        })
                        .optional()
                })
                .map_err(sqlite("read receipt"))
        })
    }

    /// Every committed revision of `key` (withdrawal included), in commit order.
    pub fn history(&self, key: &MemoryKey) -> Result<Vec<RevisionLink>, MemoryError> {
        self.with_connection("read history", |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT revision, predecessor, sequence FROM memory_revisions \
                     WHERE namespace = ?1 AND id = ?2 ORDER BY sequence",
                )
                .map_err(sqlite("read history"))?;
            let rows = statement
                .query_map([key.namespace.as_str(), key.id.as_str()], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, Option<String>>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                })
                .map_err(sqlite("read history"))?;
            let mut links = Vec::new();
            for row in rows {
                let (revision, predecessor, sequence) = row.map_err(sqlite("read history"))?;
                links.push(RevisionLink {
                    revision: decode_revision(&revision)?,
                    predecessor: predecessor.as_deref().map(decode_revision).transpose()?,
                    sequence: decode_sequence(sequence)?,
                });
            }
            Ok(links)
        })
    }

    /// [`memory_core::RevisionHistory::revisions`] on the calling thread: up to `limit` of `key`'s
    /// revisions, newest first, each read from the receipt that committed it, in one snapshot.
    pub fn revisions_blocking(
        &self,
        key: &MemoryKey,
        limit: usize,
    ) -> Result<Vec<StoredRevision>, MemoryError> {
        let limit = i64::try_from(clamp_revisions_limit(limit)).unwrap_or(i64::MAX);
        self.with_connection("read revisions", |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT v.sequence, r.operation_id, r.body FROM memory_revisions AS v \
                     JOIN memory_receipts AS r \
                     ON r.namespace = v.namespace AND r.id = v.id AND r.revision = v.revision \
                     WHERE v.namespace = ?1 AND v.id = ?2 ORDER BY v.sequence DESC LIMIT ?3",
                )
                .map_err(sqlite("read revisions"))?;
            let rows = statement
                .query_map(
                    rusqlite::params![key.namespace.as_str(), key.id.as_str(), limit],
                    |row| {
                        Ok((
                            row.get::<_, i64>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, String>(2)?,
                        ))
                    },
                )
                .map_err(sqlite("read revisions"))?;
            let mut revisions = Vec::new();
            for row in rows {
                let (sequence, operation_id, body) = row.map_err(sqlite("read revisions"))?;
                let receipt = decode_receipt(&body, &key.namespace, &operation_id)?;
                if receipt.document.key != *key {
                    return Err(crate::error::corrupt(
                        "a revision's receipt is filed under another key",
                    ));
                }
                revisions.push(StoredRevision::from_receipt(
                    receipt,
                    decode_sequence(sequence)?,
                ));
            }
            Ok(revisions)
        })
    }

    /// The latest committed change sequence ([`ChangeSequence::ZERO`] when there is none).
    pub fn head_blocking(&self) -> Result<ChangeSequence, MemoryError> {
        self.with_connection("read change head", |connection| {
            let head: Option<i64> = connection
                .query_row("SELECT max(sequence) FROM memory_changes", [], |row| {
                    row.get(0)
                })
                .map_err(sqlite("read change head"))?;
            decode_sequence(head.unwrap_or(0))
        })
    }

    /// Up to `limit` (at most [`MAX_CHANGES_PER_CALL`]) changes after `after`, in sequence order.
    pub fn changes_since_blocking(
        &self,
        after: ChangeSequence,
        limit: usize,
    ) -> Result<Vec<Change>, MemoryError> {
        let limit = limit.min(MAX_CHANGES_PER_CALL);
        let after = i64::try_from(after.get()).unwrap_or(i64::MAX);
        self.with_connection("read changes", |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT sequence, namespace, id FROM memory_changes \
                     WHERE sequence > ?1 ORDER BY sequence LIMIT ?2",
                )
                .map_err(sqlite("read changes"))?;
            let rows = statement
                .query_map(rusqlite::params![after, limit as i64], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                })
                .map_err(sqlite("read changes"))?;
            let mut changes = Vec::with_capacity(limit.min(256));
            for row in rows {
                let (sequence, namespace, id) = row.map_err(sqlite("read changes"))?;
                changes.push(Change {
                    sequence: decode_sequence(sequence)?,
                    key: decode_key(&namespace, &id)?,
                });
            }
            Ok(changes)
        })
    }

    /// Lexical search: see [`crate::lexical`].
    pub fn search_blocking(
        &self,
        access: &MemoryAccess,
        query: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>, MemoryError> {
        self.search_with_rules_blocking(access, query, limit, &lexical::LexicalRules::default())
    }

    /// [`LexicalSearch::written_neighbours`], on the calling thread.
    pub fn written_neighbours_blocking(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
        reach: usize,
    ) -> Result<Vec<WrittenNeighbours>, MemoryError> {
        self.with_connection("written neighbours", |connection| {
            crate::neighbours::written_neighbours(connection, access, ids, reach)
        })
    }

    /// [`CorrectionIndex::corrections_of`], on the calling thread.
    pub fn corrections_of_blocking(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
    ) -> Result<Vec<Vec<DocumentId>>, MemoryError> {
        self.with_connection("corrections of", |connection| {
            crate::corrections::corrections_of(connection, access, ids)
        })
    }

    /// Lexical search under explicit [`lexical::LexicalRules`] (the eval harness measures them; the
    /// product uses the defaults through [`Self::search_blocking`]).
    pub fn search_with_rules_blocking(
        &self,
        access: &MemoryAccess,
        query: &str,
        limit: usize,
        rules: &lexical::LexicalRules,
    ) -> Result<Vec<LexicalHit>, MemoryError> {
        let words = lexical::query_words_with(query, rules)?;
        let limit = limit.min(lexical::MAX_SEARCH_HITS);
        if words.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        self.with_connection("lexical search", |connection| {
            lexical::search(connection, access, &words, limit, rules)
        })
    }

    /// Checks that the file is whole and agrees with itself: SQLite's `integrity_check`, every row
    /// decodes, every current document has the receipt that wrote it (and that receipt holds the very
    /// same document), every receipt has its revision and every revision its change, and the search
    /// index covers exactly the current, non-withdrawn documents. Any disagreement is
    /// [`memory_core::StoreFault::Corrupt`].
    pub fn check_consistency(&self) -> Result<ConsistencyReport, MemoryError> {
        self.with_connection("check consistency", |connection| {
            let snapshot = connection
                .unchecked_transaction()
                .map_err(sqlite("check consistency"))?;
            let report = crate::consistency::check(&snapshot)?;
            snapshot.finish().map_err(sqlite("check consistency"))?;
            Ok(report)
        })
    }
}

fn is_busy(error: &MemoryError) -> bool {
    crate::error::storage_failure(error).is_some_and(|failure| match failure {
        crate::error::StoreFailure::Sqlite(error) => classify(error) == FailureClass::Busy,
        _ => false,
    })
}

/// The pause before retry `attempt` (0-based) after SQLite's own busy wait ran out.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(10u64.saturating_mul(1 << attempt.min(5)).min(250))
}

/// Reads the current row of `key`, withdrawn tombstones included.
pub(crate) fn read_current(
    connection: &Connection,
    key: &MemoryKey,
) -> Result<Option<MemoryDocument>, MemoryError> {
    let row = connection
        .prepare_cached(
            "SELECT namespace, id, revision, withdrawn, locator, body FROM memory_documents \
             WHERE namespace = ?1 AND id = ?2",
        )
        .and_then(|mut statement| {
            statement
                .query_row([key.namespace.as_str(), key.id.as_str()], |row| {
                    Ok(DocumentRow {
                        namespace: row.get(0)?,
                        id: row.get(1)?,
                        revision: row.get(2)?,
                        withdrawn: row.get(3)?,
                        locator: row.get(4)?,
                        body: row.get(5)?,
                    })
                })
                .optional()
        })
        .map_err(sqlite("read document"))?;
    row.map(DocumentRow::decode).transpose()
}

/// Reads and validates the receipt stored for `(namespace, operation_id)`.
pub(crate) fn read_receipt(
    connection: &Connection,
    namespace: &NamespaceAddress,
    operation_id: &str,
) -> Result<Option<MemoryReceipt>, MemoryError> {
    let body = connection
        .prepare_cached(
            "SELECT body FROM memory_receipts WHERE namespace = ?1 AND operation_id = ?2",
        )
        .and_then(|mut statement| {
            statement
                .query_row([namespace.as_str(), operation_id], |row| {
                    row.get::<_, String>(0)
                })
                .optional()
        })
        .map_err(sqlite("read receipt"))?;
    body.map(|body| decode_receipt(&body, namespace, operation_id))
        .transpose()
}

impl MemoryReader for SqliteReader {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        self.read_blocking(key)
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        self.read_many_blocking(keys)
    }
}

impl RevisionHistory for SqliteReader {
    async fn revisions(
        &self,
        key: &MemoryKey,
        limit: usize,
    ) -> Result<Vec<StoredRevision>, MemoryError> {
        self.revisions_blocking(key, limit)
    }
}

impl ChangeFeed for SqliteReader {
    async fn head(&self) -> Result<ChangeSequence, MemoryError> {
        self.head_blocking()
    }

    async fn changes_since(
        &self,
        after: ChangeSequence,
        limit: usize,
    ) -> Result<Vec<Change>, MemoryError> {
        self.changes_since_blocking(after, limit)
    }
}

impl LexicalSearch for SqliteReader {
    async fn search(
        &self,
        access: &MemoryAccess,
        query: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>, MemoryError> {
        self.search_blocking(access, query, limit)
    }

    async fn written_neighbours(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
        reach: usize,
    ) -> Result<Vec<WrittenNeighbours>, MemoryError> {
        self.written_neighbours_blocking(access, ids, reach)
    }
}

impl CorrectionIndex for SqliteReader {
    async fn corrections_of(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
    ) -> Result<Vec<Vec<DocumentId>>, MemoryError> {
        self.corrections_of_blocking(access, ids)
    }
}
