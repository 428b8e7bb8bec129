//! The agent-facing interfaces of the memory library: the `memory` command and its MCP server.
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

pub mod blocking;
pub mod cli;
pub mod context;
pub mod database;
pub mod destination;
pub mod discovery;
pub mod doctor;
pub mod feed;
pub mod grants;
pub mod hook;
pub mod http;
pub mod import;
pub mod input;
pub mod list;
pub mod mcp;
pub mod metrics;
pub mod recall_service;
pub mod refusal;
pub mod semantic;
pub mod serve;
pub mod service;
pub mod settings;
pub mod signals;
pub mod simple;
pub mod status;
pub mod thread;
pub mod wire;
pub mod worker;
