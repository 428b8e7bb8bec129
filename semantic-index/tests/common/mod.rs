//! Fixtures shared by the integration tests: a store with a change feed, and embedders that count calls
//! or fail on demand.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use memory_core::{
    Change, ChangeFeed, ChangeSequence, DocumentId, InMemoryStore, MemoryAccess, MemoryContent,
    MemoryDocument, MemoryError, MemoryKey, MemoryReader, MemoryScope, MemoryWrite, MemoryWriter,
    NamespaceAddress, OperationId, Revision,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
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
                by: None,
            })
            .await
            .unwrap();
        self.record(key);
    }

    fn record(&self, key: MemoryKey) {
        let mut changes = self.changes.lock().unwrap();
        let sequence = ChangeSequence::new(changes.len() as u64 + 1);
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
        Ok(ChangeSequence::new(
            self.changes.lock().unwrap().len() as u64
        ))
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

// Varied English sentences for the real-model tests: 24 subjects, 20 verbs, 24 objects, 16 places and
// 12 times in three word orders, so the vectors spread the way real text does.

pub const SUBJECTS: [&str; 24] = [
    "My sister",
    "The old fisherman",
    "Our neighbour",
    "A young doctor",
    "The project manager",
    "My grandfather",
    "The new intern",
    "A street musician",
    "The librarian",
    "Our landlord",
    "The pilot",
    "A tired student",
    "The chef",
    "My best friend",
    "The mayor",
    "A retired teacher",
    "The gardener",
    "Our dentist",
    "The bus driver",
    "A famous painter",
    "The night nurse",
    "My cousin",
    "The shop owner",
    "A software engineer",
];
pub const VERBS: [&str; 20] = [
    "bought",
    "repaired",
    "painted",
    "lost",
    "found",
    "sold",
    "borrowed",
    "cleaned",
    "photographed",
    "described",
    "forgot",
    "ordered",
    "returned",
    "measured",
    "hid",
    "carried",
    "delivered",
    "tested",
    "built",
    "ignored",
];
pub const OBJECTS: [&str; 24] = [
    "a red bicycle",
    "the kitchen table",
    "an old violin",
    "a box of letters",
    "the garden fence",
    "a pair of boots",
    "the broken laptop",
    "a bag of apples",
    "the wedding cake",
    "a wooden boat",
    "the office printer",
    "a winter coat",
    "the train tickets",
    "a stack of invoices",
    "the family car",
    "a blue umbrella",
    "the spare keys",
    "a jar of honey",
    "the ceiling lamp",
    "a set of maps",
    "the birthday present",
    "a chess board",
    "the water heater",
    "a leather wallet",
];
pub const PLACES: [&str; 16] = [
    "at the market",
    "near the harbour",
    "in the basement",
    "behind the station",
    "at the airport",
    "in the city centre",
    "by the river",
    "at the hospital",
    "in a small village",
    "at school",
    "in the mountains",
    "at the beach",
    "in the garage",
    "at the library",
    "on the rooftop",
    "in the park",
];
pub const TIMES: [&str; 12] = [
    "yesterday",
    "last winter",
    "this morning",
    "on Sunday",
    "two weeks ago",
    "after lunch",
    "during the storm",
    "before the holidays",
    "late at night",
    "in early spring",
    "last year",
    "at dawn",
];

/// One random sentence: who did what, where and when.
pub fn sentence(rng: &mut ChaCha8Rng) -> String {
    let pick =
        |rng: &mut ChaCha8Rng, list: &[&str]| list[rng.random_range(0..list.len())].to_owned();
    let subject = pick(rng, &SUBJECTS);
    let verb = pick(rng, &VERBS);
    let object = pick(rng, &OBJECTS);
    let place = pick(rng, &PLACES);
    let time = pick(rng, &TIMES);
    match rng.random_range(0..3) {
        0 => format!("{subject} {verb} {object} {place} {time}."),
        1 => format!("{time}, {subject} {verb} {object} {place}."),
        _ => format!("{subject} {verb} {object} {time}, {place}."),
    }
}

/// `count` distinct sentences drawn from `seed`, none of them in `exclude`.
pub fn sentences(count: usize, seed: u64, exclude: &HashSet<String>) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seen = exclude.clone();
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let text = sentence(&mut rng);
        if seen.insert(text.clone()) {
            out.push(text);
        }
    }
    out
}
