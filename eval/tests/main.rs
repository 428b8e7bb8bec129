//! The integration tests of `eval`, one binary: every file beside this one is a module of it
//! (one link instead of one per file keeps a clean build small and fast).

mod corrections;
mod locomo;
mod locomo_worker;
mod pipeline;
mod serve_load;
