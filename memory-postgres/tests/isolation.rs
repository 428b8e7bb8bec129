//! Tenant isolation on PostgreSQL: random documents with colliding ids, operation ids and texts across namespaces
//! (two tenants, and one identity under two definition versions). Every read and every lexical query
//! must return only the caller's namespace and scope, agree with the in-memory store, and no query text
//! (full-text operators included) may make the search fail.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use memory_core::testing::proptest_config;
use memory_core::{
    InMemoryStore, LexicalSearch, ManualClock, MemoryAccess, MemoryContent, MemoryKey,
    MemoryReader, MemoryWriter, NamespaceAddress,
};
use proptest::prelude::*;

const WORDS: [&str; 5] = ["apple", "river", "stone", "cloud", "tiger"];
const IDS: [&str; 3] = ["x", "y", "z"];
const SCOPES: [&str; 2] = ["s1", "s2"];

fn namespaces() -> Vec<NamespaceAddress> {
    let same_identity = serde_json::json!({ "tenant": "a" });
    vec![
        namespace("a"),
        namespace("b"),
        NamespaceAddress::encode("memory-postgres-tests", 2, &same_identity).expect("valid"),
    ]
}

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
        Just("(((".to_owned()),
        Just("apple & !river | stone <-> cloud".to_owned()),
        Just("'apple':* & river:A".to_owned()),
        Just("\\' OR 1=1; --".to_owned()),
        Just("a\u{0}b".to_owned()),
        Just("\u{301}\u{1F600}\u{200B}".to_owned()),
        "[\"*^:(){}+\\-., a-zA-Z0-9\u{e9}\u{4e2d}\u{1F600}]{0,40}",
        any::<String>(),
    ]
}

async fn check_case(url: &str, steps: &[Step], queries: &[String]) -> Result<(), TestCaseError> {
    let namespaces = namespaces();
    let store = store_at(url.to_owned()).await;
    let model = InMemoryStore::with_clock(Arc::new(ManualClock::new(NOW)));
    for step in steps {
        let key = MemoryKey {
            namespace: namespaces[step.namespace].clone(),
            id: memory_core::DocumentId::new(IDS[step.id]).expect("id"),
        };
        let expected = if step.replace {
            model
                .read(&key)
                .await
                .expect("model read")
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
        );
        let from_store = store.apply(write.clone()).await;
        let from_model = model.apply(write).await;
        match (&from_store, &from_model) {
            (Ok(stored), Ok(modelled)) => prop_assert_eq!(stored, modelled),
            (Err(stored), Err(modelled)) => prop_assert_eq!(stored.kind(), modelled.kind()),
            _ => prop_assert!(false, "store {:?} vs model {:?}", from_store, from_model),
        }
    }
    for namespace in &namespaces {
        for id in IDS {
            let key = MemoryKey {
                namespace: namespace.clone(),
                id: memory_core::DocumentId::new(id).expect("id"),
            };
            let stored = store.read(&key).await.expect("read");
            prop_assert_eq!(&stored, &model.read(&key).await.expect("model read"));
            if let Some(document) = stored {
                prop_assert_eq!(&document.key, &key);
            }
        }
        for scope_name in SCOPES {
            let access = MemoryAccess {
                namespace: namespace.clone(),
                scope: scope(scope_name),
            };
            let mut visible = Vec::new();
            for id in IDS {
                let key = MemoryKey {
                    namespace: namespace.clone(),
                    id: memory_core::DocumentId::new(id).expect("id"),
                };
                if let Some(document) = model.read(&key).await.expect("model read")
                    && document.is_visible_to(&access)
                {
                    visible.push(document);
                }
            }
            for word in WORDS {
                let hits = store.search(&access, word, 50).await.expect("search");
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
                let hits = store.search(&access, query, 50).await;
                let hits = match hits {
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
    store.check_consistency().await.expect("consistent");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: proptest_config().cases.min(16), ..proptest_config() })]

    #[test]
    fn reads_and_searches_never_cross_namespaces_or_scopes(
        steps in proptest::collection::vec(step(), 1..16),
        queries in proptest::collection::vec(hostile_query(), 1..6),
    ) {
        let Some(url) = server_url("reads_and_searches_never_cross_namespaces_or_scopes") else {
            return Ok(());
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(check_case(&url, &steps, &queries))?;
    }
}
