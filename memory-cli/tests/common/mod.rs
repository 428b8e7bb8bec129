//! Helpers shared by the end-to-end tests: run the built `memory` binary against a fresh database.

#![allow(dead_code, clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// The built binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_memory");

/// A temporary directory holding one database.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = dir.path().join("memory.sqlite");
        Self { dir, db }
    }

    /// `memory --db DB <args...>` with nothing on standard input.
    pub fn run(&self, args: &[&str]) -> Outcome {
        run_with_stdin(Some(&self.db), args, None)
    }

    /// `memory --db DB <operation> JSON`.
    pub fn call(&self, operation: &str, argument: &Value) -> Outcome {
        self.run(&[operation, &argument.to_string()])
    }

    /// `memory --db DB <operation> -` with `input` on standard input.
    pub fn call_stdin(&self, operation: &str, input: &[u8]) -> Outcome {
        run_with_stdin(Some(&self.db), &[operation, "-"], Some(input))
    }

    /// The change-sequence head, which only a committed write advances.
    pub fn head(&self) -> u64 {
        let outcome = self.call("sync", &json!({}));
        outcome.assert_success();
        outcome.json["indexed"]
            .as_u64()
            .expect("indexed is an integer")
    }
}

/// What one run of the binary gave.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// Standard output parsed as JSON (`null` when it is empty or not JSON).
    pub json: Value,
}

impl Outcome {
    pub fn assert_success(&self) {
        assert_eq!(self.code, 0, "expected success, got {self:#?}");
    }

    /// Asserts exit status 2 with `{"error": {"kind": kind, "message": ...}}` on standard output.
    pub fn assert_refused(&self, kind: &str) {
        assert_eq!(self.code, 2, "expected a refusal, got {self:#?}");
        assert_eq!(self.json["error"]["kind"], kind, "{self:#?}");
        assert!(
            self.json["error"]["message"]
                .as_str()
                .is_some_and(|message| !message.is_empty()),
            "a refusal explains itself: {self:#?}"
        );
    }
}

/// Runs the binary with `--db db` (when given) and `input` on standard input (empty when `None`).
pub fn run_with_stdin(db: Option<&Path>, args: &[&str], input: Option<&[u8]>) -> Outcome {
    run_with_env(db, args, input, &[])
}

/// [`run_with_stdin`] with extra environment variables.
pub fn run_with_env(
    db: Option<&Path>,
    args: &[&str],
    input: Option<&[u8]>,
    env: &[(&str, &std::ffi::OsStr)],
) -> Outcome {
    let mut command = Command::new(BINARY);
    command.env_remove("MEMORY_DB").env_remove("MEMORY_LOG");
    command.envs(env.iter().copied());
    if let Some(db) = db {
        command.arg("--db").arg(db);
    }
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("the binary starts");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.map(<[u8]>::to_vec);
    // Written from another thread: the binary may stop reading early (a refused oversized input), and
    // a pipe that is not drained would otherwise block this thread forever.
    let writer = std::thread::spawn(move || {
        if let Some(input) = input {
            let _ = stdin.write_all(&input);
        }
    });
    let output = child.wait_with_output().expect("the binary finishes");
    writer.join().expect("the writer thread finishes");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    Outcome {
        code: output.status.code().unwrap_or(-1),
        stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        json,
    }
}

pub fn namespace() -> Value {
    json!({"name": "notes", "version": 1, "identity": {"user": "u1", "team": ["a", "b"]}})
}

pub fn content(text: &str) -> Value {
    json!({
        "text": text,
        "attributions": [{
            "origin_id": "msg-7", "speaker": "user", "observers": ["assistant"],
            "locator": "chat:42#7", "activity_at": 1767225600000_i64, "interpretation": "stated"
        }],
        "metadata": {"topic": "drinks", "nested": {"b": 1, "a": [true, null]}},
        "recorded_at": 1767225600000_i64,
        "extracted_at": 1767225600001_i64
    })
}

/// `memory_put` arguments creating (`expected` null) or replacing a document.
pub fn put(id: &str, operation_id: &str, expected: Option<&str>, text: &str) -> Value {
    json!({
        "namespace": namespace(),
        "id": id,
        "operation_id": operation_id,
        "expected_revision": expected,
        "locator": "chat:42",
        "scopes": ["assistant"],
        "content": content(text)
    })
}

pub fn withdraw(id: &str, operation_id: &str, expected: &str) -> Value {
    json!({
        "namespace": namespace(), "id": id, "operation_id": operation_id,
        "expected_revision": expected, "reason": "the user asked to forget it"
    })
}

pub fn get(id: &str) -> Value {
    json!({"namespace": namespace(), "id": id})
}

pub fn recall(query: &str, mode: &str) -> Value {
    json!({
        "namespace": namespace(), "scope": "assistant", "query": query, "mode": mode,
        "limits": {"max_items": 5, "max_bytes": 8000, "max_tokens": 2000, "timeout_ms": 10000}
    })
}
