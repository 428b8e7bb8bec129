//! The port through which a semantic index persists its chunk vectors and its change-feed position.
//!
//! Vectors are stored by profile digest, source key, revision and chunk ordinal, so a restart rebuilds the
//! in-memory indexes without calling the embedding model again. Rows of one profile are never returned for
//! another: a profile change starts from an empty set and re-indexes from the start of the change feed.

use std::fmt;
use std::future::Future;

use crate::StoreFault;
use crate::document::MemoryKey;
use crate::error::MemoryError;
use crate::ids::Revision;
use crate::ports::ChangeSequence;

/// The sha256 digest of a semantic profile's canonical JSON; any change of any profile field changes it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProfileDigest([u8; 32]);

impl ProfileDigest {
    /// The digest whose 32 bytes are `bytes`.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The digest's 32 bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The digest in lowercase hexadecimal.
    pub fn to_hex(&self) -> String {
        crate::ids::lower_hex(&self.0)
    }
}

impl fmt::Debug for ProfileDigest {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "ProfileDigest({})", self.to_hex())
    }
}

impl fmt::Display for ProfileDigest {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.to_hex())
    }
}

/// The fencing number of a source's indexed state: a refresh or withdrawal carrying an older generation
/// than the one recorded is refused. Indexers use the change sequence of the change that triggered them.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct SourceGeneration(u64);

impl SourceGeneration {
    /// The generation numbered `value`.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The generation's number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl From<ChangeSequence> for SourceGeneration {
    fn from(sequence: ChangeSequence) -> Self {
        Self(sequence.get())
    }
}

/// One stored chunk: where it lies in its source and its normalized vector.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredChunk {
    /// Position of the chunk within its source, from 0.
    pub ordinal: u32,
    /// UTF-8 byte offset where the chunk starts in the source text.
    pub start: u64,
    /// UTF-8 byte offset just past the chunk's end.
    pub end: u64,
    /// sha256 of the chunk's exact text, used to check that the excerpt still occurs.
    pub excerpt_digest: [u8; 32],
    /// The normalized vector, exactly the profile's dimensions long.
    pub vector: Vec<f32>,
}

/// What is recorded for one source.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredSourceState {
    /// The source is indexed at `revision` with these chunks (possibly none, for an empty text).
    Indexed {
        /// The revision that was embedded.
        revision: Revision,
        /// Its chunks in ordinal order.
        chunks: Vec<StoredChunk>,
    },
    /// The source was withdrawn; withdrawal is terminal and no later refresh may replace it.
    Withdrawn,
}

/// One source's stored state under one profile.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSource {
    /// The source document's key.
    pub key: MemoryKey,
    /// The generation that produced this state.
    pub generation: SourceGeneration,
    /// Indexed chunks or a withdrawal tombstone.
    pub state: StoredSourceState,
}

/// Bounds a load must respect; the store never materializes more sources or chunks than they allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VectorLoadLimits {
    /// The exact length every stored vector must have.
    pub dimensions: usize,
    /// Most sources (withdrawal tombstones included).
    pub max_sources: usize,
    /// Most chunks over all sources.
    pub max_chunks: usize,
}

/// One stored chunk named for [`VectorStore::load_chunk_vectors`]: the source, the revision the
/// caller indexed, and the chunk's ordinal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkVectorRef {
    /// The source document's key.
    pub key: MemoryKey,
    /// The revision whose chunk is wanted; a source stored at another revision has no such chunk.
    pub revision: Revision,
    /// The chunk's ordinal within that revision.
    pub ordinal: u32,
}

/// Most chunks one [`VectorStore::load_chunk_vectors`] call may name: a rescoring reads a few
/// hundred, and a bound keeps one call from materializing the store.
pub const MAX_CHUNK_VECTORS_PER_CALL: usize = 65_536;

/// The size rule of [`VectorStore::load_chunk_vectors`], one place for every store: refused with
/// [`MemoryError::TooLarge`] past [`MAX_CHUNK_VECTORS_PER_CALL`] chunks, before anything is read.
pub fn check_chunk_vectors_request(chunks: &[ChunkVectorRef]) -> Result<(), MemoryError> {
    if chunks.len() > MAX_CHUNK_VECTORS_PER_CALL {
        return Err(MemoryError::TooLarge {
            limit: "chunk vectors per call",
            max: MAX_CHUNK_VECTORS_PER_CALL as u64,
            actual: chunks.len() as u64,
        });
    }
    Ok(())
}

/// What [`VectorStore::replace_source`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplaceOutcome {
    /// The stored state is now the given one.
    Replaced,
    /// The stored state fences the given one out and nothing changed: it is withdrawn, of a newer
    /// generation, or of the same generation with another revision.
    Stale {
        /// The stored generation.
        current: SourceGeneration,
        /// Whether the stored state is a withdrawal.
        withdrawn: bool,
    },
}

/// Why a source the index was asked to hold is not searchable (SPEC §7: a refused document is never
/// reported as searchable; it is counted, by reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UnindexedReason {
    /// Its text passes the refresh's `max_source_bytes`.
    TooLarge,
    /// It chunks into more than the refresh's `max_chunks_per_source`.
    TooManyChunks,
    /// The index is full (`max_chunks`, `max_sources` or the source-identity bound); retried when
    /// space frees.
    Capacity,
    /// The index refused it as invalid input (for example an embedding it could not use).
    Invalid,
}

impl UnindexedReason {
    /// Every reason, in a fixed order.
    pub const ALL: [Self; 4] = [
        Self::TooLarge,
        Self::TooManyChunks,
        Self::Capacity,
        Self::Invalid,
    ];

    /// The stable snake_case name stored and reported (`too_large`, `too_many_chunks`, `capacity`,
    /// `invalid`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::TooLarge => "too_large",
            Self::TooManyChunks => "too_many_chunks",
            Self::Capacity => "capacity",
            Self::Invalid => "invalid",
        }
    }

    /// The reason named by [`Self::as_str`]; `None` for any other text (a stored row a newer build
    /// wrote, or a corrupt one).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|reason| reason.as_str() == name)
    }
}

impl fmt::Display for UnindexedReason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// A source recorded as not searchable, with the generation that was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnindexedSource {
    /// The source document's key.
    pub key: MemoryKey,
    /// The generation of the refused refresh (a retry refreshes at this generation).
    pub generation: SourceGeneration,
    /// Why it was refused.
    pub reason: UnindexedReason,
}

/// A persisted approximate-search graph of one profile, tagged with what it was built over.
///
/// The bytes are opaque to the store (the semantic index's own format); the index checks them and
/// `vector_set` against the vectors it loaded before using them, so a store only keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphSnapshot {
    /// The change-feed position the graph's vector set reflects (informational; the vector-set digest
    /// decides freshness).
    pub position: ChangeSequence,
    /// A digest of the chunk set the graph indexes (keys, revisions, ordinals, excerpts).
    pub vector_set: [u8; 32],
    /// How many chunks it indexes.
    pub chunks: u64,
    /// The encoded graph.
    pub bytes: Vec<u8>,
}

/// Receives the vectors of [`VectorStore::load_sources_into`], one chunk at a time, so a caller can
/// put them straight into its own buffers instead of receiving one allocation per chunk.
pub trait VectorSink: Send {
    /// Takes the next chunk's vector (of the load's `dimensions`). An error stops the load.
    fn push_vector(&mut self, vector: &[f32]) -> Result<(), MemoryError>;

    /// Takes the next chunk's vector as stored: little-endian `f32`s (a length that is not a
    /// multiple of 4 is corrupt). The provided implementation decodes and calls
    /// [`Self::push_vector`]; a sink can decode straight into its own buffer instead.
    fn push_le_bytes(&mut self, bytes: &[u8]) -> Result<(), MemoryError> {
        if !bytes.len().is_multiple_of(4) {
            return Err(MemoryError::Store(StoreFault::Corrupt {
                what: "stored vector length is not a multiple of 4".to_owned(),
            }));
        }
        let vector: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|quad| f32::from_le_bytes([quad[0], quad[1], quad[2], quad[3]]))
            .collect();
        self.push_vector(&vector)
    }
}

/// Persistence of chunk vectors and indexer positions, per profile.
pub trait VectorStore: Send + Sync {
    /// Every stored source of `profile`. Fails with [`MemoryError::TooLarge`] when the stored counts
    /// exceed `limits`, before materializing a row past them, and with [`crate::StoreFault::Corrupt`] when
    /// a row is malformed (for example a vector of the wrong length).
    fn load_sources(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
    ) -> impl Future<Output = Result<Vec<StoredSource>, MemoryError>> + Send;

    /// [`Self::load_sources`], except that every chunk's vector goes to `sink` instead of into the
    /// returned chunks (whose `vector`s are left empty): in the order of the returned sources, and of
    /// each source's chunks. Same limits and errors. The provided implementation loads and then hands
    /// the vectors over; a store that reads them one by one can pass each on as it reads it.
    fn load_sources_into(
        &self,
        profile: &ProfileDigest,
        limits: VectorLoadLimits,
        sink: &mut dyn VectorSink,
    ) -> impl Future<Output = Result<Vec<StoredSource>, MemoryError>> + Send {
        async move {
            let mut sources = self.load_sources(profile, limits).await?;
            for source in &mut sources {
                if let StoredSourceState::Indexed { chunks, .. } = &mut source.state {
                    for chunk in chunks {
                        sink.push_vector(&std::mem::take(&mut chunk.vector))?;
                    }
                }
            }
            Ok(sources)
        }
    }

    /// Replaces everything stored for `source.key` under `profile` with `source`, atomically, when the
    /// stored state does not fence it; the check and the write are one atomic step, so two processes
    /// sharing the store cannot interleave a stale write after a newer one. A stored withdrawal fences
    /// everything (a repeated withdrawal answers `Stale` with `withdrawn`: already done); otherwise
    /// an older generation is fenced, and so is the same generation with another revision (a
    /// withdrawal at the same generation is not). A fenced call changes nothing and answers
    /// [`ReplaceOutcome::Stale`]. An admitted call also clears, in the same transaction, any
    /// [`UnindexedSource`] recorded for the key: the source is now indexed (or withdrawn).
    fn replace_source(
        &self,
        profile: &ProfileDigest,
        source: &StoredSource,
    ) -> impl Future<Output = Result<ReplaceOutcome, MemoryError>> + Send;

    /// How many chunks `profile` stores over all its indexed sources: the room a load of them needs
    /// ([`VectorLoadLimits::max_chunks`]), read without loading any.
    fn stored_chunks(
        &self,
        profile: &ProfileDigest,
    ) -> impl Future<Output = Result<u64, MemoryError>> + Send;

    /// The change-feed position up to which `profile`'s index is complete ([`ChangeSequence::ZERO`] if none).
    fn indexed_position(
        &self,
        profile: &ProfileDigest,
    ) -> impl Future<Output = Result<ChangeSequence, MemoryError>> + Send;

    /// Records the position up to which `profile`'s index is complete. Positions never move backwards:
    /// an older position than the stored one is ignored.
    fn set_indexed_position(
        &self,
        profile: &ProfileDigest,
        position: ChangeSequence,
    ) -> impl Future<Output = Result<(), MemoryError>> + Send;

    /// Records that `key` at `generation` could not be indexed, for `reason`, replacing an earlier
    /// record of the key unless that one is of a newer generation. Stores never report such a source
    /// as indexed; [`VectorStore::replace_source`] clears the record once the source is indexed or
    /// withdrawn.
    fn record_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
        reason: UnindexedReason,
    ) -> impl Future<Output = Result<(), MemoryError>> + Send;

    /// Deletes `key`'s unindexed record if it is of `generation` or older: the source was settled
    /// without a vector write (a replay, or a withdrawal already stored).
    fn clear_unindexed(
        &self,
        profile: &ProfileDigest,
        key: &MemoryKey,
        generation: SourceGeneration,
    ) -> impl Future<Output = Result<(), MemoryError>> + Send;

    /// Sources recorded as not searchable for `reason`, in key order after `after` (exclusive; `None`
    /// from the start), at most `limit`: what a retry pages through.
    fn unindexed_sources(
        &self,
        profile: &ProfileDigest,
        reason: UnindexedReason,
        after: Option<&MemoryKey>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<UnindexedSource>, MemoryError>> + Send;

    /// How many sources are recorded as not searchable, per reason (reasons with none are left out).
    fn unindexed_counts(
        &self,
        profile: &ProfileDigest,
    ) -> impl Future<Output = Result<Vec<(UnindexedReason, u64)>, MemoryError>> + Send;

    /// The stored vectors of `chunks` under `profile`, in the order named: `None` for a chunk that
    /// is not stored (its source is withdrawn, unknown, or stored at another revision, or the
    /// revision has no such ordinal). A semantic index holding compact vectors in memory reads its
    /// candidates' exact vectors through this. Refused with [`MemoryError::TooLarge`] past
    /// [`MAX_CHUNK_VECTORS_PER_CALL`] chunks, and with [`crate::StoreFault::Corrupt`] when a stored
    /// vector is not `dimensions` long.
    fn load_chunk_vectors(
        &self,
        profile: &ProfileDigest,
        chunks: &[ChunkVectorRef],
        dimensions: usize,
    ) -> impl Future<Output = Result<Vec<Option<Vec<f32>>>, MemoryError>> + Send;

    /// Stores `graph` as `profile`'s persisted graph, replacing the previous one.
    fn save_graph(
        &self,
        profile: &ProfileDigest,
        graph: &GraphSnapshot,
    ) -> impl Future<Output = Result<(), MemoryError>> + Send;

    /// The persisted graph of `profile`, if any and if it is at most `max_bytes` long (a longer one
    /// is refused with [`MemoryError::TooLarge`] before it is read).
    fn load_graph(
        &self,
        profile: &ProfileDigest,
        max_bytes: usize,
    ) -> impl Future<Output = Result<Option<GraphSnapshot>, MemoryError>> + Send;
}
