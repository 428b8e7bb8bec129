//! Revalidation: re-reads recall candidates from the authoritative store right before composition, so
//! deleted, withdrawn, stale or revoked memory never reaches a model (SPEC §2.4).
//!
//! Candidates come from anything that may lag the store: a lexical or vector index, a cache, an earlier
//! receipt. [`revalidate`] trusts only their keys:
//! - every passage's authority becomes the access's namespace, whatever the candidate claimed;
//! - each distinct key is read once, in groups of [`REVALIDATION_READ_BATCH`] keys through
//!   [`MemoryReader::read_many`] ([`read_current`], which also refuses an answer of the wrong length
//!   or for another key as corrupt); keys of another namespace are excluded without a read;
//! - missing documents are excluded as stale, withdrawn and access-revoked ones
//!   ([`MemoryDocument::is_visible_to`]) as unauthorized ([`visible`]);
//! - what a candidate cites of the current text is the mode's own judgement ([`Judge`]): here, for
//!   [`RecallCandidate`]s, a whole-document candidate gets the current text and an excerpt is kept only
//!   if its text occurs in the current text (one that no longer occurs is replaced by the current text
//!   when the candidate's revision is stale or unknown, and excluded when the candidate names the
//!   current revision: the excerpt never belonged to it); semantic-index judges its chunks by the
//!   embedded revision and byte range;
//! - attribution, metadata, times, locator and revision always come from the current document, and the
//!   authority is the access's namespace, whatever the mode judged;
//! - a cited text that is the whole current text has the document id as its passage id, so the same
//!   evidence found lexically and by embedding, or through different chunks of a changed document,
//!   shares one citation;
//! - a passage equal to an earlier one (same document and passage id) is left out: the first,
//!   best-ranked candidate keeps it, and it is counted against the budget once;
//! - the aggregate compact JSON size of the resulting passages is bounded by `max_input_bytes`; going
//!   over fails with [`RecallError::Budget`] before any later group is read;
//! - reader failures keep their type ([`RecallError::Source`]).
//!
//! Every recall mode (direct, lexical, semantic, hybrid) revalidates through [`revalidate_each`]; the
//! modes supply only their candidates' keys and their [`Judge`].

use std::collections::{HashMap, HashSet};

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

/// The text a kept candidate cites of its current document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CitedText {
    /// The excerpt's id within its document; replaced by the document id when `text` is the whole
    /// current text.
    pub passage_id: PassageId,
    /// An excerpt of the current text (or all of it).
    pub text: String,
}

/// A mode's judgement of one candidate against its current, visible document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// The candidate still holds: cite these texts of the current document (in order).
    Cite(Vec<CitedText>),
    /// The candidate no longer describes the current document.
    Stale,
}

/// What a recall mode knows about its own candidates: their keys and how each is judged against the
/// current document. The rest of revalidation is [`revalidate_each`]'s.
pub trait Judge<C> {
    /// The document `candidate` claims to come from.
    fn key<'c>(&self, candidate: &'c C) -> &'c MemoryKey;

    /// What `candidate` cites of `document`, which is current, visible to the caller and has the
    /// candidate's key.
    fn judge(&self, candidate: &C, document: &MemoryDocument) -> Result<Judgement, RecallError>;
}

/// Revalidated passages, in candidate order, and what was left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Revalidated {
    /// Each passage with the index of the candidate it came from.
    pub passages: Vec<(MemoryPassage, usize)>,
    /// Candidates whose document is missing, or that their mode judged stale.
    pub excluded_stale: usize,
    /// Candidates of another namespace, or whose document is withdrawn or hidden from the caller.
    pub excluded_unauthorized: usize,
}

/// A candidate's document as the caller may see it.
#[derive(Debug, Clone, Copy)]
pub enum Current<'d> {
    /// No such document.
    Missing,
    /// Withdrawn, or not visible to the caller.
    Hidden,
    /// Current and visible.
    Visible(&'d MemoryDocument),
}

/// The one rule for whether a read document may reach the caller.
pub fn visible<'d>(document: Option<&'d MemoryDocument>, access: &MemoryAccess) -> Current<'d> {
    match document {
        None => Current::Missing,
        Some(document) if document.is_visible_to(access) => Current::Visible(document),
        Some(_) => Current::Hidden,
    }
}

/// Reads `keys` with one `read_many` call, refusing as corrupt an answer of another length or a
/// document of another key (a store bug must not put one document's text under another's citation).
pub async fn read_current<R: MemoryReader>(
    reader: &R,
    keys: &[MemoryKey],
) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let documents = reader.read_many(keys).await?;
    if documents.len() != keys.len() {
        return Err(MemoryError::Store(StoreFault::Corrupt {
            what: format!(
                "read_many answered {} documents for {} keys",
                documents.len(),
                keys.len()
            ),
        }));
    }
    if keys.iter().zip(&documents).any(|(key, document)| {
        document
            .as_ref()
            .is_some_and(|document| document.key != *key)
    }) {
        return Err(MemoryError::Store(StoreFault::Corrupt {
            what: "read_many answered a document for another key".to_owned(),
        }));
    }
    Ok(documents)
}

/// Revalidates `candidates` (in rank order) for `access` against `reader`, judging each with `judge`;
/// see the module documentation for the rules. Every recall mode calls this.
pub async fn revalidate_each<C, J, R>(
    candidates: &[C],
    judge: &J,
    access: &MemoryAccess,
    reader: &R,
    limits: &RevalidationLimits,
) -> Result<Revalidated, RecallError>
where
    J: Judge<C>,
    R: MemoryReader,
{
    let mut keys: Vec<&MemoryKey> = Vec::new();
    let mut candidates_by_key: HashMap<&MemoryKey, Vec<usize>> = HashMap::new();
    let mut answer = Revalidated::default();
    for (index, candidate) in candidates.iter().enumerate() {
        let key = judge.key(candidate);
        if key.namespace != access.namespace {
            answer.excluded_unauthorized += 1;
            continue;
        }
        candidates_by_key
            .entry(key)
            .or_insert_with(|| {
                keys.push(key);
                Vec::new()
            })
            .push(index);
    }

    let authority = Authority::from(&access.namespace);
    let mut retained: Vec<Vec<MemoryPassage>> = vec![Vec::new(); candidates.len()];
    let mut emitted: HashSet<(&MemoryKey, PassageId)> = HashSet::new();
    let mut retained_bytes = 0u64;
    let mut group: Vec<MemoryKey> = Vec::with_capacity(REVALIDATION_READ_BATCH.min(keys.len()));
    for key_group in keys.chunks(REVALIDATION_READ_BATCH) {
        group.clear();
        group.extend(key_group.iter().map(|key| (*key).clone()));
        let documents = read_current(reader, &group).await?;
        for (key, document) in key_group.iter().zip(&documents) {
            let indexes = candidates_by_key.get(key).map(Vec::as_slice).unwrap_or(&[]);
            let document = match visible(document.as_ref(), access) {
                Current::Visible(document) => document,
                Current::Missing => {
                    answer.excluded_stale += indexes.len();
                    continue;
                }
                Current::Hidden => {
                    answer.excluded_unauthorized += indexes.len();
                    continue;
                }
            };
            for &index in indexes {
                let cited = match judge.judge(&candidates[index], document)? {
                    Judgement::Cite(cited) => cited,
                    Judgement::Stale => {
                        answer.excluded_stale += 1;
                        continue;
                    }
                };
                for CitedText { passage_id, text } in cited {
                    let passage_id = if text == document.content.text {
                        PassageId::from(&document.key.id)
                    } else {
                        passage_id
                    };
                    if !emitted.insert((*key, passage_id.clone())) {
                        continue;
                    }
                    let passage =
                        MemoryPassage::of_current_document(document, passage_id, text, &authority);
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
                    retained[index].push(passage);
                }
            }
        }
    }
    answer.passages = retained
        .into_iter()
        .enumerate()
        .flat_map(|(index, passages)| passages.into_iter().map(move |passage| (passage, index)))
        .collect();
    Ok(answer)
}

/// Revalidates [`RecallCandidate`]s (the direct and lexical modes' candidates) for `access` against
/// `reader`; the surviving passages keep the candidates' order.
pub async fn revalidate<R: MemoryReader>(
    candidates: &[RecallCandidate],
    access: &MemoryAccess,
    reader: &R,
    limits: &RevalidationLimits,
) -> Result<Vec<MemoryPassage>, RecallError> {
    let revalidated = revalidate_each(candidates, &HeldText, access, reader, limits).await?;
    Ok(revalidated
        .passages
        .into_iter()
        .map(|(passage, _)| passage)
        .collect())
}

/// The judgement of a [`RecallCandidate`]: a whole document cites the current text; an excerpt is kept
/// while the current text holds it.
struct HeldText;

impl Judge<RecallCandidate> for HeldText {
    fn key<'c>(&self, candidate: &'c RecallCandidate) -> &'c MemoryKey {
        &candidate.key
    }

    fn judge(
        &self,
        candidate: &RecallCandidate,
        document: &MemoryDocument,
    ) -> Result<Judgement, RecallError> {
        let current_text = &document.content.text;
        let whole = || CitedText {
            passage_id: PassageId::from(&document.key.id),
            text: current_text.clone(),
        };
        let cited = match &candidate.passage {
            CandidatePassage::Document => whole(),
            CandidatePassage::Excerpt {
                passage_id,
                content,
            } => {
                let text = content.text.as_str();
                if text.is_empty() {
                    whole()
                } else if current_text.contains(text) {
                    CitedText {
                        passage_id: passage_id.clone(),
                        text: text.to_owned(),
                    }
                } else if candidate.revision.as_ref() == Some(&document.revision) {
                    return Ok(Judgement::Stale);
                } else {
                    whole()
                }
            }
        };
        Ok(Judgement::Cite(vec![cited]))
    }
}
