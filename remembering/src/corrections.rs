//! Which statements correct an earlier memory, and which memory: the rule the worker links by
//! (memory-core's [`memory_core::recall::corrections`] says what a link means at recall).
//!
//! - **Words first.** A statement is a correction only when the speaker says so: it holds one of
//!   [`CORRECTION_CUES`] ("actually", ", not X", "no longer", "anymore", "changed", "instead", "after
//!   all", "I was wrong", "I meant", ...). A bare restatement ("I live in Madrid.") is never linked,
//!   however much it resembles an older memory: the link is a claim the user made, not one we infer.
//! - **Then the memory it most resembles**, among the destination's current memories of the same
//!   speaker that the [`Resemblance`] port finds. By default the worker loads no embedding model,
//!   so the candidates are the store's lexical hits for the statement and resemblance is the share
//!   of the statement's content words (the query parser's words, stop words and the cue words
//!   themselves left out) that the memory also holds: a memory is linked when that share is at least
//!   [`LINK_THRESHOLD`] and at least [`MIN_SHARED_WORDS`] words are shared (or every word, for a
//!   statement of fewer). Given the model (`remembering-worker --corrections model`), the
//!   destination's newest memories join the candidates and resemblance is the cosine of the two
//!   texts' vectors, at least [`COSINE_THRESHOLD`]: people rarely correct themselves in the words
//!   they first used ("I'm allergic to shellfish." / "Correction on my allergy: it is penicillin."),
//!   and on the eval corpus shared words link none of the worded corrections where the model links
//!   19 of 33 without a wrong link (`memory-eval corrections`). The best likeness wins; among equal
//!   ones the memory said most recently.
//! - A correcting statement that nothing resembles enough is **refused** a link and counted
//!   (`memory status`: corrections refused); it is kept as a memory like any statement.
//!
//! Tuning: see [`LINK_THRESHOLD`] and [`COSINE_THRESHOLD`], and the tests for the pairs each rule
//! must and must not link.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;

use memory_core::activity::ThreadDestination;
use memory_core::query::{StopWords, query_words};
use memory_core::recall::corrections::CorrectionLink;
use memory_core::recall::ties::activity_time;
use memory_core::{DocumentId, MemoryDocument, MemoryError};

use crate::extract::{incarnation_of, statement_text};

/// The words and phrases by which a speaker says a statement corrects an earlier one, lower case.
/// `", not "` is the contrastive "X, not Y" (a bare "not" negates without correcting anything).
pub const CORRECTION_CUES: &[&str] = &[
    "actually",
    ", not ",
    "not anymore",
    "no longer",
    "anymore",
    "any more",
    "change",
    "changed",
    "instead",
    "after all",
    "i was wrong",
    "i meant",
    "misspoke",
    "correction",
    "to correct",
    "rather than",
    "fell through",
    "update:",
    "switched",
    "gave up",
    "gave that up",
    "from now on",
];

/// The lowest share of a correction's content words that the memory it corrects must hold.
pub const LINK_THRESHOLD: f64 = 0.3;

/// The lowest cosine similarity (all-MiniLM-L6-v2) between a correction and the memory it corrects,
/// when the worker was given the model (`remembering-worker --corrections model`). Tuned on the eval
/// corpus (`memory-eval corrections`, 98 corrected facts, 33 said with correcting words): at 0.4 the
/// model linked 11 corrections, at 0.3 19, both with no wrong link; at 0.2 it linked all 33 but 5 to
/// the wrong memory (another topic of the same person). Statements about one thing in other words
/// ("I live in Osaka now." / "Actually I relocated to Porto last month.") mostly score above 0.3.
pub const COSINE_THRESHOLD: f32 = 0.3;

/// The fewest content words a correction must share with what it corrects (fewer only when the
/// correction has fewer words of its own).
pub const MIN_SHARED_WORDS: usize = 2;

/// How many memories the search is asked for.
pub const RESEMBLING_CANDIDATES: usize = 10;

/// The cues `statement` holds, in [`CORRECTION_CUES`] order; empty for a statement that corrects
/// nothing in words.
pub fn correction_cues(statement: &str) -> Vec<&'static str> {
    let lower = format!(" {} ", statement.to_lowercase());
    CORRECTION_CUES
        .iter()
        .copied()
        .filter(|cue| contains_phrase(&lower, cue))
        .collect()
}

/// Whether `text` (padded with spaces) holds `phrase` as whole words.
fn contains_phrase(text: &str, phrase: &str) -> bool {
    text.match_indices(phrase).any(|(start, _)| {
        let before = text[..start].chars().next_back();
        let after = text[start + phrase.len()..].chars().next();
        let bounded = |character: Option<char>| character.is_none_or(|c| !c.is_alphanumeric());
        (phrase.starts_with(|c: char| !c.is_alphanumeric()) || bounded(before))
            && (phrase.ends_with(|c: char| !c.is_alphanumeric()) || bounded(after))
    })
}

/// The content words of `text` that resemblance compares: the query parser's words without the cue
/// words.
fn content_words(text: &str) -> HashSet<String> {
    let cue_words: HashSet<&str> = CORRECTION_CUES
        .iter()
        .flat_map(|cue| memory_core::query::split_words(cue))
        .collect();
    query_words(text, StopWords::Drop)
        .unwrap_or_default()
        .into_iter()
        .filter(|word| !cue_words.contains(word.as_str()))
        .collect()
}

/// One memory that resembles a correcting statement, as [`Resemblance`] finds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resembling {
    /// The memory as it is now.
    pub document: MemoryDocument,
    /// The cosine similarity of its text and the statement's, when the finder has the model;
    /// `None`: likeness is judged by shared words.
    pub cosine: Option<f32>,
}

impl Resembling {
    /// A memory judged by shared words.
    pub fn by_words(document: MemoryDocument) -> Self {
        Self {
            document,
            cosine: None,
        }
    }
}

/// The memory among `candidates` that the correcting statement `text` of `speaker` corrects, by the
/// rule of the module docs (the cosine rule, [`COSINE_THRESHOLD`], for a candidate that carries
/// one); `None` when none resembles it enough. `own` is the statement's own document, never linked
/// (nor any of its incarnations).
pub fn corrected_memory(
    text: &str,
    speaker: &str,
    own: &DocumentId,
    candidates: &[Resembling],
) -> Option<CorrectionLink> {
    let words = content_words(text);
    let needed = MIN_SHARED_WORDS.min(words.len());
    candidates
        .iter()
        .filter(|candidate| candidate.document.withdrawn.is_none())
        .filter(|candidate| incarnation_of(own, &candidate.document.key.id).is_none())
        .filter(|candidate| {
            candidate
                .document
                .content
                .attributions
                .iter()
                .any(|attribution| attribution.speaker == speaker)
        })
        .filter_map(|candidate| {
            let likeness = match candidate.cosine {
                Some(cosine) => (cosine >= COSINE_THRESHOLD).then_some(f64::from(cosine))?,
                None => {
                    if words.is_empty() {
                        return None;
                    }
                    let theirs = content_words(statement_text(&candidate.document.content));
                    let shared = words.intersection(&theirs).count();
                    let share = shared as f64 / words.len() as f64;
                    (shared >= needed && share >= LINK_THRESHOLD).then_some(share)?
                }
            };
            Some((&candidate.document, likeness))
        })
        .max_by(|(left, left_likeness), (right, right_likeness)| {
            left_likeness
                .total_cmp(right_likeness)
                .then_with(|| activity_time(&left.content).cmp(&activity_time(&right.content)))
        })
        .map(|(document, _)| CorrectionLink {
            id: document.key.id.clone(),
            revision: document.revision.clone(),
        })
}

/// What [`Resemblance::resembling`] answers.
pub type ResemblingFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<Resembling>, MemoryError>> + Send + 'a>>;

/// The destination's current memories that resemble a text, as the worker's search finds them
/// (readable in the destination's scope, not forgotten); the candidates [`corrected_memory`]
/// chooses from. The service implements it over the store's lexical search.
pub trait Resemblance: Send + Sync {
    /// Up to `limit` memories of `destination` that `text` finds, best first.
    fn resembling<'a>(
        &'a self,
        destination: &'a ThreadDestination,
        text: &'a str,
        limit: usize,
    ) -> ResemblingFuture<'a>;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use memory_core::document::{MemoryAttribution, MemoryContent};
    use memory_core::{MemoryKey, NamespaceAddress, Revision};

    use super::*;

    #[test]
    fn cues_are_words_the_speaker_says() {
        for correcting in [
            "Actually I moved to Madrid, not Lisbon; the Lisbon plan fell through.",
            "I no longer work as a luthier.",
            "I don't play the violin anymore.",
            "I changed jobs in May.",
            "Lisbon after all.",
            "I meant Tuesday.",
            "We went to Porto instead.",
        ] {
            assert!(!correction_cues(correcting).is_empty(), "{correcting}");
        }
        for plain in [
            "I moved to Madrid.",
            "I do not like tea.",
            "The factually correct answer is 4.",
            "I exchanged gifts with Ana.",
        ] {
            assert_eq!(correction_cues(plain), Vec::<&str>::new(), "{plain}");
        }
    }

    fn memory(id: &str, speaker: &str, text: &str, at: i64) -> MemoryDocument {
        MemoryDocument {
            key: MemoryKey {
                namespace: NamespaceAddress::encode("people", 1, &serde_json::json!({"team": "x"}))
                    .unwrap(),
                id: DocumentId::new(id).unwrap(),
            },
            revision: Revision::new(format!("r-{id}")).unwrap(),
            predecessor: None,
            locator: String::new(),
            content: MemoryContent {
                attributions: vec![MemoryAttribution {
                    origin_id: "o".to_owned(),
                    speaker: speaker.to_owned(),
                    observers: Vec::new(),
                    locator: String::new(),
                    activity_at: Some(at),
                    interpretation: "stated".to_owned(),
                }],
                ..MemoryContent::text(text)
            },
            scopes: Vec::new(),
            modified_at: at,
            withdrawn: None,
        }
    }

    #[test]
    fn a_correction_links_to_the_memory_of_its_speaker_it_most_resembles() {
        let own = DocumentId::new("s-own").unwrap();
        let lisbon = memory(
            "lisbon",
            "ana",
            "I moved to Lisbon last spring and I work as a luthier.",
            1,
        );
        let tea = memory("tea", "ana", "I like green tea.", 2);
        let bea = memory("bea-lisbon", "bea", "I moved to Lisbon last spring.", 3);
        let candidates = [tea, bea, lisbon].map(Resembling::by_words);
        let correction = "Actually I moved to Madrid, not Lisbon; the Lisbon plan fell through.";
        let link = corrected_memory(correction, "ana", &own, &candidates).unwrap();
        assert_eq!(link.id.as_str(), "lisbon");
        assert_eq!(link.revision.as_str(), "r-lisbon");
        // Another speaker's memory is never what ana corrects.
        assert_eq!(corrected_memory(correction, "cy", &own, &candidates), None);
        // Nothing shared enough: refused.
        assert_eq!(
            corrected_memory("Actually the concert was great.", "ana", &own, &candidates),
            None
        );
    }

    #[test]
    fn a_taken_back_correction_links_to_the_newest_claim_it_resembles() {
        let own = DocumentId::new("s-own").unwrap();
        let candidates = [
            memory("lisbon", "ana", "I moved to Lisbon last spring.", 1),
            memory(
                "madrid",
                "ana",
                "Actually I moved to Madrid, not Lisbon; the Lisbon plan fell through.",
                2,
            ),
        ]
        .map(Resembling::by_words);
        let link =
            corrected_memory("Actually, Lisbon after all.", "ana", &own, &candidates).unwrap();
        assert_eq!(link.id.as_str(), "madrid", "equal shares: the newer claim");
        // Its own document (said before) is never its target.
        let again =
            [memory("s-own", "ana", "Actually, Lisbon after all.", 3)].map(Resembling::by_words);
        assert_eq!(
            corrected_memory("Actually, Lisbon after all.", "ana", &own, &again),
            None
        );
    }

    #[test]
    fn with_the_model_the_cosine_decides_and_words_need_not_be_shared() {
        let own = DocumentId::new("s-own").unwrap();
        let scored = |id: &str, text: &str, cosine: f32| Resembling {
            document: memory(id, "ana", text, 1),
            cosine: Some(cosine),
        };
        let candidates = [
            scored("city", "I live in Osaka now.", 0.52),
            scored("allergy", "I'm allergic to shellfish.", 0.12),
        ];
        let link = corrected_memory(
            "Actually I relocated to Porto last month.",
            "ana",
            &own,
            &candidates,
        )
        .unwrap();
        assert_eq!(link.id.as_str(), "city");
        let below = [scored(
            "city",
            "I live in Osaka now.",
            COSINE_THRESHOLD - 0.01,
        )];
        assert_eq!(
            corrected_memory("Actually I relocated to Porto.", "ana", &own, &below),
            None
        );
    }
}
