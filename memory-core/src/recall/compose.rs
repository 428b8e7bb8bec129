//! Composition: input budget, authority-qualified deduplication and conflict checks, selection under the
//! output limits, and rendering. Pure and synchronous; `recall` runs it once every source has answered.
//!
//! Order of consideration, which makes the result deterministic for equal inputs: every passage of the
//! essential sources (declaration order, then rank), then the optional sources' passages round-robin by
//! rank (every source's first passage, then every second one, ...), so one long answer cannot crowd out
//! the other sources. Each passage is taken greedily if the text with it still fits every limit.
//!
//! An essential source's matching passages must all be cited (directly or through a shared citation);
//! the first one that does not fit fails the recall. A caller that wants "the best that fits" from a
//! source declares it optional.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use crate::recall::error::RecallError;
use crate::recall::ids::{Authority, AuthorityLabel, Citation, SourceId};
use crate::recall::limits::RecallLimits;
use crate::recall::lookup::{
    MemoryLookup, RecalledMemory, RecalledPassage, SourceOutcome, SourceStatus,
};
use crate::recall::passage::MemoryPassage;
use crate::recall::render::{CorrectedBy, RENDERED_CLOSING, RENDERED_PREAMBLE, render_passage};
use crate::tokens::TokenCounter;

/// A declared source, without its (already consumed) lookup.
pub(crate) struct Declaration {
    pub(crate) id: SourceId,
    pub(crate) essential: bool,
}

/// Where a considered passage ended up.
#[derive(Clone, Copy)]
enum Placement {
    /// Cited.
    Cited,
    /// Left out by this limit.
    Omitted(&'static str),
}

#[derive(Clone, Copy)]
struct Seen {
    declaration: usize,
    rank: usize,
    placement: Placement,
}

struct Selected {
    declaration: usize,
    rank: usize,
    authority_label: AuthorityLabel,
    corrected_by: Option<Citation>,
}

/// Known-revision identity: authority, source id, revision, passage id.
type KnownIdentity<'a> = (&'a str, &'a str, &'a str, &'a str);
/// Unknown-revision grouping: authority, source id, passage id; equivalence is decided by content.
type UnknownIdentity<'a> = (&'a str, &'a str, &'a str);

pub(crate) fn compose(
    declarations: &[Declaration],
    lookups: Vec<MemoryLookup>,
    limits: &RecallLimits,
    counter: &dyn TokenCounter,
) -> Result<RecalledMemory, RecallError> {
    let mut outcomes = Vec::with_capacity(declarations.len());
    let mut found: Vec<Vec<MemoryPassage>> = Vec::with_capacity(declarations.len());
    for (declaration, lookup) in declarations.iter().zip(lookups) {
        let (status, passages) = match lookup {
            MemoryLookup::Found { passages } => (SourceStatus::Found, passages),
            MemoryLookup::NoMatch => (SourceStatus::NoMatch, Vec::new()),
            MemoryLookup::Unavailable { reason } if declaration.essential => {
                return Err(RecallError::EssentialUnavailable {
                    source_id: declaration.id.clone(),
                    reason,
                });
            }
            MemoryLookup::Unavailable { reason } => {
                (SourceStatus::Unavailable { reason }, Vec::new())
            }
            MemoryLookup::InsufficientFreshness if declaration.essential => {
                return Err(RecallError::EssentialStale {
                    source_id: declaration.id.clone(),
                });
            }
            MemoryLookup::InsufficientFreshness => {
                (SourceStatus::InsufficientFreshness, Vec::new())
            }
        };
        outcomes.push(SourceOutcome {
            id: declaration.id.clone(),
            essential: declaration.essential,
            status,
            selected: 0,
            deduplicated: 0,
            omitted: 0,
        });
        found.push(passages);
    }

    let order = consideration_order(declarations, &found);
    let (selection, body) = {
        let mut composer = Composer::new(declarations, &found, limits, counter);
        for (declaration, rank) in order {
            composer.consider(declaration, rank, &mut outcomes)?;
        }
        (composer.selected, composer.body)
    };

    let text = if selection.is_empty() {
        String::new()
    } else {
        let mut text =
            String::with_capacity(RENDERED_PREAMBLE.len() + body.len() + RENDERED_CLOSING.len());
        text.push_str(RENDERED_PREAMBLE);
        text.push_str(&body);
        text.push_str(RENDERED_CLOSING);
        text
    };

    let mut slots: Vec<Vec<Option<MemoryPassage>>> = found
        .into_iter()
        .map(|passages| passages.into_iter().map(Some).collect())
        .collect();
    let mut passages = Vec::with_capacity(selection.len());
    for (position, chosen) in selection.into_iter().enumerate() {
        let declared_by = &declarations[chosen.declaration].id;
        let Some(mut passage) = slots[chosen.declaration][chosen.rank].take() else {
            continue;
        };
        if passage.authority.is_none() {
            passage.authority = Some(Authority::from(declared_by));
        }
        passages.push(RecalledPassage {
            citation: Citation::from_position(position),
            authority_label: chosen.authority_label,
            passage,
            declared_by: declared_by.clone(),
            corrected_by: chosen.corrected_by,
        });
    }
    Ok(RecalledMemory {
        text,
        passages,
        outcomes,
    })
}

fn consideration_order(
    declarations: &[Declaration],
    found: &[Vec<MemoryPassage>],
) -> Vec<(usize, usize)> {
    let total = found.iter().map(Vec::len).sum();
    let mut order = Vec::with_capacity(total);
    for (index, declaration) in declarations.iter().enumerate() {
        if declaration.essential {
            order.extend((0..found[index].len()).map(|rank| (index, rank)));
        }
    }
    let deepest = found.iter().map(Vec::len).max().unwrap_or(0);
    for rank in 0..deepest {
        for (index, declaration) in declarations.iter().enumerate() {
            if !declaration.essential && rank < found[index].len() {
                order.push((index, rank));
            }
        }
    }
    order
}

struct Composer<'a> {
    declarations: &'a [Declaration],
    found: &'a [Vec<MemoryPassage>],
    limits: &'a RecallLimits,
    counter: &'a dyn TokenCounter,
    input_bytes: u64,
    known: HashMap<KnownIdentity<'a>, Seen>,
    unknown: HashMap<UnknownIdentity<'a>, Vec<Seen>>,
    cited_sources: HashSet<(&'a str, &'a str)>,
    authority_labels: HashMap<&'a str, AuthorityLabel>,
    selected: Vec<Selected>,
    /// The rendered blocks of the selected passages.
    body: String,
    /// Tokens of preamble + body + closing; kept only for additive counters.
    frame_tokens: Option<usize>,
    block: String,
    scratch: String,
}

impl<'a> Composer<'a> {
    fn new(
        declarations: &'a [Declaration],
        found: &'a [Vec<MemoryPassage>],
        limits: &'a RecallLimits,
        counter: &'a dyn TokenCounter,
    ) -> Self {
        let frame_tokens = counter
            .additive_across_lines()
            .then(|| counter.count(RENDERED_PREAMBLE) + counter.count(RENDERED_CLOSING));
        Self {
            declarations,
            found,
            limits,
            counter,
            input_bytes: 0,
            known: HashMap::new(),
            unknown: HashMap::new(),
            cited_sources: HashSet::new(),
            authority_labels: HashMap::new(),
            selected: Vec::new(),
            body: String::new(),
            frame_tokens,
            block: String::new(),
            scratch: String::new(),
        }
    }

    fn consider(
        &mut self,
        declaration: usize,
        rank: usize,
        outcomes: &mut [SourceOutcome],
    ) -> Result<(), RecallError> {
        let passage: &'a MemoryPassage = &self.found[declaration][rank];
        let declared = &self.declarations[declaration];
        self.charge_input(passage, &declared.id)?;
        let authority: &'a str = passage
            .authority
            .as_ref()
            .map_or(declared.id.as_str(), Authority::as_str);

        if let Some(earlier) = self.find_earlier(declaration, rank, authority)? {
            return match earlier.placement {
                Placement::Cited => {
                    outcomes[declaration].deduplicated += 1;
                    Ok(())
                }
                Placement::Omitted(limit) => self.omit(declaration, limit, outcomes),
            };
        }

        let placement = match self.try_select(declaration, rank, authority) {
            Some(limit) => Placement::Omitted(limit),
            None => Placement::Cited,
        };
        self.remember(declaration, rank, authority, placement);
        match placement {
            Placement::Cited => {
                outcomes[declaration].selected += 1;
                Ok(())
            }
            Placement::Omitted(limit) => self.omit(declaration, limit, outcomes),
        }
    }

    fn charge_input(
        &mut self,
        passage: &MemoryPassage,
        declared: &SourceId,
    ) -> Result<(), RecallError> {
        let encoded = passage
            .encoded_len()
            .map_err(|_| RecallError::UnencodablePassage {
                source_id: declared.clone(),
            })?;
        self.input_bytes = self.input_bytes.saturating_add(encoded);
        if self.input_bytes > self.limits.max_input_bytes() {
            return Err(RecallError::Budget {
                limit: "max_input_bytes",
                max: self.limits.max_input_bytes(),
                actual: self.input_bytes,
            });
        }
        Ok(())
    }

    /// The earlier passage this one duplicates, if any; a conflict when a known revision differs.
    fn find_earlier(
        &self,
        declaration: usize,
        rank: usize,
        authority: &'a str,
    ) -> Result<Option<Seen>, RecallError> {
        let passage = &self.found[declaration][rank];
        match &passage.source.revision {
            Some(revision) => {
                let identity = (
                    authority,
                    passage.source.id.as_str(),
                    revision.as_str(),
                    passage.passage_id.as_str(),
                );
                match self.known.get(&identity) {
                    None => Ok(None),
                    Some(seen) if same_evidence(self.passage(seen), passage) => Ok(Some(*seen)),
                    Some(_) => Err(RecallError::ConflictingPassages {
                        source_id: self.declarations[declaration].id.clone(),
                    }),
                }
            }
            None => {
                let identity = (
                    authority,
                    passage.source.id.as_str(),
                    passage.passage_id.as_str(),
                );
                Ok(self.unknown.get(&identity).and_then(|group| {
                    group
                        .iter()
                        .find(|seen| same_evidence(self.passage(seen), passage))
                        .copied()
                }))
            }
        }
    }

    fn remember(
        &mut self,
        declaration: usize,
        rank: usize,
        authority: &'a str,
        placement: Placement,
    ) {
        let passage: &'a MemoryPassage = &self.found[declaration][rank];
        let seen = Seen {
            declaration,
            rank,
            placement,
        };
        match &passage.source.revision {
            Some(revision) => {
                self.known.insert(
                    (
                        authority,
                        passage.source.id.as_str(),
                        revision.as_str(),
                        passage.passage_id.as_str(),
                    ),
                    seen,
                );
            }
            None => self
                .unknown
                .entry((
                    authority,
                    passage.source.id.as_str(),
                    passage.passage_id.as_str(),
                ))
                .or_default()
                .push(seen),
        }
    }

    fn passage(&self, seen: &Seen) -> &'a MemoryPassage {
        &self.found[seen.declaration][seen.rank]
    }

    /// Selects the passage if the text with it fits every limit; otherwise names the first limit that
    /// refused it.
    fn try_select(
        &mut self,
        declaration: usize,
        rank: usize,
        authority: &'a str,
    ) -> Option<&'static str> {
        let passage: &'a MemoryPassage = &self.found[declaration][rank];
        if self.selected.len() as u64 >= u64::from(self.limits.max_items()) {
            return Some("max_items");
        }
        let source_identity = (authority, passage.source.id.as_str());
        let new_source = !self.cited_sources.contains(&source_identity);
        if new_source && self.cited_sources.len() as u64 >= u64::from(self.limits.max_sources()) {
            return Some("max_sources");
        }
        let next_label = self.authority_labels.len();
        let authority_label = self
            .authority_labels
            .get(authority)
            .copied()
            .unwrap_or_else(|| AuthorityLabel::from_position(next_label));
        let corrected_by = self.corrected_by(passage, authority);
        self.block.clear();
        render_passage(
            &mut self.block,
            Citation::from_position(self.selected.len()),
            authority_label,
            corrected_by,
            &passage.content.attributions,
            &passage.content.text,
        );
        let total_bytes =
            (RENDERED_PREAMBLE.len() + self.body.len() + self.block.len() + RENDERED_CLOSING.len())
                as u64;
        if total_bytes > self.limits.max_bytes() {
            return Some("max_bytes");
        }
        let block_tokens = match self.frame_tokens {
            Some(frame_tokens) => {
                let block_tokens = self.counter.count(&self.block);
                if (frame_tokens + block_tokens) as u64 > self.limits.max_tokens() {
                    return Some("max_tokens");
                }
                block_tokens
            }
            None => {
                self.scratch.clear();
                self.scratch.push_str(RENDERED_PREAMBLE);
                self.scratch.push_str(&self.body);
                self.scratch.push_str(&self.block);
                self.scratch.push_str(RENDERED_CLOSING);
                if self.counter.count(&self.scratch) as u64 > self.limits.max_tokens() {
                    return Some("max_tokens");
                }
                0
            }
        };

        if let Some(frame_tokens) = &mut self.frame_tokens {
            *frame_tokens += block_tokens;
        }
        self.body.push_str(&self.block);
        if new_source {
            self.cited_sources.insert(source_identity);
        }
        if let Entry::Vacant(slot) = self.authority_labels.entry(authority) {
            slot.insert(authority_label);
        }
        self.selected.push(Selected {
            declaration,
            rank,
            authority_label,
            corrected_by: match corrected_by {
                CorrectedBy::Cited(citation) => Some(citation),
                CorrectedBy::No | CorrectedBy::NotCited => None,
            },
        });
        None
    }

    /// Where the passage correcting `passage` (of `authority`) is cited: its sources place a
    /// correction ahead of what it corrects, so it is cited by now unless a limit left it out.
    fn corrected_by(&self, passage: &MemoryPassage, authority: &str) -> CorrectedBy {
        let Some(correction) = &passage.corrected_by else {
            return CorrectedBy::No;
        };
        self.selected
            .iter()
            .position(|selected| {
                let cited = self.passage(&Seen {
                    declaration: selected.declaration,
                    rank: selected.rank,
                    placement: Placement::Cited,
                });
                let cited_authority = cited.authority.as_ref().map_or(
                    self.declarations[selected.declaration].id.as_str(),
                    Authority::as_str,
                );
                cited.source.id == *correction && cited_authority == authority
            })
            .map_or(CorrectedBy::NotCited, |position| {
                CorrectedBy::Cited(Citation::from_position(position))
            })
    }

    fn omit(
        &self,
        declaration: usize,
        limit: &'static str,
        outcomes: &mut [SourceOutcome],
    ) -> Result<(), RecallError> {
        let declared = &self.declarations[declaration];
        if declared.essential {
            return Err(RecallError::EssentialDoesNotFit {
                source_id: declared.id.clone(),
                limit,
            });
        }
        outcomes[declaration].omitted += 1;
        Ok(())
    }
}

/// Equal evidence within one authority: same source reference, passage id and content. JSON metadata
/// compares without regard to object member order (`serde_json::Map` equality is by entries, in both
/// its ordered and insertion-ordered forms) and with regard to array order.
fn same_evidence(first: &MemoryPassage, second: &MemoryPassage) -> bool {
    first.source == second.source
        && first.passage_id == second.passage_id
        && first.content == second.content
}
