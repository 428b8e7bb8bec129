//! Costs of the model's per-request work, per operation: address canonicalization (`make` from a typed
//! identity, `restore` of a stored address) and receipt checking (`PreparedWrite::prepare`, then `plan`
//! on the replay path against a stored receipt, which verifies the receipt field by field).
//!
//! `cargo bench -p memory-core --bench model -- --warm-up-time 1 --measurement-time 3`

#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use memory_core::{
    DocumentId, MemoryAttribution, MemoryContent, MemoryScope, MemoryWrite, Namespace,
    NamespaceDefinition, OperationId, PreparedWrite, WritePlan,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Bytes of document text in the benchmarked write: a typical remembered statement.
const TEXT_BYTES: usize = 1_024;
/// Scopes on the benchmarked document.
const SCOPE_COUNT: usize = 4;
/// Attributions on the benchmarked document.
const ATTRIBUTION_COUNT: usize = 2;
/// The time stamped on the planned write.
const NOW_MILLIS: i64 = 1_700_000_000_000;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct UserIdentity {
    tenant: String,
    user: String,
}

struct UserConversations;
impl NamespaceDefinition for UserConversations {
    const NAME: &'static str = "user-conversations";
    const VERSION: u64 = 1;
    type Identity = UserIdentity;
}

fn identity() -> UserIdentity {
    UserIdentity {
        tenant: "acme-\u{1f3e2}".to_owned(),
        user: "ada.lovelace@example.com".to_owned(),
    }
}

fn write() -> MemoryWrite {
    let namespace = Namespace::<UserConversations>::make(identity()).expect("valid identity");
    let text: String = "the quick brown fox \u{1f98a} "
        .chars()
        .cycle()
        .scan(0, |bytes, character| {
            *bytes += character.len_utf8();
            (*bytes <= TEXT_BYTES).then_some(character)
        })
        .collect();
    let attribution = |index: usize| MemoryAttribution {
        origin_id: format!("thread-{index}"),
        speaker: "ada".to_owned(),
        observers: vec!["charles".to_owned()],
        locator: format!("thread-{index}#message-3"),
        activity_at: Some(NOW_MILLIS - 60_000),
        interpretation: "stated".to_owned(),
    };
    let mut content = MemoryContent::text(text);
    content.attributions = (0..ATTRIBUTION_COUNT).map(attribution).collect();
    MemoryWrite::Put {
        key: namespace.key(DocumentId::new("preference-17").expect("valid id")),
        operation_id: OperationId::new("op-2024-05-01-0001").expect("valid id"),
        expected_revision: None,
        locator: "thread-1#message-3".to_owned(),
        content,
        scopes: (0..SCOPE_COUNT)
            .map(|index| MemoryScope::new(format!("scope-{index}")).expect("valid scope"))
            .collect(),
    }
}

fn address_canonicalization(criterion: &mut Criterion) {
    let identity = identity();
    let address = Namespace::<UserConversations>::make(identity.clone())
        .expect("valid identity")
        .address()
        .as_str()
        .to_owned();
    criterion.bench_function("address/make_typed_identity", |bencher| {
        bencher.iter(|| Namespace::<UserConversations>::make(black_box(identity.clone())))
    });
    criterion.bench_function("address/restore", |bencher| {
        bencher.iter(|| Namespace::<UserConversations>::restore(black_box(&address)))
    });
}

fn receipt_checking(criterion: &mut Criterion) {
    let write = write();
    let prepared = PreparedWrite::prepare(write.clone()).expect("valid write");
    let Ok(WritePlan::Commit { document, receipt }) = prepared.plan(None, None, NOW_MILLIS) else {
        panic!("a first write commits");
    };
    criterion.bench_function("receipt/prepare", |bencher| {
        bencher.iter(|| PreparedWrite::prepare(black_box(write.clone())))
    });
    criterion.bench_function("receipt/plan_replay", |bencher| {
        bencher.iter(|| prepared.plan(black_box(Some(&receipt)), Some(&document), NOW_MILLIS))
    });
    criterion.bench_function("receipt/prepare_and_plan_replay", |bencher| {
        bencher.iter(|| {
            PreparedWrite::prepare(black_box(write.clone()))
                .and_then(|prepared| prepared.plan(Some(&receipt), Some(&document), NOW_MILLIS))
        })
    });
}

criterion_group!(benches, address_canonicalization, receipt_checking);
criterion_main!(benches);
