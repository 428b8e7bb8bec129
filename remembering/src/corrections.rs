//! Which statements correct an earlier memory, and which memory: the rule the worker links by
//! (memory-core's [`memory_core::recall::corrections`] says what a link means at recall).
//!
//! - **Words first.** A statement is a correction only when the speaker says so: it holds one of
//!   the cues of [`correction_cues`] ("Actually ..." opening it, "..., not Lisbon", "no longer",
//!   "anymore", "changed my mind", "... instead." and "... after all." closing it, "I was wrong", "I
//!   meant", "Correction:", ...; see [`CORRECTION_PHRASES`]). A bare restatement ("I live in Madrid.") is never linked,
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
//!   17 of 30 without a wrong link (`memory-eval corrections`). A correction that names what was
//!   wrong (`, not X`) links only to a memory holding X, by either rule, and needs only
//!   [`NAMED_LINK_THRESHOLD`] of shared words. The best likeness wins; among equal ones the memory
//!   said most recently.
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

/// The phrases by which a speaker says, anywhere in a statement, that it corrects an earlier one
/// (lower case, whole words). Besides these, four cues depend on their place
/// ([`correction_cues`]): `actually` opening the statement (after at most one interjection: "Oh,
/// actually ..."), `after all` and `instead` closing it ("Lisbon after all.", "I drink tea
/// instead."), and the contrastive `, not X` naming what it corrects, X a name or a number
/// ("Madrid, not Lisbon"). Measured on LoCoMo's conversations, where "actually", "changed",
/// "instead" and "not" are mostly emphasis or advice ("Yeah actually!", "it changed my view", "try
/// seltzer instead of soda", "not sure"), a looser list linked 24 chit-chat statements by shared
/// words and 13 by the model, none of them a correction.
pub const CORRECTION_PHRASES: &[&str] = &[
    "no longer",
    "not anymore",
    "anymore",
    "any more",
    "i was wrong",
    "i meant",
    "misspoke",
    "correction",
    "to correct",
    "changed my mind",
    "changed to",
    "changed:",
    "update:",
    "switched to",
    "i switched",
];

/// Interjections that may come before an opening "actually".
const OPENERS: &[&str] = &[
    "no", "oh", "wait", "sorry", "well", "hmm", "ok", "okay", "um", "uh", "ah",
];

/// The lowest share of a correction's content words that the memory it corrects must hold when it
/// names nothing as wrong. Measured on LoCoMo (`memory-eval locomo --via worker`), chit-chat shares
/// 0.3 to 0.45 of its words with other chit-chat of the same speaker often enough to link wrongly.
pub const LINK_THRESHOLD: f64 = 0.5;

/// The lowest share when the correction names what was wrong (`, not X`) and the memory holds it:
/// the speaker pointed at it ("Actually I moved to Madrid, not Lisbon; the Lisbon plan fell
/// through." shares 0.4 of its words with "I moved to Lisbon last spring").
pub const NAMED_LINK_THRESHOLD: f64 = 0.25;

/// The lowest cosine similarity (all-MiniLM-L6-v2) between a correction and the memory it corrects,
/// when the worker was given the model (`remembering-worker --corrections model`). Tuned on the eval
/// corpus (`memory-eval corrections`, 98 corrected facts) with an earlier, looser cue list that
/// found 33 worded corrections: at 0.4 the model linked 11, at 0.3 19, both with no wrong link; at
/// 0.2 it linked all 33 but 5 to the wrong memory (another topic of the same person). With the cues
/// as they are, 0.3 links 17 of the 30 worded corrections found, none wrongly. Statements about one
/// thing in other words ("I live in Osaka now." / "Actually I relocated to Porto last month.")
/// mostly score above 0.3. On conversation the model is less precise: on LoCoMo it links 7
/// statements that only sound like corrections ("Try flavored seltzer water instead.", "We're human
/// after all."), which is why the worker judges by shared words unless told otherwise.
pub const COSINE_THRESHOLD: f32 = 0.3;

/// The fewest content words a correction must share with what it corrects (fewer only when the
/// correction has fewer words of its own).
pub const MIN_SHARED_WORDS: usize = 2;

/// How many memories the search is asked for.
pub const RESEMBLING_CANDIDATES: usize = 10;

/// The cues `statement` holds: `actually` (opening), `after all` (closing), `, not X`, then the
/// [`CORRECTION_PHRASES`] it holds in their order; empty for a statement that corrects nothing in
/// words.
pub fn correction_cues(statement: &str) -> Vec<&'static str> {
    let lower = format!(" {} ", statement.to_lowercase());
    let words: Vec<&str> = memory_core::query::split_words(&lower).collect();
    let mut cues = Vec::new();
    let opening = match words.as_slice() {
        ["actually", ..] => true,
        [opener, "actually", ..] => OPENERS.contains(opener),
        _ => false,
    };
    if opening {
        cues.push("actually");
    }
    if words.ends_with(&["after", "all"]) {
        cues.push("after all");
    }
    if words.last() == Some(&"instead") {
        cues.push("instead");
    }
    if !named_as_wrong(statement).is_empty() {
        cues.push(", not X");
    }
    cues.extend(
        CORRECTION_PHRASES
            .iter()
            .copied()
            .filter(|cue| contains_phrase(&lower, cue)),
    );
    cues
}

/// The `X` of each contrastive `, not X` in `statement`, lower case, where X is a name or a number
/// (capitalised or holding a digit: "Madrid, not Lisbon", "in June, not May", "at 9, not 10"; "not
/// sure", "not too far" name nothing): what the statement says was wrong, which the memory it
/// corrects must name.
pub fn named_as_wrong(statement: &str) -> Vec<String> {
    statement
        .match_indices(", not ")
        .filter_map(|(start, cue)| {
            let word = memory_core::query::split_words(&statement[start + cue.len()..]).next()?;
            let named = word.chars().next().is_some_and(char::is_uppercase)
                || word.chars().any(|c| c.is_ascii_digit());
            named.then(|| word.to_lowercase())
        })
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
    let cue_words: HashSet<&str> = CORRECTION_PHRASES
        .iter()
        .chain(&["actually", "after all", "instead"])
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
    let wrong = named_as_wrong(text);
    candidates
        .iter()
        .filter(|candidate| candidate.document.withdrawn.is_none())
        .filter(|candidate| {
            // "Madrid, not Lisbon" corrects a memory that names Lisbon.
            wrong.is_empty() || {
                let theirs = content_words(statement_text(&candidate.document.content));
                wrong.iter().any(|word| theirs.contains(word))
            }
        })
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
                    let threshold = if wrong.is_empty() {
                        LINK_THRESHOLD
                    } else {
                        NAMED_LINK_THRESHOLD
                    };
                    (shared >= needed && share >= threshold).then_some(share)?
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
            "Oh, actually it was Tuesday.",
            "I no longer work as a luthier.",
            "I don't play the violin anymore.",
            "I changed my mind about the trip.",
            "Lisbon after all.",
            "I meant Tuesday.",
            "We went to Porto instead.",
            "I moved in June, not May.",
            "Update: I moved away.",
            "I switched to Helix.",
        ] {
            assert!(!correction_cues(correcting).is_empty(), "{correcting}");
        }
        // Emphasis and change without a correction (LoCoMo's chit-chat, which a looser list linked).
        for plain in [
            "I moved to Madrid.",
            "I do not like tea.",
            "The factually correct answer is 4.",
            "I exchanged gifts with Ana.",
            "I changed jobs in May.",
            "Yeah actually!",
            "I actually just submitted a few more last week!",
            "A lot has changed since last time.",
            "That's awesome, not too far away then!",
            "Definitely what I deserve after all this hard work.",
            "Try flavored seltzer water instead of soda.",
            "Hmmm, not sure if it's suitable for them.",
            "I drink coffee, not tea.",
        ] {
            assert_eq!(correction_cues(plain), Vec::<&str>::new(), "{plain}");
        }
        assert_eq!(
            named_as_wrong("Madrid, not Lisbon, not Porto."),
            ["lisbon", "porto"]
        );
        assert!(named_as_wrong("Trying to stay positive, not easy.").is_empty());
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

    #[test]
    fn what_a_correction_names_as_wrong_must_be_in_what_it_corrects() {
        let own = DocumentId::new("s-own").unwrap();
        let porto = [memory(
            "p",
            "ana",
            "Actually I moved to Porto last spring.",
            1,
        )]
        .map(Resembling::by_words);
        assert_eq!(
            corrected_memory(
                "Actually I moved to Madrid last spring, not Lisbon.",
                "ana",
                &own,
                &porto
            ),
            None,
            "it names Lisbon as wrong; the Porto memory does not say Lisbon"
        );
        let serves = [memory(
            "s",
            "ana",
            "This is one of my favorite spots to ponder and let things go.",
            1,
        )]
        .map(Resembling::by_words);
        assert_eq!(
            corrected_memory(
                "This quote says Let go of what no longer serves you.",
                "ana",
                &own,
                &serves
            ),
            None,
            "two shared words of five are chit-chat, not a correction"
        );
    }
}
