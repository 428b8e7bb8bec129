//! The context layer: each turn's model input assembled from a thread's durable log.
//!
//! - [`fold`]: a [`Fold`] declares how each record kind changes a typed state; a [`FoldReader`] folds
//!   only what was appended since its last read, per thread, bounded and single-flight, and can always
//!   rebuild from the log. Records that no longer decode are skipped and counted.
//! - [`conversation`]: the segmented fold the binaries use: prompts, model steps with their tool results,
//!   answers and system instructions as atomic segments, plus the summary a compaction wrote.
//! - [`view`]: a pure function of a state and a token budget: elide old tool outputs, drop the oldest
//!   segments, keep the newest N; never a call without its result, never the current turn, never the
//!   summary; and the split a compaction keeps.
//! - [`window`]: a rollover starts the window again at a boundary record: the run's instructions
//!   and input, a marker with the handoff or excerpts, the trailing user messages and pending calls.
//! - [`compaction`]: compaction edits the window, never the log: a record appended to the thread names
//!   the ranges it folded, the measured input tokens that asked for it, what refused, and the caller's
//!   summary, refused (and recorded) when not smaller than what it replaces.
//! - [`history`]: the records, folded or not, paged by sequence and searched literally.
//! - [`summarize`]: the request a compaction sends a model for its summary: framed, old tool outputs
//!   pruned, bounded at 80,000 characters with the cut marked.
//! - [`references`]: the memory recalled for a turn, appended after the history, reused by a retry.
//! - [`Context`]: all of it over one thread log.
//!
//! Tool outputs are bounded when appended (memory-core's `activity::thread::bound_tool_output`), so one huge result
//! cannot blow up every later turn.

pub mod compaction;
mod context;
pub mod conversation;
mod error;
pub mod fold;
pub mod history;
pub mod references;
pub mod segment;
pub mod summarize;
pub mod tokens;
pub mod view;
pub mod window;

pub use compaction::{CompactionPlan, CompactionRequest};
pub use context::{
    AssembledContext, COMPACTION_SPEAKER, Compacted, Context, MAX_MEMORY_RESERVE_TOKENS,
    MemoryBlock, NotesBlock, Remaining, RolledOver, ThreadView, TurnNotes, TurnOptions, TurnPlan,
    failure_reason, memory_reserve,
};
pub use conversation::{Conversation, ConversationState, Summary};
pub use error::ContextError;
pub use fold::{Fold, FoldReader, FoldReport, FoldScope};
pub use references::References;
pub use segment::{Message, Role, Segment, SegmentData, SegmentKind};
pub use tokens::Counter;
pub use view::{Strategy, View, ViewResult};
pub use window::{Window, WindowIdentity};
