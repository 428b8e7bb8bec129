//! The lexical recall source, over a tiny in-test lexical index that can lag the store.
#![allow(clippy::unwrap_used)]

use crate::recall_support;

use std::sync::Mutex;

use memory_core::StoreFault;
use memory_core::recall::{LexicalRecall, SourceStatus, lexical_lookup};
use memory_core::{
    InMemoryStore, LexicalHit, LexicalSearch, MemoryAccess, MemoryContent, MemoryDocument,
    MemoryError, MemoryKey, MemoryLookup, MemoryReader, RecallError, RevalidationLimits,
};
use recall_support::*;

/// A store plus a word index refreshed only when told to, so it can be stale on purpose.
#[derive(Default)]
struct IndexedStore {
    store: InMemoryStore,
    index: Mutex<Vec<MemoryDocument>>,
    fail_search: bool,
}

impl IndexedStore {
    async fn refresh(&self, key: &MemoryKey) {
        let document = self.store.read(key).await.unwrap().unwrap();
        let mut index = self.index.lock().unwrap();
        index.retain(|indexed| indexed.key != *key);
        index.push(document);
    }
}

impl LexicalSearch for IndexedStore {
    async fn search(
        &self,
        access: &MemoryAccess,
        query: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>, MemoryError> {
        if self.fail_search {
            return Err(MemoryError::Store(StoreFault::Busy {
                operation: "search",
            }));
        }
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        let index = self.index.lock().unwrap();
        let mut hits: Vec<LexicalHit> = index
            .iter()
            .filter(|document| document.is_visible_to(access))
            .filter_map(|document| {
                let text = document.content.text.to_lowercase();
                let score = words
                    .iter()
                    .filter(|word| text.contains(word.as_str()))
                    .count();
                (score > 0).then(|| LexicalHit {
                    key: document.key.clone(),
                    revision: document.revision.clone(),
                    locator: document.locator.clone(),
                    score: score as f64,
                })
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key.cmp(&b.key)));
        hits.truncate(limit);
        Ok(hits)
    }
    async fn written_neighbours(
        &self,
        _access: &MemoryAccess,
        ids: &[memory_core::DocumentId],
        _reach: usize,
    ) -> Result<Vec<memory_core::WrittenNeighbours>, MemoryError> {
        // This stand-in models no write order: no document has neighbours.
        Ok(vec![memory_core::WrittenNeighbours::default(); ids.len()])
    }
}

impl MemoryReader for IndexedStore {
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

async fn seeded() -> IndexedStore {
    let store = IndexedStore::default();
    for (id, text) in [
        (
            "retry",
            "Retry policy: use a bounded queue and keep failed work.",
        ),
        ("lunch", "Lunch is at noon on Fridays."),
        ("queue", "The queue holds at most 100 jobs."),
    ] {
        let key = key("team-a", id);
        put(
            &store.store,
            &key,
            None,
            MemoryContent::text(text),
            &format!("op-{id}"),
        )
        .await;
        store.refresh(&key).await;
    }
    store
}

#[tokio::test]
async fn recalls_the_relevant_memory_for_a_query_end_to_end() {
    let store = seeded().await;
    let source = LexicalRecall::new(&store, access("team-a"), "bounded queue")
        .max_hits(8)
        .into_source(source_id("notes"), true);
    let recalled = recall_with(vec![source], &limits(8)).await.unwrap();
    let texts: Vec<&str> = recalled
        .passages
        .iter()
        .map(|p| p.passage.content.text.as_str())
        .collect();
    assert_eq!(
        texts,
        [
            "Retry policy: use a bounded queue and keep failed work.",
            "The queue holds at most 100 jobs."
        ]
    );
    assert!(
        recalled
            .text
            .contains("| The queue holds at most 100 jobs.")
    );
    assert!(!recalled.text.contains("Lunch"));
    assert_citations_consistent(&recalled);
}

#[tokio::test]
async fn a_stale_index_never_leaks_withdrawn_or_outdated_text() {
    let store = seeded().await;
    let retry = key("team-a", "retry");
    let queue = key("team-a", "queue");
    let retry_revision = store.store.read(&retry).await.unwrap().unwrap().revision;
    let queue_revision = store.store.read(&queue).await.unwrap().unwrap().revision;
    withdraw(&store.store, &retry, &retry_revision, "op-withdraw").await;
    put(
        &store.store,
        &queue,
        Some(&queue_revision),
        MemoryContent::text("The queue is gone."),
        "op-edit",
    )
    .await;
    // The index was not refreshed: it still returns both old hits.
    let lookup = lexical_lookup(
        &store,
        &access("team-a"),
        "bounded queue",
        8,
        &RevalidationLimits::default(),
    )
    .await
    .unwrap();
    let MemoryLookup::Found { passages } = lookup else {
        panic!("expected Found, got {lookup:?}")
    };
    let texts: Vec<&str> = passages.iter().map(|p| p.content.text.as_str()).collect();
    assert_eq!(texts, ["The queue is gone."]);
}

#[tokio::test]
async fn no_hits_is_no_match() {
    let store = seeded().await;
    let recalled = recall_with(
        vec![
            LexicalRecall::new(&store, access("team-a"), "zebra")
                .into_source(source_id("notes"), true),
        ],
        &limits(8),
    )
    .await
    .unwrap();
    assert_eq!(recalled.outcomes[0].status, SourceStatus::NoMatch);
    // Another namespace sees nothing either.
    let other = lexical_lookup(
        &store,
        &access("team-b"),
        "queue",
        8,
        &RevalidationLimits::default(),
    )
    .await
    .unwrap();
    assert_eq!(other, MemoryLookup::NoMatch);
}

#[tokio::test]
async fn a_search_failure_keeps_its_type() {
    let store = IndexedStore {
        fail_search: true,
        ..IndexedStore::default()
    };
    let error = recall_with(
        vec![
            LexicalRecall::new(&store, access("team-a"), "queue")
                .into_source(source_id("notes"), false),
        ],
        &limits(8),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            error,
            RecallError::Source(MemoryError::Store(StoreFault::Busy {
                operation: "search"
            }))
        ),
        "{error:?}"
    );
}
