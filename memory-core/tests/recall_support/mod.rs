//! Builders shared by the recall and revalidation tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeSet;

use memory_core::recall::{
    Authority, MemoryLookup, PassageId, PassageSource, RecallLimits, RecallSource, SourceId,
};
use memory_core::{
    ApproximateTokenCounter, DocumentId, MemoryAccess, MemoryAttribution, MemoryContent, MemoryKey,
    MemoryPassage, MemoryScope, MemoryWrite, MemoryWriter, NamespaceAddress, OperationId,
    RecallError, RecalledMemory, Revision,
};

pub fn source_id(id: &str) -> SourceId {
    SourceId::new(id).unwrap()
}

pub fn passage(
    source: &str,
    passage_id: &str,
    revision: Option<&str>,
    text: &str,
) -> MemoryPassage {
    MemoryPassage::new(
        PassageSource {
            id: SourceId::new(source).unwrap(),
            locator: format!("file:///notes/{source}.md"),
            revision: revision.map(|revision| Revision::new(revision).unwrap()),
        },
        PassageId::new(passage_id).unwrap(),
        MemoryContent::text(text),
    )
}

pub fn with_authority(passage: MemoryPassage, authority: &str) -> MemoryPassage {
    passage.with_authority(Authority::new(authority).unwrap())
}

pub fn attribution(
    speaker: &str,
    observers: &[&str],
    activity_at: Option<i64>,
) -> MemoryAttribution {
    MemoryAttribution {
        origin_id: "thread:1".to_owned(),
        speaker: speaker.to_owned(),
        observers: observers
            .iter()
            .map(|observer| (*observer).to_owned())
            .collect(),
        locator: "thread://1#4".to_owned(),
        activity_at,
        interpretation: "stated".to_owned(),
    }
}

/// Generous limits, with the given item count.
pub fn limits(max_items: u32) -> RecallLimits {
    RecallLimits::builder()
        .max_sources(64)
        .max_items(max_items)
        .max_bytes(1 << 20)
        .max_tokens(1 << 20)
        .timeout_ms(1_000)
        .build()
        .unwrap()
}

pub fn found(id: &str, essential: bool, passages: Vec<MemoryPassage>) -> RecallSource<'static> {
    answering(id, essential, MemoryLookup::Found { passages })
}

pub fn answering(id: &str, essential: bool, lookup: MemoryLookup) -> RecallSource<'static> {
    RecallSource::new(source_id(id), essential, async move { Ok(lookup) })
}

pub async fn recall_with(
    sources: Vec<RecallSource<'_>>,
    limits: &RecallLimits,
) -> Result<RecalledMemory, RecallError> {
    memory_core::recall(sources, limits, &ApproximateTokenCounter).await
}

/// The citation numbers of the header lines, in order.
pub fn header_citations(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|line| line.strip_prefix("[memory:"))
        .map(|rest| rest.split(']').next().unwrap().parse().unwrap())
        .collect()
}

/// Every `memory:<digit>` occurrence in the text, wherever it is (headers included).
pub fn citation_like_occurrences(text: &str) -> usize {
    let lower = text.to_ascii_lowercase();
    lower
        .match_indices("memory:")
        .filter(|(index, _)| {
            lower[index + "memory:".len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
        .count()
}

/// Checks the invariants every recall result keeps: each header citation maps to exactly one passage,
/// in order, and no other citation-like sequence appears.
pub fn assert_citations_consistent(recalled: &RecalledMemory) {
    let headers = header_citations(&recalled.text);
    let returned: Vec<u32> = recalled
        .passages
        .iter()
        .map(|p| p.citation.number())
        .collect();
    assert_eq!(
        headers, returned,
        "header citations match returned passages"
    );
    let unique: BTreeSet<u32> = headers.iter().copied().collect();
    assert_eq!(unique.len(), headers.len(), "citations are unique");
    assert_eq!(
        citation_like_occurrences(&recalled.text),
        headers.len(),
        "only headers carry citation ids"
    );
}

pub fn namespace(identity: &str) -> NamespaceAddress {
    NamespaceAddress::encode("test/recall-notes", 1, &identity).unwrap()
}

pub fn scope(name: &str) -> MemoryScope {
    MemoryScope::new(name).unwrap()
}

pub fn access(identity: &str) -> MemoryAccess {
    MemoryAccess {
        namespace: namespace(identity),
        scope: scope("private"),
    }
}

pub fn key(identity: &str, id: &str) -> MemoryKey {
    MemoryKey {
        namespace: namespace(identity),
        id: DocumentId::new(id).unwrap(),
    }
}

/// Writes (creates or replaces) a document visible to scope `private`; returns its new revision.
pub async fn put<W: MemoryWriter>(
    store: &W,
    key: &MemoryKey,
    expected: Option<&Revision>,
    content: MemoryContent,
    operation: &str,
) -> Revision {
    put_scoped(
        store,
        key,
        expected,
        content,
        operation,
        vec![scope("private")],
    )
    .await
}

pub async fn put_scoped<W: MemoryWriter>(
    store: &W,
    key: &MemoryKey,
    expected: Option<&Revision>,
    content: MemoryContent,
    operation: &str,
    scopes: Vec<MemoryScope>,
) -> Revision {
    store
        .apply(MemoryWrite::Put {
            key: key.clone(),
            operation_id: OperationId::new(operation).unwrap(),
            expected_revision: expected.cloned(),
            locator: format!("test://{}", key.id),
            content,
            scopes,
        })
        .await
        .unwrap()
        .receipt
        .document
        .revision
}

pub async fn withdraw<W: MemoryWriter>(
    store: &W,
    key: &MemoryKey,
    expected: &Revision,
    operation: &str,
) {
    store
        .apply(MemoryWrite::Withdraw {
            key: key.clone(),
            operation_id: OperationId::new(operation).unwrap(),
            expected_revision: expected.clone(),
            reason: "asked to forget".to_owned(),
            by: None,
        })
        .await
        .unwrap();
}
