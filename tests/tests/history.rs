//! A document's history is its history (issue 42, item 5), through the built `memory` binary: every
//! revision's text, author and time through `memory history` and `memory_get`'s `revisions` over
//! MCP, the newest `MEMORY_MAX_REVISIONS` keeping their words, and a withdrawal (`memory withdraw`)
//! or a forget (`memory_forget`) leaving only the tombstone: no word of any revision in any table
//! of the file (receipts, the lexical index and the stored vectors included).
#![allow(clippy::unwrap_used)]

use std::ffi::OsStr;

use integration_tests::product::{Fixture, namespace};
use serde_json::{Value, json};

/// `memory_put` arguments writing `text` said by `speaker` to document `id`.
fn authored(
    id: &str,
    operation: &str,
    expected: Option<&Value>,
    text: &str,
    speaker: &str,
) -> Value {
    json!({
        "namespace": namespace(),
        "id": id,
        "operation_id": operation,
        "expected_revision": expected,
        "locator": format!("chat:{id}"),
        "scopes": ["assistant"],
        "content": {
            "text": text,
            "attributions": [{
                "origin_id": format!("msg-{operation}"), "speaker": speaker,
                "observers": ["assistant"], "locator": format!("chat:{id}#{operation}"),
                "activity_at": null, "interpretation": "stated"
            }],
            "metadata": {"topic": "drinks"},
            "recorded_at": 1767225600000_i64,
            "extracted_at": 1767225600000_i64
        }
    })
}

/// Writes `texts` to `id` in turn (each by its speaker), answering each write's document.
fn write_all(
    fixture: &Fixture,
    id: &str,
    texts: &[(&str, &str)],
    env: &[(&str, &OsStr)],
) -> Vec<Value> {
    let mut written: Vec<Value> = Vec::new();
    for (index, (text, speaker)) in texts.iter().enumerate() {
        let expected = written.last().map(|document| document["revision"].clone());
        let put = authored(
            id,
            &format!("op-{id}-{index}"),
            expected.as_ref(),
            text,
            speaker,
        );
        let answer = fixture.run_env(&["put", &put.to_string()], env);
        written.push(answer.success()["document"].clone());
    }
    written
}

fn history(fixture: &Fixture, id: &str) -> Vec<Value> {
    let answer = fixture.call("history", &json!({"namespace": namespace(), "id": id}));
    answer.success()["revisions"].as_array().unwrap().clone()
}

/// Every text and blob of every table of the file that holds `word`, as `table: row`.
fn rows_holding(fixture: &Fixture, word: &str) -> Vec<String> {
    let connection = rusqlite::Connection::open(&fixture.db).unwrap();
    let tables: Vec<String> = connection
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut found = Vec::new();
    for table in tables {
        let mut statement = connection
            .prepare(&format!("SELECT * FROM \"{table}\""))
            .unwrap();
        let columns = statement.column_count();
        let rows = statement
            .query_map([], |row| {
                (0..columns)
                    .map(|column| row.get::<_, rusqlite::types::Value>(column))
                    .collect::<Result<Vec<_>, _>>()
            })
            .unwrap();
        for row in rows {
            let row = row.unwrap();
            let text = row
                .iter()
                .map(|value| match value {
                    rusqlite::types::Value::Text(text) => text.to_lowercase(),
                    rusqlite::types::Value::Blob(bytes) => {
                        String::from_utf8_lossy(bytes).to_lowercase()
                    }
                    _ => String::new(),
                })
                .collect::<Vec<_>>()
                .join(" | ");
            if text.contains(word) {
                found.push(format!("{table}: {text}"));
            }
        }
    }
    found
}

fn stored_chunks(fixture: &Fixture, id: &str) -> i64 {
    rusqlite::Connection::open(&fixture.db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM semantic_chunks WHERE document_id = ?1",
            [id],
            |row| row.get(0),
        )
        .unwrap()
}

#[tokio::test]
async fn a_documents_history_lists_every_revision_until_a_withdrawal_leaves_only_the_tombstone() {
    let fixture = Fixture::new();
    let written = write_all(
        &fixture,
        "tea",
        &[
            ("Ana drinks oolong every morning.", "ana"),
            ("Ana switched from oolong to rooibos.", "bo"),
            ("Ana gave up rooibos for espresso.", "cy"),
        ],
        &[],
    );

    // `memory history`: three revisions, newest first, each with its text, author and time.
    let revisions = history(&fixture, "tea");
    assert_eq!(revisions.len(), 3, "{revisions:#?}");
    for (revision, document) in revisions.iter().zip(written.iter().rev()) {
        assert_eq!(revision["revision"], document["revision"]);
        assert_eq!(revision["predecessor"], document["predecessor"]);
        assert_eq!(revision["modified_at"], document["modified_at"]);
        assert_eq!(
            revision["content"], document["content"],
            "text, author, metadata"
        );
        assert!(revision["withdrawn"].is_null());
    }
    let speakers: Vec<&str> = revisions
        .iter()
        .map(|revision| {
            revision["content"]["attributions"][0]["speaker"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(speakers, ["cy", "bo", "ana"]);
    let newest = fixture.call(
        "history",
        &json!({"namespace": namespace(), "id": "tea", "limit": 1}),
    );
    assert_eq!(newest.success()["revisions"], json!(revisions[..1]));
    fixture
        .call(
            "history",
            &json!({"namespace": namespace(), "id": "tea", "limit": 0}),
        )
        .refused("invalid-input");
    fixture
        .call(
            "history",
            &json!({"namespace": namespace(), "id": "tea", "limit": 1001}),
        )
        .refused("too-large");
    assert!(history(&fixture, "never-written").is_empty());

    // `memory_get` with `revisions` over MCP answers the same history beside the document.
    let client = fixture.serve().await;
    let got = client
        .success(
            "memory_get",
            json!({"namespace": namespace(), "id": "tea", "revisions": 10}),
        )
        .await;
    assert_eq!(got["document"]["revision"], written[2]["revision"]);
    assert_eq!(got["revisions"], json!(revisions));
    let plain = client
        .success("memory_get", json!({"namespace": namespace(), "id": "tea"}))
        .await;
    assert!(plain.get("revisions").is_none(), "{plain:#}");
    client.close().await;

    // Indexed in every store: the lexical index and the stored vectors hold the current words.
    fixture.call("sync", &json!({})).success();
    assert!(stored_chunks(&fixture, "tea") > 0);
    assert!(!rows_holding(&fixture, "oolong").is_empty());

    // A withdrawal leaves the tombstone (who, when, why) and no word of any revision anywhere. The
    // command line names its user as who asked (`MEMORY_USER`, else the OS user).
    let withdraw = json!({
        "namespace": namespace(), "id": "tea", "operation_id": "op-tea-forget",
        "expected_revision": written[2]["revision"], "reason": "the user asked to forget"
    })
    .to_string();
    fixture
        .run_env(
            &["withdraw", &withdraw],
            &[("MEMORY_USER", OsStr::new("ana"))],
        )
        .success();
    fixture.call("sync", &json!({})).success();
    let after = history(&fixture, "tea");
    assert_eq!(after.len(), 4, "{after:#?}");
    assert_eq!(
        after[0]["withdrawn"],
        json!({"reason": "the user asked to forget", "by": "user:ana"})
    );
    assert_eq!(after[0]["predecessor"], written[2]["revision"]);
    assert!(
        after[0]["modified_at"].as_i64().unwrap() >= written[2]["modified_at"].as_i64().unwrap()
    );
    for (revision, document) in after[1..].iter().zip(written.iter().rev()) {
        assert_eq!(revision["revision"], document["revision"]);
        assert!(revision["content"].is_null(), "{revision:#}");
    }
    for word in ["oolong", "rooibos", "espresso"] {
        assert_eq!(rows_holding(&fixture, word), Vec::<String>::new(), "{word}");
    }
    assert_eq!(stored_chunks(&fixture, "tea"), 0, "the vectors are gone");
    // A retried put answers its receipt, without the words.
    let replay = fixture.call(
        "put",
        &authored(
            "tea",
            "op-tea-0",
            None,
            "Ana drinks oolong every morning.",
            "ana",
        ),
    );
    let replay = replay.success();
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["document"]["content"]["text"], "");
}

#[tokio::test]
async fn the_newest_max_revisions_keep_their_words_and_a_forget_drops_them_all() {
    let fixture = Fixture::new();
    let bound: &[(&str, &OsStr)] = &[("MEMORY_MAX_REVISIONS", OsStr::new("2"))];
    let written = write_all(
        &fixture,
        "walk",
        &[
            ("Ana walks the canal path.", "ana"),
            ("Ana walks the heath.", "ana"),
            ("Ana walks the harbour wall.", "ana"),
            ("Ana walks the quarry rim.", "ana"),
        ],
        bound,
    );
    let revisions = history(&fixture, "walk");
    assert_eq!(revisions.len(), 4, "every revision stays listed");
    let texts: Vec<Option<&str>> = revisions
        .iter()
        .map(|revision| revision["content"]["text"].as_str())
        .collect();
    assert_eq!(
        texts,
        [
            Some("Ana walks the quarry rim."),
            Some("Ana walks the harbour wall."),
            None,
            None
        ]
    );
    assert_eq!(revisions[3]["revision"], written[0]["revision"]);
    assert!(
        rows_holding(&fixture, "canal").is_empty(),
        "past the bound, no words"
    );
    let asked = json!({"namespace": namespace(), "id": "walk"}).to_string();
    fixture
        .run_env(
            &["history", &asked],
            &[("MEMORY_MAX_REVISIONS", OsStr::new("0"))],
        )
        .refused("invalid-input");

    // `memory_forget` (the simple tool) is a withdrawal: only the tombstone is left.
    let client = fixture
        .serve_with(
            &[
                "--namespace".to_owned(),
                namespace().to_string(),
                "--scope".to_owned(),
                "assistant".to_owned(),
            ],
            &[],
        )
        .await;
    client
        .success("memory_forget", json!({"id": "walk", "reason": "private"}))
        .await;
    let got = client
        .success(
            "memory_get",
            json!({"namespace": namespace(), "id": "walk", "revisions": 10}),
        )
        .await;
    client.close().await;
    assert!(got["document"].is_null());
    let revisions = got["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 5);
    // The server's caller is who asked: the grant it holds (the server's own, without `--grants`).
    assert_eq!(
        revisions[0]["withdrawn"],
        json!({"reason": "private", "by": "grant:server"})
    );
    assert!(
        revisions
            .iter()
            .all(|revision| revision["content"].is_null())
    );
    for word in ["quarry", "harbour", "heath", "canal"] {
        assert_eq!(rows_holding(&fixture, word), Vec::<String>::new(), "{word}");
    }
}
