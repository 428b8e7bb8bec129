//! The LoCoMo report: `locomo.md` and `locomo.json` with the same figures, one SVG per mode (its
//! figures by category) and one per category (its figures by mode).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::metrics::{LatencyMs, RetrievalFigures, document_figures, latency};
use super::run::{Answer, MODES};

/// LoCoMo's category names.
pub fn category_name(category: u8) -> &'static str {
    match category {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        _ => "other",
    }
}

/// One mode's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ModeReport {
    /// `lexical`, `exact`, `hnsw` or `hybrid`.
    pub mode: String,
    /// All ten conversations.
    pub all: RetrievalFigures,
    /// Conversations 1-5 (the tuning half).
    pub conversations_1_to_5: RetrievalFigures,
    /// Conversations 6-10 (held out from tuning).
    pub conversations_6_to_10: RetrievalFigures,
    /// All conversations, by category name.
    pub by_category: BTreeMap<String, RetrievalFigures>,
    /// Warm latency of one recall.
    pub latency_ms: LatencyMs,
    /// Recalls refused (counted as empty answers): must be 0.
    pub refused: usize,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct LocomoReport {
    /// The door every recall went through: [`IN_PROCESS`] or [`THROUGH_SERVER`].
    pub door: String,
    /// The data that was read.
    pub data: String,
    /// Conversations read.
    pub conversations: usize,
    /// Turns written (one document each).
    pub turns: usize,
    /// Questions of categories 1-4 with evidence.
    pub questions: usize,
    /// Seconds spent writing the turns.
    pub import_seconds: f64,
    /// Seconds spent indexing them with the real model (the first sync).
    pub sync_seconds: f64,
    /// Per mode.
    pub modes: Vec<ModeReport>,
}

/// [`LocomoReport::door`] of `memory-eval locomo`: the product's service in the harness's process.
pub const IN_PROCESS: &str = "in process (MemoryService, the code `memory recall` runs)";
/// [`LocomoReport::door`] of `memory-eval locomo --via server`: the built binary's MCP server.
pub const THROUGH_SERVER: &str =
    "through `memory serve --http` (the built binary; MCP streamable HTTP, one session)";

impl LocomoReport {
    /// The report of `answers` (per mode, in any order; reported in [`MODES`]'s order).
    pub fn new(
        door: &str,
        data: &str,
        conversations: usize,
        turns: usize,
        (import_seconds, sync_seconds): (f64, f64),
        answers: &BTreeMap<&str, Vec<Answer>>,
    ) -> Self {
        let mut modes: Vec<ModeReport> = answers
            .iter()
            .map(|(mode, answers)| mode_report(mode, answers))
            .collect();
        modes.sort_by_key(|mode| MODES.iter().position(|name| *name == mode.mode));
        Self {
            door: door.to_owned(),
            data: data.to_owned(),
            conversations,
            turns,
            questions: answers.values().next().map_or(0, Vec::len),
            import_seconds,
            sync_seconds,
            modes,
        }
    }
}

/// The figures of one mode's answers.
pub fn mode_report(mode: &str, answers: &[Answer]) -> ModeReport {
    let select = |keep: &dyn Fn(&Answer) -> bool| {
        document_figures(
            answers
                .iter()
                .filter(|answer| keep(answer))
                .map(|answer| (answer.evidence.as_slice(), answer.ranked_turns.as_slice())),
        )
    };
    let mut by_category = BTreeMap::new();
    for category in 1..=4u8 {
        by_category.insert(
            format!("{category} {}", category_name(category)),
            select(&|answer| answer.category == category),
        );
    }
    let samples: Vec<f64> = answers.iter().map(|answer| answer.latency_ms).collect();
    ModeReport {
        mode: mode.to_owned(),
        all: select(&|_| true),
        conversations_1_to_5: select(&|answer| answer.conversation < 5),
        conversations_6_to_10: select(&|answer| answer.conversation >= 5),
        by_category,
        latency_ms: latency(&samples),
        refused: answers.iter().filter(|answer| answer.refused).count(),
    }
}

fn row(label: &str, figures: &RetrievalFigures) -> String {
    format!(
        "| {label} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
        figures.questions,
        figures.hit_at_1,
        figures.hit_at_5,
        figures.hit_at_10,
        figures.share_at_5,
        figures.share_at_10
    )
}

const HEADER: &str = "| | questions | hit@1 | hit@5 | hit@10 | evidence share@5 | evidence share@10 |\n\
                      | --- | --- | --- | --- | --- | --- | --- |";

/// The Markdown report.
pub fn markdown(report: &LocomoReport) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# LoCoMo recall through the product\n\nEvery recall {}. {} conversations, {} turns (one \
         document each), {} questions of categories 1-4, read from `{}`. Import {:.1} s, indexing \
         with the real model {:.1} s.\n",
        report.door,
        report.conversations,
        report.turns,
        report.questions,
        report.data,
        report.import_seconds,
        report.sync_seconds
    );
    text.push_str(&modes_markdown(&report.modes));
    text
}

/// The per-mode sections of a report: every conversation, each half, latency, each mode by category.
pub fn modes_markdown(modes: &[ModeReport]) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "## All ten conversations\n\n{HEADER}");
    for mode in modes {
        let _ = writeln!(text, "{}", row(&mode.mode, &mode.all));
    }
    let _ = writeln!(
        text,
        "\n## Held out from tuning (conversations 6-10)\n\n{HEADER}"
    );
    for mode in modes {
        let _ = writeln!(text, "{}", row(&mode.mode, &mode.conversations_6_to_10));
    }
    let _ = writeln!(text, "\n## Tuning half (conversations 1-5)\n\n{HEADER}");
    for mode in modes {
        let _ = writeln!(text, "{}", row(&mode.mode, &mode.conversations_1_to_5));
    }
    let _ = writeln!(
        text,
        "\n## Warm latency of one recall (ms)\n\n| | p50 | p95 | p99 | refused |\n| --- | --- | --- | --- | --- |"
    );
    for mode in modes {
        let _ = writeln!(
            text,
            "| {} | {:.2} | {:.2} | {:.2} | {} |",
            mode.mode, mode.latency_ms.p50, mode.latency_ms.p95, mode.latency_ms.p99, mode.refused
        );
    }
    for mode in modes {
        let _ = writeln!(text, "\n## {} by category\n\n{HEADER}", mode.mode);
        for (category, figures) in &mode.by_category {
            let _ = writeln!(text, "{}", row(category, figures));
        }
    }
    text
}

const METRICS: [&str; 5] = ["hit@1", "hit@5", "hit@10", "share@5", "share@10"];
const COLOURS: [&str; 5] = ["#4e79a7", "#59a14f", "#f28e2b", "#b07aa1", "#e15759"];

fn values(figures: &RetrievalFigures) -> [f64; 5] {
    [
        figures.hit_at_1,
        figures.hit_at_5,
        figures.hit_at_10,
        figures.share_at_5,
        figures.share_at_10,
    ]
}

/// A grouped bar chart: one group per `(label, figures)`, one bar per metric, values in [0, 1].
pub fn bar_chart(title: &str, groups: &[(String, RetrievalFigures)]) -> String {
    let (left, top, height, bar, gap) = (50.0, 40.0, 240.0, 14.0, 24.0);
    let group_width = bar * METRICS.len() as f64 + gap;
    let width = left + group_width * groups.len() as f64 + 140.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{:.0}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" \
         fill=\"white\"/>\n<text x=\"{left}\" y=\"20\" font-size=\"14\">{}</text>\n",
        top + height + 50.0,
        escape(title)
    );
    for tick in 0..=4 {
        let value = f64::from(tick) / 4.0;
        let y = top + height * (1.0 - value);
        let _ = writeln!(
            svg,
            "<line x1=\"{left}\" x2=\"{:.0}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">{value:.2}</text>",
            width - 140.0,
            left - 6.0,
            y + 4.0
        );
    }
    for (index, (label, figures)) in groups.iter().enumerate() {
        let x0 = left + gap / 2.0 + group_width * index as f64;
        for (metric, value) in values(figures).iter().enumerate() {
            let bar_height = height * value.clamp(0.0, 1.0);
            let _ = writeln!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{bar}\" height=\"{bar_height:.1}\" \
                 fill=\"{}\"><title>{} {}: {value:.3}</title></rect>",
                x0 + bar * metric as f64,
                top + height - bar_height,
                COLOURS[metric],
                escape(label),
                METRICS[metric]
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.0}\" text-anchor=\"middle\">{}</text>",
            x0 + bar * METRICS.len() as f64 / 2.0,
            top + height + 16.0,
            escape(label)
        );
    }
    for (metric, name) in METRICS.iter().enumerate() {
        let y = top + 14.0 * metric as f64;
        let x = width - 120.0;
        let _ = writeln!(
            svg,
            "<rect x=\"{x:.0}\" y=\"{y:.0}\" width=\"10\" height=\"10\" fill=\"{}\"/>\
             <text x=\"{:.0}\" y=\"{:.0}\">{name}</text>",
            COLOURS[metric],
            x + 14.0,
            y + 9.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes `STEM.md`, `STEM.json`, `STEM-MODE.svg` per mode and `STEM-category-N.svg` per category
/// to `out` (`locomo` for the in-process run, `locomo-via-server` for the server's), charts titled
/// `title`.
pub fn write(report: &LocomoReport, out: &Path, stem: &str, title: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join(format!("{stem}.md")), markdown(report))?;
    std::fs::write(
        out.join(format!("{stem}.json")),
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    write_charts(&report.modes, out, stem, title)
}

/// Writes `STEM-MODE.svg` per mode and `STEM-category-N.svg` per category to `out`, titled `TITLE, …`.
pub fn write_charts(
    modes: &[ModeReport],
    out: &Path,
    stem: &str,
    title: &str,
) -> anyhow::Result<()> {
    for mode in modes {
        let mut groups: Vec<(String, RetrievalFigures)> = mode
            .by_category
            .iter()
            .map(|(name, figures)| (name.clone(), *figures))
            .collect();
        groups.push(("all".to_owned(), mode.all));
        std::fs::write(
            out.join(format!("{stem}-{}.svg", mode.mode)),
            bar_chart(
                &format!("{title}, {} recall, by category", mode.mode),
                &groups,
            ),
        )?;
    }
    for category in 1..=4u8 {
        let name = format!("{category} {}", category_name(category));
        let groups: Vec<(String, RetrievalFigures)> = modes
            .iter()
            .filter_map(|mode| {
                mode.by_category
                    .get(&name)
                    .map(|figures| (mode.mode.clone(), *figures))
            })
            .collect();
        std::fs::write(
            out.join(format!("{stem}-category-{category}.svg")),
            bar_chart(&format!("{title}, category {name}, by mode"), &groups),
        )?;
    }
    Ok(())
}
