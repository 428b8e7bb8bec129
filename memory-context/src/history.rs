//! History tools: a thread's records, folded or not, paged by sequence and searched literally, so an
//! agent can recover what a summary left out.
//!
//! A forgotten record is shown as its placeholder (`text` is `{"forgotten": true, "sequence",
//! "forgotten_at"}`, `forgotten` is true, a call or result keeps its `call_id`), and a search never
//! matches it. A withdrawn compaction (its summary covered a record forgotten since) shows no summary
//! and is never matched either.
//!
//! Both tools leave out system instructions (`system_message`) and operational records
//! (`run_completed`, `compaction`) unless asked ([`Include`]: `include: ["system", "operational"]`
//! on the wire): what an agent recovers is the conversation. Records that no longer decode are always
//! shown (they say only that they are unreadable). A page reads at most [`MAX_READ_SCAN`] records
//! looking for ones to show, and then answers where it stopped (`next_after`).

use std::collections::BTreeSet;
use std::sync::Arc;

use memory_core::activity::ThreadId;
use memory_core::activity::forgotten::{ForgottenRecords, placeholder_content};
use memory_core::activity::{
    CompactionOutcome, LogEntry, RecordBody, Sequence, ThreadLog, ThreadRecord,
};
use serde::{Deserialize, Serialize};

use crate::ContextError;
use crate::conversation::{ConversationState, Summary};
use crate::fold::FoldRead;
use crate::segment::output_text;

/// Records a history page returns by default.
pub const DEFAULT_HISTORY_RECORDS: usize = 50;
/// Most records one history page or search answer returns.
pub const MAX_HISTORY_RECORDS: usize = 500;
/// UTF-8 bytes of record text a page returns by default (the first record always comes, cut to this).
pub const DEFAULT_HISTORY_BYTES: usize = 256 * 1024;
/// Most UTF-8 bytes of record text one answer may be asked for.
pub const MAX_HISTORY_BYTES: usize = 16 * 1024 * 1024;
/// Records a search reads by default before answering where it stopped.
pub const DEFAULT_SEARCH_SCAN: usize = 100_000;
/// Most UTF-8 bytes of a search's text.
pub const MAX_SEARCH_TEXT_BYTES: usize = 1_024;
/// Characters of context a search match shows on each side of the match.
pub const SNIPPET_CONTEXT_CHARS: usize = 120;
/// Most records one history page reads looking for records to show.
pub const MAX_READ_SCAN: usize = DEFAULT_SEARCH_SCAN;

/// Records the history tools leave out unless asked.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum IncludeKind {
    /// System instructions (`system_message` records).
    System,
    /// Operational records: `run_completed` and `compaction`.
    Operational,
}

/// Which records the history tools show besides the conversation (user inputs, assistant messages,
/// tool calls and results).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Include {
    /// Show system instructions.
    pub system: bool,
    /// Show `run_completed` and `compaction` records.
    pub operational: bool,
}

impl Include {
    /// Everything.
    pub const ALL: Self = Self {
        system: true,
        operational: true,
    };

    /// What a wire `include` list asks for.
    pub fn of(kinds: &[IncludeKind]) -> Self {
        Self {
            system: kinds.contains(&IncludeKind::System),
            operational: kinds.contains(&IncludeKind::Operational),
        }
    }

    fn admits(self, kind: &str) -> bool {
        match kind {
            "system_message" => self.system,
            "run_completed" | "compaction" => self.operational,
            _ => true,
        }
    }
}

/// What a history answer needs from the thread's fold: the summary in place, the forgotten records
/// and the withdrawn compactions.
#[derive(Debug, Clone, Default)]
pub struct Shown {
    /// The summary in place.
    pub summary: Option<Arc<Summary>>,
    /// The thread's forgotten records.
    pub forgotten: ForgottenRecords,
    /// Every withdrawn compaction.
    pub withdrawn: BTreeSet<Sequence>,
}

impl Shown {
    /// Of a fold read.
    pub fn of(read: &FoldRead<ConversationState>) -> Self {
        Self {
            summary: read.state.summary.clone(),
            forgotten: read.forgotten.clone(),
            withdrawn: read.state.withdrawn_all.clone(),
        }
    }
}

const PAGE: usize = 1_000;

/// A record as the history tools show it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct HistoryRecord {
    /// Its sequence.
    pub sequence: Sequence,
    /// Its kind (`user_input`, `assistant_message`, `tool_call`, `tool_result`, `run_completed`,
    /// `system_message`, `compaction`), or `undecodable`.
    pub kind: String,
    /// Who produced it.
    pub speaker: String,
    /// When, epoch milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<i64>,
    /// Its text: the words, a call's `name(arguments)`, a result's output, a compaction's summary.
    pub text: String,
    /// Bytes cut from the end of `text` to keep the answer within its byte limit.
    #[serde(skip_serializing_if = "is_zero")]
    pub cut_bytes: u64,
    /// Whether a compaction folded it out of the window (it is still here, verbatim).
    pub folded: bool,
    /// A tool call's or result's call id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Whether the record is forgotten: `text` is its placeholder.
    #[serde(skip_serializing_if = "is_false")]
    pub forgotten: bool,
    /// When it was forgotten, epoch milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forgotten_at: Option<i64>,
    /// Whether it is a compaction whose summary is withdrawn (it covered a record forgotten since).
    #[serde(skip_serializing_if = "is_false")]
    pub summary_withdrawn: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// The text a withdrawn compaction shows.
pub const WITHDRAWN_SUMMARY_TEXT: &str = "compaction withdrawn: its summary covered a record \
     forgotten since; the records it folded are shown in the window again";

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// A page of a thread's records.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct HistoryPage {
    /// The records, in order.
    pub records: Vec<HistoryRecord>,
    /// The `after` of the next page, when more records follow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after: Option<Sequence>,
}

/// Records of a thread that contain a text.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct HistorySearch {
    /// The matching records, in order; each `text` is the match with context around it.
    pub matches: Vec<HistoryRecord>,
    /// The newest record read.
    pub scanned_through: Sequence,
    /// The `after` to continue from, when the search stopped before the thread's end (limit or scan
    /// bound reached).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after: Option<Sequence>,
}

/// The text of a record, as the history tools show and search it.
pub fn record_text(record: &ThreadRecord) -> (String, Option<String>) {
    match &record.record.body {
        RecordBody::UserInput { text }
        | RecordBody::AssistantMessage { text }
        | RecordBody::SystemMessage { text } => (text.clone(), None),
        RecordBody::ToolCall {
            call_id,
            name,
            arguments,
        } => (format!("{name}({arguments})"), Some(call_id.clone())),
        RecordBody::ToolResult {
            call_id, output, ..
        } => (output_text(output), Some(call_id.clone())),
        RecordBody::RunCompleted { outcome } => (outcome.clone(), None),
        RecordBody::Compaction(compaction) => match (&compaction.summary, compaction.outcome) {
            (Some(summary), _) => (summary.clone(), None),
            (None, CompactionOutcome::NotSmaller) => (
                "compaction refused: the summary was not smaller than what it would replace"
                    .to_owned(),
                None,
            ),
            (None, CompactionOutcome::SummarizerFailed) => (
                format!(
                    "compaction refused: the summarizer failed ({})",
                    compaction.failure.as_deref().unwrap_or("no reason given")
                ),
                None,
            ),
            (None, _) => ("compaction: nothing could fold".to_owned(), None),
        },
    }
}

fn kind_of(body: &RecordBody) -> &'static str {
    match body {
        RecordBody::UserInput { .. } => "user_input",
        RecordBody::AssistantMessage { .. } => "assistant_message",
        RecordBody::ToolCall { .. } => "tool_call",
        RecordBody::ToolResult { .. } => "tool_result",
        RecordBody::RunCompleted { .. } => "run_completed",
        RecordBody::SystemMessage { .. } => "system_message",
        RecordBody::Compaction(_) => "compaction",
    }
}

fn shown(entry: LogEntry, shown: &Shown) -> HistoryRecord {
    let summary = shown.summary.as_deref();
    match entry {
        LogEntry::Record(record) => {
            let (record, forgotten_at) = shown.forgotten.shown(record);
            let (mut text, call_id) = record_text(&record);
            let withdrawn = forgotten_at.is_none() && shown.withdrawn.contains(&record.sequence);
            if let Some(at) = forgotten_at {
                text = placeholder_content(record.sequence, at).to_string();
            } else if withdrawn {
                WITHDRAWN_SUMMARY_TEXT.clone_into(&mut text);
            }
            HistoryRecord {
                sequence: record.sequence,
                kind: kind_of(&record.record.body).to_owned(),
                speaker: record.record.speaker.clone(),
                occurred_at: record.record.occurred_at,
                text,
                cut_bytes: 0,
                folded: summary.is_some_and(|summary| summary.covers(record.sequence)),
                call_id,
                forgotten: forgotten_at.is_some(),
                forgotten_at,
                summary_withdrawn: withdrawn,
            }
        }
        LogEntry::Undecodable(undecodable) => HistoryRecord {
            sequence: undecodable.sequence,
            kind: "undecodable".to_owned(),
            speaker: String::new(),
            occurred_at: None,
            text: format!(
                "this record no longer decodes ({}); it is skipped in every view",
                match undecodable.reason {
                    memory_core::activity::UndecodableReason::Parse =>
                        "its stored form does not parse",
                    memory_core::activity::UndecodableReason::Digest =>
                        "its content does not match its digest",
                }
            ),
            cut_bytes: 0,
            folded: summary.is_some_and(|summary| summary.covers(undecodable.sequence)),
            call_id: None,
            forgotten: false,
            forgotten_at: None,
            summary_withdrawn: false,
        },
    }
}

/// Cuts `text` to at most `max` bytes at a character boundary; answers the bytes cut.
fn cut(text: &mut String, max: usize) -> u64 {
    if text.len() <= max {
        return 0;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text.len() - end;
    text.truncate(end);
    cut as u64
}

fn check_limits(limit: usize, max_bytes: usize) -> Result<(), ContextError> {
    if limit == 0 || limit > MAX_HISTORY_RECORDS {
        return Err(ContextError::invalid(
            "limit",
            format!("must be between 1 and {MAX_HISTORY_RECORDS}"),
        ));
    }
    if max_bytes == 0 || max_bytes > MAX_HISTORY_BYTES {
        return Err(ContextError::invalid(
            "max_bytes",
            format!("must be between 1 and {MAX_HISTORY_BYTES}"),
        ));
    }
    Ok(())
}

/// Up to `limit` records after `after` that `include` admits, with at most `max_bytes` of text (the
/// first record always comes, cut to fit), reading at most [`MAX_READ_SCAN`] records.
pub fn read(
    log: &dyn ThreadLog,
    thread: &ThreadId,
    shown_as: &Shown,
    after: Sequence,
    limit: usize,
    max_bytes: usize,
    include: Include,
) -> Result<HistoryPage, ContextError> {
    check_limits(limit, max_bytes)?;
    let mut records: Vec<HistoryRecord> = Vec::new();
    let mut bytes = 0usize;
    let mut cursor = after;
    let mut scanned = 0usize;
    loop {
        let want = limit
            .saturating_add(1)
            .min(PAGE)
            .min(MAX_READ_SCAN - scanned);
        let entries = log.read_entries(thread, cursor, want)?;
        let full = entries.len() == want;
        for entry in entries {
            let mut record = shown(entry, shown_as);
            let sequence = record.sequence;
            if include.admits(&record.kind) {
                let last = records.last().map(|record| record.sequence);
                if records.len() == limit
                    || (!records.is_empty() && bytes + record.text.len() > max_bytes)
                {
                    return Ok(HistoryPage {
                        records,
                        next_after: last,
                    });
                }
                record.cut_bytes = cut(&mut record.text, max_bytes);
                bytes += record.text.len();
                records.push(record);
            }
            cursor = sequence;
            scanned += 1;
        }
        if !full {
            return Ok(HistoryPage {
                records,
                next_after: None,
            });
        }
        if scanned >= MAX_READ_SCAN {
            return Ok(HistoryPage {
                records,
                next_after: Some(cursor),
            });
        }
    }
}

/// Records after `after` that `include` admits whose text contains `text` (case-insensitive,
/// literally: no query syntax), at most `limit`, reading at most `scan` records. A forgotten record
/// and a withdrawn compaction never match.
#[allow(clippy::too_many_arguments)]
pub fn search(
    log: &dyn ThreadLog,
    thread: &ThreadId,
    shown_as: &Shown,
    text: &str,
    after: Sequence,
    limit: usize,
    scan: usize,
    include: Include,
) -> Result<HistorySearch, ContextError> {
    check_limits(limit, DEFAULT_HISTORY_BYTES)?;
    if text.trim().is_empty() || text.len() > MAX_SEARCH_TEXT_BYTES {
        return Err(ContextError::invalid(
            "text",
            format!("must be 1 to {MAX_SEARCH_TEXT_BYTES} bytes, not only whitespace"),
        ));
    }
    if scan == 0 {
        return Err(ContextError::invalid("scan", "must be at least 1"));
    }
    let needle = text.to_lowercase();
    let mut matches = Vec::new();
    let mut cursor = after;
    let mut scanned = 0usize;
    loop {
        let want = PAGE.min(scan - scanned);
        let page = log.read_entries(thread, cursor, want)?;
        let full = page.len() == want;
        for entry in page {
            let mut record = shown(entry, shown_as);
            cursor = record.sequence;
            scanned += 1;
            let searchable =
                !record.forgotten && !record.summary_withdrawn && include.admits(&record.kind);
            if !searchable {
                continue;
            }
            if let Some(snippet) = snippet(&record.text, &needle) {
                record.text = snippet;
                matches.push(record);
                if matches.len() == limit {
                    return Ok(HistorySearch {
                        matches,
                        scanned_through: cursor,
                        next_after: Some(cursor),
                    });
                }
            }
        }
        if !full {
            return Ok(HistorySearch {
                matches,
                scanned_through: cursor,
                next_after: None,
            });
        }
        if scanned >= scan {
            return Ok(HistorySearch {
                matches,
                scanned_through: cursor,
                next_after: Some(cursor),
            });
        }
    }
}

/// The text around the first case-insensitive occurrence of `needle` (already lower case), or `None`.
fn snippet(text: &str, needle: &str) -> Option<String> {
    let lower = text.to_lowercase();
    let at = lower.find(needle)?;
    // Lower-casing can change byte lengths, so the match is placed by characters in the original text.
    let start_char = lower[..at].chars().count();
    let match_chars = needle.chars().count();
    let from = start_char.saturating_sub(SNIPPET_CONTEXT_CHARS);
    let to = start_char + match_chars + SNIPPET_CONTEXT_CHARS;
    let total = text.chars().count();
    let mut snippet: String = text.chars().skip(from).take(to - from).collect();
    if from > 0 {
        snippet.insert(0, '…');
    }
    if to < total {
        snippet.push('…');
    }
    Some(snippet)
}
