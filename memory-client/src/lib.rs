//! The client side of a running `memory serve --http`, for every process that talks to one: the
//! hook and the eval's load generator (issue 41: it lived in memory-cli, so the eval linked the
//! command line and the server to reach it).
//!
//! - [`discovery`]: the file naming a running HTTP server's URL and token, beside its database.
//! - [`server`]: the MCP streamable HTTP client, as much of the protocol as one caller needs.
//!
//! It knows no command line and serves nothing.

pub mod discovery;
pub mod server;
