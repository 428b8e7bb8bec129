//! Cross-crate integration tests and benchmarks: the pieces that only make sense with several crates
//! together (revalidation against a real SQLite file, end-to-end runs). Each crate's own contract, crash
//! and fault suites live with that crate; this package holds what spans them.
