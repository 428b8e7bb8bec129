//! Excerpts of long documents for whole-document candidates (lexical hits).
//!
//! A lexical hit names a document, not a place in it. A short document is cited whole; a document
//! longer than one chunk ([`ChunkingConfig::max_chunk_bytes`]) is cited by its chunks that match the
//! query best, cut by the same chunker the embedding index uses ([`chunk_text`]) and named by the same
//! passage ids ([`chunk_passage_id`]), so the same chunk found lexically and by embedding shares one
//! citation. Without this a long document is one passage larger than most `max_bytes` budgets, which
//! composition (never cutting a passage) would omit, and which costs time to revalidate and render.
//!
//! Matching is a cheap lexical score computed on the current text at revalidation time, so every
//! excerpt is an exact excerpt of the current document by construction:
//! - query words are the lexical search's own ([`memory_core::query::query_words`]: the one parser,
//!   stop words dropped), chunk words are cut the same way ([`memory_core::query::split_words`]), and
//!   both are lowercased and folded to their first [`FOLD_CHARS`] characters, a crude stemmer that
//!   lets "preferences" meet "preferred" (the store's full-text index stems; this only has to find
//!   where the match is, not decide it);
//! - a chunk scores the sum, over the distinct query words it holds, of `ln(1 + n / df)` where `n` is the
//!   document's chunk count and `df` the number of its chunks holding the word: a word in every chunk
//!   ("the", the document's topic) says little about where the answer is, a rare one says much;
//! - the best [`MAX_EXCERPTS_PER_DOCUMENT`] chunks with a positive score are kept, best first (ties by
//!   position); when no chunk holds a query word (the full-text index matched a stem this folding
//!   misses, or the speaker), the first chunk stands for the document.

use std::collections::{HashMap, HashSet};

use memory_core::MemoryPassage;
use memory_core::query::{StopWords, query_words, split_words};
use memory_core::revalidate::CitedText;

use crate::chunk::{Chunk, chunk_text};
use crate::profile::{ChunkingConfig, ProfileDigest};
use crate::recall::chunk_passage_id;

/// Most chunks of one long document cited for one whole-document candidate.
pub const MAX_EXCERPTS_PER_DOCUMENT: usize = 2;

/// Characters a word is folded to before query and chunk words are compared.
pub const FOLD_CHARS: usize = 5;

/// How whole-document candidates are cut: the query they matched, and the chunking and profile that
/// name their chunks.
#[derive(Debug, Clone, Copy)]
pub struct ExcerptRules<'a> {
    /// The recall's query text.
    pub query: &'a str,
    /// The chunking of the index's profile.
    pub chunking: ChunkingConfig,
    /// The profile digest that names chunk passages.
    pub profile: ProfileDigest,
}

fn fold(word: &str) -> String {
    word.to_lowercase().chars().take(FOLD_CHARS).collect()
}

/// The chunks of `text` that best match `query`, best first: at most `max`, none when `text` is one
/// chunk or less (the caller cites it whole), at least one otherwise.
pub fn matching_chunks(
    text: &str,
    query: &str,
    chunking: ChunkingConfig,
    max: usize,
) -> Vec<Chunk> {
    if text.len() <= chunking.max_chunk_bytes || max == 0 {
        return Vec::new();
    }
    let chunks = chunk_text(text, chunking);
    if chunks.len() <= 1 {
        return Vec::new();
    }
    // A query the parser refuses (over its byte bound) was refused before recall got here; none of
    // its words then point anywhere, and the first chunk stands for the document.
    let query_words: HashSet<String> = query_words(query, StopWords::Drop)
        .unwrap_or_default()
        .iter()
        .map(|word| fold(word))
        .collect();
    let held: Vec<HashSet<String>> = chunks
        .iter()
        .map(|chunk| {
            split_words(chunk.text(text))
                .map(fold)
                .filter(|word| query_words.contains(word))
                .collect()
        })
        .collect();
    let mut frequency: HashMap<&str, usize> = HashMap::new();
    for words in &held {
        for word in words {
            *frequency.entry(word.as_str()).or_default() += 1;
        }
    }
    let count = chunks.len() as f64;
    let mut scored: Vec<(f64, usize)> = held
        .iter()
        .enumerate()
        .map(|(index, words)| {
            let score = words
                .iter()
                .map(|word| (1.0 + count / frequency[word.as_str()] as f64).ln())
                .sum::<f64>();
            (score, index)
        })
        .filter(|(score, _)| *score > 0.0)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut kept: Vec<Chunk> = scored
        .into_iter()
        .take(max)
        .map(|(_, index)| chunks[index])
        .collect();
    if kept.is_empty() {
        kept.push(chunks[0]);
    }
    kept
}

/// `passage` (a whole current document) as its best-matching chunks under `rules`, or unchanged when
/// the document fits one chunk. Each excerpt keeps the passage's source, content fields and authority;
/// only the passage id and the text change.
pub fn excerpt_passages(passage: MemoryPassage, rules: &ExcerptRules<'_>) -> Vec<MemoryPassage> {
    let Some(excerpts) = excerpt_texts(&passage.content.text, rules) else {
        return vec![passage];
    };
    excerpts
        .into_iter()
        .map(|CitedText { passage_id, text }| {
            let mut excerpt = passage.clone();
            excerpt.passage_id = passage_id;
            excerpt.content.text = text;
            excerpt
        })
        .collect()
}

/// The best-matching chunks of `text` under `rules`, each with its chunk passage id, or `None` when
/// the text fits one chunk (it is cited whole).
pub fn excerpt_texts(text: &str, rules: &ExcerptRules<'_>) -> Option<Vec<CitedText>> {
    let chunks = matching_chunks(text, rules.query, rules.chunking, MAX_EXCERPTS_PER_DOCUMENT);
    if chunks.is_empty() {
        return None;
    }
    let mut excerpts = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        // Never fails (the id is short ASCII); the whole document is the safe answer.
        let passage_id = chunk_passage_id(rules.profile, chunk.ordinal).ok()?;
        excerpts.push(CitedText {
            passage_id,
            text: chunk.text(text).to_owned(),
        });
    }
    Some(excerpts)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const CHUNKING: ChunkingConfig = ChunkingConfig {
        max_chunk_bytes: 64,
    };

    fn long_text() -> String {
        [
            "The team met on Monday to plan the quarter and the budget.",
            "Nothing was said about travel or about any holidays at all.",
            "Later the user said her favourite tea is a smoky lapsang souchong.",
            "The meeting closed with the budget agreed and the plan shared.",
        ]
        .join(" ")
    }

    #[test]
    fn a_short_document_is_cited_whole() {
        assert!(matching_chunks("Short text.", "text", CHUNKING, 2).is_empty());
    }

    #[test]
    fn the_chunk_holding_the_rare_query_word_comes_first() {
        let text = long_text();
        let chunks = matching_chunks(&text, "what tea does the user like", CHUNKING, 2);
        assert!(!chunks.is_empty());
        assert!(
            chunks[0].text(&text).contains("lapsang"),
            "{:?}",
            chunks[0].text(&text)
        );
    }

    #[test]
    fn folding_meets_inflected_forms() {
        let text = long_text();
        let chunks = matching_chunks(&text, "favourites", CHUNKING, 1);
        assert!(chunks[0].text(&text).contains("favourite"));
    }

    #[test]
    fn without_a_matching_word_the_first_chunk_stands_for_the_document() {
        let text = long_text();
        let chunks = matching_chunks(&text, "zebra", CHUNKING, 2);
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].ordinal, 0);
    }

    proptest! {
        #[test]
        fn excerpts_are_distinct_exact_chunks_within_the_limit(
            text in "[a-e ]{0,400}",
            query in "[a-e ]{0,30}",
            max in 0usize..4,
        ) {
            let chunks = matching_chunks(&text, &query, CHUNKING, max);
            prop_assert!(chunks.len() <= max);
            if text.len() > CHUNKING.max_chunk_bytes && max > 0 {
                prop_assert!(!chunks.is_empty());
            }
            let all = chunk_text(&text, CHUNKING);
            let mut seen = HashSet::new();
            for chunk in &chunks {
                prop_assert!(seen.insert(chunk.ordinal));
                prop_assert_eq!(all[chunk.ordinal as usize], *chunk);
            }
        }
    }
}
