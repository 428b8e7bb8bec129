//! `memory-eval`: the main job of the README, and the helpers of the comparison script.
//!
//! Without a subcommand it runs the whole pipeline on the embedded default (a SQLite file in the output
//! folder, the local all-MiniLM-L6-v2 model from `assets/`) and writes `report.md`, `report.json` and the
//! SVG plots to `--out` (default `eval-report/`). `locomo` measures recall on LoCoMo through the product
//! and `locomo-tune` chooses the product's recall defaults on it (see [`eval::locomo`]). `dump-vectors`,
//! `bench-hnsw`, `bench-embed` and `sync-texts` serve `scripts/compare.sh`. `serve-load` measures the
//! built `memory serve --http` under concurrent tenants (see [`eval::serve_load`]).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Parser, Subcommand};
use eval::corpus::{CorpusShape, generate};
use eval::progress::Progress;
use eval::report;
use eval::run::{EMBED_BATCH, RunOptions, embed_all, run, texts};
use eval::sweep::{
    MIXED_TEXTS, VectorSet, bench_hnsw, derive, mixed_length_texts, read_vectors, write_vectors,
};
use semantic_index::{Embedder, FastembedEmbedder, ModelAssets, SemanticProfile, TokenizerCounter};

/// Evaluates direct, lexical, exact, HNSW and hybrid recall end to end and writes a report.
#[derive(Debug, Parser)]
#[command(name = "memory-eval", version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Folder the report and the SQLite file are written to.
    #[arg(long, default_value = "eval-report")]
    out: PathBuf,
    /// Corpus seed.
    #[arg(long, default_value_t = CorpusShape::default().seed)]
    seed: u64,
    /// People in the corpus (one conversation each); default 60, or 20 with --quick.
    #[arg(long)]
    people: Option<usize>,
    /// Latency sweep sizes in chunks, comma-separated; default 1000,10000,100000 (500,2000,5000 with
    /// --quick). Sizes past the real corpus use derived vectors. Three decades keep the default run under
    /// five minutes on two cores: the 100k HNSW build is most of the sweep's time.
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    /// A smaller, faster run for development.
    #[arg(long)]
    quick: bool,
    /// Adds a multi-tenant point of 1,000,000 chunks in 10,000 namespaces to the default one (100,000
    /// chunks, or 10,000 with --quick). Building its HNSW graph takes long on a small machine.
    #[arg(long)]
    tenants_1m: bool,
}

/// Sizes of the multi-tenant points.
fn tenant_sizes(quick: bool, large: bool) -> Vec<usize> {
    let mut sizes = vec![if quick {
        10_000
    } else {
        eval::tenants::DEFAULT_TENANT_CHUNKS
    }];
    if large {
        sizes.push(eval::tenants::LARGE_TENANT_CHUNKS);
    }
    sizes
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Writes real-model vectors (derived up to --size) and queries to DIR/vectors.bin, the corpus
    /// statements to DIR/texts.txt and a mixed-length set (one text in ten a pasted page of 200+
    /// tokens) to DIR/mixed.txt and the same texts as a `memory import` file (DIR/mixed.jsonl), for
    /// the comparison script.
    DumpVectors {
        /// Output folder.
        #[arg(long, default_value = "eval-report/compare")]
        dir: PathBuf,
        /// Base vectors to write.
        #[arg(long, default_value_t = 20_000)]
        size: usize,
        /// Corpus seed.
        #[arg(long, default_value_t = CorpusShape::default().seed)]
        seed: u64,
    },
    /// Times our HNSW on a vector file at several search widths (`ef_search`, top 10 returned),
    /// and our exact scan beside a memory read-bandwidth measurement; prints JSON.
    BenchHnsw {
        /// The file `dump-vectors` wrote.
        #[arg(long)]
        vectors: PathBuf,
        /// Search widths, comma-separated.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "10,12,14,16,20,24,32,40,64,96,128,256,384,512,768"
        )]
        ef: Vec<usize>,
    },
    /// LoCoMo through the product: every turn a document, every question of categories 1-4 recalled in
    /// every mode; writes locomo.md, locomo.json and SVGs to OUT/locomo.
    Locomo {
        /// A LoCoMo zip archive, a folder of conversation files or one JSON file.
        #[arg(long)]
        data: PathBuf,
        /// How the turns become memory and which door the recalls take: `direct` (each turn a
        /// document, `memory import`'s code, recalled in process), `worker` (each turn a thread
        /// record, remembered by the worker's default extractor; writes locomo-via-worker.md, .json
        /// and SVGs beside the direct report, see `eval::locomo::worker`), or `server` (as `direct`,
        /// every recall through the built `memory serve --http` over MCP; needs the `memory` binary
        /// beside this one; writes locomo-via-server.md, .json and SVGs, see
        /// `eval::locomo::server`).
        #[arg(long, value_enum, default_value_t = Via::Direct)]
        via: Via,
        /// Only the first N conversations (all by default).
        #[arg(long, value_name = "N")]
        conversations: Option<usize>,
        /// With `--via worker`: the base URL of an OpenAI-compatible endpoint whose model extracts
        /// instead of the statement extractor (`remembering-worker --model-url`); writes
        /// locomo-via-model.md and .json, beside locomo-via-worker.json's figures when it covers as
        /// many conversations. Read from MEMORY_MODEL_URL when not given.
        #[arg(long, value_name = "URL")]
        model_url: Option<String>,
        /// The model's name at --model-url (or MEMORY_MODEL).
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        /// A file holding the endpoint's key (or MEMORY_MODEL_KEY_FILE).
        #[arg(long, value_name = "PATH")]
        model_key_file: Option<PathBuf>,
        /// The limit of one attempt of one model call, in milliseconds (or MEMORY_MODEL_TIMEOUT_MS).
        #[arg(long, value_name = "MS")]
        model_timeout_ms: Option<u64>,
    },
    /// Whether a correction is cited ahead of what it corrects: the main job's corpus through the
    /// remembering worker, with and without correction links, recalled in lexical and hybrid;
    /// writes corrections.md and corrections.json to OUT (see `eval::corrections`).
    Corrections,
    /// Chooses the lexical rules, the embedded text and the hybrid fusion on LoCoMo's conversations
    /// 1-5, reports every setting with conversations 6-10 beside it (OUT/locomo-tune), and writes the
    /// choice to --tuned.
    LocomoTune {
        /// A LoCoMo zip archive, a folder of conversation files or one JSON file.
        #[arg(long)]
        data: PathBuf,
        /// Where the choice is written (the committed file the product's defaults are checked against).
        #[arg(long, default_value = "eval/locomo-tuned.json")]
        tuned: PathBuf,
    },
    /// Writes the texts a `memory sync` of an import file embeds (every chunk, with its speaker, under
    /// the product's profile), one per line, for `bench-embed`: the comparison script times the sync
    /// and the embedder alone on the same work.
    SyncTexts {
        /// The import file (`memory import`'s JSON Lines).
        #[arg(long)]
        import: PathBuf,
        /// Where the texts go.
        #[arg(long)]
        out: PathBuf,
    },
    /// Times our embedder (fastembed) on a text file, one text per line, in embedder calls of
    /// --batch texts (as the indexer makes them); prints JSON with the peak RSS.
    BenchEmbed {
        /// The text file.
        #[arg(long)]
        texts: PathBuf,
        /// Texts per embedder call, and most texts per model call.
        #[arg(long, default_value_t = 64)]
        batch: usize,
        /// Most padded tokens per model call (texts times the longest one's tokens). A bound past
        /// `--batch` times 256 makes each call one model call padded to its longest text.
        #[arg(long, default_value_t = semantic_index::fastembed_embedder::DEFAULT_BATCH_TOKENS)]
        max_batch_tokens: usize,
    },
    /// Drives the built `memory serve --http` (with grants: a token per tenant) with concurrent MCP
    /// clients over a seeded store and reports per-operation p50/p99, throughput, errors by kind,
    /// the server's peak RSS and recall under load against recall idle; writes OUT/serve-load.json.
    /// Exits non-zero when an answer held another tenant's memory or an acknowledged write is
    /// missing (latencies are reported, never asserted). The mix: 1% deliberate refusals (another
    /// tenant's namespace, must be `forbidden`), then 70% recall (hybrid), 15% remember, 10% list,
    /// 5% forget.
    ServeLoad {
        /// Documents seeded (`memory import`), dealt round-robin over the tenants.
        #[arg(long, default_value_t = 100_000)]
        docs: usize,
        /// Tenants, each a grant with its own token, namespace and scope.
        #[arg(long, default_value_t = 100)]
        tenants: usize,
        /// Concurrent MCP clients; client i is tenant i % tenants.
        #[arg(long, default_value_t = 32)]
        clients: usize,
        /// Seconds of load (unless --ops is given).
        #[arg(long, default_value_t = 60)]
        duration_secs: u64,
        /// Calls per client instead of a duration.
        #[arg(long)]
        ops: Option<u64>,
        /// Sequential recalls timed on the idle server before the load.
        #[arg(long, default_value_t = 200)]
        idle_recalls: usize,
        /// Each client's mean pause between calls, ms (each drawn from 0.5 to 1.5 times it, so
        /// clients do not call in step; 0, the default: every client calls again at once, so the
        /// server is saturated).
        #[arg(long, default_value_t = 0)]
        think_ms: u64,
        /// The `memory` binary (default: the one beside this executable, `target/<profile>/memory`).
        #[arg(long)]
        memory_bin: Option<PathBuf>,
        /// Run against PostgreSQL (two servers on a fresh schema, one killed and restarted midway);
        /// without a value, $MEMORY_TEST_POSTGRES_URL (`bash scripts/postgres-setup.sh` prints one).
        #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "URL")]
        postgres: Option<String>,
        /// Reuse the seeded and indexed SQLite store of an earlier run with the same --docs,
        /// --tenants and --seed (OUT/serve-load/serve-load.sqlite) instead of seeding again.
        #[arg(long)]
        reuse_store: bool,
    },
}

/// How `memory-eval locomo` turns LoCoMo's turns into memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Via {
    /// Each turn one document, written by `memory import`'s code.
    Direct,
    /// Each turn a thread record, remembered by the remembering worker.
    Worker,
    /// Each turn one document as `direct`, every recall through the built `memory serve --http` over
    /// MCP (the `memory` binary beside this one; build it first).
    Server,
}

fn load_model() -> anyhow::Result<FastembedEmbedder> {
    FastembedEmbedder::load(&ModelAssets::from_env(), &SemanticProfile::minilm_l6_v2())
        .context("loading the embedding model (run scripts/fetch-assets.sh first)")
}

/// The rerank stage's cross-encoder as the binaries load it (the backend's one rule): unless
/// `MEMORY_RERANK_MODEL=off`.
fn load_cross_encoder() -> anyhow::Result<Option<std::sync::Arc<dyn semantic_index::CrossEncoder>>>
{
    let settings = memory_service::settings::Settings::from_env()
        .map_err(|refusal| anyhow::anyhow!("{}", refusal.message()))?;
    memory_service::semantic::load_cross_encoder(settings.index, &ModelAssets::from_env())
        .map_err(|refusal| anyhow::anyhow!("{}", refusal.message()))
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber_init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match cli.command {
        None => {
            let options = RunOptions {
                out: cli.out.clone(),
                seed: cli.seed,
                people: cli.people.unwrap_or(if cli.quick { 20 } else { 60 }),
                sizes: cli.sizes.clone().unwrap_or_else(|| {
                    if cli.quick {
                        vec![500, 2_000, 5_000]
                    } else {
                        vec![1_000, 10_000, 100_000]
                    }
                }),
                tenant_sizes: tenant_sizes(cli.quick, cli.tenants_1m),
                quick: cli.quick,
                lag_samples: if cli.quick { 10 } else { 30 },
                progress: Progress::for_terminal(),
                cross_encoder: load_cross_encoder()?,
            };
            let report = runtime.block_on(run(
                &options,
                "fastembed all-MiniLM-L6-v2 (int8 ONNX)",
                load_model,
            ))?;
            report::write(&report, &options.out)?;
            println!("{}", report::markdown(&report));
            eprintln!("memory-eval: report written to {}", options.out.display());
            Ok(())
        }
        Some(Command::DumpVectors { dir, size, seed }) => {
            std::fs::create_dir_all(&dir)?;
            let corpus = generate(CorpusShape {
                seed,
                ..CorpusShape::default()
            });
            let (statements, queries) = texts(&corpus);
            let embedder = load_model()?;
            let dimensions = embedder.dimensions();
            let base =
                VectorSet::from_rows(dimensions, &embed_all(&embedder, &statements, EMBED_BATCH)?);
            let queries =
                VectorSet::from_rows(dimensions, &embed_all(&embedder, &queries, EMBED_BATCH)?);
            write_vectors(
                &dir.join("vectors.bin"),
                &derive(&base, size, seed),
                &queries,
            )?;
            std::fs::write(dir.join("texts.txt"), statements.join("\n") + "\n")?;
            let counter = TokenizerCounter::from_assets(&ModelAssets::from_env())?;
            let mixed = mixed_length_texts(&statements, MIXED_TEXTS, &counter);
            std::fs::write(dir.join("mixed.txt"), mixed.join("\n") + "\n")?;
            std::fs::write(
                dir.join("mixed.jsonl"),
                eval::sync_bench::import_lines(&mixed).join("\n") + "\n",
            )?;
            eprintln!(
                "memory-eval: wrote {size} vectors and {} queries to {}",
                queries.len(),
                dir.display()
            );
            Ok(())
        }
        Some(Command::BenchHnsw { vectors, ef }) => {
            let (base, queries) = read_vectors(&vectors)?;
            let result = bench_hnsw(&base, &queries, &ef, &Progress::for_terminal())?;
            println!("{}", serde_json::to_string_pretty(&result)?);
            Ok(())
        }
        Some(Command::Locomo {
            data,
            via: via @ (Via::Direct | Via::Server),
            conversations,
            model_url,
            model,
            model_key_file,
            model_timeout_ms,
        }) => {
            // The model flags choose the worker's extractor; elsewhere they would be ignored.
            anyhow::ensure!(
                model_url.is_none()
                    && model.is_none()
                    && model_key_file.is_none()
                    && model_timeout_ms.is_none(),
                "--model-url, --model, --model-key-file and --model-timeout-ms apply to --via \
                 worker only"
            );
            runtime.block_on(locomo(&data, conversations, via == Via::Server, &cli.out))
        }
        Some(Command::Locomo {
            data,
            via: Via::Worker,
            conversations,
            model_url,
            model,
            model_key_file,
            model_timeout_ms,
        }) => {
            let model = memory_service::model_settings::ModelSettings::resolve(
                memory_service::model_settings::ModelValues {
                    url: model_url,
                    model,
                    key_file: model_key_file,
                    fallback: None,
                    timeout_ms: model_timeout_ms,
                },
            )
            .and_then(|settings| {
                settings
                    .as_ref()
                    .map(memory_service::worker::ModelExtraction::open)
                    .transpose()
            })
            .map_err(|refusal| anyhow::anyhow!("{}", refusal.message()))?;
            runtime.block_on(locomo_via_worker(&data, conversations, model, &cli.out))
        }
        Some(Command::LocomoTune { data, tuned }) => locomo_tune(&data, &cli.out, &tuned),
        Some(Command::Corrections) => runtime.block_on(corrections(&cli)),
        Some(Command::SyncTexts { import, out }) => {
            let texts =
                eval::sync_bench::embedded_texts(&import, &SemanticProfile::minilm_l6_v2())?;
            std::fs::write(&out, texts.join("\n") + "\n")?;
            eprintln!(
                "memory-eval: {} texts a sync of {} embeds, written to {}",
                texts.len(),
                import.display(),
                out.display()
            );
            Ok(())
        }
        Some(Command::ServeLoad {
            docs,
            tenants,
            clients,
            duration_secs,
            ops,
            idle_recalls,
            think_ms,
            memory_bin,
            postgres,
            reuse_store,
        }) => {
            let postgres = match postgres.as_deref() {
                None => None,
                Some("") => Some(std::env::var("MEMORY_TEST_POSTGRES_URL").context(
                    "--postgres without a URL reads MEMORY_TEST_POSTGRES_URL (`bash \
                     scripts/postgres-setup.sh` prints one)",
                )?),
                Some(url) => Some(url.to_owned()),
            };
            let options = eval::serve_load::ServeLoadOptions {
                out: cli.out.clone(),
                memory_bin,
                docs,
                tenants,
                clients,
                duration: std::time::Duration::from_secs(duration_secs),
                ops,
                idle_recalls,
                think: std::time::Duration::from_millis(think_ms),
                seed: cli.seed,
                postgres,
                reuse_store,
                verbose: true,
            };
            let report = runtime.block_on(eval::serve_load::run(&options))?;
            println!("{}", eval::serve_load::report::table(&report));
            eprintln!(
                "memory-eval: serve-load report written to {}",
                cli.out.join("serve-load.json").display()
            );
            anyhow::ensure!(
                report.correct(),
                "serve-load: {} cross-tenant answers, {} acknowledged writes missing, {} \
                 acknowledged forgets still visible",
                report.cross_tenant_answers,
                report.acknowledged_writes_missing,
                report.acknowledged_forgets_visible
            );
            Ok(())
        }
        Some(Command::BenchEmbed {
            texts,
            batch,
            max_batch_tokens,
        }) => {
            let texts: Vec<String> = std::fs::read_to_string(&texts)?
                .lines()
                .filter(|line| !line.is_empty())
                .map(str::to_owned)
                .collect();
            let embedder = load_model()?
                .with_batch_size(batch)
                .with_batch_tokens(max_batch_tokens);
            embed_all(&embedder, &texts[..texts.len().min(batch)], batch)?;
            let started = Instant::now();
            embed_all(&embedder, &texts, batch)?;
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "{}",
                serde_json::json!({
                    "texts": texts.len(),
                    "batch": batch,
                    "max_batch_tokens": max_batch_tokens,
                    "seconds": seconds,
                    "texts_per_second": texts.len() as f64 / seconds,
                    "peak_rss_bytes": peak_rss_bytes(),
                })
            );
            Ok(())
        }
    }
}

/// The LoCoMo conversations at `data`, only the first `first` when given.
fn load_conversations(
    data: &std::path::Path,
    first: Option<usize>,
) -> anyhow::Result<Vec<eval::locomo::data::Conversation>> {
    let mut conversations = eval::locomo::data::load(data)?;
    if let Some(first) = first {
        conversations.truncate(first);
    }
    Ok(conversations)
}

/// `memory-eval locomo`, in process or `--via server`.
async fn locomo(
    data: &std::path::Path,
    first: Option<usize>,
    via_server: bool,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    use eval::locomo::{report as locomo_report, run as locomo_run, server};
    let conversations = load_conversations(data, first)?;
    let out = out.join("locomo");
    let progress = Progress::for_terminal();
    let name = data.display().to_string();
    let (report, stem, title) = if via_server {
        let (report, _) = server::measure(&name, &conversations, &out, None, &progress).await?;
        (report, "locomo-via-server", "LoCoMo through the server")
    } else {
        let report = locomo_run::measure(&name, &conversations, &out, &progress).await?;
        (report, "locomo", "LoCoMo")
    };
    locomo_report::write(&report, &out, stem, title)?;
    println!("{}", locomo_report::markdown(&report));
    eprintln!(
        "memory-eval: LoCoMo report written to {}",
        out.join(stem).display()
    );
    Ok(())
}

/// `memory-eval locomo --via worker`.
async fn locomo_via_worker(
    data: &std::path::Path,
    first: Option<usize>,
    model: Option<memory_service::worker::ModelExtraction>,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    use eval::locomo::{run as locomo_run, worker, worker_report};
    let conversations = load_conversations(data, first)?;
    let by_model = model.is_some();
    let out = out.join("locomo");
    std::fs::create_dir_all(&out)?;
    let progress = Progress::for_terminal();
    let run = worker::measure(
        &out.join(if by_model {
            "locomo-via-model.sqlite"
        } else {
            "locomo-via-worker.sqlite"
        }),
        &conversations,
        &locomo_run::MODES,
        true,
        model,
        &progress,
    )
    .await?;
    let direct = worker_report::read_direct(&out.join("locomo.json"))?;
    let mut report = worker_report::ViaWorkerReport::new(
        &data.display().to_string(),
        &conversations,
        &run,
        &locomo_run::MODES,
        direct,
    );
    if by_model {
        report.statements = worker_report::read_statements(&out, conversations.len())?;
    }
    worker_report::write(&report, &out)?;
    println!("{}", worker_report::markdown(&report));
    eprintln!(
        "memory-eval: LoCoMo via-worker report written to {}",
        out.display()
    );
    Ok(())
}

/// `memory-eval corrections`.
async fn corrections(cli: &Cli) -> anyhow::Result<()> {
    use eval::corrections;
    use memory_service::worker::CorrectionLinking;
    use std::sync::Arc;
    let shape = CorpusShape {
        seed: cli.seed,
        people: cli.people.unwrap_or(CorpusShape::default().people),
        ..CorpusShape::default()
    };
    let corpus = generate(shape);
    let cases = corrections::cases(&corpus);
    std::fs::create_dir_all(&cli.out)?;
    let progress = Progress::for_terminal();
    let model: Arc<dyn Embedder> = Arc::new(load_model()?);
    let mut runs = Vec::with_capacity(3);
    for (name, linking) in [
        ("unlinked", CorrectionLinking::Off),
        ("words", CorrectionLinking::Words),
        ("model", CorrectionLinking::Model(model)),
    ] {
        let database = cli.out.join(format!("corrections-{name}.sqlite"));
        runs.push(corrections::measure(&database, &corpus, &cases, linking, &progress).await?);
    }
    let mut runs = runs.into_iter();
    let mut next = || runs.next().unwrap_or_default();
    let report = corrections::CorrectionsReport {
        seed: shape.seed,
        people: shape.people,
        cases: cases.len(),
        unlinked: next(),
        words: next(),
        model: next(),
    };
    let markdown = corrections::markdown(&report);
    std::fs::write(cli.out.join("corrections.md"), &markdown)?;
    std::fs::write(
        cli.out.join("corrections.json"),
        serde_json::to_string_pretty(&report)? + "\n",
    )?;
    println!("{markdown}");
    Ok(())
}

/// `memory-eval locomo-tune`.
fn locomo_tune(
    data: &std::path::Path,
    out: &std::path::Path,
    tuned: &std::path::Path,
) -> anyhow::Result<()> {
    use eval::locomo::{data as locomo_data, run as locomo_run, tune};
    let conversations = locomo_data::load(data)?;
    let progress = Progress::for_terminal();
    let store_dir = out.join("locomo");
    let tune_dir = out.join("locomo-tune");
    std::fs::create_dir_all(&store_dir)?;
    std::fs::create_dir_all(&tune_dir)?;
    // The lexical side is the product's own search over the same store `locomo` builds.
    let (store, _service) = locomo_run::open_service(&store_dir.join("locomo.sqlite"), false)?;
    locomo_run::ingest(&store, &conversations, &progress)?;
    let embedder = load_model()?;
    let cross = semantic_index::FastembedCrossEncoder::load(&ModelAssets::from_env())?;
    let report = tune::tune(
        &store,
        &conversations,
        &embedder,
        Some(&cross),
        Some(&tune_dir),
        memory_service::recall_service::MIN_SEMANTIC_SCORE,
        &progress,
    )?;
    std::fs::write(tune_dir.join("tune.md"), tune::markdown(&report))?;
    std::fs::write(
        tune_dir.join("tune.json"),
        serde_json::to_string_pretty(&report)? + "\n",
    )?;
    std::fs::write(tuned, serde_json::to_string_pretty(&report.tuned)? + "\n")?;
    println!("{}", tune::markdown(&report));
    eprintln!(
        "memory-eval: tuning report in {}, choice written to {}",
        tune_dir.display(),
        tuned.display()
    );
    Ok(())
}

/// This process's peak resident set (`VmHWM`), where the system reports it (Linux).
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Warnings only, to stderr; `RUST_LOG` overrides. Logs carry kinds and counts, never texts.
fn tracing_subscriber_init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
