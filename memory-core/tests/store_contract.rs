//! The in-memory store against the store contract suite and the model property.

use std::sync::Arc;

use memory_core::{InMemoryStore, ManualClock};
use memory_testkit::{
    CONTRACT_RULES, TAMPER_RULES, run_contract_suite_with_tamper, run_model_property,
};

#[tokio::test]
async fn in_memory_store_passes_the_contract_suite() {
    let report = run_contract_suite_with_tamper(|| async { InMemoryStore::new() }).await;
    report.assert_all_passed();
    let every_rule: Vec<&str> = CONTRACT_RULES.iter().chain(TAMPER_RULES).copied().collect();
    assert_eq!(report.passed, every_rule, "every rule runs, in order");
    assert!(report.skipped.is_empty());
}

#[test]
fn in_memory_store_matches_the_model() {
    run_model_property(|| async {
        InMemoryStore::with_clock(Arc::new(ManualClock::new(1_700_000_000_000)))
    });
}

/// Regression: `5` and `5.0` in metadata are one JSON number with one canonical form, so replaying the
/// command with the other spelling is a replay, not corrupt data.
#[tokio::test]
async fn replay_with_equal_number_spelled_differently_is_a_replay() {
    use memory_core::{
        DocumentId, InMemoryStore, MemoryContent, MemoryKey, MemoryScope, MemoryWrite,
        MemoryWriter, NamespaceAddress, OperationId,
    };
    let store = InMemoryStore::new();
    let key = MemoryKey {
        namespace: NamespaceAddress::encode("numbers", 1, &serde_json::json!({"t": 1}))
            .expect("address"),
        id: DocumentId::new("doc").expect("id"),
    };
    let put = |number: serde_json::Value| {
        let mut content = MemoryContent::text("five");
        content.metadata.insert("n".to_owned(), number);
        MemoryWrite::Put {
            key: key.clone(),
            operation_id: OperationId::new("op").expect("operation id"),
            expected_revision: None,
            locator: "l".to_owned(),
            content,
            scopes: vec![MemoryScope::new("s").expect("scope")],
        }
    };
    let first = store
        .apply(put(serde_json::json!(5)))
        .await
        .expect("written");
    let replay = store
        .apply(put(serde_json::json!(5.0)))
        .await
        .expect("replayed");
    assert!(replay.replayed);
    assert_eq!(replay.receipt, first.receipt);
}
