//! The integration tests of `memory-core`, one binary: every file beside this one is a module of it
//! (one link instead of one per file keeps a clean build small and fast).

mod recall_support;

mod listing_contract;
mod namespace;
mod recall_failures;
mod recall_lexical_source;
mod recall_properties;
mod recall_rendering;
mod recall_rules;
mod revalidate_rules;
mod store_contract;
