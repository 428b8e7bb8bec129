//! The report of `memory-eval locomo --via worker` (`locomo-via-worker.md`/`.json`, or
//! `locomo-via-model` with a model extractor): what the worker kept and dropped, the evidence turns it
//! lost, the endpoint's calls, and the recall figures beside the direct import's
//! ([`super::worker`] measures them).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use memory_core::activity::ModelUsage;
use serde::{Deserialize, Serialize};

use super::data::Conversation;
use super::metrics::RetrievalFigures;
use super::report::{ModeReport, mode_report};
use super::worker::{EndpointCalls, LostTurn, ViaWorker, WorkerPasses};

/// One mode's figures of the direct import, read back from its `locomo.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectMode {
    /// The mode.
    pub mode: String,
    /// All conversations.
    pub all: RetrievalFigures,
}

/// The direct import's figures, beside which the via-worker ones are reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectFigures {
    /// The report they were read from.
    pub report: String,
    /// Per mode.
    pub modes: Vec<DirectMode>,
}

/// The direct import's figures from a `locomo.json` written by `memory-eval locomo`, when there is
/// one.
pub fn read_direct(path: &Path) -> anyhow::Result<Option<DirectFigures>> {
    #[derive(Deserialize)]
    struct Report {
        modes: Vec<DirectMode>,
    }
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    let report: Report =
        serde_json::from_slice(&bytes).with_context(|| format!("reading {}", path.display()))?;
    Ok(Some(DirectFigures {
        report: path.display().to_string(),
        modes: report.modes,
    }))
}

/// The via-worker report (`locomo-via-worker.json`; the Markdown has the same figures).
#[derive(Debug, Clone, Serialize)]
pub struct ViaWorkerReport {
    /// `worker`.
    pub via: String,
    /// The worker's extractor: `statements` (the default), or `model NAME` (`--model-url`).
    #[serde(default = "statements")]
    pub extractor: String,
    /// What the model's calls cost (zero for the statement extractor).
    #[serde(default)]
    pub model: ModelUsage,
    /// What the endpoint was asked, failed calls included; `model` counts the calls of the
    /// extractions the worker recorded, which a parked or deferred batch's calls are not part of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<EndpointCalls>,
    /// Seconds the worker took per record.
    #[serde(default)]
    pub seconds_per_record: f64,
    /// The statement extractor's figures on the same conversations, beside a model's run (read from
    /// `locomo-via-worker.json` when it covers as many conversations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statements: Option<DirectFigures>,
    /// The data that was read.
    pub data: String,
    /// Conversations read.
    pub conversations: usize,
    /// Turns appended, one `user_input` record each.
    pub turns: usize,
    /// Threads (one per session).
    pub threads: usize,
    /// Questions of categories 1-4 with evidence.
    pub questions: usize,
    /// Seconds spent appending.
    pub append_seconds: f64,
    /// Seconds the worker took to drain the log.
    pub worker_seconds: f64,
    /// The worker's passes.
    pub worker: WorkerPasses,
    /// Seconds spent indexing with the real model.
    pub sync_seconds: f64,
    /// Records the extraction notes count.
    pub records_extracted: u64,
    /// Memories kept (contributions: a restatement kept again adds an attribution to its document).
    pub documents_kept: u64,
    /// Current documents in the conversations' namespaces.
    pub documents_in_store: usize,
    /// Sentences (or whole inputs) dropped, by reason.
    pub documents_dropped_by_reason: BTreeMap<String, u64>,
    /// Turns with at least one kept memory.
    pub turns_with_memory: usize,
    /// Distinct turns scored questions cite as evidence.
    pub evidence_turns: usize,
    /// Evidence ids naming no turn (never findable, in either path).
    pub evidence_naming_no_turn: usize,
    /// Evidence turns no kept memory came from.
    pub evidence_turns_lost: usize,
    /// Scored questions all of whose evidence turns were lost.
    pub questions_with_all_evidence_lost: usize,
    /// The lost evidence turns.
    pub evidence_turns_lost_list: Vec<LostTurn>,
    /// Per mode (the same figures as `locomo.json`'s).
    pub modes: Vec<ModeReport>,
    /// The direct import's figures, when its report was there.
    pub direct: Option<DirectFigures>,
}

impl ViaWorkerReport {
    /// The report of `run`, modes in `order`.
    pub fn new(
        data: &str,
        conversations: &[Conversation],
        run: &ViaWorker,
        order: &[&str],
        direct: Option<DirectFigures>,
    ) -> Self {
        let mut modes: Vec<ModeReport> = run
            .answers
            .iter()
            .map(|(mode, answers)| mode_report(mode, answers))
            .collect();
        modes.sort_by_key(|mode| order.iter().position(|name| *name == mode.mode));
        Self {
            via: "worker".to_owned(),
            extractor: run.extractor.clone(),
            model: run.totals.model,
            endpoint: run.endpoint.clone(),
            seconds_per_record: if run.appended == 0 {
                0.0
            } else {
                run.worker_seconds / run.appended as f64
            },
            statements: None,
            data: data.to_owned(),
            conversations: conversations.len(),
            turns: run.appended,
            threads: run.threads,
            questions: run.answers.values().next().map_or(0, Vec::len),
            append_seconds: run.append_seconds,
            worker_seconds: run.worker_seconds,
            worker: run.passes,
            sync_seconds: run.sync_seconds,
            records_extracted: run.totals.records,
            documents_kept: run.totals.kept,
            documents_in_store: run.check.documents_in_store,
            documents_dropped_by_reason: run.totals.dropped.clone(),
            turns_with_memory: run.check.turns_with_memory,
            evidence_turns: run.check.evidence_turns,
            evidence_naming_no_turn: run.check.evidence_naming_no_turn,
            evidence_turns_lost: run.check.lost.len(),
            questions_with_all_evidence_lost: run.check.questions_with_all_evidence_lost,
            evidence_turns_lost_list: run.check.lost.clone(),
            modes,
            direct,
        }
    }
}

fn statements() -> String {
    "statements".to_owned()
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The Markdown report.
pub fn markdown(report: &ViaWorkerReport) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# LoCoMo recall through the remembering worker\n\n{} conversations, {} turns appended as \
         `user_input` records to {} threads (one per session), read from `{}`; the worker \
         (extractor: {}) drained the log in {} passes ({} threads parked); {} questions of \
         categories 1-4. Append {:.1} s, worker {:.1} s ({:.3} s per record), indexing with the \
         real model {:.1} s.\n",
        report.conversations,
        report.turns,
        report.threads,
        report.data,
        report.extractor,
        report.worker.passes,
        report.worker.parked,
        report.questions,
        report.append_seconds,
        report.worker_seconds,
        report.seconds_per_record,
        report.sync_seconds
    );
    if report.extractor != "statements" {
        model_markdown(&mut text, report);
    }
    let _ = writeln!(text, "## Beside the direct import (all conversations)\n");
    match &report.direct {
        Some(direct) => {
            let _ = writeln!(
                text,
                "Direct figures from `{}`.\n\n| mode | hit@5 direct | hit@5 via worker | hit@10 \
                 direct | hit@10 via worker | share@10 direct | share@10 via worker |\n| --- | --- \
                 | --- | --- | --- | --- | --- |",
                direct.report
            );
            for mode in &report.modes {
                let beside = direct.modes.iter().find(|other| other.mode == mode.mode);
                let figure =
                    |value: Option<f64>| value.map_or("-".to_owned(), |v| format!("{v:.3}"));
                let _ = writeln!(
                    text,
                    "| {} | {} | {:.3} | {} | {:.3} | {} | {:.3} |",
                    mode.mode,
                    figure(beside.map(|d| d.all.hit_at_5)),
                    mode.all.hit_at_5,
                    figure(beside.map(|d| d.all.hit_at_10)),
                    mode.all.hit_at_10,
                    figure(beside.map(|d| d.all.share_at_10)),
                    mode.all.share_at_10
                );
            }
        }
        None => {
            let _ = writeln!(
                text,
                "No direct report was found (run `memory-eval locomo` first).\n\n| mode | hit@5 | \
                 hit@10 | share@10 |\n| --- | --- | --- | --- |"
            );
            for mode in &report.modes {
                let _ = writeln!(
                    text,
                    "| {} | {:.3} | {:.3} | {:.3} |",
                    mode.mode, mode.all.hit_at_5, mode.all.hit_at_10, mode.all.share_at_10
                );
            }
        }
    }
    let dropped: u64 = report.documents_dropped_by_reason.values().sum();
    let _ = writeln!(
        text,
        "\n## Extraction\n\n{} records extracted; {} memories kept ({} documents in the store, {} \
         turns with a memory), {} parts dropped:\n\n| reason | dropped |\n| --- | --- |",
        report.records_extracted,
        report.documents_kept,
        report.documents_in_store,
        report.turns_with_memory,
        dropped
    );
    for (reason, count) in &report.documents_dropped_by_reason {
        let _ = writeln!(text, "| {reason} | {count} |");
    }
    let _ = writeln!(
        text,
        "\n## Evidence turns lost by extraction\n\n{} of {} evidence turns produced no kept memory; \
         {} questions lost all of their evidence ({} evidence ids name no turn).\n\n| conversation \
         | turn | speaker | questions | dropped | sentences |\n| --- | --- | --- | --- | --- | --- |",
        report.evidence_turns_lost,
        report.evidence_turns,
        report.questions_with_all_evidence_lost,
        report.evidence_naming_no_turn
    );
    for lost in &report.evidence_turns_lost_list {
        let dropped: Vec<String> = lost
            .dropped
            .iter()
            .map(|(reason, count)| format!("{reason} {count}"))
            .collect();
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {} | {} |",
            cell(&lost.conversation),
            lost.dia_id,
            cell(&lost.speaker),
            lost.questions,
            dropped.join(", "),
            cell(&lost.sentences.join(" / "))
        );
    }
    let _ = writeln!(text);
    text.push_str(&super::report::modes_markdown(&report.modes));
    text
}

/// The model's section: what it kept and rejected, what it cost, and recall beside the statement
/// extractor's on the same conversations.
fn model_markdown(text: &mut String, report: &ViaWorkerReport) {
    use std::fmt::Write as _;
    let rejected = |rule: &str| {
        report
            .documents_dropped_by_reason
            .get(rule)
            .copied()
            .unwrap_or(0)
    };
    let _ = writeln!(
        text,
        "## The model\n\n{} memories kept from {} records; proposals rejected: {} unsupported \
         quotes, {} unsupported texts, {} unsupported corrections. Recorded with the extractions: \
         {} calls, {} prompt and {} completion tokens, {:.1} s waiting for answers ({:.3} s per record for the whole \
         worker), {} records extracted by statements instead.\n",
        report.documents_kept,
        report.records_extracted,
        rejected("unsupported_quote"),
        rejected("unsupported_text"),
        rejected("unsupported_correction"),
        report.model.calls,
        report.model.prompt_tokens,
        report.model.completion_tokens,
        report.model.latency_ms as f64 / 1_000.0,
        report.seconds_per_record,
        report.model.fallbacks,
    );
    if let Some(endpoint) = &report.endpoint {
        let failed: Vec<String> = endpoint
            .failed
            .iter()
            .map(|(kind, calls)| format!("{calls} {kind}"))
            .collect();
        let _ = writeln!(
            text,
            "The endpoint, every call counted (parked and deferred batches' too): {} answered, \
             {} failed ({}), {} retried attempts; {} prompt and {} completion tokens; {:.1} s in \
             answered calls.\n",
            endpoint.answered,
            endpoint.failed.values().sum::<u64>(),
            if failed.is_empty() {
                "none".to_owned()
            } else {
                failed.join(", ")
            },
            endpoint.retries,
            endpoint.prompt_tokens,
            endpoint.completion_tokens,
            endpoint.answered_ms as f64 / 1_000.0,
        );
    }
    match &report.statements {
        Some(statements) => {
            let _ = writeln!(
                text,
                "Beside the statement extractor on the same conversations (`{}`):\n\n| mode | \
                 hit@10 statements | hit@10 model | share@10 statements | share@10 model |\n| --- \
                 | --- | --- | --- | --- |",
                statements.report
            );
            for mode in &report.modes {
                let beside = statements
                    .modes
                    .iter()
                    .find(|other| other.mode == mode.mode);
                let figure =
                    |value: Option<f64>| value.map_or("-".to_owned(), |v| format!("{v:.3}"));
                let _ = writeln!(
                    text,
                    "| {} | {} | {:.3} | {} | {:.3} |",
                    mode.mode,
                    figure(beside.map(|d| d.all.hit_at_10)),
                    mode.all.hit_at_10,
                    figure(beside.map(|d| d.all.share_at_10)),
                    mode.all.share_at_10
                );
            }
            let _ = writeln!(text);
        }
        None => {
            let _ = writeln!(
                text,
                "No statement-extractor run of as many conversations was found beside it (run \
                 `memory-eval locomo --via worker --conversations {}` first).\n",
                report.conversations
            );
        }
    }
}

/// The file stem a run's report is written under: `locomo-via-worker` for the statement extractor,
/// `locomo-via-model` for a model's.
pub fn stem(report: &ViaWorkerReport) -> &'static str {
    if report.extractor == "statements" {
        "locomo-via-worker"
    } else {
        "locomo-via-model"
    }
}

/// Writes `<stem>.md`, `<stem>.json` and its SVGs to `out` ([`stem`]).
pub fn write(report: &ViaWorkerReport, out: &Path) -> anyhow::Result<()> {
    let stem = stem(report);
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join(format!("{stem}.md")), markdown(report))?;
    std::fs::write(
        out.join(format!("{stem}.json")),
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    super::report::write_charts(&report.modes, out, stem, "LoCoMo via the worker")
}

/// The statement extractor's via-worker figures from `locomo-via-worker.json` in `out`, when they
/// cover `conversations` conversations (the same ones, since `--conversations N` takes the first N).
pub fn read_statements(out: &Path, conversations: usize) -> anyhow::Result<Option<DirectFigures>> {
    let path = out.join("locomo-via-worker.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    #[derive(Deserialize)]
    struct Saved {
        conversations: usize,
        #[serde(default = "statements")]
        extractor: String,
        modes: Vec<DirectMode>,
    }
    let saved: Saved =
        serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
    Ok(
        (saved.conversations == conversations && saved.extractor == "statements").then(|| {
            DirectFigures {
                report: path.display().to_string(),
                modes: saved.modes,
            }
        }),
    )
}
