//! The integration tests of `semantic-index`, one binary: every file beside this one is a module of it
//! (one link instead of one per file keeps a clean build small and fast).

mod common;

mod capacity_and_graph;
mod compact_recall;
mod hnsw_recall;
mod index_load;
mod indexer_batches;
mod lookup_failure;
mod namespace_filtering;
mod real_model;
mod recall_sources;
mod refresh_and_query;
mod vector_boundary;
