//! The vector store suite: the rules of [`memory_core::vectors::VectorStore`] every
//! store keeps: profiles never mix, the generation fence, load limits, monotonic positions, unindexed
//! sources, persisted graphs, and reads of single chunks' vectors.
//!
//! ```no_run
//! use memory_testkit::InMemoryVectorStore;
//! use memory_testkit::vectors::run_vector_suite;
//!
//! #[tokio::test]
//! async fn in_memory_vectors_keep_every_rule() {
//!     run_vector_suite(|| async { InMemoryVectorStore::new() })
//!         .await
//!         .assert_all_passed();
//! }
//! ```

use std::future::Future;

use super::fixtures::{Checked, Failure, ensure};
use super::report::ContractReport;
use memory_core::document::MemoryKey;
use memory_core::error::{ErrorKind, MemoryError};
use memory_core::ids::{DocumentId, Revision};
use memory_core::namespace::NamespaceAddress;
use memory_core::ports::ChangeSequence;
use memory_core::vectors::{
    ChunkVectorRef, GraphSnapshot, MAX_CHUNK_VECTORS_PER_CALL, ProfileDigest, ReplaceOutcome,
    SourceGeneration, StoredChunk, StoredSource, StoredSourceState, UnindexedReason,
    VectorLoadLimits, VectorStore,
};

/// Every rule [`run_vector_suite`] checks, in order.
pub const VECTOR_RULES: &[&str] = &[
    "sources-round-trip-per-profile-in-key-order",
    "stale-replacements-are-fenced-and-change-nothing",
    "withdrawal-is-terminal",
    "loads-refuse-counts-over-limits-and-wrong-dimensions",
    "positions-never-move-backwards",
    "unindexed-sources-are-recorded-paged-and-cleared",
    "clearing-an-unindexed-record-spares-a-newer-one",
    "graphs-are-kept-per-profile-and-bounded-on-load",
    "chunk-vectors-are-read-by-key-revision-and-ordinal",
    "stored-chunks-count-the-profiles-indexed-chunks",
];

/// Runs every rule of [`VECTOR_RULES`], each on a fresh, empty store from `factory`.
pub async fn run_vector_suite<S, F, Fut>(factory: F) -> ContractReport
where
    S: VectorStore,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    run_vector_rules(factory, VECTOR_RULES).await
}

/// Runs only the named rules of [`VECTOR_RULES`]; a name that is no rule is reported as a failure.
pub async fn run_vector_rules<S, F, Fut>(mut factory: F, rules: &[&str]) -> ContractReport
where
    S: VectorStore,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    let mut report = ContractReport::default();
    for rule in VECTOR_RULES.iter().filter(|rule| rules.contains(rule)) {
        let store = factory().await;
        let result = match *rule {
            "sources-round-trip-per-profile-in-key-order" => round_trip(&store).await,
            "stale-replacements-are-fenced-and-change-nothing" => fence(&store).await,
            "withdrawal-is-terminal" => withdrawal_is_terminal(&store).await,
            "loads-refuse-counts-over-limits-and-wrong-dimensions" => limits(&store).await,
            "positions-never-move-backwards" => positions(&store).await,
            "unindexed-sources-are-recorded-paged-and-cleared" => unindexed(&store).await,
            "clearing-an-unindexed-record-spares-a-newer-one" => clearing(&store).await,
            "graphs-are-kept-per-profile-and-bounded-on-load" => graphs(&store).await,
            "stored-chunks-count-the-profiles-indexed-chunks" => stored_chunks(&store).await,
            _ => chunk_vectors(&store).await,
        };
        report.record(rule, result.map_err(|failure| failure.0));
    }
    for rule in rules {
        if !VECTOR_RULES.contains(rule) {
            report.record(
                "unknown-rule",
                Err(format!("no vector rule is named `{rule}`")),
            );
        }
    }
    report
}

const PROFILE: ProfileDigest = ProfileDigest::from_bytes([7; 32]);
const OTHER_PROFILE: ProfileDigest = ProfileDigest::from_bytes([8; 32]);
const LIMITS: VectorLoadLimits = VectorLoadLimits {
    dimensions: 2,
    max_sources: 10,
    max_chunks: 10,
};

fn ok<T>(result: Result<T, MemoryError>, step: &str) -> Result<T, Failure> {
    result.map_err(|error| {
        Failure(format!(
            "{step}: failed with {} ({error})",
            error.kind().as_str()
        ))
    })
}

fn refused<T: std::fmt::Debug>(
    result: Result<T, MemoryError>,
    kind: ErrorKind,
    step: &str,
) -> Checked {
    match result {
        Err(error) if error.kind() == kind => Ok(()),
        Err(error) => Err(Failure(format!(
            "{step}: failed with {}, not {}",
            error.kind().as_str(),
            kind.as_str()
        ))),
        Ok(value) => Err(Failure(format!("{step}: accepted ({value:?})"))),
    }
}

fn key(namespace: &str, id: &str) -> Result<MemoryKey, Failure> {
    Ok(MemoryKey {
        namespace: NamespaceAddress::encode(namespace, 1, &serde_json::json!({}))?,
        id: DocumentId::new(id)?,
    })
}

fn indexed(
    id: &str,
    generation: u64,
    revision: &str,
    vectors: &[[f32; 2]],
) -> Result<StoredSource, Failure> {
    Ok(StoredSource {
        key: key("notes", id)?,
        generation: SourceGeneration::new(generation),
        state: StoredSourceState::Indexed {
            revision: Revision::new(revision)?,
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
    })
}

fn withdrawn(id: &str, generation: u64) -> Result<StoredSource, Failure> {
    Ok(StoredSource {
        key: key("notes", id)?,
        generation: SourceGeneration::new(generation),
        state: StoredSourceState::Withdrawn,
    })
}

async fn replace<S: VectorStore>(
    store: &S,
    source: &StoredSource,
) -> Result<ReplaceOutcome, Failure> {
    ok(store.replace_source(&PROFILE, source).await, "replace")
}

async fn load<S: VectorStore>(store: &S) -> Result<Vec<StoredSource>, Failure> {
    ok(store.load_sources(&PROFILE, LIMITS).await, "load")
}

fn chunk_ref(id: &str, revision: &str, ordinal: u32) -> Result<ChunkVectorRef, Failure> {
    Ok(ChunkVectorRef {
        key: key("notes", id)?,
        revision: Revision::new(revision)?,
        ordinal,
    })
}

/// A compact index rescores its candidates with their stored vectors: each named chunk comes back
/// in the order named, exactly as stored, only at the revision named, never from another profile,
/// a withdrawn source or a missing ordinal; an oversized request is refused.
async fn chunk_vectors<S: VectorStore>(store: &S) -> Checked {
    let a = indexed("a", 1, "r1", &[[0.6, 0.8], [1.0, 0.0]])?;
    let b = indexed("b", 1, "r1", &[[0.0, 1.0]])?;
    for source in [&a, &b] {
        replace(store, source).await?;
    }
    let wanted = [
        chunk_ref("b", "r1", 0)?,
        chunk_ref("a", "r1", 1)?,
        chunk_ref("a", "r2", 0)?,
        chunk_ref("a", "r1", 5)?,
        chunk_ref("missing", "r1", 0)?,
        chunk_ref("a", "r1", 0)?,
    ];
    let read = ok(
        store.load_chunk_vectors(&PROFILE, &wanted, 2).await,
        "read chunk vectors",
    )?;
    let expected = vec![
        Some(vec![0.0, 1.0]),
        Some(vec![1.0, 0.0]),
        None,
        None,
        None,
        Some(vec![0.6, 0.8]),
    ];
    ensure!(read == expected, "chunk vectors read as {read:?}");
    let other = ok(
        store
            .load_chunk_vectors(&OTHER_PROFILE, &wanted[..1], 2)
            .await,
        "read another profile",
    )?;
    ensure!(
        other == [None],
        "another profile reads this profile's vectors: {other:?}"
    );
    let replaced = indexed("a", 2, "r2", &[[0.8, 0.6]])?;
    replace(store, &replaced).await?;
    let after = ok(
        store
            .load_chunk_vectors(
                &PROFILE,
                &[chunk_ref("a", "r1", 0)?, chunk_ref("a", "r2", 0)?],
                2,
            )
            .await,
        "read after a replacement",
    )?;
    ensure!(
        after == [None, Some(vec![0.8, 0.6])],
        "a replaced revision's vectors read as {after:?}"
    );
    replace(store, &withdrawn("b", 3)?).await?;
    let gone = ok(
        store
            .load_chunk_vectors(&PROFILE, &[chunk_ref("b", "r1", 0)?], 2)
            .await,
        "read a withdrawn source",
    )?;
    ensure!(
        gone == [None],
        "a withdrawn source's vectors read as {gone:?}"
    );
    refused(
        store
            .load_chunk_vectors(&PROFILE, &[chunk_ref("a", "r2", 0)?], 3)
            .await,
        ErrorKind::Corrupt,
        "a read at the wrong dimensions",
    )?;
    let too_many = vec![chunk_ref("a", "r2", 0)?; MAX_CHUNK_VECTORS_PER_CALL + 1];
    refused(
        store.load_chunk_vectors(&PROFILE, &too_many, 2).await,
        ErrorKind::TooLarge,
        "an oversized read",
    )?;
    Ok(())
}

async fn round_trip<S: VectorStore>(store: &S) -> Checked {
    ensure!(
        load(store).await?.is_empty(),
        "an empty store loads sources"
    );
    let b = indexed("b", 2, "r2", &[[0.25, 0.75], [0.5, 0.5]])?;
    let a = indexed("a", 1, "r1", &[])?;
    let other_namespace = StoredSource {
        key: key("archive", "z")?,
        ..indexed("z", 1, "r1", &[[1.0, 0.0]])?
    };
    for source in [&b, &a, &other_namespace] {
        ensure!(
            replace(store, source).await? == ReplaceOutcome::Replaced,
            "a first replacement was fenced"
        );
    }
    let loaded = load(store).await?;
    ensure!(
        loaded == [other_namespace, a, b.clone()],
        "sources load as {loaded:?}"
    );
    let other = ok(
        store.load_sources(&OTHER_PROFILE, LIMITS).await,
        "load another profile",
    )?;
    ensure!(
        other.is_empty(),
        "another profile loads this profile's sources"
    );
    let newer = indexed("b", 3, "r3", &[[0.6, 0.8]])?;
    ensure!(
        replace(store, &newer).await? == ReplaceOutcome::Replaced,
        "a newer generation was fenced"
    );
    let loaded = load(store).await?;
    ensure!(
        loaded.last() == Some(&newer),
        "a replacement kept the old chunks"
    );
    ensure!(loaded.len() == 3, "a replacement added a source");
    Ok(())
}

async fn fence<S: VectorStore>(store: &S) -> Checked {
    let current = indexed("a", 5, "r5", &[[1.0, 0.0], [0.0, 1.0]])?;
    replace(store, &current).await?;
    let stale = ReplaceOutcome::Stale {
        current: SourceGeneration::new(5),
        withdrawn: false,
    };
    for (step, source) in [
        ("an older generation", indexed("a", 3, "r3", &[[0.6, 0.8]])?),
        (
            "the same generation with another revision",
            indexed("a", 5, "other", &[])?,
        ),
        ("an older withdrawal", withdrawn("a", 4)?),
    ] {
        let outcome = replace(store, &source).await?;
        ensure!(outcome == stale, "{step} answered {outcome:?}");
    }
    ensure!(
        load(store).await? == [current.clone()],
        "a fenced replacement changed what is stored"
    );
    ensure!(
        replace(store, &current).await? == ReplaceOutcome::Replaced,
        "a replay of the stored state was fenced"
    );
    ensure!(
        load(store).await? == [current],
        "a replay changed what is stored"
    );
    Ok(())
}

async fn withdrawal_is_terminal<S: VectorStore>(store: &S) -> Checked {
    replace(store, &indexed("a", 5, "r5", &[[1.0, 0.0]])?).await?;
    let withdrawal = withdrawn("a", 5)?;
    ensure!(
        replace(store, &withdrawal).await? == ReplaceOutcome::Replaced,
        "a withdrawal at the same generation was fenced"
    );
    let terminal = ReplaceOutcome::Stale {
        current: SourceGeneration::new(5),
        withdrawn: true,
    };
    let later = replace(store, &indexed("a", 9, "r9", &[[1.0, 0.0]])?).await?;
    ensure!(
        later == terminal,
        "a later refresh of a withdrawn source answered {later:?}"
    );
    let again = replace(store, &withdrawn("a", 9)?).await?;
    ensure!(
        again == terminal,
        "a repeated withdrawal answered {again:?}"
    );
    ensure!(
        load(store).await? == [withdrawal],
        "the withdrawal is not what is stored"
    );
    Ok(())
}

async fn limits<S: VectorStore>(store: &S) -> Checked {
    replace(store, &indexed("a", 1, "r1", &[[1.0, 0.0], [0.0, 1.0]])?).await?;
    replace(store, &withdrawn("b", 1)?).await?;
    let exact = VectorLoadLimits {
        max_sources: 2,
        max_chunks: 2,
        ..LIMITS
    };
    ensure!(
        ok(
            store.load_sources(&PROFILE, exact).await,
            "load at the limits"
        )?
        .len()
            == 2,
        "a load at its limits is refused"
    );
    for (step, tight) in [
        (
            "one source fewer",
            VectorLoadLimits {
                max_sources: 1,
                ..LIMITS
            },
        ),
        (
            "one chunk fewer",
            VectorLoadLimits {
                max_chunks: 1,
                ..LIMITS
            },
        ),
        (
            "no sources",
            VectorLoadLimits {
                max_sources: 0,
                ..LIMITS
            },
        ),
    ] {
        refused(
            store.load_sources(&PROFILE, tight).await,
            ErrorKind::TooLarge,
            step,
        )?;
    }
    let wrong = VectorLoadLimits {
        dimensions: 3,
        ..LIMITS
    };
    refused(
        store.load_sources(&PROFILE, wrong).await,
        ErrorKind::Corrupt,
        "vectors of another length",
    )?;
    Ok(())
}

/// `stored_chunks` is what a load must have room for: every chunk of the profile's indexed sources,
/// none of a withdrawal's or another profile's, following replacements.
async fn stored_chunks<S: VectorStore>(store: &S) -> Checked {
    let count = async |profile| ok(store.stored_chunks(&profile).await, "count stored chunks");
    ensure!(count(PROFILE).await? == 0, "an empty store holds chunks");
    replace(store, &indexed("a", 1, "r1", &[[1.0, 0.0], [0.0, 1.0]])?).await?;
    replace(store, &indexed("c", 1, "r1", &[[1.0, 0.0]])?).await?;
    replace(store, &withdrawn("b", 1)?).await?;
    let counted = count(PROFILE).await?;
    ensure!(counted == 3, "three chunks stored, {counted} counted");
    ensure!(
        count(OTHER_PROFILE).await? == 0,
        "another profile's chunks counted"
    );
    replace(store, &indexed("a", 2, "r2", &[[0.0, 1.0]])?).await?;
    replace(store, &withdrawn("c", 2)?).await?;
    let counted = count(PROFILE).await?;
    ensure!(
        counted == 1,
        "after a replacement and a withdrawal, {counted} counted"
    );
    let loaded = load(store).await?;
    let chunks: usize = loaded
        .iter()
        .map(|source| match &source.state {
            StoredSourceState::Indexed { chunks, .. } => chunks.len(),
            StoredSourceState::Withdrawn => 0,
        })
        .sum();
    ensure!(
        chunks as u64 == counted,
        "a load holds {chunks} chunks, the count says {counted}"
    );
    Ok(())
}

async fn positions<S: VectorStore>(store: &S) -> Checked {
    ensure!(
        ok(store.indexed_position(&PROFILE).await, "position")? == ChangeSequence::ZERO,
        "a new profile has a position"
    );
    ok(
        store
            .set_indexed_position(&PROFILE, ChangeSequence::new(5))
            .await,
        "set",
    )?;
    ok(
        store
            .set_indexed_position(&PROFILE, ChangeSequence::new(3))
            .await,
        "set back",
    )?;
    ensure!(
        ok(store.indexed_position(&PROFILE).await, "position")? == ChangeSequence::new(5),
        "the position moved backwards"
    );
    ok(
        store
            .set_indexed_position(&PROFILE, ChangeSequence::new(7))
            .await,
        "set forward",
    )?;
    ensure!(
        ok(store.indexed_position(&PROFILE).await, "position")? == ChangeSequence::new(7),
        "the position did not move forward"
    );
    ensure!(
        ok(store.indexed_position(&OTHER_PROFILE).await, "position")? == ChangeSequence::ZERO,
        "positions mix across profiles"
    );
    Ok(())
}

async fn unindexed<S: VectorStore>(store: &S) -> Checked {
    let (a, b, c) = (key("notes", "a")?, key("notes", "b")?, key("notes", "c")?);
    let record = |key: &MemoryKey, generation: u64, reason: UnindexedReason| {
        let key = key.clone();
        async move {
            ok(
                store
                    .record_unindexed(&PROFILE, &key, SourceGeneration::new(generation), reason)
                    .await,
                "record",
            )
        }
    };
    ensure!(
        ok(store.unindexed_counts(&PROFILE).await, "counts")?.is_empty(),
        "an empty store counts unindexed sources"
    );
    record(&c, 1, UnindexedReason::TooLarge).await?;
    record(&a, 1, UnindexedReason::TooLarge).await?;
    record(&b, 2, UnindexedReason::Capacity).await?;
    let page = |reason, after: Option<MemoryKey>, limit| async move {
        ok(
            store
                .unindexed_sources(&PROFILE, reason, after.as_ref(), limit)
                .await,
            "page",
        )
        .map(|sources| {
            sources
                .into_iter()
                .map(|source| (source.key.id.to_string(), source.generation.get()))
                .collect::<Vec<_>>()
        })
    };
    let too_large = page(UnindexedReason::TooLarge, None, 10).await?;
    ensure!(
        too_large == [("a".to_owned(), 1), ("c".to_owned(), 1)],
        "too-large sources are {too_large:?}"
    );
    ensure!(
        page(UnindexedReason::TooLarge, None, 1).await? == too_large[..1],
        "a page of one is not the first"
    );
    ensure!(
        page(UnindexedReason::TooLarge, Some(a.clone()), 10).await? == too_large[1..],
        "the page after a is not c"
    );
    let counts = ok(store.unindexed_counts(&PROFILE).await, "counts")?;
    ensure!(
        counts
            == [
                (UnindexedReason::TooLarge, 2),
                (UnindexedReason::Capacity, 1)
            ],
        "counts are {counts:?}"
    );
    record(&b, 1, UnindexedReason::Invalid).await?;
    ensure!(
        page(UnindexedReason::Capacity, None, 10).await? == [("b".to_owned(), 2)],
        "an older record replaced a newer one"
    );
    record(&b, 3, UnindexedReason::TooManyChunks).await?;
    ensure!(
        page(UnindexedReason::TooManyChunks, None, 10).await? == [("b".to_owned(), 3)],
        "a newer record did not replace the older"
    );
    ensure!(
        page(UnindexedReason::Capacity, None, 10).await?.is_empty(),
        "a replaced record still counts under its old reason"
    );
    replace(store, &indexed("a", 2, "r2", &[[1.0, 0.0]])?).await?;
    replace(store, &withdrawn("c", 2)?).await?;
    ensure!(
        page(UnindexedReason::TooLarge, None, 10).await?.is_empty(),
        "an indexed or withdrawn source is still unindexed"
    );
    let counts = ok(store.unindexed_counts(&PROFILE).await, "counts")?;
    ensure!(
        counts == [(UnindexedReason::TooManyChunks, 1)],
        "counts after indexing are {counts:?}"
    );
    ensure!(
        ok(store.unindexed_counts(&OTHER_PROFILE).await, "counts")?.is_empty(),
        "unindexed sources mix across profiles"
    );
    Ok(())
}

async fn graphs<S: VectorStore>(store: &S) -> Checked {
    ensure!(
        ok(store.load_graph(&PROFILE, 1_000).await, "load")?.is_none(),
        "an empty store has a graph"
    );
    let graph = GraphSnapshot {
        position: ChangeSequence::new(4),
        vector_set: [3; 32],
        chunks: 2,
        bytes: vec![1, 2, 3, 4, 5],
    };
    ok(store.save_graph(&PROFILE, &graph).await, "save")?;
    ensure!(
        ok(store.load_graph(&PROFILE, 5).await, "load")? == Some(graph.clone()),
        "the graph does not load back at its size"
    );
    refused(
        store.load_graph(&PROFILE, 4).await,
        ErrorKind::TooLarge,
        "a graph one byte over the bound",
    )?;
    ensure!(
        ok(store.load_graph(&OTHER_PROFILE, 1_000).await, "load")?.is_none(),
        "graphs mix across profiles"
    );
    let next = GraphSnapshot {
        position: ChangeSequence::new(9),
        vector_set: [4; 32],
        chunks: 3,
        bytes: vec![9; 3],
    };
    ok(store.save_graph(&PROFILE, &next).await, "save again")?;
    ensure!(
        ok(store.load_graph(&PROFILE, 1_000).await, "load")? == Some(next),
        "a saved graph did not replace the previous one"
    );
    Ok(())
}

async fn clearing<S: VectorStore>(store: &S) -> Checked {
    let (a, b) = (key("notes", "a")?, key("notes", "b")?);
    for (key, generation) in [(&a, 3), (&b, 3)] {
        ok(
            store
                .record_unindexed(
                    &PROFILE,
                    key,
                    SourceGeneration::new(generation),
                    UnindexedReason::Capacity,
                )
                .await,
            "record",
        )?;
    }
    ok(
        store
            .clear_unindexed(&PROFILE, &a, SourceGeneration::new(2))
            .await,
        "clear an older generation",
    )?;
    ok(
        store
            .clear_unindexed(&PROFILE, &b, SourceGeneration::new(3))
            .await,
        "clear the recorded generation",
    )?;
    ok(
        store
            .clear_unindexed(&OTHER_PROFILE, &a, SourceGeneration::new(9))
            .await,
        "clear in another profile",
    )?;
    ok(
        store
            .clear_unindexed(&PROFILE, &key("notes", "none")?, SourceGeneration::new(9))
            .await,
        "clear an unknown key",
    )?;
    let left: Vec<_> = ok(
        store
            .unindexed_sources(&PROFILE, UnindexedReason::Capacity, None, 10)
            .await,
        "page",
    )?
    .into_iter()
    .map(|source| source.key)
    .collect();
    ensure!(
        left == [a.clone()],
        "after clearing, the unindexed sources are {left:?}"
    );
    ok(
        store
            .clear_unindexed(&PROFILE, &a, SourceGeneration::new(4))
            .await,
        "clear a newer generation",
    )?;
    ensure!(
        ok(store.unindexed_counts(&PROFILE).await, "counts")?.is_empty(),
        "a cleared record still counts"
    );
    Ok(())
}
