//! The test kit of the memory ports: what every backend must pass, kept apart from `memory_core` so that
//! the model crate holds only the ports and the rules.
//!
//! It owns:
//! - **the contract suite of each port**, which every backend runs with one call: the write rules of
//!   [`MemoryReader`](memory_core::MemoryReader) + [`MemoryWriter`](memory_core::MemoryWriter) and the
//!   model property, the store extras (change feed, lexical search, history, stored receipts, isolation),
//!   the activity ports (thread log, progress, remembering store), the vector store and the listing read;
//! - **reference implementations that pass them**: [`InMemoryActivity`] and [`InMemoryVectorStore`]
//!   (with memory-core's [`InMemoryStore`](memory_core::InMemoryStore) for the document ports);
//! - **a broken store per suite that the suite catches**: this crate's own tests (`tests/`) wrap the
//!   reference implementations, break exactly one rule each, and prove the suite names that rule; the
//!   corrupt-receipt rules reach a store's insides through [`ReceiptTamper`];
//! - **the shared test helpers**: [`builders`] of keys and writes, [`strategies`] for proptest, and
//!   [`proptest_config`] with the project's case counts and fixed seed.
//!
//! It names no concrete store, database or model: backends bring themselves to it through the ports and
//! the small adapters ([`store::InspectableStore`], [`activity::ActivityBackend`], [`ReceiptTamper`]).
//! **It is a dev-dependency only**, never a dependency of a shipped library or binary.
//!
//! A store crate runs the write rules with two calls from its tests:
//!
//! ```no_run
//! use memory_core::InMemoryStore;
//! use memory_testkit::{run_contract_suite_with_tamper, run_model_property};
//!
//! #[tokio::test]
//! async fn store_passes_the_contract() {
//!     // A store without its own `ReceiptTamper` pairs with one: `TamperableStore::new(store, tamper)`.
//!     run_contract_suite_with_tamper(|| async { InMemoryStore::new() })
//!         .await
//!         .assert_all_passed();
//! }
//!
//! #[test]
//! fn store_matches_the_model() {
//!     run_model_property(|| async { InMemoryStore::new() });
//! }
//! ```
//!
//! - [`run_contract_suite`] runs every rule of SPEC §2.2 that needs no access to the store's insides; each
//!   rule is a named check on a fresh store from the factory, and the [`ContractReport`] names every rule
//!   that failed. [`run_contract_suite_with_tamper`] adds the corrupt-receipt rules, which need a
//!   [`ReceiptTamper`] to overwrite a stored receipt behind the store's back.
//! - [`run_model_property`] runs random sequences of puts, withdrawals, exact replays and reused operation
//!   ids across three namespaces (two of them of different definitions with the same identity) and checks
//!   each answer, and every current document, against a plain `BTreeMap` model.
//! - [`strategies`] holds proptest strategies for identities and JSON values, shared with the namespace
//!   tests.
//!
//! Beside the write rules, one suite per port, which every backend runs with one call each:
//! - [`store::run_all`]: the change feed, lexical search, history, stored receipts and batches, through
//!   a [`store::InspectableStore`] adapter; [`store::run_isolation_property`] adds random
//!   tenant-isolation cases.
//! - [`activity::run_all`]: the thread log, progress and remembering store suites, through an
//!   [`activity::ActivityBackend`] that opens as many handles on one storage as a rule needs.
//! - [`vectors::run_vector_suite`]: the vector store.
//! - [`listing::run_listing_suite`]: the listing read ([`MemoryLister`](memory_core::MemoryLister)).
//!
//! [`InMemoryActivity`] and [`InMemoryVectorStore`] are reference implementations that pass them, and
//! this crate's own tests prove each suite fails on a store broken on purpose. [`builders`] holds the
//! key and write builders the backends' own tests share. With the `chat-stub` feature, `chat_stub`
//! serves a loopback OpenAI-compatible chat-completions endpoint for memory-model's tests.
//!
//! Case counts are small by default; `PROPTEST_CASES` sets them exactly and `MEMORY_TEST_SCALE=large`
//! raises them. The random seed is fixed unless `PROPTEST_RNG_SEED` is set, so runs are reproducible.
//!
//! The size-limit rule is checked at its exact boundary. A put's receipt embeds the document it wrote and
//! adds the command digest, the revision and the time, so the receipt is the largest of the three canonical
//! JSON texts (command, document, receipt) and the binding limit for a put: the suite writes a put whose
//! receipt is exactly 16,777,216 UTF-16 code units (accepted) and one whose receipt is one unit longer
//! (refused with `TooLarge`, nothing stored). The text is made of characters outside the Basic
//! Multilingual Plane so that UTF-16 units, UTF-8 bytes and characters all differ. The boundary depends on
//! the number of digits of the store's clock reading, which the suite learns from a first small put.

pub mod activity;
pub mod builders;
#[cfg(feature = "chat-stub")]
pub mod chat_stub;
mod contract;
mod fixtures;
pub mod listing;
mod model;
mod reference;
mod report;
pub mod store;
pub mod strategies;
mod tamper;
pub mod vectors;

pub use contract::{
    CONTRACT_RULES, TAMPER_RULES, run_contract_rules, run_contract_suite,
    run_contract_suite_with_tamper,
};
pub use model::{
    ExpectedChoice, MODEL_DOCUMENTS, MODEL_NAMESPACES, MODEL_OPERATIONS, ModelStep,
    check_model_steps, model_steps, run_model_property,
};
pub use reference::{InMemoryActivity, InMemoryVectorStore};
pub use report::{ContractFailure, ContractReport};
pub use tamper::{ReceiptTamper, TamperableStore};

use proptest::test_runner::{Config as ProptestConfig, RngSeed};

/// How much random testing to do, from `MEMORY_TEST_SCALE` (`large` or anything else).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestScale {
    /// The default: quick enough for every CI run.
    Small,
    /// `MEMORY_TEST_SCALE=large`: many more cases and longer sequences.
    Large,
}

impl TestScale {
    /// Reads `MEMORY_TEST_SCALE`.
    pub fn from_env() -> Self {
        match std::env::var("MEMORY_TEST_SCALE") {
            Ok(value) if value.eq_ignore_ascii_case("large") => Self::Large,
            _ => Self::Small,
        }
    }
}

/// Cases per property in a default run.
pub const SMALL_CASES: u32 = 32;
/// Cases per property with `MEMORY_TEST_SCALE=large`.
pub const LARGE_CASES: u32 = 1_024;
/// The seed used unless `PROPTEST_RNG_SEED` is set.
pub const DEFAULT_RNG_SEED: u64 = 0x6d65_6d6f_7279;

/// The proptest configuration every property test of this project uses: [`SMALL_CASES`] or
/// [`LARGE_CASES`] unless `PROPTEST_CASES` is set, a fixed seed unless `PROPTEST_RNG_SEED` is set, and no
/// failure-persistence files (a failing case is printed, minimized, in the test output).
pub fn proptest_config() -> ProptestConfig {
    let mut config = ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = match TestScale::from_env() {
            TestScale::Small => SMALL_CASES,
            TestScale::Large => LARGE_CASES,
        };
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(DEFAULT_RNG_SEED);
    }
    config
}
