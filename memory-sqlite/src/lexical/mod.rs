//! Lexical search over current, non-withdrawn documents: BM25 over the text and the attributions'
//! speakers, with FTS5's `porter unicode61` tokens, computed from each namespace's own statistics.
//!
//! One module per job: `query` turns query text into words (through memory-core's one parser,
//! which owns the stop words), `rules` say which words count and how hits are ranked, `tables` lays out the index (keyed by namespace),
//! `tokenizer` cuts text into FTS5's tokens, `upkeep` keeps the index in step with each write,
//! `search` scores a query with BM25, and `consistency` checks the index against the documents.
//!
//! The defaults are the ones `memory-eval locomo-tune` chose on LoCoMo's first five conversations (see
//! the eval crate's `locomo` module for each lever's measured effect); `eval/locomo-tuned.json` records
//! the choice and a test checks that these defaults match it.

mod consistency;
mod query;
mod rules;
mod search;
mod tables;
mod tokenizer;
mod upkeep;

pub use memory_core::query::{STOP_WORDS, is_stop_word};
pub use memory_core::storage::{MAX_QUERY_BYTES, MAX_QUERY_TERMS, MAX_SEARCH_HITS};
pub use query::{query_words, query_words_with};
pub use rules::{
    DEFAULT_B, DEFAULT_K1, DEFAULT_SPEAKER_WEIGHT, DEFAULT_STOP_WORDS, DEFAULT_TEXT_WEIGHT, FTS5_B,
    FTS5_K1, LexicalRules, MAX_COLUMN_WEIGHT, MAX_K1,
};

pub(crate) use consistency::check;
pub(crate) use search::search;
pub(crate) use upkeep::{index_document, remove_document};
