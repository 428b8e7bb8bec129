//! The integration tests of `tests`, one binary: every file beside this one is a module of it
//! (one link instead of one per file keeps a clean build small and fast).

mod conformance;
mod context;
mod docs;
mod forget_window;
mod grants;
mod history;
mod hook;
mod hook_stress;
mod host_grant;
mod http;
mod http_fuzz;
mod http_limits;
mod inspector;
mod journey;
mod long_documents;
mod model_compaction;
mod model_journey;
mod product;
mod rerank;
mod settings;
mod simple_tools;
mod windows;
mod write_refusals;
