//! The core under every door (issue 41): what the `memory` command, its MCP server, the hook, the
//! Python package and the eval all run, so a rule kept here is kept by each of them.
//!
//! - [`settings`]: every setting a flag or a variable sets, read and checked in one place.
//! - [`database`]: the database a door names: which backend, and every store opened in it.
//! - [`blocking`]: where a store call leaves the async workers (the one rule, and its helpers).
//! - [`wire`]: the operations' JSON arguments and results; [`input`]: reading untrusted input within
//!   a size cap and decoding it; [`refusal`]: the typed `{"error": {"kind", "message"}}` answer, and
//!   every error's conversion to it.
//! - [`service`]: the memory operations over one store; [`recall_service`]: which index backs each
//!   recall mode, and what sync waits for; [`semantic`]: the semantic index (the real embedding
//!   model, loaded lazily) and how it follows the store; [`feed`]: the change feed a server's
//!   indexer follows.
//! - [`thread`]: conversation activity (appending thread records, forgetting them); [`context`]: the
//!   context layer's calls (a turn's model input, compaction, rollover, what is left, the history
//!   tools); [`notes`]: each thread's working notes document; [`worker`]: the
//!   remembering worker's pass.
//! - [`simple`]: the simple operations in a default namespace and scope ([`defaults`]); [`list`]:
//!   the listing they share; [`import`]: bulk import of `memory_put` arguments from JSON Lines.
//! - [`grants`]: what a caller may touch, checked before any read or write; [`destination`]: the one
//!   rule that resolves where a thread's memory goes, and who a local caller is.
//! - [`doctor`]: where the model assets are found, and what is missing; [`status`]: what the store
//!   and its semantic index hold, read without the model.
//!
//! It knows no transport, no command line and no HTTP: those are memory-cli's, which (with the
//! Python package and the eval) builds its doors on these services.

pub mod blocking;
pub mod context;
pub mod database;
pub mod defaults;
pub mod destination;
pub mod doctor;
pub mod feed;
pub mod grants;
pub mod import;
pub mod input;
pub mod list;
pub mod model_settings;
pub mod notes;
mod recall_corrections;
pub mod recall_query;
pub mod recall_service;
pub mod refusal;
pub mod semantic;
pub mod service;
pub mod settings;
pub mod simple;
pub mod status;
pub mod thread;
pub mod wire;
pub mod worker;
