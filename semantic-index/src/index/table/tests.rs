//! The chunk table's unit tests.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::index::SourceVersion;
use crate::index::pages::PageVec;
use crate::index::test_support::{key, meta, unit};

/// `id`'s key and chunk metadata in namespace `space`.
fn in_space(space: usize, id: &str, ordinal: u32) -> (MemoryKey, ChunkMeta) {
    let key = MemoryKey {
        namespace: NamespaceAddress::parse(&format!(r#"[1,"space{space}",1,{{"user":"u"}}]"#))
            .unwrap(),
        id: memory_core::DocumentId::new(id).unwrap(),
    };
    let mut chunk = meta(id, ordinal);
    chunk.source = Arc::new(SourceVersion {
        key: key.clone(),
        ..(*chunk.source).clone()
    });
    (key, chunk)
}

/// The rows a namespace-filtered search visits are exactly that namespace's live rows, through
/// replacements, removals, compactions and a reordered copy, and each visited row still holds its
/// own vector: in f32 and in compact tables alike.
#[test]
fn a_namespace_visits_exactly_its_own_live_rows() {
    for compact in [CompactVectors::F32, CompactVectors::int8()] {
        namespace_walk(compact);
    }
}

/// A namespace is passed over in row order only when it is large and a large share of the table:
/// a small one takes the same path alone as among many others.
#[test]
fn only_a_large_dominant_namespace_is_found_by_a_pass() {
    let rows = DENSE_NAMESPACE_ROWS + DENSE_NAMESPACE_ROWS / 2;
    let mut table = ChunkTable::new(2, rows * 10, rows * 10);
    let fill = |table: &mut ChunkTable, space: usize, count: usize| {
        for index in 0..count {
            let (key, chunk) = in_space(space, &format!("s{space}-{index}"), 0);
            table
                .replace_source(&key, vec![(chunk, space_vector(space))], 1.0)
                .unwrap();
        }
    };
    let namespace = |space: usize| in_space(space, "x", 0).0.namespace;
    fill(&mut table, 0, 100);
    // Alone, a small namespace is walked by source.
    assert!(!table.is_dense(&namespace(0)));
    fill(&mut table, 1, rows);
    assert!(table.is_dense(&namespace(1)));
    assert!(!table.is_dense(&namespace(0)));
    // A large namespace that became a small share of the table is walked by source again.
    fill(&mut table, 2, rows * DENSE_NAMESPACE_SHARE);
    assert!(!table.is_dense(&namespace(1)));
    assert!(table.is_dense(&namespace(2)));
    for space in 0..3 {
        let mut found: Vec<usize> = table.rows_in(&namespace(space)).collect();
        found.sort_unstable();
        let expected: Vec<usize> = (0..table.rows())
            .filter(|row| *table.meta(*row).source.namespace() == namespace(space))
            .collect();
        assert_eq!(found, expected, "space {space}");
    }
}

/// Every chunk of namespace `space` has this vector, so a row moved to the wrong place shows.
fn space_vector(space: usize) -> Vec<f32> {
    unit(&[1.0, space as f32])
}

fn namespace_walk(compact: CompactVectors) {
    let brute = |table: &ChunkTable, space: &NamespaceAddress| {
        let mut rows: Vec<usize> = (0..table.rows())
            .filter(|row| table.is_live(*row) && table.meta(*row).source.namespace() == space)
            .collect();
        rows.sort_unstable();
        rows
    };
    let check = |table: &ChunkTable| {
        for space in 0..3 {
            let namespace = in_space(space, "x", 0).0.namespace;
            let mut visited: Vec<usize> = table.rows_in(&namespace).collect();
            visited.sort_unstable();
            let expected = brute(table, &namespace);
            assert_eq!(visited, expected, "space {space}, {compact:?}");
            // Both ways of finding the rows, whichever `rows_in` chose for this share.
            let mut by_source: Vec<usize> = table.rows_by_source(&namespace).collect();
            by_source.sort_unstable();
            assert_eq!(by_source, expected, "by source: space {space}, {compact:?}");
            let in_order: Vec<usize> = table.rows_in_order(&namespace).collect();
            assert_eq!(in_order, expected, "in order: space {space}, {compact:?}");
            assert_eq!(table.live_in(&namespace), expected.len());
            for row in visited {
                let held = table.vector(row);
                let own = space_vector(space);
                assert!(
                    held.iter().zip(&own).all(|(h, o)| (h - o).abs() < 0.01),
                    "row {row} of space {space} holds {held:?}, {compact:?}"
                );
            }
        }
    };
    let mut table = ChunkTable::with_encoding(2, 64, 96, compact);
    // A fixed pseudo-random walk: which source, in which namespace, with how many chunks.
    let mut state = 7u64;
    for step in 0..200 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let pick = (state >> 33) as usize;
        let (space, id, chunks) = (pick % 3, format!("d{}", (pick / 3) % 10), (pick / 30) % 4);
        let (key, _) = in_space(space, &id, 0);
        if step % 7 == 6 {
            table.remove_source(&key);
        } else {
            let rows = (0..chunks)
                .map(|ordinal| (in_space(space, &id, ordinal as u32).1, space_vector(space)))
                .collect();
            if table.replace_source(&key, rows, 0.3).is_err() {
                table.remove_source(&key);
            }
        }
        check(&table);
    }
    let live: Vec<usize> = (0..table.rows())
        .filter(|row| table.is_live(*row))
        .rev()
        .collect();
    let mut reordered = table.reordered(&live, 96);
    check(&reordered);
    reordered.compact();
    check(&reordered);
    check(&table.compacted_copy());
}

#[test]
fn replacement_checks_before_changing_and_compacts_within_bounds() {
    let mut table = ChunkTable::new(2, 3, 3);
    table
        .replace_source(
            &key("a"),
            vec![
                (meta("a", 0), unit(&[1.0, 0.0])),
                (meta("a", 1), unit(&[0.0, 1.0])),
            ],
            0.5,
        )
        .unwrap();
    let too_many = vec![
        (meta("b", 0), unit(&[1.0, 1.0])),
        (meta("b", 1), unit(&[1.0, 1.0])),
    ];
    assert!(matches!(
        table.replace_source(&key("b"), too_many, 0.5),
        Err(SemanticError::TooLarge {
            limit: "max_chunks",
            ..
        })
    ));
    assert_eq!(table.live_count(), 2);
    let replacement = table
        .replace_source(
            &key("a"),
            vec![
                (meta("a", 0), unit(&[1.0, 1.0])),
                (meta("a", 1), unit(&[1.0, 1.0])),
            ],
            0.9,
        )
        .unwrap();
    assert!(replacement.compacted, "4 rows would exceed max_rows");
    assert_eq!(table.rows(), 2);
    assert!(table.reserved_floats() <= 3 * 2);
    let wrong = vec![(meta("c", 0), vec![1.0, 0.0, 0.0])];
    assert!(table.replace_source(&key("c"), wrong, 0.5).is_err());
    assert_eq!(table.live_count(), 2);
}

/// A unit vector of `dimensions` in the plane of the first two axes.
fn planar(dimensions: usize, x: f32, y: f32) -> Vec<f32> {
    let mut vector = vec![0.0; dimensions];
    vector[0] = x;
    vector[1] = y;
    unit(&vector)
}

#[test]
fn copies_share_vector_segments_until_one_changes() {
    // At 2 dimensions a segment is a `Vec`; at 128 it is 2 MiB, mapped on huge pages.
    for (dimensions, mapped) in [(2, false), (128, true)] {
        sharing(dimensions, mapped);
    }
}

fn sharing(dimensions: usize, mapped: bool) {
    let rows = SEGMENT_ROWS + 10;
    let mut table = ChunkTable::new(dimensions, rows * 2, rows * 2);
    for i in 0..rows {
        let id = format!("s{i:05}");
        let angle = i as f32 * 0.001;
        table
            .replace_source(
                &key(&id),
                vec![(meta(&id, 0), planar(dimensions, angle.cos(), angle.sin()))],
                1.0,
            )
            .unwrap();
    }
    assert_eq!(
        matches!(&*table.segments[0], Segment::F32(PageVec::Mapped { .. })),
        mapped
    );
    let copy = table.reordered(&table.canonical_order(), rows * 2);
    assert!(
        Arc::ptr_eq(&copy.segments[0], &table.segments[0]),
        "a copy in place shares the vectors"
    );
    let mut changed = copy.clone();
    changed
        .replace_source(
            &key("zz"),
            vec![(meta("zz", 0), planar(dimensions, 0.0, 1.0))],
            1.0,
        )
        .unwrap();
    assert!(Arc::ptr_eq(&changed.segments[0], &table.segments[0]));
    assert!(
        !Arc::ptr_eq(&changed.segments[1], &table.segments[1]),
        "the segment appended to is copied"
    );
    assert_eq!(table.rows(), rows, "the original is unchanged");
    assert_eq!(
        changed.vector(rows),
        planar(dimensions, 0.0, 1.0).as_slice()
    );
    assert_eq!(changed.vector(rows - 1), table.vector(rows - 1));

    // Compaction shares the segments before the first tombstone.
    changed.remove_source(&key(&format!("s{:05}", SEGMENT_ROWS + 3)));
    let compacted = changed.compacted_copy();
    assert!(Arc::ptr_eq(&compacted.segments[0], &table.segments[0]));
    assert_eq!(compacted.rows(), rows);
    assert_eq!(compacted.chunks_of(&key("zz")), 1);
    assert_eq!(
        compacted.vector(rows - 1),
        planar(dimensions, 0.0, 1.0).as_slice()
    );
    assert_eq!(
        compacted.vector(SEGMENT_ROWS + 3),
        table.vector(SEGMENT_ROWS + 4)
    );
    // A shuffled copy keeps every source's rows and counts.
    let mut order = compacted.canonical_order();
    order.reverse();
    let reversed = compacted.reordered(&order, rows * 2);
    assert_eq!(reversed.vector(0), planar(dimensions, 0.0, 1.0).as_slice());
    assert_eq!(reversed.chunks_of(&key("zz")), 1);
    assert_eq!(reversed.live_in(&key("zz").namespace), rows);
}

#[test]
fn a_load_normalizes_checks_and_records_spans() {
    let source = |id: &str| meta(id, 0).source;
    let (a, b) = (source("a"), source("b"));
    let row = |source: &Arc<SourceVersion>, ordinal: u32| ChunkMeta {
        ordinal,
        ..ChunkMeta {
            source: Arc::clone(source),
            ..meta("a", 0)
        }
    };
    let mut vectors = LoadedVectors::new(2, 10);
    for vector in [[3.0, 4.0], [1.0, 0.0]] {
        vectors.push_vector(&vector).unwrap();
    }
    let stored: Vec<u8> = [0.0f32, 1.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    vectors.push_le_bytes(&stored).unwrap();
    assert!(vectors.push_vector(&[1.0, 0.0, 0.0]).is_err());
    assert!(vectors.push_le_bytes(&stored[..7]).is_err());
    let mut table = ChunkTable::new(2, 10, 10);
    table
        .load_rows(vec![row(&a, 0), row(&a, 1), row(&b, 0)], vectors)
        .unwrap();
    assert_eq!(
        table.vector(0),
        &[0.6, 0.8],
        "an unnormalized vector is normalized"
    );
    assert_eq!(table.vector(2), &[0.0, 1.0]);
    assert_eq!(
        (table.chunks_of(&key("a")), table.chunks_of(&key("b"))),
        (2, 1)
    );
    assert_eq!(table.live_in(&key("a").namespace), 3);

    // Two namespaces, each counted.
    let other = Arc::new(SourceVersion {
        key: MemoryKey {
            namespace: NamespaceAddress::parse(r#"[1,"other",1,{"user":"u"}]"#).unwrap(),
            id: memory_core::DocumentId::new("c").unwrap(),
        },
        ..(*a).clone()
    });
    let mut mixed = LoadedVectors::new(2, 10);
    for _ in 0..3 {
        mixed.push_vector(&[1.0, 0.0]).unwrap();
    }
    let mut table = ChunkTable::new(2, 10, 10);
    table
        .load_rows(vec![row(&a, 0), row(&b, 0), row(&other, 0)], mixed)
        .unwrap();
    assert_eq!(table.live_in(&key("a").namespace), 2);
    assert_eq!(table.live_in(&other.key.namespace), 1);

    let mut bad = LoadedVectors::new(2, 10);
    bad.push_vector(&[f32::NAN, 1.0]).unwrap();
    assert!(
        ChunkTable::new(2, 10, 10)
            .load_rows(vec![row(&a, 0)], bad)
            .is_err()
    );
    let mut twice = LoadedVectors::new(2, 10);
    for _ in 0..3 {
        twice.push_vector(&[1.0, 0.0]).unwrap();
    }
    let mut refused = ChunkTable::new(2, 10, 10);
    assert!(
        refused
            .load_rows(vec![row(&a, 0), row(&b, 0), row(&a, 1)], twice)
            .is_err(),
        "a source listed twice"
    );
    assert_eq!((refused.rows(), refused.live_count()), (0, 0));
    assert_eq!(refused.reserved_bytes(), 0, "no vectors were installed");
    assert_eq!(
        (
            refused.chunks_of(&key("a")),
            refused.live_in(&key("a").namespace)
        ),
        (0, 0)
    );
}

/// A compact load codes each vector as it arrives (normalized first), refuses a non-finite one
/// and a load of another encoding; copies of a compact table keep the codes bit for bit.
#[test]
fn a_compact_table_codes_rows_once_and_copies_keep_them() {
    let compact = CompactVectors::int8();
    let source = meta("a", 0).source;
    let row = |ordinal: u32| ChunkMeta {
        ordinal,
        source: Arc::clone(&source),
        ..meta("a", 0)
    };
    let mut vectors = LoadedVectors::with_encoding(2, 10, compact);
    vectors.push_vector(&[3.0, 4.0]).unwrap();
    let stored: Vec<u8> = [0.0f32, 1.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    vectors.push_le_bytes(&stored).unwrap();
    let mut table = ChunkTable::with_encoding(2, 10, 10, compact);
    table.load_rows(vec![row(0), row(1)], vectors).unwrap();
    let decoded = table.vector(0);
    assert!(
        (decoded[0] - 0.6).abs() < 0.01 && (decoded[1] - 0.8).abs() < 0.01,
        "{decoded:?}"
    );
    assert!(matches!(
        table.row(1),
        RowRef::Int8 {
            codes: [0, 127],
            ..
        }
    ));
    assert_eq!(
        table.reserved_bytes(),
        2 * 10 + 4 * 10,
        "codes and scales, no f32"
    );

    let mut bad = LoadedVectors::with_encoding(2, 10, compact);
    bad.push_vector(&[f32::NAN, 1.0]).unwrap();
    let mut empty = ChunkTable::with_encoding(2, 10, 10, compact);
    assert!(empty.load_rows(vec![row(0)], bad).is_err());
    let mut plain = LoadedVectors::new(2, 10);
    plain.push_vector(&[1.0, 0.0]).unwrap();
    assert!(
        empty.load_rows(vec![row(0)], plain).is_err(),
        "an f32 load into codes"
    );

    table
        .replace_source(&key("b"), vec![(meta("b", 0), unit(&[0.3, -0.7]))], 1.0)
        .unwrap();
    table.remove_source(&key("a"));
    let codes = |table: &ChunkTable, row: usize| match table.row(row) {
        RowRef::Int8 { codes, scale } => (codes.to_vec(), scale.to_bits()),
        RowRef::F32(_) => panic!("a compact table holds f32"),
    };
    let before = codes(&table, 2);
    let compacted = table.compacted_copy();
    assert_eq!(compacted.rows(), 1);
    assert_eq!(codes(&compacted, 0), before);
    let reordered = compacted.reordered(&[0], 10);
    assert_eq!(codes(&reordered, 0), before);
}

#[test]
fn the_sources_of_a_namespace_share_one_copy_of_its_address() {
    // Each `key` parses its own copy of the address, as a refresh or a store load does.
    let same = |table: &ChunkTable, row: usize| {
        table
            .meta(row)
            .source
            .namespace()
            .shares_text_with(table.meta(0).source.namespace())
    };
    let mut table = ChunkTable::new(2, 10, 10);
    for id in ["a", "b", "c"] {
        let rows = vec![
            (meta(id, 0), unit(&[1.0, 0.5])),
            (meta(id, 1), unit(&[0.5, 1.0])),
        ];
        table.replace_source(&key(id), rows, 1.0).unwrap();
    }
    assert!((1..table.rows()).all(|row| same(&table, row)));
    assert_eq!(table.chunks_of(&key("b")), 2);

    let mut vectors = LoadedVectors::new(2, 10);
    for _ in 0..2 {
        vectors.push_vector(&[1.0, 0.0]).unwrap();
    }
    let mut loaded = ChunkTable::new(2, 10, 10);
    loaded
        .load_rows(vec![meta("a", 0), meta("b", 0)], vectors)
        .unwrap();
    assert!(same(&loaded, 1));
    assert_eq!(loaded.chunks_of(&key("b")), 1);
}

#[test]
fn a_copy_keeps_its_rows_when_the_original_appends_and_compacts() {
    let rows = SEGMENT_ROWS + 3;
    let id = |row: usize| format!("d{row}");
    let mut table = ChunkTable::new(2, rows + 10, rows + 10);
    for row in 0..rows {
        let chunk = (meta(&id(row), 0), unit(&[1.0, row as f32]));
        table
            .replace_source(&key(&id(row)), vec![chunk], 1.0)
            .unwrap();
    }
    let copy = table.clone();
    table
        .replace_source(&key("new"), vec![(meta("new", 0), unit(&[0.0, 1.0]))], 1.0)
        .unwrap();
    table.remove_source(&key(&id(SEGMENT_ROWS + 1)));
    table.compact();
    assert_eq!((copy.rows(), table.rows()), (rows, rows));
    assert_eq!(
        copy.meta(SEGMENT_ROWS + 1).source.id(),
        id(SEGMENT_ROWS + 1)
    );
    assert_eq!(
        table.meta(SEGMENT_ROWS + 1).source.id(),
        id(SEGMENT_ROWS + 2)
    );
    assert_eq!(table.meta(rows - 1).source.id(), "new");
    assert_eq!(table.chunks_of(&key(&id(SEGMENT_ROWS + 2))), 1);
    assert_eq!(table.chunks_of(&key(&id(SEGMENT_ROWS + 1))), 0);
    let expected: Vec<usize> = (0..rows).collect();
    let mut found: Vec<usize> = table.rows_in(&key("a").namespace).collect();
    found.sort_unstable();
    assert_eq!(found, expected);
}
