//! The listing suite catches listers broken on purpose: each broken lister wraps the in-memory store and
//! breaks one rule, and the suite must name that rule.

use memory_core::listing::{ListCursor, ListPage, MemoryLister};
use memory_core::{
    InMemoryStore, MemoryError, MemoryWrite, MemoryWriter, NamespaceAddress, WriteOutcome,
};
use memory_testkit::listing::run_listing_suite;

/// How a broken lister breaks the rules.
#[derive(Clone, Copy)]
enum Breakage {
    /// The next page starts at the last document of the previous one again (a repeat).
    RepeatsTheBoundary,
    /// Oldest first.
    OldestFirst,
}

struct Broken {
    inner: InMemoryStore,
    breakage: Breakage,
}

impl MemoryWriter for Broken {
    async fn apply(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        self.inner.apply(write).await
    }
}

impl MemoryLister for Broken {
    async fn list(
        &self,
        namespace: &NamespaceAddress,
        after: Option<ListCursor>,
        limit: usize,
    ) -> Result<ListPage, MemoryError> {
        match self.breakage {
            Breakage::RepeatsTheBoundary => {
                let after = after.map(|cursor| ListCursor::after_position(cursor.position() + 1));
                self.inner.list(namespace, after, limit).await
            }
            Breakage::OldestFirst => {
                let mut page = self.inner.list(namespace, after, limit).await?;
                page.documents.reverse();
                Ok(page)
            }
        }
    }
}

#[tokio::test]
async fn the_suite_catches_repeats_and_a_wrong_order() {
    for breakage in [Breakage::RepeatsTheBoundary, Breakage::OldestFirst] {
        let report = run_listing_suite(|| async move {
            Broken {
                inner: InMemoryStore::new(),
                breakage,
            }
        })
        .await;
        assert!(
            report
                .failure("listing-pages-through-every-document-once-newest-first")
                .is_some(),
            "{report}"
        );
    }
}
