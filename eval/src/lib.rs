//! The evaluation harness: a frozen corpus generated from a seed, the pipeline that feeds it through the
//! library, the figures it measures and the reports it writes.

pub mod corpus;
pub mod metrics;
