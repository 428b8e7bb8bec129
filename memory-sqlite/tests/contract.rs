//! The memory-core store contract suite and model property, run against SQLite files.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;

use memory_core::{ManualClock, MemoryError, MemoryReceipt};
use memory_sqlite::SqliteStore;
use memory_testkit::{
    ReceiptTamper, TamperableStore, run_contract_suite_with_tamper, run_model_property,
};

/// Overwrites receipts through a raw connection to the store's file, behind the store's back.
struct RawReceipts {
    connection: std::sync::Mutex<rusqlite::Connection>,
}

impl RawReceipts {
    fn new(path: &std::path::Path) -> Self {
        Self {
            connection: std::sync::Mutex::new(
                rusqlite::Connection::open(path).expect("raw connection"),
            ),
        }
    }
}

impl ReceiptTamper for RawReceipts {
    async fn overwrite_receipt(&self, receipt: MemoryReceipt) -> Result<(), MemoryError> {
        let body = serde_json::to_string(&receipt).expect("receipt encodes");
        let changed = self
            .connection
            .lock()
            .unwrap()
            .execute(
                "UPDATE memory_receipts SET body = ?1 WHERE namespace = ?2 AND operation_id = ?3",
                rusqlite::params![
                    body,
                    receipt.document.key.namespace.as_str(),
                    receipt.operation_id.as_str()
                ],
            )
            .map_err(|error| MemoryError::storage("tamper", error))?;
        assert_eq!(changed, 1, "the receipt to overwrite exists");
        Ok(())
    }
}

/// A fresh store file in its own temporary directory; the directory lives as long as the test binary.
fn fresh_path() -> PathBuf {
    let directory = tempfile::tempdir().expect("temporary directory").keep();
    directory.join("memory.sqlite")
}

fn open(path: &std::path::Path) -> SqliteStore {
    SqliteStore::builder()
        .clock(Arc::new(ManualClock::new(1_700_000_000_000)))
        .synchronous(memory_sqlite::Synchronous::Normal)
        .open(path)
        .expect("store opens")
}

#[tokio::test]
async fn sqlite_store_passes_the_contract_suite() {
    run_contract_suite_with_tamper(|| async {
        let path = fresh_path();
        let store = open(&path);
        TamperableStore::new(store, RawReceipts::new(&path))
    })
    .await
    .assert_all_passed();
}

#[test]
fn sqlite_store_matches_the_model() {
    run_model_property(|| async { open(&fresh_path()) });
}
