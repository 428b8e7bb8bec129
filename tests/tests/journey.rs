//! The journey a user of an agent host takes over days, through the built binaries with the README's
//! settings: `memory hook` around each turn (Claude Code's hook JSON) and `remembering-worker` in the
//! background, on one real SQLite file with the real model.
//!
//! Day one, session A: the user states facts (and asks a question). The worker runs. Day two, session
//! B: its session-start shows the user's newest memory and its prompts recall what session A said; the
//! question asked in A is not memory. A second user on the same database sees none of the first's
//! memory and keeps their own. The same through `memory serve --http`, and through `memory thread
//! append` + the worker + `memory recall` from a shell.

use std::ffi::OsStr;

use integration_tests::hook::{additional_context, claude_input, run_hook};
use integration_tests::product::{Fixture, Outcome};
use integration_tests::serving::{HttpServer, wait_until_indexed, wait_until_ready};
use memory_core::activity::{NewRecord, Sequence, ThreadId, ThreadLog as _};
use memory_sqlite::thread_log::SqliteThreadLog;
use serde_json::{Value, json};

/// One hook of `user`'s session, with the README's settings (no namespace, no scope) and the OS user
/// set to `user`; it must not say anything on standard error.
fn hook(
    fixture: &Fixture,
    user: &str,
    event: &str,
    session: &str,
    prompt: Option<&str>,
) -> Outcome {
    let outcome = hook_saying(fixture, user, event, session, prompt);
    assert!(
        outcome.stderr.trim().is_empty(),
        "the hook must not fail: {outcome:#?}"
    );
    outcome
}

/// [`hook`], whatever it says on standard error.
fn hook_saying(
    fixture: &Fixture,
    user: &str,
    event: &str,
    session: &str,
    prompt: Option<&str>,
) -> Outcome {
    let transcript = fixture.dir.path().join(format!("{session}.jsonl"));
    let input_file = match event {
        "prompt" => "user-prompt-submit.json",
        "session-start" => "session-start.json",
        other => panic!("no fixture for {other}"),
    };
    let input = claude_input(input_file, session, &transcript, prompt);
    let env: [(&str, &OsStr); 2] = [("USER", OsStr::new(user)), ("LOGNAME", OsStr::new(user))];
    // A one-shot hook loads the model; a debug build on a busy machine needs more than 5 s.
    let outcome = run_hook(fixture, &[event, "--timeout-ms", "60000"], &input, &env);
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    outcome
}

fn context(outcome: &Outcome, event: &str) -> String {
    if outcome.stdout.trim().is_empty() {
        return String::new();
    }
    additional_context(outcome, event).to_owned()
}

fn status(fixture: &Fixture) -> Value {
    let outcome = fixture.run(&["status"]);
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    outcome.json
}

/// `memory thread append` of one statement of ana's, bound to her namespace through the argument's
/// `user`; answers the sequence.
fn say(fixture: &Fixture, thread: &str, at: i64, text: &str) -> u64 {
    let argument = json!({
        "thread": thread,
        "record": {"speaker": "ana", "occurred_at": at, "body": {"kind": "user_input", "text": text}},
        "user": "ana",
    })
    .to_string();
    let outcome = fixture.run(&["thread", "append", &argument]);
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    outcome.json["sequence"].as_u64().expect("sequence")
}

/// `memory recall` of `query` in `namespace` with scope `agent`.
fn recall(fixture: &Fixture, namespace: &Value, query: &str, mode: &str) -> Outcome {
    let outcome = fixture.call(
        "recall",
        &json!({
            "namespace": namespace,
            "scope": "agent",
            "query": query,
            "mode": mode,
            "limits": {"max_items": 5, "max_bytes": 4000, "max_tokens": 1000, "timeout_ms": 60000},
        }),
    );
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    outcome
}

fn user_namespace(user: &str) -> Value {
    json!({"name": "memory.user", "version": 1, "identity": {"user": user}})
}

/// One server for several users of the machine (the hooks run as ana and as bea): its grant holds
/// every per-user namespace, not only its own user's.
fn every_user() -> Vec<String> {
    vec![
        "--allow-namespace".to_owned(),
        json!({"name": "memory.user", "version": 1}).to_string(),
    ]
}

#[test]
fn what_a_user_says_in_one_session_is_recalled_in_the_next_and_never_by_another_user() {
    let fixture = Fixture::new();
    // Day one, session A.
    hook(
        &fixture,
        "ana",
        "prompt",
        "session-a",
        Some("I moved to Lisbon last spring. Can you suggest a good bakery?"),
    );
    hook(
        &fixture,
        "ana",
        "prompt",
        "session-a",
        Some("Where did I move?"),
    );
    hook(
        &fixture,
        "ana",
        "prompt",
        "session-a",
        Some("My sister Marta works as a nurse in Braga."),
    );
    fixture.worker_pass();

    // Day two, session B: a fresh session starts with the user's newest memory.
    let start = context(
        &hook(&fixture, "ana", "session-start", "session-b", None),
        "SessionStart",
    );
    assert!(start.contains("Lisbon"), "{start}");
    assert!(start.contains("Marta"), "{start}");
    // The question and the request of session A are not memory.
    assert!(!start.contains("Where did I move"), "{start}");
    assert!(!start.contains("bakery"), "{start}");
    let recalled = context(
        &hook(
            &fixture,
            "ana",
            "prompt",
            "session-b",
            Some("Which city do I live in now?"),
        ),
        "UserPromptSubmit",
    );
    assert!(recalled.contains("Lisbon"), "{recalled}");
    assert!(!recalled.contains("Where did I move"), "{recalled}");

    // A second user on the same database: nothing of ana's, and their own memory kept apart.
    let other = context(
        &hook(
            &fixture,
            "bea",
            "prompt",
            "session-c",
            Some("I keep bees in Porto. Where do I live?"),
        ),
        "UserPromptSubmit",
    );
    assert!(!other.contains("Lisbon"), "{other}");
    assert!(!other.contains("Marta"), "{other}");
    fixture.worker_pass();
    let bea = context(
        &hook(&fixture, "bea", "session-start", "session-d", None),
        "SessionStart",
    );
    assert!(bea.contains("bees"), "{bea}");
    assert!(!bea.contains("Lisbon"), "{bea}");
    let ana = context(
        &hook(
            &fixture,
            "ana",
            "prompt",
            "session-e",
            Some("Who keeps bees, and where do I live?"),
        ),
        "UserPromptSubmit",
    );
    assert!(!ana.contains("bees"), "{ana}");
    assert!(ana.contains("Lisbon"), "{ana}");

    // What the worker kept and dropped is visible.
    let status = status(&fixture);
    let threads = &status["threads"];
    assert_eq!(threads["unbound"], 0, "{threads}");
    let destinations = threads["destinations"].as_array().expect("destinations");
    assert_eq!(destinations.len(), 2, "{threads}");
    let counts: Vec<u64> = destinations
        .iter()
        .map(|destination| destination["threads"].as_u64().expect("count"))
        .collect();
    // ana: sessions a, b and e appended; bea: c (d only started, which appends nothing).
    assert_eq!(counts, [3, 1], "{threads}");
    let dropped = &threads["extraction"]["dropped"];
    assert!(dropped["question"].as_u64().unwrap_or(0) >= 2, "{threads}");
    assert!(
        threads["extraction"]["kept"].as_u64().unwrap_or(0) >= 3,
        "{threads}"
    );
}

#[test]
fn a_thread_cannot_be_redirected_and_bad_destinations_change_nothing() {
    let fixture = Fixture::new();
    let append = |text: &str, flags: &[&str]| {
        let argument = json!({
            "thread": "t-1",
            "record": {"speaker": "ana", "occurred_at": 1_767_225_600_000_i64,
                       "body": {"kind": "user_input", "text": text}},
        })
        .to_string();
        let mut args = vec!["thread", "append"];
        args.extend_from_slice(flags);
        args.push(&argument);
        fixture.run(&args)
    };
    let first = append("I moved to Lisbon last spring.", &["--user", "ana"]);
    assert_eq!(first.code, 0, "{first:#?}");
    assert_eq!(first.json["sequence"], 1);
    // Another user's destination for the same thread: refused, nothing written.
    let refused = append("I moved to Porto.", &["--user", "bea"]);
    assert_eq!(refused.code, 2, "{refused:#?}");
    assert_eq!(refused.json["error"]["kind"], "conflict", "{refused:#?}");
    // So is a namespace of the caller's choosing.
    let namespace = r#"{"name":"notes","version":1,"identity":{"team":"x"}}"#;
    let refused = append("I moved to Porto.", &["--namespace", namespace]);
    assert_eq!(refused.json["error"]["kind"], "conflict", "{refused:#?}");
    // Bad destinations are refused before anything is opened.
    for (flags, kind) in [
        (vec!["--user", ""], "invalid-input"),
        (vec!["--user", "a\u{7}b"], "invalid-input"),
        (
            vec![
                "--namespace",
                "{\"name\":\"\",\"version\":1,\"identity\":{}}",
            ],
            "invalid-input",
        ),
        (vec!["--namespace", "not json"], "invalid-input"),
        (vec!["--scope", ""], "invalid-input"),
    ] {
        let outcome = append("I moved to Porto.", &flags);
        assert_eq!(outcome.code, 2, "{flags:?}: {outcome:#?}");
        assert_eq!(
            outcome.json["error"]["kind"], kind,
            "{flags:?}: {outcome:#?}"
        );
    }
    let huge_user = "u".repeat(300);
    let outcome = append("I moved to Porto.", &["--user", &huge_user]);
    assert_eq!(outcome.json["error"]["kind"], "too-large", "{outcome:#?}");
    let log = SqliteThreadLog::open(&fixture.db).expect("thread log");
    let thread = ThreadId::new("t-1").expect("valid");
    assert_eq!(log.inspect_tail(&thread).expect("tail"), Sequence::new(1));
    // The same user's next append lands in the same thread.
    let again = append("My sister Marta is a nurse.", &["--user", "ana"]);
    assert_eq!(again.json["sequence"], 2, "{again:#?}");

    // From a shell: the worker remembers the statements, `memory recall` finds them in ana's
    // namespace, and bea's namespace has nothing.
    fixture.worker_pass();
    let ana = recall(&fixture, &user_namespace("ana"), "Lisbon", "lexical");
    assert!(
        ana.json["text"].as_str().unwrap_or("").contains("Lisbon"),
        "{ana:#?}"
    );
    let bea = recall(&fixture, &user_namespace("bea"), "Lisbon", "lexical");
    assert_eq!(bea.json["passages"], json!([]), "{bea:#?}");
}

#[test]
fn a_thread_from_before_destinations_keeps_working_and_moves_with_rebind() {
    let fixture = Fixture::new();
    let thread = ThreadId::new("old-session").expect("valid");
    {
        // Appended as every thread was before destinations: no binding.
        let log = SqliteThreadLog::open(&fixture.db).expect("thread log");
        log.append(
            &thread,
            NewRecord::user("ana", "I adopted a grey cat named Miso.", 1_700_000_000_000),
        )
        .expect("appended");
    }
    fixture.worker_pass();
    let legacy = json!({"name": "remembering.thread-statements", "version": 1,
                        "identity": {"thread": "old-session"}});
    let before = recall(&fixture, &legacy, "cat Miso", "lexical");
    assert!(
        before.json["text"].as_str().unwrap_or("").contains("Miso"),
        "{before:#?}"
    );
    assert_eq!(status(&fixture)["threads"]["unbound"], 1);
    // The hook resuming that session names a destination: refused until the thread is rebound.
    let argument = json!({"thread": "old-session",
        "record": {"speaker": "ana", "body": {"kind": "user_input", "text": "Miso is three."}}})
    .to_string();
    let refused = fixture.run(&["thread", "append", "--user", "ana", &argument]);
    assert_eq!(refused.json["error"]["kind"], "conflict", "{refused:#?}");

    let rebound = fixture.run(&["thread", "rebind", "old-session", "--user", "ana"]);
    assert_eq!(rebound.code, 0, "{rebound:#?}");
    assert_eq!(rebound.json["generation"], 1, "{rebound:#?}");
    let appended = fixture.run(&["thread", "append", "--user", "ana", &argument]);
    assert_eq!(appended.code, 0, "{appended:#?}");
    fixture.worker_pass();
    // The whole thread is remembered again in the new destination.
    let after = recall(&fixture, &user_namespace("ana"), "cat Miso", "lexical");
    let text = after.json["text"].as_str().unwrap_or("").to_owned();
    assert!(text.contains("grey cat named Miso"), "{after:#?}");
    assert!(text.contains("Miso is three"), "{after:#?}");
    let threads = &status(&fixture)["threads"];
    assert_eq!(threads["unbound"], 0, "{threads}");
    assert_eq!(threads["pending"], 0, "{threads}");
    // Rebinding to the same place changes nothing.
    let same = fixture.run(&["thread", "rebind", "old-session", "--user", "ana"]);
    assert_eq!(same.json["generation"], 1, "{same:#?}");
}

#[test]
fn sessions_through_a_running_server_share_the_users_memory() {
    let fixture = Fixture::new();
    let server = HttpServer::start(&fixture, &every_user(), &[]);
    wait_until_ready(&server.base());
    hook(
        &fixture,
        "ana",
        "prompt",
        "served-a",
        Some("I play the cello in a community orchestra. Thanks!"),
    );
    fixture.worker_pass();
    let next = context(
        &hook(
            &fixture,
            "ana",
            "prompt",
            "served-b",
            Some("What instrument do I play?"),
        ),
        "UserPromptSubmit",
    );
    assert!(next.contains("cello"), "{next}");
    assert!(!next.contains("Thanks"), "{next}");
    let other = context(
        &hook(
            &fixture,
            "bea",
            "prompt",
            "served-c",
            Some("What instrument do I play?"),
        ),
        "UserPromptSubmit",
    );
    assert!(!other.contains("cello"), "{other}");
    // The server bound the threads where a one-shot hook would have.
    let threads = &status(&fixture)["threads"];
    assert_eq!(
        threads["destinations"].as_array().map(Vec::len),
        Some(2),
        "{threads}"
    );
    drop(server);
}

/// A user's server with the README's settings holds that user's namespace only. A second user's
/// hooks beside it find it through the database's discovery file, are refused there, and answer
/// one-shot from the second user's own memory, saying so (they used to answer nothing).
#[test]
fn a_second_users_hooks_beside_the_first_users_server_answer_from_their_own_memory() {
    let fixture = Fixture::new();
    let ana: [(&str, &OsStr); 2] = [("USER", OsStr::new("ana")), ("LOGNAME", OsStr::new("ana"))];
    let server = HttpServer::start(&fixture, &[], &ana);
    wait_until_ready(&server.base());
    let one_shot = |outcome: &Outcome| {
        assert!(
            outcome.stderr.contains("forbidden") && outcome.stderr.contains("answering one-shot"),
            "the hook says why it answered one-shot: {outcome:#?}"
        );
    };
    // Ana's own hooks go through her server and say nothing.
    hook(
        &fixture,
        "ana",
        "prompt",
        "ana-1",
        Some("I keep two beehives on the roof."),
    );
    one_shot(&hook_saying(
        &fixture,
        "bea",
        "prompt",
        "bea-1",
        Some("I grow tomatoes on my balcony."),
    ));
    let bea: [(&str, &OsStr); 2] = [("USER", OsStr::new("bea")), ("LOGNAME", OsStr::new("bea"))];
    let messages = json!({"session": "bea-1", "messages": [
        {"id": "m1", "text": "Tomatoes like a sunny balcony."},
        {"id": "m2", "text": "Water them in the morning."},
    ]})
    .to_string();
    let turn_end = run_hook(&fixture, &["turn-end", "--format", "json"], &messages, &bea);
    one_shot(&turn_end);
    assert_eq!(
        turn_end.json["appended"].as_array().map(Vec::len),
        Some(2),
        "{turn_end:#?}"
    );
    fixture.worker_pass();
    let question = "What do I keep or grow at home?";
    let bea = hook_saying(&fixture, "bea", "prompt", "bea-2", Some(question));
    one_shot(&bea);
    let recalled = context(&bea, "UserPromptSubmit");
    assert!(recalled.contains("tomatoes"), "{bea:#?}");
    assert!(!recalled.contains("beehives"), "{bea:#?}");
    let start = hook_saying(&fixture, "bea", "session-start", "bea-3", None);
    one_shot(&start);
    assert!(
        context(&start, "SessionStart").contains("tomatoes"),
        "{start:#?}"
    );
    let assembled = assembled_turn_saying(&fixture, "bea", "bea-4", "p1", question);
    one_shot(&assembled);
    let seen = contents(&assembled.json).join("\n");
    assert!(
        seen.contains("tomatoes") && !seen.contains("beehives"),
        "{assembled:#?}"
    );
    let ana_recalled = context(
        &hook(&fixture, "ana", "prompt", "ana-2", Some(question)),
        "UserPromptSubmit",
    );
    assert!(ana_recalled.contains("beehives"), "{ana_recalled}");
    assert!(!ana_recalled.contains("tomatoes"), "{ana_recalled}");
    // Every thread is bound to its own user's namespace, whoever appended it.
    let threads = &status(&fixture)["threads"];
    assert_eq!(
        threads["destinations"].as_array().map(Vec::len),
        Some(2),
        "{threads}"
    );
    drop(server);
}

/// A server that is running but does not answer (stopped here) leaves the hook answering one-shot
/// within its deadline, saying so, instead of waiting it out and answering nothing.
#[test]
fn a_hung_server_leaves_the_hook_answering_one_shot() {
    let fixture = Fixture::new();
    let server = HttpServer::start(&fixture, &every_user(), &[]);
    wait_until_ready(&server.base());
    hook(
        &fixture,
        "ana",
        "prompt",
        "hung-a",
        Some("My favourite tree is the cork oak."),
    );
    fixture.worker_pass();
    // Stopped once its indexer has written what the worker remembered: stopped inside that write,
    // it would hold the database the one-shot hook must write to.
    wait_until_indexed(&server.base());
    server.signal("STOP");
    let answered = hook_saying(
        &fixture,
        "ana",
        "prompt",
        "hung-b",
        Some("Which tree do I like best?"),
    );
    server.signal("CONT");
    assert!(
        answered.stderr.contains("did not open a session")
            && answered.stderr.contains("answering one-shot"),
        "{answered:#?}"
    );
    assert!(
        context(&answered, "UserPromptSubmit").contains("cork oak"),
        "{answered:#?}"
    );
    drop(server);
}

#[test]
fn a_correction_in_a_later_session_is_recalled_and_visibly_newer() {
    let fixture = Fixture::new();
    let append = |thread: &str, at: i64, text: &str| {
        say(&fixture, thread, at, text);
    };
    // Week one, then week three; other memories around them, as a real memory has.
    for (index, text) in [
        "My sister Marta works as a nurse in Braga.",
        "I play the cello on Sundays.",
        "My favourite food is grilled sardines.",
        "I work as a software engineer.",
        "My dog is called Pico.",
        "I started learning Japanese this year.",
    ]
    .iter()
    .enumerate()
    {
        append("earlier", 1_767_000_000_000 + index as i64, text);
    }
    // The earlier statement scores a little higher by itself (checked: cosine 0.415 against 0.400),
    // so only the tie rule puts the correction first.
    append(
        "monday",
        1_767_225_600_000,
        "I moved to Madrid last spring.",
    );
    append("later", 1_768_435_200_000, "I moved to Lisbon last spring.");
    fixture.worker_pass();
    let recalled = recall(
        &fixture,
        &user_namespace("ana"),
        "Where did I move last spring?",
        "hybrid",
    );
    let text = recalled.json["text"].as_str().unwrap_or("").to_owned();
    // Both are recalled (time withdraws nothing); the newer statement is cited first, and each
    // shows its own activity time.
    let newer = text.find("Lisbon").expect("the correction is recalled");
    let older = text
        .find("Madrid")
        .expect("the earlier statement is still recalled");
    assert!(newer < older, "the newer statement comes first: {text}");
    assert!(
        text.contains("2026-01-15") || text.contains("1768435200000"),
        "{text}"
    );
}

#[test]
fn a_statement_said_again_in_another_session_is_one_memory_and_survives_forgetting_either() {
    let fixture = Fixture::new();
    let list = || {
        let outcome = fixture.run(&[
            "list",
            "--namespace",
            r#"{"name":"memory.user","version":1,"identity":{"user":"ana"}}"#,
        ]);
        assert_eq!(outcome.code, 0, "{outcome:#?}");
        outcome.json["documents"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let first = say(
        &fixture,
        "week-1",
        1_767_225_600_000,
        "I am allergic to peanuts.",
    );
    let again = say(
        &fixture,
        "week-2",
        1_767_830_400_000,
        "I am allergic to peanuts!",
    );
    fixture.worker_pass();
    let documents = list();
    assert_eq!(documents.len(), 1, "one memory: {documents:#?}");
    let attributions = |document: &Value| {
        document["content"]["attributions"]
            .as_array()
            .map_or(0, Vec::len)
    };
    assert_eq!(attributions(&documents[0]), 2, "{documents:#?}");
    // Forgetting the restatement keeps the fact, attributed to the first statement only.
    let forget = |thread: &str, sequence: u64| {
        let argument =
            json!({"thread": thread, "sequence": sequence, "reason": "asked to"}).to_string();
        let outcome = fixture.run(&["thread", "forget", &argument]);
        assert_eq!(outcome.code, 0, "{outcome:#?}");
    };
    forget("week-2", again);
    fixture.worker_pass();
    let documents = list();
    assert_eq!(documents.len(), 1, "{documents:#?}");
    assert_eq!(attributions(&documents[0]), 1, "{documents:#?}");
    // Forgetting the first statement too leaves nothing.
    forget("week-1", first);
    fixture.worker_pass();
    assert!(list().is_empty());
}

/// A terse answer to the assistant's question is remembered with the question, so a later session
/// finds it by what was asked; forgetting the question takes its words out and keeps the answer.
#[test]
fn an_answer_is_remembered_with_the_question_it_answers_until_the_question_is_forgotten() {
    let fixture = Fixture::new();
    let append = |record: Value| {
        let argument = json!({"thread": "monday", "record": record, "user": "ana"}).to_string();
        let outcome = fixture.run(&["thread", "append", &argument]);
        assert_eq!(outcome.code, 0, "{outcome:#?}");
        outcome.json["sequence"].as_u64().expect("sequence")
    };
    let asked = append(json!({
        "speaker": "assistant", "occurred_at": 1_767_225_600_000_i64,
        "body": {"kind": "assistant_message", "text": "Sounds exciting. Which city are you moving to?"},
    }));
    append(json!({
        "speaker": "ana", "occurred_at": 1_767_225_660_000_i64,
        "body": {"kind": "user_input", "text": "Porto, in March."},
    }));
    fixture.worker_pass();
    let recalled = recall(
        &fixture,
        &user_namespace("ana"),
        "Which city am I moving to?",
        "hybrid",
    );
    let text = recalled.json["text"].as_str().unwrap_or("").to_owned();
    assert!(
        text.contains("Porto, in March. (answering: Which city are you moving to?)"),
        "{text}"
    );
    let argument = json!({"thread": "monday", "sequence": asked, "reason": "asked to"}).to_string();
    let outcome = fixture.run(&["thread", "forget", &argument]);
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    fixture.worker_pass();
    let recalled = recall(&fixture, &user_namespace("ana"), "Porto March", "lexical");
    let text = recalled.json["text"].as_str().unwrap_or("").to_owned();
    assert!(
        text.contains("Porto, in March."),
        "the answer stays: {text}"
    );
    assert!(
        !text.contains("Which city"),
        "the forgotten question is gone: {text}"
    );
}

/// One turn of a generic host that sends its model the assembled context (`memory hook prompt --format
/// json --context-budget`), as `user`.
fn assembled_turn(
    fixture: &Fixture,
    user: &str,
    session: &str,
    prompt_id: &str,
    prompt: &str,
) -> Value {
    let outcome = assembled_turn_saying(fixture, user, session, prompt_id, prompt);
    assert!(outcome.stderr.trim().is_empty(), "{outcome:#?}");
    outcome.json
}

/// [`assembled_turn`], whatever it says on standard error.
fn assembled_turn_saying(
    fixture: &Fixture,
    user: &str,
    session: &str,
    prompt_id: &str,
    prompt: &str,
) -> Outcome {
    let input = json!({"session": session, "prompt": prompt, "prompt_id": prompt_id}).to_string();
    let env: [(&str, &OsStr); 2] = [("USER", OsStr::new(user)), ("LOGNAME", OsStr::new(user))];
    let outcome = run_hook(
        fixture,
        &[
            "prompt",
            "--format",
            "json",
            "--context-budget",
            "3000",
            "--timeout-ms",
            "60000",
        ],
        &input,
        &env,
    );
    assert_eq!(outcome.code, 0, "{outcome:#?}");
    assert!(
        outcome.json["tokens"].as_u64().expect("tokens") <= 3000,
        "{outcome:#?}"
    );
    outcome
}

fn contents(answer: &Value) -> Vec<String> {
    answer["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| message["content"].as_str().expect("content").to_owned())
        .collect()
}

#[test]
fn the_assembled_context_carries_a_users_memory_into_the_next_day_and_to_nobody_else() {
    let fixture = Fixture::new();
    // Day one, one-shot: the session's own history, nothing remembered yet.
    let first = assembled_turn(
        &fixture,
        "ana",
        "ctx-a",
        "a1",
        "I moved to Lisbon last spring.",
    );
    assert_eq!(contents(&first), ["I moved to Lisbon last spring."]);
    assert_eq!(first["memory"]["passages"], 0, "{first:#}");
    let second = assembled_turn(
        &fixture,
        "ana",
        "ctx-a",
        "a2",
        "My sister Marta works as a nurse in Braga.",
    );
    assert_eq!(contents(&second).len(), 2, "{second:#}");
    fixture.worker_pass();

    // Day two, a new session through a running server: its history is its own, and day one comes
    // back as the turn's memory, after the prompt.
    let server = HttpServer::start(&fixture, &every_user(), &[]);
    wait_until_ready(&server.base());
    let prompt = "Which city do I live in now?";
    let day_two = assembled_turn(&fixture, "ana", "ctx-b", "b1", prompt);
    let messages = contents(&day_two);
    assert_eq!(messages[0], prompt, "{day_two:#}");
    assert!(messages[1].contains("Lisbon"), "{day_two:#}");
    assert_eq!(messages.len(), 2, "{day_two:#}");
    assert_eq!(day_two["memory"]["reused"], false);
    // The host retries the turn: nothing is appended again, and the same memory comes back.
    let retried = assembled_turn(&fixture, "ana", "ctx-b", "b1", prompt);
    assert_eq!(retried["appended"], json!([]), "{retried:#}");
    assert_eq!(retried["memory"]["reused"], true, "{retried:#}");
    assert_eq!(retried["messages"], day_two["messages"]);

    // A restart loses no memory: the new server recalls the turn's memory again.
    assert!(server.stop().success());
    let server = HttpServer::start(&fixture, &every_user(), &[]);
    wait_until_ready(&server.base());
    let restarted = assembled_turn(&fixture, "ana", "ctx-b", "b1", prompt);
    assert_eq!(restarted["memory"]["reused"], false, "{restarted:#}");
    assert!(contents(&restarted)[1].contains("Lisbon"), "{restarted:#}");

    // A second user on the same database: none of ana's history or memory.
    let other = assembled_turn(&fixture, "bea", "ctx-c", "c1", prompt);
    let seen = contents(&other).join("\n");
    assert!(
        !seen.contains("Lisbon") && !seen.contains("Marta"),
        "{other:#}"
    );
    assert_eq!(contents(&other)[0], prompt);
    drop(server);
}

/// Whether `value`, as JSON text, says cleo's PIN or password.
fn says_the_secret(value: &Value) -> bool {
    let text = value.to_string();
    text.contains("K-4417") || text.contains("hunter2")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_user_forgets_on_day_one_is_in_no_view_tool_or_summary_on_day_two() {
    let fixture = Fixture::new();
    // Day one: cleo says her PIN and password, then more; her host compacts the window with a summary
    // that repeats the PIN; then she asks to forget it, and her host forgets that record.
    let said = assembled_turn(
        &fixture,
        "cleo",
        "cleo-a",
        "a1",
        "My bank PIN is K-4417 and my password is hunter2.",
    );
    let secret = said["appended"][0].as_u64().expect("the record's sequence");
    assembled_turn(
        &fixture,
        "cleo",
        "cleo-a",
        "a2",
        "My sister Marta works as a nurse in Braga.",
    );
    assembled_turn(
        &fixture,
        "cleo",
        "cleo-a",
        "a3",
        "Please forget my bank details.",
    );
    fixture.worker_pass();
    let client = fixture.serve().await;
    let plan = client
        .success(
            "memory_compact",
            json!({"thread": "cleo-a", "measured_input_tokens": 2_000, "keep_tokens": 0}),
        )
        .await["plan"]
        .clone();
    let folded = client
        .success(
            "memory_compact",
            json!({
                "thread": "cleo-a",
                "measured_input_tokens": 2_000,
                "keep_tokens": 0,
                "summary": "PIN K-4417; sister Marta.",
                "through": plan["through"],
            }),
        )
        .await;
    assert_eq!(folded["compaction"]["outcome"], "folded", "{folded:#}");
    client.close().await;
    let argument =
        json!({"thread": "cleo-a", "sequence": secret, "reason": "cleo asked"}).to_string();
    fixture.run(&["thread", "forget", &argument]).success();
    fixture.worker_pass();

    // Day two, a new session: the turn's memory has her sister, never the PIN.
    let day_two = assembled_turn(
        &fixture,
        "cleo",
        "cleo-b",
        "b1",
        "What do you know about my bank and my sister?",
    );
    assert!(!says_the_secret(&day_two), "{day_two:#}");
    // Day one's thread, in every view and tool: a placeholder, the summary withdrawn.
    let window = fixture.run(&["context", "cleo-a", "--budget", "3000", "--no-memory"]);
    let window = window.success();
    assert!(!says_the_secret(window), "{window:#}");
    assert_eq!(
        window["view"]["summary_withdrawn"],
        json!([folded["sequence"]])
    );
    assert!(
        window["messages"].to_string().contains("Marta"),
        "{window:#}"
    );
    let client = fixture.serve().await;
    for (tool, arguments) in [
        (
            "memory_context",
            json!({"thread": "cleo-a", "budget": 3000}),
        ),
        (
            "memory_history_read",
            json!({"thread": "cleo-a", "include": ["system", "operational"]}),
        ),
        (
            "memory_history_search",
            json!({"thread": "cleo-a", "text": "K-4417", "include": ["system", "operational"]}),
        ),
        (
            "memory_history_search",
            json!({"thread": "cleo-a", "text": "hunter2"}),
        ),
    ] {
        let answer = client.success(tool, arguments).await;
        assert!(!says_the_secret(&answer), "{tool}: {answer:#}");
    }
    client.close().await;
    let recalled = recall(
        &fixture,
        &user_namespace("cleo"),
        "bank PIN password",
        "hybrid",
    );
    assert!(!says_the_secret(&recalled.json), "{recalled:#?}");
}

/// Day one a fact, day two its correction in words, day three the question: the correction is cited
/// first and the fact it corrects is labelled with the correction's citation. Then the correction
/// is taken back ("after all"): the newest claim leads. `served` runs the hooks through a running
/// server instead of one-shot.
fn a_correction_in_words_leads(served: bool) {
    let fixture = Fixture::new();
    let server = served.then(|| {
        let server = HttpServer::start(&fixture, &every_user(), &[]);
        wait_until_ready(&server.base());
        server
    });
    let day = |session: &str, prompt: &str| {
        hook(&fixture, "ana", "prompt", session, Some(prompt));
        fixture.worker_pass();
    };
    let ask = |session: &str| {
        context(
            &hook(
                &fixture,
                "ana",
                "prompt",
                session,
                Some("Remind me which city I live in now?"),
            ),
            "UserPromptSubmit",
        )
    };
    day(
        "day-one",
        "I moved to Lisbon last spring and I work as a luthier.",
    );
    day(
        "day-two",
        "Actually I moved to Madrid, not Lisbon; the Lisbon plan fell through.",
    );
    let answer = ask("day-three");
    let correction = answer.find("Madrid").expect("the correction is recalled");
    let corrected = answer
        .find("luthier")
        .expect("the corrected statement is still recalled: nothing is withdrawn");
    assert!(
        correction < corrected,
        "the correction comes first: {answer}"
    );
    assert!(
        answer.contains("corrected by [memory:1]"),
        "the corrected statement names its correction: {answer}"
    );
    let corrections = &status(&fixture)["threads"]["extraction"]["corrections"];
    assert_eq!(corrections["linked"], 1, "{corrections}");
    // Taken back: the newest claim in words leads the chain.
    day("day-four", "Actually, Lisbon after all.");
    let answer = ask("day-five");
    let after_all = answer
        .find("after all")
        .expect("the newest claim is recalled");
    let madrid = answer.find("Madrid").expect("the chain is recalled");
    assert!(after_all < madrid, "the newest claim comes first: {answer}");
    assert_eq!(
        status(&fixture)["threads"]["extraction"]["corrections"]["linked"],
        2
    );
    drop(server);
}

#[test]
fn a_correction_in_words_is_cited_first_by_the_one_shot_hook() {
    a_correction_in_words_leads(false);
}

#[test]
fn a_correction_in_words_is_cited_first_through_the_server() {
    a_correction_in_words_leads(true);
}

fn passages(outcome: &Outcome) -> Vec<(String, Option<String>)> {
    outcome.json["passages"]
        .as_array()
        .expect("passages")
        .iter()
        .map(|passage| {
            (
                passage["content"]["text"].as_str().unwrap_or("").to_owned(),
                passage["corrected_by"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// The link lives on the correction and is read at recall time, through the same checks as
/// everything else: forgetting the correction's record restores the corrected memory's standing at
/// once (before any worker cleanup), a bare restatement links nothing, and with room for one passage
/// the correction is the one cited.
#[test]
fn forgetting_a_correction_restores_what_it_corrected_at_once() {
    let fixture = Fixture::new();
    let ana = user_namespace("ana");
    say(
        &fixture,
        "day-one",
        1_767_225_600_000,
        "I moved to Lisbon last spring.",
    );
    fixture.worker_pass();
    say(
        &fixture,
        "day-two",
        1_767_312_000_000,
        "I moved to Porto in June.",
    );
    let correction = say(
        &fixture,
        "day-three",
        1_767_398_400_000,
        "Actually I moved to Madrid last spring, not Lisbon.",
    );
    fixture.worker_pass();
    let extraction = &status(&fixture)["threads"]["extraction"];
    assert_eq!(extraction["corrections"]["linked"], 1, "{extraction}");
    let query = "Lisbon Madrid Porto moved spring June";
    let found = passages(&recall(&fixture, &ana, query, "lexical"));
    let madrid = found
        .iter()
        .position(|(text, _)| text.contains("Madrid"))
        .expect("the correction is recalled");
    let lisbon = found
        .iter()
        .position(|(text, _)| text.contains("Lisbon last spring."))
        .expect("the corrected statement is recalled");
    assert_eq!(lisbon, madrid + 1, "{found:?}");
    assert_eq!(
        found[lisbon].1.as_deref(),
        Some(format!("memory:{}", madrid + 1).as_str()),
        "{found:?}"
    );
    // The bare restatement of another move links nothing and names nothing.
    assert!(
        found
            .iter()
            .filter(|(text, _)| text.contains("Porto"))
            .all(|(_, corrected_by)| corrected_by.is_none()),
        "{found:?}"
    );
    // Room for one passage: the correction.
    let one = fixture.call(
        "recall",
        &json!({
            "namespace": ana, "scope": "agent", "query": "Lisbon", "mode": "lexical",
            "limits": {"max_items": 1, "max_bytes": 4000, "max_tokens": 1000, "timeout_ms": 60000},
        }),
    );
    assert_eq!(one.code, 0, "{one:#?}");
    let one = passages(&one);
    assert_eq!(one.len(), 1);
    assert!(one[0].0.contains("Madrid"), "{one:?}");
    // Forget the correction: at once, no worker pass in between.
    let forgotten = fixture.run(&[
        "thread",
        "forget",
        &json!({"thread": "day-three", "sequence": correction, "reason": "wrong"}).to_string(),
    ]);
    assert_eq!(forgotten.code, 0, "{forgotten:#?}");
    let after = passages(&recall(&fixture, &ana, query, "lexical"));
    assert!(
        after.iter().all(|(text, _)| !text.contains("Madrid")),
        "{after:?}"
    );
    assert!(
        after.iter().all(|(_, corrected_by)| corrected_by.is_none()),
        "{after:?}"
    );
}

/// A correction the caller may not read neither shows nor moves anything: it is written (here by
/// hand, as an importer could) into another scope of the same namespace.
#[test]
fn a_correction_outside_the_callers_scope_moves_nothing() {
    let fixture = Fixture::new();
    let mut fact = integration_tests::product::put("lisbon", "Ana moved to Lisbon last spring.");
    fact["content"]["attributions"][0]["activity_at"] = json!(1_767_225_600_000_i64);
    let written = fixture.call("put", &fact);
    assert_eq!(written.code, 0, "{written:#?}");
    let revision = written.json["document"]["revision"].clone();
    for (id, scope) in [("madrid-private", "private"), ("madrid", "assistant")] {
        let mut correction = integration_tests::product::put(
            id,
            "Actually Ana moved to Madrid last spring, not Lisbon.",
        );
        correction["scopes"] = json!([scope]);
        correction["content"]["metadata"] =
            json!({"corrects": {"id": "lisbon", "revision": revision}});
        let written = fixture.call("put", &correction);
        assert_eq!(written.code, 0, "{written:#?}");
        if id == "madrid-private" {
            let recalled = fixture.call(
                "recall",
                &integration_tests::product::recall("Lisbon spring", "lexical", 5),
            );
            assert_eq!(recalled.code, 0, "{recalled:#?}");
            let found = passages(&recalled);
            assert_eq!(
                found,
                [("Ana moved to Lisbon last spring.".to_owned(), None)],
                "an unreadable correction shows or moves something"
            );
        }
    }
    let recalled = fixture.call(
        "recall",
        &integration_tests::product::recall("Lisbon spring", "lexical", 5),
    );
    let found = passages(&recalled);
    assert!(found[0].0.contains("Madrid"), "{found:?}");
    assert_eq!(found[1].1.as_deref(), Some("memory:1"), "{found:?}");
}

/// A correction worded unlike what it corrects links only when the worker judges likeness by the
/// model (`--corrections model`); by default it is kept, counted as refused, and moves nothing. With
/// `--corrections off` nothing is even tried.
#[test]
fn a_correction_in_other_words_links_through_the_model() {
    let ana = user_namespace("ana");
    let query = "What is Ana allergic to? penicillin shellfish allergy";
    let run = |flags: &[&str]| {
        let fixture = Fixture::new();
        say(
            &fixture,
            "day-one",
            1_767_225_600_000,
            "I'm allergic to shellfish.",
        );
        fixture.worker_pass_with(flags);
        say(
            &fixture,
            "day-two",
            1_767_312_000_000,
            "Correction on my allergy: it is penicillin.",
        );
        fixture.worker_pass_with(flags);
        let corrections = status(&fixture)["threads"]["extraction"]["corrections"].clone();
        (
            corrections,
            passages(&recall(&fixture, &ana, query, "lexical")),
        )
    };
    let (words, found) = run(&[]);
    assert_eq!(words, json!({"linked": 0, "refused": 1}));
    assert!(found.iter().all(|(_, by)| by.is_none()), "{found:?}");
    let (off, _) = run(&["--corrections", "off"]);
    assert_eq!(off, json!({"linked": 0, "refused": 0}));
    let (model, found) = run(&["--corrections", "model"]);
    assert_eq!(model, json!({"linked": 1, "refused": 0}));
    assert!(found[0].0.contains("penicillin"), "{found:?}");
    assert!(found[1].0.contains("shellfish"), "{found:?}");
    assert_eq!(found[1].1.as_deref(), Some("memory:1"), "{found:?}");
}
