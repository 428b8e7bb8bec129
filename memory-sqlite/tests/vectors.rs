//! The memory-core vector store suite against SQLite files, one fresh file per rule.
#![allow(clippy::unwrap_used)]

use crate::common;

use memory_sqlite::vectors::SqliteVectorStore;
use memory_testkit::vectors::run_vector_suite;

#[tokio::test]
async fn sqlite_vector_store_passes_the_vector_suite() {
    run_vector_suite(|| async { SqliteVectorStore::open(common::fresh_path()).unwrap() })
        .await
        .assert_all_passed();
}
