//! The agent-facing interfaces of the memory library: the `memory` command and its MCP server, over
//! memory-service's services (re-exported here under their module names).
//!
//! - [`wire`]: the five operations' JSON arguments and results (the contract of issue 7).
//! - [`input`]: reading untrusted input within a size cap and decoding it.
//! - [`refusal`]: the typed `{"error": {"kind", "message"}}` answer, and every error's conversion to it.
//! - [`database`]: the database `--db` names: which backend, and every store opened in it (for
//!   `memory`, `memory serve`, `memory hook` and `remembering-worker` alike).
//! - [`blocking`]: where a store call leaves the async workers (the one rule, and its helpers).
//! - [`service`]: the operations over one store, shared by every interface.
//! - [`recall_service`]: which index backs each recall mode, and what sync waits for.
//! - [`semantic`]: the semantic index (the real embedding model, loaded lazily) and how it follows the store.
//! - [`thread`]: conversation activity: appending thread records and forgetting them.
//! - [`hook`]: `memory hook`, the recall and activity hooks of agent hosts (Claude Code and a generic form).
//! - [`import`]: bulk import of `memory_put` arguments from JSON Lines.
//! - [`mcp`]: the MCP server (stdio or streamable HTTP), with tool annotations and output schemas.
//! - [`simple`]: the simple tools (`memory_remember`, `memory_search`, `memory_forget`, `memory_list`)
//!   in the server's default namespace and scope; [`list`]: the listing they and `memory list` share.
//! - [`http`]: `memory serve --http`: bearer tokens and limits, `/healthz`, `/metrics` ([`metrics`]);
//!   [`grants`]: what each token may touch.
//! - [`discovery`]: the file naming a running HTTP server's URL and token.
//! - [`doctor`]: `memory doctor`, where the model assets are found.
//! - [`cli`]: the command line's definition.
//!
//! The binary (`src/main.rs`) only parses the command line, opens the store and prints answers.

// The services every door shares live in memory-service; they are re-exported under their old
// paths so the binaries, the server and the tests name them as before.
/// The discovery file of a running HTTP server (memory-client's).
pub use memory_client::discovery;
pub use memory_service::with_store;
pub use memory_service::{
    blocking, context, database, destination, doctor, feed, grants, import, input, list,
    model_settings, notes, recall_service, refusal, semantic, service, settings, simple, thread,
    wire, worker,
};

pub mod cli;
pub mod hook;
pub mod http;
pub mod mcp;
pub mod metrics;
pub mod namespace_args;
pub mod serve;
pub mod signals;
pub mod status;
