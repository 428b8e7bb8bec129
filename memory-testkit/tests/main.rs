//! The integration tests of `memory-testkit`, one binary: every file beside this one is a module of it
//! (one link instead of one per file keeps a clean build small and fast).

mod activity_suites;
mod contract_catches_broken_stores;
mod listing_suite;
mod vector_suite;
