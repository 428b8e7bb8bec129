//! The checks a language model's proposed memory must pass before it is kept (issue 43, part 2):
//! every claim it makes must be quoted, literally, from what the user said. Pure rules over the
//! records the model was shown; the model never chooses the speaker, the namespace or the scope.
//!
//! - **Quotes** (`unsupported_quote`): a proposal names one or more quotes, each with the record it
//!   quotes. Each must name a record the model was shown that the extractor may remember from (a
//!   user's input, as the statement extractor), and be found in its text verbatim, whitespace aside
//!   (runs of whitespace compare as one space; case and punctuation must match). Every quote of one
//!   proposal names the same record: the memory is that record's, so forgetting the record takes it
//!   away exactly as it takes away the record's statements (a memory pieced from two records would
//!   outlive the forgetting of either).
//! - **Text** (`unsupported_text`): the text must say something (not only whitespace), and every number and every name (a capitalised word, except `I`,
//!   a word of the quoted speaker's name, and a sentence's opening function word such as "She" or
//!   "My") in the proposed text must appear in at least one of its quotes (case aside), so a model
//!   cannot slip in a date, an amount or a person nobody said.
//! - **Corrections** (`unsupported_correction`): a proposal that says it corrects a memory must name
//!   one of the memories the model was shown, and one of its quotes must hold correcting words
//!   ([`crate::corrections::correction_cues`]): the link is the user's claim, never the model's.
//!
//! The attribution of a kept proposal comes from its quoted record. The model extractor
//! ([`crate::model_extract`]) applies these rules to every proposal.

use memory_core::DocumentId;
use memory_core::activity::{RecordBody, Sequence, ThreadRecord};

use crate::corrections::correction_cues;

/// One literal quote of a proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    /// The quoted record's place in its thread.
    pub record: Sequence,
    /// The words quoted.
    pub text: String,
}

/// A memory a model proposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The memory's text.
    pub text: String,
    /// Its evidence.
    pub evidence: Vec<Quote>,
    /// The id of the shown memory it says it corrects (as the model wrote it).
    pub corrects: Option<String>,
}

/// Why a proposal was rejected; [`Rejection::as_str`] names the count `memory status` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rejection {
    /// A quote is missing, names no record the extractor may remember from, or is not in it.
    UnsupportedQuote,
    /// A number or a name of the text is in none of its quotes.
    UnsupportedText,
    /// The memory it corrects was not shown, or no quote holds correcting words.
    UnsupportedCorrection,
}

impl Rejection {
    /// The stable name of the count.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnsupportedQuote => "unsupported_quote",
            Self::UnsupportedText => "unsupported_text",
            Self::UnsupportedCorrection => "unsupported_correction",
        }
    }
}

/// Checks `proposal` against the `records` the model was shown and the memories it was `shown`;
/// answers the record whose speaker and attribution the kept memory takes (the one quoted).
pub fn check<'r>(
    proposal: &Proposal,
    records: &'r [ThreadRecord],
    shown: &[DocumentId],
) -> Result<&'r ThreadRecord, Rejection> {
    let mut quoted = Vec::with_capacity(proposal.evidence.len());
    for quote in &proposal.evidence {
        if quoted
            .first()
            .is_some_and(|(first, _): &(&ThreadRecord, String)| first.sequence != quote.record)
        {
            return Err(Rejection::UnsupportedQuote);
        }
        let record = records
            .iter()
            .find(|record| record.sequence == quote.record)
            .ok_or(Rejection::UnsupportedQuote)?;
        let RecordBody::UserInput { text } = &record.record.body else {
            return Err(Rejection::UnsupportedQuote);
        };
        let wanted = squeeze(&quote.text);
        if wanted.is_empty() || !squeeze(text).contains(&wanted) {
            return Err(Rejection::UnsupportedQuote);
        }
        quoted.push((record, wanted));
    }
    let Some((first, _)) = quoted.first() else {
        return Err(Rejection::UnsupportedQuote);
    };
    if proposal.text.trim().is_empty() {
        return Err(Rejection::UnsupportedText);
    }
    let quotes_lower: Vec<String> = quoted.iter().map(|(_, text)| text.to_lowercase()).collect();
    for claim in claims(&proposal.text, &first.record.speaker) {
        let claim = claim.to_lowercase();
        if !quotes_lower.iter().any(|quote| quote.contains(&claim)) {
            return Err(Rejection::UnsupportedText);
        }
    }
    if let Some(target) = &proposal.corrects {
        let worded = quoted
            .iter()
            .any(|(_, text)| !correction_cues(text).is_empty());
        if !shown.iter().any(|id| id.as_str() == target) || !worded {
            return Err(Rejection::UnsupportedCorrection);
        }
    }
    Ok(first)
}

/// `text` with every run of whitespace as one space, trimmed.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The numbers and names of `text` (see the module docs), `speaker` being whose words are quoted.
fn claims<'t>(text: &'t str, speaker: &str) -> Vec<&'t str> {
    let speaker_words: Vec<String> = speaker.split_whitespace().map(str::to_lowercase).collect();
    let mut found = Vec::new();
    let mut opens_sentence = true;
    for word in text.split_whitespace() {
        let bare = word.trim_matches(|c: char| !c.is_alphanumeric());
        if !bare.is_empty() {
            let numeric = bare.chars().any(|c| c.is_ascii_digit());
            let named = bare.chars().next().is_some_and(char::is_uppercase)
                && bare != "I"
                && !(opens_sentence && memory_core::query::is_stop_word(bare))
                && !speaker_words.contains(&bare.to_lowercase());
            if numeric || named {
                found.push(bare);
            }
        }
        opens_sentence = word.ends_with(['.', '!', '?', ':']);
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use memory_core::activity::{NewRecord, RecordDigest, ThreadId};

    use super::*;

    fn record(sequence: u64, speaker: &str, body: RecordBody) -> ThreadRecord {
        let thread = ThreadId::new("t").unwrap();
        let record = NewRecord {
            body,
            ..NewRecord::user(speaker, "", 5)
        };
        ThreadRecord {
            digest: RecordDigest::of(&thread, Sequence::new(sequence), &record),
            thread,
            sequence: Sequence::new(sequence),
            record,
        }
    }

    fn said(sequence: u64, text: &str) -> ThreadRecord {
        record(
            sequence,
            "ana",
            RecordBody::UserInput {
                text: text.to_owned(),
            },
        )
    }

    fn proposal(text: &str, quotes: &[(u64, &str)], corrects: Option<&str>) -> Proposal {
        Proposal {
            text: text.to_owned(),
            evidence: quotes
                .iter()
                .map(|(record, text)| Quote {
                    record: Sequence::new(*record),
                    text: (*text).to_owned(),
                })
                .collect(),
            corrects: corrects.map(str::to_owned),
        }
    }

    #[test]
    fn a_supported_proposal_is_kept_with_its_quoted_records_speaker() {
        let records = [
            said(1, "Hi!  I moved to\nMadrid in 2024, not Lisbon."),
            record(
                2,
                "assistant",
                RecordBody::AssistantMessage {
                    text: "You live in Paris.".to_owned(),
                },
            ),
        ];
        let shown = [DocumentId::new("s-lisbon").unwrap()];
        let kept = check(
            &proposal(
                "Ana moved to Madrid in 2024.",
                &[(1, "I moved to Madrid in 2024, not Lisbon.")],
                Some("s-lisbon"),
            ),
            &records,
            &shown,
        )
        .unwrap();
        assert_eq!(kept.record.speaker, "ana");
        let rejected = |candidate: Proposal| check(&candidate, &records, &shown).unwrap_err();
        // A quote not in the record, one from the assistant, one naming no record, or none at all.
        assert_eq!(
            rejected(proposal("Moved.", &[(1, "I moved to Porto")], None)),
            Rejection::UnsupportedQuote
        );
        assert_eq!(
            rejected(proposal(
                "Lives in Paris.",
                &[(2, "You live in Paris.")],
                None
            )),
            Rejection::UnsupportedQuote
        );
        assert_eq!(
            rejected(proposal("Moved.", &[(9, "I moved")], None)),
            Rejection::UnsupportedQuote
        );
        assert_eq!(
            rejected(proposal("Moved.", &[], None)),
            Rejection::UnsupportedQuote
        );
        // Quotes of two records: the memory would be pieced from both.
        let two = [
            said(1, "I moved to Madrid."),
            said(3, "I work as a luthier."),
        ];
        assert_eq!(
            check(
                &proposal(
                    "Moved to Madrid; works as a luthier.",
                    &[(1, "I moved to Madrid."), (3, "I work as a luthier.")],
                    None
                ),
                &two,
                &[]
            )
            .unwrap_err(),
            Rejection::UnsupportedQuote
        );
        assert_eq!(
            rejected(proposal(" \n", &[(1, "I moved to")], None)),
            Rejection::UnsupportedText
        );
        // An invented year, and an invented name.
        assert_eq!(
            rejected(proposal(
                "Ana moved to Madrid in 2023.",
                &[(1, "I moved to Madrid in 2024")],
                None
            )),
            Rejection::UnsupportedText
        );
        assert_eq!(
            rejected(proposal(
                "She moved to Madrid with Carlos.",
                &[(1, "I moved to Madrid")],
                None
            )),
            Rejection::UnsupportedText
        );
        // A correction of a memory not shown, or quoted without correcting words.
        assert_eq!(
            rejected(proposal(
                "Moved to Madrid.",
                &[(1, "I moved to Madrid in 2024, not Lisbon.")],
                Some("s-other")
            )),
            Rejection::UnsupportedCorrection
        );
        assert_eq!(
            rejected(proposal(
                "Moved to Madrid.",
                &[(1, "I moved to Madrid")],
                Some("s-lisbon")
            )),
            Rejection::UnsupportedCorrection
        );
    }

    #[test]
    fn claims_are_numbers_and_names_but_not_the_speaker_or_an_opening_function_word() {
        assert_eq!(
            claims("Ana moved to Madrid in 2024. She and I like Tea.", "Ana"),
            ["Madrid", "2024", "Tea"]
        );
        assert_eq!(
            claims("Carlos moved to Madrid.", "Ana"),
            ["Carlos", "Madrid"]
        );
    }

    proptest::proptest! {
        /// A model's answer is untrusted text: no proposal panics the checks, and a kept one's
        /// every quote is in its record.
        #[test]
        fn any_proposal_is_checked_without_panicking(
            said_text in "\\PC{0,80}",
            text in "\\PC{0,80}",
            quote in "\\PC{0,40}",
            sequence in 0_u64..4,
            corrects in proptest::option::of("[a-z]{1,4}"),
        ) {
            let records = [said(1, &said_text)];
            let candidate = proposal(&text, &[(sequence, &quote)], corrects.as_deref());
            if check(&candidate, &records, &[]).is_ok() {
                proptest::prop_assert!(squeeze(&said_text).contains(&squeeze(&quote)));
            }
        }
    }
}
