//! One or more tests per recall rule of SPEC §2.3; each fails if its rule is broken.
#![allow(clippy::unwrap_used)]

use crate::recall_support;

use memory_core::recall::{
    DEFAULT_MAX_INPUT_BYTES, MemoryLookup, RecallLimits, SourceStatus, render::RENDERED_CLOSING,
};
use memory_core::{ApproximateTokenCounter, ErrorKind, RecallError, TokenCounter};
use recall_support::*;
use serde_json::json;

fn metadata(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    value.as_object().unwrap().clone()
}

#[tokio::test]
async fn no_match_is_a_success_even_for_an_essential_source() {
    let recalled = recall_with(
        vec![answering("notes", true, MemoryLookup::NoMatch)],
        &limits(4),
    )
    .await
    .unwrap();
    assert_eq!(recalled.text, "");
    assert!(recalled.passages.is_empty());
    assert_eq!(recalled.outcomes[0].status, SourceStatus::NoMatch);
}

#[tokio::test]
async fn unavailable_essential_source_fails_the_recall() {
    let unavailable = MemoryLookup::Unavailable {
        reason: "index rebuilding".to_owned(),
    };
    let error = recall_with(
        vec![
            found("other", false, vec![passage("a", "p", Some("1"), "x")]),
            answering("notes", true, unavailable),
        ],
        &limits(4),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, RecallError::EssentialUnavailable { source_id, reason }
            if source_id.as_str() == "notes" && reason == "index rebuilding"),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::Unavailable);
}

#[tokio::test]
async fn unavailable_optional_source_is_reported_in_outcomes() {
    let unavailable = MemoryLookup::Unavailable {
        reason: "index rebuilding".to_owned(),
    };
    let recalled = recall_with(
        vec![
            answering("notes", false, unavailable),
            found("other", false, vec![passage("a", "p", Some("1"), "x")]),
        ],
        &limits(4),
    )
    .await
    .unwrap();
    assert_eq!(
        recalled.outcomes[0].status,
        SourceStatus::Unavailable {
            reason: "index rebuilding".to_owned()
        }
    );
    assert_eq!(recalled.passages.len(), 1);
}

#[tokio::test]
async fn insufficient_freshness_fails_essential_and_is_reported_for_optional() {
    let error = recall_with(
        vec![answering(
            "notes",
            true,
            MemoryLookup::InsufficientFreshness,
        )],
        &limits(4),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, RecallError::EssentialStale { .. }),
        "{error:?}"
    );

    let recalled = recall_with(
        vec![answering(
            "notes",
            false,
            MemoryLookup::InsufficientFreshness,
        )],
        &limits(4),
    )
    .await
    .unwrap();
    assert_eq!(
        recalled.outcomes[0].status,
        SourceStatus::InsufficientFreshness
    );
    assert_eq!(recalled.text, "");
}

#[tokio::test]
async fn duplicates_of_one_authority_share_one_citation() {
    let shared = with_authority(passage("profile", "whole", Some("1"), "likes tea"), "team");
    let recalled = recall_with(
        vec![
            found("first", false, vec![shared.clone()]),
            found("second", false, vec![shared]),
        ],
        &limits(4),
    )
    .await
    .unwrap();
    assert_eq!(recalled.passages.len(), 1);
    assert_eq!(header_citations(&recalled.text), [1]);
    assert_eq!(recalled.outcomes[0].selected, 1);
    assert_eq!(recalled.outcomes[1].deduplicated, 1);
    assert_eq!(recalled.outcomes[1].selected, 0);
}

#[tokio::test]
async fn same_source_id_and_revision_under_two_authorities_is_not_merged() {
    // No explicit authority: each passage's authority is its declaring source's id.
    let recalled = recall_with(
        vec![
            found(
                "alpha",
                false,
                vec![passage("profile", "whole", Some("1"), "likes tea")],
            ),
            found(
                "beta",
                false,
                vec![passage("profile", "whole", Some("1"), "likes coffee")],
            ),
        ],
        &limits(4),
    )
    .await
    .unwrap();
    assert_eq!(recalled.passages.len(), 2);
    let labels: Vec<u32> = recalled
        .passages
        .iter()
        .map(|p| p.authority_label.number())
        .collect();
    assert_eq!(labels, [1, 2]);
    assert!(recalled.text.contains("memory-authority:2"));
}

#[tokio::test]
async fn equal_passages_of_two_declarations_without_shared_authority_are_both_cited() {
    let same = passage("profile", "whole", Some("1"), "likes tea");
    let recalled = recall_with(
        vec![
            found("alpha", false, vec![same.clone()]),
            found("beta", false, vec![same]),
        ],
        &limits(4),
    )
    .await
    .unwrap();
    assert_eq!(recalled.passages.len(), 2);
}

#[tokio::test]
async fn known_revision_conflict_fails_the_recall() {
    let first = with_authority(passage("profile", "whole", Some("1"), "likes tea"), "team");
    let second = with_authority(
        passage("profile", "whole", Some("1"), "likes coffee"),
        "team",
    );
    let error = recall_with(
        vec![
            found("first", false, vec![first]),
            found("second", false, vec![second]),
        ],
        &limits(4),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, RecallError::ConflictingPassages { source_id } if source_id.as_str() == "second"),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::Conflict);
}

#[tokio::test]
async fn conflict_is_detected_even_when_the_first_copy_was_omitted_by_the_budget() {
    let cited = with_authority(passage("other", "whole", Some("1"), "cited"), "team");
    let omitted = with_authority(passage("profile", "whole", Some("1"), "likes tea"), "team");
    let conflicting = with_authority(
        passage("profile", "whole", Some("1"), "likes coffee"),
        "team",
    );
    // Round-robin by rank: `a`'s passage takes the only item, `b`'s is omitted, `c`'s conflicts with it.
    let error = recall_with(
        vec![
            found("a", false, vec![cited]),
            found("b", false, vec![omitted]),
            found("c", false, vec![conflicting]),
        ],
        &limits(1),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, RecallError::ConflictingPassages { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn object_member_order_is_ignored_in_identity_checks_nested_too() {
    let mut first = with_authority(passage("profile", "whole", Some("1"), "likes tea"), "team");
    let mut second = first.clone();
    first.content.metadata = serde_json::from_str(r#"{"a":1,"b":{"x":1,"y":[1,2]}}"#).unwrap();
    second.content.metadata = serde_json::from_str(r#"{"b":{"y":[1,2],"x":1},"a":1}"#).unwrap();
    let recalled = recall_with(
        vec![
            found("first", false, vec![first]),
            found("second", false, vec![second]),
        ],
        &limits(4),
    )
    .await
    .unwrap();
    assert_eq!(recalled.passages.len(), 1);
    assert_eq!(recalled.outcomes[1].deduplicated, 1);
}

#[tokio::test]
async fn array_order_is_kept_in_identity_checks() {
    let mut first = with_authority(passage("profile", "whole", Some("1"), "likes tea"), "team");
    let mut second = first.clone();
    first.content.metadata = metadata(json!({ "tags": [1, 2] }));
    second.content.metadata = metadata(json!({ "tags": [2, 1] }));
    let error = recall_with(
        vec![
            found("first", false, vec![first]),
            found("second", false, vec![second]),
        ],
        &limits(4),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, RecallError::ConflictingPassages { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn equivalent_unknown_revision_passages_of_one_authority_share_a_citation() {
    let note = with_authority(passage("note", "whole", None, "queue is bounded"), "team");
    let edited = with_authority(passage("note", "whole", None, "queue is unbounded"), "team");
    let recalled = recall_with(
        vec![
            found("first", false, vec![note.clone()]),
            found("second", false, vec![note, edited]),
        ],
        &limits(4),
    )
    .await
    .unwrap();
    // The equal copy shares citation 1; the different unknown-revision passage is not a conflict.
    assert_eq!(recalled.passages.len(), 2);
    assert_eq!(recalled.outcomes[1].deduplicated, 1);
    assert_eq!(recalled.outcomes[1].selected, 1);
}

#[tokio::test]
async fn input_budget_counts_omitted_and_duplicate_candidates() {
    let cited = passage("a", "p", Some("1"), "first");
    let size = cited.encoded_len().unwrap();
    let omitted = passage("a", "q", Some("1"), "first"); // same size, distinct identity
    assert_eq!(omitted.encoded_len().unwrap(), size);
    let sources = |passages: Vec<memory_core::MemoryPassage>| vec![found("a", false, passages)];
    let budget = |max_input_bytes: u64| {
        RecallLimits::builder()
            .max_sources(4)
            .max_items(1)
            .max_bytes(1 << 20)
            .max_tokens(1 << 20)
            .timeout_ms(1_000)
            .max_input_bytes(max_input_bytes)
            .build()
            .unwrap()
    };
    let three = vec![cited.clone(), omitted.clone(), cited.clone()];

    let fits = recall_with(sources(three.clone()), &budget(3 * size))
        .await
        .unwrap();
    assert_eq!(fits.passages.len(), 1);
    assert_eq!(fits.outcomes[0].omitted, 1);
    assert_eq!(fits.outcomes[0].deduplicated, 1);

    let error = recall_with(sources(three), &budget(3 * size - 1))
        .await
        .unwrap_err();
    assert!(
        matches!(error, RecallError::Budget { limit: "max_input_bytes", max, actual }
            if max == 3 * size - 1 && actual == 3 * size),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::Budget);
}

#[tokio::test]
async fn input_budget_overflow_in_an_optional_source_returns_no_partial_result() {
    let small = passage("a", "p", Some("1"), "fits");
    let large = passage("b", "q", Some("1"), &"x".repeat(4_096));
    let limits = RecallLimits::builder()
        .max_sources(4)
        .max_items(4)
        .max_bytes(1 << 20)
        .max_tokens(1 << 20)
        .timeout_ms(1_000)
        .max_input_bytes(1_024)
        .build()
        .unwrap();
    let error = recall_with(
        vec![
            found("a", true, vec![small]),
            found("b", false, vec![large]),
        ],
        &limits,
    )
    .await
    .unwrap_err();
    assert!(matches!(error, RecallError::Budget { .. }), "{error:?}");
}

#[tokio::test]
async fn an_essential_source_whose_passages_do_not_fit_fails() {
    let error = recall_with(
        vec![found(
            "notes",
            true,
            vec![
                passage("a", "p", Some("1"), "one"),
                passage("a", "q", Some("1"), "two"),
            ],
        )],
        &limits(1),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, RecallError::EssentialDoesNotFit { source_id, limit: "max_items" }
            if source_id.as_str() == "notes"),
        "{error:?}"
    );
}

#[tokio::test]
async fn essential_sources_are_cited_before_optional_ones() {
    let recalled = recall_with(
        vec![
            found(
                "optional",
                false,
                vec![passage("a", "p", Some("1"), "optional")],
            ),
            found(
                "essential",
                true,
                vec![passage("b", "p", Some("1"), "essential")],
            ),
        ],
        &limits(1),
    )
    .await
    .unwrap();
    assert_eq!(recalled.passages.len(), 1);
    assert_eq!(recalled.passages[0].declared_by.as_str(), "essential");
    assert_eq!(recalled.outcomes[0].omitted, 1);
}

#[tokio::test]
async fn optional_sources_are_interleaved_by_rank() {
    let recalled = recall_with(
        vec![
            found(
                "chatty",
                false,
                vec![
                    passage("a", "1", Some("1"), "a1"),
                    passage("a", "2", Some("1"), "a2"),
                ],
            ),
            found("quiet", false, vec![passage("b", "1", Some("1"), "b1")]),
        ],
        &limits(2),
    )
    .await
    .unwrap();
    let order: Vec<&str> = recalled
        .passages
        .iter()
        .map(|p| p.passage.content.text.as_str())
        .collect();
    assert_eq!(order, ["a1", "b1"]);
}

#[tokio::test]
async fn max_sources_counts_authority_qualified_source_ids() {
    let limits = RecallLimits::builder()
        .max_sources(1)
        .max_items(8)
        .max_bytes(1 << 20)
        .max_tokens(1 << 20)
        .timeout_ms(1_000)
        .build()
        .unwrap();
    let recalled = recall_with(
        vec![found(
            "notes",
            false,
            vec![
                passage("doc-a", "1", Some("1"), "a1"),
                passage("doc-b", "1", Some("1"), "b1"),
                passage("doc-a", "2", Some("1"), "a2"),
            ],
        )],
        &limits,
    )
    .await
    .unwrap();
    let texts: Vec<&str> = recalled
        .passages
        .iter()
        .map(|p| p.passage.content.text.as_str())
        .collect();
    assert_eq!(texts, ["a1", "a2"]);
    assert_eq!(recalled.outcomes[0].omitted, 1);
}

/// The rendered size of `texts` as one optional source with generous limits.
async fn rendered(texts: &[&str]) -> String {
    let passages = texts
        .iter()
        .enumerate()
        .map(|(index, text)| passage("a", &index.to_string(), Some("1"), text))
        .collect();
    recall_with(vec![found("a", false, passages)], &limits(16))
        .await
        .unwrap()
        .text
}

fn output_limits(max_bytes: u64, max_tokens: u64) -> RecallLimits {
    RecallLimits::builder()
        .max_sources(8)
        .max_items(8)
        .max_bytes(max_bytes)
        .max_tokens(max_tokens)
        .timeout_ms(1_000)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_text_fits_max_bytes_exactly() {
    let texts = ["first passage", "second passage, a little longer"];
    let full = rendered(&texts).await;
    let exact = full.len() as u64;
    let sources = || {
        vec![found(
            "a",
            false,
            texts
                .iter()
                .enumerate()
                .map(|(index, text)| passage("a", &index.to_string(), Some("1"), text))
                .collect(),
        )]
    };
    let at_limit = recall_with(sources(), &output_limits(exact, 1 << 20))
        .await
        .unwrap();
    assert_eq!(at_limit.text, full);
    let below = recall_with(sources(), &output_limits(exact - 1, 1 << 20))
        .await
        .unwrap();
    assert_eq!(below.passages.len(), 1);
    assert!((below.text.len() as u64) < exact);
    assert!(below.text.ends_with(RENDERED_CLOSING));
}

/// Counts characters of the whole text and declares itself non-additive, to exercise full recounts.
struct CharacterCounter;

impl TokenCounter for CharacterCounter {
    fn count(&self, text: &str) -> usize {
        text.chars().count()
    }
}

#[tokio::test]
async fn the_text_fits_max_tokens_exactly_with_any_counter() {
    let texts = ["first passage", "second passage, a little longer 日本"];
    let full = rendered(&texts).await;
    let sources = || {
        vec![found(
            "a",
            false,
            texts
                .iter()
                .enumerate()
                .map(|(index, text)| passage("a", &index.to_string(), Some("1"), text))
                .collect(),
        )]
    };
    for counter in [
        &ApproximateTokenCounter as &dyn TokenCounter,
        &CharacterCounter,
    ] {
        let exact = counter.count(&full) as u64;
        let at_limit = memory_core::recall(sources(), &output_limits(1 << 20, exact), counter)
            .await
            .unwrap();
        assert_eq!(at_limit.text, full);
        let below = memory_core::recall(sources(), &output_limits(1 << 20, exact - 1), counter)
            .await
            .unwrap();
        assert_eq!(below.passages.len(), 1);
        assert!((counter.count(&below.text) as u64) < exact);
    }
}

#[tokio::test]
async fn nothing_is_cited_when_the_frame_alone_exceeds_the_limits() {
    let recalled = recall_with(
        vec![found("a", false, vec![passage("a", "p", Some("1"), "x")])],
        &output_limits(16, 1 << 20),
    )
    .await
    .unwrap();
    assert_eq!(recalled.text, "");
    assert_eq!(recalled.outcomes[0].omitted, 1);
}

#[tokio::test]
async fn returned_passages_carry_an_explicit_authority() {
    let recalled = recall_with(
        vec![found(
            "notes",
            false,
            vec![
                passage("a", "p", Some("1"), "implicit"),
                with_authority(passage("b", "p", Some("1"), "explicit"), "team"),
            ],
        )],
        &limits(4),
    )
    .await
    .unwrap();
    let authorities: Vec<&str> = recalled
        .passages
        .iter()
        .map(|p| p.authority().unwrap().as_str())
        .collect();
    assert_eq!(authorities, ["notes", "team"]);
}

#[tokio::test]
async fn duplicate_declaration_ids_are_refused_before_reading() {
    let error = recall_with(
        vec![
            answering("notes", false, MemoryLookup::NoMatch),
            answering("notes", false, MemoryLookup::NoMatch),
        ],
        &limits(4),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, RecallError::DuplicateSource { .. }),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
}

#[test]
fn limits_are_required_positive_and_bounded() {
    let complete = || {
        RecallLimits::builder()
            .max_sources(1)
            .max_items(1)
            .max_bytes(1)
            .max_tokens(1)
            .timeout_ms(1)
    };
    assert_eq!(
        complete().build().unwrap().max_input_bytes(),
        DEFAULT_MAX_INPUT_BYTES
    );
    assert_eq!(DEFAULT_MAX_INPUT_BYTES, 16 * 1024 * 1024);
    assert!(complete().max_input_bytes(64 * 1024 * 1024).build().is_ok());
    let refused = [
        (
            complete().max_input_bytes(64 * 1024 * 1024 + 1),
            "max_input_bytes",
        ),
        (complete().max_input_bytes(0), "max_input_bytes"),
        (complete().max_items(0), "max_items"),
        // A wire call's max_sources defaults to its max_items: a zero is named where it was given.
        (complete().max_items(0).max_sources(0), "max_items"),
        (complete().max_sources(0), "max_sources"),
        (complete().max_bytes(0), "max_bytes"),
        (complete().max_tokens(0), "max_tokens"),
        (complete().timeout_ms(0), "timeout_ms"),
        (
            RecallLimits::builder()
                .max_items(1)
                .max_bytes(1)
                .max_tokens(1)
                .timeout_ms(1),
            "max_sources",
        ),
    ];
    for (builder, expected) in refused {
        let error = builder.build().unwrap_err();
        assert!(
            matches!(error, RecallError::InvalidLimits { field, .. } if field == expected),
            "{expected}: {error:?}"
        );
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
    }
}
