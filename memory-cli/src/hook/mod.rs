//! `memory hook`: the memory of agent runs wired to the turn lifecycle of agent hosts.
//!
//! A host runs the hook as a command around each turn; it reads one JSON object on standard input and
//! writes context on standard output ([`args::HOOK_HELP`] is the reference, docs/hooks.md walks through
//! Claude Code's settings):
//!
//! - `prompt` (Claude Code's `UserPromptSubmit`): appends the prompt to the thread log as a user record
//!   (thread: the session id; speaker: `--speaker`, else the OS user), then recalls for it under the
//!   limits and prints the block as `additionalContext`. Nothing recalled is written to the thread.
//! - `session-start` (`SessionStart`): recalls for `--query` (or the generic input's `query`), else for
//!   the session's latest prompts (a resumed session); a fresh session with neither recalls the
//!   namespace's newest documents (`memory_recall`'s `recent` mode: listed newest first, revalidated,
//!   under the same limits). The memory model has no "pinned" documents; a host that wants some recalled
//!   at every start names them in `--query`.
//! - `turn-end` (`Stop`, `SubagentStop`, `PostToolUse`): appends the assistant messages the transcript
//!   gained since the last call ([`transcript`]), or, in the generic form, the `messages` given; prints
//!   nothing in Claude Code's form.
//!
//! Generic form (`--format json`). Input: `{"event"?, "session", "prompt"?, "prompt_id"?, "query"?,
//! "transcript_path"?, "messages"?: [{"id", "text", "occurred_at"?}], "speaker"?}` (unknown fields are
//! ignored; `event` is needed only without a subcommand). Output: one line `{"event", "context",
//! "passages", "answered_by", "appended", "already_recorded"}`: the block (empty when nothing was
//! recalled), the recalled passages and the index that answered as `memory_recall` answers them
//! (`answered_by` is `null` for `turn-end` and the lexical and recent modes), the sequences appended,
//! and how many records were found already appended (a retry).
//!
//! Decisions:
//! - **Never blocks the turn.** Every failure (bad input, a broken database, a missing model, the
//!   deadline `--timeout-ms`, which bounds the whole hook) prints nothing on standard output, exits 0,
//!   says why on standard error and is logged in the hook state folder ([`state`]), where
//!   `memory status` reads the last errors by kind.
//! - **No empty answer is silent.** A recall that cited nothing is no failure (the json form still
//!   prints its line, and standard error stays quiet), but it is logged as `no-match`, with whether it
//!   was served or one-shot, the index that answered and, for the semantic modes, the position the
//!   index held against the store's head, so an empty block can always be told apart from a
//!   lagging index (issue 42: the served hook answered nothing right after a worker pass, because
//!   the server recalled from an index still behind what the worker wrote; the server's recall now
//!   waits for its index, see [`crate::semantic::SemanticBackend::index_for_query`]).
//! - **A lost session is said.** A server that no longer knows the hook's MCP session (it restarted
//!   between two requests of one hook) answers 404; the hook opens a new session and asks once more,
//!   and a second 404 is logged as `expired-session`, never as a generic server failure.
//! - **Idempotent appends without a new store API.** The thread log has no idempotent append, so each
//!   record the hook appends carries its hook identity in `opaque_cursor` (kept by the log, outside the
//!   digest): `memory-hook/v1 prompt <sha256(session, prompt, transcript length)>` (or of the host's
//!   `prompt_id`), `memory-hook/v1 message <sha256(session, id)>`, and for transcript messages the
//!   [`transcript::TranscriptCursor`]. Before appending, the hook looks for the identity in the thread's
//!   tail ([`PROMPT_LOOKBACK`] records, [`TRANSCRIPT_LOOKBACK`] for the transcript offset), holding the
//!   session's lock ([`state::SessionLock`]) so a retry racing the original cannot append too. A retry
//!   arriving after more records than the lookback is taken for a new prompt.
//! - **The transcript offset lives in the thread log**, in the cursor of the last message appended from
//!   it: committed with the message, so it can never run ahead of or behind what was appended.
//! - **The server path** ([`backend`]): appends and recalls go to a running `memory serve --http`
//!   found through its discovery file (`memory_thread_append`, `memory_recall`, the server's own
//!   recall), so the hook loads no model; the thread's tail is read from the database directly (no
//!   model needed, no tool for it). A stale discovery file falls back to one-shot, said on standard
//!   error; so does a server that refuses the hook's namespace as `forbidden` (another user's server,
//!   whose grant holds only its own user's namespace), which used to leave the hook answering nothing,
//!   and one that does not open a session within a fifth of the deadline (a stopped or stuck server:
//!   the hook used to wait out its whole deadline and answer nothing).
//! - The block is the recall's rendered text under a one-line header; the header's bytes and tokens
//!   are taken from `--max-bytes` and `--max-tokens` first, so the whole block fits them.

pub mod args;
pub mod backend;
pub mod input;
/// The MCP client of a running server (memory-client's, shared with the eval's load generator).
pub use memory_client::server;
pub mod state;
pub mod transcript;

use std::io::{Read as _, Write as _};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use memory_core::activity::{NewRecord, RecordBody, ThreadId};
use memory_core::{
    ApproximateTokenCounter, Clock as _, DynamicNamespace, ErrorKind, SystemClock,
    TokenCounter as _,
};
use serde_json::{Value, json};

use crate::database::Database;
use crate::destination::{DestinationDefaults, DestinationRequest, Resolved};
use crate::hook::args::{HookArgs, HookEvent, HookFormat};
use crate::hook::backend::{Backend, OpenedLog};
use crate::hook::input::{HookInput, MAX_HOOK_INPUT_BYTES, hex_digest};
use crate::hook::state::{HookErrorLine, SessionLock};
use crate::refusal::Refusal;
use crate::settings::Settings;
use crate::wire::{AnsweredBy, RecallArguments, RecallMode, WireRecallLimits};

/// Thread records looked back through for a retried prompt's identity.
pub const PROMPT_LOOKBACK: u64 = 256;
/// Thread records looked back through for the transcript offset and generic message ids.
pub const TRANSCRIPT_LOOKBACK: u64 = 10_000;
/// Latest prompts `session-start` recalls for when no query is given.
pub const SESSION_START_PROMPTS: usize = 3;
/// The line before the recalled block: the assembled context's ([`crate::context::MEMORY_HEADER`]).
pub const HEADER: &str = crate::context::MEMORY_HEADER;

/// How long a hook waits for a running server to open a session: a fifth of `--timeout-ms` (a
/// second at the default); the rest is left for answering one-shot if it does not (a healthy server
/// opens one in milliseconds). Not capped below that: a caller who gives the hook a longer deadline
/// (a busy machine) gives a busy server the same share of it.
fn server_patience(timeout_ms: u64) -> Duration {
    Duration::from_millis(timeout_ms / 5)
}

/// Why a hook did nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The kind logged and shown by `memory status`.
    pub kind: String,
    /// Why.
    pub message: String,
}

impl Failure {
    pub(crate) fn new(kind: &str, message: impl Into<String>) -> Self {
        Self {
            kind: kind.to_owned(),
            message: message.into(),
        }
    }
}

impl From<Refusal> for Failure {
    fn from(refusal: Refusal) -> Self {
        Self::new(refusal.kind().as_str(), refusal.message())
    }
}

/// Runs one hook. Always exits 0: the answer is on standard output, or nothing and the reason on
/// standard error (and in the error log).
/// One-shot, it runs with `settings` (its appends bound tool outputs at `--max-tool-output-bytes`).
pub fn run(database: &Database, settings: Settings, args: HookArgs) -> ExitCode {
    let event: Arc<OnceLock<HookEvent>> = Arc::new(OnceLock::new());
    let outcome = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let budget = Duration::from_millis(args.timeout_ms);
            let answered = runtime.block_on(async {
                let hooked = hook(database, settings, &args, Arc::clone(&event));
                tokio::time::timeout(budget, hooked).await
            });
            // A store call stuck past the deadline may still hold a blocking thread: do not wait.
            runtime.shutdown_background();
            answered.unwrap_or_else(|_| {
                Err(Failure::new(
                    ErrorKind::Deadline.as_str(),
                    format!(
                        "the hook did not finish within --timeout-ms {}",
                        args.timeout_ms
                    ),
                ))
            })
        }
        Err(error) => Err(Failure::new(
            ErrorKind::Storage.as_str(),
            format!("could not start the async runtime: {error}"),
        )),
    };
    // An answer with nothing recalled is no failure, but it is said and logged like one, so an
    // empty block is never silent (issue 42): why (no match, with the index's position against the
    // store's head) is in the error log `memory status` reads.
    let outcome = outcome.map(|answered| {
        if let Some(empty) = answered.empty {
            record(database, event.get().copied(), empty);
        }
        answered.output
    });
    let printed = match outcome {
        Ok(Some(text)) => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.write_all(b"\n"))
                .and_then(|()| stdout.flush())
                .map_err(|error| {
                    Failure::new("output", format!("could not write the answer: {error}"))
                })
        }
        Ok(None) => Ok(()),
        Err(failure) => Err(failure),
    };
    if let Err(failure) = printed {
        log_failure(database, event.get().copied(), failure);
    }
    ExitCode::SUCCESS
}

/// A hook refused before it could run: its command line (`memory hook --mode bogus`), a setting
/// (`--max-chunks 0`, `MEMORY_HNSW_EF_SEARCH=0`, a model URL without a model) or the database. Like
/// every hook failure it prints nothing on standard output and exits 0, saying why on standard
/// error and, when the database is known, in the error log `memory status` reads: a host reads a
/// prompt hook's exit 2 as "block this prompt", so a mistyped setting would stop every prompt.
pub fn refused(
    database: Option<&Database>,
    event: Option<HookEvent>,
    refusal: &Refusal,
) -> ExitCode {
    let failure = Failure::new(refusal.kind().as_str(), refusal.message());
    match database {
        Some(database) => log_failure(database, event, failure),
        None => say(event, &failure),
    }
    ExitCode::SUCCESS
}

/// Says why on standard error and records it in the error log `memory status` reads.
fn log_failure(database: &Database, event: Option<HookEvent>, failure: Failure) {
    say(event, &failure);
    record(database, event, failure);
}

/// Says why a hook did nothing on standard error.
fn say(event: Option<HookEvent>, failure: &Failure) {
    let hook = event.map_or("input", HookEvent::as_str);
    eprintln!("memory hook {hook}: {} ({})", failure.message, failure.kind);
}

/// Records `failure` in the error log `memory status` reads.
fn record(database: &Database, event: Option<HookEvent>, failure: Failure) {
    let hook = event.map_or("input", HookEvent::as_str);
    let line = HookErrorLine {
        at: SystemClock.now_millis(),
        hook: hook.to_owned(),
        kind: failure.kind,
        message: failure.message,
    };
    if let Err(error) = state::record_error(&state::dir_for(database), line) {
        eprintln!("memory hook: the error could not be logged for `memory status`: {error}");
    }
}

/// The kind logged for a recall that answered but cited nothing.
pub const NO_MATCH_KIND: &str = "no-match";

pub use memory_client::server::EXPIRED_SESSION_KIND;

/// What a hook printed, and why nothing was recalled when nothing was.
#[derive(Debug, Default)]
struct Answered {
    output: Option<String>,
    empty: Option<Failure>,
}

impl Answered {
    fn printing(output: Option<String>) -> Self {
        Self {
            output,
            empty: None,
        }
    }
}

/// What one hook answers on standard output, if anything.
async fn hook(
    database: &Database,
    settings: Settings,
    args: &HookArgs,
    event_seen: Arc<OnceLock<HookEvent>>,
) -> Result<Answered, Failure> {
    let bytes = read_stdin().await?;
    let input = HookInput::decode(&bytes, args.format, args.event)?;
    let _ = event_seen.set(input.event);
    let thread = ThreadId::new(input.session.clone()).map_err(|error| {
        Failure::new(
            ErrorKind::InvalidInput.as_str(),
            format!("session: {error}"),
        )
    })?;
    // One destination for the whole hook: what it appends binds the thread there, and what it
    // recalls comes from there, so the next session of the same user recalls this one's memory.
    let defaults = DestinationDefaults {
        namespace: args.target.namespace()?,
        scope: args.target.scope()?,
        user: args.user.clone(),
    };
    let resolved = defaults.resolve(&DestinationRequest::default())?;
    let namespace = resolved.namespace.clone();
    let scope = resolved.scope.as_str().to_owned();
    let limits = Limits::new(args)?;
    let mut backend = Backend::find(
        database,
        settings,
        args.no_server,
        server_patience(args.timeout_ms),
    )
    .await;
    let answer = match input.event {
        HookEvent::Prompt => {
            let appended =
                prompt_append(database, &mut backend, &thread, &resolved, &input, args).await?;
            if let (Some(budget), HookFormat::Json) = (args.context_budget, args.format) {
                let assembled = backend
                    .context(&thread, budget, args.query.clone(), &defaults)
                    .await?;
                backend.close().await;
                return Ok(Answered::printing(Some(render_assembled(
                    assembled, &appended,
                ))));
            }
            let prompt = input.prompt.clone().unwrap_or_default();
            let recalled = recall(
                &mut backend,
                &namespace,
                &scope,
                &prompt,
                args.mode.into(),
                &limits,
                args,
            )
            .await?;
            Answer { recalled, appended }
        }
        HookEvent::SessionStart => {
            let query = match args.query.clone().or_else(|| input.query.clone()) {
                Some(query) => query,
                None => {
                    let log = OpenedLog::open(database, None).await?;
                    log.latest_user_inputs(&thread, SESSION_START_PROMPTS, PROMPT_LOOKBACK as usize)
                        .await?
                        .join("\n")
                }
            };
            // Nothing to search for: the newest memory of the namespace is what a fresh session
            // most likely continues.
            let mode = if query.trim().is_empty() {
                RecallMode::Recent
            } else {
                args.mode.into()
            };
            let recalled = recall(
                &mut backend,
                &namespace,
                &scope,
                &query,
                mode,
                &limits,
                args,
            )
            .await?;
            Answer {
                recalled,
                appended: Appended::default(),
            }
        }
        HookEvent::TurnEnd => Answer {
            recalled: None,
            appended: turn_end(database, &mut backend, &thread, &resolved, &input, args).await?,
        },
    };
    // Asked after the work: a server that refused the hook's namespace was left for one-shot.
    let backend_kind = if backend.is_server() {
        "served"
    } else {
        "one-shot"
    };
    backend.close().await;
    let empty = answer.recalled.as_ref().and_then(|recalled| {
        recalled
            .passages
            .is_empty()
            .then(|| nothing_recalled(recalled, backend_kind))
    });
    Ok(Answered {
        output: answer.render(input.event, args.format),
        empty,
    })
}

/// Why a recall that answered cited nothing: no passage matched, with what the index held.
fn nothing_recalled(recalled: &crate::wire::RecallResult, backend: &str) -> Failure {
    let index = match (recalled.index_position, recalled.store_head) {
        (Some(indexed), Some(head)) => {
            format!("; the embedding index held changes up to {indexed} of the store's head {head}")
        }
        _ => String::new(),
    };
    let answered_by = recalled
        .answered_by
        .map(|kind| match kind {
            AnsweredBy::Exact => ", answered by exact",
            AnsweredBy::Hnsw => ", answered by hnsw",
        })
        .unwrap_or_default();
    // Passages that matched but that the limits left out are no "no match": the limits are what
    // to raise.
    let omitted: u64 = recalled
        .outcomes
        .iter()
        .map(|outcome| outcome.omitted)
        .sum();
    let why = if omitted > 0 {
        format!(
            "{omitted} matching passages, none within --max-items, --max-bytes and --max-tokens \
             (the header's share included)"
        )
    } else {
        "no passage matched".to_owned()
    };
    Failure::new(
        NO_MATCH_KIND,
        format!("nothing recalled: {why} ({backend}{answered_by}){index}"),
    )
}

async fn read_stdin() -> Result<Vec<u8>, Failure> {
    crate::blocking::blocking(|| {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .take(MAX_HOOK_INPUT_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map(|_| bytes)
    })
    .await
    .map_err(|_| Failure::new("input", "reading standard input failed"))?
    .map_err(|error| Failure::new("input", format!("could not read standard input: {error}")))
}

/// The recall limits with the header's share taken off.
#[derive(Debug, Clone, Copy)]
struct Limits {
    max_items: u32,
    max_bytes: u64,
    max_tokens: u64,
}

impl Limits {
    fn new(args: &HookArgs) -> Result<Self, Failure> {
        let header_bytes = HEADER.len() as u64;
        let header_tokens = ApproximateTokenCounter.count(HEADER) as u64;
        if args.max_items == 0
            || args.max_bytes <= header_bytes
            || args.max_tokens <= header_tokens
            || args.timeout_ms == 0
        {
            return Err(Failure::new(
                ErrorKind::InvalidInput.as_str(),
                format!(
                    "limits: --max-items and --timeout-ms must be positive, --max-bytes above {header_bytes} and \
                     --max-tokens above {header_tokens} (the header's share)"
                ),
            ));
        }
        Ok(Self {
            max_items: args.max_items,
            max_bytes: args.max_bytes - header_bytes,
            max_tokens: args.max_tokens - header_tokens,
        })
    }
}

/// What a hook did.
#[derive(Debug, Default)]
struct Appended {
    sequences: Vec<u64>,
    already_recorded: u64,
}

#[derive(Debug)]
struct Answer {
    recalled: Option<crate::wire::RecallResult>,
    appended: Appended,
}

impl Answer {
    fn render(self, event: HookEvent, format: HookFormat) -> Option<String> {
        let context = self
            .recalled
            .as_ref()
            .filter(|recalled| !recalled.passages.is_empty())
            .map(|recalled| format!("{HEADER}{}", recalled.text));
        match format {
            HookFormat::ClaudeCode => {
                let event_name = match event {
                    HookEvent::Prompt => "UserPromptSubmit",
                    HookEvent::SessionStart => "SessionStart",
                    HookEvent::TurnEnd => return None,
                };
                context.map(|context| {
                    json!({"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": context}})
                        .to_string()
                })
            }
            HookFormat::Json => {
                let passages = self
                    .recalled
                    .as_ref()
                    .map(|recalled| serde_json::to_value(&recalled.passages).unwrap_or(Value::Null))
                    .unwrap_or_else(|| json!([]));
                let answered_by = self
                    .recalled
                    .as_ref()
                    .and_then(|recalled| recalled.answered_by);
                Some(
                    json!({
                        "event": event.as_str(),
                        "context": context.unwrap_or_default(),
                        "passages": passages,
                        "answered_by": answered_by,
                        "appended": self.appended.sequences,
                        "already_recorded": self.appended.already_recorded,
                    })
                    .to_string(),
                )
            }
        }
    }
}

/// The json format's prompt answer with `--context-budget`: the assembled context and what was appended.
fn render_assembled(assembled: Value, appended: &Appended) -> String {
    let mut answer = json!({"event": HookEvent::Prompt.as_str()});
    if let (Value::Object(answer), Value::Object(assembled)) = (&mut answer, assembled) {
        answer.extend(assembled);
        answer.insert("appended".to_owned(), json!(appended.sequences));
        answer.insert(
            "already_recorded".to_owned(),
            json!(appended.already_recorded),
        );
    }
    answer.to_string()
}

async fn recall(
    backend: &mut Backend,
    namespace: &DynamicNamespace,
    scope: &str,
    query: &str,
    mode: RecallMode,
    limits: &Limits,
    args: &HookArgs,
) -> Result<Option<crate::wire::RecallResult>, Failure> {
    let query = crate::recall_service::query_tail(query);
    let arguments = RecallArguments {
        namespace: namespace.clone(),
        scope: scope.to_owned(),
        query: query.to_owned(),
        mode,
        limits: WireRecallLimits {
            max_items: limits.max_items,
            max_sources: None,
            max_bytes: limits.max_bytes,
            max_tokens: limits.max_tokens,
            timeout_ms: args.timeout_ms,
        },
        rerank: None,
    };
    Ok(Some(backend.recall(arguments).await?))
}

/// `--speaker` (`MEMORY_SPEAKER`), else the input's speaker, else the user whose memory it is
/// ([`crate::destination::local_speaker`], as the Python package names its user's words).
fn speaker(args: &HookArgs, input: &HookInput) -> String {
    args.speaker
        .clone()
        .or_else(|| input.speaker.clone())
        .unwrap_or_else(|| crate::destination::local_speaker(args.user.as_deref()))
}

async fn lock(database: &Database, session: &str) -> Result<SessionLock, Failure> {
    let dir = state::dir_for(database);
    let session = session.to_owned();
    crate::blocking::blocking(move || SessionLock::acquire(&dir, &session))
        .await
        .map_err(|_| Failure::new("state", "taking the session lock failed"))?
        .map_err(|error| Failure::new("state", format!("could not take the session lock: {error}")))
}

/// `prompt`: appends the prompt once, under the session lock.
async fn prompt_append(
    database: &Database,
    backend: &mut Backend,
    thread: &ThreadId,
    destination: &Resolved,
    input: &HookInput,
    args: &HookArgs,
) -> Result<Appended, Failure> {
    let transcript_length = input
        .transcript_path
        .as_ref()
        .and_then(|path| std::fs::metadata(path).ok())
        .map(|metadata| metadata.len());
    let cursor = format!(
        "memory-hook/v1 prompt {}",
        input.prompt_identity(transcript_length)
    );
    let record = NewRecord {
        occurred_at: Some(SystemClock.now_millis()),
        speaker: speaker(args, input),
        observers: Vec::new(),
        body: RecordBody::UserInput {
            text: input.prompt.clone().unwrap_or_default(),
        },
        opaque_cursor: Some(cursor.clone()),
    };
    record.validate().map_err(Refusal::from)?;
    let _lock = lock(database, thread.as_str()).await?;
    let log = OpenedLog::open(database, backend.one_shot_appends()).await?;
    let expected = cursor.clone();
    if log
        .find_in_tail(thread, PROMPT_LOOKBACK, move |found| found == expected)
        .await?
        .is_some()
    {
        return Ok(Appended {
            sequences: Vec::new(),
            already_recorded: 1,
        });
    }
    let appended = backend.append(&log, thread, destination, record).await?;
    Ok(Appended {
        sequences: vec![appended.sequence],
        already_recorded: 0,
    })
}

/// `turn-end`: appends the new assistant messages once, under the session lock.
async fn turn_end(
    database: &Database,
    backend: &mut Backend,
    thread: &ThreadId,
    destination: &Resolved,
    input: &HookInput,
    args: &HookArgs,
) -> Result<Appended, Failure> {
    let _lock = lock(database, thread.as_str()).await?;
    let log = OpenedLog::open(database, backend.one_shot_appends()).await?;
    let mut appended = Appended::default();
    if let Some(messages) = &input.messages {
        let seen = log.cursors_in_tail(thread, TRANSCRIPT_LOOKBACK).await?;
        for message in messages {
            let cursor = format!(
                "memory-hook/v1 message {}",
                hex_digest(
                    json!(["message", input.session, message.id])
                        .to_string()
                        .as_bytes()
                )
            );
            if seen.contains(&cursor) {
                appended.already_recorded += 1;
                continue;
            }
            let record = NewRecord {
                occurred_at: message.occurred_at,
                speaker: "assistant".to_owned(),
                observers: Vec::new(),
                body: RecordBody::AssistantMessage {
                    text: message.text.clone(),
                },
                opaque_cursor: Some(cursor),
            };
            record.validate().map_err(Refusal::from)?;
            appended.sequences.push(
                backend
                    .append(&log, thread, destination, record)
                    .await?
                    .sequence,
            );
        }
        return Ok(appended);
    }
    let Some(path) = input.transcript_path.clone() else {
        return Err(Failure::new(
            ErrorKind::InvalidInput.as_str(),
            "turn-end needs transcript_path (or, in the generic form, messages)",
        ));
    };
    let last = log
        .find_in_tail(thread, TRANSCRIPT_LOOKBACK, |cursor| {
            transcript::TranscriptCursor::decode(cursor).is_some()
        })
        .await?
        .and_then(|record| record.record.opaque_cursor)
        .and_then(|cursor| transcript::TranscriptCursor::decode(&cursor));
    let max_bytes = args.max_transcript_bytes;
    let read =
        crate::blocking::blocking(move || transcript::read_new(&path, last.as_ref(), max_bytes))
            .await
            .map_err(|_| Failure::new("transcript", "reading the transcript failed"))?
            .map_err(|error| {
                let kind = match &error {
                    transcript::TranscriptError::Io(_) => "transcript-unreadable",
                    transcript::TranscriptError::Truncated { .. } => "transcript-truncated",
                    transcript::TranscriptError::Rotated { .. } => "transcript-rotated",
                    transcript::TranscriptError::LineTooLong { .. } => ErrorKind::TooLarge.as_str(),
                };
                Failure::new(kind, error.to_string())
            })?;
    if read.malformed > 0 {
        eprintln!(
            "memory hook turn-end: {} of {} transcript lines are not JSON and were passed over",
            read.malformed, read.lines
        );
    }
    for message in read.messages {
        let record = NewRecord {
            occurred_at: None,
            speaker: "assistant".to_owned(),
            observers: Vec::new(),
            body: RecordBody::AssistantMessage { text: message.text },
            opaque_cursor: Some(message.cursor.encode()),
        };
        record.validate().map_err(Refusal::from)?;
        appended.sequences.push(
            backend
                .append(&log, thread, destination, record)
                .await?
                .sequence,
        );
    }
    Ok(appended)
}
