//! The report: one [`Report`] written as `report.json`, `report.md` and two SVG plots.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::faults::FaultCase;
use crate::lag::LagFigures;
use crate::metrics::{LatencyFigures, QualityFigures};
use crate::pipeline::{IndexingFigures, IngestFigures};
use crate::quality::ModeFigures;
use crate::sweep::SizePoint;

/// What the run was asked to do.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Corpus seed.
    pub seed: u64,
    /// People (one thread each).
    pub people: usize,
    /// Corpus sizes of the latency sweep, in chunks.
    pub sizes: Vec<usize>,
    /// Sizes of the multi-tenant points, in chunks.
    pub tenant_sizes: Vec<usize>,
    /// Whether `--quick` was given.
    pub quick: bool,
    /// The embedder that produced the vectors.
    pub embedder: String,
    /// The SQLite file the pipeline wrote.
    pub store_file: String,
}

/// The corpus's size.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CorpusFigures {
    /// Conversations.
    pub conversations: usize,
    /// Turns in all.
    pub turns: usize,
    /// Queries.
    pub queries: usize,
    /// Queries whose fact was corrected (superseded values are forbidden).
    pub corrected_queries: usize,
    /// Queries whose fact was withdrawn (nothing may be recalled for them).
    pub withdrawn_queries: usize,
}

/// Raw embedder throughput.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EmbeddingFigures {
    /// Texts embedded in batches.
    pub texts: usize,
    /// Texts per model call.
    pub batch_size: usize,
    /// Seconds it took.
    pub seconds: f64,
    /// Texts per second.
    pub texts_per_second: f64,
    /// Latency of embedding one query text.
    pub single_text: LatencyFigures,
}

/// Exact-mode quality under one embedding preprocessing.
#[derive(Debug, Clone, Serialize)]
pub struct PreprocessingFigures {
    /// The profile's preprocessing.
    pub preprocessing: String,
    /// Quality of exact recall with it.
    pub quality: QualityFigures,
}

/// Cold start with the model files already on disk.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ColdStartFigures {
    /// Opening the SQLite stores.
    pub open_store_ms: f64,
    /// Loading the embedding model.
    pub load_model_ms: f64,
    /// Opening the semantic index: loading stored vectors into the exact and HNSW indexes.
    pub load_vectors_ms: f64,
    /// Chunks loaded.
    pub chunks_loaded: usize,
    /// The three together.
    pub total_ms: f64,
    /// The first recall after that (exact mode).
    pub first_recall_ms: f64,
}

/// Every figure of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// What was asked.
    pub settings: Settings,
    /// The corpus.
    pub corpus: CorpusFigures,
    /// Thread log and remembering.
    pub ingest: IngestFigures,
    /// Raw embedding throughput.
    pub embedding: EmbeddingFigures,
    /// Initial indexing.
    pub indexing: IndexingFigures,
    /// Quality and warm latency per mode.
    pub modes: Vec<ModeFigures>,
    /// The product's hybrid fusion parameters the hybrid mode ran with.
    pub hybrid: HybridDefaults,
    /// Exact-mode quality per embedding preprocessing (what text is embedded for a chunk).
    pub preprocessing: Vec<PreprocessingFigures>,
    /// Injected slow and failing sources.
    pub faults: Vec<FaultCase>,
    /// Commit-to-recallable lag.
    pub lag: LagFigures,
    /// Cold start.
    pub cold_start: ColdStartFigures,
    /// Latency against corpus size.
    pub sweep: Vec<SizePoint>,
    /// Multi-tenant points: `namespace_isolation_ratio` of each index and of the lexical search.
    pub tenants: Vec<crate::tenants::TenantPoint>,
    /// Peak resident memory of the process (VmHWM), KiB; `None` where /proc is absent.
    pub peak_memory_kib: Option<u64>,
    /// Wall time of the whole run.
    pub total_seconds: f64,
}

/// The process's peak resident set size from `/proc/self/status`.
pub fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The product's hybrid parameters, as the report records them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HybridDefaults {
    /// The fusion method.
    pub method: semantic_index::FusionMethod,
    /// The rank damping `k` (reciprocal rank fusion only).
    pub k: f64,
    /// Weight of the lexical ranking.
    pub lexical_weight: f64,
    /// Weight of the embedding ranking.
    pub embedding_weight: f64,
}

impl HybridDefaults {
    /// The parameters' fusion fields.
    pub fn of(params: &semantic_index::HybridParams) -> Self {
        Self {
            method: params.method,
            k: params.k,
            lexical_weight: params.lexical_weight,
            embedding_weight: params.embedding_weight,
        }
    }
}

/// Writes `report.json`, `report.md`, `latency_vs_size.svg` and `recall_by_mode.svg` into `out`.
pub fn write(report: &Report, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(report)?,
    )?;
    std::fs::write(out.join("report.md"), markdown(report))?;
    std::fs::write(out.join("latency_vs_size.svg"), latency_plot(&report.sweep))?;
    std::fs::write(out.join("recall_by_mode.svg"), quality_plot(&report.modes))?;
    Ok(())
}

fn ms(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 1.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

fn latency_cells(figures: &LatencyFigures) -> String {
    format!(
        "{} | {} | {}",
        ms(figures.p50_ms),
        ms(figures.p95_ms),
        ms(figures.p99_ms)
    )
}

/// The Markdown report.
pub fn markdown(report: &Report) -> String {
    let mut md = String::new();
    let s = &report.settings;
    let _ = writeln!(md, "# Memory recall evaluation\n");
    let _ = writeln!(
        md,
        "Seed {}, {} people, embedder: {}. Store: `{}`. Whole run: {:.1} s. Peak memory (VmHWM): {}.\n",
        s.seed,
        s.people,
        s.embedder,
        s.store_file,
        report.total_seconds,
        report
            .peak_memory_kib
            .map_or("n/a".to_owned(), |kib| format!(
                "{:.0} MiB",
                kib as f64 / 1024.0
            )),
    );
    let c = &report.corpus;
    let _ = writeln!(
        md,
        "Corpus: {} conversations, {} turns, {} queries ({} about corrected facts, {} about withdrawn facts).\n",
        c.conversations, c.turns, c.queries, c.corrected_queries, c.withdrawn_queries
    );

    let _ = writeln!(
        md,
        "What is the product's and what is the harness's own: `lexical`, `exact`, `hnsw` and `hybrid` \
         are the product's recall modes, run through memory-service's mode table (the code `memory \
         recall`, the MCP servers and the Python package answer with, with their defaults), over an \
         index configured as the binaries configure it. The harness's own parts, which no binary runs: \
         the corpus generator; the corpus extractor (`{}`), which turns each scripted statement into \
         one memory write where the product's worker keeps a user's own sentences; the `direct` mode \
         (the known key, the ceiling); and the indexer driving, which waits for the index to pass the \
         store's head before recalling, as `memory serve` does.\n",
        crate::pipeline::PROCESSOR
    );
    let _ = writeln!(md, "## Recall quality and warm latency per mode\n");
    let _ = writeln!(
        md,
        "Latency is the whole `recall` call as an agent run sees it (search, query embedding, \
         revalidation, composition), warm, in milliseconds. Contradictory = a superseded or withdrawn \
         fact returned; it must be 0.\n"
    );
    let _ = writeln!(
        md,
        "| mode | hit@1 | hit@5 | hit@10 | MRR | misses | contradictory | errors | p50 ms | p95 ms | p99 ms |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|");
    for mode in &report.modes {
        let q = &mode.quality;
        let _ = writeln!(
            md,
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} |",
            mode.mode.as_str(),
            q.hit_at_1,
            q.hit_at_5,
            q.hit_at_10,
            q.mrr,
            q.misses,
            q.contradictory,
            mode.errors,
            latency_cells(&mode.latency)
        );
    }
    let h = &report.hybrid;
    let fusion = match h.method {
        semantic_index::FusionMethod::NormalizedScores => format!(
            "normalized score fusion of lexical and HNSW rankings, each side's scores min-max \
             normalized, lexical weight {}, embedding weight {}",
            h.lexical_weight, h.embedding_weight
        ),
        semantic_index::FusionMethod::ReciprocalRank => format!(
            "weighted reciprocal-rank fusion of lexical and HNSW rankings, `w_lex / (k + \
             rank_lexical) + w_emb / (k + rank_hnsw)`: k = {}, lexical weight {}, embedding weight {}",
            h.k, h.lexical_weight, h.embedding_weight
        ),
    };
    let _ = writeln!(
        md,
        "\nHybrid = the product's hybrid recall with its defaults ({fusion}; tuned on LoCoMo by \
         `memory-eval locomo-tune`).\n"
    );
    let _ = writeln!(md, "![recall per mode](recall_by_mode.svg)\n");
    let _ = writeln!(
        md,
        "What is embedded (the profile's preprocessing), exact mode:\n\n\
         | preprocessing | hit@1 | hit@5 | hit@10 | MRR | contradictory |\n|---|---|---|---|---|---|"
    );
    for row in &report.preprocessing {
        let q = &row.quality;
        let _ = writeln!(
            md,
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {} |",
            row.preprocessing, q.hit_at_1, q.hit_at_5, q.hit_at_10, q.mrr, q.contradictory
        );
    }
    md.push('\n');

    let _ = writeln!(md, "## Throughput\n");
    let i = &report.ingest;
    let e = &report.embedding;
    let x = &report.indexing;
    let _ = writeln!(md, "| stage | figure |\n|---|---|");
    let _ = writeln!(
        md,
        "| thread log append | {} records in {:.2} s ({:.0} records/s, one transaction each, WAL with synchronous=NORMAL) |",
        i.records,
        i.append_seconds,
        crate::pipeline::rate(i.records, i.append_seconds)
    );
    let _ = writeln!(
        md,
        "| extraction (committed-activity passes) | {} records, {} memory writes in {:.2} s ({:.0} records/s) |",
        i.processed, i.writes, i.extraction_seconds, i.extraction_records_per_second
    );
    let _ = writeln!(
        md,
        "| embedding (model alone, batches of {}) | {} texts in {:.2} s ({:.0} texts/s); one query text p50 {} ms, p95 {} ms |",
        e.batch_size,
        e.texts,
        e.seconds,
        e.texts_per_second,
        ms(e.single_text.p50_ms),
        ms(e.single_text.p95_ms)
    );
    let _ = writeln!(
        md,
        "| indexing (indexer following the change feed) | {} sources, {} chunks in {:.2} s ({:.0} changes/s, {:.0} chunks/s) |\n",
        x.sources, x.chunks, x.seconds, x.changes_per_second, x.chunks_per_second
    );

    let _ = writeln!(md, "## Cold start (model files cached on disk)\n");
    let k = &report.cold_start;
    let _ = writeln!(
        md,
        "open store {} ms + load model {} ms + load {} stored vectors into both indexes {} ms = **{} ms**; \
         first recall after that (exact): {} ms.\n",
        ms(k.open_store_ms),
        ms(k.load_model_ms),
        k.chunks_loaded,
        ms(k.load_vectors_ms),
        ms(k.total_ms),
        ms(k.first_recall_ms)
    );

    let _ = writeln!(md, "## Source commit to recallable\n");
    let l = &report.lag;
    let _ = writeln!(
        md,
        "Single-record commits while a background writer keeps committing ({} filler writes meanwhile, one \
         every {} ms: a quarter of the indexing throughput measured above); lexical search is updated in \
         the write's own transaction, so only the embedding indexes lag.\n",
        l.background_writes,
        ms(l.filler_interval_ms)
    );
    let _ = writeln!(
        md,
        "| commit | samples | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|---|"
    );
    let _ = writeln!(
        md,
        "| thread record (append -> remembering pass -> indexed) | {} | {} |",
        l.thread_record.samples,
        latency_cells(&l.thread_record)
    );
    let _ = writeln!(
        md,
        "| memory document write -> indexed | {} | {} |\n",
        l.memory_write.samples,
        latency_cells(&l.memory_write)
    );

    let _ = writeln!(md, "## Slow and failing sources\n");
    let _ = writeln!(
        md,
        "memory-core's composition of several sources: the healthy `direct` source (optional) next \
         to an injected one; recall deadline {} ms, the slow \
         source answers after {} ms. Recall's deadline covers the whole call and fails it without a \
         partial result, whichever source is late; the `SlowWithSourceTimeout` rows bound the slow \
         source by its own timeout (half the deadline) that answers `Unavailable`, which an optional \
         declaration then reports instead of failing.\n",
        crate::faults::FAULT_TIMEOUT_MS,
        crate::faults::SLOW_SOURCE_MS
    );
    let _ = writeln!(
        md,
        "| injected | declared | result | error kind | injected status | passages | elapsed ms |\n|---|---|---|---|---|---|---|"
    );
    for case in &report.faults {
        let _ = writeln!(
            md,
            "| {:?} | {} | {} | {} | {} | {} | {} |",
            case.fault,
            if case.essential {
                "essential"
            } else {
                "optional"
            },
            case.result,
            case.error_kind.as_deref().unwrap_or("-"),
            case.injected_status.as_deref().unwrap_or("-"),
            case.passages,
            ms(case.elapsed_ms)
        );
    }

    let _ = writeln!(md, "\n## Search latency against corpus size\n");
    let _ = writeln!(
        md,
        "Index search alone (query embedding excluded), top 10, one thread, HNSW with the library's \
         default parameters. Each size is one index, its bounds raised to hold it; each build is one bulk \
         load (the HNSW graph built in parallel on every core). Sizes marked *derived* hold the corpus's \
         real-model vectors, then vectors derived from them: a real one (weight {} to 1) mixed with another \
         real one drawn at random, plus Gaussian noise (norm {}), renormalized.\n",
        crate::sweep::DERIVED_MAIN_WEIGHT,
        crate::sweep::DERIVED_NOISE
    );
    let _ = writeln!(
        md,
        "| chunks | vectors | exact p50 | exact p95 | exact p99 | hnsw p50 | hnsw p95 | hnsw p99 | hnsw recall@10 | exact build s | hnsw build s |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|");
    for point in &report.sweep {
        let vectors = if point.derived {
            format!(
                "{} real + {} derived",
                point.real_vectors,
                point.chunks - point.real_vectors
            )
        } else {
            "real".to_owned()
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.3} | {:.2} | {:.2} |",
            point.chunks,
            vectors,
            latency_cells(&point.exact),
            latency_cells(&point.hnsw),
            point.hnsw_recall_at_10,
            point.exact_build_seconds,
            point.hnsw_build_seconds
        );
    }
    let _ = writeln!(md, "\n![latency against corpus size](latency_vs_size.svg)");
    tenants_section(&mut md, &report.tenants);
    md
}

fn tenants_section(md: &mut String, points: &[crate::tenants::TenantPoint]) {
    if points.is_empty() {
        return;
    }
    let _ = writeln!(md, "\n## Many tenants: namespace_isolation_ratio\n");
    let _ = writeln!(
        md,
        "p50 of a top-10 search in one {}-chunk namespace of a store whose chunks are spread over \
         100-chunk namespaces, written round-robin, over the p50 of the same search in a store holding \
         that namespace alone; the two alternate query by query. Vectors derived from the corpus's \
         real-model vectors; lexical documents are the corpus's statements. Goal: at most 1.3.\n",
        crate::tenants::NAMESPACE_CHUNKS
    );
    let _ = writeln!(
        md,
        "| chunks | namespaces | exact ratio | exact p50 ms (alone) | hnsw ratio | hnsw p50 ms (alone) | lexical ratio | lexical p50 ms (alone) | lexical answers equal |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
    for point in points {
        let cells = |figure: &crate::tenants::Isolation| {
            format!(
                "{:.2} | {:.4} ({:.4})",
                figure.namespace_isolation_ratio, figure.crowded_p50_ms, figure.alone_p50_ms
            )
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {}/{} |",
            point.chunks,
            point.namespaces,
            cells(&point.exact),
            cells(&point.hnsw),
            cells(&point.lexical),
            point.lexical_same_answers,
            point.lexical_compared
        );
    }
}

/// A plotted series: its legend name and how to read its value.
type Series<T> = (&'static str, fn(&T) -> f64);

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const COLOURS: [&str; 5] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"];

fn svg_open(title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{title}</text>\n",
        WIDTH / 2.0
    )
}

fn axes(svg: &mut String, x_label: &str, y_label: &str) {
    let (x0, y0, x1, y1) = (LEFT, HEIGHT - BOTTOM, WIDTH - RIGHT, TOP);
    let _ = writeln!(
        svg,
        "<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"black\"/>\
         <line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\" stroke=\"black\"/>"
    );
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{x_label}</text>",
        (x0 + x1) / 2.0,
        HEIGHT - 12.0
    );
    let _ = writeln!(
        svg,
        "<text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{y_label}</text>",
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0
    );
}

/// Latency (log scale) against chunks (log scale), p50 and p95 of both indexes.
pub fn latency_plot(points: &[SizePoint]) -> String {
    let mut svg = svg_open("Search latency against corpus size");
    axes(&mut svg, "chunks (log scale)", "latency ms (log scale)");
    let series: [Series<SizePoint>; 4] = [
        ("exact p50", |p| p.exact.p50_ms),
        ("exact p95", |p| p.exact.p95_ms),
        ("hnsw p50", |p| p.hnsw.p50_ms),
        ("hnsw p95", |p| p.hnsw.p95_ms),
    ];
    let values: Vec<f64> = points
        .iter()
        .flat_map(|point| series.iter().map(move |(_, value)| value(point)))
        .filter(|value| *value > 0.0)
        .collect();
    if points.is_empty() || values.is_empty() {
        svg.push_str("</svg>\n");
        return svg;
    }
    let log = |value: f64| value.max(1e-6).log10();
    let (x_min, x_max) = points.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(log(p.chunks as f64)), hi.max(log(p.chunks as f64)))
    });
    let (y_min, y_max) = values.iter().fold((f64::MAX, f64::MIN), |(lo, hi), v| {
        (lo.min(log(*v)), hi.max(log(*v)))
    });
    let (x_min, x_max) = (x_min.floor(), x_max.ceil().max(x_min.floor() + 1.0));
    let (y_min, y_max) = (y_min.floor(), y_max.ceil().max(y_min.floor() + 1.0));
    let x = |chunks: f64| LEFT + (log(chunks) - x_min) / (x_max - x_min) * (WIDTH - LEFT - RIGHT);
    let y = |latency: f64| {
        HEIGHT - BOTTOM - (log(latency) - y_min) / (y_max - y_min) * (HEIGHT - TOP - BOTTOM)
    };
    for decade in (x_min as i32)..=(x_max as i32) {
        let value = 10f64.powi(decade);
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{value}</text>",
            x(value),
            HEIGHT - BOTTOM + 16.0
        );
    }
    for decade in (y_min as i32)..=(y_max as i32) {
        let value = 10f64.powi(decade);
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{value}</text>\
             <line x1=\"{LEFT}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"#ddd\"/>",
            LEFT - 6.0,
            y(value) + 4.0,
            y(value),
            WIDTH - RIGHT,
            y(value)
        );
    }
    for (index, (name, value)) in series.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        let path: Vec<String> = points
            .iter()
            .filter(|point| value(point) > 0.0)
            .map(|point| format!("{:.1},{:.1}", x(point.chunks as f64), y(value(point))))
            .collect();
        let dash = if name.ends_with("p95") {
            " stroke-dasharray=\"5,3\""
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
            path.join(" ")
        );
        for point in path {
            let (px, py) = point.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(
                svg,
                "<circle cx=\"{px}\" cy=\"{py}\" r=\"3\" fill=\"{colour}\"/>"
            );
        }
        let legend_y = TOP + 20.0 * index as f64;
        let _ = writeln!(
            svg,
            "<line x1=\"{}\" y1=\"{legend_y}\" x2=\"{}\" y2=\"{legend_y}\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>\
             <text x=\"{}\" y=\"{}\">{name}</text>",
            WIDTH - RIGHT + 12.0,
            WIDTH - RIGHT + 36.0,
            WIDTH - RIGHT + 42.0,
            legend_y + 4.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// Grouped bars: hit@1, hit@5, hit@10 and MRR per mode.
pub fn quality_plot(modes: &[ModeFigures]) -> String {
    let mut svg = svg_open("Recall quality per mode");
    axes(&mut svg, "mode", "share of answerable queries");
    let metrics: [Series<ModeFigures>; 4] = [
        ("hit@1", |m| m.quality.hit_at_1),
        ("hit@5", |m| m.quality.hit_at_5),
        ("hit@10", |m| m.quality.hit_at_10),
        ("MRR", |m| m.quality.mrr),
    ];
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    for tick in 0..=4 {
        let value = f64::from(tick) / 4.0;
        let ty = HEIGHT - BOTTOM - value * plot_height;
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{value:.2}</text>\
             <line x1=\"{LEFT}\" y1=\"{ty:.1}\" x2=\"{}\" y2=\"{ty:.1}\" stroke=\"#ddd\"/>",
            LEFT - 6.0,
            ty + 4.0,
            WIDTH - RIGHT
        );
    }
    let group = plot_width / modes.len().max(1) as f64;
    let bar = group * 0.8 / metrics.len() as f64;
    for (mode_index, mode) in modes.iter().enumerate() {
        let group_x = LEFT + group * mode_index as f64 + group * 0.1;
        for (metric_index, (_, value)) in metrics.iter().enumerate() {
            let height = value(mode).clamp(0.0, 1.0) * plot_height;
            let _ = writeln!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{height:.1}\" fill=\"{}\"/>",
                group_x + bar * metric_index as f64,
                HEIGHT - BOTTOM - height,
                bar * 0.9,
                COLOURS[metric_index % COLOURS.len()]
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            LEFT + group * (mode_index as f64 + 0.5),
            HEIGHT - BOTTOM + 16.0,
            mode.mode.as_str()
        );
    }
    for (index, (name, _)) in metrics.iter().enumerate() {
        let legend_y = TOP + 20.0 * index as f64;
        let _ = writeln!(
            svg,
            "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{name}</text>",
            WIDTH - RIGHT + 12.0,
            legend_y - 5.0,
            COLOURS[index % COLOURS.len()],
            WIDTH - RIGHT + 32.0,
            legend_y + 4.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}
