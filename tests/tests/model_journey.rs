//! The worker with a language model (`remembering-worker --model-url`), against an OpenAI-compatible
//! endpoint the test starts on loopback: day one a fact, day two its correction, day three the
//! question, one-shot and through the server; the endpoint down, answering wrongly, or the worker
//! killed between the saved proposal and its write; the key never shown.

use std::io::BufRead as _;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use integration_tests::hook::{additional_context, claude_input, run_hook};
use integration_tests::product::{Fixture, worker_binary};
use integration_tests::serving::{HttpServer, wait_until_ready};
use memory_testkit::chat_stub::{ChatStub, StubReply};
use serde_json::{Value, json};

/// A model that behaves: each user record of the batch becomes one memory, its whole text quoted;
/// a record that says "not X" corrects the shown memory that mentions X.
fn good_model(body: &Value) -> StubReply {
    let material = body["messages"][1]["content"].as_str().unwrap_or_default();
    let shown: Vec<(&str, &str)> = material
        .lines()
        .filter_map(|line| line.strip_prefix("- ")?.split_once(": "))
        .collect();
    let mut memories = Vec::new();
    for line in material.lines() {
        let Some(rest) = line.strip_prefix('[') else {
            continue;
        };
        let Some((number, said)) = rest.split_once("] ") else {
            continue;
        };
        let Some((_, text)) = said.split_once(" (user): ") else {
            continue;
        };
        let corrects = text.split_once(", not ").and_then(|(_, wrong)| {
            let wrong = wrong.trim_end_matches(|c: char| !c.is_alphanumeric());
            let wrong = wrong.split(|c: char| !c.is_alphanumeric()).next()?;
            shown
                .iter()
                .find(|(_, memory)| memory.contains(wrong))
                .map(|(id, _)| *id)
        });
        memories.push(json!({
            "text": text,
            "evidence": [{"record": number.parse::<u64>().unwrap_or(0), "quote": text}],
            "corrects": corrects,
        }));
    }
    StubReply::content(json!({ "memories": memories }).to_string())
}

fn model_flags(stub: &ChatStub) -> Vec<String> {
    vec![
        "--model-url".to_owned(),
        stub.url(),
        "--model".to_owned(),
        "stub-model".to_owned(),
    ]
}

fn hook_prompt(fixture: &Fixture, session: &str, prompt: &str) -> String {
    let transcript = fixture.dir.path().join(format!("{session}.jsonl"));
    let input = claude_input(
        "user-prompt-submit.json",
        session,
        &transcript,
        Some(prompt),
    );
    let env: [(&str, &std::ffi::OsStr); 2] = [
        ("USER", std::ffi::OsStr::new("ana")),
        ("LOGNAME", std::ffi::OsStr::new("ana")),
    ];
    let outcome = run_hook(fixture, &["prompt", "--timeout-ms", "60000"], &input, &env);
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    if outcome.stdout.trim().is_empty() {
        return String::new();
    }
    additional_context(&outcome, "UserPromptSubmit").to_owned()
}

fn status(fixture: &Fixture) -> Value {
    fixture.run(&["status"]).success().clone()
}

fn flags(owned: &[String]) -> Vec<&str> {
    owned.iter().map(String::as_str).collect()
}

/// Day one a fact, day two its correction in words, day three the question: the model's memories
/// are cited, the correction first, the fact it corrects labelled with it.
fn the_models_correction_leads(served: bool) {
    let stub = ChatStub::start(good_model).expect("the stub endpoint");
    let fixture = Fixture::new();
    let server = served.then(|| {
        let server = HttpServer::start(
            &fixture,
            &[
                "--allow-namespace".to_owned(),
                json!({"name": "memory.user", "version": 1}).to_string(),
            ],
            &[],
        );
        wait_until_ready(&server.base());
        server
    });
    let worker = model_flags(&stub);
    let day = |session: &str, prompt: &str| {
        hook_prompt(&fixture, session, prompt);
        fixture.worker_pass_with(&flags(&worker));
    };
    day(
        "day-one",
        "I moved to Lisbon last spring and I work as a luthier.",
    );
    day(
        "day-two",
        "Actually I moved to Madrid, not Lisbon; the Lisbon plan fell through.",
    );
    let answer = hook_prompt(&fixture, "day-three", "Remind me which city I live in now?");
    let correction = answer.find("Madrid").expect("the correction is recalled");
    let corrected = answer
        .find("luthier")
        .expect("the corrected memory is still recalled");
    assert!(
        correction < corrected,
        "the correction comes first: {answer}"
    );
    assert!(
        answer.contains("corrected by [memory:1]"),
        "the corrected memory names its correction: {answer}"
    );
    let requests = stub.requests();
    assert_eq!(requests.len(), 2, "one call per day's batch");
    assert!(
        requests[1].body["messages"][1]["content"]
            .as_str()
            .is_some_and(|material| material.contains("I moved to Lisbon last spring")),
        "the second call was shown the first day's memory"
    );
    let extraction = &status(&fixture)["threads"]["extraction"];
    assert_eq!(extraction["model"]["calls"], 2, "{extraction}");
    assert_eq!(extraction["model"]["prompt_tokens"], 20, "{extraction}");
    assert_eq!(extraction["corrections"]["linked"], 1, "{extraction}");
    drop(server);
}

#[test]
fn the_models_correction_is_cited_first_by_the_one_shot_hook() {
    the_models_correction_leads(false);
}

#[test]
fn the_models_correction_is_cited_first_through_the_server() {
    the_models_correction_leads(true);
}

/// Runs one `--once` pass with `extra` flags and environment, answering its stderr.
fn worker_once(fixture: &Fixture, extra: &[String], env: &[(&str, &str)]) -> String {
    let output = Command::new(worker_binary())
        .env_remove("MEMORY_DB")
        .envs(env.iter().copied())
        .arg("--db")
        .arg(&fixture.db)
        .arg("--once")
        .args(extra)
        .output()
        .expect("the worker runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "worker pass failed: {stderr}");
    stderr
}

fn append(fixture: &Fixture, text: &str) {
    let argument = json!({
        "thread": "t",
        "record": {"speaker": "ana", "occurred_at": 1_767_225_600_000_i64, "body": {"kind": "user_input", "text": text}},
        "user": "ana",
    });
    fixture
        .run(&["thread", "append", &argument.to_string()])
        .success();
}

fn recalled(fixture: &Fixture, query: &str) -> Vec<String> {
    let outcome = fixture.call(
        "recall",
        &json!({
            "namespace": {"name": "memory.user", "version": 1, "identity": {"user": "ana"}},
            "scope": "agent",
            "query": query,
            "mode": "lexical",
            "limits": {"max_items": 5, "max_bytes": 4000, "max_tokens": 1000, "timeout_ms": 60000},
        }),
    );
    outcome.success()["passages"]
        .as_array()
        .expect("passages")
        .iter()
        .map(|passage| passage["content"]["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// The endpoint down (5xx after the client's retries) defers the thread: nothing parked, nothing
/// lost, and the next pass remembers. Wrong answers park it with kind `model`, visibly. The key goes
/// to the endpoint as a bearer token and appears in nothing the worker prints.
#[test]
fn a_failing_endpoint_defers_a_wrong_one_parks_and_the_key_stays_secret() {
    let key = "sk-test-7f3a9c-never-shown";
    let stub = ChatStub::start(good_model).expect("the stub endpoint");
    for _ in 0..3 {
        stub.push(StubReply::status(503));
    }
    let fixture = Fixture::new();
    let key_file = fixture.dir.path().join("model.key");
    std::fs::write(&key_file, format!("{key}\n")).expect("key file");
    let mut worker = model_flags(&stub);
    worker.extend([
        "--model-key-file".to_owned(),
        key_file.display().to_string(),
    ]);
    append(&fixture, "I keep three beehives on the roof.");
    let stderr = worker_once(&fixture, &worker, &[("RUST_LOG", "debug")]);
    assert!(!stderr.contains(key), "the key was printed: {stderr}");
    let threads = &status(&fixture)["threads"];
    assert_eq!(threads["pending"], 1, "deferred, not settled: {threads}");
    assert_eq!(threads["parked"], json!({}), "{threads}");
    assert!(recalled(&fixture, "beehives roof").is_empty());
    let requests = stub.requests();
    assert_eq!(requests.len(), 3, "three attempts, then deferred");
    assert!(
        requests
            .iter()
            .all(|request| request.authorization.as_deref() == Some(&format!("Bearer {key}"))),
        "{requests:?}"
    );
    // Back up: the next pass remembers.
    worker_once(&fixture, &worker, &[]);
    assert_eq!(
        recalled(&fixture, "beehives roof"),
        ["I keep three beehives on the roof."]
    );
    assert_eq!(status(&fixture)["threads"]["pending"], 0);

    // An endpoint that keeps answering prose: parked with kind `model`, and said so.
    let prose = ChatStub::start(|_| StubReply::content("Ana keeps bees, I think.")).expect("stub");
    let fixture = Fixture::new();
    append(&fixture, "I keep three beehives on the roof.");
    worker_once(&fixture, &model_flags(&prose), &[]);
    assert_eq!(prose.requests().len(), 2, "asked again once, then parked");
    assert_eq!(
        status(&fixture)["threads"]["parked"],
        json!({"model": 1}),
        "parked visibly"
    );
    assert!(recalled(&fixture, "beehives roof").is_empty());
}

/// Killed after the proposal's command is saved and before it is sent: the next worker replays the
/// saved command, and the model is not asked again.
#[test]
fn a_proposal_saved_before_a_crash_lands_without_asking_the_model_again() {
    let stub = ChatStub::start(good_model).expect("the stub endpoint");
    let fixture = Fixture::new();
    append(&fixture, "My sister Marta lives in Oslo.");
    let mut child = Command::new(worker_binary())
        .env_remove("MEMORY_DB")
        .env("REMEMBERING_WORKER_STALL_AT", "output-saved:1")
        .arg("--db")
        .arg(&fixture.db)
        .args(model_flags(&stub))
        .args(["--lease-ms", "1000", "--timeout-ms", "500", "--once"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("the worker starts");
    let stderr = child.stderr.take().expect("stderr");
    let (lines, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line);
        }
    });
    let started = Instant::now();
    let mut stalled = false;
    while !stalled && started.elapsed() < Duration::from_secs(120) {
        match receiver.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => stalled = line.contains("stalled at output-saved"),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    assert!(stalled, "the worker reached the saved output");
    child.kill().expect("kill");
    child.wait().expect("reaped");
    assert_eq!(stub.requests().len(), 1);
    assert!(recalled(&fixture, "Marta Oslo").is_empty());
    // Past the dead worker's lease.
    std::thread::sleep(Duration::from_millis(1_100));
    worker_once(&fixture, &model_flags(&stub), &[]);
    assert_eq!(stub.requests().len(), 1, "the saved proposal was replayed");
    assert_eq!(
        recalled(&fixture, "Marta Oslo"),
        ["My sister Marta lives in Oslo."]
    );
}
