//! The memory-core store contract suite and model property, run against PostgreSQL (one fresh schema per
//! store, dropped afterwards).
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{TestStore, server_url, store_at};
use memory_core::{MemoryError, MemoryReceipt};
use memory_testkit::{
    ReceiptTamper, TamperableStore, run_contract_suite_with_tamper, run_model_property,
};

/// Overwrites receipts through a raw connection to the store's schema, behind the store's back.
struct RawReceipts {
    client: tokio_postgres::Client,
}

impl ReceiptTamper for RawReceipts {
    async fn overwrite_receipt(&self, receipt: MemoryReceipt) -> Result<(), MemoryError> {
        let body = serde_json::to_string(&receipt).expect("receipt encodes");
        let changed = self
            .client
            .execute(
                "UPDATE memory_receipts SET body = $1 WHERE namespace = $2 AND operation_id = $3",
                &[
                    &body,
                    &receipt.document.key.namespace.as_str(),
                    &receipt.operation_id.as_str(),
                ],
            )
            .await
            .map_err(|error| MemoryError::storage("tamper", error))?;
        assert_eq!(changed, 1, "the receipt to overwrite exists");
        Ok(())
    }
}

#[tokio::test]
async fn postgres_store_passes_the_contract_suite() {
    let Some(url) = server_url("postgres_store_passes_the_contract_suite") else {
        return;
    };
    run_contract_suite_with_tamper(|| {
        let url = url.clone();
        async move {
            let store: TestStore = store_at(url).await;
            let client = store.raw().await;
            TamperableStore::new(store, RawReceipts { client })
        }
    })
    .await
    .assert_all_passed();
}

#[test]
fn postgres_store_matches_the_model() {
    let Some(url) = server_url("postgres_store_matches_the_model") else {
        return;
    };
    run_model_property(|| {
        let url = url.clone();
        async move { store_at(url).await }
    });
}
