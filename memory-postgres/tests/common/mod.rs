//! What every PostgreSQL test shares: the server URL (or the loud skip), a fresh schema per store that is
//! dropped afterwards, and builders of keys and writes.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memory_core::{
    Change, ChangeFeed, ChangeSequence, DocumentId, LexicalHit, LexicalSearch, ManualClock,
    MemoryAccess, MemoryAttribution, MemoryContent, MemoryDocument, MemoryError, MemoryKey,
    MemoryReader, MemoryScope, MemoryWrite, MemoryWriter, NamespaceAddress, OperationId, Revision,
    WriteOutcome,
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
}

pub fn namespace(tenant: &str) -> NamespaceAddress {
    NamespaceAddress::encode(
        "memory-postgres-tests",
        1,
        &serde_json::json!({ "tenant": tenant }),
    )
    .expect("valid namespace")
}

pub fn key(tenant: &str, id: &str) -> MemoryKey {
    MemoryKey {
        namespace: namespace(tenant),
        id: DocumentId::new(id).expect("valid id"),
    }
}

pub fn scope(name: &str) -> MemoryScope {
    MemoryScope::new(name).expect("valid scope")
}

pub fn access(tenant: &str, scope_name: &str) -> MemoryAccess {
    MemoryAccess {
        namespace: namespace(tenant),
        scope: scope(scope_name),
    }
}

pub fn op(id: &str) -> OperationId {
    OperationId::new(id).expect("valid operation id")
}

/// Content with one attribution by `speaker`.
pub fn said(text: &str, speaker: &str) -> MemoryContent {
    MemoryContent {
        attributions: vec![MemoryAttribution {
            origin_id: "thread-1".to_owned(),
            speaker: speaker.to_owned(),
            observers: Vec::new(),
            locator: "record-1".to_owned(),
            activity_at: None,
            interpretation: "stated".to_owned(),
        }],
        ..MemoryContent::text(text)
    }
}

/// A put with the given scopes.
pub fn put(
    key: &MemoryKey,
    operation: &str,
    expected: Option<&Revision>,
    content: MemoryContent,
    scopes: &[&str],
) -> MemoryWrite {
    MemoryWrite::Put {
        key: key.clone(),
        operation_id: op(operation),
        expected_revision: expected.cloned(),
        locator: format!("loc:{}", key.id),
        content,
        scopes: scopes.iter().map(|name| scope(name)).collect(),
    }
}

pub fn withdraw(key: &MemoryKey, operation: &str, expected: &Revision) -> MemoryWrite {
    MemoryWrite::Withdraw {
        key: key.clone(),
        operation_id: op(operation),
        expected_revision: expected.clone(),
        reason: "asked to forget".to_owned(),
    }
}
