//! The harness of the `memory hook` tests and bench: the recorded hook inputs and transcript fixtures
//! (`tests/fixtures/hooks/`), running a hook with its JSON on standard input, and reading the thread
//! log a hook wrote.

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use memory_core::activity::{RecordBody, Sequence, ThreadId, ThreadLog as _, ThreadRecord};
use memory_sqlite::thread_log::SqliteThreadLog;
use serde_json::Value;

use crate::product::{Fixture, Outcome, memory_binary};

/// A file of `tests/fixtures/hooks/`.
pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("hooks")
        .join(name)
}

/// The recorded Claude Code hook input `name` (`user-prompt-submit.json`, `session-start.json`,
/// `stop.json`) with its session, transcript and (for prompts) prompt set; every other field, unknown
/// ones included, stays as recorded.
pub fn claude_input(name: &str, session: &str, transcript: &Path, prompt: Option<&str>) -> String {
    let text = std::fs::read_to_string(fixture_path(name)).expect("hook input fixture");
    let mut input: Value = serde_json::from_str(&text).expect("fixture is JSON");
    input["session_id"] = session.into();
    input["transcript_path"] = transcript.to_str().expect("UTF-8 path").into();
    if let Some(prompt) = prompt {
        input["prompt"] = prompt.into();
    }
    input.to_string()
}

/// `memory hook prompt --format json --context-budget BUDGET` of `user`'s `prompt` in the generic form
/// (`--user USER --speaker USER`): the assembled context, one-shot, or through the server when one
/// runs for the database. Asserts the hook succeeded.
pub fn prompt_with_context(
    fixture: &Fixture,
    session: &str,
    user: &str,
    prompt: &str,
    prompt_id: &str,
    budget: u64,
) -> Outcome {
    let input = serde_json::json!({"session": session, "prompt": prompt, "prompt_id": prompt_id})
        .to_string();
    let budget = budget.to_string();
    let outcome = run_hook(
        fixture,
        &[
            "prompt",
            "--format",
            "json",
            "--context-budget",
            &budget,
            "--user",
            user,
            "--speaker",
            user,
            "--timeout-ms",
            "60000",
        ],
        &input,
        &[],
    );
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    outcome
}

/// Runs `memory --db DB hook <args...>` with `input` on standard input and extra environment.
pub fn run_hook(fixture: &Fixture, args: &[&str], input: &str, env: &[(&str, &OsStr)]) -> Outcome {
    run_hook_on(&fixture.db, args, input, env)
}

/// [`run_hook`] against any `--db` path.
pub fn run_hook_on(db: &Path, args: &[&str], input: &str, env: &[(&str, &OsStr)]) -> Outcome {
    let mut command = Command::new(memory_binary());
    command
        .env_remove("MEMORY_DB")
        .env_remove("MEMORY_LOG")
        .env_remove("MEMORY_NAMESPACE")
        .env_remove("MEMORY_SCOPE")
        .env_remove("MEMORY_USER")
        .env_remove("MEMORY_SPEAKER")
        .envs(env.iter().copied())
        .arg("--db")
        .arg(db)
        .arg("hook")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("the binary starts");
    let mut stdin = child.stdin.take().expect("piped standard input");
    // A hook refused before it reads its input (a bad setting or flag) may close the pipe first;
    // its answer is what the test checks.
    let _ = stdin.write_all(input.as_bytes());
    drop(stdin);
    let output = child.wait_with_output().expect("the binary finishes");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    Outcome {
        code: output.status.code().unwrap_or(-1),
        stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        json,
    }
}

/// Asserts a hook that did nothing: exit 0, nothing on standard output, a reason on standard error.
/// Answers standard error.
pub fn assert_silent_failure(outcome: &Outcome) -> &str {
    assert_eq!(outcome.code, 0, "a hook never fails the turn: {outcome:#?}");
    assert!(
        outcome.stdout.is_empty(),
        "nothing on standard output: {outcome:#?}"
    );
    assert!(
        !outcome.stderr.trim().is_empty(),
        "the reason on standard error: {outcome:#?}"
    );
    &outcome.stderr
}

/// The `additionalContext` of a Claude Code hook answer (asserting its shape and event name).
pub fn additional_context<'a>(outcome: &'a Outcome, event: &str) -> &'a str {
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    let output = &outcome.json["hookSpecificOutput"];
    assert_eq!(output["hookEventName"], event, "{outcome:#?}");
    output["additionalContext"]
        .as_str()
        .expect("additionalContext is text")
}

/// Every record of `thread` in the SQLite database `db`.
pub fn thread_records(db: &Path, thread: &str) -> Vec<ThreadRecord> {
    let log = SqliteThreadLog::open(db).expect("the thread log opens");
    let thread = ThreadId::new(thread).expect("a valid thread id");
    let mut records = Vec::new();
    loop {
        let after = records
            .last()
            .map_or(Sequence::ZERO, |record: &ThreadRecord| record.sequence);
        let page = log.read_page(&thread, after, 1_000).expect("a page");
        if page.is_empty() {
            return records;
        }
        records.extend(page);
    }
}

/// The texts of `thread`'s user inputs and assistant messages, in order, tagged `user:` / `assistant:`.
pub fn conversation(db: &Path, thread: &str) -> Vec<String> {
    thread_records(db, thread)
        .into_iter()
        .filter_map(|record| match record.record.body {
            RecordBody::UserInput { text } => Some(format!("user: {text}")),
            RecordBody::AssistantMessage { text } => Some(format!("assistant: {text}")),
            _ => None,
        })
        .collect()
}

/// Appends the lines of fixture `name` to the transcript at `path` (creating it).
pub fn append_transcript(path: &Path, name: &str) {
    let lines = std::fs::read(fixture_path(name)).expect("transcript fixture");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("transcript");
    file.write_all(&lines).expect("transcript written");
}
