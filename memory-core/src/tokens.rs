//! Token counting for recall's `max_tokens` limit.
//!
//! Recall enforces `max_tokens` with whichever [`TokenCounter`] the caller passes, exactly as that counter
//! counts. [`ApproximateTokenCounter`] is the dependency-free default; an exact counter built from a
//! model's `tokenizer.json` lives with the embedding code, which already depends on a tokenizer.

/// Counts the tokens of a text. Object safe, so recall takes `&dyn TokenCounter`.
pub trait TokenCounter: Send + Sync {
    /// The number of tokens `text` encodes to.
    fn count(&self, text: &str) -> usize;

    /// Whether `count(a + b) == count(a) + count(b)` whenever `a` is empty or ends with `'\n'`.
    ///
    /// Recall then counts each rendered passage once instead of recounting the whole text for every
    /// candidate. Return `true` only when the identity really holds: real tokenizers can merge across a
    /// line break, so the default is `false`.
    fn additive_across_lines(&self) -> bool {
        false
    }
}

/// A tokenizer-free estimate that leans high for byte-pair-encoding tokenizers.
///
/// The heuristic, per character class:
/// - a run of ASCII letters and digits counts `ceil(len / 3)` (English words average about four
///   characters per token in common BPE vocabularies, so three leaves headroom);
/// - every other visible ASCII character (punctuation, symbols) counts 1;
/// - ASCII whitespace counts 0 (BPE vocabularies fold it into the next token, and counting it separately
///   would double-count indentation);
/// - every non-ASCII character counts `ceil(utf8_len / 2)`: 1 for Latin accents and Cyrillic, 2 for CJK
///   and emoji, which byte-level vocabularies often split.
///
/// Word runs never cross whitespace, so the count is additive across line breaks
/// ([`TokenCounter::additive_across_lines`] is `true`). It runs in one pass over the bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproximateTokenCounter;

impl TokenCounter for ApproximateTokenCounter {
    fn count(&self, text: &str) -> usize {
        let mut tokens = 0usize;
        let mut word_run = 0usize;
        for character in text.chars() {
            if character.is_ascii_alphanumeric() {
                word_run += 1;
                continue;
            }
            tokens += word_run.div_ceil(3);
            word_run = 0;
            if character.is_ascii_whitespace() {
                continue;
            }
            tokens += if character.is_ascii() {
                1
            } else {
                character.len_utf8().div_ceil(2)
            };
        }
        tokens + word_run.div_ceil(3)
    }

    fn additive_across_lines(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_words_punctuation_and_wide_characters() {
        let counter = ApproximateTokenCounter;
        assert_eq!(counter.count(""), 0);
        assert_eq!(counter.count("   \n\t"), 0);
        assert_eq!(counter.count("abc"), 1);
        assert_eq!(counter.count("abcd"), 2);
        assert_eq!(counter.count("hello, world!"), 2 + 1 + 2 + 1);
        assert_eq!(counter.count("é"), 1);
        assert_eq!(counter.count("日本"), 4);
        assert_eq!(counter.count("🙂"), 2);
    }

    #[test]
    fn is_additive_across_line_breaks() {
        let counter = ApproximateTokenCounter;
        let pieces = ["first line ab\n", "cd second, line\n", "", "tail 🙂 x"];
        let joined: String = pieces.concat();
        let summed: usize = pieces.iter().map(|piece| counter.count(piece)).sum();
        assert_eq!(counter.count(&joined), summed);
    }
}
