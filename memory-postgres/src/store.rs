//! The memory store on PostgreSQL: its connection, reads and the change feed, and the memory traits
//! over them; the write transaction is `write.rs`'s, the lexical statements `lexical.rs`'s.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{GenericClient, Object};
use memory_core::recall::corrections::check_correction_request;
use memory_core::revisions::clamp_revisions_limit;
use memory_core::storage::check_neighbour_request;
use memory_core::{
    Change, ChangeFeed, ChangeSequence, Clock, CorrectionIndex, DocumentId, LexicalHit,
    LexicalSearch, MemoryAccess, MemoryDocument, MemoryError, MemoryKey, MemoryReader,
    MemoryReceipt, MemoryWrite, MemoryWriter, NamespaceAddress, OperationId, PreparedWrite,
    RevisionHistory, RevisionRetention, StoredRevision, SystemClock, WriteOutcome,
    WrittenNeighbours,
};

use crate::db::{ConnectSettings, Handle, SchemaName, snapshot};
use crate::error::{Attempt, Fail, corrupt};
use crate::retry::{AttemptFuture, DEFAULT_RETRIES, Idempotent, commit};
use crate::rows::{
    DOCUMENT_COLUMNS, decode_document, decode_key, decode_receipt, decode_revision, decode_sequence,
};
use crate::write::{BatchOutcome, check_storable, write_attempt};
use crate::{lexical, schema};

pub use memory_core::storage::{MAX_BATCH_WRITES, MAX_CHANGES_PER_CALL, MAX_READ_MANY_KEYS};
/// The channel on which every committed write transaction notifies its new change head. Channels are
/// database-wide, so the payload names the store's schema too: `<schema>:<head in decimal>`. Followers
/// may `LISTEN` to wake; the change sequence stays the source of truth.
pub const CHANGE_CHANNEL: &str = "memory_changes";

type Result<T, E = MemoryError> = std::result::Result<T, E>;

pub use memory_core::storage::{ConsistencyReport, RevisionLink};

/// Options for connecting a [`PostgresStore`].
pub struct PostgresStoreBuilder {
    url: String,
    schema: Option<SchemaName>,
    pool_size: usize,
    retries: u32,
    connect_timeout: Duration,
    wait_timeout: Duration,
    clock: Arc<dyn Clock>,
    application_name: String,
    retention: RevisionRetention,
}

impl std::fmt::Debug for PostgresStoreBuilder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password: it is never printed.
        formatter
            .debug_struct("PostgresStoreBuilder")
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

impl PostgresStoreBuilder {
    /// The schema (PostgreSQL namespace) holding the store's tables; created on connect when missing.
    /// Without one, the connection's default `search_path` decides (normally `public`).
    pub fn schema(mut self, schema: SchemaName) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Most pooled connections (default 8).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// How many times a call is retried after a serialization failure or a lost connection (default
    /// [`DEFAULT_RETRIES`]).
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// How long to wait for a new connection (default 5 s) and for a free pooled one (default 30 s).
    pub fn timeouts(mut self, connect: Duration, wait_for_pool: Duration) -> Self {
        self.connect_timeout = connect;
        self.wait_timeout = wait_for_pool;
        self
    }

    /// The clock that stamps `modified_at` (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The `application_name` shown in `pg_stat_activity` (default `memory-postgres`).
    pub fn application_name(mut self, name: impl Into<String>) -> Self {
        self.application_name = name.into();
        self
    }

    /// How many of each document's newest revisions keep their words (default
    /// [`memory_core::revisions::DEFAULT_MAX_REVISIONS`]); a write past it drops the oldest ones'
    /// words in its own transaction ([`memory_core::revisions`]).
    pub fn retention(mut self, retention: RevisionRetention) -> Self {
        self.retention = retention;
        self
    }

    /// Connects, and creates or migrates the schema (see [`crate::schema`]).
    pub async fn connect(self) -> Result<PostgresStore> {
        let handle = Handle::new(&self.settings())?;
        handle
            .call("open store", Idempotent::Yes, self.schema, migrate)
            .await?;
        Ok(PostgresStore {
            handle,
            retention: self.retention,
        })
    }

    /// [`Self::connect`] for callers without an executor (or inside one that may block).
    pub fn connect_blocking(self) -> Result<PostgresStore> {
        let handle = Handle::new(&self.settings())?;
        handle.call_blocking("open store", Idempotent::Yes, self.schema, migrate)?;
        Ok(PostgresStore {
            handle,
            retention: self.retention,
        })
    }

    fn settings(&self) -> ConnectSettings {
        ConnectSettings {
            url: self.url.clone(),
            schema: self.schema.clone(),
            pool_size: self.pool_size,
            retries: self.retries,
            connect_timeout: self.connect_timeout,
            wait_timeout: self.wait_timeout,
            clock: self.clock.clone(),
            application_name: self.application_name.clone(),
        }
    }
}

/// One attempt at creating or migrating the schema.
fn migrate(schema: &Option<SchemaName>, mut client: Object) -> AttemptFuture<'_, (), MemoryError> {
    Box::pin(async move { schema::migrate(&mut client, schema.as_ref()).await })
}

/// A memory store in a PostgreSQL database, shared by any number of processes. See the crate
/// documentation for transactions and concurrency. Cloning is cheap and shares the pool.
#[derive(Clone)]
pub struct PostgresStore {
    pub(crate) handle: Handle,
    retention: RevisionRetention,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PostgresStore")
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Options for connecting to the database at `url` (`postgres://user:password@host:port/database`
    /// or a libpq key-value string).
    pub fn builder(url: impl Into<String>) -> PostgresStoreBuilder {
        PostgresStoreBuilder {
            url: url.into(),
            schema: None,
            pool_size: 8,
            retries: DEFAULT_RETRIES,
            connect_timeout: Duration::from_secs(5),
            wait_timeout: Duration::from_secs(30),
            clock: Arc::new(SystemClock),
            application_name: "memory-postgres".to_owned(),
            retention: RevisionRetention::default(),
        }
    }

    /// Connects with default options; see [`PostgresStoreBuilder::connect`].
    pub async fn connect(url: impl Into<String>) -> Result<Self> {
        Self::builder(url).connect().await
    }

    /// Applies one write in its own transaction.
    pub async fn apply_write(&self, write: MemoryWrite) -> Result<WriteOutcome> {
        // Size limits and field checks run before any connection or transaction is taken.
        let prepared = PreparedWrite::prepare(write)?;
        check_storable(&prepared)?;
        let mut outcomes = self.run_writes(vec![prepared]).await?;
        outcomes
            .pop()
            .unwrap_or_else(|| Err(MemoryError::storage("write", "a write produced no outcome")))
    }

    /// [`Self::apply_batch`] for synchronous callers (a bulk import without an executor of its own):
    /// blocks the calling thread until the batch committed or failed. Must not be called from a task
    /// of this store's own runtime (no caller outside this crate has one).
    pub fn apply_batch_blocking(
        &self,
        writes: Vec<MemoryWrite>,
    ) -> Result<Vec<Result<WriteOutcome, MemoryError>>> {
        let store = self.clone();
        self.handle
            .block(async move { store.apply_batch(writes).await })
    }

    /// Applies up to [`MAX_BATCH_WRITES`] writes in one transaction, in order, with the same rules as
    /// single writes: each is planned against the database as the earlier writes of the batch left it.
    /// The answer holds one result per write; a refused write changes nothing and does not stop the
    /// others. A failure of the transaction itself commits none of them.
    pub async fn apply_batch(
        &self,
        writes: Vec<MemoryWrite>,
    ) -> Result<Vec<Result<WriteOutcome, MemoryError>>> {
        let (prepared, answers) = memory_core::storage::prepare_batch(writes, check_storable)?;
        Ok(answers.splice(self.run_writes(prepared).await?))
    }

    async fn run_writes(&self, prepared: Vec<PreparedWrite>) -> Result<BatchOutcome> {
        if prepared.is_empty() {
            return Ok(Vec::new());
        }
        let clock = self.handle.db.clock.clone();
        let retention = self.retention;
        // Idempotent: a retry after a lost COMMIT finds the receipt and answers a replay.
        self.handle
            .call(
                "write",
                Idempotent::Yes,
                (prepared, clock),
                move |(prepared, clock), client| {
                    Box::pin(write_attempt(client, clock.as_ref(), retention, prepared))
                },
            )
            .await
    }

    /// Reads the current, non-withdrawn document of `key`.
    pub async fn read_document(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>> {
        self.handle
            .call("read", Idempotent::Yes, key.clone(), |key, client| {
                Box::pin(read_visible(client, key))
            })
            .await
    }

    /// The stored receipt of `operation_id` in `namespace`, exactly as it was returned when issued.
    pub async fn receipt(
        &self,
        namespace: &NamespaceAddress,
        operation_id: &OperationId,
    ) -> Result<Option<MemoryReceipt>> {
        let json = self.receipt_json(namespace, operation_id).await?;
        json.map(|body| decode_receipt(&body, namespace, operation_id.as_str()))
            .transpose()
    }

    /// The stored JSON text of a receipt, for checks that a receipt reads back byte for byte.
    pub async fn receipt_json(
        &self,
        namespace: &NamespaceAddress,
        operation_id: &OperationId,
    ) -> Result<Option<String>> {
        let state = (namespace.clone(), operation_id.as_str().to_owned());
        self.handle
            .call(
                "read receipt",
                Idempotent::Yes,
                state,
                |(namespace, operation_id), client| {
                    Box::pin(
                        async move { read_receipt_body(&client, namespace, operation_id).await },
                    )
                },
            )
            .await
    }

    /// Every committed revision of `key` (withdrawal included), in commit order.
    pub async fn history(&self, key: &MemoryKey) -> Result<Vec<RevisionLink>> {
        self.handle
            .call(
                "read history",
                Idempotent::Yes,
                key.clone(),
                |key, client| Box::pin(history(client, key)),
            )
            .await
    }

    /// Checks that the database agrees with itself, in one snapshot: every row decodes, every current
    /// document has the receipt that wrote it (and that receipt holds the very same document), every
    /// receipt has its revision and every revision its change, the change head is the last change, and
    /// the search vectors and scopes cover exactly the current, non-withdrawn documents. Any
    /// disagreement is [`memory_core::StoreFault::Corrupt`].
    pub async fn check_consistency(&self) -> Result<ConsistencyReport> {
        self.handle
            .call("check consistency", Idempotent::Yes, (), |(), client| {
                Box::pin(consistency(client))
            })
            .await
    }

    /// The thread log sharing this store's pool.
    pub fn thread_log(&self) -> crate::thread_log::PostgresThreadLog {
        crate::thread_log::PostgresThreadLog {
            handle: self.handle.clone(),
        }
    }

    /// The progress store sharing this store's pool.
    pub fn progress(&self) -> crate::progress::PostgresProgressStore {
        crate::progress::PostgresProgressStore {
            handle: self.handle.clone(),
        }
    }

    /// The remembering store sharing this store's pool.
    pub fn remembering(&self) -> crate::remembering_store::PostgresRememberingStore {
        crate::remembering_store::PostgresRememberingStore {
            handle: self.handle.clone(),
        }
    }

    /// The vector store sharing this store's pool.
    pub fn vectors(&self) -> crate::vectors::PostgresVectorStore {
        crate::vectors::PostgresVectorStore {
            handle: self.handle.clone(),
        }
    }
}

/// The current document of `key`, unless withdrawn.
async fn read_visible(client: Object, key: &MemoryKey) -> Attempt<Option<MemoryDocument>> {
    Ok(read_current(&client, key)
        .await?
        .filter(|document| document.withdrawn.is_none()))
}

/// [`read_visible`] of every key, in one snapshot.
async fn read_many_visible(
    mut client: Object,
    keys: &[MemoryKey],
) -> Attempt<Vec<Option<MemoryDocument>>> {
    let transaction = snapshot(&mut client).await?;
    let mut documents = Vec::with_capacity(keys.len());
    for key in keys {
        documents.push(
            read_current(&transaction, key)
                .await?
                .filter(|document| document.withdrawn.is_none()),
        );
    }
    commit(transaction).await?;
    Ok(documents)
}

async fn history(client: Object, key: &MemoryKey) -> Attempt<Vec<RevisionLink>> {
    let rows = client
        .query(
            "SELECT revision, predecessor, sequence FROM memory_revisions \
             WHERE namespace = $1 AND id = $2 ORDER BY sequence",
            &[&key.namespace.as_str(), &key.id.as_str()],
        )
        .await?;
    let mut links = Vec::with_capacity(rows.len());
    for row in rows {
        let revision: String = row.try_get(0)?;
        let predecessor: Option<String> = row.try_get(1)?;
        let sequence: i64 = row.try_get(2)?;
        links.push(RevisionLink {
            revision: decode_revision(&revision).map_err(Fail::Model)?,
            predecessor: predecessor
                .as_deref()
                .map(decode_revision)
                .transpose()
                .map_err(Fail::Model)?,
            sequence: decode_sequence(sequence).map_err(Fail::Model)?,
        });
    }
    Ok(links)
}

async fn head(client: Object) -> Attempt<ChangeSequence> {
    let statement = client
        .prepare_cached("SELECT head FROM memory_change_head")
        .await?;
    let head: i64 = client.query_one(&statement, &[]).await?.try_get(0)?;
    decode_sequence(head).map_err(Fail::Model)
}

async fn changes_since(client: Object, after: i64, limit: i64) -> Attempt<Vec<Change>> {
    let statement = client
        .prepare_cached(
            "SELECT sequence, namespace, id FROM memory_changes \
             WHERE sequence > $1 ORDER BY sequence LIMIT $2",
        )
        .await?;
    let rows = client.query(&statement, &[&after, &limit]).await?;
    let mut changes = Vec::with_capacity(rows.len());
    for row in rows {
        let sequence: i64 = row.try_get(0)?;
        let namespace: String = row.try_get(1)?;
        let id: String = row.try_get(2)?;
        changes.push(Change {
            sequence: decode_sequence(sequence).map_err(Fail::Model)?,
            key: decode_key(&namespace, &id).map_err(Fail::Model)?,
        });
    }
    Ok(changes)
}

async fn consistency(mut client: Object) -> Attempt<ConsistencyReport> {
    let transaction = snapshot(&mut client).await?;
    let report = crate::consistency::check(&transaction).await?;
    commit(transaction).await?;
    Ok(report)
}

/// Reads the current row of `key`, withdrawn tombstones included.
pub(crate) async fn read_current<C: GenericClient + Sync>(
    client: &C,
    key: &MemoryKey,
) -> Attempt<Option<MemoryDocument>> {
    let statement = client
        .prepare_cached(&format!(
            "SELECT {DOCUMENT_COLUMNS} FROM memory_documents WHERE namespace = $1 AND id = $2"
        ))
        .await?;
    let row = client
        .query_opt(&statement, &[&key.namespace.as_str(), &key.id.as_str()])
        .await?;
    row.map(|row| decode_document(&row))
        .transpose()
        .map_err(Fail::Model)
}

/// The stored JSON text of the receipt of `(namespace, operation_id)`.
async fn read_receipt_body<C: GenericClient + Sync>(
    client: &C,
    namespace: &NamespaceAddress,
    operation_id: &str,
) -> Attempt<Option<String>> {
    let statement = client
        .prepare_cached(
            "SELECT body FROM memory_receipts WHERE namespace = $1 AND operation_id = $2",
        )
        .await?;
    Ok(client
        .query_opt(&statement, &[&namespace.as_str(), &operation_id])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?)
}

/// Reads and validates the receipt stored for `(namespace, operation_id)`.
pub(crate) async fn read_receipt<C: GenericClient + Sync>(
    client: &C,
    namespace: &NamespaceAddress,
    operation_id: &str,
) -> Attempt<Option<MemoryReceipt>> {
    read_receipt_body(client, namespace, operation_id)
        .await?
        .map(|body| decode_receipt(&body, namespace, operation_id))
        .transpose()
        .map_err(Fail::Model)
}

/// A key's revisions, newest first, each from the receipt that committed it, in one statement.
async fn revisions(client: Object, key: &MemoryKey, limit: i64) -> Attempt<Vec<StoredRevision>> {
    let rows = client
        .query(
            "SELECT v.sequence, r.operation_id, r.body FROM memory_revisions AS v \
             JOIN memory_receipts AS r \
             ON r.namespace = v.namespace AND r.id = v.id AND r.revision = v.revision \
             WHERE v.namespace = $1 AND v.id = $2 ORDER BY v.sequence DESC LIMIT $3",
            &[&key.namespace.as_str(), &key.id.as_str(), &limit],
        )
        .await?;
    let mut revisions = Vec::with_capacity(rows.len());
    for row in rows {
        let sequence: i64 = row.try_get(0)?;
        let operation_id: String = row.try_get(1)?;
        let body: String = row.try_get(2)?;
        let receipt = decode_receipt(&body, &key.namespace, &operation_id).map_err(Fail::Model)?;
        if receipt.document.key != *key {
            return Err(Fail::Model(corrupt(
                "a revision's receipt is filed under another key",
            )));
        }
        revisions.push(StoredRevision::from_receipt(
            receipt,
            decode_sequence(sequence).map_err(Fail::Model)?,
        ));
    }
    Ok(revisions)
}

impl RevisionHistory for PostgresStore {
    async fn revisions(&self, key: &MemoryKey, limit: usize) -> Result<Vec<StoredRevision>> {
        let limit = i64::try_from(clamp_revisions_limit(limit)).unwrap_or(i64::MAX);
        self.handle
            .call(
                "read revisions",
                Idempotent::Yes,
                key.clone(),
                move |key, client| Box::pin(revisions(client, key, limit)),
            )
            .await
    }
}

impl MemoryReader for PostgresStore {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>> {
        self.read_document(key).await
    }

    async fn read_many(&self, keys: &[MemoryKey]) -> Result<Vec<Option<MemoryDocument>>> {
        if keys.len() > MAX_READ_MANY_KEYS {
            return Err(MemoryError::TooLarge {
                limit: "keys per read",
                max: MAX_READ_MANY_KEYS as u64,
                actual: keys.len() as u64,
            });
        }
        self.handle
            .call(
                "read many",
                Idempotent::Yes,
                keys.to_vec(),
                |keys, client| Box::pin(read_many_visible(client, keys)),
            )
            .await
    }
}

impl MemoryWriter for PostgresStore {
    async fn apply(&self, write: MemoryWrite) -> Result<WriteOutcome> {
        self.apply_write(write).await
    }
}

impl ChangeFeed for PostgresStore {
    async fn head(&self) -> Result<ChangeSequence> {
        self.handle
            .call("read change head", Idempotent::Yes, (), |(), client| {
                Box::pin(head(client))
            })
            .await
    }

    async fn changes_since(&self, after: ChangeSequence, limit: usize) -> Result<Vec<Change>> {
        let limit = limit.min(MAX_CHANGES_PER_CALL) as i64;
        let after = i64::try_from(after.get()).unwrap_or(i64::MAX);
        self.handle
            .call("read changes", Idempotent::Yes, (), move |(), client| {
                Box::pin(changes_since(client, after, limit))
            })
            .await
    }
}

impl LexicalSearch for PostgresStore {
    async fn search(
        &self,
        access: &MemoryAccess,
        query: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>> {
        let words = lexical::query_words(query)?;
        let limit = limit.min(lexical::MAX_SEARCH_HITS);
        if words.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let search = lexical::Search {
            words,
            namespace: access.namespace.as_str().to_owned(),
            scope: access.scope.as_str().to_owned(),
            limit: limit as i64,
        };
        self.handle
            .call(
                "lexical search",
                Idempotent::Yes,
                search,
                |search, client| Box::pin(search.run(client)),
            )
            .await
    }
    async fn written_neighbours(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
        reach: usize,
    ) -> Result<Vec<WrittenNeighbours>> {
        check_neighbour_request(ids, reach)?;
        if ids.is_empty() || reach == 0 {
            return Ok(vec![WrittenNeighbours::default(); ids.len()]);
        }
        let neighbours = lexical::Neighbours {
            ids: ids.iter().map(|id| id.as_str().to_owned()).collect(),
            reach: reach as i64,
            namespace: access.namespace.as_str().to_owned(),
            scope: access.scope.as_str().to_owned(),
        };
        self.handle
            .call(
                "written neighbours",
                Idempotent::Yes,
                neighbours,
                |neighbours, client| Box::pin(neighbours.run(client)),
            )
            .await
    }
}

impl CorrectionIndex for PostgresStore {
    async fn corrections_of(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
    ) -> Result<Vec<Vec<DocumentId>>> {
        check_correction_request(ids)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let corrections = crate::corrections::Corrections {
            ids: ids.iter().map(|id| id.as_str().to_owned()).collect(),
            namespace: access.namespace.as_str().to_owned(),
            scope: access.scope.as_str().to_owned(),
        };
        self.handle
            .call(
                "corrections of",
                Idempotent::Yes,
                corrections,
                |corrections, client| Box::pin(corrections.run(client)),
            )
            .await
    }
}
