//! Questions: a sentence ending in a question mark (unless a tag only asks to confirm a first-person
//! statement: "I moved to Lisbon, did I tell you?"), or one opening like a question without one.

use super::{Word, classify, is_any, phrase_at, words};
use crate::statements::SentenceKind;

const WH_WORDS: &[&str] = &[
    "what", "where", "when", "who", "whom", "whose", "why", "how", "which",
];

const WH_CONTRACTIONS: &[&str] = &[
    "what's", "where's", "who's", "how's", "when's", "why's", "whats", "wheres", "hows", "whos",
    "what'd", "where'd", "how'd", "who'd", "why'd", "whatcha", "wanna",
];

const AUXILIARIES: &[&str] = &[
    "is",
    "are",
    "was",
    "were",
    "am",
    "do",
    "does",
    "did",
    "can",
    "could",
    "would",
    "should",
    "will",
    "shall",
    "may",
    "might",
    "must",
    "have",
    "has",
    "had",
    "isn't",
    "aren't",
    "wasn't",
    "weren't",
    "don't",
    "doesn't",
    "didn't",
    "can't",
    "couldn't",
    "wouldn't",
    "shouldn't",
    "won't",
    "haven't",
    "hasn't",
];

pub(super) const SUBJECTS: &[&str] = &[
    "i",
    "you",
    "he",
    "she",
    "it",
    "we",
    "they",
    "this",
    "that",
    "there",
    "these",
    "those",
    "the",
    "a",
    "an",
    "my",
    "your",
    "his",
    "her",
    "our",
    "their",
    "anyone",
    "anybody",
    "someone",
    "somebody",
    "everyone",
    "everybody",
    "u",
    "ya",
    "y'all",
    "any",
];

/// Tags that turn a statement into a request for confirmation without taking its content away: "I
/// moved to Lisbon last spring, did I tell you?" is kept.
const TAGS: &[&str] = &[
    "right",
    "you know",
    "remember",
    "isn't it",
    "wasn't it",
    "didn't i",
    "don't you think",
    "ok",
    "okay",
    "yeah",
    "huh",
    "eh",
    "haven't i",
    "did i tell you",
    "did i mention",
    "did i mention that",
    "you see",
    "no",
    "true",
    "correct",
    "isn't that right",
    "am i right",
    "didn't we",
    "wasn't i",
];

/// Declarative openings of a tagged statement.
const FIRST_PERSON: &[&str] = &[
    "i", "i'm", "i've", "i'd", "i'll", "my", "we", "we're", "we've", "our", "me", "mine",
];

pub(super) fn is_question(sentence: &str, words: &[Word]) -> bool {
    let ending: String = sentence
        .chars()
        .rev()
        .take_while(|c| !c.is_alphanumeric())
        .collect();
    if ending.contains(['?', '？']) {
        return !is_tagged_statement(sentence);
    }
    if ending.contains(['.', '!', '。', '！', '…']) {
        return false;
    }
    starts_interrogative(words)
}

fn is_tagged_statement(sentence: &str) -> bool {
    let Some((head, tail)) = sentence.rsplit_once(',') else {
        return false;
    };
    let tail_words = words(tail);
    let is_tag =
        phrase_at(&tail_words, 0, TAGS) == Some(tail_words.len()) && !tail_words.is_empty();
    let head_words = words(head);
    // The statement may open with a name or an interjection: "Mel, I moved to Lisbon, right?".
    is_tag
        && head_words
            .iter()
            .take(3)
            .any(|word| FIRST_PERSON.contains(&word.lower.as_str()))
        && classify(head) == SentenceKind::Statement
}

/// A question without a question mark ("where did I put my keys"): a wh-word followed by an
/// auxiliary, or an auxiliary followed by its subject.
fn starts_interrogative(words: &[Word]) -> bool {
    let (Some(first), second) = (words.first(), words.get(1)) else {
        return false;
    };
    let first = first.lower.as_str();
    if WH_CONTRACTIONS.contains(&first) {
        return true;
    }
    if WH_WORDS.contains(&first) {
        let follows = |set: &[&str]| is_any(second, set);
        return follows(AUXILIARIES)
            || (first == "how"
                && follows(&[
                    "much", "many", "long", "often", "far", "old", "come", "about", "big", "soon",
                ]))
            || (matches!(first, "what" | "which")
                && follows(&[
                    "about", "if", "kind", "time", "else", "happened", "type", "sort", "one",
                ]))
            || (first == "why" && follows(&["not"]));
    }
    AUXILIARIES.contains(&first) && is_any(second, SUBJECTS)
}

#[cfg(test)]
mod tests {
    use crate::statements::DropReason;
    use crate::statements::test_support::{dropped, kinds};

    #[test]
    fn questions_are_dropped() {
        for question in [
            "Where did I move?",
            "where did I move",
            "What is my sister's name?",
            "Do you know where I live?",
            "Did you get my message",
            "how much does it cost",
            "What's the weather like",
            "Is it going to rain tomorrow?",
            "Really?!",
        ] {
            assert_eq!(
                kinds(question),
                vec![(question.to_owned(), dropped(DropReason::Question))],
                "{question}"
            );
        }
    }
}
