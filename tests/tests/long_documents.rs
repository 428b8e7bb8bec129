//! Long documents through the built `memory` binary: a document longer than one chunk is cited by its
//! chunks that match, in every mode, so it fits a `max_bytes` budget smaller than the document, and
//! each excerpt is the exact text of the current document.

#![allow(clippy::unwrap_used)]

use integration_tests::product::{Fixture, MODES, put, recall};
use serde_json::{Value, json};

const FACT: &str = "The user keeps the passport in the blue folder on the top shelf.";

/// About 9 KB of travel notes, one topic after another, with [`FACT`] among the notes on documents:
/// many chunks of the default profile (1,024 bytes each), none of the others about the passport.
fn long_text() -> String {
    let topics = [
        (
            "weather",
            "the weather was mild with a light breeze from the west",
        ),
        (
            "food",
            "dinner was grilled fish with rice at the harbour restaurant",
        ),
        (
            "hotel",
            "the hotel room faced the garden and the breakfast started at seven",
        ),
        (
            "train",
            "the morning train to the coast left from platform four",
        ),
    ];
    let mut sentences = Vec::new();
    for (topic, line) in topics {
        for day in 0..30 {
            sentences.push(format!("Note {day} on {topic}: {line}."));
        }
    }
    let documents = [
        FACT,
        "The passport was renewed last spring and is valid for ten more years.",
        "A photocopy of the passport lies in the same blue folder.",
        "Before every trip the user checks that the passport is in the folder.",
    ];
    for (offset, sentence) in documents.into_iter().enumerate() {
        sentences.insert(60 + offset, sentence.to_owned());
    }
    sentences.join(" ")
}

fn passages_of<'a>(result: &'a Value, id: &str) -> Vec<&'a Value> {
    result["passages"]
        .as_array()
        .expect("passages")
        .iter()
        .filter(|passage| passage["source"]["id"] == id)
        .collect()
}

#[test]
fn a_long_document_is_cited_by_its_matching_chunks_in_every_mode() {
    let fixture = Fixture::new();
    let text = long_text();
    let imported = fixture.import(&[
        put("travel", &text),
        put("short", "The user keeps receipts in a shoebox."),
    ]);
    assert_eq!(imported.success()["written"], 2, "{imported:#?}");
    fixture.call("sync", &json!({})).success();
    let max_bytes = 4_000;
    assert!(
        text.len() > 2 * max_bytes,
        "the document must not fit whole"
    );
    for mode in MODES {
        let mut query = recall("where does the user keep the passport", mode, 6);
        query["limits"]["max_bytes"] = json!(max_bytes);
        let outcome = fixture.call("recall", &query);
        let result = outcome.success();
        assert!(
            result["text"].as_str().unwrap().len() <= max_bytes,
            "{mode}: the rendered block fits max_bytes"
        );
        let excerpts = passages_of(result, "travel");
        assert!(
            !excerpts.is_empty(),
            "{mode}: the long document is cited: {result:#}"
        );
        assert!(
            excerpts
                .iter()
                .any(|passage| passage["content"]["text"].as_str().unwrap().contains(FACT)),
            "{mode}: an excerpt holds the fact: {result:#}"
        );
        for passage in excerpts {
            let excerpt = passage["content"]["text"].as_str().unwrap();
            assert!(
                excerpt.len() < text.len() && text.contains(excerpt),
                "{mode}: an exact excerpt, not the whole document"
            );
            assert!(
                passage["passage_id"]
                    .as_str()
                    .unwrap()
                    .starts_with("chunk:"),
                "{mode}: named as the index names the chunk: {passage:#}"
            );
        }
    }
    // The same chunk found lexically and by embedding shares one passage id.
    let lexical = fixture.call("recall", &recall("passport blue folder", "lexical", 6));
    let exact = fixture.call("recall", &recall("passport blue folder", "exact", 6));
    let id_of = |result: &Value| {
        passages_of(result, "travel")
            .into_iter()
            .find(|passage| passage["content"]["text"].as_str().unwrap().contains(FACT))
            .map(|passage| passage["passage_id"].clone())
    };
    assert_eq!(id_of(lexical.success()), id_of(exact.success()));
    assert!(id_of(lexical.success()).is_some());
}
