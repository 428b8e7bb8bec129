//! Transient references: the memory recalled for one turn, appended after the history, never written
//! into the log or into a summary.
//!
//! A turn is named by its thread and the record of its prompt. The first assembly of a turn loads its
//! references and keeps them here; a retried turn (the same prompt, the same query) gets the same
//! snapshot back, not a fresh recall that could differ, and its history view makes room for them. The
//! cache is bounded (least recently used turns go first) and lives in the process: a retry served by
//! another process recalls again.
//!
//! A snapshot is kept with the store's suppression generation it was loaded under (memory-core's
//! `ThreadSuppressions::generation`: how many suppressions the store holds, which only grows). A retry
//! reading another generation recalls again: a forget anywhere since (a record of this thread, of
//! another thread bound to the same memory, any source) may have hidden a passage the snapshot shows.
//! The generation is read from the shared store on every turn, so this holds whichever process
//! recorded the forget; forgets are rare, so snapshots are still reused between them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memory_core::activity::Sequence;
use memory_core::activity::ThreadId;
use serde::Serialize;

/// Turns whose references a context keeps by default.
pub const DEFAULT_CACHED_TURNS: usize = 4_096;

/// The memory recalled for a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct References {
    /// The turn: the sequence of its prompt record ([`Sequence::ZERO`] for a thread without one).
    pub turn: Sequence,
    /// What was recalled for.
    pub query: String,
    /// The rendered memory block (empty when nothing was recalled).
    pub text: String,
    /// Passages in the block.
    pub passages: u64,
    /// Tokens of the block's message, as the view's counter counts it.
    pub tokens: u64,
    /// The store's suppression generation it was loaded under.
    pub generation: u64,
}

type Key = (ThreadId, Sequence, String);
/// Each turn's references with the tick of their last use, and the clock of ticks.
type Entries = (HashMap<Key, (Arc<References>, u64)>, u64);

/// The references of recent turns.
#[derive(Debug)]
pub struct ReferenceCache {
    max_turns: usize,
    entries: Mutex<Entries>,
}

impl Default for ReferenceCache {
    fn default() -> Self {
        Self::new(DEFAULT_CACHED_TURNS)
    }
}

impl ReferenceCache {
    /// A cache of up to `max_turns` turns (at least one).
    pub fn new(max_turns: usize) -> Self {
        Self {
            max_turns: max_turns.max(1),
            entries: Mutex::new((HashMap::new(), 0)),
        }
    }

    /// The entries, locked, and the tick of this use.
    fn touch(&self) -> (std::sync::MutexGuard<'_, Entries>, u64) {
        let mut guard = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.1 += 1;
        let now = guard.1;
        (guard, now)
    }

    /// The references loaded for a turn under suppression generation `generation`, if any.
    pub fn get(
        &self,
        thread: &ThreadId,
        turn: Sequence,
        query: &str,
        generation: u64,
    ) -> Option<Arc<References>> {
        let (mut guard, now) = self.touch();
        let entries = &mut guard.0;
        let (references, used) = entries.get_mut(&(thread.clone(), turn, query.to_owned()))?;
        if references.generation != generation {
            return None;
        }
        *used = now;
        Some(Arc::clone(references))
    }

    /// Keeps `references` for their turn unless the turn already has some of the same generation, and
    /// answers the ones kept: the first load of a turn wins, so concurrent retries agree; a load under
    /// another generation replaces them.
    pub fn insert(&self, thread: &ThreadId, references: References) -> Arc<References> {
        let (mut guard, now) = self.touch();
        let entries = &mut guard.0;
        let key = (thread.clone(), references.turn, references.query.clone());
        if let Some((kept, used)) = entries.get_mut(&key)
            && kept.generation == references.generation
        {
            *used = now;
            return Arc::clone(kept);
        }
        entries.remove(&key);
        if entries.len() >= self.max_turns
            && let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone())
        {
            entries.remove(&oldest);
        }
        let references = Arc::new(references);
        entries.insert(key, (Arc::clone(&references), now));
        references
    }
}
