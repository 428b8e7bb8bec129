//! Requests to the assistant ("can you…", "please…", "tell me…", "let's…"), also after openers ("ok
//! so…") or a name addressing the assistant ("Claude, …"), except those that ask to remember
//! something or state a standing instruction.

use super::question::SUBJECTS;
use super::{Word, is_any, phrase_at};

/// Words and phrases that may open a request without changing it: "ok so can you…", "also,
/// please…", "by the way, take a look…".
const REQUEST_OPENERS: &[&str] = &[
    "ok",
    "okay",
    "so",
    "and",
    "also",
    "now",
    "hey",
    "hi",
    "hello",
    "then",
    "alright",
    "well",
    "oh",
    "um",
    "uh",
    "actually",
    "just",
    "but",
    "btw",
    "by the way",
    "sorry",
    "thanks",
    "great",
    "cool",
    "yes",
    "yeah",
    "hmm",
    "anyway",
    "first",
    "next",
    "finally",
    "again",
    "quickly",
    "quick",
    "one more thing",
    "quick question",
    "please",
];

/// Phrases and imperative verbs that ask the assistant to do something. Verbs whose past tense is
/// spelled the same (read, set, put) are left out: "Read a great book yesterday" is a statement.
const REQUESTS: &[&str] = &[
    "can you",
    "could you",
    "would you",
    "will you",
    "can u",
    "could u",
    "would u",
    "won't you",
    "can't you",
    "would you mind",
    "do you mind",
    "would you be able to",
    "are you able to",
    "is it possible to",
    "is it possible for you to",
    "please",
    "pls",
    "plz",
    "kindly",
    "i need you to",
    "i want you to",
    "i'd like you to",
    "i would like you to",
    "i'd love it if you",
    "i'd like to ask you",
    "i was wondering if you could",
    "i wonder if you could",
    "let's",
    "lets",
    "let us",
    "let me know",
    "tell me",
    "tell us",
    "show me",
    "show us",
    "give me",
    "give us",
    "get me",
    "help me",
    "help us",
    "walk me through",
    "remind me",
    "tell",
    "show",
    "give",
    "help",
    "write",
    "explain",
    "summarize",
    "summarise",
    "list",
    "find",
    "search",
    "look up",
    "look into",
    "look at",
    "take a look",
    "check out",
    "create",
    "make",
    "generate",
    "draft",
    "compose",
    "fix",
    "debug",
    "check",
    "review",
    "translate",
    "describe",
    "compare",
    "suggest",
    "recommend",
    "calculate",
    "compute",
    "convert",
    "rewrite",
    "rephrase",
    "edit",
    "update",
    "add",
    "remove",
    "delete",
    "rename",
    "refactor",
    "implement",
    "build",
    "run",
    "install",
    "send",
    "schedule",
    "teach",
    "define",
    "outline",
    "brainstorm",
    "continue",
    "answer",
    "provide",
    "format",
    "print",
    "fetch",
    "email",
    "remind",
    "proofread",
    "analyze",
    "analyse",
    "imagine",
    "pretend",
    "act as",
    "repeat",
    "elaborate",
    "clarify",
    "go ahead",
    "simplify",
    "shorten",
    "expand",
    "optimize",
    "optimise",
    "draw",
    "plot",
    "sort",
];

/// What makes a request a statement after all: asking to remember something is the memory itself
/// ("please remember that I'm vegetarian").
const MEMORY_VERBS: &[&str] = &[
    "remember",
    "note",
    "keep in mind",
    "bear in mind",
    "don't forget",
    "do not forget",
    "not forget",
    "make a note",
    "take note",
    "memorize",
    "memorise",
    "never forget",
];

/// Phrases that look like requests but state a standing preference or instruction worth keeping.
const NOT_REQUESTS: &[&str] = &["make sure", "let me tell you", "let me explain"];

pub(super) fn is_request(sentence: &str, words: &[Word]) -> bool {
    let mut at = 0;
    while phrase_at(words, at, REQUESTS).is_none() {
        let Some(length) = phrase_at(words, at, REQUEST_OPENERS) else {
            break;
        };
        at += length;
    }
    // A name addressing the assistant: "Claude, can you…". Only a capitalised word followed by a
    // comma that is no pronoun, determiner or contraction: "I'll show you…", "We give them…" and
    // "Gonna continue…" state things (LoCoMo lost evidence turns to this rule without the comma).
    if phrase_at(words, at, REQUESTS).is_none()
        && words
            .get(at)
            .is_some_and(|word| is_addressed_name(sentence, word))
        && phrase_at(words, at + 1, REQUESTS).is_some()
    {
        at += 1;
    }
    if phrase_at(words, at, NOT_REQUESTS).is_some() {
        return false;
    }
    let Some(length) = phrase_at(words, at, REQUESTS) else {
        return false;
    };
    let mut rest = at + length;
    while is_any(
        words.get(rest),
        &["please", "just", "also", "kindly", "you", "always"],
    ) {
        rest += 1;
    }
    phrase_at(words, rest, MEMORY_VERBS).is_none()
}

/// Whether `word` reads as a name addressing someone: capitalised, followed by a comma in the
/// sentence, and no pronoun, determiner or contraction.
fn is_addressed_name(sentence: &str, word: &Word) -> bool {
    word.capitalized
        && !SUBJECTS.contains(&word.lower.as_str())
        && !word.lower.contains('\'')
        && !matches!(word.lower.as_str(), "gonna" | "gotta" | "wanna")
        && sentence
            .to_lowercase()
            .contains(&format!("{},", word.lower))
}

#[cfg(test)]
mod tests {
    use crate::statements::DropReason;
    use crate::statements::test_support::{dropped, kept, kinds};

    #[test]
    fn requests_are_dropped_unless_they_ask_to_remember() {
        for request in [
            "Can you remind me where I live?",
            "Could you summarize this article for me?",
            "Please write a haiku about autumn.",
            "Tell me a joke.",
            "show me the logs",
            "Give me three ideas for dinner",
            "Help me plan my trip.",
            "Let's go hiking sometime!",
            "Ok so can you fix the tests?",
            "Claude, can you check this?",
            "I was wondering if you could proofread my essay.",
            "Remind me to call mom tomorrow.",
        ] {
            assert_eq!(
                kinds(request),
                vec![(request.to_owned(), dropped(DropReason::Request))],
                "{request}"
            );
        }
        for keep in [
            "Please remember that I'm allergic to peanuts.",
            "Remember that my sister is called Bea.",
            "Please note I'm vegetarian.",
            "Don't forget I work night shifts.",
            "Make sure you always answer in Portuguese.",
            "Read a great book about whales yesterday.",
            "Call me Ana.",
            // A capitalised first word before a request verb is no addressed name without a comma
            // (LoCoMo evidence turns the first cut dropped).
            "I'll show you what Samantha looks like.",
            "We give them lots of activities to keep them busy.",
            "Gonna continue my edu and check out career options, which is pretty exciting!",
            "You'll find it, just keep trying new things.",
        ] {
            assert_eq!(kept(keep), vec![keep.to_owned()], "{keep}");
        }
    }
}
