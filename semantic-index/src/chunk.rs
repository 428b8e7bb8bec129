//! Chunking (SPEC §4): whole code points packed greedily up to `max_chunk_bytes`, never dropping a suffix.
//!
//! Each chunk ends at the last sentence boundary inside its window when that boundary lies in the window's
//! second half (so a short first sentence does not produce a tiny chunk), otherwise at the last word
//! boundary inside the window, otherwise at the last code-point boundary. Boundaries come from
//! unicode-segmentation (UAX #29) on the remaining text, so lookahead past the window is honoured. The
//! chunks' byte ranges tile the source exactly.

use memory_core::{MemoryKey, Revision};
use unicode_segmentation::UnicodeSegmentation;

use crate::profile::{ChunkingConfig, MIN_CHUNK_BYTES, ProfileDigest};

/// One chunk: its ordinal and its byte range in the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Position within the source, from 0.
    pub ordinal: u32,
    /// UTF-8 byte offset of the first byte.
    pub start: usize,
    /// UTF-8 byte offset just past the last byte.
    pub end: usize,
}

impl Chunk {
    /// The chunk's text within `source` (empty if the range does not fit it, which only a caller mixing
    /// sources can cause).
    pub fn text<'a>(&self, source: &'a str) -> &'a str {
        source.get(self.start..self.end).unwrap_or("")
    }
}

/// A chunk's identity: the profile it was embedded under, its source, the source revision and ordinal.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkId {
    /// The profile digest.
    pub profile: ProfileDigest,
    /// The source document's key.
    pub source: MemoryKey,
    /// The embedded revision.
    pub revision: Revision,
    /// The chunk's ordinal within that revision.
    pub ordinal: u32,
}

impl ChunkId {
    /// The chunk's passage id in recall (see [`crate::recall::chunk_passage_id`]).
    pub fn passage_id(&self) -> Result<memory_core::recall::PassageId, memory_core::MemoryError> {
        crate::recall::chunk_passage_id(self.profile, self.ordinal)
    }
}

/// The largest index of a code-point boundary that is `<= index` in `text`.
fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    let mut boundary = index;
    while boundary > 0 && !text.is_char_boundary(boundary) {
        boundary -= 1;
    }
    boundary
}

/// The last boundary `b` with `0 < b <= window` among the starts of `segments` (lazy, stops past window).
fn last_boundary_within(starts: impl Iterator<Item = usize>, window: usize) -> Option<usize> {
    let mut best = None;
    for start in starts {
        if start > window {
            break;
        }
        if start > 0 {
            best = Some(start);
        }
    }
    best
}

/// Where the chunk starting at the beginning of `rest` should end (relative to `rest`), given at most
/// `max_bytes` bytes.
fn split_point(rest: &str, max_bytes: usize) -> usize {
    if rest.len() <= max_bytes {
        return rest.len();
    }
    let window = floor_char_boundary(rest, max_bytes);
    // The segment after the window's last boundary begins at that boundary; a boundary equal to `window`
    // itself is allowed because the chunk then ends exactly at the limit.
    if let Some(sentence_end) = last_boundary_within(
        rest.split_sentence_bound_indices().map(|(start, _)| start),
        window,
    ) && sentence_end * 2 >= window
    {
        return sentence_end;
    }
    if let Some(word_end) = last_boundary_within(
        rest.split_word_bound_indices().map(|(start, _)| start),
        window,
    ) {
        return word_end;
    }
    window
}

/// Splits `text` into chunks per `config`. Refuses nothing: `max_chunk_bytes` below
/// [`MIN_CHUNK_BYTES`] is raised to it so every code point fits (profiles are validated earlier anyway).
pub fn chunk_text(text: &str, config: ChunkingConfig) -> Vec<Chunk> {
    let max_bytes = config.max_chunk_bytes.max(MIN_CHUNK_BYTES);
    let mut chunks = Vec::with_capacity(text.len() / max_bytes + 1);
    let mut start = 0;
    while start < text.len() {
        let length = split_point(&text[start..], max_bytes);
        // `split_point` always advances by at least one code point: the window holds one (it is at
        // least 4 bytes) and every boundary considered is positive.
        let end = start + length.max(1);
        let end = if text.is_char_boundary(end) {
            end
        } else {
            floor_char_boundary(text, end)
        };
        chunks.push(Chunk {
            ordinal: u32::try_from(chunks.len()).unwrap_or(u32::MAX),
            start,
            end,
        });
        start = end;
    }
    chunks
}

/// How many chunks `text` would produce, without keeping them.
pub fn count_chunks(text: &str, config: ChunkingConfig) -> usize {
    chunk_text(text, config).len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn config(max_chunk_bytes: usize) -> ChunkingConfig {
        ChunkingConfig { max_chunk_bytes }
    }

    fn texts(text: &str, chunks: &[Chunk]) -> Vec<String> {
        chunks.iter().map(|c| c.text(text).to_owned()).collect()
    }

    #[test]
    fn empty_text_has_no_chunks() {
        assert!(chunk_text("", config(16)).is_empty());
    }

    #[test]
    fn short_text_is_one_chunk() {
        let chunks = chunk_text("hello world", config(64));
        assert_eq!(texts("hello world", &chunks), vec!["hello world"]);
    }

    #[test]
    fn prefers_sentence_boundaries() {
        let text = "The cat sat down. The dog ran off quickly.";
        let chunks = chunk_text(text, config(30));
        assert_eq!(
            texts(text, &chunks),
            vec!["The cat sat down. ", "The dog ran off quickly."]
        );
    }

    #[test]
    fn falls_back_to_word_boundaries() {
        let text = "alpha beta gamma delta epsilon";
        let chunks = chunk_text(text, config(12));
        assert_eq!(
            texts(text, &chunks),
            vec!["alpha beta ", "gamma delta ", "epsilon"]
        );
    }

    #[test]
    fn cuts_long_words_at_code_points() {
        let text = "ééééééé";
        let chunks = chunk_text(text, config(5));
        assert_eq!(texts(text, &chunks), vec!["éé", "éé", "éé", "é"]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn chunks_tile_the_source_within_the_limit(
            text in "(\\PC|[ .!?\\n]){0,300}",
            max in 4usize..80,
        ) {
            let chunks = chunk_text(&text, config(max));
            let mut rebuilt = String::new();
            let mut expected_start = 0;
            for (ordinal, chunk) in chunks.iter().enumerate() {
                prop_assert_eq!(chunk.ordinal as usize, ordinal);
                prop_assert_eq!(chunk.start, expected_start);
                prop_assert!(chunk.end > chunk.start);
                prop_assert!(chunk.end - chunk.start <= max);
                prop_assert!(text.is_char_boundary(chunk.start));
                prop_assert!(text.is_char_boundary(chunk.end));
                rebuilt.push_str(chunk.text(&text));
                expected_start = chunk.end;
            }
            prop_assert_eq!(rebuilt, text);
        }
    }
}
