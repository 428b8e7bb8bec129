//! Where each source's rows lie, grouped by namespace: one map per namespace from a document id to
//! its span of rows, and the namespace's live row count.
//!
//! Grouping by namespace serves both lookups a table makes. A namespace-filtered search walks its
//! namespace's spans and visits no other source; a replacement finds a source's span through its
//! namespace, then its id. One entry per source (a shared pointer and two `u32`s) is the whole
//! per-source cost, which matters at a million one-chunk sources: a separate key-to-span map beside
//! a per-namespace set cost about 60 bytes a source. Each namespace's map sits behind a reference
//! count, so a copy of a table shares it until either side changes that namespace. Row numbers
//! fit a `u32` because a table holds at most [`crate::index::MAX_INDEX_FLOATS_CEILING`] floats
//! (times the deferred headroom), far below `u32::MAX` rows.
//!
//! Sources also share their namespace's address text ([`SourceRows::insert`] interns it): a store
//! load or a refresh gives every source its own copy, which at a million sources is one allocation
//! each.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use memory_core::{DocumentId, MemoryKey, NamespaceAddress};

use crate::index::SourceVersion;

/// A source's rows: `first..first + count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RowSpan {
    first: u32,
    count: u32,
}

impl RowSpan {
    /// Rows `first..first + count`; both below `u32::MAX` (module docs).
    pub(super) fn new(first: usize, count: usize) -> Self {
        let narrow = |value: usize| u32::try_from(value).unwrap_or(u32::MAX);
        Self {
            first: narrow(first),
            count: narrow(count),
        }
    }

    pub(super) fn count(self) -> usize {
        self.count as usize
    }

    pub(super) fn rows(self) -> std::ops::Range<usize> {
        self.first as usize..self.first as usize + self.count as usize
    }
}

/// A source within its namespace, held through the rows' shared [`SourceVersion`] (no copy of the
/// id); hashes and compares as the document id, so lookups take a `&DocumentId`.
#[derive(Debug, Clone)]
struct SourceId(Arc<SourceVersion>);

impl PartialEq for SourceId {
    fn eq(&self, other: &Self) -> bool {
        self.0.key.id == other.0.key.id
    }
}

impl Eq for SourceId {}

impl Hash for SourceId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.key.id.hash(state);
    }
}

impl Borrow<DocumentId> for SourceId {
    fn borrow(&self) -> &DocumentId {
        &self.0.key.id
    }
}

/// A namespace's live rows: how many, and each source's span.
#[derive(Debug, Clone, Default)]
struct NamespaceRows {
    live: usize,
    sources: HashMap<SourceId, RowSpan>,
}

/// Every live source's span, by namespace. Each namespace's map is shared between copies of a
/// table (the HNSW graph's table is a copy of the exact index's) until one of them changes it,
/// which copies that namespace's map only.
#[derive(Debug, Clone, Default)]
pub(super) struct SourceRows {
    namespaces: HashMap<NamespaceAddress, Arc<NamespaceRows>>,
}

impl SourceRows {
    /// `key`'s span, if it has live rows.
    pub(super) fn span(&self, key: &MemoryKey) -> Option<RowSpan> {
        self.namespaces
            .get(&key.namespace)?
            .sources
            .get(&key.id)
            .copied()
    }

    /// Live rows of `namespace`.
    pub(super) fn live_in(&self, namespace: &NamespaceAddress) -> usize {
        self.namespaces.get(namespace).map_or(0, |rows| rows.live)
    }

    /// The spans of `namespace`'s sources, in no particular order.
    pub(super) fn spans_in<'s>(
        &'s self,
        namespace: &NamespaceAddress,
    ) -> impl Iterator<Item = RowSpan> + 's {
        self.namespaces
            .get(namespace)
            .into_iter()
            .flat_map(|rows| rows.sources.values().copied())
    }

    /// Records `source`'s live rows. Returns the source as the caller should hold it in its rows,
    /// with its namespace's address shared with the sources already there (the same `Arc` when it
    /// already is, or when the namespace is new), and the span it replaced (the caller removes a
    /// source's old rows first, so that is `None` except for a source listed twice).
    pub(super) fn insert(
        &mut self,
        source: &Arc<SourceVersion>,
        span: RowSpan,
    ) -> (Arc<SourceVersion>, Option<RowSpan>) {
        let namespace = &source.key.namespace;
        // A clone of an address is a reference count, so the entry costs no copy of the text.
        let (held, rows) = match self.namespaces.entry(namespace.clone()) {
            Entry::Occupied(entry) => (Some(entry.key().clone()), entry.into_mut()),
            Entry::Vacant(entry) => (None, entry.insert(Arc::default())),
        };
        let source = match held {
            Some(held) if !held.shares_text_with(namespace) => {
                let mut interned = SourceVersion::clone(source);
                interned.key.namespace = held;
                Arc::new(interned)
            }
            _ => Arc::clone(source),
        };
        let rows = Arc::make_mut(rows);
        let replaced = rows.sources.insert(SourceId(Arc::clone(&source)), span);
        rows.live = rows.live + span.count() - replaced.map_or(0, RowSpan::count);
        (source, replaced)
    }

    /// Forgets `key`'s rows, returning their span.
    pub(super) fn remove(&mut self, key: &MemoryKey) -> Option<RowSpan> {
        let shared = self.namespaces.get_mut(&key.namespace)?;
        if !shared.sources.contains_key(&key.id) {
            return None;
        }
        let entry = Arc::make_mut(shared);
        let span = entry.sources.remove(&key.id)?;
        entry.live = entry.live.saturating_sub(span.count());
        if entry.sources.is_empty() {
            self.namespaces.remove(&key.namespace);
        }
        Some(span)
    }

    pub(super) fn clear(&mut self) {
        self.namespaces.clear();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::index::test_support::{key, meta};

    fn other(id: &str) -> Arc<SourceVersion> {
        let mut source = SourceVersion::clone(&meta(id, 0).source);
        source.key.namespace = NamespaceAddress::parse(r#"[1,"other",1,{"user":"u"}]"#).unwrap();
        Arc::new(source)
    }

    #[test]
    fn a_copy_shares_each_namespace_until_one_side_changes_it() {
        let mut rows = SourceRows::default();
        rows.insert(&meta("a", 0).source, RowSpan::new(0, 2));
        rows.insert(&other("b"), RowSpan::new(2, 1));
        let mut copy = rows.clone();
        let shared = |left: &SourceRows, right: &SourceRows, namespace: &NamespaceAddress| {
            Arc::ptr_eq(&left.namespaces[namespace], &right.namespaces[namespace])
        };
        let (notes, elsewhere) = (key("a").namespace, other("b").key.namespace.clone());
        assert!(shared(&rows, &copy, &notes) && shared(&rows, &copy, &elsewhere));

        copy.insert(&meta("c", 0).source, RowSpan::new(3, 4));
        assert!(
            !shared(&rows, &copy, &notes),
            "the changed namespace is copied"
        );
        assert!(shared(&rows, &copy, &elsewhere), "the other stays shared");
        assert_eq!((rows.live_in(&notes), copy.live_in(&notes)), (2, 6));
        assert_eq!(rows.span(&key("c")), None);

        assert_eq!(copy.remove(&other("missing").key), None);
        assert!(shared(&rows, &copy, &elsewhere), "a miss copies nothing");
        assert_eq!(copy.remove(&other("b").key), Some(RowSpan::new(2, 1)));
        assert_eq!(copy.live_in(&elsewhere), 0);
        assert_eq!(rows.span(&other("b").key), Some(RowSpan::new(2, 1)));
    }
}
