//! Recall composition (input budget, dedup, selection, rendering) for 10, 100 and 1,000 candidates, and
//! revalidation of 100 candidates against the in-memory store. Also prints p50 / p99 per call for 100
//! candidates (target: composition under 1 ms).
#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group};
use memory_core::recall::{
    Authority, MemoryLookup, PassageId, PassageSource, RecallLimits, RecallSource, SourceId,
};
use memory_core::{
    ApproximateTokenCounter, DocumentId, InMemoryStore, MemoryAccess, MemoryAttribution,
    MemoryContent, MemoryKey, MemoryPassage, MemoryScope, MemoryWrite, MemoryWriter,
    NamespaceAddress, OperationId, RecallCandidate, RevalidationLimits, Revision, recall,
    revalidate,
};

const CANDIDATE_COUNTS: [usize; 3] = [10, 100, 1_000];
const SOURCES: usize = 4;
/// One candidate in this many repeats an earlier one (shares a citation).
const DUPLICATE_EVERY: usize = 10;
const PERCENTILE_CALLS: usize = 2_000;

fn limits() -> RecallLimits {
    RecallLimits::builder()
        .max_sources(64)
        .max_items(32)
        .max_bytes(32_768)
        .max_tokens(8_192)
        .timeout_ms(1_000)
        .build()
        .unwrap()
}

fn candidate_passage(index: usize) -> MemoryPassage {
    let mut content = MemoryContent::text(format!(
        "Remembered fact number {index}: the team agreed to keep the retry queue bounded at {} jobs \
         and to preserve failed work for review.",
        index * 10
    ));
    content.attributions = vec![MemoryAttribution {
        origin_id: format!("thread:{index}"),
        speaker: "Dan".to_owned(),
        observers: vec!["Chad".to_owned()],
        locator: format!("thread://{index}"),
        activity_at: Some(1_777_334_400_000),
        interpretation: "stated".to_owned(),
    }];
    content.metadata = serde_json::json!({ "kind": "fact", "tags": ["queue", "retry"] })
        .as_object()
        .unwrap()
        .clone();
    MemoryPassage::new(
        PassageSource {
            id: SourceId::new(format!("doc-{index}")).unwrap(),
            locator: format!("memory://doc-{index}"),
            revision: Some(Revision::new("r1").unwrap()),
        },
        PassageId::new(format!("doc-{index}")).unwrap(),
        content,
    )
    .with_authority(Authority::new("team").unwrap())
}

/// `count` candidates spread over the sources, with every tenth a duplicate of an earlier one.
fn lookups(count: usize) -> Vec<Vec<MemoryPassage>> {
    let mut per_source = vec![Vec::new(); SOURCES];
    for index in 0..count {
        let identity = if index % DUPLICATE_EVERY == DUPLICATE_EVERY - 1 {
            index / 2
        } else {
            index
        };
        per_source[index % SOURCES].push(candidate_passage(identity));
    }
    per_source
}

fn sources(per_source: Vec<Vec<MemoryPassage>>) -> Vec<RecallSource<'static>> {
    per_source
        .into_iter()
        .enumerate()
        .map(|(index, passages)| {
            RecallSource::optional(
                SourceId::new(format!("source-{index}")).unwrap(),
                async move { Ok(MemoryLookup::Found { passages }) },
            )
        })
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

fn composition(criterion: &mut Criterion) {
    let runtime = runtime();
    let limits = limits();
    let mut group = criterion.benchmark_group("recall_composition");
    for count in CANDIDATE_COUNTS {
        let prepared = lookups(count);
        group.bench_with_input(
            BenchmarkId::from_parameter(count),
            &prepared,
            |bencher, prepared| {
                bencher.iter_batched(
                    || sources(prepared.clone()),
                    |sources| {
                        runtime
                            .block_on(recall(sources, &limits, &ApproximateTokenCounter))
                            .unwrap()
                    },
                    BatchSize::SmallInput,
                );
            },
        );
    }
    group.finish();
}

struct Store {
    store: InMemoryStore,
    access: MemoryAccess,
    candidates: Vec<RecallCandidate>,
}

fn seeded_store(runtime: &tokio::runtime::Runtime, count: usize) -> Store {
    let namespace = NamespaceAddress::encode("bench/notes", 1, &"team-a").unwrap();
    let scope = MemoryScope::new("private").unwrap();
    let store = InMemoryStore::new();
    let mut candidates = Vec::with_capacity(count);
    for index in 0..count {
        let key = MemoryKey {
            namespace: namespace.clone(),
            id: DocumentId::new(format!("doc-{index}")).unwrap(),
        };
        let outcome = runtime
            .block_on(store.apply(MemoryWrite::Put {
                key: key.clone(),
                operation_id: OperationId::new(format!("op-{index}")).unwrap(),
                expected_revision: None,
                locator: format!("memory://doc-{index}"),
                content: candidate_passage(index).content,
                scopes: vec![scope.clone()],
            }))
            .unwrap();
        candidates.push(RecallCandidate::document(
            key,
            Some(outcome.receipt.document.revision),
        ));
    }
    Store {
        store,
        access: MemoryAccess { namespace, scope },
        candidates,
    }
}

fn revalidation(criterion: &mut Criterion) {
    let runtime = runtime();
    let seeded = seeded_store(&runtime, 100);
    let limits = RevalidationLimits::default();
    criterion.bench_function("revalidate_in_memory/100", |bencher| {
        bencher.iter(|| {
            runtime
                .block_on(revalidate(
                    &seeded.candidates,
                    &seeded.access,
                    &seeded.store,
                    &limits,
                ))
                .unwrap()
        });
    });
}

fn percentiles(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |fraction: f64| samples[((samples.len() as f64 - 1.0) * fraction).round() as usize];
    println!(
        "{label}: p50 {:?}, p99 {:?} per call over {} calls",
        at(0.50),
        at(0.99),
        samples.len()
    );
}

fn report_percentiles() {
    let runtime = runtime();
    let limits = limits();
    let prepared = lookups(100);
    let mut samples = Vec::with_capacity(PERCENTILE_CALLS);
    for _ in 0..PERCENTILE_CALLS {
        let declared = sources(prepared.clone());
        let started = Instant::now();
        let recalled = runtime.block_on(recall(declared, &limits, &ApproximateTokenCounter));
        samples.push(started.elapsed());
        black_box(recalled.unwrap());
    }
    percentiles("recall composition, 100 candidates", samples);

    let seeded = seeded_store(&runtime, 100);
    let revalidation_limits = RevalidationLimits::default();
    let mut samples = Vec::with_capacity(PERCENTILE_CALLS);
    for _ in 0..PERCENTILE_CALLS {
        let started = Instant::now();
        let passages = runtime.block_on(revalidate(
            &seeded.candidates,
            &seeded.access,
            &seeded.store,
            &revalidation_limits,
        ));
        samples.push(started.elapsed());
        black_box(passages.unwrap());
    }
    percentiles(
        "revalidation against InMemoryStore, 100 candidates",
        samples,
    );
}

criterion_group!(benches, composition, revalidation);

fn main() {
    benches();
    // `cargo test --benches` runs bench binaries in test mode; keep that quick.
    if !std::env::args().any(|argument| argument == "--test") {
        report_percentiles();
    }
    Criterion::default().configure_from_args().final_summary();
}
