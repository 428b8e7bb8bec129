//! The evaluation harness: a frozen corpus generated from a seed, the pipeline that feeds it through the
//! library, the figures it measures and the reports it writes.
//!
//! - [`corpus`]: the seeded corpus and its answer key; [`metrics`]: hit@k, MRR, misses, contradictions,
//!   percentiles.
//! - [`extract`], [`pipeline`]: conversations into the thread log, committed-activity processing with the
//!   eval extractor into `person/topic` memory documents, the semantic indexer following the store.
//! - [`modes`], [`quality`]: direct, lexical, exact, HNSW and hybrid recall through memory-core's
//!   `recall` with revalidation; quality and warm latency; hybrid weight tuning.
//! - [`faults`], [`lag`], [`sweep`]: slow and failing sources, commit-to-recallable lag, latency against
//!   corpus size and the comparison script's vector files; [`tenants`]: the multi-tenant point
//!   (`namespace_isolation_ratio` of the exact index, HNSW and the lexical search).
//! - [`sync_bench`]: `memory sync` against the embedder alone on the same texts (the comparison
//!   script's import file and the texts a sync of it embeds).
//! - [`report`], [`run`], [`progress`]: the report files, the main job, progress bars.
//! - [`locomo`]: the LoCoMo benchmark through the product, and the tuning of its recall defaults.
//! - [`serve_load`]: `memory serve --http` under concurrent tenants' load (`memory-eval serve-load`).

pub mod corpus;
pub mod corrections;
pub mod extract;
pub mod faults;
pub mod lag;
pub mod locomo;
pub mod metrics;
pub mod modes;
pub mod pipeline;
pub mod progress;
pub mod quality;
pub mod report;
pub mod run;
pub mod serve_load;
pub mod sweep;
pub mod sync_bench;
pub mod tenants;
