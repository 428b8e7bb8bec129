//! A growable buffer of plain values whose large allocations ask the kernel for transparent huge
//! pages: the storage of a table's f32 vector segments and of the HNSW graph's layer-0 lists.
//!
//! **Why.** A graph walk reads rows (and their lists) scattered over the whole table: at 200,000
//! rows of 384 f32 components that is 300 MiB, and with 4 KiB pages nearly every row read also
//! misses the processor's translation cache (its second level covers a few MiB), so it waits for a
//! page-table walk before the row itself. Backed by 2 MiB pages the same table needs 150
//! translations instead of 76,800. Linux hands out such pages to a region that asks for them
//! (`madvise(MADV_HUGEPAGE)`) when transparent huge pages are in `madvise` mode, the common
//! default; a plain `Vec` never asks.
//! Measured with `memory-eval bench-hnsw` on 200,000 real-model-derived vectors (2 cores, two
//! rounds taking turns with the build before this module, best of each; 2026-12-06): the walk
//! answered 4,232 queries a second at width 363 against 3,603 (the same rows found: recall@10
//! 0.965 both), 5,492 against 4,999 at 256, and the exact scan 104 against 72; the graph built in
//! 19.3 s against 20.1. Most of it is the vectors': with the segments alone on huge pages the walk
//! gave 4,143 and 5,572. (First, with every allocation of the process on huge pages through glibc's
//! `glibc.malloc.hugetlb=1`, the walk gave 4,299 against 3,565.)
//!
//! **How.** A buffer of at least [`HUGE_PAGE`] bytes lives in an anonymous mapping (`memmap2`, whose
//! mapping and advice calls are safe) of a whole number of huge pages, which Linux places on a huge
//! page boundary; smaller ones are a `Vec`, since a huge page for a few rows would cost 2 MiB of
//! memory for each. Advice the kernel refuses (no transparent huge pages, another system) leaves
//! ordinary pages, and a mapping that fails falls back to a `Vec`: either way the values are the
//! same, only the speed differs. Whole huge pages are the rule, so a buffer's last page may hold up
//! to 2 MiB of room it never fills: a segment of [`super::table::SEGMENT_ROWS`] rows of 384 f32
//! components is exactly three, and a table's last, partly filled segment takes its rows rounded up
//! to the next 2 MiB (a store of a few rows: 2 MiB where a `Vec` took its rows' bytes). With the
//! kernel's default `defrag` setting, a first touch of such a page may wait while the kernel
//! compacts memory for it: once per 2 MiB of rows appended, not per search.

use std::fmt;
use std::marker::PhantomData;

use bytemuck::Pod;
use memmap2::{MmapMut, MmapOptions};

/// The size of a transparent huge page on x86-64 and most aarch64 kernels; a buffer this large or
/// larger is mapped.
pub(crate) const HUGE_PAGE: usize = 2 * 1024 * 1024;

/// A `Vec`-like buffer of `T`, mapped on huge pages when large (module docs).
pub(crate) enum PageVec<T: Pod> {
    Heap(Vec<T>),
    Mapped {
        map: MmapMut,
        len: usize,
        values: PhantomData<T>,
    },
}

impl<T: Pod> PageVec<T> {
    /// An empty buffer with room for `capacity` values.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let bytes = capacity.saturating_mul(std::mem::size_of::<T>());
        if bytes < HUGE_PAGE {
            return Self::Heap(Vec::with_capacity(capacity));
        }
        match map(bytes) {
            Some(map) => Self::Mapped {
                map,
                len: 0,
                values: PhantomData,
            },
            None => Self::Heap(Vec::with_capacity(capacity)),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Heap(values) => values.len(),
            Self::Mapped { len, .. } => *len,
        }
    }

    /// Values it holds without growing.
    pub(crate) fn capacity(&self) -> usize {
        match self {
            Self::Heap(values) => values.capacity(),
            Self::Mapped { map, .. } => map.len() / std::mem::size_of::<T>().max(1),
        }
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Self::Heap(values) => values,
            Self::Mapped { map, len, .. } => {
                bytemuck::cast_slice(&map[..len * std::mem::size_of::<T>()])
            }
        }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Self::Heap(values) => values,
            Self::Mapped { map, len, .. } => {
                bytemuck::cast_slice_mut(&mut map[..*len * std::mem::size_of::<T>()])
            }
        }
    }

    /// Room for at least `additional` more values, growing to exactly that much when short (a
    /// mapped buffer moves to a larger mapping, as a `Vec` reallocates).
    pub(crate) fn reserve_exact(&mut self, additional: usize) {
        let wanted = self.len().saturating_add(additional);
        if wanted <= self.capacity() {
            return;
        }
        match self {
            Self::Heap(values) if wanted.saturating_mul(std::mem::size_of::<T>()) < HUGE_PAGE => {
                values.reserve_exact(additional);
            }
            _ => {
                let mut grown = Self::with_capacity(wanted);
                grown.extend_from_slice(self.as_slice());
                *self = grown;
            }
        }
    }

    /// Room for at least `additional` more values, growing geometrically when short (at least
    /// doubling, so a buffer filled a value at a time is copied a bounded number of times).
    pub(crate) fn reserve(&mut self, additional: usize) {
        let wanted = self.len().saturating_add(additional);
        let capacity = self.capacity();
        if wanted > capacity {
            self.reserve_exact(wanted.max(capacity.saturating_mul(2)) - self.len());
        }
    }

    /// Appends `values`, growing first when they do not fit ([`Self::reserve`]).
    pub(crate) fn extend_from_slice(&mut self, values: &[T]) {
        self.reserve(values.len());
        match self {
            Self::Heap(held) => held.extend_from_slice(values),
            Self::Mapped { map, len, .. } => {
                let size = std::mem::size_of::<T>();
                let at = *len * size;
                map[at..at + std::mem::size_of_val(values)]
                    .copy_from_slice(bytemuck::cast_slice(values));
                *len += values.len();
            }
        }
    }

    /// Appends every value of `values`, a block at a time.
    pub(crate) fn extend(&mut self, values: impl IntoIterator<Item = T>) {
        const BLOCK: usize = 256;
        let mut block = [T::zeroed(); BLOCK];
        let mut held = 0;
        for value in values {
            block[held] = value;
            held += 1;
            if held == BLOCK {
                self.extend_from_slice(&block);
                held = 0;
            }
        }
        self.extend_from_slice(&block[..held]);
    }
}

/// An anonymous mapping of `bytes` rounded up to whole huge pages, advised to use them; `None` when
/// the mapping fails. Refused advice is ignored (module docs).
fn map(bytes: usize) -> Option<MmapMut> {
    let length = bytes.checked_next_multiple_of(HUGE_PAGE)?;
    let map = MmapOptions::new().len(length).map_anon().ok()?;
    #[cfg(target_os = "linux")]
    let _refused = map.advise(memmap2::Advice::HugePage);
    Some(map)
}

impl<T: Pod> Clone for PageVec<T> {
    fn clone(&self) -> Self {
        let mut copy = Self::with_capacity(self.capacity());
        copy.extend_from_slice(self.as_slice());
        copy
    }
}

impl<T: Pod> std::ops::Deref for PageVec<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Pod> std::ops::DerefMut for PageVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for PageVec<T> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("PageVec")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("mapped", &matches!(self, Self::Mapped { .. }))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_small_buffer_is_a_vec_and_a_large_one_a_mapping_of_whole_huge_pages() {
        let small = PageVec::<f32>::with_capacity(1_000);
        assert!(matches!(small, PageVec::Heap(_)));
        let large = PageVec::<f32>::with_capacity(HUGE_PAGE / 4 + 1);
        assert!(matches!(large, PageVec::Mapped { .. }));
        assert_eq!(large.capacity(), 2 * HUGE_PAGE / 4);
        assert!(large.is_empty());
    }

    #[test]
    fn values_read_back_through_growth_and_copies_in_both_forms() {
        for capacity in [16, HUGE_PAGE / 4] {
            let mut buffer = PageVec::<f32>::with_capacity(capacity);
            let values: Vec<f32> = (0..capacity + 100).map(|value| value as f32).collect();
            for chunk in values.chunks(7) {
                buffer.extend_from_slice(chunk);
            }
            buffer.extend_from_slice(&[-1.0]);
            buffer.extend((0..300).map(|value| value as f32));
            buffer[0] = 0.5;
            assert_eq!(buffer.len(), values.len() + 301);
            assert_eq!(buffer[0], 0.5);
            assert_eq!(&buffer[1..values.len()], &values[1..]);
            assert_eq!(buffer[values.len()], -1.0);
            assert_eq!(buffer[values.len() + 300], 299.0);
            let copy = buffer.clone();
            assert_eq!(copy.as_slice(), buffer.as_slice());
            assert!(copy.capacity() >= copy.len());
        }
    }

    #[test]
    fn a_vec_that_outgrows_a_huge_page_moves_to_a_mapping() {
        let mut buffer = PageVec::<u8>::with_capacity(8);
        buffer.extend_from_slice(&[7; 8]);
        buffer.reserve_exact(HUGE_PAGE);
        assert!(matches!(buffer, PageVec::Mapped { .. }));
        assert_eq!(buffer.as_slice(), &[7; 8]);
    }
}
