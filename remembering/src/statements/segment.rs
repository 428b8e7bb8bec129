//! Segmentation: the lines of a text grouped into blocks (fenced blocks, runs of code-like lines,
//! prose paragraphs), code blocks and oversized paragraphs dropped whole, and each paragraph's
//! sentences trimmed and classified, so together they cover every non-whitespace byte once, in order.

use super::boundaries::sentence_ranges;
use super::code::looks_like_code_line;
use super::{DropReason, MAX_PROSE_BYTES, Sentence, SentenceKind, classify};

/// Splits `text` into trimmed sentences and classifies each (see the module documentation).
pub fn segment(text: &str) -> Vec<Sentence> {
    let lines = lines(text);
    let mut sentences = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let trimmed = line.text(text).trim();
        if trimmed.is_empty() {
            index += 1;
            continue;
        }
        let last = if let Some(fence) = fence_marker(trimmed) {
            fenced_block_end(text, &lines, index, fence)
        } else if looks_like_code_line(trimmed) {
            code_run_end(text, &lines, index)
        } else {
            let last = paragraph_end(text, &lines, index);
            prose(text, line.start, lines[last].end, &mut sentences);
            index = last + 1;
            continue;
        };
        push_trimmed(
            text,
            line.start,
            lines[last].end,
            SentenceKind::Dropped(DropReason::Code),
            &mut sentences,
        );
        index = last + 1;
    }
    sentences
}

/// A line's byte range, without its `\n`.
#[derive(Debug, Clone, Copy)]
struct Line {
    start: usize,
    end: usize,
}

impl Line {
    fn text(self, source: &str) -> &str {
        source.get(self.start..self.end).unwrap_or("")
    }
}

fn lines(text: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (index, byte) in text.bytes().enumerate() {
        if byte == b'\n' {
            lines.push(Line { start, end: index });
            start = index + 1;
        }
    }
    lines.push(Line {
        start,
        end: text.len(),
    });
    lines
}

fn fence_marker(trimmed: &str) -> Option<&'static str> {
    ["```", "~~~"]
        .into_iter()
        .find(|fence| trimmed.starts_with(fence))
}

/// The last line of the fenced block opening at `first`: its closing fence, or the text's last line
/// when it is never closed. A line that opens and closes itself (```` ```ls``` ````) is a block alone.
fn fenced_block_end(text: &str, lines: &[Line], first: usize, fence: &str) -> usize {
    let opening = lines[first].text(text).trim();
    if opening.len() > 2 * fence.len() && opening.ends_with(fence) {
        return first;
    }
    (first + 1..lines.len())
        .find(|&index| lines[index].text(text).trim_start().starts_with(fence))
        .unwrap_or(lines.len() - 1)
}

/// The last line of a run of code-like lines starting at `first`; indented lines continue it (the
/// body of a pasted function, the frames of a stack trace).
fn code_run_end(text: &str, lines: &[Line], first: usize) -> usize {
    let mut last = first;
    for (index, line) in lines.iter().enumerate().skip(first + 1) {
        let raw = line.text(text);
        let trimmed = raw.trim();
        if trimmed.is_empty() || fence_marker(trimmed).is_some() {
            break;
        }
        if looks_like_code_line(trimmed) || raw.starts_with([' ', '\t']) {
            last = index;
        } else {
            break;
        }
    }
    last
}

/// The last line of the prose paragraph starting at `first`.
fn paragraph_end(text: &str, lines: &[Line], first: usize) -> usize {
    let mut last = first;
    for (index, line) in lines.iter().enumerate().skip(first + 1) {
        let trimmed = line.text(text).trim();
        if trimmed.is_empty() || fence_marker(trimmed).is_some() || looks_like_code_line(trimmed) {
            break;
        }
        last = index;
    }
    last
}

/// Pushes `text[start..end]` trimmed, unless nothing but whitespace is left.
fn push_trimmed(
    text: &str,
    start: usize,
    end: usize,
    kind: SentenceKind,
    sentences: &mut Vec<Sentence>,
) {
    let Some(slice) = text.get(start..end) else {
        return;
    };
    let leading = slice.len() - slice.trim_start().len();
    let trailing = slice.len() - slice.trim_end().len();
    if leading == slice.len() {
        return;
    }
    sentences.push(Sentence {
        start: start + leading,
        end: end - trailing,
        kind,
    });
}

/// Splits the prose paragraph `text[start..end]` into sentences and classifies them.
fn prose(text: &str, start: usize, end: usize, sentences: &mut Vec<Sentence>) {
    let Some(paragraph) = text.get(start..end) else {
        return;
    };
    if paragraph.trim().len() > MAX_PROSE_BYTES {
        push_trimmed(
            text,
            start,
            end,
            SentenceKind::Dropped(DropReason::Code),
            sentences,
        );
        return;
    }
    for (from, to) in sentence_ranges(paragraph) {
        let sentence = paragraph.get(from..to).unwrap_or("");
        let kind = classify(sentence);
        if let Some(split) = statement_before_question_tail(sentence, kind) {
            push_trimmed(
                text,
                start + from,
                start + from + split,
                SentenceKind::Statement,
                sentences,
            );
            let tail = classify(sentence.get(split..).unwrap_or(""));
            push_trimmed(text, start + from + split, start + to, tail, sentences);
        } else {
            push_trimmed(text, start + from, start + to, kind, sentences);
        }
    }
}

/// Where a question sentence splits into a statement and the question tacked onto it after a
/// spaced dash ("Got married last week - how about you?"): the byte offset of the last such dash,
/// when the part before it is a statement on its own. Said that way, the statement is as much a
/// fact as if it had ended with a full stop, and dropping the sentence whole lost it.
fn statement_before_question_tail(sentence: &str, kind: SentenceKind) -> Option<usize> {
    if kind != SentenceKind::Dropped(DropReason::Question) {
        return None;
    }
    let split = [" - ", " – ", " — ", " -- "]
        .iter()
        .filter_map(|dash| sentence.rfind(dash).map(|at| at + 1))
        .max()?;
    let head = sentence.get(..split)?;
    (classify(head) == SentenceKind::Statement).then_some(split)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statements::dropped_counts;
    use crate::statements::normalize;
    use proptest::prelude::*;

    #[test]
    fn statements_are_kept_with_their_byte_ranges() {
        let text = "  I moved to Lisbon last spring. My sister Bea lives in Porto!  ";
        let sentences = segment(text);
        assert_eq!(sentences.len(), 2);
        assert_eq!(sentences[0].text(text), "I moved to Lisbon last spring.");
        assert_eq!((sentences[0].start, sentences[0].end), (2, 32));
        assert_eq!(sentences[1].text(text), "My sister Bea lives in Porto!");
        assert!(
            sentences
                .iter()
                .all(|sentence| sentence.kind == SentenceKind::Statement)
        );
    }

    #[test]
    fn a_statement_keeps_the_question_tacked_on_after_a_dash_apart() {
        use crate::statements::test_support::{dropped, kinds};
        let text = "Been up and down lately, got married last week - how about you?";
        assert_eq!(
            kinds(text),
            vec![
                (
                    "Been up and down lately, got married last week".to_owned(),
                    SentenceKind::Statement
                ),
                ("- how about you?".to_owned(), dropped(DropReason::Question)),
            ]
        );
        assert_eq!(
            kinds("I've started eating healthier — what's new with you?")[0],
            (
                "I've started eating healthier".to_owned(),
                SentenceKind::Statement
            )
        );
        // A question on both sides of the dash, or none after it, stays one sentence.
        for whole in [
            "Where did you go - was it Faro?",
            "Did you see it - the new bridge?",
        ] {
            assert_eq!(
                kinds(whole),
                vec![(whole.to_owned(), dropped(DropReason::Question))]
            );
        }
        assert_eq!(
            kinds("I moved to Lisbon - it is lovely."),
            vec![(
                "I moved to Lisbon - it is lovely.".to_owned(),
                SentenceKind::Statement
            )]
        );
    }

    /// Chat-like text: words, punctuation, line breaks, fences, code-ish tokens and odd characters.
    fn chat_text() -> impl Strategy<Value = String> {
        let token = prop_oneof![
            4 => prop::sample::select(vec![
                "I", "live", "in", "Lisbon", "hi", "thanks", "can", "you", "where", "what", "ok",
                "please", "tell", "me", "Dr", "e.g", "1", "3.5", "at", "fn", "git", "push",
                "$", "{", "}", "(", ")", "=", ";", "ERROR", "2024-05-01", "12:00:03", "😊",
                "é", "我", "’", "\"", "Mel",
            ])
            .prop_map(str::to_owned),
            2 => prop::sample::select(vec![
                ".", "!", "?", "...", "…", "。", "?!", ",", "\n", "\n\n", "```", "~~~", "  ",
                "\t", "\r\n", " ", "    ", "-", "—",
            ])
            .prop_map(str::to_owned),
            1 => any::<char>().prop_map(String::from),
        ];
        prop::collection::vec(token, 0..60).prop_map(|tokens| tokens.join(" "))
    }

    fn check_invariants(text: &str) -> Result<(), TestCaseError> {
        let sentences = segment(text);
        let mut covered = vec![false; text.len()];
        let mut previous_end = 0;
        for sentence in &sentences {
            prop_assert!(sentence.start < sentence.end, "{sentence:?}");
            prop_assert!(sentence.end <= text.len());
            prop_assert!(sentence.start >= previous_end, "in order, no overlap");
            prop_assert!(text.is_char_boundary(sentence.start));
            prop_assert!(text.is_char_boundary(sentence.end));
            let slice = sentence.text(text);
            prop_assert_eq!(slice, slice.trim(), "trimmed");
            for flag in &mut covered[sentence.start..sentence.end] {
                *flag = true;
            }
            previous_end = sentence.end;
        }
        for (offset, c) in text.char_indices() {
            if !c.is_whitespace() {
                prop_assert!(covered[offset], "byte {offset} ({c:?}) is in no sentence");
            }
        }
        // Every sentence is kept or counted under exactly one reason.
        let counts = dropped_counts(&sentences);
        let kept = sentences
            .iter()
            .filter(|sentence| sentence.kind == SentenceKind::Statement)
            .count() as u64;
        prop_assert_eq!(kept + counts.values().sum::<u64>(), sentences.len() as u64);
        for sentence in &sentences {
            if sentence.kind == SentenceKind::Statement {
                prop_assert!(sentence.text(text).chars().any(char::is_alphanumeric));
                prop_assert!(sentence.text(text).len() <= MAX_PROSE_BYTES);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn any_text_is_covered_in_order_without_panicking(text in any::<String>()) {
            check_invariants(&text)?;
        }

        #[test]
        fn chat_like_text_is_covered_in_order_without_panicking(text in chat_text()) {
            check_invariants(&text)?;
        }

        #[test]
        fn long_text_is_covered_in_order_without_panicking(
            text in prop::collection::vec(chat_text(), 0..8).prop_map(|parts| parts.join("\n"))
        ) {
            check_invariants(&text)?;
            let _ = normalize(&text);
        }
    }
}
