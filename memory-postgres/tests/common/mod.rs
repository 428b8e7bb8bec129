//! What every PostgreSQL test shares: the server URL (or the loud skip), a fresh schema per store that is
//! dropped afterwards, and builders of keys and writes.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memory_core::{
    Change, ChangeFeed, ChangeSequence, LexicalHit, LexicalSearch, ManualClock, MemoryAccess,
    MemoryDocument, MemoryError, MemoryKey, MemoryReader, MemoryWrite, MemoryWriter,
    NamespaceAddress, OperationId, WriteOutcome,
};
use memory_postgres::{PostgresStore, SchemaName};

/// The fixed time every test store reads from its clock.
pub const NOW: i64 = 1_700_000_000_000;

/// The environment variable holding the test server's URL.
pub const URL_VARIABLE: &str = "MEMORY_TEST_POSTGRES_URL";

/// The server URL. Without one the test fails, naming the setup script, unless `MEMORY_SKIP_POSTGRES=1`
/// asks for a loud skip, in which case this prints the skip line and returns `None`.
pub fn server_url(test: &str) -> Option<String> {
    match std::env::var(URL_VARIABLE) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var("MEMORY_SKIP_POSTGRES").as_deref() == Ok("1") => {
            let line = format!(
                "SKIPPED (MEMORY_SKIP_POSTGRES=1): memory-postgres test `{test}` did not run against PostgreSQL"
            );
            println!("{line}");
            eprintln!("{line}");
            None
        }
        _ => panic!(
            "{URL_VARIABLE} is not set: run `export {URL_VARIABLE}=\"$(bash scripts/postgres-setup.sh)\"` \
             (it starts a local PostgreSQL server and prints the URL), or set MEMORY_SKIP_POSTGRES=1 to \
             skip the PostgreSQL tests loudly"
        ),
    }
}

/// A unique, valid schema name for one store of one test.
pub fn unique_schema() -> SchemaName {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or(0);
    SchemaName::new(format!(
        "memtest_{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        nanos
    ))
    .unwrap()
}

/// A schema that is dropped (with everything in it) when this guard is dropped.
pub struct SchemaGuard {
    pub url: String,
    pub schema: SchemaName,
}

impl Drop for SchemaGuard {
    fn drop(&mut self) {
        let url = self.url.clone();
        let schema = self.schema.as_str().to_owned();
        // A thread of its own, so the guard can be dropped inside or outside any runtime.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let client = raw_client(&url, None).await;
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}", self.schema.as_str());
        }
    }
}

/// A raw connection (for tampering and inspection), its connection task on the current runtime.
pub async fn raw_client(url: &str, schema: Option<&SchemaName>) -> tokio_postgres::Client {
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    if let Some(schema) = schema {
        config.options(format!("-c search_path={}", schema.as_str()));
    }
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(async move {
        // The connection ends when the client is dropped or the server closes it.
        let _ = connection.await;
    });
    client
}

/// A store in a fresh schema, which it drops when dropped.
pub struct TestStore {
    pub store: PostgresStore,
    pub guard: SchemaGuard,
}

impl std::ops::Deref for TestStore {
    type Target = PostgresStore;
    fn deref(&self) -> &PostgresStore {
        &self.store
    }
}

impl TestStore {
    /// Another store (its own pool, as another process would have) on the same schema.
    pub async fn another(&self) -> PostgresStore {
        PostgresStore::builder(&self.guard.url)
            .schema(self.guard.schema.clone())
            .clock(Arc::new(ManualClock::new(NOW)))
            .pool_size(2)
            .connect()
            .await
            .unwrap()
    }

    /// A raw connection to this store's schema.
    pub async fn raw(&self) -> tokio_postgres::Client {
        raw_client(&self.guard.url, Some(&self.guard.schema)).await
    }
}

/// A fresh store on a manual clock standing at [`NOW`], or `None` when the tests are skipped.
pub async fn fresh_store(test: &str) -> Option<TestStore> {
    let url = server_url(test)?;
    Some(store_at(url).await)
}

/// A fresh store on the server at `url`, connected from synchronous code (no runtime needed).
pub fn store_blocking(url: &str) -> TestStore {
    let schema = unique_schema();
    let guard = SchemaGuard {
        url: url.to_owned(),
        schema: schema.clone(),
    };
    let store = PostgresStore::builder(url)
        .schema(schema)
        .clock(Arc::new(ManualClock::new(NOW)))
        .pool_size(3)
        .connect_blocking()
        .unwrap();
    TestStore { store, guard }
}

impl TestStore {
    /// Another store on the same schema (its own pool, as another process would have), connected from
    /// synchronous code.
    pub fn another_blocking(&self) -> PostgresStore {
        PostgresStore::builder(&self.guard.url)
            .schema(self.guard.schema.clone())
            .clock(Arc::new(ManualClock::new(NOW)))
            .pool_size(2)
            .connect_blocking()
            .unwrap()
    }
}

/// A fresh store on the server at `url`.
pub async fn store_at(url: String) -> TestStore {
    let schema = unique_schema();
    let guard = SchemaGuard {
        url: url.clone(),
        schema: schema.clone(),
    };
    let store = PostgresStore::builder(url)
        .schema(schema)
        .clock(Arc::new(ManualClock::new(NOW)))
        .pool_size(3)
        .connect()
        .await
        .unwrap();
    TestStore { store, guard }
}

impl MemoryReader for TestStore {
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

impl MemoryWriter for TestStore {
    async fn apply(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        self.store.apply(write).await
    }
}

impl ChangeFeed for TestStore {
    async fn head(&self) -> Result<ChangeSequence, MemoryError> {
        self.store.head().await
    }

    async fn changes_since(
        &self,
        after: ChangeSequence,
        limit: usize,
    ) -> Result<Vec<Change>, MemoryError> {
        self.store.changes_since(after, limit).await
    }
}

impl LexicalSearch for TestStore {
    async fn search(
        &self,
        access: &MemoryAccess,
        query: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>, MemoryError> {
        self.store.search(access, query, limit).await
    }
    async fn written_neighbours(
        &self,
        access: &MemoryAccess,
        ids: &[memory_core::DocumentId],
        reach: usize,
    ) -> Result<Vec<memory_core::WrittenNeighbours>, MemoryError> {
        self.store.written_neighbours(access, ids, reach).await
    }
}

impl memory_core::CorrectionIndex for TestStore {
    async fn corrections_of(
        &self,
        access: &MemoryAccess,
        ids: &[memory_core::DocumentId],
    ) -> Result<Vec<Vec<memory_core::DocumentId>>, MemoryError> {
        self.store.corrections_of(access, ids).await
    }
}

// Not every test binary (nor the bench that includes this file) uses every builder.
#[allow(unused_imports)]
pub use memory_testkit::builders::{access, key, namespace, op, put, said, scope, withdraw};

impl memory_core::RevisionHistory for TestStore {
    async fn revisions(
        &self,
        key: &MemoryKey,
        limit: usize,
    ) -> Result<Vec<memory_core::StoredRevision>, MemoryError> {
        self.store.revisions(key, limit).await
    }
}

impl memory_testkit::store::InspectableStore for TestStore {
    fn retention(&self) -> memory_core::RevisionRetention {
        memory_core::RevisionRetention::default()
    }

    async fn history(
        &self,
        key: &MemoryKey,
    ) -> Result<Vec<memory_testkit::store::HistoryLink>, MemoryError> {
        let links = self.store.history(key).await?;
        Ok(links
            .into_iter()
            .map(|link| memory_testkit::store::HistoryLink {
                revision: link.revision,
                predecessor: link.predecessor,
            })
            .collect())
    }

    async fn receipt(
        &self,
        namespace: &NamespaceAddress,
        operation: &OperationId,
    ) -> Result<Option<memory_core::MemoryReceipt>, MemoryError> {
        self.store.receipt(namespace, operation).await
    }

    async fn check_consistency(
        &self,
    ) -> Result<memory_testkit::store::ConsistencyCounts, MemoryError> {
        let report = self.store.check_consistency().await?;
        Ok(memory_testkit::store::ConsistencyCounts {
            documents: report.documents,
            receipts: report.receipts,
            revisions: report.revisions,
            changes: report.changes,
        })
    }

    async fn apply_batch(
        &self,
        writes: Vec<MemoryWrite>,
    ) -> Result<Vec<Result<WriteOutcome, MemoryError>>, MemoryError> {
        self.store.apply_batch(writes).await
    }

    fn max_batch_writes(&self) -> usize {
        memory_postgres::MAX_BATCH_WRITES
    }
}
