//! Tenant isolation: random documents with colliding ids, operation ids and texts across namespaces
//! (two tenants, and one identity under two definition versions). Every read and every lexical query
//! must return only the caller's namespace and scope and agree with the in-memory store, and no query
//! text (full-text syntax of any engine, or garbage) may make the search fail.

use std::future::Future;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

use super::{InspectableStore, namespace, put};
use crate::proptest_config;
use memory_core::document::{MemoryAccess, MemoryContent, MemoryKey, MemoryScope};
use memory_core::ids::DocumentId;
use memory_core::in_memory::InMemoryStore;
use memory_core::namespace::NamespaceAddress;
use memory_core::ports::{ManualClock, MemoryReader, MemoryWriter};

const WORDS: [&str; 5] = ["apple", "river", "stone", "cloud", "tiger"];
const IDS: [&str; 3] = ["x", "y", "z"];
const SCOPES: [&str; 2] = ["s1", "s2"];
/// Each case opens a fresh store, which costs a schema on a server: fewer cases than a pure property.
const MAX_CASES: u32 = 24;

#[derive(Debug, Clone)]
struct Step {
    namespace: usize,
    id: usize,
    operation: usize,
    words: Vec<usize>,
    scopes: Vec<bool>,
    replace: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..3usize,
        0..IDS.len(),
        0..4usize,
        proptest::collection::vec(0..WORDS.len(), 1..4),
        proptest::collection::vec(any::<bool>(), SCOPES.len()),
        any::<bool>(),
    )
        .prop_map(|(namespace, id, operation, words, scopes, replace)| Step {
            namespace,
            id,
            operation,
            words,
            scopes,
            replace,
        })
}

/// Query texts that are FTS5 or tsquery syntax, or garbage, or both.
fn hostile_query() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\"".to_owned()),
        Just("apple\"".to_owned()),
        Just("NEAR(apple river, 2)".to_owned()),
        Just("apple*".to_owned()),
        Just("^apple".to_owned()),
        Just("text:apple".to_owned()),
        Just("speakers:apple OR text:river".to_owned()),
        Just("{text speakers}: stone".to_owned()),
        Just("apple AND NOT river".to_owned()),
        Just("apple & !river | stone <-> cloud".to_owned()),
        Just("'apple':* & river:A".to_owned()),
        Just("\\' OR 1=1; --".to_owned()),
        Just("(((".to_owned()),
        Just("a\u{0}b".to_owned()),
        Just("\u{301}\u{1F600}\u{200B}".to_owned()),
        "[\"*^:(){}+\\-., a-zA-Z0-9\u{e9}\u{4e2d}\u{1F600}]{0,40}",
        any::<String>(),
    ]
}

fn namespaces() -> Result<Vec<NamespaceAddress>, TestCaseError> {
    let fail = |failure: crate::fixtures::Failure| TestCaseError::fail(failure.0);
    let same_identity = serde_json::json!({ "tenant": "a" });
    Ok(vec![
        namespace("a").map_err(fail)?,
        namespace("b").map_err(fail)?,
        NamespaceAddress::encode("memory-core-store-suite", 2, &same_identity)
            .map_err(|error| TestCaseError::fail(error.to_string()))?,
    ])
}

fn doc_key(namespace: &NamespaceAddress, id: &str) -> Result<MemoryKey, TestCaseError> {
    Ok(MemoryKey {
        namespace: namespace.clone(),
        id: DocumentId::new(id).map_err(|error| TestCaseError::fail(error.to_string()))?,
    })
}

async fn check_case<S: InspectableStore>(
    store: &S,
    now: i64,
    steps: &[Step],
    queries: &[String],
) -> Result<(), TestCaseError> {
    let namespaces = namespaces()?;
    let model = InMemoryStore::with_clock(Arc::new(ManualClock::new(now)));
    let failed = |error: memory_core::error::MemoryError| TestCaseError::fail(error.to_string());
    for step in steps {
        let key = doc_key(&namespaces[step.namespace], IDS[step.id])?;
        let expected = if step.replace {
            model
                .read(&key)
                .await
                .map_err(failed)?
                .map(|document| document.revision)
        } else {
            None
        };
        let text = step
            .words
            .iter()
            .map(|word| WORDS[*word])
            .collect::<Vec<_>>()
            .join(" ");
        let scopes: Vec<&str> = SCOPES
            .iter()
            .zip(&step.scopes)
            .filter(|(_, on)| **on)
            .map(|(name, _)| *name)
            .collect();
        let write = put(
            &key,
            &format!("op-{}", step.operation),
            expected.as_ref(),
            MemoryContent::text(text),
            &scopes,
        )
        .map_err(|failure| TestCaseError::fail(failure.0))?;
        let from_store = store.apply(write.clone()).await;
        let from_model = model.apply(write).await;
        match (&from_store, &from_model) {
            (Ok(stored), Ok(modelled)) => prop_assert_eq!(stored, modelled),
            (Err(stored), Err(modelled)) => prop_assert_eq!(stored.kind(), modelled.kind()),
            _ => prop_assert!(false, "store {:?} vs model {:?}", from_store, from_model),
        }
    }
    for namespace in &namespaces {
        let mut visible_by_scope = Vec::new();
        for id in IDS {
            let key = doc_key(namespace, id)?;
            let stored = store.read(&key).await.map_err(failed)?;
            prop_assert_eq!(&stored, &model.read(&key).await.map_err(failed)?);
            if let Some(document) = &stored {
                prop_assert_eq!(&document.key, &key);
            }
            visible_by_scope.push(stored);
        }
        for scope_name in SCOPES {
            let access = MemoryAccess {
                namespace: namespace.clone(),
                scope: MemoryScope::new(scope_name).map_err(failed)?,
            };
            let visible: Vec<_> = visible_by_scope
                .iter()
                .flatten()
                .filter(|document| document.is_visible_to(&access))
                .collect();
            for word in WORDS {
                let hits = store.search(&access, word, 50).await.map_err(failed)?;
                let mut found: Vec<_> = hits
                    .iter()
                    .map(|hit| (hit.key.clone(), hit.revision.clone()))
                    .collect();
                found.sort();
                let mut wanted: Vec<_> = visible
                    .iter()
                    .filter(|document| document.content.text.split(' ').any(|token| token == word))
                    .map(|document| (document.key.clone(), document.revision.clone()))
                    .collect();
                wanted.sort();
                prop_assert_eq!(found, wanted, "query {}", word);
            }
            for query in queries {
                let hits = match store.search(&access, query, 50).await {
                    Ok(hits) => hits,
                    Err(error) => {
                        return Err(TestCaseError::fail(format!(
                            "query {query:?} failed: {error}"
                        )));
                    }
                };
                for hit in hits {
                    prop_assert!(
                        visible
                            .iter()
                            .any(|document| document.key == hit.key
                                && document.revision == hit.revision),
                        "query {:?} escaped the filter",
                        query
                    );
                }
            }
        }
    }
    store.check_consistency().await.map_err(failed)?;
    Ok(())
}

/// Runs the isolation property on fresh stores from `factory`, whose clocks must stand at `now`
/// (epoch milliseconds): every answer is compared, receipt times included, with an in-memory store on
/// a clock at `now`. Case counts follow [`proptest_config`], at most 24 by default.
///
/// # Panics
/// When a case breaks isolation (the minimized case is printed), or no runtime can be built.
pub fn run_isolation_property<S, F, Fut>(now: i64, factory: F)
where
    S: InspectableStore,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("cannot build a tokio runtime for the isolation property: {error}"),
    };
    let mut config = proptest_config();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = config.cases.min(MAX_CASES);
    }
    let mut runner = TestRunner::new(config);
    let strategy = (
        proptest::collection::vec(step(), 1..16),
        proptest::collection::vec(hostile_query(), 1..6),
    );
    let result = runner.run(&strategy, |(steps, queries)| {
        runtime.block_on(async {
            let store = factory().await;
            check_case(&store, now, &steps, &queries).await
        })
    });
    if let Err(error) = result {
        panic!("a read or search crossed a namespace or scope: {error}");
    }
}
