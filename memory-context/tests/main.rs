//! The integration tests of `memory-context`, one binary: every file beside this one is a module of it
//! (one link instead of one per file keeps a clean build small and fast).

mod common;

mod checkpoints;
mod context;
mod forget;
mod properties;
mod windows;
