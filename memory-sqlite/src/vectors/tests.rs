//! The vector store's own tests (the port's contract suite runs in `tests/vectors.rs`).

#![allow(clippy::unwrap_used)]

use memory_core::{DocumentId, NamespaceAddress};

use memory_core::Revision;
use memory_core::StoreFault;
use memory_core::vectors::{StoredChunk, StoredSourceState};

use super::*;

fn key(id: &str) -> MemoryKey {
    MemoryKey {
        namespace: NamespaceAddress::parse(r#"[1,"notes",1,{"user":"u"}]"#).unwrap(),
        id: DocumentId::new(id).unwrap(),
    }
}

fn limits() -> VectorLoadLimits {
    VectorLoadLimits {
        dimensions: 2,
        max_sources: 10,
        max_chunks: 10,
    }
}

fn indexed(id: &str, generation: u64, vectors: &[[f32; 2]]) -> StoredSource {
    StoredSource {
        key: key(id),
        generation: SourceGeneration::new(generation),
        state: StoredSourceState::Indexed {
            revision: Revision::new(format!("r{generation}")).unwrap(),
            chunks: vectors
                .iter()
                .enumerate()
                .map(|(ordinal, vector)| StoredChunk {
                    ordinal: ordinal as u32,
                    start: ordinal as u64 * 3,
                    end: ordinal as u64 * 3 + 3,
                    excerpt_digest: [ordinal as u8; 32],
                    vector: vector.to_vec(),
                })
                .collect(),
        },
    }
}

#[test]
fn replaced_sources_round_trip_per_profile() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("vectors.sqlite");
    let profile = ProfileDigest::from_bytes([1; 32]);
    let other_profile = ProfileDigest::from_bytes([2; 32]);
    {
        let store = SqliteVectorStore::open(&path).unwrap();
        store
            .replace_now(&profile, &indexed("a", 1, &[[1.0, 0.0], [0.0, 1.0]]))
            .unwrap();
        store
            .replace_now(&profile, &indexed("a", 2, &[[0.6, 0.8]]))
            .unwrap();
        store
            .replace_now(
                &profile,
                &StoredSource {
                    key: key("b"),
                    generation: SourceGeneration::new(3),
                    state: StoredSourceState::Withdrawn,
                },
            )
            .unwrap();
        store
            .set_position_now(&profile, ChangeSequence::new(7))
            .unwrap();
        store
            .set_position_now(&profile, ChangeSequence::new(5))
            .unwrap();
    }
    let store = SqliteVectorStore::open(&path).unwrap();
    let sources = store.load_now(&profile, limits(), None).unwrap();
    assert_eq!(sources.len(), 2);
    assert_eq!(sources[0], indexed("a", 2, &[[0.6, 0.8]]));
    assert_eq!(sources[1].state, StoredSourceState::Withdrawn);
    assert!(
        store
            .load_now(&other_profile, limits(), None)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.position_now(&profile).unwrap(),
        ChangeSequence::new(7)
    );
    assert_eq!(
        store.position_now(&other_profile).unwrap(),
        ChangeSequence::ZERO
    );
}

/// Collects what a load hands over.
struct Collected(Vec<Vec<f32>>);

impl VectorSink for Collected {
    fn push_vector(&mut self, vector: &[f32]) -> Result<(), MemoryError> {
        self.0.push(vector.to_vec());
        Ok(())
    }
}

#[test]
fn a_load_into_a_sink_hands_over_the_vectors_in_order() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap();
    let profile = ProfileDigest::from_bytes([1; 32]);
    store
        .replace_now(&profile, &indexed("b", 1, &[[0.6, 0.8]]))
        .unwrap();
    store
        .replace_now(&profile, &indexed("a", 1, &[[1.0, 0.0], [0.0, 1.0]]))
        .unwrap();
    let whole = store.load_now(&profile, limits(), None).unwrap();
    let mut collected = Collected(Vec::new());
    let emptied = store
        .load_now(&profile, limits(), Some(&mut collected))
        .unwrap();
    let mut expected = Vec::new();
    let mut stripped = whole.clone();
    for source in &mut stripped {
        if let StoredSourceState::Indexed { chunks, .. } = &mut source.state {
            for chunk in chunks {
                expected.push(std::mem::take(&mut chunk.vector));
            }
        }
    }
    assert_eq!(collected.0, expected);
    assert_eq!(expected.len(), 3);
    assert_eq!(
        emptied, stripped,
        "everything else is as a plain load returns it"
    );
    let wrong = VectorLoadLimits {
        dimensions: 3,
        ..limits()
    };
    assert!(matches!(
        store.load_now(&profile, wrong, Some(&mut Collected(Vec::new()))),
        Err(MemoryError::Store(StoreFault::Corrupt { .. }))
    ));
}

#[test]
fn load_refuses_counts_over_limits_and_wrong_dimensions() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap();
    let profile = ProfileDigest::from_bytes([1; 32]);
    store
        .replace_now(&profile, &indexed("a", 1, &[[1.0, 0.0], [0.0, 1.0]]))
        .unwrap();
    let tight = VectorLoadLimits {
        max_chunks: 1,
        ..limits()
    };
    assert!(matches!(
        store.load_now(&profile, tight, None),
        Err(MemoryError::TooLarge {
            limit: "stored chunks",
            ..
        })
    ));
    let wrong = VectorLoadLimits {
        dimensions: 3,
        ..limits()
    };
    assert!(matches!(
        store.load_now(&profile, wrong, None),
        Err(MemoryError::Store(StoreFault::Corrupt { .. }))
    ));
}

#[test]
fn stale_replacements_change_no_rows_and_are_reported() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap();
    let profile = ProfileDigest::from_bytes([1; 32]);
    let current = indexed("a", 5, &[[1.0, 0.0], [0.0, 1.0]]);
    assert_eq!(
        store.replace_now(&profile, &current).unwrap(),
        ReplaceOutcome::Replaced
    );
    let stale = ReplaceOutcome::Stale {
        current: SourceGeneration::new(5),
        withdrawn: false,
    };
    let older = indexed("a", 3, &[[0.6, 0.8]]);
    assert_eq!(store.replace_now(&profile, &older).unwrap(), stale);
    let divergent = StoredSource {
        state: StoredSourceState::Indexed {
            revision: Revision::new("other").unwrap(),
            chunks: Vec::new(),
        },
        ..indexed("a", 5, &[])
    };
    assert_eq!(store.replace_now(&profile, &divergent).unwrap(), stale);
    let older_withdrawal = StoredSource {
        key: key("a"),
        generation: SourceGeneration::new(4),
        state: StoredSourceState::Withdrawn,
    };
    assert_eq!(
        store.replace_now(&profile, &older_withdrawal).unwrap(),
        stale
    );
    assert_eq!(
        store.load_now(&profile, limits(), None).unwrap(),
        vec![current.clone()]
    );
    assert_eq!(
        store.replace_now(&profile, &current).unwrap(),
        ReplaceOutcome::Replaced,
        "a replay of the stored state is admitted"
    );

    let withdrawal = StoredSource {
        generation: SourceGeneration::new(5),
        ..older_withdrawal
    };
    assert_eq!(
        store.replace_now(&profile, &withdrawal).unwrap(),
        ReplaceOutcome::Replaced,
        "a withdrawal at the same generation is admitted"
    );
    let withdrawn = ReplaceOutcome::Stale {
        current: SourceGeneration::new(5),
        withdrawn: true,
    };
    assert_eq!(
        store
            .replace_now(&profile, &indexed("a", 9, &[[1.0, 0.0]]))
            .unwrap(),
        withdrawn,
        "withdrawal is terminal"
    );
    assert_eq!(store.replace_now(&profile, &withdrawal).unwrap(), withdrawn);
    assert_eq!(
        store.load_now(&profile, limits(), None).unwrap(),
        vec![withdrawal]
    );
}

#[test]
fn load_keeps_chunkless_sources_and_refuses_orphan_chunks() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("v.sqlite");
    let store = SqliteVectorStore::open(&path).unwrap();
    let profile = ProfileDigest::from_bytes([1; 32]);
    let empty = indexed("a", 1, &[]);
    let full = indexed("b", 2, &[[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]);
    store.replace_now(&profile, &empty).unwrap();
    store.replace_now(&profile, &full).unwrap();
    assert_eq!(
        store.load_now(&profile, limits(), None).unwrap(),
        vec![empty, full]
    );
    store
        .lock()
        .execute("DELETE FROM semantic_sources WHERE document_id = 'b'", [])
        .unwrap();
    assert!(matches!(
        store.load_now(&profile, limits(), None),
        Err(MemoryError::Store(StoreFault::Corrupt { .. }))
    ));
}

#[test]
fn unindexed_records_page_count_and_clear_with_the_vectors() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap();
    let profile = ProfileDigest::from_bytes([1; 32]);
    for (id, generation, reason) in [
        ("a", 1, UnindexedReason::Capacity),
        ("b", 2, UnindexedReason::Capacity),
        ("c", 3, UnindexedReason::TooLarge),
    ] {
        store
            .record_unindexed_now(
                &profile,
                &key(id),
                SourceGeneration::new(generation),
                reason,
            )
            .unwrap();
    }
    // An older generation's record never replaces a newer one.
    store
        .record_unindexed_now(
            &profile,
            &key("c"),
            SourceGeneration::new(1),
            UnindexedReason::Invalid,
        )
        .unwrap();
    assert_eq!(
        store.unindexed_counts_now(&profile).unwrap(),
        vec![
            (UnindexedReason::TooLarge, 1),
            (UnindexedReason::Capacity, 2)
        ]
    );
    let first = store
        .unindexed_sources_now(&profile, UnindexedReason::Capacity, None, 1)
        .unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].key, key("a"));
    let second = store
        .unindexed_sources_now(&profile, UnindexedReason::Capacity, Some(&first[0].key), 5)
        .unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(
        (second[0].key.clone(), second[0].generation),
        (key("b"), SourceGeneration::new(2))
    );
    // Indexing a source clears its record in the same transaction; a replay is cleared by
    // generation.
    store
        .replace_now(&profile, &indexed("a", 4, &[[1.0, 0.0]]))
        .unwrap();
    store
        .clear_unindexed_now(&profile, &key("b"), SourceGeneration::new(1))
        .unwrap();
    assert_eq!(
        store.unindexed_counts_now(&profile).unwrap(),
        vec![
            (UnindexedReason::TooLarge, 1),
            (UnindexedReason::Capacity, 1)
        ]
    );
    store
        .clear_unindexed_now(&profile, &key("b"), SourceGeneration::new(2))
        .unwrap();
    assert!(
        store
            .unindexed_counts_now(&ProfileDigest::from_bytes([2; 32]))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.unindexed_counts_now(&profile).unwrap(),
        vec![(UnindexedReason::TooLarge, 1)]
    );
}

#[test]
fn graphs_round_trip_per_profile_and_oversized_ones_are_refused_unread() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteVectorStore::open(directory.path().join("v.sqlite")).unwrap();
    let profile = ProfileDigest::from_bytes([1; 32]);
    assert_eq!(store.load_graph_now(&profile, 1_000).unwrap(), None);
    let graph = GraphSnapshot {
        position: ChangeSequence::new(9),
        vector_set: [7; 32],
        chunks: 3,
        bytes: vec![1, 2, 3, 4],
    };
    store.save_graph_now(&profile, &graph).unwrap();
    assert_eq!(
        store.load_graph_now(&profile, 4).unwrap(),
        Some(graph.clone())
    );
    assert!(matches!(
        store.load_graph_now(&profile, 3),
        Err(MemoryError::TooLarge { .. })
    ));
    assert_eq!(
        store
            .load_graph_now(&ProfileDigest::from_bytes([2; 32]), 1_000)
            .unwrap(),
        None
    );
    let newer = GraphSnapshot {
        position: ChangeSequence::new(10),
        bytes: vec![5],
        ..graph
    };
    store.save_graph_now(&profile, &newer).unwrap();
    assert_eq!(store.load_graph_now(&profile, 4).unwrap(), Some(newer));
}

#[test]
fn the_stored_chunk_count_is_kept_by_replacements_and_counted_once_by_its_migration() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("v.sqlite");
    let profile = ProfileDigest::from_bytes([1; 32]);
    let other_profile = ProfileDigest::from_bytes([2; 32]);
    {
        let store = SqliteVectorStore::open(&path).unwrap();
        store
            .replace_now(&profile, &indexed("a", 2, &[[1.0, 0.0], [0.0, 1.0]]))
            .unwrap();
        store
            .replace_now(&profile, &indexed("b", 2, &[[0.6, 0.8]]))
            .unwrap();
        store
            .replace_now(&other_profile, &indexed("a", 1, &[[1.0, 0.0]]))
            .unwrap();
        // A stale replacement changes no row, the count included.
        assert!(matches!(
            store
                .replace_now(&profile, &indexed("a", 1, &[[1.0, 0.0]]))
                .unwrap(),
            ReplaceOutcome::Stale { .. }
        ));
        assert_eq!(store.stored_chunks_now(&profile).unwrap(), 3);
        // A file of the step before the count: the step counts what is already there.
        store
            .lock()
            .execute_batch(
                "DROP TABLE semantic_chunk_counts; \
                 DELETE FROM memory_schema_version WHERE version = 16;",
            )
            .unwrap();
    }
    let store = SqliteVectorStore::open(&path).unwrap();
    assert_eq!(store.stored_chunks_now(&profile).unwrap(), 3);
    assert_eq!(store.stored_chunks_now(&other_profile).unwrap(), 1);
    store
        .replace_now(&profile, &indexed("a", 3, &[[0.0, 1.0]]))
        .unwrap();
    store
        .replace_now(
            &profile,
            &StoredSource {
                key: key("b"),
                generation: SourceGeneration::new(4),
                state: StoredSourceState::Withdrawn,
            },
        )
        .unwrap();
    assert_eq!(store.stored_chunks_now(&profile).unwrap(), 1);
    assert_eq!(store.stored_chunks_now(&other_profile).unwrap(), 1);
    // The count refuses a load past the bound before any row is read.
    store
        .replace_now(&profile, &indexed("c", 5, &[[1.0, 0.0], [0.0, 1.0]]))
        .unwrap();
    let tight = VectorLoadLimits {
        max_chunks: 2,
        ..limits()
    };
    assert!(matches!(
        store.load_now(&profile, tight, None),
        Err(MemoryError::TooLarge {
            limit: "stored chunks",
            actual: 3,
            ..
        })
    ));
}
