//! Corrections: a memory that says, in the speaker's own words, that it corrects an earlier one
//! ("Actually I moved to Madrid, not Lisbon").
//!
//! - **The link is stored on the correction only**, as its metadata member [`CORRECTS`]:
//!   `{"id": <document id>, "revision": <revision>}`, the corrected document and the revision it held
//!   when the correction was linked. Whoever links (the remembering worker's extractor) answers for the
//!   words; this module never guesses a link.
//! - **`corrected_by` is derived at read time**, never stored: a recall asks the store which documents
//!   name a recalled one ([`CorrectionIndex`]), and reads them through the same checked, suppressing
//!   reads as every other candidate. So a correction that is forgotten, withdrawn or outside the
//!   caller's scope neither shows nor moves anything, and forgetting it restores the corrected
//!   memory's standing at once. The link names the corrected document by id: a later revision of it
//!   (another witness's attribution, a person's edit) is still what the correction corrects; the
//!   stored revision is provenance.
//! - **Order** ([`order_by_corrections`]): a correction is cited just ahead of what it corrects, the
//!   newest claim of a chain (A corrected by B corrected by C: C, B, A) first; everything else keeps
//!   its ranking. This is the one place where something moves ahead of a better-scored passage, and
//!   only because of a link; the newer-first rule of near-equal scores ([`super::ties`]) stays
//!   presentation only.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use crate::document::{EpochMillis, MemoryAccess, MemoryContent};
use crate::error::MemoryError;
use crate::ids::{DocumentId, Revision};

/// The metadata member of a correction naming what it corrects.
pub const CORRECTS: &str = "corrects";

/// Most links followed from one recalled memory to the newest claim of its chain: a longer chain is
/// cut there (its older corrections keep their ranking).
pub const MAX_CORRECTION_DEPTH: usize = 8;

/// Most document ids of one [`CorrectionIndex::corrections_of`] call.
pub const MAX_CORRECTION_IDS: usize = 2_048;

/// Most corrections one call answers per corrected document (the newest by write order); more
/// corrections of one memory than this are cut, the newest kept.
pub const MAX_CORRECTIONS_PER_DOCUMENT: usize = 16;

/// What a correction says it corrects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorrectionLink {
    /// The corrected document (in the correction's namespace).
    pub id: DocumentId,
    /// The corrected document's revision when the link was made.
    pub revision: Revision,
}

impl CorrectionLink {
    /// The link `content` carries, if any; a malformed member is no link.
    pub fn of(content: &MemoryContent) -> Option<Self> {
        let member = content.metadata.get(CORRECTS)?;
        Some(Self {
            id: DocumentId::new(member.get("id")?.as_str()?).ok()?,
            revision: Revision::new(member.get("revision")?.as_str()?).ok()?,
        })
    }

    /// The metadata member's value.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "id": self.id.as_str(), "revision": self.revision.as_str() })
    }
}

/// Refuses a [`CorrectionIndex::corrections_of`] call of more than [`MAX_CORRECTION_IDS`] ids before
/// any work; every store calls it first.
pub fn check_correction_request(ids: &[DocumentId]) -> Result<(), MemoryError> {
    if ids.len() > MAX_CORRECTION_IDS {
        return Err(MemoryError::TooLarge {
            limit: "corrections_of ids",
            max: MAX_CORRECTION_IDS as u64,
            actual: ids.len() as u64,
        });
    }
    Ok(())
}

/// The reverse of [`CORRECTS`] links, kept by the store.
pub trait CorrectionIndex: Send + Sync {
    /// For each of `ids` (documents of `access.namespace`), in order, the current, non-withdrawn
    /// documents visible in `access.scope` whose [`CORRECTS`] member names it, newest write first, at
    /// most [`MAX_CORRECTIONS_PER_DOCUMENT`]. More than [`MAX_CORRECTION_IDS`] ids are refused with
    /// `TooLarge` before any work. The answer is a candidate list: the caller revalidates each.
    fn corrections_of(
        &self,
        access: &MemoryAccess,
        ids: &[DocumentId],
    ) -> impl Future<Output = Result<Vec<Vec<DocumentId>>, MemoryError>> + Send;
}

/// One item of a ranked list as [`order_by_corrections`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linked {
    /// The item's document.
    pub document: DocumentId,
    /// What the item's document says it corrects.
    pub corrects: Option<DocumentId>,
    /// When it was said ([`super::ties::activity_time`]).
    pub activity: EpochMillis,
}

/// The order of `items` (ranked best first; several items may share a document, as the excerpts of
/// one long document do) once corrections are placed: the permutation as indexes into `items`, and
/// for each item the document that corrects it, when one of `items` does (the newest of them).
///
/// Each chain of links among `items` is one group, placed where its best-ranked member was; inside
/// it the newest claim comes first: members deeper in the chain (further from the memory the chain
/// started with) before shallower ones, then newer before older, then by rank. Items in no chain keep
/// their rank. A link to a document not among `items`, to itself, or closing a cycle, places nothing.
pub fn order_by_corrections(items: &[Linked]) -> (Vec<usize>, Vec<Option<DocumentId>>) {
    let mut first_rank: HashMap<&DocumentId, usize> = HashMap::new();
    let mut newest: HashMap<&DocumentId, EpochMillis> = HashMap::new();
    let mut corrects: HashMap<&DocumentId, &DocumentId> = HashMap::new();
    for (rank, item) in items.iter().enumerate() {
        first_rank.entry(&item.document).or_insert(rank);
        let time = newest.entry(&item.document).or_insert(item.activity);
        *time = (*time).max(item.activity);
        if let Some(target) = &item.corrects {
            corrects.entry(&item.document).or_insert(target);
        }
    }
    // Only links between present, distinct documents count.
    corrects.retain(|document, target| *document != *target && first_rank.contains_key(*target));
    // The root of each document's chain and its depth below it; a cycle stops where it closes.
    let walk = |start: &DocumentId| -> (DocumentId, usize) {
        let mut seen: HashSet<&DocumentId> = HashSet::new();
        let mut current = start;
        let mut depth = 0;
        seen.insert(current);
        while let Some(next) = corrects.get(current) {
            if depth == MAX_CORRECTION_DEPTH || !seen.insert(next) {
                break;
            }
            current = next;
            depth += 1;
        }
        (current.clone(), depth)
    };
    let placed: Vec<(DocumentId, usize)> = items.iter().map(|item| walk(&item.document)).collect();
    let mut group_rank: HashMap<&DocumentId, usize> = HashMap::new();
    for (rank, (root, _)) in placed.iter().enumerate() {
        let best = group_rank.entry(root).or_insert(rank);
        *best = (*best).min(rank);
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&index| {
        let (root, depth) = &placed[index];
        let document = &items[index].document;
        (
            group_rank[root],
            std::cmp::Reverse(*depth),
            std::cmp::Reverse(newest[document]),
            first_rank[document],
            index,
        )
    });
    // Who corrects each document: the newest (then best-ranked) of its present correctors.
    let mut corrector: HashMap<&DocumentId, (&DocumentId, EpochMillis, usize)> = HashMap::new();
    for (document, target) in &corrects {
        let candidate = (*document, newest[document], first_rank[document]);
        corrector
            .entry(target)
            .and_modify(|held| {
                if (candidate.1, std::cmp::Reverse(candidate.2))
                    > (held.1, std::cmp::Reverse(held.2))
                {
                    *held = candidate;
                }
            })
            .or_insert(candidate);
    }
    let corrected_by = items
        .iter()
        .map(|item| {
            corrector
                .get(&item.document)
                .map(|(document, _, _)| (*document).clone())
        })
        .collect();
    (order, corrected_by)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn id(name: &str) -> DocumentId {
        DocumentId::new(name).unwrap()
    }

    fn item(document: &str, corrects: Option<&str>, activity: EpochMillis) -> Linked {
        Linked {
            document: id(document),
            corrects: corrects.map(id),
            activity,
        }
    }

    fn names(items: &[Linked]) -> (Vec<&str>, Vec<Option<String>>) {
        let (order, corrected_by) = order_by_corrections(items);
        (
            order
                .iter()
                .map(|&index| items[index].document.as_str())
                .collect(),
            order
                .iter()
                .map(|&index| {
                    corrected_by[index]
                        .as_ref()
                        .map(|id| id.as_str().to_owned())
                })
                .collect(),
        )
    }

    #[test]
    fn a_correction_moves_ahead_of_what_it_corrects_and_nothing_else_moves() {
        let items = [
            item("lisbon", None, 1),
            item("tea", None, 5),
            item("madrid", Some("lisbon"), 2),
        ];
        let (order, corrected_by) = names(&items);
        assert_eq!(order, ["madrid", "lisbon", "tea"]);
        assert_eq!(
            corrected_by,
            [None, Some("madrid".to_owned()), None],
            "the corrected memory names its correction"
        );
    }

    #[test]
    fn a_chain_resolves_to_its_newest_claim_and_a_taken_back_correction_wins() {
        let items = [
            item("lisbon", None, 1),
            item("madrid", Some("lisbon"), 2),
            item("lisbon-after-all", Some("madrid"), 3),
        ];
        let (order, corrected_by) = names(&items);
        assert_eq!(order, ["lisbon-after-all", "madrid", "lisbon"]);
        assert_eq!(
            corrected_by,
            [
                None,
                Some("lisbon-after-all".to_owned()),
                Some("madrid".to_owned())
            ]
        );
    }

    #[test]
    fn a_link_to_an_absent_document_a_self_link_and_a_cycle_place_nothing() {
        let absent = [item("a", None, 1), item("b", Some("gone"), 2)];
        assert_eq!(names(&absent).0, ["a", "b"]);
        let own = [item("a", None, 1), item("b", Some("b"), 2)];
        assert_eq!(names(&own).0, ["a", "b"]);
        let cycle = [
            item("a", Some("b"), 1),
            item("x", None, 9),
            item("b", Some("a"), 2),
        ];
        let (mut order, _) = names(&cycle);
        order.sort_unstable();
        assert_eq!(
            order,
            ["a", "b", "x"],
            "a cycle ends its walk; nothing is lost"
        );
    }

    #[test]
    fn excerpts_of_one_document_stay_together_behind_its_correction() {
        let items = [
            item("long", None, 1),
            item("long", None, 1),
            item("fix", Some("long"), 4),
        ];
        assert_eq!(names(&items).0, ["fix", "long", "long"]);
    }

    #[test]
    fn of_two_corrections_the_newer_is_named_and_cited_first() {
        let items = [
            item("a", None, 1),
            item("older-fix", Some("a"), 2),
            item("newer-fix", Some("a"), 3),
        ];
        let (order, corrected_by) = names(&items);
        assert_eq!(order, ["newer-fix", "older-fix", "a"]);
        assert_eq!(corrected_by[2].as_deref(), Some("newer-fix"));
    }

    #[test]
    fn a_link_is_read_from_its_member_and_a_malformed_one_is_none() {
        let mut content = MemoryContent {
            text: "Actually Madrid.".to_owned(),
            attributions: Vec::new(),
            metadata: serde_json::Map::new(),
            recorded_at: 0,
            extracted_at: 0,
        };
        assert_eq!(CorrectionLink::of(&content), None);
        let link = CorrectionLink {
            id: id("s-1"),
            revision: Revision::new("r1").unwrap(),
        };
        content.metadata.insert(CORRECTS.to_owned(), link.to_json());
        assert_eq!(CorrectionLink::of(&content), Some(link));
        content
            .metadata
            .insert(CORRECTS.to_owned(), serde_json::json!({"id": 3}));
        assert_eq!(CorrectionLink::of(&content), None);
    }
}
