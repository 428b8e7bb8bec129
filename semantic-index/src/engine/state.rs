//! The index's in-memory state: source records, the exact index, and the HNSW graph's slot.

use std::collections::HashMap;

use memory_core::vectors::SourceGeneration;
use memory_core::{MemoryKey, Revision};

use super::{GraphOrigin, HnswStatus};
use crate::error::SemanticError;
use crate::index::table::RowVector;
use crate::index::{ChunkMeta, ExactIndex, HnswIndex, IndexBounds, VectorIndex};

#[derive(Debug, Clone)]
pub(super) struct SourceRecord {
    pub(super) generation: SourceGeneration,
    /// `None` once withdrawn.
    pub(super) revision: Option<Revision>,
}

pub(super) struct IndexState {
    pub(super) sources: HashMap<MemoryKey, SourceRecord>,
    pub(super) identity_bytes: usize,
    pub(super) exact: ExactIndex,
    pub(super) graph: GraphSlot,
}

pub(super) fn identity_bytes(key: &MemoryKey) -> usize {
    key.namespace.as_str().len() + key.id.as_str().len()
}

/// A change made while a build runs, replayed onto the new graph before it answers.
pub(super) enum HnswChange {
    Replace(MemoryKey, Vec<(ChunkMeta, RowVector)>),
    Remove(MemoryKey),
}

/// Whether a graph build is under way.
pub(super) enum Build {
    Idle,
    /// A build thread was started and has not taken its snapshot yet: changes go to the exact index
    /// (and the current graph), and the snapshot will copy them.
    Starting,
    /// A build from a snapshot of the exact index is running; `changes` made since the snapshot are
    /// replayed onto the new graph, in order, before it replaces the current one.
    Running {
        changes: Vec<HnswChange>,
    },
}

/// The HNSW graph that answers (if any) and the build that will replace it (if any). A graph being
/// rebuilt keeps answering, with every change applied to it, until its replacement is installed: no
/// query waits for a build.
pub(super) struct GraphSlot {
    current: Option<Box<HnswIndex>>,
    origin: Option<GraphOrigin>,
    pub(super) build: Build,
    /// The last build failed (and nothing has answered since).
    failed: bool,
    /// Bumped by every change to the graph that answers, and by every new graph.
    version: u64,
    /// The `version` last persisted or loaded from the store.
    saved: Option<u64>,
}

impl GraphSlot {
    pub(super) fn empty() -> Self {
        Self {
            current: None,
            origin: None,
            build: Build::Idle,
            failed: false,
            version: 0,
            saved: None,
        }
    }

    /// A slot answering with `graph` from the start.
    pub(super) fn with(graph: HnswIndex, origin: GraphOrigin, bounds: IndexBounds) -> Self {
        let mut slot = Self::empty();
        slot.install(graph, origin, bounds);
        if origin == GraphOrigin::LoadedFromStore {
            slot.saved = Some(slot.version);
        }
        slot
    }

    pub(super) fn current(&self) -> Option<&HnswIndex> {
        self.current.as_deref()
    }

    pub(super) fn origin(&self) -> Option<GraphOrigin> {
        self.origin
    }

    pub(super) fn version(&self) -> u64 {
        self.version
    }

    pub(super) fn is_dirty(&self) -> bool {
        self.current.is_some() && self.saved != Some(self.version)
    }

    pub(super) fn mark_saved(&mut self, version: u64) {
        if self.version == version {
            self.saved = Some(version);
        }
    }

    pub(super) fn rebuilding(&self) -> bool {
        self.current.is_some() && !matches!(self.build, Build::Idle)
    }

    pub(super) fn status(&self) -> HnswStatus {
        match (&self.current, &self.build, self.failed) {
            (Some(_), _, _) => HnswStatus::Ready,
            (None, Build::Starting | Build::Running { .. }, _) => HnswStatus::Building,
            (None, Build::Idle, true) => HnswStatus::Failed,
            (None, Build::Idle, false) => HnswStatus::NotStarted,
        }
    }

    /// Whether a build should start now: none runs, and there is no graph or it needs one.
    pub(super) fn wants_build(&self) -> bool {
        matches!(self.build, Build::Idle) && self.current.as_ref().is_none_or(|c| c.needs_rebuild())
    }

    fn wants_rebuild(&self) -> bool {
        matches!(self.build, Build::Idle)
            && self.current.as_ref().is_some_and(|c| c.needs_rebuild())
    }

    /// Applies a source's replacement to the answering graph and logs it for a running build.
    /// `true` when the graph now wants a background rebuild.
    pub(super) fn replace_source(
        &mut self,
        key: &MemoryKey,
        rows: Vec<(ChunkMeta, RowVector)>,
    ) -> Result<bool, SemanticError> {
        let logged = if let Build::Running { changes } = &mut self.build {
            Some(changes)
        } else {
            None
        };
        match (&mut self.current, logged) {
            (Some(current), Some(changes)) => {
                current.replace_shared(key, rows.clone())?;
                changes.push(HnswChange::Replace(key.clone(), rows));
                self.version += 1;
            }
            (Some(current), None) => {
                current.replace_shared(key, rows)?;
                self.version += 1;
            }
            (None, Some(changes)) => changes.push(HnswChange::Replace(key.clone(), rows)),
            // The next snapshot copies the exact index, which holds the change.
            (None, None) => {}
        }
        Ok(self.wants_rebuild())
    }

    /// Removes a source from the answering graph and logs it for a running build. `true` when the
    /// graph now wants a background rebuild.
    pub(super) fn remove_source(&mut self, key: &MemoryKey) -> bool {
        if let Some(current) = &mut self.current {
            current.remove_source(key);
            self.version += 1;
        }
        if let Build::Running { changes } = &mut self.build {
            changes.push(HnswChange::Remove(key.clone()));
        }
        self.wants_rebuild()
    }

    /// Installs a graph built from a snapshot: replays the changes logged since, then answers with it.
    /// Anything but a running build (the slot was reset meanwhile) keeps its graph.
    pub(super) fn install_built(
        &mut self,
        mut index: HnswIndex,
        bounds: IndexBounds,
    ) -> Result<(), SemanticError> {
        let Build::Running { changes } = &mut self.build else {
            return Ok(());
        };
        for change in std::mem::take(changes) {
            match change {
                HnswChange::Replace(key, rows) => index.replace_shared(&key, rows)?,
                HnswChange::Remove(key) => index.remove_source(&key),
            }
        }
        self.install(index, GraphOrigin::Built, bounds);
        Ok(())
    }

    fn install(&mut self, mut index: HnswIndex, origin: GraphOrigin, bounds: IndexBounds) {
        index.defer_rebuilds(bounds);
        self.current = Some(Box::new(index));
        self.origin = Some(origin);
        self.build = Build::Idle;
        self.failed = false;
        self.version += 1;
    }

    /// Ends a build that failed: the current graph (if any) keeps answering.
    pub(super) fn build_failed(&mut self) {
        self.build = Build::Idle;
        self.failed = self.current.is_none();
    }

    /// Ends a build that stopped without a graph (cancelled).
    pub(super) fn build_abandoned(&mut self) {
        self.build = Build::Idle;
    }
}
