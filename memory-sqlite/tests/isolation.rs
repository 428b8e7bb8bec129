//! Tenant isolation (memory-core's property: reads and searches never cross namespaces or scopes, and
//! no query text, FTS5 syntax included, makes the search fail) against SQLite files.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{Break, NOW, suited};
use memory_testkit::store::run_isolation_property;

#[test]
fn reads_and_searches_never_cross_namespaces_or_scopes() {
    run_isolation_property(NOW, || std::future::ready(suited(Break::Nothing)));
}

/// The property fails on a store whose search answers another scope's documents.
#[test]
fn the_isolation_property_catches_a_search_that_leaks_a_scope() {
    let outcome = std::panic::catch_unwind(|| {
        run_isolation_property(NOW, || std::future::ready(suited(Break::SearchLeaksScope)));
    });
    assert!(
        outcome.is_err(),
        "a scope leak passed the isolation property"
    );
}
