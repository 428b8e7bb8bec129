//! What of a user's input becomes memory: the input is split into sentences, each with its byte range
//! in the original text, and each sentence is classified. Statements are kept; everything else is
//! dropped and counted by a [`DropReason`], so nothing is dropped silently.
//!
//! Pure functions, no model: the rules are deliberately conservative. A sentence is dropped only when
//! it clearly is not something the user states (a question, a request to the assistant, a greeting,
//! an acknowledgement, pasted code or output, or nothing at all); anything in doubt is kept, because a
//! dropped fact is lost while a kept pleasantry only costs a little recall noise.
//!
//! Segmentation works in two steps:
//! - Lines are grouped into blocks: fenced blocks (```` ``` ```` or `~~~`), runs of lines that look like
//!   code, logs, stack traces or shell sessions (indented lines continue such a run), and prose
//!   paragraphs (separated by blank lines or by the other blocks). Code blocks and prose paragraphs
//!   over [`MAX_PROSE_BYTES`] are dropped whole as [`DropReason::Code`].
//! - Prose is split into sentences at `.`, `!`, `?` and `…` runs followed by whitespace (not after
//!   abbreviations, initials, list numbers, or an ellipsis that the sentence continues after), at
//!   CJK full stops, and at line breaks (except where a line is merely wrapped: it ends in a
//!   lower-case letter or a comma and the next one starts in lower case).
//!
//! Every [`Sentence`] is trimmed of surrounding whitespace; together they cover every non-whitespace
//! byte of the text exactly once, in order.
//!
//! Modules, one job each: `segment` (blocks and the sentence list), `boundaries` (where a prose
//! sentence ends), `code` (lines that are code, logs or tool output), `classify` (statement or drop
//! reason, with `pleasantry`, `request` and `question` for each family of rules) and `normalize`
//! (the text restatements share). The extractor that turns kept statements into memory is
//! [`crate::extract::StatementExtractor`].

use std::collections::BTreeMap;

mod boundaries;
mod classify;
mod code;
mod normalize;
mod segment;
#[cfg(test)]
mod test_support;

pub use classify::classify;
pub use normalize::normalize;
pub use segment::segment;

/// Most UTF-8 bytes of a prose sentence or paragraph kept as a statement: anything longer is pasted
/// material (an article, a log, output), dropped as [`DropReason::Code`]. A spoken statement of this
/// size (about 300 words) does not occur in conversation.
pub const MAX_PROSE_BYTES: usize = 2_000;

/// Why a part of a user's input was not kept as memory. The names ([`DropReason::as_str`]) are
/// stable: they are stored in extraction notes and shown by `memory status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// A question (`question`): it asks rather than states.
    Question,
    /// A request to the assistant (`request`): "can you…", "please…", "tell me…", "let's…".
    Request,
    /// A greeting or farewell (`greeting`): "hi", "good morning", "how have you been?".
    Greeting,
    /// An acknowledgement or reaction (`acknowledgement`): "thanks", "ok", "got it", "that's great".
    Acknowledgement,
    /// Pasted code, logs or tool output, or prose over [`MAX_PROSE_BYTES`] (`code`).
    Code,
    /// No letters or digits at all (`empty`): punctuation, emoji, or an input of only whitespace.
    Empty,
    /// A statement the same record already made (`repeated`): the record is one witness of it, so
    /// it is kept once. Assigned by the extractor, never by [`classify`].
    Repeated,
}

impl DropReason {
    /// Every reason, in the order of their names.
    pub const ALL: [Self; 7] = [
        Self::Acknowledgement,
        Self::Code,
        Self::Empty,
        Self::Greeting,
        Self::Question,
        Self::Repeated,
        Self::Request,
    ];

    /// The stable name stored in extraction notes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Question => "question",
            Self::Request => "request",
            Self::Greeting => "greeting",
            Self::Acknowledgement => "acknowledgement",
            Self::Code => "code",
            Self::Empty => "empty",
            Self::Repeated => "repeated",
        }
    }
}

/// What a sentence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SentenceKind {
    /// Something the speaker states: kept as memory.
    Statement,
    /// Not kept, for this reason.
    Dropped(DropReason),
}

/// One sentence (or one dropped block) of a text: its byte range and its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sentence {
    /// Byte offset of its first byte in the text (on a char boundary).
    pub start: usize,
    /// Byte offset just past its last byte (on a char boundary).
    pub end: usize,
    /// What it is.
    pub kind: SentenceKind,
}

impl Sentence {
    /// Its text within `source`, the text it was segmented from (empty for any other text whose
    /// boundaries do not match).
    pub fn text<'a>(&self, source: &'a str) -> &'a str {
        source.get(self.start..self.end).unwrap_or("")
    }
}

/// How many sentences were dropped, by reason name.
pub fn dropped_counts(sentences: &[Sentence]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for sentence in sentences {
        if let SentenceKind::Dropped(reason) = sentence.kind {
            *counts.entry(reason.as_str().to_owned()).or_insert(0) += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_name_each_dropped_sentence_once() {
        let text = "Hi! Thanks. Where do I live? Can you help? I live in Lisbon. ```x```";
        let sentences = segment(text);
        let counts = dropped_counts(&sentences);
        assert_eq!(
            counts,
            BTreeMap::from([
                ("acknowledgement".to_owned(), 1),
                ("code".to_owned(), 1),
                ("greeting".to_owned(), 1),
                ("question".to_owned(), 1),
                ("request".to_owned(), 1),
            ])
        );
        let names: Vec<&str> = DropReason::ALL
            .iter()
            .map(|reason| reason.as_str())
            .collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
    }
}
