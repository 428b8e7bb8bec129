//! The memory-core listing suite, run against PostgreSQL (one fresh schema per store, dropped after).
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{TestStore, server_url, store_at};
use memory_core::listing::{ListCursor, ListPage, MemoryLister};
use memory_core::{MemoryError, MemoryWrite, MemoryWriter, NamespaceAddress, WriteOutcome};
use memory_testkit::listing::{LISTING_RULES, run_listing_suite};

/// The test store (which drops its schema when dropped) seen through the two ports the suite uses.
struct Listed(TestStore);

impl MemoryWriter for Listed {
    async fn apply(&self, write: MemoryWrite) -> Result<WriteOutcome, MemoryError> {
        self.0.store.apply(write).await
    }
}

impl MemoryLister for Listed {
    async fn list(
        &self,
        namespace: &NamespaceAddress,
        after: Option<ListCursor>,
        limit: usize,
    ) -> Result<ListPage, MemoryError> {
        self.0.store.list(namespace, after, limit).await
    }
}

#[tokio::test]
async fn postgres_store_passes_the_listing_suite() {
    let Some(url) = server_url("postgres_store_passes_the_listing_suite") else {
        return;
    };
    let report = run_listing_suite(|| {
        let url = url.clone();
        async move { Listed(store_at(url).await) }
    })
    .await;
    report.assert_all_passed();
    assert_eq!(report.passed, LISTING_RULES);
}
