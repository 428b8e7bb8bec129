//! The in-memory store passes the listing suite (memory-testkit proves the suite catches broken listers).

use memory_core::InMemoryStore;
use memory_testkit::listing::{LISTING_RULES, run_listing_suite};

#[tokio::test]
async fn the_in_memory_store_passes_the_listing_suite() {
    let report = run_listing_suite(|| async { InMemoryStore::new() }).await;
    report.assert_all_passed();
    assert_eq!(report.passed, LISTING_RULES);
}
