//! The integration tests of `memory-cli`, one binary: every file beside this one is a module of it
//! (one link instead of one per file keeps a clean build small and fast).

mod common;
mod thread_support;

mod blocking_boundary;
mod command;
mod database;
mod mcp_server;
mod postgres;
mod postgres_workers;
mod semantic;
mod thread;
mod thread_bounds;
mod thread_postgres;
mod worker_binary;
