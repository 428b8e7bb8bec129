//! End-to-end tests of the `memory` command: every operation, every error kind it can provoke, bad
//! input (typed refusal, nothing written) and `import`.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{Fixture, get, put, recall, run_with_stdin, withdraw};
use serde_json::{Value, json};

fn revision_of(outcome: &common::Outcome) -> String {
    outcome.json["revision"]
        .as_str()
        .expect("a revision")
        .to_owned()
}

#[test]
fn put_replay_replace_get_withdraw_round_trip() {
    let fixture = Fixture::new();
    assert_eq!(fixture.head(), 0);

    let created = fixture.call(
        "put",
        &put("tea", "op-1", None, "The user prefers green tea."),
    );
    created.assert_success();
    assert_eq!(created.json["replayed"], false);
    let first = revision_of(&created);
    let document = &created.json["document"];
    assert_eq!(document["revision"], first.as_str());
    assert_eq!(document["predecessor"], Value::Null);
    assert_eq!(document["id"], "tea");
    assert_eq!(document["scopes"], json!(["assistant"]));
    assert_eq!(document["withdrawn"], Value::Null);
    // The namespace comes back canonical: identity keys sorted, arrays kept in order.
    assert_eq!(
        document["namespace"],
        json!({"name": "notes", "version": 1, "identity": {"team": ["a", "b"], "user": "u1"}})
    );
    assert_eq!(
        document["content"]["metadata"]["nested"]["a"],
        json!([true, null])
    );

    let replayed = fixture.call(
        "put",
        &put("tea", "op-1", None, "The user prefers green tea."),
    );
    replayed.assert_success();
    assert_eq!(replayed.json["replayed"], true);
    assert_eq!(revision_of(&replayed), first);
    assert_eq!(fixture.head(), 1, "a replay writes nothing");

    let replaced = fixture.call(
        "put",
        &put("tea", "op-2", Some(&first), "The user now drinks oolong."),
    );
    replaced.assert_success();
    let second = revision_of(&replaced);
    assert_ne!(second, first);
    assert_eq!(replaced.json["document"]["predecessor"], first.as_str());

    let read = fixture.call("get", &get("tea"));
    read.assert_success();
    assert_eq!(read.json["document"]["revision"], second.as_str());
    assert_eq!(
        read.json["document"]["content"]["text"],
        "The user now drinks oolong."
    );

    let withdrawn = fixture.call("withdraw", &withdraw("tea", "op-3", &second));
    withdrawn.assert_success();
    assert_eq!(withdrawn.json["replayed"], false);
    assert_eq!(
        withdrawn.json["document"]["withdrawn"]["reason"],
        "the user asked to forget it"
    );
    // Who asked: the command line's user (`MEMORY_USER`, else the OS user).
    assert!(
        withdrawn.json["document"]["withdrawn"]["by"]
            .as_str()
            .is_some_and(|by| by.starts_with("user:")),
        "{}",
        withdrawn.json
    );
    assert_eq!(withdrawn.json["document"]["content"]["text"], "");

    let gone = fixture.call("get", &get("tea"));
    gone.assert_success();
    assert_eq!(gone.json, json!({"document": null}));
    let never = fixture.call("get", &get("coffee"));
    never.assert_success();
    assert_eq!(never.json, json!({"document": null}));
    assert_eq!(fixture.head(), 3);
}

#[test]
fn argument_is_read_from_standard_input_with_a_dash() {
    let fixture = Fixture::new();
    let argument = put("tea", "op-1", None, "green tea").to_string();
    let created = fixture.call_stdin("put", argument.as_bytes());
    created.assert_success();
    let read = fixture.call_stdin("get", get("tea").to_string().as_bytes());
    read.assert_success();
    assert_eq!(read.json["document"]["content"]["text"], "green tea");
    // Without an argument, an empty standard input stands for `{}`.
    let synced = run_with_stdin(Some(&fixture.db), &["sync"], None);
    synced.assert_success();
    assert_eq!(synced.json, json!({"indexed": 1, "unindexed": 0}));
}

#[test]
fn write_refusals_have_their_kinds_and_change_nothing() {
    let fixture = Fixture::new();
    let created = fixture.call("put", &put("tea", "op-1", None, "green tea"));
    created.assert_success();
    let current = revision_of(&created);

    // Creating again, or replacing a stale revision, is a conflict.
    fixture
        .call("put", &put("tea", "op-2", None, "black tea"))
        .assert_refused("conflict");
    fixture
        .call("put", &put("tea", "op-3", Some("r-stale"), "black tea"))
        .assert_refused("conflict");
    // The same operation id with another command.
    fixture
        .call("put", &put("tea", "op-1", None, "white tea"))
        .assert_refused("operation-conflict");
    // Withdrawing what does not exist.
    fixture
        .call("withdraw", &withdraw("coffee", "op-4", "r-any"))
        .assert_refused("not-found");
    assert_eq!(fixture.head(), 1);
    let read = fixture.call("get", &get("tea"));
    assert_eq!(read.json["document"]["content"]["text"], "green tea");

    fixture
        .call("withdraw", &withdraw("tea", "op-5", &current))
        .assert_success();
    // Withdrawal is terminal.
    fixture
        .call("put", &put("tea", "op-6", None, "green tea again"))
        .assert_refused("withdrawn");
    fixture
        .call("withdraw", &withdraw("tea", "op-7", &current))
        .assert_refused("withdrawn");
    assert_eq!(fixture.head(), 2);
}

#[test]
fn bad_input_is_refused_as_invalid_input_and_nothing_is_written() {
    let fixture = Fixture::new();
    let valid = put("tea", "op-1", None, "green tea");
    let mut wrong_type = valid.clone();
    wrong_type["scopes"] = json!("assistant");
    let mut wrong_number = valid.clone();
    wrong_number["content"]["recorded_at"] = json!("yesterday");
    let mut unknown_top = valid.clone();
    unknown_top["extra"] = json!(1);
    let mut unknown_nested = valid.clone();
    unknown_nested["content"]["attributions"][0]["mood"] = json!("happy");
    let mut missing = valid.clone();
    missing.as_object_mut().unwrap().remove("operation_id");
    let mut empty_id = valid.clone();
    empty_id["id"] = json!("");
    let mut control_scope = valid.clone();
    control_scope["scopes"] = json!(["a\u{7}b"]);
    let mut zero_version = valid.clone();
    zero_version["namespace"]["version"] = json!(0);
    let mut negative_version = valid.clone();
    negative_version["namespace"]["version"] = json!(-1);
    let mut unsafe_integer = valid.clone();
    unsafe_integer["namespace"]["identity"] = json!({"n": 9007199254740993_u64});

    for (name, argument) in [
        ("wrong type", wrong_type),
        ("wrong number", wrong_number),
        ("unknown top-level field", unknown_top),
        ("unknown nested field", unknown_nested),
        ("missing field", missing),
        ("empty id", empty_id),
        ("control character in scope", control_scope),
        ("zero namespace version", zero_version),
        ("negative namespace version", negative_version),
        ("unsafe integer in identity", unsafe_integer),
    ] {
        let outcome = fixture.call("put", &argument);
        assert_eq!(
            outcome.json["error"]["kind"], "invalid-input",
            "{name}: {outcome:#?}"
        );
        outcome.assert_refused("invalid-input");
    }
    for text in ["{", "[]", "null", "{\"namespace\": }", "{} {}"] {
        fixture.run(&["put", text]).assert_refused("invalid-input");
    }
    fixture
        .run(&["sync", "{\"wait\": true}"])
        .assert_refused("invalid-input");
    // Refused before the store is opened: not even the database file was created.
    assert!(!fixture.db.exists(), "refused input created the database");

    // Rules memory-core checks while preparing a write refuse it before the transaction.
    let mut duplicate_scope = valid.clone();
    duplicate_scope["scopes"] = json!(["a", "a"]);
    fixture
        .call("put", &duplicate_scope)
        .assert_refused("invalid-input");
    assert_eq!(fixture.head(), 0);
}

#[test]
fn oversized_values_are_too_large_and_nothing_is_written() {
    let fixture = Fixture::new();
    let mut long_id = put("tea", "op-1", None, "green tea");
    long_id["id"] = json!("i".repeat(1_025));
    let mut long_operation = put("tea", "op-1", None, "green tea");
    long_operation["operation_id"] = json!("o".repeat(257));
    let mut long_scope = put("tea", "op-1", None, "green tea");
    long_scope["scopes"] = json!(["s".repeat(257)]);
    let mut long_locator = put("tea", "op-1", None, "green tea");
    long_locator["locator"] = json!("l".repeat(4_097));
    let mut deep_identity = put("tea", "op-1", None, "green tea");
    let mut identity = json!(1);
    for _ in 0..17 {
        identity = json!([identity]);
    }
    deep_identity["namespace"]["identity"] = identity;
    let mut wide_identity = put("tea", "op-1", None, "green tea");
    wide_identity["namespace"]["identity"] = json!(vec![0; 129]);

    for (name, argument) in [
        ("id", long_id),
        ("operation id", long_operation),
        ("scope", long_scope),
        ("locator", long_locator),
        ("identity depth", deep_identity),
        ("identity width", wide_identity),
    ] {
        let outcome = fixture.call_stdin("put", argument.to_string().as_bytes());
        assert_eq!(
            outcome.json["error"]["kind"], "too-large",
            "{name}: {outcome:#?}"
        );
        outcome.assert_refused("too-large");
    }

    // Text above 16 Mi UTF-16 units of canonical JSON is refused before anything is written.
    let huge_text = "x".repeat(16 * 1024 * 1024 + 1);
    let huge = put("tea", "op-1", None, &huge_text);
    fixture
        .call_stdin("put", huge.to_string().as_bytes())
        .assert_refused("too-large");
    assert_eq!(fixture.head(), 0);

    // More than 64 MiB of input is refused before it is all read.
    let flood = vec![b' '; 64 * 1024 * 1024 + 1];
    fixture
        .call_stdin("put", &flood)
        .assert_refused("too-large");
    assert_eq!(fixture.head(), 0);
    fixture
        .call("put", &put("tea", "op-1", None, "green tea"))
        .assert_success();
}

#[test]
fn lexical_recall_cites_current_visible_memory() {
    let fixture = Fixture::new();
    let created = fixture.call(
        "put",
        &put("tea", "op-1", None, "The user prefers green tea."),
    );
    created.assert_success();
    fixture
        .call(
            "put",
            &put("car", "op-2", None, "The user drives an old bicycle."),
        )
        .assert_success();
    let mut hidden = put(
        "secret",
        "op-3",
        None,
        "The user hides green tea from the agent.",
    );
    hidden["scopes"] = json!(["owner"]);
    fixture.call("put", &hidden).assert_success();

    let recalled = fixture.call("recall", &recall("green tea", "lexical"));
    recalled.assert_success();
    let passages = recalled.json["passages"].as_array().expect("passages");
    assert_eq!(
        passages.len(),
        1,
        "only what the scope may see: {recalled:#?}"
    );
    let passage = &passages[0];
    assert_eq!(passage["citation"], "memory:1");
    assert_eq!(passage["source"]["id"], "tea");
    assert_eq!(passage["source"]["locator"], "chat:42");
    assert_eq!(passage["source"]["revision"], created.json["revision"]);
    assert_eq!(passage["passage_id"], "tea");
    assert_eq!(passage["content"]["text"], "The user prefers green tea.");
    assert!(passage["score"].is_number());
    let text = recalled.json["text"].as_str().expect("text");
    assert!(text.contains("[memory:1]") && text.contains("The user prefers green tea."));
    assert!(
        !text.contains("u1"),
        "the namespace identity never appears in recall text"
    );
    assert_eq!(recalled.json["outcomes"][0]["status"], "found");

    // A withdrawn document is no longer recalled.
    fixture
        .call("withdraw", &withdraw("tea", "op-4", &revision_of(&created)))
        .assert_success();
    let after = fixture.call("recall", &recall("green tea", "lexical"));
    after.assert_success();
    assert_eq!(after.json["passages"], json!([]));
    assert_eq!(after.json["outcomes"][0]["status"], "no-match");
}

#[test]
fn recall_refusals_have_their_kinds() {
    let fixture = Fixture::new();
    // The default mode is hybrid; on an empty store it answers, finding nothing. (Refusals of the
    // semantic modes without a model are in tests/semantic.rs.)
    let mut default_mode = recall("tea", "lexical");
    default_mode.as_object_mut().unwrap().remove("mode");
    let answered = fixture.call("recall", &default_mode);
    answered.assert_success();
    assert_eq!(answered.json["passages"], json!([]));
    assert_eq!(answered.json["outcomes"][0]["status"], "no-match");

    let mut zero_limit = recall("tea", "lexical");
    zero_limit["limits"]["max_items"] = json!(0);
    fixture
        .call("recall", &zero_limit)
        .assert_refused("invalid-input");
    let mut missing_limit = recall("tea", "lexical");
    missing_limit["limits"]
        .as_object_mut()
        .unwrap()
        .remove("timeout_ms");
    fixture
        .call("recall", &missing_limit)
        .assert_refused("invalid-input");
    let mut bad_mode = recall("tea", "lexical");
    bad_mode["mode"] = json!("fuzzy");
    fixture
        .call("recall", &bad_mode)
        .assert_refused("invalid-input");
    let mut long_query = recall("tea", "lexical");
    long_query["query"] = json!("q".repeat(65_537));
    fixture
        .call_stdin("recall", long_query.to_string().as_bytes())
        .assert_refused("too-large");
}

#[test]
fn recall_over_the_input_budget_is_a_budget_refusal() {
    let fixture = Fixture::new();
    // Two matching documents of 9 MB each exceed revalidation's default 16 MiB input budget.
    let big_text = "needle ".repeat(9 * 1024 * 1024 / 7);
    for (id, operation) in [("one", "op-1"), ("two", "op-2")] {
        fixture
            .call_stdin(
                "put",
                put(id, operation, None, &big_text).to_string().as_bytes(),
            )
            .assert_success();
    }
    fixture
        .call("recall", &recall("needle", "lexical"))
        .assert_refused("budget");
}

#[test]
fn storage_and_corrupt_failures_are_typed_refusals() {
    let fixture = Fixture::new();
    // A directory where the database file should be.
    let directory = fixture.dir.path().join("a-directory");
    std::fs::create_dir(&directory).unwrap();
    let outcome = run_with_stdin(Some(&directory), &["get", &get("tea").to_string()], None);
    outcome.assert_refused("storage");

    fixture
        .call("put", &put("tea", "op-1", None, "green tea"))
        .assert_success();
    let connection = rusqlite::Connection::open(&fixture.db).unwrap();
    connection
        .execute("UPDATE memory_documents SET body = 'not a document'", [])
        .unwrap();
    drop(connection);
    fixture.call("get", &get("tea")).assert_refused("corrupt");
}

#[test]
fn import_reports_refused_lines_and_writes_the_others() {
    let fixture = Fixture::new();
    let lines = [
        put("a", "op-a", None, "first memory").to_string(),
        "{not json".to_owned(),
        put("b", "op-b", None, "second memory").to_string(),
        String::new(),
        // The same operation id as line 1 with another command.
        put("a", "op-a", None, "changed memory").to_string(),
        // An exact repeat of line 3.
        put("b", "op-b", None, "second memory").to_string(),
        put("c", "op-c", None, "third memory").to_string(),
    ];
    let file = fixture.dir.path().join("memories.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let outcome = fixture.run(&["import", file.to_str().unwrap()]);
    assert_eq!(outcome.code, 2, "refused lines give status 2: {outcome:#?}");
    assert_eq!(
        outcome.json,
        json!({"written": 3, "replayed": 1, "refused": 2})
    );
    let reports: Vec<Value> = outcome
        .stderr
        .lines()
        .map(|line| serde_json::from_str(line).expect("each report is JSON"))
        .collect();
    assert_eq!(reports.len(), 2, "{outcome:#?}");
    assert_eq!(reports[0]["line"], 2);
    assert_eq!(reports[0]["error"]["kind"], "invalid-input");
    assert_eq!(reports[1]["line"], 5);
    assert_eq!(reports[1]["error"]["kind"], "operation-conflict");
    for id in ["a", "b", "c"] {
        let read = fixture.call("get", &get(id));
        assert!(read.json["document"].is_object(), "{id} was written");
    }
    let first = fixture.call("get", &get("a"));
    assert_eq!(first.json["document"]["content"]["text"], "first memory");

    let clean = fixture.dir.path().join("clean.jsonl");
    std::fs::write(&clean, put("d", "op-d", None, "fourth").to_string()).unwrap();
    let outcome = fixture.run(&["import", clean.to_str().unwrap()]);
    outcome.assert_success();
    assert_eq!(
        outcome.json,
        json!({"written": 1, "replayed": 0, "refused": 0})
    );
}

#[test]
fn unexpected_failures_exit_with_status_one() {
    let fixture = Fixture::new();
    let missing = fixture.dir.path().join("missing.jsonl");
    let outcome = fixture.run(&["import", missing.to_str().unwrap()]);
    assert_eq!(outcome.code, 1, "{outcome:#?}");
    assert!(outcome.stderr.contains("could not open"));
}

#[test]
fn usage_errors_are_invalid_input_and_help_has_examples() {
    let fixture = Fixture::new();
    fixture.run(&["frobnicate"]).assert_refused("invalid-input");
    for command in [
        vec!["--help"],
        vec!["put", "--help"],
        vec!["withdraw", "--help"],
        vec!["get", "--help"],
        vec!["recall", "--help"],
        vec!["sync", "--help"],
        vec!["import", "--help"],
        vec!["serve", "--help"],
    ] {
        let outcome = fixture.run(&command);
        outcome.assert_success();
        assert!(
            outcome.stdout.contains("Example"),
            "{command:?}: {}",
            outcome.stdout
        );
        assert!(outcome.stdout.contains("--db"), "{command:?}");
    }
}

#[test]
fn database_defaults_to_memory_db_then_the_working_directory() {
    let fixture = Fixture::new();
    let chosen = fixture.dir.path().join("chosen.sqlite");
    let status = std::process::Command::new(common::BINARY)
        .env("MEMORY_DB", &chosen)
        .args(["sync", "{}"])
        .output()
        .unwrap();
    assert!(status.status.success());
    assert!(chosen.exists());

    let status = std::process::Command::new(common::BINARY)
        .env_remove("MEMORY_DB")
        .current_dir(fixture.dir.path())
        .args(["sync", "{}"])
        .output()
        .unwrap();
    assert!(status.status.success());
    assert!(fixture.dir.path().join("memory.sqlite").exists());
}

/// `deadline`: with the test-only `fault-injection` feature, every store call of a recall blocks its
/// thread for a minute (as a stuck disk would). The calls run on the blocking pool, so `timeout_ms`
/// ends the recall long before: the command is refused as `deadline` and exits without waiting for
/// the stalled call. Were the calls run inline, the recall would wait the minute out and succeed.
#[cfg(feature = "fault-injection")]
#[test]
fn a_recall_whose_store_stalls_is_refused_at_its_deadline() {
    use memory_cli::recall_service::STALL_RECALL_ENV;

    let fixture = Fixture::new();
    fixture
        .call(
            "put",
            &put("tea", "op-1", None, "The user prefers green tea."),
        )
        .assert_success();
    // The deadline covers loading the model and catching the index up too (a recall that cannot get
    // that far in time is `unavailable`), so the semantic modes get time for both before the stalled
    // store call makes them miss it.
    for (mode, timeout_ms) in [("lexical", 50), ("exact", 8_000), ("hybrid", 8_000)] {
        let mut argument = recall("green tea", mode);
        argument["limits"]["timeout_ms"] = json!(timeout_ms);
        let outcome = common::run_with_env(
            Some(&fixture.db),
            &["recall", &argument.to_string()],
            None,
            &[(STALL_RECALL_ENV, std::ffi::OsStr::new("60000"))],
        );
        outcome.assert_refused("deadline");
        // Without the stall the same recall answers.
        fixture
            .call("recall", &recall("green tea", mode))
            .assert_success();
    }
}
