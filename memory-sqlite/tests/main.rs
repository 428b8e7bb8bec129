//! The integration tests of `memory-sqlite`, one binary: every file beside this one is a module of it
//! (one link instead of one per file keeps a clean build small and fast).

mod common;

mod activity;
mod contract;
mod isolation;
mod listing;
mod schema_migrations;
mod store;
mod vectors;
