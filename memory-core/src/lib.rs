//! The agent memory model.
//!
//! - [`namespace`]: namespace definitions and canonical addresses (SPEC §2.1).
//! - [`document`], [`ids`], [`write`](mod@write): documents, revisioned idempotent writes and receipts (SPEC §2.2).
//! - [`ports`]: the reader and writer traits every store implements, and the injectable clock.
//! - [`recall`](mod@recall), [`revalidate`](mod@revalidate), [`tokens`]: transient-context recall under hard limits, revalidation
//!   against the authoritative store, and token counting (SPEC §2.3, §2.4).
//! - [`query`]: query text into the words a lexical search looks for (the one parser).
//! - [`revisions`]: a document's history (every revision's words, up to a bound) and when they go.
//! - [`listing`]: the listing read (a namespace's documents, newest first, in pages).
//! - [`storage`]: what every store backend shares below the ports (limits, row codecs, reports).
//! - [`in_memory`]: a store for tests and examples.
//!
//! This crate does no I/O of its own and names no concrete store or model. The contract suite every
//! store must pass, with its reference implementations and test builders, lives in the `memory-testkit`
//! crate (a dev-dependency only).

pub mod activity;
pub mod blocking;
pub mod canonical;
pub mod document;
pub mod error;
pub mod ids;
pub mod in_memory;
pub mod listing;
pub mod namespace;
pub mod ports;
pub mod query;
pub mod recall;
pub mod revalidate;
pub mod revisions;
pub mod storage;
pub mod tokens;
pub mod vectors;
pub mod write;

pub use document::{
    EpochMillis, MemoryAccess, MemoryAttribution, MemoryContent, MemoryDocument, MemoryKey,
    MemoryScope, Withdrawal,
};
pub use error::{AddressError, ErrorKind, MemoryError, StoreFault};
pub use ids::{DocumentId, OperationId, Revision};
pub use in_memory::InMemoryStore;
pub use listing::{ListCursor, ListPage, MAX_LIST_LIMIT, MemoryLister};
pub use namespace::{DynamicNamespace, Namespace, NamespaceAddress, NamespaceDefinition};
pub use ports::{
    Change, ChangeFeed, ChangeSequence, Clock, LexicalHit, LexicalSearch, ManualClock,
    MemoryReader, MemoryWriter, RevisionHistory, SystemClock, WrittenNeighbours,
};
pub use recall::corrections::CorrectionIndex;
pub use recall::{
    MemoryLookup, MemoryPassage, RecallError, RecallLimits, RecallSource, RecalledMemory, recall,
};
pub use revalidate::{RecallCandidate, RevalidationLimits, revalidate, revalidate_each};
pub use revisions::{RevisionRetention, StoredRevision, WordsToDrop};
pub use tokens::{ApproximateTokenCounter, TokenCounter};
pub use write::{
    CommandDigest, MemoryReceipt, MemoryWrite, PreparedWrite, WriteKind, WriteOutcome, WritePlan,
};
