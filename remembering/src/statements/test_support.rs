//! Helpers the statement tests share: a text's sentences with their kinds, and its kept sentences.

use super::{DropReason, SentenceKind, segment};

pub(super) fn kinds(text: &str) -> Vec<(String, SentenceKind)> {
    segment(text)
        .iter()
        .map(|sentence| (sentence.text(text).to_owned(), sentence.kind))
        .collect()
}

pub(super) fn kept(text: &str) -> Vec<String> {
    kinds(text)
        .into_iter()
        .filter(|(_, kind)| *kind == SentenceKind::Statement)
        .map(|(text, _)| text)
        .collect()
}

pub(super) fn dropped(reason: DropReason) -> SentenceKind {
    SentenceKind::Dropped(reason)
}
