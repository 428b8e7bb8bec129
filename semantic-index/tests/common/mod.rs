//! Fixtures shared by the integration tests: a store with a change feed, and embedders that count calls
//! or fail on demand.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use memory_core::{
    Change, ChangeFeed, ChangeSequence, DocumentId, InMemoryStore, MemoryAccess, MemoryContent,
    MemoryDocument, MemoryError, MemoryKey, MemoryReader, MemoryScope, MemoryWrite, MemoryWriter,
    NamespaceAddress, OperationId, Revision,
};
use semantic_index::{EmbedError, Embedder};

pub const NAMESPACE: &str = r#"[1,"semantic-tests",1,{"user":"ada"}]"#;
pub const SCOPE: &str = "recall";

pub fn key(id: &str) -> MemoryKey {
    MemoryKey {
        namespace: NamespaceAddress::parse(NAMESPACE).unwrap(),
        id: DocumentId::new(id).unwrap(),
    }
}

pub fn access() -> MemoryAccess {
    MemoryAccess {
        namespace: NamespaceAddress::parse(NAMESPACE).unwrap(),
        scope: MemoryScope::new(SCOPE).unwrap(),
    }
}

/// An in-memory store that records a change sequence for every committed write.
#[derive(Default)]
pub struct FeedStore {
    inner: InMemoryStore,
    changes: Mutex<Vec<Change>>,
    operations: AtomicUsize,
}

impl FeedStore {
    pub async fn put(&self, id: &str, text: &str) -> Revision {
        self.put_scoped(id, text, SCOPE).await
    }

    pub async fn put_scoped(&self, id: &str, text: &str, scope: &str) -> Revision {
        let key = key(id);
        let current = self.inner.read(&key).await.unwrap().map(|doc| doc.revision);
        let operation = self.operations.fetch_add(1, Ordering::SeqCst);
        let outcome = self
            .inner
            .apply(MemoryWrite::Put {
                key: key.clone(),
                operation_id: OperationId::new(format!("op-{operation}")).unwrap(),
                expected_revision: current,
                locator: format!("test:{id}"),
                content: MemoryContent::text(text),
                scopes: vec![MemoryScope::new(scope).unwrap()],
            })
            .await
            .unwrap();
        self.record(key);
        outcome.receipt.document.revision
    }

    pub async fn withdraw(&self, id: &str) {
        let key = key(id);
        let current = self.inner.read(&key).await.unwrap().unwrap().revision;
        let operation = self.operations.fetch_add(1, Ordering::SeqCst);
        self.inner
            .apply(MemoryWrite::Withdraw {
                key: key.clone(),
                operation_id: OperationId::new(format!("op-{operation}")).unwrap(),
                expected_revision: current,
                reason: "test".to_owned(),
            })
            .await
            .unwrap();
        self.record(key);
    }

    fn record(&self, key: MemoryKey) {
        let mut changes = self.changes.lock().unwrap();
        let sequence = ChangeSequence(changes.len() as u64 + 1);
        changes.push(Change { sequence, key });
    }
}

impl MemoryReader for FeedStore {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        self.inner.read(key).await
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        self.inner.read_many(keys).await
    }
}

impl ChangeFeed for FeedStore {
    async fn head(&self) -> Result<ChangeSequence, MemoryError> {
        Ok(ChangeSequence(self.changes.lock().unwrap().len() as u64))
    }

    async fn changes_since(
        &self,
        after: ChangeSequence,
        limit: usize,
    ) -> Result<Vec<Change>, MemoryError> {
        Ok(self
            .changes
            .lock()
            .unwrap()
            .iter()
            .filter(|change| change.sequence > after)
            .take(limit)
            .cloned()
            .collect())
    }
}

/// Wraps an embedder, counting texts embedded and failing while `fail` is set.
pub struct ProbeEmbedder<E> {
    pub inner: E,
    pub calls: AtomicUsize,
    pub texts: AtomicUsize,
    pub fail: AtomicBool,
}

impl<E: Embedder> ProbeEmbedder<E> {
    pub fn new(inner: E) -> Arc<Self> {
        Arc::new(Self {
            inner,
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
            fail: AtomicBool::new(false),
        })
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl<E: Embedder> Embedder for ProbeEmbedder<E> {
    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        if self.fail.load(Ordering::SeqCst) {
            return Err(EmbedError::Model {
                detail: "injected failure".to_owned(),
            });
        }
        self.inner.embed(texts)
    }
}
