//! Revalidation: re-reads recall candidates from the authoritative store right before composition, so
//! deleted, withdrawn, stale or revoked memory never reaches a model (SPEC §2.4).
//!
//! Candidates come from anything that may lag the store: a lexical or vector index, a cache, an earlier
//! receipt. [`revalidate`] trusts only their keys:
//! - every passage's authority becomes the access's namespace, whatever the candidate claimed;
//! - each distinct key is read once, in groups of [`REVALIDATION_READ_BATCH`] keys through
//!   [`MemoryReader::read_many`]; keys of another namespace are excluded without a read;
//! - missing, withdrawn and access-revoked documents ([`MemoryDocument::is_visible_to`]) are excluded;
//! - attribution, metadata, times, locator and revision always come from the current document;
//! - text: a whole-document candidate gets the current text; an excerpt is kept only if its text occurs
//!   in the current text. An excerpt that no longer occurs is replaced by the current text when the
//!   candidate's revision is stale or unknown, and excluded when the candidate names the current
//!   revision (the excerpt never belonged to it);
//! - the aggregate compact JSON size of the resulting passages is bounded by `max_input_bytes`; going
//!   over fails with [`RecallError::Budget`] before any later group is read;
//! - reader failures keep their type ([`RecallError::Source`]).
//!
//! A passage that carries the whole current text has the document id as its passage id, so index hits
//! for different chunks of one changed document collapse into one citation at recall.

use std::collections::HashMap;

use crate::StoreFault;
use crate::document::{MemoryAccess, MemoryContent, MemoryDocument, MemoryKey};
use crate::error::MemoryError;
use crate::ids::Revision;
use crate::ports::MemoryReader;
use crate::recall::error::RecallError;
use crate::recall::ids::{Authority, PassageId};
use crate::recall::limits::{DEFAULT_MAX_INPUT_BYTES, MAX_MAX_INPUT_BYTES, RecallLimits};
use crate::recall::passage::MemoryPassage;

/// How many distinct keys one `read_many` call asks for. The input budget is checked after each group,
/// so a budget overflow stops reading within one group.
pub const REVALIDATION_READ_BATCH: usize = 32;

/// The limit of one revalidation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevalidationLimits {
    max_input_bytes: u64,
}

impl RevalidationLimits {
    /// Limits with `max_input_bytes` (positive, at most 64 MiB).
    pub fn new(max_input_bytes: u64) -> Result<Self, RecallError> {
        if max_input_bytes == 0 || max_input_bytes > MAX_MAX_INPUT_BYTES {
            return Err(RecallError::InvalidLimits {
                field: "max_input_bytes",
                reason: format!(
                    "must be between 1 and {MAX_MAX_INPUT_BYTES}, got {max_input_bytes}"
                ),
            });
        }
        Ok(Self { max_input_bytes })
    }

    /// Most aggregate UTF-8 JSON bytes of the revalidated passages.
    pub fn max_input_bytes(&self) -> u64 {
        self.max_input_bytes
    }
}

impl Default for RevalidationLimits {
    /// 16 MiB, the recall default.
    fn default() -> Self {
        Self {
            max_input_bytes: DEFAULT_MAX_INPUT_BYTES,
        }
    }
}

impl From<&RecallLimits> for RevalidationLimits {
    fn from(limits: &RecallLimits) -> Self {
        Self {
            max_input_bytes: limits.max_input_bytes(),
        }
    }
}

/// What a candidate points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CandidatePassage {
    /// The whole document.
    Document,
    /// An excerpt, as the index or cache holds it. Only `content.text` is used (to find the excerpt in
    /// the current text); every other field is replaced from the current document.
    Excerpt {
        /// The excerpt's id within its document (for example a chunk id).
        passage_id: PassageId,
        /// The excerpt as held, possibly stale.
        content: MemoryContent,
    },
}

/// A recall candidate: a pointer into the store that revalidation turns into a trustworthy passage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallCandidate {
    /// The document it claims to come from.
    pub key: MemoryKey,
    /// The revision it was taken from, when known.
    pub revision: Option<Revision>,
    /// The whole document or an excerpt.
    pub passage: CandidatePassage,
    /// An authority the candidate claims; always replaced by the access's namespace.
    pub authority: Option<Authority>,
}

impl RecallCandidate {
    /// A candidate for a whole document.
    pub fn document(key: MemoryKey, revision: Option<Revision>) -> Self {
        Self {
            key,
            revision,
            passage: CandidatePassage::Document,
            authority: None,
        }
    }

    /// A candidate for an excerpt of a document.
    pub fn excerpt(
        key: MemoryKey,
        revision: Option<Revision>,
        passage_id: PassageId,
        text: impl Into<String>,
    ) -> Self {
        Self {
            key,
            revision,
            passage: CandidatePassage::Excerpt {
                passage_id,
                content: MemoryContent::text(text),
            },
            authority: None,
        }
    }
}

/// Revalidates `candidates` for `access` against `reader`; the surviving passages keep the candidates'
/// order. See the module documentation for the rules.
pub async fn revalidate<R: MemoryReader>(
    candidates: &[RecallCandidate],
    access: &MemoryAccess,
    reader: &R,
    limits: &RevalidationLimits,
) -> Result<Vec<MemoryPassage>, RecallError> {
    let mut keys: Vec<&MemoryKey> = Vec::new();
    let mut candidates_by_key: HashMap<&MemoryKey, Vec<usize>> = HashMap::new();
    for (index, candidate) in candidates.iter().enumerate() {
        if candidate.key.namespace != access.namespace {
            continue;
        }
        candidates_by_key
            .entry(&candidate.key)
            .or_insert_with(|| {
                keys.push(&candidate.key);
                Vec::new()
            })
            .push(index);
    }

    let authority = Authority::from(&access.namespace);
    let mut retained: Vec<Option<MemoryPassage>> = vec![None; candidates.len()];
    let mut retained_bytes = 0u64;
    let mut group: Vec<MemoryKey> = Vec::with_capacity(REVALIDATION_READ_BATCH.min(keys.len()));
    for key_group in keys.chunks(REVALIDATION_READ_BATCH) {
        group.clear();
        group.extend(key_group.iter().map(|key| (*key).clone()));
        let documents = reader.read_many(&group).await?;
        if documents.len() != group.len() {
            return Err(MemoryError::Store(StoreFault::Corrupt {
                what: format!(
                    "read_many answered {} documents for {} keys",
                    documents.len(),
                    group.len()
                ),
            })
            .into());
        }
        for (key, document) in key_group.iter().zip(documents) {
            let Some(document) = document else { continue };
            if document.key != **key {
                return Err(MemoryError::Store(StoreFault::Corrupt {
                    what: "read_many answered a document for another key".to_owned(),
                })
                .into());
            }
            if !document.is_visible_to(access) {
                continue;
            }
            for &index in candidates_by_key.get(key).map(Vec::as_slice).unwrap_or(&[]) {
                let Some(passage) = current_passage(&candidates[index], &document, &authority)
                else {
                    continue;
                };
                let encoded = passage.encoded_len().map_err(|_| {
                    MemoryError::Store(StoreFault::Corrupt {
                        what: "a stored document cannot be encoded as JSON".to_owned(),
                    })
                })?;
                retained_bytes = retained_bytes.saturating_add(encoded);
                if retained_bytes > limits.max_input_bytes() {
                    return Err(RecallError::Budget {
                        limit: "max_input_bytes",
                        max: limits.max_input_bytes(),
                        actual: retained_bytes,
                    });
                }
                retained[index] = Some(passage);
            }
        }
    }
    Ok(retained.into_iter().flatten().collect())
}

/// The passage a candidate becomes against the current document, or `None` when it is excluded.
fn current_passage(
    candidate: &RecallCandidate,
    document: &MemoryDocument,
    authority: &Authority,
) -> Option<MemoryPassage> {
    let current_text = &document.content.text;
    let excerpt = match &candidate.passage {
        CandidatePassage::Document => None,
        CandidatePassage::Excerpt {
            passage_id,
            content,
        } => Some((passage_id, content.text.as_str())),
    };
    let (passage_id, text) = match excerpt {
        Some((passage_id, text))
            if !text.is_empty() && text != current_text && current_text.contains(text) =>
        {
            (passage_id.clone(), text.to_owned())
        }
        Some((_, text))
            if !text.is_empty()
                && !current_text.contains(text)
                && candidate.revision.as_ref() == Some(&document.revision) =>
        {
            return None;
        }
        _ => (PassageId::from(&document.key.id), current_text.clone()),
    };
    Some(MemoryPassage::of_current_document(
        document, passage_id, text, authority,
    ))
}
