//! The main job: every stage in order, then the report.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use memory_core::ChangeFeed;
use memory_sqlite::SqliteStore;
use memory_sqlite::vectors::SqliteVectorStore;
use semantic_index::{CrossEncoder, Embedder, Preprocessing, SemanticIndex};

use crate::corpus::{Corpus, CorpusShape, TurnEffect, generate};
use crate::metrics::percentiles;
use crate::modes::{Mode, Recaller};
use crate::pipeline::{Stores, access, index, ingest, profile_for, rate};
use crate::progress::Progress;
use crate::report::{
    ColdStartFigures, CorpusFigures, EmbeddingFigures, PreprocessingFigures, Report, Settings,
};
use crate::sweep::{VectorSet, sweep};
use crate::{faults, lag, quality};

/// Texts per embedder call in the throughput figure (the fastembed embedder's own default).
pub const EMBED_BATCH: usize = 64;

/// What one run does.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Output folder.
    pub out: PathBuf,
    /// Corpus seed.
    pub seed: u64,
    /// People in the corpus.
    pub people: usize,
    /// Sweep sizes, in chunks.
    pub sizes: Vec<usize>,
    /// Sizes of the multi-tenant points (`namespace_isolation_ratio`), in chunks.
    pub tenant_sizes: Vec<usize>,
    /// Whether this is a `--quick` run (recorded in the report).
    pub quick: bool,
    /// Commits measured per lag figure.
    pub lag_samples: usize,
    /// Progress bars.
    pub progress: Progress,
    /// The rerank stage's cross-encoder, as the binaries load it with `--rerank-model on` (the
    /// main job loads the real one; `None` ranks as `--rerank-model off`).
    pub cross_encoder: Option<Arc<dyn CrossEncoder>>,
}

fn corpus_figures(corpus: &Corpus) -> CorpusFigures {
    CorpusFigures {
        conversations: corpus.conversations.len(),
        turns: corpus.conversations.iter().map(|c| c.turns.len()).sum(),
        queries: corpus.queries.len(),
        corrected_queries: corpus
            .queries
            .iter()
            .filter(|query| query.expected_document.is_some() && !query.forbidden_values.is_empty())
            .count(),
        withdrawn_queries: corpus
            .queries
            .iter()
            .filter(|query| query.expected_document.is_none())
            .count(),
    }
}

/// The texts the index embeds for the corpus's statements (speaker, then text) and the query texts.
pub fn texts(corpus: &Corpus) -> (Vec<String>, Vec<String>) {
    let statements = corpus
        .conversations
        .iter()
        .flat_map(|conversation| &conversation.turns)
        .filter(|turn| matches!(turn.effect, TurnEffect::State { .. }))
        .map(|turn| format!("{}: {}", turn.speaker, turn.text))
        .collect();
    let queries = corpus
        .queries
        .iter()
        .map(|query| query.text.clone())
        .collect();
    (statements, queries)
}

/// Embeds `texts` in batches of `batch`, checked and normalized.
pub fn embed_all<E: Embedder>(
    embedder: &E,
    texts: &[String],
    batch: usize,
) -> anyhow::Result<Vec<Vec<f32>>> {
    let mut vectors = Vec::with_capacity(texts.len());
    for batch in texts.chunks(batch.max(1)) {
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        let embedded = embedder.embed(&refs)?;
        vectors.extend(semantic_index::checked_embeddings(
            embedded,
            refs.len(),
            embedder.dimensions(),
        )?);
    }
    Ok(vectors)
}

/// Runs the whole job with the embedder `load` returns (called twice: once for the run, once for the
/// cold-start figure). `embedder_name` is recorded in the report.
pub async fn run<E: Embedder>(
    options: &RunOptions,
    embedder_name: &str,
    load: impl Fn() -> anyhow::Result<E>,
) -> anyhow::Result<Report> {
    let run_started = Instant::now();
    let progress = &options.progress;
    std::fs::create_dir_all(&options.out)?;
    let store_path = options.out.join(crate::pipeline::STORE_FILE);
    Stores::remove_previous(&store_path)?;
    let corpus = generate(CorpusShape {
        seed: options.seed,
        people: options.people,
        ..CorpusShape::default()
    });
    let access = access(options.seed)?;
    eprintln!(
        "memory-eval: corpus of {} people, {} queries",
        options.people,
        corpus.queries.len()
    );

    let stores = Stores::open(&store_path)?;
    let ingest_figures = ingest(&stores, &corpus, progress).await?;
    eprintln!(
        "memory-eval: remembered {} records ({} writes) in {:.1} s",
        ingest_figures.processed, ingest_figures.writes, ingest_figures.extraction_seconds
    );

    let embedder = Arc::new(load()?);
    let dimensions = embedder.dimensions();
    let (statement_texts, query_texts) = texts(&corpus);
    let started = Instant::now();
    let statement_vectors = embed_all(embedder.as_ref(), &statement_texts, EMBED_BATCH)?;
    let embed_seconds = started.elapsed().as_secs_f64();
    let query_vectors = embed_all(embedder.as_ref(), &query_texts, EMBED_BATCH)?;
    let mut single = Vec::new();
    for text in query_texts.iter().take(30) {
        let started = Instant::now();
        embedder.embed(&[text.as_str()])?;
        single.push(started.elapsed().as_secs_f64() * 1_000.0);
    }
    let embedding = EmbeddingFigures {
        texts: statement_texts.len(),
        batch_size: EMBED_BATCH,
        seconds: embed_seconds,
        texts_per_second: rate(statement_texts.len(), embed_seconds),
        single_text: percentiles(&single),
    };

    let (semantic, indexing) = index(&stores, embedder.clone(), profile_for(dimensions)).await?;
    eprintln!(
        "memory-eval: indexed {} chunks in {:.1} s",
        indexing.chunks, indexing.seconds
    );

    let mut modes = Vec::new();
    let recaller = Recaller::new(&stores.memory, &semantic.index, access.clone())?
        .with_cross_encoder(options.cross_encoder.clone());
    for mode in Mode::ALL {
        let (figures, _) = quality::run_mode(&recaller, mode, &corpus.queries, progress).await;
        modes.push(figures);
    }
    let preprocessing = compare_preprocessing(
        &stores,
        embedder.clone(),
        &access,
        &corpus,
        &modes,
        progress,
    )
    .await?;
    eprintln!(
        "memory-eval: measured {} modes over {} queries",
        modes.len(),
        corpus.queries.len()
    );

    let probe = corpus
        .queries
        .iter()
        .find(|query| query.expected_document.is_some())
        .ok_or_else(|| anyhow::anyhow!("the corpus has no answerable query"))?;
    let fault_cases = faults::run_faults(&recaller, probe).await?;
    let lag_figures = lag::measure(
        &stores,
        &semantic,
        &access,
        options.seed,
        options.lag_samples,
        lag::filler_interval(indexing.changes_per_second),
        progress,
    )
    .await?;
    eprintln!(
        "memory-eval: commit-to-recallable p50 {:.0} ms",
        lag_figures.thread_record.p50_ms
    );

    drop(recaller);
    semantic.indexer.shutdown().await;
    drop(semantic.index);
    drop(stores);
    drop(embedder);
    let cold_start = cold_start(&store_path, &access, &corpus, dimensions, &load).await?;

    let base = VectorSet::from_rows(dimensions, &statement_vectors);
    let queries = VectorSet::from_rows(dimensions, &query_vectors[..query_vectors.len().min(200)]);
    let sweep_points = sweep(&base, &queries, &options.sizes, options.seed, progress)?;
    let tenant_inputs = crate::tenants::TenantInputs {
        base: &base,
        queries: &queries,
        texts: &statement_texts,
        query_texts: &query_texts,
        seed: options.seed,
    };
    let mut tenant_points = Vec::with_capacity(options.tenant_sizes.len());
    for &chunks in &options.tenant_sizes {
        let point = crate::tenants::measure(
            &options.out.join("tenants"),
            chunks,
            tenant_inputs,
            progress,
        )?;
        eprintln!(
            "memory-eval: namespace_isolation_ratio at {} chunks: exact {:.2}, hnsw {:.2}, lexical {:.2}",
            point.chunks,
            point.exact.namespace_isolation_ratio,
            point.hnsw.namespace_isolation_ratio,
            point.lexical.namespace_isolation_ratio
        );
        tenant_points.push(point);
    }

    Ok(Report {
        settings: Settings {
            seed: options.seed,
            people: options.people,
            sizes: options.sizes.clone(),
            tenant_sizes: options.tenant_sizes.clone(),
            quick: options.quick,
            embedder: embedder_name.to_owned(),
            store_file: store_path.display().to_string(),
        },
        corpus: corpus_figures(&corpus),
        ingest: ingest_figures,
        embedding,
        indexing,
        modes,
        hybrid: crate::report::HybridDefaults::of(&semantic_index::HybridParams::default()),
        preprocessing,
        faults: fault_cases,
        lag: lag_figures,
        cold_start,
        sweep: sweep_points,
        tenants: tenant_points,
        peak_memory_kib: crate::report::peak_memory_kib(),
        total_seconds: run_started.elapsed().as_secs_f64(),
    })
}

/// Exact-mode quality with the speaker-then-text profile (the default, measured above) against a second
/// index over the same store that embeds the text alone.
async fn compare_preprocessing<E: Embedder>(
    stores: &Stores,
    embedder: Arc<E>,
    access: &memory_core::MemoryAccess,
    corpus: &Corpus,
    modes: &[quality::ModeFigures],
    progress: &Progress,
) -> anyhow::Result<Vec<PreprocessingFigures>> {
    let mut profile = profile_for(embedder.dimensions());
    profile.preprocessing = Preprocessing::TextOnly;
    let (text_only, _) = index(stores, embedder, profile).await?;
    let recaller = Recaller::new(&stores.memory, &text_only.index, access.clone())?;
    let (figures, _) = quality::run_mode(&recaller, Mode::Exact, &corpus.queries, progress).await;
    drop(recaller);
    text_only.indexer.shutdown().await;
    let speaker_then_text = modes
        .iter()
        .find(|figures| figures.mode == Mode::Exact)
        .map(|figures| figures.quality.clone())
        .unwrap_or_default();
    Ok(vec![
        PreprocessingFigures {
            preprocessing: "speaker-then-text".to_owned(),
            quality: speaker_then_text,
        },
        PreprocessingFigures {
            preprocessing: "text-only".to_owned(),
            quality: figures.quality,
        },
    ])
}

/// Reopens everything from the file, as a restarted agent process would, and runs one recall.
async fn cold_start<E: Embedder>(
    path: &std::path::Path,
    access: &memory_core::MemoryAccess,
    corpus: &Corpus,
    dimensions: usize,
    load: &impl Fn() -> anyhow::Result<E>,
) -> anyhow::Result<ColdStartFigures> {
    let started = Instant::now();
    let store = Arc::new(SqliteStore::open(path)?);
    let vectors = Arc::new(SqliteVectorStore::open(path)?);
    let open_store_ms = started.elapsed().as_secs_f64() * 1_000.0;
    let started = Instant::now();
    let embedder = Arc::new(load()?);
    let load_model_ms = started.elapsed().as_secs_f64() * 1_000.0;
    let started = Instant::now();
    let index = Arc::new(
        SemanticIndex::open(
            crate::pipeline::index_config(profile_for(dimensions))?,
            embedder,
            vectors,
        )
        .await?,
    );
    let load_vectors_ms = started.elapsed().as_secs_f64() * 1_000.0;
    let recaller = Recaller::new(&store, &index, access.clone())?;
    let query = corpus
        .queries
        .first()
        .ok_or_else(|| anyhow::anyhow!("the corpus has no query"))?;
    let started = Instant::now();
    recaller.recall(Mode::Exact, query).await?;
    let first_recall_ms = started.elapsed().as_secs_f64() * 1_000.0;
    // The head is read so the store is known to answer, not only to open.
    store.head().await?;
    Ok(ColdStartFigures {
        open_store_ms,
        load_model_ms,
        load_vectors_ms,
        chunks_loaded: index.stats().live_chunks,
        total_ms: open_store_ms + load_model_ms + load_vectors_ms,
        first_recall_ms,
    })
}
