//! Where each source's rows lie, grouped by namespace: one table per namespace of its sources'
//! spans of rows, and the namespace's live row count.
//!
//! Grouping by namespace serves both lookups a table makes. A namespace-filtered search walks its
//! namespace's spans and visits no other source; a replacement finds a source's span through its
//! namespace, then its id. An entry is only the span (two `u32`s): it is found by the id of the
//! record its first row holds (`hashbrown`'s `HashTable`, hashing and comparing through the
//! table's rows, which every method is handed), so the map holds no key of its own. At a million
//! one-chunk sources in namespaces of a hundred that is about 12 bytes a source; a map keyed by a
//! pointer to the source took about 22, and a separate key-to-span map beside a per-namespace set
//! about 60. Each namespace's table sits behind a reference count, so a copy of a table shares it
//! until either side changes that namespace (a shared table's spans name the same rows in both
//! copies: they share those rows). Row numbers fit a `u32` because a table holds at most
//! [`crate::index::MAX_INDEX_FLOATS_CEILING`] floats (times the deferred headroom), far below
//! `u32::MAX` rows.
//!
//! Sources also share their namespace's address text ([`SourceRows::record`] makes each new
//! source's record with the namespace's held address): a store load or a refresh gives every source
//! its own copy, which at a million sources is one allocation each.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use hashbrown::HashTable;
use memory_core::{MemoryKey, NamespaceAddress};

use super::metas::MetaColumn;
use super::record::SourceRecord;
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

    fn first(self) -> usize {
        self.first as usize
    }

    pub(super) fn count(self) -> usize {
        self.count as usize
    }

    pub(super) fn rows(self) -> std::ops::Range<usize> {
        self.first as usize..self.first as usize + self.count as usize
    }
}

/// A namespace's live rows: how many, and each source's span.
#[derive(Debug, Clone, Default)]
struct NamespaceRows {
    live: usize,
    spans: HashTable<RowSpan>,
}

/// Every live source's span, by namespace. Each namespace's table is shared between copies of a
/// table (the HNSW graph's table is a copy of the exact index's) until one of them changes it,
/// which copies that namespace's table only.
#[derive(Debug, Clone, Default)]
pub(super) struct SourceRows {
    namespaces: HashMap<NamespaceAddress, Arc<NamespaceRows>>,
    /// Hashes document ids; copies keep it, so a shared table's hashes stay valid.
    ids: RandomState,
}

/// The document id of the source whose rows `span` is, read from its first row.
fn id_of<'m>(metas: &'m MetaColumn, span: &RowSpan) -> &'m [u8] {
    metas[span.first()].source.id_bytes()
}

impl SourceRows {
    fn hash(&self, id: &[u8]) -> u64 {
        self.ids.hash_one(id)
    }

    /// `key`'s span, if it has live rows.
    pub(super) fn span(&self, key: &MemoryKey, metas: &MetaColumn) -> Option<RowSpan> {
        let id = key.id.as_str().as_bytes();
        self.namespaces
            .get(&key.namespace)?
            .spans
            .find(self.hash(id), |span| id_of(metas, span) == id)
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
            .flat_map(|rows| rows.spans.iter().copied())
    }

    /// A record of `source` for its rows, holding its namespace's address as the sources already
    /// there hold it (or as given, for a new namespace, which is entered, empty, so the sources
    /// after it share its address).
    pub(super) fn record(&mut self, source: &SourceVersion) -> SourceRecord {
        // A clone of an address is a reference count, so the entry costs no copy of the text.
        let entry = self.namespaces.entry(source.key.namespace.clone());
        let namespace = entry.key().clone();
        entry.or_default();
        SourceRecord::new(source, namespace)
    }

    /// Records `span` as the live rows of the source its first row holds (rows already in
    /// `metas`), returning the span it replaced: `None` unless the source was listed twice (the
    /// caller removes a source's old rows first).
    pub(super) fn insert(&mut self, span: RowSpan, metas: &MetaColumn) -> Option<RowSpan> {
        let record = &metas[span.first()].source;
        let hash = self.hash(record.id_bytes());
        let ids = &self.ids;
        let rows = self
            .namespaces
            .entry(record.namespace().clone())
            .or_default();
        let rows = Arc::make_mut(rows);
        let replaced = match rows
            .spans
            .find_mut(hash, |held| id_of(metas, held) == record.id_bytes())
        {
            Some(held) => Some(std::mem::replace(held, span)),
            None => {
                rows.spans
                    .insert_unique(hash, span, |held| ids.hash_one(id_of(metas, held)));
                None
            }
        };
        rows.live = rows.live + span.count() - replaced.map_or(0, RowSpan::count);
        replaced
    }

    /// Forgets `key`'s rows, returning their span.
    pub(super) fn remove(&mut self, key: &MemoryKey, metas: &MetaColumn) -> Option<RowSpan> {
        let id = key.id.as_str().as_bytes();
        let hash = self.hash(id);
        let shared = self.namespaces.get_mut(&key.namespace)?;
        let is_key = |span: &RowSpan| id_of(metas, span) == id;
        shared.spans.find(hash, is_key)?;
        let rows = Arc::make_mut(shared);
        let (span, _) = rows.spans.find_entry(hash, is_key).ok()?.remove();
        rows.live = rows.live.saturating_sub(span.count());
        if rows.spans.is_empty() {
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
    use crate::index::table::record::RowMeta;
    use crate::index::test_support::{key, meta};

    fn other(id: &str) -> SourceVersion {
        let mut source = SourceVersion::clone(&meta(id, 0).source);
        source.key.namespace = NamespaceAddress::parse(r#"[1,"other",1,{"user":"u"}]"#).unwrap();
        source
    }

    /// Appends `count` rows of `source` to `metas` and records them.
    fn add(rows: &mut SourceRows, metas: &mut MetaColumn, source: &SourceVersion, count: usize) {
        let first = metas.len();
        let record = rows.record(source);
        for ordinal in 0..count {
            metas.push(
                RowMeta::new(&meta("x", ordinal as u32), record.clone()),
                usize::MAX,
            );
        }
        assert_eq!(rows.insert(RowSpan::new(first, count), metas), None);
    }

    #[test]
    fn a_copy_shares_each_namespace_until_one_side_changes_it() {
        let (mut rows, mut metas) = (SourceRows::default(), MetaColumn::default());
        add(&mut rows, &mut metas, &meta("a", 0).source, 2);
        add(&mut rows, &mut metas, &other("b"), 1);
        let (mut copy, mut copied_metas) = (rows.clone(), metas.clone());
        let shared = |left: &SourceRows, right: &SourceRows, namespace: &NamespaceAddress| {
            Arc::ptr_eq(&left.namespaces[namespace], &right.namespaces[namespace])
        };
        let (notes, elsewhere) = (key("a").namespace, other("b").key.namespace.clone());
        assert!(shared(&rows, &copy, &notes) && shared(&rows, &copy, &elsewhere));

        add(&mut copy, &mut copied_metas, &meta("c", 0).source, 4);
        assert!(
            !shared(&rows, &copy, &notes),
            "the changed namespace is copied"
        );
        assert!(shared(&rows, &copy, &elsewhere), "the other stays shared");
        assert_eq!((rows.live_in(&notes), copy.live_in(&notes)), (2, 6));
        assert_eq!(rows.span(&key("c"), &metas), None);
        assert_eq!(
            copy.span(&key("c"), &copied_metas),
            Some(RowSpan::new(3, 4))
        );

        assert_eq!(copy.remove(&other("missing").key, &copied_metas), None);
        assert!(shared(&rows, &copy, &elsewhere), "a miss copies nothing");
        assert_eq!(
            copy.remove(&other("b").key, &copied_metas),
            Some(RowSpan::new(2, 1))
        );
        assert_eq!(copy.live_in(&elsewhere), 0);
        assert_eq!(rows.span(&other("b").key, &metas), Some(RowSpan::new(2, 1)));
    }

    #[test]
    fn a_source_listed_twice_replaces_its_span() {
        let (mut rows, mut metas) = (SourceRows::default(), MetaColumn::default());
        add(&mut rows, &mut metas, &meta("a", 0).source, 2);
        let record = rows.record(&meta("a", 0).source);
        metas.push(RowMeta::new(&meta("a", 0), record), usize::MAX);
        assert_eq!(
            rows.insert(RowSpan::new(2, 1), &metas),
            Some(RowSpan::new(0, 2))
        );
        assert_eq!(rows.span(&key("a"), &metas), Some(RowSpan::new(2, 1)));
        assert_eq!(rows.live_in(&key("a").namespace), 1);
    }

    #[test]
    fn many_sources_survive_the_table_growing() {
        let (mut rows, mut metas) = (SourceRows::default(), MetaColumn::default());
        for id in 0..1_000 {
            add(
                &mut rows,
                &mut metas,
                &meta(&format!("d{id}"), 0).source,
                1 + id % 3,
            );
        }
        let mut first = 0;
        for id in 0..1_000 {
            let span = rows.span(&key(&format!("d{id}")), &metas).unwrap();
            assert_eq!(span, RowSpan::new(first, 1 + id % 3));
            first += span.count();
        }
        assert_eq!(rows.span(&key("d1000"), &metas), None);
    }
}
