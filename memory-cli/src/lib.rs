//! The agent-facing interfaces of the memory library: the `memory` command and its MCP server.
//!
//! - [`wire`]: the five operations' JSON arguments and results (the contract of issue 7).
//! - [`input`]: reading untrusted input within a size cap and decoding it.
//! - [`refusal`]: the typed `{"error": {"kind", "message"}}` answer.
//! - [`service`]: the operations over one store, shared by every interface.
//! - [`recall_service`]: which index backs each recall mode, and what sync waits for.
//! - [`semantic`]: the semantic index (the real embedding model, loaded lazily) and how it follows the store.
//! - [`thread`]: conversation activity: appending thread records and forgetting them.
//! - [`import`]: bulk import of `memory_put` arguments from JSON Lines.
//! - [`mcp`]: the MCP server (stdio).
//! - [`cli`]: the command line's definition.
//!
//! The binary (`src/main.rs`) only parses the command line, opens the store and prints answers.

pub mod cli;
pub mod feed;
pub mod import;
pub mod input;
pub mod mcp;
pub mod recall_service;
pub mod refusal;
pub mod semantic;
pub mod service;
pub mod status;
pub mod thread;
pub mod wire;
