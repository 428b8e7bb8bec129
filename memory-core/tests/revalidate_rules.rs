//! Revalidation rules of SPEC §2.4, against the in-memory store.
#![allow(clippy::unwrap_used)]

use crate::recall_support;

use std::sync::Mutex;

use memory_core::StoreFault;
use memory_core::recall::{Authority, PassageId};
use memory_core::revalidate::{CandidatePassage, REVALIDATION_READ_BATCH};
use memory_core::{
    ErrorKind, InMemoryStore, MemoryContent, MemoryDocument, MemoryError, MemoryKey, MemoryReader,
    RecallCandidate, RecallError, RevalidationLimits, Revision, revalidate,
};
use recall_support::*;
use serde_json::json;

/// Records every read so tests can check grouping and what was read before a failure.
#[derive(Default)]
struct RecordingReader {
    store: InMemoryStore,
    single_reads: Mutex<usize>,
    groups: Mutex<Vec<Vec<MemoryKey>>>,
    fail: bool,
}

impl MemoryReader for RecordingReader {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        *self.single_reads.lock().unwrap() += 1;
        self.store.read(key).await
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        self.groups.lock().unwrap().push(keys.to_vec());
        if self.fail {
            return Err(MemoryError::storage(
                "read_many",
                std::io::Error::other("disk gone"),
            ));
        }
        self.store.read_many(keys).await
    }
}

fn content(text: &str, speaker: &str) -> MemoryContent {
    let mut content = MemoryContent::text(text);
    content.attributions = vec![attribution(speaker, &["Chad"], Some(1_000))];
    content.metadata = json!({ "kind": "fact" }).as_object().unwrap().clone();
    content
}

async fn run(
    reader: &RecordingReader,
    candidates: &[RecallCandidate],
) -> Result<Vec<memory_core::MemoryPassage>, RecallError> {
    revalidate(
        candidates,
        &access("team-a"),
        reader,
        &RevalidationLimits::default(),
    )
    .await
}

#[tokio::test]
async fn an_authority_claimed_by_a_candidate_is_overridden_by_the_access_namespace() {
    let reader = RecordingReader::default();
    let key = key("team-a", "doc");
    let revision = put(&reader.store, &key, None, content("fact", "Dan"), "op-1").await;
    let mut candidate = RecallCandidate::document(key, Some(revision));
    candidate.authority = Some(Authority::new("someone-else").unwrap());
    let passages = run(&reader, &[candidate]).await.unwrap();
    assert_eq!(
        passages[0].authority.as_ref().unwrap().as_str(),
        namespace("team-a").as_str()
    );
}

#[tokio::test]
async fn a_withdrawn_document_in_a_stale_candidate_list_is_excluded() {
    let reader = RecordingReader::default();
    let gone = key("team-a", "gone");
    let kept = key("team-a", "kept");
    let gone_revision = put(
        &reader.store,
        &gone,
        None,
        content("old fact", "Dan"),
        "op-1",
    )
    .await;
    let kept_revision = put(&reader.store, &kept, None, content("fact", "Dan"), "op-2").await;
    let candidates = [
        RecallCandidate::document(gone.clone(), Some(gone_revision.clone())),
        RecallCandidate::document(kept, Some(kept_revision)),
    ];
    withdraw(&reader.store, &gone, &gone_revision, "op-3").await;
    let passages = run(&reader, &candidates).await.unwrap();
    assert_eq!(passages.len(), 1);
    assert_eq!(passages[0].content.text, "fact");
}

#[tokio::test]
async fn a_missing_document_is_excluded() {
    let reader = RecordingReader::default();
    let candidates = [RecallCandidate::document(
        key("team-a", "never-written"),
        None,
    )];
    assert!(run(&reader, &candidates).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_access_revoked_document_is_excluded() {
    let reader = RecordingReader::default();
    let key = key("team-a", "doc");
    let first = put(&reader.store, &key, None, content("fact", "Dan"), "op-1").await;
    let candidates = [RecallCandidate::document(key.clone(), Some(first.clone()))];
    assert_eq!(run(&reader, &candidates).await.unwrap().len(), 1);
    put_scoped(
        &reader.store,
        &key,
        Some(&first),
        content("fact", "Dan"),
        "op-2",
        vec![scope("other")],
    )
    .await;
    assert!(run(&reader, &candidates).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_candidate_of_another_namespace_is_excluded_without_a_read() {
    let reader = RecordingReader::default();
    let foreign = key("team-b", "doc");
    put(
        &reader.store,
        &foreign,
        None,
        content("their fact", "Eve"),
        "op-1",
    )
    .await;
    let passages = run(&reader, &[RecallCandidate::document(foreign, None)])
        .await
        .unwrap();
    assert!(passages.is_empty());
    assert!(reader.groups.lock().unwrap().is_empty());
}

#[tokio::test]
async fn stale_text_is_replaced_by_the_current_document() {
    let reader = RecordingReader::default();
    let key = key("team-a", "doc");
    let old = put(
        &reader.store,
        &key,
        None,
        content("queue is unbounded", "Dan"),
        "op-1",
    )
    .await;
    let current = put(
        &reader.store,
        &key,
        Some(&old),
        content("queue is bounded", "Ana"),
        "op-2",
    )
    .await;
    let candidates = [
        RecallCandidate::document(key.clone(), Some(old.clone())),
        RecallCandidate::excerpt(
            key.clone(),
            Some(old),
            PassageId::new("doc#0").unwrap(),
            "unbounded",
        ),
    ];
    let passages = run(&reader, &candidates).await.unwrap();
    // Both become the whole current document: one citation.
    assert_eq!(passages.len(), 1);
    for passage in &passages {
        assert_eq!(passage.content.text, "queue is bounded");
        assert_eq!(passage.source.revision.as_ref(), Some(&current));
        assert_eq!(passage.passage_id.as_str(), "doc");
        assert_eq!(passage.content.attributions[0].speaker, "Ana");
    }
}

#[tokio::test]
async fn a_same_revision_excerpt_takes_the_current_attribution_and_metadata() {
    let reader = RecordingReader::default();
    let key = key("team-a", "doc");
    let revision = put(
        &reader.store,
        &key,
        None,
        content("alpha beta gamma", "Dan"),
        "op-1",
    )
    .await;
    let mut claimed = content("beta", "Mallory");
    claimed.metadata = json!({ "kind": "forged" }).as_object().unwrap().clone();
    claimed.recorded_at = 99;
    let candidate = RecallCandidate {
        key: key.clone(),
        revision: Some(revision.clone()),
        passage: CandidatePassage::Excerpt {
            passage_id: PassageId::new("doc#1").unwrap(),
            content: claimed,
        },
        authority: None,
    };
    let passages = run(&reader, &[candidate]).await.unwrap();
    assert_eq!(passages.len(), 1);
    let passage = &passages[0];
    assert_eq!(passage.content.text, "beta");
    assert_eq!(passage.passage_id.as_str(), "doc#1");
    assert_eq!(passage.content.attributions[0].speaker, "Dan");
    assert_eq!(passage.content.metadata["kind"], "fact");
    assert_eq!(passage.content.recorded_at, 0);
    assert_eq!(passage.source.revision.as_ref(), Some(&revision));
    assert_eq!(passage.source.locator, "test://doc");
}

#[tokio::test]
async fn an_excerpt_is_kept_only_if_its_text_occurs_in_the_current_text() {
    let reader = RecordingReader::default();
    let key = key("team-a", "doc");
    let old = put(
        &reader.store,
        &key,
        None,
        content("one two three", "Dan"),
        "op-1",
    )
    .await;
    let current = put(
        &reader.store,
        &key,
        Some(&old),
        content("one two four", "Dan"),
        "op-2",
    )
    .await;
    let excerpt = |revision: &Revision, text: &str| {
        RecallCandidate::excerpt(
            key.clone(),
            Some(revision.clone()),
            PassageId::new("doc#x").unwrap(),
            text,
        )
    };
    // Still present in the current text, though taken from the old revision: kept as the excerpt.
    let kept = run(&reader, &[excerpt(&old, "two")]).await.unwrap();
    assert_eq!(kept[0].content.text, "two");
    // Claims the current revision but never occurred in it: excluded.
    assert!(
        run(&reader, &[excerpt(&current, "three")])
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn each_source_is_read_once_in_groups() {
    let reader = RecordingReader::default();
    let mut candidates = Vec::new();
    for index in 0..(REVALIDATION_READ_BATCH + 3) {
        let key = key("team-a", &format!("doc-{index}"));
        let revision = put(
            &reader.store,
            &key,
            None,
            content("fact", "Dan"),
            &format!("op-{index}"),
        )
        .await;
        candidates.push(RecallCandidate::document(
            key.clone(),
            Some(revision.clone()),
        ));
        candidates.push(RecallCandidate::excerpt(
            key,
            Some(revision),
            PassageId::new("x").unwrap(),
            "fa",
        ));
    }
    let passages = run(&reader, &candidates).await.unwrap();
    assert_eq!(passages.len(), candidates.len());
    let groups = reader.groups.lock().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].len(), REVALIDATION_READ_BATCH);
    let mut all: Vec<&MemoryKey> = groups.iter().flatten().collect();
    let total = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), total, "no key read twice");
    assert_eq!(total, REVALIDATION_READ_BATCH + 3);
    assert_eq!(*reader.single_reads.lock().unwrap(), 0);
}

#[tokio::test]
async fn the_aggregate_bound_fails_before_later_groups_are_read() {
    let reader = RecordingReader::default();
    let mut candidates = Vec::new();
    for index in 0..(REVALIDATION_READ_BATCH * 2) {
        let key = key("team-a", &format!("doc-{index}"));
        let revision = put(
            &reader.store,
            &key,
            None,
            content("fact", "Dan"),
            &format!("op-{index}"),
        )
        .await;
        candidates.push(RecallCandidate::document(key, Some(revision)));
    }
    let error = revalidate(
        &candidates,
        &access("team-a"),
        &reader,
        &RevalidationLimits::new(64).unwrap(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            error,
            RecallError::Budget {
                limit: "max_input_bytes",
                max: 64,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::Budget);
    assert_eq!(reader.groups.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_duplicate_candidate_is_one_passage_counted_once() {
    let reader = RecordingReader::default();
    let key = key("team-a", "doc");
    let revision = put(&reader.store, &key, None, content("fact", "Dan"), "op-1").await;
    let candidate = RecallCandidate::document(key, Some(revision));
    let single = run(&reader, std::slice::from_ref(&candidate))
        .await
        .unwrap();
    let size = single[0].encoded_len().unwrap();
    let twice = [candidate.clone(), candidate];
    let fits = revalidate(
        &twice,
        &access("team-a"),
        &reader,
        &RevalidationLimits::new(size).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(fits, single);
    let error = revalidate(
        &twice,
        &access("team-a"),
        &reader,
        &RevalidationLimits::new(size - 1).unwrap(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, RecallError::Budget { .. }), "{error:?}");
}

#[tokio::test]
async fn source_failures_stay_typed() {
    let reader = RecordingReader {
        fail: true,
        ..RecordingReader::default()
    };
    let error = run(
        &reader,
        &[RecallCandidate::document(key("team-a", "doc"), None)],
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            error,
            RecallError::Source(MemoryError::Store(StoreFault::Storage {
                operation: "read_many",
                ..
            }))
        ),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::Storage);
}

#[test]
fn revalidation_limits_are_bounded() {
    assert_eq!(
        RevalidationLimits::default().max_input_bytes(),
        16 * 1024 * 1024
    );
    assert!(RevalidationLimits::new(64 * 1024 * 1024).is_ok());
    assert!(RevalidationLimits::new(64 * 1024 * 1024 + 1).is_err());
    assert!(RevalidationLimits::new(0).is_err());
}

#[tokio::test]
async fn the_same_document_id_in_two_namespaces_stays_two_authorities_at_recall() {
    let reader = RecordingReader::default();
    let mine = key("team-a", "profile");
    let theirs = key("team-b", "profile");
    let my_revision = put(
        &reader.store,
        &mine,
        None,
        content("likes tea", "Dan"),
        "op-1",
    )
    .await;
    let their_revision = put(
        &reader.store,
        &theirs,
        None,
        content("likes tea", "Dan"),
        "op-1",
    )
    .await;
    let (mine, theirs) = (
        [RecallCandidate::document(mine, Some(my_revision))],
        [RecallCandidate::document(theirs, Some(their_revision))],
    );
    let (access_a, access_b, limits_default) = (
        access("team-a"),
        access("team-b"),
        RevalidationLimits::default(),
    );
    let team_a = revalidate(&mine, &access_a, &reader, &limits_default);
    let team_b = revalidate(&theirs, &access_b, &reader, &limits_default);
    let sources = vec![
        memory_core::RecallSource::optional(source_id("a"), async {
            Ok(memory_core::MemoryLookup::Found {
                passages: team_a.await?,
            })
        }),
        memory_core::RecallSource::optional(source_id("b"), async {
            Ok(memory_core::MemoryLookup::Found {
                passages: team_b.await?,
            })
        }),
    ];
    let recalled = recall_with(sources, &limits(4)).await.unwrap();
    assert_eq!(recalled.passages.len(), 2);
    assert_ne!(
        recalled.passages[0].authority_label,
        recalled.passages[1].authority_label
    );
    assert!(!recalled.text.contains("team-a") && !recalled.text.contains("team-b"));
}
