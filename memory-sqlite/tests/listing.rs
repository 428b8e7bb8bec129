//! The memory-core listing suite, run against SQLite files (the store and a read-only reader).

use memory_sqlite::SqliteStore;
use memory_testkit::listing::{LISTING_RULES, run_listing_suite};

#[tokio::test]
async fn sqlite_store_passes_the_listing_suite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut count = 0;
    let report = run_listing_suite(|| {
        count += 1;
        let path = dir.path().join(format!("list-{count}.sqlite"));
        async move { SqliteStore::open(&path).expect("store opens") }
    })
    .await;
    report.assert_all_passed();
    assert_eq!(report.passed, LISTING_RULES);
}
