//! The integration tests of `memory-postgres`, one binary: every file beside this one is a module of it
//! (one link instead of one per file keeps a clean build small and fast).

mod common;

mod activity;
mod contract;
mod faults;
mod follower;
mod isolation;
mod listing;
mod restart;
mod store;
mod vectors;
