//! A namespace-filtered search never returns another namespace's chunk, whatever the layout: random
//! namespaces of random sizes (from empty to several times HNSW's candidate list, so both the filtered
//! scan and the filtered graph walk run), interleaved, with replacements and removals between
//! searches. The exact index must also return exactly the brute-force top `limit` of the namespace's
//! live chunks; HNSW, approximate, only live chunks of the namespace, each once, best first.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use memory_core::vectors::SourceGeneration;
use memory_core::{DocumentId, MemoryKey, NamespaceAddress, Revision};
use proptest::prelude::*;
use semantic_index::index::{ChunkMeta, SourceFilter, SourceVersion};
use semantic_index::{ExactIndex, HnswIndex, HnswParams, IndexBounds, SearchRequest, VectorIndex};

const DIMENSIONS: usize = 8;
/// HNSW's candidate list in this test: namespaces up to it are scanned, larger ones walk the graph.
const EF_SEARCH: usize = 16;

/// One step of a layout: replace a source with `chunks` chunks (none removes it).
#[derive(Debug, Clone)]
struct Step {
    namespace: usize,
    source: usize,
    chunks: usize,
    seed: u64,
}

fn namespace(index: usize) -> NamespaceAddress {
    NamespaceAddress::parse(&format!(r#"[1,"tenant",1,{{"user":"u{index}"}}]"#)).unwrap()
}

fn key(namespace_index: usize, source: usize) -> MemoryKey {
    MemoryKey {
        namespace: namespace(namespace_index),
        id: DocumentId::new(format!("doc-{source}")).unwrap(),
    }
}

/// A unit vector drawn from `seed` (splitmix64), never zero.
fn vector(seed: u64) -> Vec<f32> {
    let mut state = seed;
    let mut values: Vec<f32> = (0..DIMENSIONS)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z >> 11) as f32 / (1u64 << 53) as f32 - 0.5
        })
        .collect();
    values[0] += 1e-3;
    let norm = values.iter().map(|value| value * value).sum::<f32>().sqrt();
    values.iter_mut().for_each(|value| *value /= norm);
    values
}

fn chunks(key: &MemoryKey, count: usize, seed: u64) -> Vec<(ChunkMeta, Vec<f32>)> {
    let source = Arc::new(SourceVersion {
        key: key.clone(),
        revision: Revision::new(format!("r{seed}")).unwrap(),
        generation: SourceGeneration::new(1),
    });
    (0..count)
        .map(|ordinal| {
            (
                ChunkMeta {
                    source: Arc::clone(&source),
                    ordinal: ordinal as u32,
                    start: ordinal,
                    end: ordinal + 1,
                    excerpt_digest: [0; 32],
                },
                vector(seed.wrapping_mul(31).wrapping_add(ordinal as u64)),
            )
        })
        .collect()
}

fn step() -> impl Strategy<Value = Step> {
    // Namespace 0 takes half the steps and large sources, so it grows past the candidate list.
    (0usize..8, 0usize..40, 0usize..6, any::<u64>()).prop_map(|(pick, source, chunks, seed)| {
        let namespace = if pick < 4 { 0 } else { pick - 3 };
        Step {
            namespace,
            source,
            chunks: if namespace == 0 { chunks * 2 } else { chunks },
            seed,
        }
    })
}

/// The live chunks of the model: `(key, ordinal) -> vector`, per namespace.
type Model = BTreeMap<usize, BTreeMap<(String, u32), Vec<f32>>>;

fn check(
    index: &dyn VectorIndex,
    model: &Model,
    query: &[f32],
    limit: usize,
    exact: bool,
) -> Result<(), TestCaseError> {
    let request = SearchRequest {
        limit,
        min_score: -1.0,
        max_scanned_chunks: 1_000_000,
    };
    for namespace_index in 0..5 {
        let address = namespace(namespace_index);
        let outcome = index
            .search_in(query, request, SourceFilter::Namespace(&address))
            .unwrap();
        let live = model.get(&namespace_index).cloned().unwrap_or_default();
        let mut seen = HashSet::new();
        for hit in &outcome.hits {
            prop_assert_eq!(&hit.chunk.source.key.namespace, &address);
            let id = (
                hit.chunk.source.key.id.as_str().to_owned(),
                hit.chunk.ordinal,
            );
            prop_assert!(
                live.contains_key(&id),
                "a removed or replaced chunk: {:?}",
                id
            );
            prop_assert!(seen.insert(id), "a chunk returned twice");
        }
        for pair in outcome.hits.windows(2) {
            prop_assert!(pair[0].score >= pair[1].score, "hits out of order");
        }
        prop_assert!(outcome.hits.len() <= limit.min(live.len()));
        if exact {
            let mut expected: Vec<f32> = live
                .values()
                .map(|vector| vector.iter().zip(query).map(|(a, b)| a * b).sum())
                .collect();
            expected.sort_by(|left, right| right.total_cmp(left));
            expected.truncate(limit);
            let found: Vec<f32> = outcome.hits.iter().map(|hit| hit.score).collect();
            prop_assert_eq!(found.len(), expected.len());
            for (found, expected) in found.iter().zip(&expected) {
                prop_assert!((found - expected).abs() < 1e-4, "{} vs {}", found, expected);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_namespace_search_returns_only_that_namespaces_live_chunks(
        steps in prop::collection::vec(step(), 1..160),
        queries in prop::collection::vec((any::<u64>(), 1usize..40), 1..4),
    ) {
        let bounds = IndexBounds::with_max_chunks(DIMENSIONS, 4_096).unwrap();
        let mut exact = ExactIndex::new(DIMENSIONS, bounds).unwrap();
        let params = HnswParams {
            max_connections: 8,
            ef_construction: 32,
            ef_search: EF_SEARCH,
            width_grows: false,
            ..HnswParams::default()
        };
        let mut hnsw = HnswIndex::new(DIMENSIONS, bounds, params).unwrap();
        let mut model: Model = BTreeMap::new();
        for (position, step) in steps.iter().enumerate() {
            let key = key(step.namespace, step.source);
            let rows = model.entry(step.namespace).or_default();
            rows.retain(|(id, _), _| id != key.id.as_str());
            if step.chunks == 0 {
                exact.remove_source(&key);
                hnsw.remove_source(&key);
            } else {
                let chunks = chunks(&key, step.chunks, step.seed);
                for (meta, vector) in &chunks {
                    rows.insert((key.id.as_str().to_owned(), meta.ordinal), vector.clone());
                }
                exact.replace_source(&key, chunks.clone()).unwrap();
                hnsw.replace_source(&key, chunks).unwrap();
            }
            // Search between changes too, not only at the end.
            if position % 40 == 39 {
                let (seed, limit) = queries[0];
                check(&exact, &model, &vector(seed), limit, true)?;
                check(&hnsw, &model, &vector(seed), limit, false)?;
            }
        }
        for (seed, limit) in queries {
            check(&exact, &model, &vector(seed), limit, true)?;
            check(&hnsw, &model, &vector(seed), limit, false)?;
        }
    }
}
