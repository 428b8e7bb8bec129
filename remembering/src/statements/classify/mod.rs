//! Classification of one prose sentence: kept as a statement, or dropped for one reason. The rules
//! of each family live in a module of their own (`pleasantry`: greetings and acknowledgements,
//! `request`, `question`); this one holds the order they are tried in and the words they share.

use super::{DropReason, MAX_PROSE_BYTES, SentenceKind};

mod pleasantry;
mod question;
mod request;

use pleasantry::pleasantry;
use question::is_question;
use request::is_request;

/// Classifies one sentence of prose (see [`DropReason`] for what is dropped).
pub fn classify(sentence: &str) -> SentenceKind {
    let sentence = sentence.trim();
    if !sentence.chars().any(char::is_alphanumeric) {
        return SentenceKind::Dropped(DropReason::Empty);
    }
    // Inline fences are pasted code even inside a line of prose.
    if sentence.len() > MAX_PROSE_BYTES || sentence.contains("```") {
        return SentenceKind::Dropped(DropReason::Code);
    }
    let words = words(sentence);
    if let Some(reason) = pleasantry(&words) {
        return SentenceKind::Dropped(reason);
    }
    if is_request(sentence, &words) {
        return SentenceKind::Dropped(DropReason::Request);
    }
    if is_question(sentence, &words) {
        return SentenceKind::Dropped(DropReason::Question);
    }
    SentenceKind::Statement
}

/// One word: lower-cased (apostrophes kept, typographic ones made plain), and whether it was
/// written with a capital (a name, when it is not the pronoun `I`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    lower: String,
    capitalized: bool,
}

fn words(sentence: &str) -> Vec<Word> {
    sentence
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '\'' | '\u{2019}')))
        .map(|word| word.trim_matches(|c| matches!(c, '\'' | '\u{2019}')))
        .filter(|word| !word.is_empty())
        .map(|word| Word {
            lower: word.to_lowercase().replace('\u{2019}', "'"),
            capitalized: word.chars().next().is_some_and(char::is_uppercase),
        })
        .collect()
}

/// The length in words of the longest phrase of `phrases` at `words[at..]`.
fn phrase_at(words: &[Word], at: usize, phrases: &[&str]) -> Option<usize> {
    phrases
        .iter()
        .filter_map(|phrase| {
            let parts: Vec<&str> = phrase.split(' ').collect();
            let candidate = words.get(at..at + parts.len())?;
            candidate
                .iter()
                .zip(&parts)
                .all(|(word, part)| word.lower == *part)
                .then_some(parts.len())
        })
        .max()
}

fn is_any(word: Option<&Word>, set: &[&str]) -> bool {
    word.is_some_and(|word| set.contains(&word.lower.as_str()))
}

#[cfg(test)]
mod tests {
    use crate::statements::test_support::{dropped, kept, kinds};
    use crate::statements::{DropReason, SentenceKind, segment};

    #[test]
    fn a_locomo_style_conversation_keeps_its_informative_sentences() {
        let turn = "Hey Mel! Good to see you! How have you been?";
        assert_eq!(
            kinds(turn)
                .into_iter()
                .map(|(_, kind)| kind)
                .collect::<Vec<_>>(),
            vec![
                dropped(DropReason::Greeting),
                dropped(DropReason::Greeting),
                dropped(DropReason::Greeting),
            ]
        );
        let turn = "I went to a LGBTQ support group yesterday and it was so powerful.";
        assert_eq!(kept(turn), vec![turn.to_owned()]);
        let turn = "Wow, Caroline, that's great! What made you decide to go? I'm so proud of you \
                    for taking that step.";
        assert_eq!(
            kept(turn),
            vec!["I'm so proud of you for taking that step.".to_owned()]
        );
        let turn = "Thanks, Mel! The transgender stories were so inspiring. I'm planning to \
                    go back next week, and I've started researching adoption agencies.";
        assert_eq!(
            kept(turn),
            vec![
                "The transgender stories were so inspiring.".to_owned(),
                "I'm planning to go back next week, and I've started researching adoption \
                 agencies."
                    .to_owned(),
            ]
        );
        let turn = "Yeah, I painted that lake sunrise last year! It's special to me.";
        assert_eq!(
            kept(turn),
            vec![
                "Yeah, I painted that lake sunrise last year!".to_owned(),
                "It's special to me.".to_owned(),
            ]
        );
        let turn = "Mel, I moved to Lisbon last spring, did I tell you?";
        assert_eq!(kept(turn), vec![turn.to_owned()]);
    }

    #[test]
    fn nothing_but_punctuation_is_empty() {
        assert_eq!(
            kinds("I love it! 😊 ..."),
            vec![
                ("I love it!".to_owned(), SentenceKind::Statement),
                ("😊 ...".to_owned(), dropped(DropReason::Empty)),
            ]
        );
        assert!(segment("   \n\t ").is_empty());
    }
}
