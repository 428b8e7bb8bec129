//! Every binary and subcommand selects and opens the database `--db` names through one module
//! (`memory_cli::database`), so a bad `--db` or `--schema` is refused alike wherever it is given: by
//! `memory`'s commands and `serve` (exit 2 with the refusal), `memory hook` (exit 0, the failure on
//! standard error with its kind) and `remembering-worker` (exit 1). No server is needed: the URLs here
//! fail before any connection, and a password in them is never shown.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

const MEMORY: &str = env!("CARGO_BIN_EXE_memory");
const WORKER: &str = env!("CARGO_BIN_EXE_remembering-worker");

/// A PostgreSQL URL whose port does not parse, holding a password.
const BAD_URL: &str = "postgres://memory:not-a-real-secret@127.0.0.1:not-a-port/memory";

fn namespace() -> String {
    json!({"name": "notes", "version": 1, "identity": {"user": "u1"}}).to_string()
}

/// Runs `binary` with `args` and `stdin`, state and runtime folders in `dir`.
fn run(binary: &str, args: &[&str], stdin: &[u8], dir: &std::path::Path) -> Output {
    let mut child = Command::new(binary)
        .args(args)
        .env_remove("MEMORY_DB")
        .env("XDG_STATE_HOME", dir)
        .env("XDG_RUNTIME_DIR", dir)
        .env("MEMORY_ASSETS_DIR", dir.join("no-assets"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command refused before it reads its input (a bad URL) may close the pipe first.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_url_that_does_not_parse_is_invalid_input_for_every_command_and_binary() {
    let dir = tempfile::tempdir().unwrap();
    let import = dir.path().join("empty.jsonl");
    std::fs::write(&import, b"").unwrap();
    let get = json!({"namespace": {"name": "notes", "version": 1, "identity": {"user": "u1"}}, "id": "tea"})
        .to_string();
    let append = json!({"thread": "chat-1", "record": {"speaker": "ana",
        "body": {"kind": "user_input", "text": "I live in Lisbon."}}})
    .to_string();
    let namespace = namespace();
    let commands: [Vec<&str>; 7] = [
        vec!["get", &get],
        vec!["sync", "{}"],
        vec!["list", "--namespace", &namespace, "{}"],
        vec!["status"],
        vec!["import", import.to_str().unwrap()],
        vec!["thread", "append", "--user", "ana", &append],
        vec!["serve"],
    ];
    for command in commands {
        let mut args = vec!["--db", BAD_URL];
        args.extend(&command);
        let output = run(MEMORY, &args, b"", dir.path());
        let stdout = text(&output.stdout);
        assert_eq!(output.status.code(), Some(2), "{command:?}: {output:?}");
        let answer: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(
            answer["error"]["kind"], "invalid-input",
            "{command:?}: {answer}"
        );
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("--db: "), "{command:?}: {message}");
        for output in [&stdout, &text(&output.stderr)] {
            assert!(
                !output.contains("not-a-real-secret"),
                "{command:?}: {output}"
            );
        }
    }

    // The hook never fails the turn: it exits 0 and says why, with the same kind.
    let prompt = json!({"session": "s1", "prompt": "where do I live?"}).to_string();
    let output = run(
        MEMORY,
        &[
            "--db", BAD_URL, "hook", "--format", "json", "--user", "ana", "prompt",
        ],
        prompt.as_bytes(),
        dir.path(),
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stderr.contains("--db: "), "{stderr}");
    assert!(stderr.contains("(invalid-input)"), "{stderr}");
    assert!(!stderr.contains("not-a-real-secret"), "{stderr}");

    // The worker stops with an error (exit 1), saying the same.
    let output = run(WORKER, &["--db", BAD_URL, "--once"], b"", dir.path());
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stderr.contains("invalid-input refusal: --db: "), "{stderr}");
    assert!(!stderr.contains("not-a-real-secret"), "{stderr}");
}

#[test]
fn a_schema_with_a_sqlite_path_is_refused_by_both_binaries_and_creates_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.sqlite");
    let db = file.to_str().unwrap();
    let output = run(
        MEMORY,
        &["--db", db, "--schema", "team_a", "status"],
        b"",
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["error"]["kind"], "invalid-input", "{answer}");

    let output = run(
        WORKER,
        &["--db", db, "--schema", "team_a", "--once"],
        b"",
        dir.path(),
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        stderr.contains("--schema needs a PostgreSQL --db URL"),
        "{stderr}"
    );
    assert!(!file.exists(), "a refused command created the SQLite file");
}
