//! Cross-crate integration tests and benchmarks: the pieces that only make sense with several crates
//! together (revalidation against a real SQLite file, end-to-end runs).
//!
//! **The product contract lives here.** `tests/product.rs` drives the built `memory` binary, as a user
//! or an agent host would: one-shot commands from a shell and `memory serve` through a real MCP client
//! over stdio, on a real SQLite file with the real model. A promise counts as kept when it holds there,
//! not when a library function keeps it. [`product`] holds the harness: where the binary is, running a
//! command, talking MCP, building the JSON of documents and recalls.
//!
//! [`serving`] holds the harness of `memory serve` with options: over stdio with server defaults, and
//! over streamable HTTP (the server's discovery file, its token, `/healthz` and `/metrics`).
//!
//! [`hook`] holds the `memory hook` tests' harness: recorded hook inputs, transcript fixtures, reading
//! the thread log a hook wrote.
//!
//! The binary is the one `cargo test --workspace` builds for memory-cli's own integration tests
//! (`target/<profile>/memory`, beside this test's `deps/` folder); [`product::memory_binary`] fails with
//! the command to run when it is missing. Each store's own contract, crash and fault suites live with
//! that store's crate.

pub mod hook;
pub mod product;
pub mod serving;
