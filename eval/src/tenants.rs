//! The multi-tenant point: `namespace_isolation_ratio` for the exact index, HNSW and the lexical
//! search, measured through the product's own index and store code.
//!
//! One store holds `chunks` one-chunk documents spread over `chunks / 100` namespaces, written
//! round-robin (the n-th write goes to namespace `n % namespaces`, as concurrent tenants write, so a
//! namespace's rows are scattered over the whole index and file); a second holds the searched
//! namespace's same 100 documents alone. The figure is the p50 of a top-10 search in that namespace
//! in the crowded store over the p50 of the same search alone, the two searched alternately, query
//! by query, so machine noise falls on both. 1 means a tenant's search costs what it would in a
//! store of its own; the goal is at most 1.3.
//!
//! Vectors are derived from the run's real-model vectors ([`derive()`]), the queries are the corpus's
//! query vectors; the lexical documents are the corpus's statement texts (each namespace a different
//! selection) and the queries its query texts, searched through [`SqliteStore`]'s lexical search with
//! the product's rules.

use std::path::Path;
use std::time::{Duration, Instant};

use memory_core::vectors::SourceGeneration;
use memory_core::{
    DocumentId, MemoryAccess, MemoryContent, MemoryKey, MemoryScope, MemoryWrite, NamespaceAddress,
    OperationId, Revision,
};
use memory_sqlite::{MAX_BATCH_WRITES, SqliteStore, Synchronous};
use semantic_index::index::{ChunkMeta, SourceChunks, SourceVersion};
use semantic_index::{
    ExactIndex, HnswIndex, HnswParams, IndexBounds, SearchRequest, SourceFilter, VectorIndex,
};
use serde::Serialize;

use crate::progress::Progress;
use crate::sweep::{SEARCH_LIMIT, VectorSet, derive};

/// Chunks (documents) of each namespace.
pub const NAMESPACE_CHUNKS: usize = 100;
/// The default point's size; `--tenants-1m` adds a 1,000,000-chunk point.
pub const DEFAULT_TENANT_CHUNKS: usize = 100_000;
/// The point `--tenants-1m` adds.
pub const LARGE_TENANT_CHUNKS: usize = 1_000_000;
/// Searches timed per index and store (each query once in the crowded and once in the lone one).
const SEARCHES: usize = 400;
/// The scope every lexical document is written in and searched with.
const SCOPE: &str = "assistant";

/// One side's figure.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Isolation {
    /// p50 of a search in the namespace inside the crowded store, ms.
    pub crowded_p50_ms: f64,
    /// p50 of the same search with the namespace alone, ms.
    pub alone_p50_ms: f64,
    /// `crowded_p50_ms / alone_p50_ms`.
    pub namespace_isolation_ratio: f64,
}

/// The multi-tenant point.
#[derive(Debug, Clone, Serialize)]
pub struct TenantPoint {
    /// Chunks (and lexical documents) in the crowded store.
    pub chunks: usize,
    /// Namespaces they are spread over.
    pub namespaces: usize,
    /// Chunks of the searched namespace.
    pub namespace_chunks: usize,
    /// The exact index.
    pub exact: Isolation,
    /// HNSW with the shipped parameters.
    pub hnsw: Isolation,
    /// The lexical search (SQLite FTS5).
    pub lexical: Isolation,
    /// Lexical queries compared between the two stores (each asked once untimed).
    pub lexical_compared: usize,
    /// Of those, the ones answered with the same keys and scores in both: the namespace holds the same
    /// documents in both, so any difference is another tenant's effect on its ranking.
    pub lexical_same_answers: usize,
}

fn namespace(index: usize) -> anyhow::Result<NamespaceAddress> {
    Ok(NamespaceAddress::encode(
        "eval.tenants",
        1,
        &serde_json::json!({ "team": index }),
    )?)
}

/// Times `search` on `crowded` and `alone` alternately, for each of `queries` in turn (cycled to
/// [`SEARCHES`]), after one untimed pass over both.
fn alternate<T: ?Sized, Q>(
    crowded: &T,
    alone: &T,
    queries: &[Q],
    search: impl Fn(&T, &Q) -> anyhow::Result<()>,
) -> anyhow::Result<Isolation> {
    anyhow::ensure!(!queries.is_empty(), "no queries for the multi-tenant point");
    for query in queries.iter().take(SEARCHES) {
        search(crowded, query)?;
        search(alone, query)?;
    }
    let mut times = (Vec::with_capacity(SEARCHES), Vec::with_capacity(SEARCHES));
    for query in queries.iter().cycle().take(SEARCHES) {
        let started = Instant::now();
        search(crowded, query)?;
        times.0.push(started.elapsed());
        let started = Instant::now();
        search(alone, query)?;
        times.1.push(started.elapsed());
    }
    let p50 = |mut times: Vec<Duration>| {
        times.sort_unstable();
        times[times.len() / 2].as_secs_f64() * 1e3
    };
    let (crowded_p50_ms, alone_p50_ms) = (p50(times.0), p50(times.1));
    Ok(Isolation {
        crowded_p50_ms,
        alone_p50_ms,
        namespace_isolation_ratio: crowded_p50_ms / alone_p50_ms.max(1e-9),
    })
}

/// Row `n` of `vectors` as a one-chunk source in namespace `n % namespaces`.
fn vector_sources(
    vectors: &VectorSet,
    rows: impl Iterator<Item = usize>,
    namespaces: usize,
) -> anyhow::Result<Vec<SourceChunks>> {
    let revision = Revision::new("r1")?;
    rows.map(|row| {
        let key = MemoryKey {
            namespace: namespace(row % namespaces)?,
            id: DocumentId::new(format!("d{row:08}"))?,
        };
        let version = std::sync::Arc::new(SourceVersion {
            key: key.clone(),
            revision: revision.clone(),
            generation: SourceGeneration::new(1),
        });
        let meta = ChunkMeta {
            source: version,
            ordinal: 0,
            start: 0,
            end: 0,
            excerpt_digest: [0; 32],
        };
        Ok((key, vec![(meta, vectors.row(row).to_vec())]))
    })
    .collect()
}

fn vector_isolation(
    crowded: &dyn VectorIndex,
    alone: &dyn VectorIndex,
    target: &NamespaceAddress,
    queries: &VectorSet,
) -> anyhow::Result<Isolation> {
    let request = SearchRequest {
        limit: SEARCH_LIMIT,
        min_score: -1.0,
        max_scanned_chunks: usize::MAX,
    };
    let queries: Vec<&[f32]> = (0..queries.len()).map(|row| queries.row(row)).collect();
    alternate(crowded, alone, &queries, |index, query| {
        let outcome = index.search_in(query, request, SourceFilter::Namespace(target))?;
        anyhow::ensure!(
            outcome.hits.len() == SEARCH_LIMIT,
            "a namespace search returned {} hits",
            outcome.hits.len()
        );
        Ok(())
    })
}

fn document(
    tenant: usize,
    index: usize,
    texts: &[String],
    scope: &MemoryScope,
) -> anyhow::Result<MemoryWrite> {
    // Each namespace a different selection of the corpus's texts, the same in both stores.
    let text = &texts[(tenant * 7_919 + index * 104_729) % texts.len()];
    Ok(MemoryWrite::Put {
        key: MemoryKey {
            namespace: namespace(tenant)?,
            id: DocumentId::new(format!("d{index:04}"))?,
        },
        operation_id: OperationId::new(format!("t{tenant}-{index}"))?,
        expected_revision: None,
        locator: format!("eval:tenants:{tenant}:{index}"),
        content: MemoryContent::text(text.clone()),
        scopes: vec![scope.clone()],
    })
}

fn write_all(
    store: &SqliteStore,
    writes: impl Iterator<Item = anyhow::Result<MemoryWrite>>,
) -> anyhow::Result<()> {
    let mut writes = writes.peekable();
    while writes.peek().is_some() {
        let batch = writes
            .by_ref()
            .take(MAX_BATCH_WRITES)
            .collect::<anyhow::Result<Vec<_>>>()?;
        for outcome in store.apply_batch(batch)? {
            outcome?;
        }
    }
    Ok(())
}

/// The lexical figure, and how many of the compared queries answered the same in both stores.
fn lexical_isolation(
    directory: &Path,
    chunks: usize,
    namespaces: usize,
    searched: usize,
    texts: &[String],
    queries: &[String],
) -> anyhow::Result<(Isolation, usize, usize)> {
    anyhow::ensure!(!texts.is_empty(), "no texts for the multi-tenant point");
    let scope = MemoryScope::new(SCOPE)?;
    if directory.exists() {
        std::fs::remove_dir_all(directory)?;
    }
    std::fs::create_dir_all(directory)?;
    let open = |name: &str| {
        SqliteStore::builder()
            .synchronous(Synchronous::Normal)
            .open(directory.join(name))
    };
    let alone = open("alone.sqlite")?;
    write_all(
        &alone,
        (0..NAMESPACE_CHUNKS).map(|index| document(searched, index, texts, &scope)),
    )?;
    let crowded = open("crowded.sqlite")?;
    write_all(
        &crowded,
        (0..chunks).map(|n| document(n % namespaces, n / namespaces, texts, &scope)),
    )?;
    let access = MemoryAccess {
        namespace: namespace(searched)?,
        scope,
    };
    let (mut same, mut compared) = (0usize, 0usize);
    for query in queries.iter().take(SEARCHES) {
        compared += 1;
        let answer = |store: &SqliteStore| -> anyhow::Result<Vec<(MemoryKey, f64)>> {
            Ok(store
                .reader()
                .search_blocking(&access, query, SEARCH_LIMIT)?
                .into_iter()
                .map(|hit| (hit.key, hit.score))
                .collect())
        };
        same += usize::from(answer(&crowded)? == answer(&alone)?);
    }
    let isolation = alternate(&crowded, &alone, queries, |store, query| {
        store
            .reader()
            .search_blocking(&access, query, SEARCH_LIMIT)?;
        Ok(())
    })?;
    drop((crowded, alone));
    std::fs::remove_dir_all(directory)?;
    Ok((isolation, same, compared))
}

/// What the multi-tenant points are made of: the run's real-model vectors and texts.
#[derive(Debug, Clone, Copy)]
pub struct TenantInputs<'a> {
    /// Vectors the chunks are derived from.
    pub base: &'a VectorSet,
    /// Query vectors.
    pub queries: &'a VectorSet,
    /// Document texts.
    pub texts: &'a [String],
    /// Query texts.
    pub query_texts: &'a [String],
    /// Seed of the derivation.
    pub seed: u64,
}

/// Measures the multi-tenant point of `chunks` chunks (rounded down to whole namespaces); the lexical
/// stores are written under `directory`, which is removed afterwards.
pub fn measure(
    directory: &Path,
    chunks: usize,
    inputs: TenantInputs<'_>,
    progress: &Progress,
) -> anyhow::Result<TenantPoint> {
    let TenantInputs {
        base,
        queries,
        texts,
        query_texts,
        seed,
    } = inputs;
    let namespaces = (chunks / NAMESPACE_CHUNKS).max(1);
    let chunks = namespaces * NAMESPACE_CHUNKS;
    let searched = namespaces / 2;
    let target = namespace(searched)?;
    let vectors = derive(base, chunks, seed);
    let own_rows = || (searched..chunks).step_by(namespaces);
    let bounds = |size: usize| IndexBounds::for_chunks(vectors.dimensions, size);

    let spinner = progress.spinner(&format!("multi-tenant point, exact, {chunks} chunks"));
    let mut crowded = ExactIndex::new(vectors.dimensions, bounds(chunks)?)?;
    crowded.replace_sources(vector_sources(&vectors, 0..chunks, namespaces)?)?;
    let mut alone = ExactIndex::new(vectors.dimensions, bounds(NAMESPACE_CHUNKS)?)?;
    alone.replace_sources(vector_sources(&vectors, own_rows(), namespaces)?)?;
    let exact = vector_isolation(&crowded, &alone, &target, queries)?;
    drop(crowded);
    spinner.finish_and_clear();

    let spinner = progress.spinner(&format!("multi-tenant point, hnsw, {chunks} chunks"));
    let params = HnswParams::default();
    let mut crowded = HnswIndex::new(vectors.dimensions, bounds(chunks)?, params)?;
    crowded.replace_sources(vector_sources(&vectors, 0..chunks, namespaces)?)?;
    let mut alone_graph = HnswIndex::new(vectors.dimensions, bounds(NAMESPACE_CHUNKS)?, params)?;
    alone_graph.replace_sources(vector_sources(&vectors, own_rows(), namespaces)?)?;
    let hnsw = vector_isolation(&crowded, &alone_graph, &target, queries)?;
    drop(crowded);
    spinner.finish_and_clear();

    let spinner = progress.spinner(&format!("multi-tenant point, lexical, {chunks} documents"));
    let (lexical, lexical_same_answers, lexical_compared) =
        lexical_isolation(directory, chunks, namespaces, searched, texts, query_texts)?;
    spinner.finish_and_clear();
    Ok(TenantPoint {
        chunks,
        namespaces,
        namespace_chunks: NAMESPACE_CHUNKS,
        exact,
        hnsw,
        lexical,
        lexical_compared,
        lexical_same_answers,
    })
}
