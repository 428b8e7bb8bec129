//! Remembering: turns committed conversation activity into memory, crash-safely (SPEC §5).
//!
//! - [`activity`]: committed-activity processing over a thread log with fenced leases.
//! - [`admission`]: durable admission of intents, with an outbox for admissions that failed.
//! - [`worker`]: finite worker passes over admitted intents (save proposal, re-check, save the exact
//!   command, send; rebase only on a definite conflict) and cleanup of withdrawn sources.
//! - [`sources`]: source events (forget, edit, deletion, revocation) and the suppressing reader.
//! - [`extract`]: the record extractor port and the default statement extractor.
//! - [`model_extract`]: the model extractor (a language model proposes, only literal quotes keep).
//! - [`proposals`]: the checks every proposed memory must pass.
//! - [`statements`]: what of a user's input becomes memory (sentences, kept statements, drop reasons).
//! - [`app`]: the application traits `Extractor`, `Merger`, `SourceLoader` and `Cleanup`.
//! - [`pending`]: one worker pass of every processor over the threads the log marks pending.
//! - [`hooks`]: named pass points where tests inject crashes and pauses.
//! - [`schedule`]: the worker's pass loop: signal stop within one pass, poisoning on a panic.
//! - [`thread_sources`]: thread records as intent sources, for the worker binary.
//!
//! This crate holds logic only: storage comes through the ports of `memory_core::activity` (implemented
//! by `memory-sqlite` and `memory-postgres`) and `memory_core::MemoryWriter`; only the worker binary
//! names concrete stores (it selects SQLite or PostgreSQL from its `--db`).

pub mod activity;
pub mod admission;
pub mod app;
pub mod corrections;
pub mod error;
pub mod extract;
pub mod hooks;
pub mod limits;
pub mod model_extract;
pub mod pending;
pub mod proposals;
pub mod schedule;
pub mod sources;
pub mod statements;
pub mod thread_sources;
pub mod worker;

pub use activity::{
    ActivityProcessor, ActivityProcessorParts, PassReport, PassStop, UnboundThreads,
};
pub use error::{ApplicationError, RememberingError};
pub use extract::{
    Contribution, ExtractFailure, Extraction, ExtractionRequest, RecordExtractor,
    StatementExtractor, ThreadExtractor,
};
pub use hooks::{NoHooks, PassHooks, PassPoint};
pub use limits::PassLimits;
pub use pending::{PendingPass, PendingReport};
