//! Tenant isolation (memory-core's property: reads and searches never cross namespaces or scopes, and
//! no query text, tsquery syntax included, makes the search fail) against PostgreSQL, one fresh schema
//! per case.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{NOW, server_url, store_at};
use memory_testkit::store::run_isolation_property;

#[test]
fn reads_and_searches_never_cross_namespaces_or_scopes() {
    let Some(url) = server_url("reads_and_searches_never_cross_namespaces_or_scopes") else {
        return;
    };
    run_isolation_property(NOW, || store_at(url.clone()));
}
