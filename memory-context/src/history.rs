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
//!
//! Both read forward from an `after` anchor or backward from a `before` anchor ([`Anchor`]): before a
//! record, they answer the records with smaller sequences, newest first, and where to continue
//! (`next_before`). A `before` that is not a record of the thread is `not-found`; a backward page whose
//! records the log cannot all produce (a gap in the sequence) fails ([`ContextError::Gap`]) instead of
//! answering a page with holes. Every record says which window it belongs to (`window`: 1 until the
//! thread's first rollover, see [`crate::window`]); a `rollover` record is operational.

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
use crate::window::window_of;

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
            "run_completed" | "compaction" | "rollover" => self.operational,
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
    /// The thread's rollover boundaries, in log order.
    pub boundaries: Vec<Sequence>,
}

impl Shown {
    /// Of a fold read.
    pub fn of(read: &FoldRead<ConversationState>) -> Self {
        Self {
            summary: read.state.summary.clone(),
            forgotten: read.forgotten.clone(),
            withdrawn: read.state.withdrawn_all.clone(),
            boundaries: read.state.boundaries.clone(),
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
    /// The window it belongs to (1 until the thread's first rollover; a rollover record opens the
    /// window it names).
    pub window: u64,
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
    /// The `after` of the next page, when more records follow (a page read forward).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after: Option<Sequence>,
    /// The `before` of the next page, when older records remain (a page read backward).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_before: Option<Sequence>,
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
    /// The `before` to continue from, when a backward search stopped before the thread's first record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_before: Option<Sequence>,
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
        RecordBody::Rollover(rollover) => (
            match &rollover.handoff {
                Some(handoff) => format!(
                    "window {} began (records {} to {} covered); handoff: {handoff}",
                    rollover.window, rollover.covered.first, rollover.covered.last
                ),
                None => format!(
                    "window {} began (records {} to {} covered); no handoff",
                    rollover.window, rollover.covered.first, rollover.covered.last
                ),
            },
            None,
        ),
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
        RecordBody::Rollover(_) => "rollover",
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
                window: window_of(&shown.boundaries, record.sequence),
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
            window: window_of(&shown.boundaries, undecodable.sequence),
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

/// Where a history answer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// The records after this sequence, oldest first (0: from the thread's first record).
    After(Sequence),
    /// The records before this record, newest first.
    Before(Sequence),
}

impl From<Sequence> for Anchor {
    fn from(after: Sequence) -> Self {
        Self::After(after)
    }
}

/// The thread's entries from an anchor, one log page at a time, at most `max` of them.
struct Scan<'a> {
    log: &'a dyn ThreadLog,
    thread: &'a ThreadId,
    anchor: Anchor,
    page: usize,
    buffer: std::vec::IntoIter<LogEntry>,
    /// The newest entry read going forward, the oldest going backward (the anchor before any).
    cursor: Sequence,
    scanned: usize,
    max: usize,
    ended: bool,
}

impl<'a> Scan<'a> {
    fn new(
        log: &'a dyn ThreadLog,
        thread: &'a ThreadId,
        anchor: Anchor,
        page: usize,
        max: usize,
    ) -> Result<Self, ContextError> {
        let cursor = match anchor {
            Anchor::After(after) => after,
            Anchor::Before(before) => {
                if before == Sequence::ZERO || before > log.inspect_tail(thread)? {
                    return Err(ContextError::AnchorNotFound { anchor: before });
                }
                before
            }
        };
        Ok(Self {
            log,
            thread,
            anchor,
            page: page.clamp(1, PAGE),
            buffer: Vec::new().into_iter(),
            cursor,
            scanned: 0,
            max,
            ended: false,
        })
    }

    /// Whether the scan stopped at its bound with records left to read.
    fn stopped_early(&self) -> bool {
        !self.ended && self.scanned >= self.max
    }

    fn next_entry(&mut self) -> Result<Option<LogEntry>, ContextError> {
        if let Some(entry) = self.buffer.next() {
            self.scanned += 1;
            self.cursor = entry.sequence();
            return Ok(Some(entry));
        }
        if self.ended || self.scanned >= self.max {
            return Ok(None);
        }
        let want = self.page.min(self.max - self.scanned);
        let entries = match self.anchor {
            Anchor::After(_) => {
                let entries = self.log.read_entries(self.thread, self.cursor, want)?;
                self.ended = entries.len() < want;
                entries
            }
            Anchor::Before(_) => {
                let below = (self.cursor.get() - 1) as usize;
                let want = want.min(below);
                if want == 0 {
                    self.ended = true;
                    return Ok(None);
                }
                let first = self.cursor.get() - want as u64;
                let mut entries =
                    self.log
                        .read_entries(self.thread, Sequence::new(first - 1), want)?;
                let complete = entries.len() == want
                    && entries
                        .iter()
                        .enumerate()
                        .all(|(at, entry)| entry.sequence().get() == first + at as u64);
                if !complete {
                    return Err(ContextError::Gap {
                        first: Sequence::new(first),
                        last: self.cursor.saturating_previous(),
                    });
                }
                self.ended = first == 1;
                entries.reverse();
                entries
            }
        };
        self.buffer = entries.into_iter();
        match self.buffer.next() {
            Some(entry) => {
                self.scanned += 1;
                self.cursor = entry.sequence();
                Ok(Some(entry))
            }
            None => {
                self.ended = true;
                Ok(None)
            }
        }
    }

    /// The anchor of the next page: `after`/`before` `at`.
    fn next(&self, at: Sequence) -> (Option<Sequence>, Option<Sequence>) {
        match self.anchor {
            Anchor::After(_) => (Some(at), None),
            Anchor::Before(_) => (None, Some(at)),
        }
    }
}

/// Up to `limit` records from `anchor` that `include` admits (after it in order, or before it newest
/// first), with at most `max_bytes` of text (the first record always comes, cut to fit), reading at
/// most [`MAX_READ_SCAN`] records.
#[allow(clippy::too_many_arguments)]
pub fn read(
    log: &dyn ThreadLog,
    thread: &ThreadId,
    shown_as: &Shown,
    anchor: Anchor,
    limit: usize,
    max_bytes: usize,
    include: Include,
) -> Result<HistoryPage, ContextError> {
    check_limits(limit, max_bytes)?;
    let mut records: Vec<HistoryRecord> = Vec::new();
    let mut bytes = 0usize;
    let mut scan = Scan::new(log, thread, anchor, limit.saturating_add(1), MAX_READ_SCAN)?;
    while let Some(entry) = scan.next_entry()? {
        let mut record = shown(entry, shown_as);
        if !include.admits(&record.kind) {
            continue;
        }
        if let Some(last) = records.last().map(|record| record.sequence)
            && (records.len() == limit || bytes + record.text.len() > max_bytes)
        {
            let (next_after, next_before) = scan.next(last);
            return Ok(HistoryPage {
                records,
                next_after,
                next_before,
            });
        }
        record.cut_bytes = cut(&mut record.text, max_bytes);
        bytes += record.text.len();
        records.push(record);
    }
    let (next_after, next_before) = if scan.stopped_early() {
        scan.next(scan.cursor)
    } else {
        (None, None)
    };
    Ok(HistoryPage {
        records,
        next_after,
        next_before,
    })
}

/// Records from `anchor` (after it in order, or before it newest first) that `include` admits whose
/// text contains `text` (case-insensitive, literally: no query syntax), at most `limit`, reading at
/// most `scan` records. A forgotten record and a withdrawn compaction never match.
#[allow(clippy::too_many_arguments)]
pub fn search(
    log: &dyn ThreadLog,
    thread: &ThreadId,
    shown_as: &Shown,
    text: &str,
    anchor: Anchor,
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
    let mut scanner = Scan::new(log, thread, anchor, PAGE, scan)?;
    while let Some(entry) = scanner.next_entry()? {
        let mut record = shown(entry, shown_as);
        let searchable =
            !record.forgotten && !record.summary_withdrawn && include.admits(&record.kind);
        if !searchable {
            continue;
        }
        if let Some(snippet) = snippet(&record.text, &needle) {
            record.text = snippet;
            matches.push(record);
            if matches.len() == limit {
                let (next_after, next_before) = scanner.next(scanner.cursor);
                return Ok(HistorySearch {
                    matches,
                    scanned_through: scanner.cursor,
                    next_after,
                    next_before,
                });
            }
        }
    }
    let (next_after, next_before) = if scanner.stopped_early() {
        scanner.next(scanner.cursor)
    } else {
        (None, None)
    };
    Ok(HistorySearch {
        matches,
        scanned_through: scanner.cursor,
        next_after,
        next_before,
    })
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
