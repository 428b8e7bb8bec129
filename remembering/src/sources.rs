//! Source events (SPEC §5): forget, edit, deletion and revocation. Each records durable suppression and
//! admits cleanup in one transaction before it is acknowledged; cleanup later withdraws the source-owned
//! contributions found through the kept source-to-target references.
//!
//! Between acknowledgement and cleanup, a contribution may still be current in the memory store. Reads
//! that must never show a suppressed contribution go through [`SuppressingReader`], which hides any
//! document whose current revision was written for a suppressed source.
//!
//! The types live in [`memory_core::activity::suppression`], so the `memory` command and server hide
//! exactly what this crate hides; they are re-exported here under their long-standing paths.

pub use memory_core::activity::suppression::{
    Acknowledged, SourceEvent, SourceEvents, SuppressingReader, hide_suppressed,
};
