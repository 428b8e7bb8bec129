//! `memory hook` end to end: recorded Claude Code hook inputs (unknown extra fields included) and the
//! generic JSON form fed to the built binary, on a real SQLite file with the real model; the
//! remembering worker binary turns the prompts into memory in between.

use std::ffi::OsStr;

use integration_tests::hook::{
    additional_context, append_transcript, assert_silent_failure, claude_input, conversation,
    run_hook, run_hook_on, thread_records,
};
use integration_tests::product::{Fixture, embedder_only_assets};
use memory_core::{ApproximateTokenCounter, TokenCounter as _};
use serde_json::json;

fn prompt(
    fixture: &Fixture,
    session: &str,
    text: &str,
    args: &[&str],
) -> integration_tests::product::Outcome {
    let transcript = fixture.dir.path().join(format!("{session}.jsonl"));
    let input = claude_input("user-prompt-submit.json", session, &transcript, Some(text));
    let mut all = vec!["prompt"];
    all.extend_from_slice(args);
    run_hook(fixture, &all, &input, &[])
}

#[test]
fn a_prompt_lands_once_across_a_retry_and_the_third_prompt_recalls_the_first_two_within_limits() {
    let fixture = Fixture::new();
    let session = "walk-through";
    let first = prompt(&fixture, session, "I moved to Lisbon last spring.", &[]);
    assert_eq!(first.code, 0, "{first:#?}");
    // Nothing is remembered yet: no block, no output at all.
    assert!(first.stdout.is_empty(), "{first:#?}");
    // The host retries the same hook: the prompt is already in the thread log.
    let retried = prompt(&fixture, session, "I moved to Lisbon last spring.", &[]);
    assert_eq!(retried.code, 0, "{retried:#?}");
    let second = prompt(
        &fixture,
        session,
        "My sister Ana grows tomatoes in Porto.",
        &[],
    );
    assert_eq!(second.code, 0, "{second:#?}");
    assert_eq!(
        conversation(&fixture.db, session),
        [
            "user: I moved to Lisbon last spring.",
            "user: My sister Ana grows tomatoes in Porto."
        ]
    );
    let records = thread_records(&fixture.db, session);
    assert!(
        records.iter().all(|record| record
            .record
            .opaque_cursor
            .as_deref()
            .is_some_and(|cursor| cursor.starts_with("memory-hook/v1 prompt "))),
        "each record carries its prompt identity: {records:#?}"
    );
    let speaker = std::env::var("USER").unwrap_or_else(|_| "user".to_owned());
    assert!(
        records
            .iter()
            .all(|record| record.record.speaker == speaker || std::env::var("USER").is_err())
    );

    fixture.worker_pass();
    let third = prompt(
        &fixture,
        session,
        "Where did I move, and what does my sister grow?",
        &[
            "--max-items",
            "4",
            "--max-bytes",
            "1500",
            "--max-tokens",
            "400",
        ],
    );
    let context = additional_context(&third, "UserPromptSubmit");
    assert!(context.contains("Lisbon"), "{context}");
    assert!(context.contains("tomatoes"), "{context}");
    assert!(context.len() <= 1_500, "{} bytes", context.len());
    assert!(ApproximateTokenCounter.count(context) <= 400);
    assert!(context.matches("[memory:").count() <= 4, "{context}");
    // The third prompt itself is recorded; nothing recalled was written back to the thread.
    assert_eq!(conversation(&fixture.db, session).len(), 3);

    // Tight limits: the block still fits, header included.
    let tight = prompt(
        &fixture,
        session,
        "Where did I move?",
        &["--max-bytes", "300", "--max-tokens", "90"],
    );
    if !tight.stdout.is_empty() {
        let context = additional_context(&tight, "UserPromptSubmit");
        assert!(context.len() <= 300, "{} bytes: {context}", context.len());
        assert!(ApproximateTokenCounter.count(context) <= 90);
    }
}

#[test]
fn a_forgotten_statement_is_never_in_the_block() {
    let fixture = Fixture::new();
    let session = "forgetting";
    for text in [
        "I work as a nurse in Braga.",
        "My bicycle is painted orange.",
    ] {
        assert_eq!(prompt(&fixture, session, text, &[]).code, 0);
    }
    fixture.worker_pass();
    let before = prompt(
        &fixture,
        session,
        "What colour is my bicycle, and where do I work?",
        &[],
    );
    assert!(additional_context(&before, "UserPromptSubmit").contains("orange"));
    let forgotten = fixture.run(&[
        "thread",
        "forget",
        &json!({"thread": session, "sequence": 2, "reason": "the user asked"}).to_string(),
    ]);
    forgotten.success();
    let after = prompt(
        &fixture,
        session,
        "What colour is my bicycle, and where do I work?",
        &[],
    );
    assert_eq!(after.code, 0, "{after:#?}");
    assert!(!after.stdout.contains("orange"), "{after:#?}");
    assert!(!after.stdout.contains("bicycle"), "{after:#?}");
}

#[test]
fn a_broken_database_or_a_missing_model_prints_nothing_exits_0_and_is_shown_by_status() {
    let fixture = Fixture::new();
    let transcript = fixture.dir.path().join("t.jsonl");
    let input = claude_input(
        "user-prompt-submit.json",
        "broken",
        &transcript,
        Some("hello there"),
    );

    let garbage = fixture.dir.path().join("garbage.sqlite");
    std::fs::write(&garbage, vec![0x5a_u8; 8192]).expect("garbage file");
    let broken = run_hook_on(&garbage, &["prompt"], &input, &[]);
    assert_silent_failure(&broken);

    let empty_assets = tempfile::tempdir().expect("empty assets folder");
    let no_model = run_hook(
        &fixture,
        &["prompt"],
        &input,
        &[("MEMORY_ASSETS_DIR", empty_assets.path().as_os_str())],
    );
    let stderr = assert_silent_failure(&no_model);
    assert!(stderr.contains("unavailable"), "{stderr}");

    let not_json = run_hook(&fixture, &["prompt"], "{not json", &[]);
    assert_silent_failure(&not_json);

    let status = fixture.run(&["status"]);
    let errors = &status.success()["hooks"]["errors"];
    assert_eq!(errors["by_kind"]["unavailable"]["count"], 1, "{errors:#}");
    assert_eq!(errors["by_kind"]["unavailable"]["last"]["hook"], "prompt");
    assert_eq!(errors["by_kind"]["invalid-input"]["count"], 1, "{errors:#}");
    assert_eq!(errors["by_kind"]["invalid-input"]["last"]["hook"], "input");
}

#[test]
fn the_one_shot_hook_loads_no_rerank_model_unless_asked() {
    let fixture = Fixture::new();
    let session = "no-reranker";
    let said = prompt(&fixture, session, "I moved to Lisbon last spring.", &[]);
    assert_eq!(said.code, 0, "{said:#?}");
    fixture.worker_pass();
    let assets = embedder_only_assets();
    let transcript = fixture.dir.path().join(format!("{session}.jsonl"));
    let ask = |args: &[&str]| {
        let input = claude_input(
            "user-prompt-submit.json",
            session,
            &transcript,
            Some("Where did I move?"),
        );
        let mut all = vec!["prompt"];
        all.extend_from_slice(args);
        run_hook(
            &fixture,
            &all,
            &input,
            &[("MEMORY_ASSETS_DIR", assets.path().as_os_str())],
        )
    };
    // By default the one-shot path reranks without the model, so its absence changes nothing.
    let answered = ask(&[]);
    assert!(
        additional_context(&answered, "UserPromptSubmit").contains("Lisbon"),
        "{answered:#?}"
    );
    // Asked to load it, the hook needs its files: a hook failure naming the fetch command.
    let asked = ask(&["--rerank-model", "on"]);
    let stderr = assert_silent_failure(&asked);
    assert!(stderr.contains("scripts/fetch-assets.sh"), "{stderr}");
}

/// A setting or command line the hook cannot run with is a hook failure like any other: exit 0,
/// nothing on standard output (a host reads a prompt hook's exit 2 as "block the prompt"), the
/// reason on standard error and in the error log; nothing is appended.
#[test]
fn a_bad_setting_or_hook_command_line_prints_nothing_exits_0_and_is_shown_by_status() {
    let fixture = Fixture::new();
    let transcript = fixture.dir.path().join("t.jsonl");
    let input = claude_input(
        "user-prompt-submit.json",
        "misconfigured",
        &transcript,
        Some("I like kiwis."),
    );
    let settings: [(&str, &str); 4] = [
        ("MEMORY_MAX_CHUNKS", "0"),
        ("MEMORY_HNSW_EF_SEARCH", "0"),
        ("MEMORY_MAX_TOOL_OUTPUT_BYTES", "1000"),
        ("MEMORY_MODEL_URL", "http://127.0.0.1:9/v1"),
    ];
    for (name, value) in settings {
        let outcome = run_hook(&fixture, &["prompt"], &input, &[(name, OsStr::new(value))]);
        let stderr = assert_silent_failure(&outcome);
        assert!(stderr.contains("invalid-input"), "{name}={value}: {stderr}");
    }
    // Refused by the command line's parser, before the database is known: said on standard error
    // only.
    let unparsed = [
        run_hook(&fixture, &["prompt", "--mode", "bogus"], &input, &[]),
        run_hook(
            &fixture,
            &["prompt"],
            &input,
            &[("MEMORY_COMPACT_VECTORS", OsStr::new("maybe"))],
        ),
    ];
    for outcome in &unparsed {
        assert!(assert_silent_failure(outcome).contains("command line"));
    }
    // Another command that merely has `hook` among its arguments is refused as commands are.
    let other = fixture.run(&["put", "hook", "--bogus"]);
    assert_eq!(other.code, 2, "{other:#?}");
    assert!(
        other.refused("invalid-input").contains("command line"),
        "{other:#?}"
    );
    let status = fixture.run(&["status"]);
    let errors = &status.success()["hooks"]["errors"]["by_kind"];
    assert_eq!(errors["invalid-input"]["count"], 4, "{errors:#}");
    assert_eq!(
        errors["invalid-input"]["last"]["hook"], "prompt",
        "{errors:#}"
    );
    assert!(
        thread_records(&fixture.db, "misconfigured").is_empty(),
        "a refused hook appends nothing"
    );
}

/// An empty answer whose passages matched but did not fit the limits is logged as such, not as
/// "no passage matched": the limits are what to raise.
#[test]
fn passages_left_out_by_the_limits_are_not_logged_as_no_match() {
    let fixture = Fixture::new();
    let said = prompt(
        &fixture,
        "limits-a",
        "My grandmother grew apricots in Alentejo every summer.",
        &[],
    );
    assert_eq!(said.code, 0, "{said:#?}");
    fixture.worker_pass();
    let squeezed = prompt(
        &fixture,
        "limits-b",
        "Where did my grandmother grow apricots?",
        &["--max-bytes", "100"],
    );
    assert_eq!(squeezed.code, 0, "{squeezed:#?}");
    assert!(squeezed.stdout.is_empty(), "{squeezed:#?}");
    let status = fixture.run(&["status"]);
    let errors = &status.success()["hooks"]["errors"]["by_kind"];
    let message = errors["no-match"]["last"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("matching passages") && message.contains("--max-bytes"),
        "{errors:#}"
    );
}

#[test]
fn turn_end_appends_each_assistant_message_once_and_refuses_a_truncated_or_rotated_transcript() {
    let fixture = Fixture::new();
    let session = "fixture-session";
    let transcript = fixture.dir.path().join("transcript.jsonl");
    let stop = claude_input("stop.json", session, &transcript, None);
    append_transcript(&transcript, "transcript-turn-1.jsonl");
    let first_turn = [
        "assistant: Let me look at the build files.",
        "assistant: It is a Cargo project: tests run with `cargo test`.",
    ];
    for _ in 0..2 {
        let outcome = run_hook(&fixture, &["turn-end"], &stop, &[]);
        assert_eq!(outcome.code, 0, "{outcome:#?}");
        assert!(
            outcome.stdout.is_empty(),
            "Stop prints nothing: {outcome:#?}"
        );
        assert_eq!(conversation(&fixture.db, session), first_turn);
    }
    append_transcript(&transcript, "transcript-turn-2.jsonl");
    // The event name comes from the input when no subcommand is given.
    for _ in 0..2 {
        let outcome = run_hook(&fixture, &[], &stop, &[]);
        assert_eq!(outcome.code, 0, "{outcome:#?}");
        let mut expected = first_turn.to_vec();
        expected.push("assistant: All 12 tests pass.\n\nNothing failed.");
        assert_eq!(conversation(&fixture.db, session), expected);
    }
    let records = thread_records(&fixture.db, session).len();

    let full = std::fs::read(&transcript).expect("transcript");
    std::fs::write(&transcript, &full[..full.len() / 2]).expect("truncated");
    let truncated = run_hook(&fixture, &["turn-end"], &stop, &[]);
    assert!(
        assert_silent_failure(&truncated).contains("truncated"),
        "{truncated:#?}"
    );

    let mut rotated = full.clone();
    rotated.reverse();
    std::fs::write(&transcript, &rotated).expect("rotated");
    let replaced = run_hook(&fixture, &["turn-end"], &stop, &[]);
    assert!(
        assert_silent_failure(&replaced).contains("rotated"),
        "{replaced:#?}"
    );
    assert_eq!(thread_records(&fixture.db, session).len(), records);

    let status = fixture.run(&["status"]);
    let errors = &status.success()["hooks"]["errors"]["by_kind"];
    assert_eq!(errors["transcript-truncated"]["count"], 1, "{errors:#}");
    assert_eq!(errors["transcript-rotated"]["count"], 1, "{errors:#}");
    assert_eq!(errors["transcript-rotated"]["last"]["hook"], "turn-end");
}

#[test]
fn the_generic_form_answers_its_documented_fields_and_appends_once() {
    let fixture = Fixture::new();
    let namespace = json!({"name": "generic", "version": 1, "identity": {"team": "t"}});
    let namespace_text = namespace.to_string();
    let env: [(&str, &OsStr); 2] = [
        ("MEMORY_NAMESPACE", OsStr::new(&namespace_text)),
        ("MEMORY_SCOPE", OsStr::new("agent")),
    ];
    let input =
        json!({"event": "prompt", "session": "g-1", "prompt": "The deploy key rotates on Fridays.",
        "prompt_id": "turn-7", "host": {"name": "other-agent"}})
        .to_string();
    let first = run_hook(
        &fixture,
        &["--format", "json", "--mode", "lexical"],
        &input,
        &env,
    );
    let answer = first.success();
    assert_eq!(answer["event"], "prompt");
    assert_eq!(answer["context"], "");
    assert_eq!(answer["passages"], json!([]));
    assert_eq!(answer["appended"], json!([1]));
    assert_eq!(answer["already_recorded"], 0);
    let retried = run_hook(
        &fixture,
        &["--format", "json", "--mode", "lexical"],
        &input,
        &env,
    );
    assert_eq!(retried.success()["appended"], json!([]));
    assert_eq!(retried.json["already_recorded"], 1);

    let messages = json!({"event": "turn-end", "session": "g-1", "messages": [
        {"id": "m1", "text": "Noted: Fridays."}, {"id": "m2", "text": "Anything else?", "occurred_at": 5}]})
    .to_string();
    let appended = run_hook(&fixture, &["--format", "json"], &messages, &env);
    assert_eq!(appended.success()["appended"], json!([2, 3]));
    let again = run_hook(&fixture, &["--format", "json"], &messages, &env);
    assert_eq!(again.success()["appended"], json!([]));
    assert_eq!(again.json["already_recorded"], 2);
    assert_eq!(
        conversation(&fixture.db, "g-1"),
        [
            "user: The deploy key rotates on Fridays.",
            "assistant: Noted: Fridays.",
            "assistant: Anything else?"
        ]
    );

    // The configured namespace is recalled from: a document put there comes back, cited.
    let put = json!({"namespace": namespace, "id": "deploy", "operation_id": "op-deploy",
        "expected_revision": null, "locator": "wiki:deploy", "scopes": ["agent"],
        "content": {"text": "Deploy keys rotate every Friday at noon.", "attributions": [],
            "metadata": {}, "recorded_at": 1, "extracted_at": 1}});
    fixture.call("put", &put).success();
    let recall = json!({"event": "session-start", "session": "g-2", "query": "deploy keys rotate"})
        .to_string();
    let recalled = run_hook(
        &fixture,
        &["--format", "json", "--mode", "lexical"],
        &recall,
        &env,
    );
    let answer = recalled.success();
    assert!(
        answer["context"]
            .as_str()
            .is_some_and(|context| context.contains("Friday at noon")),
        "{answer:#}"
    );
    assert_eq!(answer["passages"][0]["source"]["id"], "deploy");
    assert!(
        thread_records(&fixture.db, "g-2").is_empty(),
        "session-start appends nothing"
    );
}

#[test]
fn session_start_recalls_for_the_sessions_latest_prompts() {
    let fixture = Fixture::new();
    let session = "resumed";
    assert_eq!(
        prompt(
            &fixture,
            session,
            "Our cat is called Miso.",
            &["--mode", "lexical"]
        )
        .code,
        0
    );
    fixture.worker_pass();
    let transcript = fixture.dir.path().join("resumed.jsonl");
    let input = claude_input("session-start.json", session, &transcript, None);
    let outcome = run_hook(
        &fixture,
        &["session-start", "--mode", "lexical"],
        &input,
        &[],
    );
    let context = additional_context(&outcome, "SessionStart");
    assert!(context.contains("Miso"), "{context}");
    // A fresh session of the same user starts with the user's memory; another user's, with nothing.
    let fresh = claude_input("session-start.json", "fresh", &transcript, None);
    let same_user = run_hook(&fixture, &["session-start"], &fresh, &[]);
    assert!(
        additional_context(&same_user, "SessionStart").contains("Miso"),
        "{same_user:#?}"
    );
    let nothing = run_hook(&fixture, &["session-start", "--user", "bea"], &fresh, &[]);
    assert_eq!(nothing.code, 0);
    assert!(nothing.stdout.is_empty(), "{nothing:#?}");
}

#[test]
fn a_fresh_session_starts_with_the_namespaces_newest_documents_within_limits() {
    let fixture = Fixture::new();
    let namespace = json!({"name": "team-notes", "version": 1, "identity": {"team": "t"}});
    let namespace_text = namespace.to_string();
    let env: [(&str, &OsStr); 2] = [
        ("MEMORY_NAMESPACE", OsStr::new(&namespace_text)),
        ("MEMORY_SCOPE", OsStr::new("agent")),
    ];
    let put = |id: &str, text: &str, scope: &str| {
        let put = json!({"namespace": namespace, "id": id, "operation_id": format!("op-{id}"),
            "expected_revision": null, "locator": format!("wiki:{id}"), "scopes": [scope],
            "content": {"text": text, "attributions": [], "metadata": {}, "recorded_at": 1,
                "extracted_at": 1}});
        fixture.call("put", &put).success().clone()
    };
    for day in 1..=6 {
        put(
            &format!("note-{day}"),
            &format!("Standup note {day}: the team shipped item {day}."),
            "agent",
        );
    }
    // Newer, but not visible through the hook's scope.
    put("secret", "Payroll runs on the 25th.", "finance");
    // The newest visible note is withdrawn: it must not come back.
    let newest = put("note-7", "Standup note 7: withdrawn later.", "agent");
    let withdraw = json!({"namespace": namespace, "id": "note-7", "operation_id": "op-withdraw-7",
        "expected_revision": newest["document"]["revision"], "reason": "wrong"});
    fixture.call("withdraw", &withdraw).success();

    let transcript = fixture.dir.path().join("new.jsonl");
    let input = claude_input("session-start.json", "new-session", &transcript, None);
    let outcome = run_hook(
        &fixture,
        &["session-start", "--max-items", "3"],
        &input,
        &env,
    );
    let context = additional_context(&outcome, "SessionStart");
    for day in [6, 5, 4] {
        assert!(
            context.contains(&format!("Standup note {day}:")),
            "{context}"
        );
    }
    for absent in ["Standup note 3:", "withdrawn later", "Payroll"] {
        assert!(!context.contains(absent), "{absent} in {context}");
    }
    // Newest first.
    let position = |day: u32| context.find(&format!("Standup note {day}:"));
    assert!(
        position(6) < position(5) && position(5) < position(4),
        "{context}"
    );

    // The generic form says which documents, in the same order.
    let generic = json!({"event": "session-start", "session": "g-new"}).to_string();
    let answer = run_hook(
        &fixture,
        &["--format", "json", "--max-items", "2"],
        &generic,
        &env,
    );
    let ids: Vec<_> = answer.success()["passages"]
        .as_array()
        .map(|passages| {
            passages
                .iter()
                .map(|passage| passage["source"]["id"].clone())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(ids, [json!("note-6"), json!("note-5")]);
}

#[test]
fn a_running_server_answers_the_hook_and_a_stale_discovery_file_falls_back_to_one_shot() {
    let fixture = Fixture::new();
    let session = "served";
    assert_eq!(
        prompt(
            &fixture,
            session,
            "The boiler was serviced in March.",
            &["--mode", "lexical"]
        )
        .code,
        0
    );
    fixture.worker_pass();
    // Stopped when dropped, so a failing assertion leaves no server behind.
    let server = integration_tests::serving::HttpServer::start(&fixture, &[], &[]);
    let discovery = server.discovery.clone();
    assert!(discovery.exists(), "the server publishes its address");
    // The server publishes its address while it loads the model; the hook's deadline is for the
    // hook's own work, so wait until it is ready (a loaded machine may take seconds).
    integration_tests::serving::wait_until_ready(&server.base());
    // Without the model files the hook could not recall one-shot: an answer comes from the server.
    let no_assets = tempfile::tempdir().expect("empty assets folder");
    let transcript = fixture.dir.path().join("served.jsonl");
    let input = claude_input(
        "user-prompt-submit.json",
        session,
        &transcript,
        Some("When was the boiler serviced?"),
    );
    let env = [("MEMORY_ASSETS_DIR", no_assets.path().as_os_str())];
    let served = run_hook(&fixture, &["prompt"], &input, &env);
    assert!(
        additional_context(&served, "UserPromptSubmit").contains("March"),
        "{served:#?}"
    );
    let retried = run_hook(&fixture, &["prompt"], &input, &env);
    assert_eq!(retried.code, 0, "{retried:#?}");
    assert_eq!(
        conversation(&fixture.db, session).len(),
        2,
        "the server appended the prompt once"
    );
    server.stop();

    // A killed server leaves its file behind: the hook says so and answers one-shot.
    std::fs::write(
        &discovery,
        r#"{"version":1,"url":"http://127.0.0.1:9/mcp","pid":4000000,"token":null}"#,
    )
    .expect("stale discovery file");
    let one_shot = run_hook(&fixture, &["prompt", "--mode", "lexical"], &input, &[]);
    assert!(
        additional_context(&one_shot, "UserPromptSubmit").contains("March"),
        "{one_shot:#?}"
    );
    assert!(one_shot.stderr.contains("one-shot"), "{one_shot:#?}");
    assert_eq!(conversation(&fixture.db, session).len(), 2);
}
