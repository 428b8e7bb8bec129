//! The integration tests of `remembering`, one binary: every file beside this one is a module of it
//! (one link instead of one per file keeps a clean build small and fast).

mod support;

mod activity_pass;
mod intents;
mod model_extract;
mod record_sources;
mod schedule;
