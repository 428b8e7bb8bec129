//! The command line: `memory [--db PATH] <put|withdraw|get|recall|sync> [JSON | -]`, `memory import`,
//! `memory serve`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const OVERVIEW: &str = "\
Every operation takes one JSON argument, inline or on standard input (`-`). Without an argument, standard \
input is read, and stands for `{}` when it is a terminal or empty. The answer is one JSON line on \
standard output.

Exit status: 0 success; 2 refusal, with {\"error\": {\"kind\", \"message\"}} on standard output (kind is \
one of conflict, operation-conflict, withdrawn, too-large, invalid-input, budget, deadline, not-found, \
unavailable, storage, corrupt); 1 unexpected failure, explained on standard error.

Examples:
  memory --db notes.sqlite get '{\"namespace\":{\"name\":\"notes\",\"version\":1,\"identity\":{\"user\":\"u1\"}},\"id\":\"tea\"}'
  memory sync '{}'
  MEMORY_DB=notes.sqlite memory serve";

const PUT_HELP: &str = "\
Creates a document (expected_revision null) or replaces its current revision. Retrying the same command \
with the same operation_id answers the first result with \"replayed\": true; the same operation_id with \
another command is refused (operation-conflict). A stale expected_revision is refused (conflict) and \
changes nothing.

Answer: {\"revision\", \"replayed\", \"document\"}

Example:
  memory put '{\"namespace\":{\"name\":\"notes\",\"version\":1,\"identity\":{\"user\":\"u1\"}},\"id\":\"tea\",\"operation_id\":\"op-1\",\"expected_revision\":null,\"locator\":\"chat:42\",\"scopes\":[\"assistant\"],\"content\":{\"text\":\"The user prefers green tea.\",\"attributions\":[{\"origin_id\":\"msg-7\",\"speaker\":\"user\",\"observers\":[\"assistant\"],\"locator\":\"chat:42#7\",\"activity_at\":null,\"interpretation\":\"stated\"}],\"metadata\":{},\"recorded_at\":1767225600000,\"extracted_at\":1767225600000}}'";

const WITHDRAW_HELP: &str = "\
Withdraws a document for good: it is no longer read or recalled and later puts of its id are refused \
(withdrawn). expected_revision must be the current revision.

Answer: {\"revision\", \"replayed\", \"document\"} (the tombstone)

Example:
  memory withdraw '{\"namespace\":{\"name\":\"notes\",\"version\":1,\"identity\":{\"user\":\"u1\"}},\"id\":\"tea\",\"operation_id\":\"op-2\",\"expected_revision\":\"r0123...\",\"reason\":\"user asked to forget\"}'";

const GET_HELP: &str = "\
Reads the current document of an id.

Answer: {\"document\"}, null when there is none (never written, or withdrawn)

Example:
  memory get '{\"namespace\":{\"name\":\"notes\",\"version\":1,\"identity\":{\"user\":\"u1\"}},\"id\":\"tea\"}'";

const RECALL_HELP: &str = "\
Recalls the memory relevant to a query, visible through one scope, under hard limits. mode is lexical \
(full-text), exact or hnsw (embedding search), or hybrid (both, fused; the default). The embedding modes \
first index every earlier write (as sync does) with the local model, found in $MEMORY_ASSETS_DIR or the \
assets/ folder that scripts/fetch-assets.sh fills; without it they are refused (unavailable) and lexical \
still answers.

Answer: {\"text\", \"passages\", \"outcomes\"}; each passage has source {id, locator, revision}, passage_id, \
content, citation (\"memory:N\") and score

Example:
  memory recall '{\"namespace\":{\"name\":\"notes\",\"version\":1,\"identity\":{\"user\":\"u1\"}},\"scope\":\"assistant\",\"query\":\"what does the user drink\",\"mode\":\"lexical\",\"limits\":{\"max_items\":5,\"max_bytes\":4000,\"max_tokens\":1000,\"timeout_ms\":2000}}'";

const SYNC_HELP: &str = "\
Returns once every write committed before the call is searchable in every recall mode: embeds the \
writes made since the last indexing (vectors are kept in the same database file, so nothing is embedded \
twice). Refused (unavailable) when there is something to index and the embedding model is missing.

Answer: {\"indexed\"}, the change-sequence position reached

Example:
  memory sync '{}'";

const IMPORT_HELP: &str = "\
Imports a JSON Lines file, one memory_put argument per line, written in batches. A refused line is \
reported on standard error as {\"line\": N, \"error\": {...}} and never stops or undoes the others; \
blank lines are skipped. A progress bar is drawn when standard error is a terminal.

Answer: {\"written\", \"replayed\", \"refused\"}; exit status 0 when no line was refused, 2 otherwise

Example:
  memory --db notes.sqlite import memories.jsonl";

const SERVE_HELP: &str = "\
Serves the Model Context Protocol on standard input and output with the tools memory_put, \
memory_withdraw, memory_get, memory_recall and memory_sync (same arguments and answers as the commands). \
A refusal is a tool result with isError true and the error JSON as structured content. A background \
indexer embeds every write shortly after it commits; memory_sync waits for it. Stops cleanly at the end \
of input.

Example (an MCP host's server entry):
  {\"command\": \"memory\", \"args\": [\"--db\", \"/home/me/notes.sqlite\", \"serve\"]}";

/// The `memory` command.
#[derive(Debug, Parser)]
#[command(
    name = "memory",
    version,
    about = "Agent memory: store, withdraw, read and recall memory documents, from the shell or over MCP.",
    after_help = OVERVIEW
)]
pub struct Cli {
    /// The SQLite database file (created when missing).
    #[arg(
        long,
        global = true,
        env = "MEMORY_DB",
        default_value = "memory.sqlite",
        value_name = "PATH"
    )]
    pub db: PathBuf,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or replace a memory document (memory_put).
    #[command(after_help = PUT_HELP)]
    Put(OperationArgs),
    /// Withdraw a memory document for good (memory_withdraw).
    #[command(after_help = WITHDRAW_HELP)]
    Withdraw(OperationArgs),
    /// Read the current memory document of an id (memory_get).
    #[command(after_help = GET_HELP)]
    Get(OperationArgs),
    /// Recall the memory relevant to a query under hard limits (memory_recall).
    #[command(after_help = RECALL_HELP)]
    Recall(OperationArgs),
    /// Wait until earlier writes are searchable (memory_sync).
    #[command(after_help = SYNC_HELP)]
    Sync(OperationArgs),
    /// Import memory_put arguments from a JSON Lines file.
    #[command(after_help = IMPORT_HELP)]
    Import(ImportArgs),
    /// Serve the operations as MCP tools on standard input and output.
    #[command(after_help = SERVE_HELP)]
    Serve,
}

/// The argument of the five operations.
#[derive(Debug, Args)]
pub struct OperationArgs {
    /// The operation's JSON argument; `-` reads it from standard input. Without it, standard input is
    /// read too, and stands for `{}` when it is a terminal or empty.
    #[arg(value_name = "JSON | -")]
    pub json: Option<String>,
}

/// The argument of `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The JSON Lines file: one memory_put argument per line.
    #[arg(value_name = "FILE.jsonl")]
    pub file: PathBuf,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
