//! The in-memory store against the store contract suite and the model property.

use std::sync::Arc;

use memory_core::testing::{
    CONTRACT_RULES, TAMPER_RULES, run_contract_suite_with_tamper, run_model_property,
};
use memory_core::{InMemoryStore, ManualClock};

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
