//! The command line of `memory hook`: the event, the input format, the namespace and scope, the
//! speaker and the limits sized for a context window.

use clap::{Args, Subcommand, ValueEnum};

use crate::namespace_args::NamespaceArgs;
use crate::wire::RecallMode;

/// Default most passages in a hook's block.
pub const DEFAULT_MAX_ITEMS: u32 = 8;
/// Default most UTF-8 bytes of a hook's block (a few per cent of a large context window).
pub const DEFAULT_MAX_BYTES: u64 = 8_000;
/// Default most tokens of a hook's block.
pub const DEFAULT_MAX_TOKENS: u64 = 2_000;
/// Default deadline of the whole hook, in milliseconds: reading the input, the append, the recall
/// (a one-shot hook's model load included) and the answer.
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
/// Default most bytes of a transcript `turn-end` reads in one call.
pub const DEFAULT_MAX_TRANSCRIPT_BYTES: u64 = 8 * 1024 * 1024;

/// The `memory hook --help` text after the options: events, formats, namespace, server.
pub const HOOK_HELP: &str = "\
Reads one JSON object on standard input and writes context on standard output. A hook never blocks \
the turn: when it fails or runs out of time it prints nothing, exits 0, says why on standard error and \
records the error, which `memory status` shows by kind (hooks.errors). An answer with nothing recalled is \
logged too, as no-match, with the index's position against the store's head.

Events (a subcommand, or taken from the input: Claude Code's hook_event_name, the generic form's event):
  prompt         UserPromptSubmit: appends the prompt to the thread log as a user record (thread: the \
session id; speaker: --speaker), once even when the hook is retried, then recalls for it and prints the \
block. Nothing recalled is written to the thread.
  session-start  SessionStart: recalls for the session (--query, else the session's latest prompts, else the \
namespace's newest documents).
  turn-end       Stop, SubagentStop, PostToolUse: appends the assistant messages the transcript gained \
since the last call, each once; a truncated or replaced transcript is an error.

Formats:
  claude-code (default)  input {session_id, transcript_path, cwd, hook_event_name, prompt, source, ...}; \
output {\"hookSpecificOutput\": {\"hookEventName\", \"additionalContext\"}}, nothing when nothing was recalled.
  json  input {event?, session, prompt?, prompt_id?, query?, transcript_path?, messages?: [{id, text, \
occurred_at?}], speaker?}; output one line {\"event\", \"context\", \"passages\", \"answered_by\", \"appended\", \
\"already_recorded\"}.
Unknown input fields are ignored in both formats (hosts add fields).
With --context-budget TOKENS, the prompt event of the json format prints the assembled context instead \
of the memory block alone: {\"event\", \"messages\", \"memory\", \"view\", \"tokens\", \"budget\", \"fold\", \
\"appended\", \"already_recorded\"}, the answer of `memory context` (the thread's history within the budget, \
then the memory recalled for the prompt within what the history leaves). The claude-code format keeps \
printing the memory block alone: Claude Code keeps its own window.

Destination: --namespace / $MEMORY_NAMESPACE and --scope / $MEMORY_SCOPE; without a namespace, the \
user's own namespace ({\"name\": \"memory.user\", \"version\": 1, \"identity\": {\"user\": USER}}, USER \
from --user / $MEMORY_USER, else the OS user), the same for every session of that user; scope agent by \
default. The session's first append binds its thread there (the worker writes the session's memory \
there), and every recall reads from there, so a new session recalls what earlier ones said.

Server: when `memory serve --http` runs for the database (its discovery file exists and answers), the \
hook asks it (memory_thread_append, memory_recall) and loads no model; otherwise it answers one-shot.

Example (Claude Code settings.json):
  {\"hooks\": {\"UserPromptSubmit\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"memory --db ~/memory.sqlite hook prompt\"}]}]}}";

/// `memory hook`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct HookArgs {
    /// The event; without it, it is read from the input (`hook_event_name`, or `event` in the
    /// generic form).
    #[command(subcommand)]
    pub event: Option<HookEvent>,
    /// The input and output shapes: Claude Code's hook JSON, or the generic JSON form.
    #[arg(long, global = true, value_enum, default_value_t = HookFormat::ClaudeCode)]
    pub format: HookFormat,
    /// The namespace and scope recalled from.
    #[command(flatten)]
    pub target: NamespaceArgs,
    /// Whose memory this is when no namespace is given: the destination is that user's namespace
    /// `{"name": "memory.user", "version": 1, "identity": {"user": NAME}}`, shared by all of the
    /// user's sessions (default: the OS user, from $USER, $USERNAME or $LOGNAME).
    #[arg(long, global = true, env = "MEMORY_USER", value_name = "NAME")]
    pub user: Option<String>,
    /// Who speaks the prompts (default: the user whose memory it is, from --user, $MEMORY_USER or
    /// the OS user, as the Python package names its user's words).
    #[arg(long, global = true, env = "MEMORY_SPEAKER", value_name = "NAME")]
    pub speaker: Option<String>,
    /// The recall mode.
    #[arg(long, global = true, value_enum, default_value_t = HookMode::Hybrid)]
    pub mode: HookMode,
    /// Most passages in the block.
    #[arg(long, global = true, default_value_t = DEFAULT_MAX_ITEMS, value_name = "N")]
    pub max_items: u32,
    /// Most UTF-8 bytes of the block, header included.
    #[arg(long, global = true, default_value_t = DEFAULT_MAX_BYTES, value_name = "N")]
    pub max_bytes: u64,
    /// Most tokens of the block, header included (memory-core's approximate counter).
    #[arg(long, global = true, default_value_t = DEFAULT_MAX_TOKENS, value_name = "N")]
    pub max_tokens: u64,
    /// Deadline of the whole hook in milliseconds; past it the hook prints nothing and exits 0.
    #[arg(long, global = true, default_value_t = DEFAULT_TIMEOUT_MS, value_name = "MS")]
    pub timeout_ms: u64,
    /// session-start: what to recall for (default: the session's latest prompts, else the newest
    /// documents of the namespace).
    #[arg(long, global = true, value_name = "TEXT")]
    pub query: Option<String>,
    /// turn-end: most transcript bytes read per call (the rest is read by the next call).
    #[arg(long, global = true, default_value_t = DEFAULT_MAX_TRANSCRIPT_BYTES, value_name = "N")]
    pub max_transcript_bytes: u64,
    /// Answer one-shot even when a server is running for the database.
    #[arg(long, global = true)]
    pub no_server: bool,
    /// prompt, json format: print the assembled context of the turn (history and memory) within
    /// this many tokens instead of the memory block alone (see `memory context`).
    #[arg(long, global = true, value_name = "TOKENS")]
    pub context_budget: Option<u64>,
}

/// The hook events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum HookEvent {
    /// Before the model sees a prompt (Claude Code's UserPromptSubmit).
    Prompt,
    /// When a session starts or resumes (Claude Code's SessionStart).
    SessionStart,
    /// After a turn (Claude Code's Stop, SubagentStop or PostToolUse).
    TurnEnd,
}

impl HookEvent {
    /// The name used on the command line, in the generic form and in the error log.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prompt => "prompt",
            Self::SessionStart => "session-start",
            Self::TurnEnd => "turn-end",
        }
    }

    /// The event a name stands for: this command's names, or Claude Code's hook event names.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "prompt" | "UserPromptSubmit" => Some(Self::Prompt),
            "session-start" | "SessionStart" => Some(Self::SessionStart),
            "turn-end" | "Stop" | "SubagentStop" | "PostToolUse" => Some(Self::TurnEnd),
            _ => None,
        }
    }
}

/// The input and output shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HookFormat {
    /// Claude Code's hook JSON.
    ClaudeCode,
    /// The generic JSON form.
    Json,
}

/// The recall modes a hook may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HookMode {
    /// Full-text search only (no model).
    Lexical,
    /// Exact embedding search.
    Exact,
    /// HNSW embedding search.
    Hnsw,
    /// Lexical and embedding results fused (the default).
    Hybrid,
}

impl From<HookMode> for RecallMode {
    fn from(mode: HookMode) -> Self {
        match mode {
            HookMode::Lexical => Self::Lexical,
            HookMode::Exact => Self::Exact,
            HookMode::Hnsw => Self::Hnsw,
            HookMode::Hybrid => Self::Hybrid,
        }
    }
}
