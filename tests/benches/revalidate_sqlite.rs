//! Revalidation of 100 candidates against a real SQLite store (issue 4's benchmark), with p50/p99 per
//! call printed next to criterion's figures.

use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use memory_core::revalidate::{RecallCandidate, RevalidationLimits, revalidate};
use memory_core::{
    DocumentId, MemoryAccess, MemoryContent, MemoryScope, MemoryWrite, NamespaceAddress,
    OperationId, Revision,
};
use memory_sqlite::SqliteStore;

/// Documents in the store.
const DOCUMENTS: usize = 2_000;
/// Candidates revalidated per call.
const CANDIDATES: usize = 100;
/// Calls timed for the percentile figures.
const TIMED_CALLS: usize = 500;

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let index = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

fn bench(criterion: &mut Criterion) {
    let directory = tempfile::tempdir().expect("temporary directory");
    let store = SqliteStore::open(directory.path().join("bench.sqlite")).expect("store opens");
    let namespace =
        NamespaceAddress::encode("bench", 1, &serde_json::json!({"tenant": "t"})).expect("address");
    let scope = MemoryScope::new("agent").expect("scope");
    let mut writes = Vec::with_capacity(DOCUMENTS);
    for index in 0..DOCUMENTS {
        writes.push(MemoryWrite::Put {
            key: memory_core::MemoryKey {
                namespace: namespace.clone(),
                id: DocumentId::new(format!("doc-{index}")).expect("id"),
            },
            operation_id: OperationId::new(format!("op-{index}")).expect("operation id"),
            expected_revision: None,
            locator: format!("bench:{index}"),
            content: MemoryContent::text(format!(
                "Fact number {index}: the service retries failed deliveries with backoff."
            )),
            scopes: vec![scope.clone()],
        });
    }
    let outcomes = store.apply_batch(writes).expect("import");
    let candidates: Vec<RecallCandidate> = outcomes
        .iter()
        .step_by(DOCUMENTS / CANDIDATES)
        .take(CANDIDATES)
        .map(|outcome| {
            let outcome = outcome.as_ref().expect("written");
            let document = &outcome.receipt.document;
            RecallCandidate::document(
                document.key.clone(),
                Some::<Revision>(document.revision.clone()),
            )
        })
        .collect();
    let access = MemoryAccess { namespace, scope };
    let limits = RevalidationLimits::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");

    let mut samples = Vec::with_capacity(TIMED_CALLS);
    for _ in 0..TIMED_CALLS {
        let started = Instant::now();
        let passages = runtime
            .block_on(revalidate(&candidates, &access, &store, &limits))
            .expect("revalidates");
        samples.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(passages.len(), CANDIDATES);
    }
    samples.sort_by(f64::total_cmp);
    println!(
        "revalidate {CANDIDATES} candidates against SQLite ({DOCUMENTS} documents): p50 {:.3} ms, p99 {:.3} ms over {TIMED_CALLS} calls",
        percentile(&samples, 0.50),
        percentile(&samples, 0.99)
    );

    criterion.bench_function("revalidate_100_candidates_sqlite", |bencher| {
        bencher.iter(|| {
            runtime
                .block_on(revalidate(&candidates, &access, &store, &limits))
                .expect("revalidates")
        });
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
