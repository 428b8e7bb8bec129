//! The command line: `memory [--db PATH] <put|withdraw|get|recall|sync> [JSON | -]`, `memory import`,
//! `memory serve [--http ADDR]`, `memory list`, `memory doctor`.
//!
//! The database is a SQLite file (the default) or, given a `postgres://` or `postgresql://` URL, a
//! PostgreSQL database that several `memory serve` processes and workers on other hosts share; the rules
//! are the same as `remembering-worker`'s `--db` and `--schema`. The URL may carry a password, so it is
//! never printed: not in `--help` (the environment value of `MEMORY_DB` is hidden), not in `Debug`, not
//! in refusals.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use memory_core::activity::ToolOutputBound;

use crate::database::Database;
use crate::model_settings::{self, ModelSettings, ModelValues};
pub use crate::namespace_args::NamespaceArgs;
use crate::refusal::Refusal;
use crate::semantic::RerankModel;
use crate::settings::{self, Settings};

/// `--rerank-model`'s value parser: the one reading of the setting ([`RerankModel::parse`]).
fn parse_rerank_model(value: &str) -> Result<RerankModel, String> {
    RerankModel::parse(value).map_err(|refusal| refusal.message().to_owned())
}

const OVERVIEW: &str = "\
Every operation takes one JSON argument, inline or on standard input (`-`). Without an argument, standard \
input is read, and stands for `{}` when it is a terminal or empty. The answer is one JSON line on \
standard output.

Exit status: 0 success; 2 refusal, with {\"error\": {\"kind\", \"message\"}} on standard output (kind is \
one of conflict, operation-conflict, withdrawn, too-large, invalid-input, budget, deadline, not-found, \
unavailable, storage, corrupt); 1 unexpected failure, explained on standard error.

Database: --db (or $MEMORY_DB) takes a SQLite file path (the default backend, created when missing) or a \
PostgreSQL URL (postgres:// or postgresql://), shared by any number of `memory` processes on any number \
of hosts; each server keeps its embedding index in memory and follows the database's changes. --schema \
names the PostgreSQL schema holding the tables (created on first use; default: the connection's \
search_path); it is refused with a SQLite path. An unreachable server is refused as unavailable.

Examples:
  memory --db notes.sqlite get '{\"namespace\":{\"name\":\"notes\",\"version\":1,\"identity\":{\"user\":\"u1\"}},\"id\":\"tea\"}'
  memory sync '{}'
  MEMORY_DB=notes.sqlite memory serve
  memory --db postgres://memory:secret@db.internal:5432/memory --schema team_a serve";

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
(full-text), exact or hnsw (embedding search), hybrid (both, fused; the default), or recent (the \
namespace's newest documents, newest first; the query is not used). Hybrid recall reorders its \
revalidated passages by a learned rerank stage (the fused score, the speaker the query names, the \
passage's length); \"rerank\": false turns it off, and true with another mode is refused. The embedding modes \
first index every earlier write (as sync does) with the local model, found in $MEMORY_ASSETS_DIR, else \
assets/ beside the binary, else the user's data directory (`memory doctor` says which, and the \
scripts/fetch-assets.sh DIR command that fills one); without it they are refused (unavailable) and \
lexical still answers.

Answer: {\"text\", \"passages\", \"outcomes\"}; each passage has source {id, locator, revision}, passage_id, \
content, citation (\"memory:N\") and score

Example:
  memory recall '{\"namespace\":{\"name\":\"notes\",\"version\":1,\"identity\":{\"user\":\"u1\"}},\"scope\":\"assistant\",\"query\":\"what does the user drink\",\"mode\":\"lexical\",\"limits\":{\"max_items\":5,\"max_bytes\":4000,\"max_tokens\":1000,\"timeout_ms\":2000}}'";

const SYNC_HELP: &str = "\
Returns once every write committed before the call is searchable in every recall mode: embeds the \
writes made since the last indexing (vectors are kept in the same database, so a later command \
embeds only what is new). Refused (unavailable) when there is something to index and the embedding model is missing.

Answer: {\"indexed\", \"unindexed\"}: the change-sequence position reached, and how many documents the \
semantic index could not hold (too large, too many chunks, invalid; never reported as searchable, \
`memory status` shows them by reason)

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
Serves the Model Context Protocol with the tools memory_put, memory_withdraw, memory_get, memory_recall, \
memory_sync, memory_thread_append and memory_thread_forget (same arguments and answers as the commands), \
each with MCP annotations (read-only, destructive, idempotent hints) and an output schema. A refusal is \
a tool result with isError true and the error JSON as structured content. A background indexer embeds \
every write shortly after it commits; memory_sync waits for it.

With --namespace JSON and --scope NAME (or MEMORY_NAMESPACE and MEMORY_SCOPE) four simple tools are \
listed too, working in that namespace and scope: memory_remember {text, id?, expected_revision?, speaker?, metadata?} \
(stores text; the server fills the operation id, a digest of the call, so a retry replays; replacing \
an existing id takes its current revision as expected_revision, else conflict), memory_search {query, limit?} (hybrid recall, limit 5 by \
default, at most 50, with 8,000 bytes, 2,000 tokens and 10 s), memory_forget {id, reason} (withdraws the \
current revision) and memory_list {cursor?, limit?} (newest first, 20 by default, at most 100).

Grants: the host picks the tenant, never the model. Without --grants the server holds its own grant \
(on standard input and output, for the --token-file token, and for a loopback caller without a token): \
every operation and scope in --namespace and in the per-user namespace {\"name\": \"memory.user\", \
\"version\": 1, \"identity\": {\"user\": USER}} of --user (else the OS user) that the hook and the worker \
use. A call naming another namespace is refused (forbidden) and changes nothing. --allow-namespace RULE \
(repeatable; a grants file's namespace rule as JSON, e.g. '{\"name\":\"memory.user\",\"version\":1}' for \
every user) adds namespaces; --allow-any-namespace grants every namespace of the database, so any model \
that can call the tools reads and writes every tenant's memory. --grants FILE gives each token its own \
grant; on standard input and output --grant NAME picks one.

Transports: standard input and output by default (stops cleanly at the end of input). --http ADDR serves \
streamable HTTP at http://ADDR/mcp instead, with GET /healthz (200 once the store is open and the model \
loaded, 503 before) and GET /metrics (Prometheus/OpenMetrics text: recall latency by mode and outcome, \
writes by result, index lag, chunks, unindexed documents, HNSW state). Clients send `Authorization: \
Bearer TOKEN` to /mcp and /metrics; the token comes from --token-file PATH or MEMORY_TOKEN, and is \
required unless ADDR is a loopback address. While listening, the server writes a discovery file \
(`<database>.serve.json` beside a SQLite file, mode 0600) naming its URL, pid and token, and removes it \
on SIGINT or SIGTERM.

Examples (an MCP host's server entry):
  {\"command\": \"memory\", \"args\": [\"--db\", \"/home/me/notes.sqlite\", \"serve\"]}
  memory --db notes.sqlite serve --http 127.0.0.1:8181 --namespace '{\"name\":\"notes\",\"version\":1,\"identity\":{\"user\":\"me\"}}' --scope assistant";

const LIST_HELP: &str = "\
Lists the current documents of the namespace --namespace (or MEMORY_NAMESPACE) names, newest first (a \
replaced document moves to the front), never withdrawn or forgotten ones. The argument is memory_list's: \
{\"cursor\"?, \"limit\"?}; limit is 1 to 100 (default 20); pass the answer's next_cursor to get the \
next page (null on the last one).

Answer: {\"documents\", \"next_cursor\"}

Example:
  memory --db notes.sqlite list --namespace '{\"name\":\"notes\",\"version\":1,\"identity\":{\"user\":\"u1\"}}' '{\"limit\":50}'";

const DOCTOR_HELP: &str = "\
Checks where the embedding model's files are looked for, in order: $MEMORY_ASSETS_DIR, then assets/ \
beside the binary (<dir of memory>/assets), then the user's data directory \
($XDG_DATA_HOME/memory/assets, default ~/.local/share/memory/assets). Prints one JSON object: the \
folder used (the first complete one), each candidate with the files found and missing, and the \
command that fills a folder (scripts/fetch-assets.sh DIR). Exit status 0 when a complete folder is \
found, 2 otherwise. Loads no model and opens no database.

Example:
  memory doctor";

const THREAD_HELP: &str = "\
Conversation activity for the remembering worker: append records to a thread log, and forget a record \
(everything remembered from it stops being recalled at once; the worker's next pass withdraws it).";

const THREAD_APPEND_HELP: &str = "\
Appends one record to a thread (the log assigns its sequence); the remembering worker \
(remembering-worker --db DB) turns user statements into memory documents. record is {occurred_at?, \
speaker, observers?, body, opaque_cursor?}; body.kind is user_input {text}, assistant_message {text}, \
tool_call {call_id, name, arguments}, tool_result {call_id, output, is_error} or run_completed {outcome}. \
A tool_result output longer than --max-tool-output-bytes (default 51,200) is stored as {\"truncated\": \
true, \"original_bytes\", \"omitted_bytes\", \"head\", \"tail\"}. A compaction record is refused \
(invalid-input): memory_compact appends those.

Destination: the thread's first append binds it to a namespace and scope, where the worker writes its \
memory: the argument's namespace {name, version, identity}, else --namespace/MEMORY_NAMESPACE, else the \
per-user namespace {\"name\": \"memory.user\", \"version\": 1, \"identity\": {\"user\": USER}} of the \
argument's user, else --user/MEMORY_USER, else the OS user; scope: the argument's scope, else \
--scope/MEMORY_SCOPE, else agent. An append naming another destination than the thread's is refused \
(conflict) and writes nothing; `memory thread rebind` moves a thread.

Answer: {\"thread\", \"sequence\", \"digest\"} once the record is committed

Example:
  memory thread append '{\"thread\":\"chat-42\",\"record\":{\"occurred_at\":1767225600000,\"speaker\":\"ana\",\"body\":{\"kind\":\"user_input\",\"text\":\"I moved to Lisbon.\"}}}'";

const THREAD_REBIND_HELP: &str = "\
Binds a thread to another destination (--namespace, else --user's or the OS user's namespace; --scope), \
for threads appended before destinations existed (they were remembered into a namespace per thread) or \
moved on purpose. The worker then remembers the thread's records again, from its first, into the new \
destination; what was remembered before stays where it was (withdraw it there if it must go). A parked \
thread is unparked. Rebinding to the thread's current destination changes nothing.

Answer: {\"thread\", \"generation\"} (the binding's generation: each move adds one)

Example:
  memory thread rebind chat-42 --user ana";

const THREAD_FORGET_HELP: &str = "\
Forgets one record: its suppression and the cleanup of what was remembered from it are committed \
together before the answer, and from then on no recall (any mode) and no get shows what the record \
contributed; the worker's next pass withdraws those documents (later human corrections are kept). event \
is forget (the default), delete or revoke. reason is required and not stored. A sequence the thread does \
not have is refused (not-found); forgetting again answers the same cleanup.

Answer: {\"thread\", \"sequence\", \"event\", \"cleanup\"} (cleanup: the admitted cleanup intent's id)

Example:
  memory thread forget '{\"thread\":\"chat-42\",\"sequence\":1,\"reason\":\"the user asked to forget it\"}'";

const CONTEXT_HELP: &str = "\
Prints a thread's current turn as model input within --budget tokens, as one JSON object: messages \
(role and content as chat APIs take them: system instructions first, then the summary of compacted \
records in its frame, then the newest segments that fit, an assistant step with its tool_calls followed \
by one tool message per call; then the memory recalled for the turn as a last user message), memory \
{turn, query, passages, tokens, reused}, view {tokens, budget, over_budget, fits, dropped, elided}, \
tokens (all messages), fold {records, skipped} (records left out: undecodable, a result with no step). \
To fit the budget, old tool outputs are cut first (the newest 4 segments stay whole), then the oldest \
segments are dropped; never the current turn (from the newest prompt on), a system message or the \
summary, and never a tool call without its result. fits is false when segments had to be dropped: \
time to compact (the MCP tool memory_compact). The memory is recalled (hybrid) from the thread's \
destination for --query, else the current prompt, within the tokens the history leaves (it leaves a \
quarter of the budget, at most 2,000 tokens, for the memory); --no-memory skips it. Tokens are counted approximately unless --tokenizer names a tokenizer.json.

Example:
  memory context chat-42 --budget 30000 --query 'where does the user live'";

const STATUS_HELP: &str = "\
Prints the state of the store and its semantic index as one JSON object, loading no model: head (the \
latest change), indexed (the change the stored vectors reflect; behind = head - indexed), chunks \
(live, capacity from --max-chunks), unindexed documents by reason (documents the index cannot hold are \
never reported as searchable) and the persisted HNSW graph's state.

Example:
  memory --db notes.sqlite status";

const HISTORY_HELP: &str = "\
The argument is {\"namespace\", \"id\", \"limit\"?} (limit 1 to 1,000, default 100); the answer is \
{\"revisions\": [...]}, newest first, each {revision, predecessor, modified_at, content, locator, scopes, \
withdrawn}: content holds the text, its attributions (who said it) and metadata. memory_get answers the \
same with {\"revisions\": N}. The store keeps the words of each document's newest revisions, 100 unless \
MEMORY_MAX_REVISIONS says otherwise (read by every process that writes); an older revision stays listed \
with content null. A withdrawal (memory_withdraw, memory_forget, or the cleanup of a forgotten thread \
record) drops the words of every revision, from receipts, the lexical index and vectors too: only the \
tombstone is left (when, and withdrawn.reason).

Example:
  memory history '{\"namespace\":{\"name\":\"notes\",\"version\":1,\"identity\":{\"user\":\"u1\"}},\"id\":\"tea\"}'";

/// The `memory` command.
#[derive(Debug, Parser)]
#[command(
    name = "memory",
    version,
    about = "Agent memory: store, withdraw, read and recall memory documents, from the shell or over MCP.",
    after_help = OVERVIEW
)]
pub struct Cli {
    /// The database: a SQLite file path (created when missing), or a PostgreSQL URL
    /// (`postgres://user:password@host:port/database`).
    #[arg(
        long,
        global = true,
        env = "MEMORY_DB",
        hide_env_values = true,
        default_value = "memory.sqlite",
        value_name = "PATH | URL"
    )]
    pub db: PathBuf,
    /// PostgreSQL only: the schema holding the tables, created on first use (default: the
    /// connection's search_path). Refused with a SQLite path.
    #[arg(long, global = true, value_name = "NAME")]
    pub schema: Option<String>,
    /// Most chunks the semantic index holds (default 1,000,000; memory is taken as chunks arrive). A
    /// sync that would pass it is refused (too-large, naming max_chunks), and so is every command
    /// that needs the index of a store already holding more; `memory status` shows use.
    #[arg(long, global = true, env = settings::MAX_CHUNKS_ENV, value_name = "N")]
    pub max_chunks: Option<usize>,
    /// Hold the semantic index's vectors in memory as int8 codes (about a quarter of the memory of
    /// f32), rescoring each query's candidates with their stored f32 vectors, so scores stay exact.
    /// Off by default; for stores of hundreds of thousands of chunks and more.
    #[arg(
        long,
        global = true,
        env = settings::COMPACT_VECTORS_ENV,
        num_args = 0,
        default_value_t = false,
        default_missing_value = "true",
        value_parser = settings::parse_switch
    )]
    pub compact_vectors: bool,
    /// HNSW search width (ef_search, 1 to 10,000), fixed at every index size. Without it the
    /// width follows the index: 128 up to 100,000 chunks, wider past that up to 1,280 (so a large index keeps
    /// finding its true nearest chunks). `memory status` shows the width in effect; a persisted
    /// graph serves any width.
    #[arg(long, global = true, env = settings::HNSW_EF_SEARCH_ENV, value_name = "N")]
    pub hnsw_ef_search: Option<usize>,
    /// Most bytes of a tool result's output a thread append stores (default 51,200, at least
    /// 1,024): a larger output (its text, or its compact JSON) is stored as {"truncated": true,
    /// "original_bytes", "omitted_bytes", "head", "tail"}, its first and last half of BYTES. Applies to
    /// `thread append`, `serve`'s memory_thread_append and `hook`'s one-shot appends.
    #[arg(
        long,
        global = true,
        env = settings::MAX_TOOL_OUTPUT_BYTES_ENV,
        value_name = "BYTES"
    )]
    pub max_tool_output_bytes: Option<usize>,
    /// Load hybrid recall's rerank model (the cross-encoder ms-marco-MiniLM-L-12-v2, int8, which
    /// scripts/fetch-assets.sh fetches) with the embedding model: `on` or `off`. With it the rerank
    /// stage reads each recalled passage with the question; without it the stage ranks by the
    /// signals recall already has. Default `on`, except for `memory hook`, whose one-shot path
    /// defaults to `off` (loading the model would add about a quarter of a second to every prompt; a
    /// served hook ranks as its server does). Missing or altered model files are refused
    /// (unavailable, naming the fetch command) by a hybrid recall that reranks.
    #[arg(
        long,
        global = true,
        env = settings::RERANK_MODEL_ENV,
        value_name = "on|off",
        value_parser = parse_rerank_model
    )]
    pub rerank_model: Option<RerankModel>,
    /// The base URL of an OpenAI-compatible chat-completions endpoint (plain HTTP), e.g.
    /// `http://127.0.0.1:8080/v1`, whose model writes a compaction's summary when memory_compact is
    /// called with `summarize: true` (and `memory context --compact`). Needs --model.
    #[arg(long, global = true, env = model_settings::MODEL_URL_ENV, value_name = "URL")]
    pub model_url: Option<String>,
    /// The model's name at --model-url.
    #[arg(long, global = true, env = model_settings::MODEL_ENV, value_name = "NAME")]
    pub model: Option<String>,
    /// A file holding the endpoint's key (sent as a bearer token; never logged or shown).
    #[arg(long, global = true, env = model_settings::MODEL_KEY_FILE_ENV, value_name = "PATH")]
    pub model_key_file: Option<PathBuf>,
    /// The limit of one attempt of one model call, in milliseconds (default 120000).
    #[arg(long, global = true, env = model_settings::MODEL_TIMEOUT_ENV, value_name = "MS")]
    pub model_timeout_ms: Option<u64>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The settings its flags (or, without them, their variables) give, by the one rule every door
    /// uses ([`Settings::new`]).
    pub fn settings(&self) -> Result<Settings, Refusal> {
        let rerank_model = self.rerank_model.unwrap_or(match self.command {
            Command::Hook(_) => RerankModel::Off,
            _ => RerankModel::On,
        });
        Ok(Settings::new(
            self.max_chunks,
            self.compact_vectors,
            self.hnsw_ef_search,
            self.max_tool_output_bytes,
        )?
        .with_rerank_model(rerank_model))
    }

    /// The model endpoint its flags (or their variables) name, checked by the one rule every door
    /// uses ([`ModelSettings::new`]); `None` without one.
    pub fn model(&self) -> Result<Option<ModelSettings>, Refusal> {
        ModelSettings::new(ModelValues {
            url: self.model_url.clone(),
            model: self.model.clone(),
            key_file: self.model_key_file.clone(),
            fallback: None,
            timeout_ms: self.model_timeout_ms,
        })
    }

    /// The bound `--max-tool-output-bytes` sets on thread appends (the default without it); refused
    /// as `invalid-input` below [`memory_core::activity::thread::MIN_MAX_TOOL_OUTPUT_BYTES`].
    pub fn tool_output_bound(&self) -> Result<ToolOutputBound, Refusal> {
        self.settings().map(|settings| settings.tool_output)
    }

    /// The database `--db` and `--schema` select; see [`Database::select`].
    pub fn database(&self) -> Result<Database, Refusal> {
        Database::select(&self.db, self.schema.as_deref())
    }
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
    /// Read a document's revisions, newest first, with each one's text, author and time.
    #[command(after_help = HISTORY_HELP)]
    History(OperationArgs),
    /// Wait until earlier writes are searchable (memory_sync).
    #[command(after_help = SYNC_HELP)]
    Sync(OperationArgs),
    /// Import memory_put arguments from a JSON Lines file.
    #[command(after_help = IMPORT_HELP)]
    Import(ImportArgs),
    /// Serve the operations as MCP tools on standard input and output, or over streamable HTTP
    /// (`--http ADDR`).
    #[command(after_help = SERVE_HELP)]
    Serve(ServeArgs),
    /// List the documents of the default namespace, newest first, a page at a time (memory_list).
    #[command(after_help = LIST_HELP)]
    List(ListArgs),
    /// Say which model assets are found, which are missing, and the command that fetches them.
    #[command(after_help = DOCTOR_HELP)]
    Doctor,
    /// Show the store's and the semantic index's state: positions, chunks and capacity, unindexed
    /// documents, the HNSW graph.
    #[command(after_help = STATUS_HELP)]
    Status,
    /// Append conversation activity to a thread, or forget a record (memory_thread_append,
    /// memory_thread_forget).
    #[command(subcommand, after_help = THREAD_HELP)]
    Thread(ThreadCommand),
    /// Print a thread's current turn as model input within a token budget: the history view's
    /// messages and the memory recalled for the turn (memory_context).
    #[command(after_help = CONTEXT_HELP)]
    Context(ContextArgs),
    /// Agent-host hooks: recall before a prompt or at a session's start, record a finished turn
    /// (Claude Code's UserPromptSubmit, SessionStart and Stop, or the generic JSON form). Never blocks
    /// the turn: a failure prints nothing, exits 0 and says why on standard error.
    #[command(after_help = crate::hook::args::HOOK_HELP)]
    Hook(crate::hook::args::HookArgs),
}

/// Where a thread's memory goes, from the command line (see [`crate::destination`]).
#[derive(Debug, Clone, Args)]
pub struct DestinationArgs {
    /// The namespace and scope.
    #[command(flatten)]
    pub target: NamespaceArgs,
    /// The user whose per-user namespace is the destination when no namespace is given (default:
    /// the OS user).
    #[arg(long, env = "MEMORY_USER", value_name = "NAME")]
    pub user: Option<String>,
}

impl DestinationArgs {
    /// The defaults these flags give.
    pub fn defaults(&self) -> Result<crate::destination::DestinationDefaults, Refusal> {
        Ok(crate::destination::DestinationDefaults {
            namespace: self.target.namespace()?,
            scope: self.target.scope()?,
            user: self.user.clone(),
        })
    }
}

/// The arguments of `context`.
#[derive(Debug, Args)]
pub struct ContextArgs {
    /// The thread.
    pub thread: String,
    /// Tokens the whole context (history and memory) may take; with --remaining, the budget to
    /// measure against.
    #[arg(
        long,
        value_name = "TOKENS",
        required_unless_present_any = [
            "compact", "new_context", "remaining", "read_notes", "write_notes", "history", "search"
        ]
    )]
    pub budget: Option<u64>,
    /// Never roll the window over by itself: drop the current turn's oldest settled steps from the
    /// view instead (memory_context with rollover: false).
    #[arg(long)]
    pub no_rollover: bool,
    /// Start a new window (memory_new_context): prints the rollover appended, or rolled_over false
    /// when there is nothing to cover.
    #[arg(long, conflicts_with_all = ["budget", "query", "no_memory", "compact", "remaining", "read_notes", "write_notes", "history", "search"])]
    pub new_context: bool,
    /// With --new-context: what the next window should know (at most 20,000 characters).
    #[arg(long, value_name = "TEXT", requires = "new_context")]
    pub handoff: Option<String>,
    /// Print what is left of the window (memory_context_remaining): under --budget, else
    /// --context-budget.
    #[arg(long, conflicts_with_all = ["query", "no_memory", "compact", "read_notes", "write_notes", "history", "search"])]
    pub remaining: bool,
    /// The budget --remaining measures against when --budget is not given.
    #[arg(long, env = memory_service::settings::CONTEXT_BUDGET_ENV, value_name = "TOKENS")]
    pub context_budget: Option<u64>,
    /// The model's context capacity --remaining reports.
    #[arg(long, env = memory_service::settings::CONTEXT_CAPACITY_ENV, value_name = "TOKENS")]
    pub context_capacity: Option<u64>,
    /// Print the thread's working notes (memory_read_notes).
    #[arg(long, conflicts_with_all = ["budget", "query", "no_memory", "compact", "write_notes", "history", "search"])]
    pub read_notes: bool,
    /// Replace the thread's working notes with TEXT (memory_write_notes), expecting
    /// --expected-revision (none: the first notes).
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["budget", "query", "no_memory", "compact", "history", "search"])]
    pub write_notes: Option<String>,
    /// With --write-notes: the revision --read-notes printed.
    #[arg(long, value_name = "REVISION", requires = "write_notes")]
    pub expected_revision: Option<String>,
    /// The id of each thread's notes document (default `notes/{thread}`).
    #[arg(long, env = memory_service::settings::NOTES_ID_ENV, value_name = "ID")]
    pub notes_id: Option<String>,
    /// Print a page of the thread's records (memory_history_read), after --after or before --before.
    #[arg(long, conflicts_with_all = ["budget", "query", "no_memory", "compact", "search"])]
    pub history: bool,
    /// Print the thread's records containing TEXT (memory_history_search).
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["budget", "query", "no_memory", "compact"])]
    pub search: Option<String>,
    /// With --history or --search: records after this sequence, oldest first.
    #[arg(long, value_name = "SEQUENCE", conflicts_with = "before")]
    pub after: Option<u64>,
    /// With --history or --search: records before this record, newest first.
    #[arg(long, value_name = "SEQUENCE")]
    pub before: Option<u64>,
    /// With --history or --search: most records.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Compact the thread instead, the model of --model-url writing the summary (memory_compact with
    /// summarize: true): prints the compaction record appended. Needs --measured-input-tokens.
    #[arg(long, requires = "measured_input_tokens", conflicts_with_all = ["budget", "query", "no_memory", "tokenizer"])]
    pub compact: bool,
    /// With --compact: the input tokens the provider reported for the last model call.
    #[arg(long, value_name = "TOKENS", requires = "compact")]
    pub measured_input_tokens: Option<u64>,
    /// With --compact: tokens of the newest segments kept verbatim (default 8,000).
    #[arg(long, value_name = "TOKENS", requires = "compact")]
    pub keep_tokens: Option<u64>,
    /// What to recall memory for (default: the current prompt).
    #[arg(long, value_name = "TEXT")]
    pub query: Option<String>,
    /// Assemble the history alone, recalling no memory.
    #[arg(long)]
    pub no_memory: bool,
    /// Count tokens with this tokenizer.json (for example the model's) instead of the approximate
    /// counter.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
    /// Where an unbound thread's memory is recalled from (a bound thread's comes from its binding).
    #[command(flatten)]
    pub destination: DestinationArgs,
}

impl ContextArgs {
    /// The context tool call these flags ask for, other than assembling the turn or compacting:
    /// its operation and its JSON arguments, as an MCP host would send them.
    pub fn tool_call(
        &self,
    ) -> Option<(memory_service::context::ContextOperation, serde_json::Value)> {
        use memory_service::context::ContextOperation;
        let mut arguments = serde_json::json!({"thread": self.thread});
        let mut set = |name: &str, value: serde_json::Value| {
            if !value.is_null() {
                arguments[name] = value;
            }
        };
        let operation = if self.new_context {
            set("handoff", serde_json::json!(self.handoff));
            ContextOperation::NewContext
        } else if self.remaining {
            set("budget", serde_json::json!(self.budget));
            ContextOperation::Remaining
        } else if self.read_notes {
            ContextOperation::ReadNotes
        } else if let Some(text) = &self.write_notes {
            set("text", serde_json::json!(text));
            arguments["expected_revision"] = serde_json::json!(self.expected_revision);
            ContextOperation::WriteNotes
        } else if self.history || self.search.is_some() {
            set("after", serde_json::json!(self.after));
            set("before", serde_json::json!(self.before));
            set("limit", serde_json::json!(self.limit));
            match &self.search {
                Some(text) => {
                    set("text", serde_json::json!(text));
                    ContextOperation::HistorySearch
                }
                None => ContextOperation::HistoryRead,
            }
        } else {
            return None;
        };
        Some((operation, arguments))
    }
}

/// The `thread` subcommands.
#[derive(Debug, Subcommand)]
pub enum ThreadCommand {
    /// Append one record to a thread log (memory_thread_append).
    #[command(after_help = THREAD_APPEND_HELP)]
    Append {
        /// The operation's JSON argument.
        #[command(flatten)]
        argument: OperationArgs,
        /// The destination when the argument names none.
        #[command(flatten)]
        destination: DestinationArgs,
    },
    /// Bind a thread to another destination; the worker remembers it again there.
    #[command(after_help = THREAD_REBIND_HELP)]
    Rebind {
        /// The thread.
        thread: String,
        /// The new destination.
        #[command(flatten)]
        destination: DestinationArgs,
    },
    /// Forget one record: effective for recall at once, cleaned up by the worker
    /// (memory_thread_forget).
    #[command(after_help = THREAD_FORGET_HELP)]
    Forget(OperationArgs),
}

/// The argument of the five operations.
#[derive(Debug, Args)]
pub struct OperationArgs {
    /// The operation's JSON argument; `-` reads it from standard input. Without it, standard input is
    /// read too, and stands for `{}` when it is a terminal or empty.
    #[arg(value_name = "JSON | -")]
    pub json: Option<String>,
}

/// The arguments of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The budget memory_context_remaining measures against when a call names none (tokens).
    #[arg(long, env = memory_service::settings::CONTEXT_BUDGET_ENV, value_name = "TOKENS")]
    pub context_budget: Option<u64>,
    /// The model's context capacity memory_context_remaining reports (tokens; null without it).
    #[arg(long, env = memory_service::settings::CONTEXT_CAPACITY_ENV, value_name = "TOKENS")]
    pub context_capacity: Option<u64>,
    /// The id of each thread's notes document in the thread's destination (default
    /// `notes/{thread}`; `{thread}` is the thread's id, and an id without it is one notes document
    /// shared by every thread of a destination).
    #[arg(long, env = memory_service::settings::NOTES_ID_ENV, value_name = "ID")]
    pub notes_id: Option<String>,
    /// Serve MCP over streamable HTTP at ADDR (`IP:PORT`, e.g. `127.0.0.1:8181`; port 0 picks a free
    /// one) on the path `/mcp`, with `/healthz` and `/metrics` beside it, instead of standard input and
    /// output.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// The bearer token HTTP clients must send, read from PATH (surrounding whitespace trimmed; the
    /// environment variable MEMORY_TOKEN holds it otherwise). Required unless ADDR is a loopback
    /// address.
    #[arg(long, value_name = "PATH", requires = "http")]
    pub token_file: Option<PathBuf>,
    /// Per-tenant grants (TOML, or JSON when the name ends in .json): each token (by its SHA-256)
    /// may use only its namespaces, scopes and operations, and brings the simple tools' defaults.
    /// Over HTTP it is re-read on SIGHUP; a faulty file refuses to start (a faulty re-read keeps the
    /// old grants). On standard input and output, --grant NAME picks the grant. docs/grants.md shows an
    /// example.
    #[arg(long, value_name = "FILE")]
    pub grants: Option<PathBuf>,
    /// The grant of --grants a server on standard input and output holds (stdio has no bearer
    /// token); an unknown name refuses to start.
    #[arg(
        long,
        value_name = "NAME",
        requires = "grants",
        conflicts_with_all = ["http", "allow_namespace", "allow_any_namespace"]
    )]
    pub grant: Option<String>,
    /// Adds the namespaces RULE admits to the server's own grant, which otherwise holds only
    /// --namespace and the per-user namespace of --user (else the OS user). RULE is a grants file's
    /// namespace rule as JSON: {"name", "version"?, "identity"? | "fields"?}, e.g.
    /// '{"name":"memory.user","version":1}' for every user's namespace. Repeatable.
    #[arg(long, value_name = "RULE", conflicts_with = "allow_any_namespace")]
    pub allow_namespace: Vec<String>,
    /// Grants the server's own grant every namespace of the database (the behaviour before grants):
    /// any model that can call the precise tools then reads and writes every tenant's memory.
    #[arg(long)]
    pub allow_any_namespace: bool,
    /// The user whose per-user namespace the server's grant holds, and where a thread append that
    /// names no destination goes when --namespace is not given (default: the OS user).
    #[arg(long, env = "MEMORY_USER", value_name = "NAME")]
    pub user: Option<String>,
    /// The token written into the discovery file for `memory hook` on this machine, read from PATH;
    /// it must hold a grant of the --grants file (its grant then bounds the hook's calls). Without
    /// it the discovery file names the --token-file token, if any.
    #[arg(long, value_name = "PATH", requires_all = ["grants", "http"])]
    pub hook_token_file: Option<PathBuf>,
    /// The bounds of a shared HTTP server.
    #[command(flatten)]
    pub limits: crate::http::Limits,
    /// The namespace and scope of the simple tools (memory_remember, memory_search, memory_forget,
    /// memory_list), listed only when both are set (or when --grants is given).
    #[command(flatten)]
    pub defaults: NamespaceArgs,
}

/// The arguments of `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The namespace listed (required; `--scope` is not used).
    #[command(flatten)]
    pub defaults: NamespaceArgs,
    /// `{"cursor"?, "limit"?}` as memory_list takes it; `-` reads it from standard input. Without it,
    /// the first page of the default size.
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

    #[test]
    fn a_tool_output_bound_below_the_floor_is_invalid_input() {
        let parse = |bytes: &str| {
            Cli::try_parse_from(["memory", "--max-tool-output-bytes", bytes, "status"])
                .expect("parses")
                .tool_output_bound()
        };
        let refusal = parse("1023").expect_err("below the floor");
        assert_eq!(refusal.kind(), memory_core::ErrorKind::InvalidInput);
        assert!(
            refusal.message().contains("--max-tool-output-bytes"),
            "{refusal:?}"
        );
        assert_eq!(parse("1024").map(ToolOutputBound::get).ok(), Some(1_024));
        let default = Cli::try_parse_from(["memory", "status"]).expect("parses");
        assert_eq!(
            default.tool_output_bound().ok(),
            Some(ToolOutputBound::default())
        );
    }

    #[test]
    fn help_never_shows_the_database_url() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("postgres://"), "the help explains URLs");
        assert!(!help.contains("[env: MEMORY_DB="), "{help}");
    }
}
