//! A recall request as every door hands it to [`crate::recall_service::RecallService`]: the wire
//! arguments checked (namespace, scope, the query's size, the limits and the rerank choice) before
//! anything is searched, so a refused request has done no work.

use memory_core::recall::RecallLimits;
use memory_core::{MemoryAccess, MemoryScope};

use crate::refusal::Refusal;
use crate::wire::{RecallArguments, RecallMode, address_of};

/// Most UTF-8 bytes in a recall query; queries are words for an index, not documents.
pub const MAX_QUERY_BYTES: usize = 65_536;

/// The end of `text` within [`MAX_QUERY_BYTES`], at a character boundary: over a prompt longer than a
/// query may be, the latest words matter most.
pub fn query_tail(text: &str) -> &str {
    if text.len() <= MAX_QUERY_BYTES {
        return text;
    }
    let mut start = text.len() - MAX_QUERY_BYTES;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
/// Refuses a query longer than [`MAX_QUERY_BYTES`] before anything is searched.
fn check_query_bytes(text: &str) -> Result<(), Refusal> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(Refusal::too_large(
            "query bytes",
            MAX_QUERY_BYTES as u64,
            text.len() as u64,
        ));
    }
    Ok(())
}

/// A validated recall request: namespace, scope, query size and limits checked before any search.
#[derive(Debug, Clone)]
pub struct RecallQuery {
    pub(crate) access: MemoryAccess,
    pub(crate) text: String,
    pub(crate) mode: RecallMode,
    pub(crate) limits: RecallLimits,
    /// Whether hybrid recall reranks ([`semantic_index::recall::DEFAULT_RERANK`] unless the caller
    /// chose).
    pub(crate) rerank: bool,
}

/// The rerank choice of a recall in `mode`: the default when none was asked; `true` with a mode
/// other than hybrid is refused (the stage reads fusion's signals), before any work.
fn rerank_choice(mode: RecallMode, asked: Option<bool>) -> Result<bool, Refusal> {
    match (mode, asked) {
        (RecallMode::Hybrid, asked) => Ok(asked.unwrap_or(semantic_index::recall::DEFAULT_RERANK)),
        (_, Some(true)) => Err(Refusal::invalid_input(format!(
            "rerank applies to hybrid recall only, not mode {}",
            mode.as_str()
        ))),
        (_, _) => Ok(false),
    }
}

impl RecallQuery {
    /// Validates the wire arguments.
    pub fn new(arguments: RecallArguments) -> Result<Self, Refusal> {
        let access = MemoryAccess {
            namespace: address_of(&arguments.namespace)?,
            scope: MemoryScope::new(arguments.scope.as_str())?,
        };
        check_query_bytes(&arguments.query)?;
        // `max_sources` counts distinct cited documents (SPEC §2.3); by default every passage may come
        // from another document.
        let max_sources = arguments
            .limits
            .max_sources
            .unwrap_or(arguments.limits.max_items);
        let limits = RecallLimits::builder()
            .max_sources(max_sources)
            .max_items(arguments.limits.max_items)
            .max_bytes(arguments.limits.max_bytes)
            .max_tokens(arguments.limits.max_tokens)
            .timeout_ms(arguments.limits.timeout_ms)
            .build()?;
        let rerank = rerank_choice(arguments.mode, arguments.rerank)?;
        Ok(Self {
            access,
            text: arguments.query,
            mode: arguments.mode,
            limits,
            rerank,
        })
    }

    /// A recall of `text` in `mode` through `access` within `limits`, for an in-process host that
    /// holds memory-core values already (the eval harness); the query's size is checked as for
    /// [`Self::new`].
    pub fn for_access(
        access: MemoryAccess,
        text: String,
        mode: RecallMode,
        limits: RecallLimits,
    ) -> Result<Self, Refusal> {
        check_query_bytes(&text)?;
        Ok(Self {
            access,
            text,
            mode,
            limits,
            rerank: rerank_choice(mode, None)?,
        })
    }

    /// The same recall with hybrid recall's rerank stage on or off (see [`RecallArguments::rerank`]:
    /// `true` with another mode is refused).
    pub fn with_rerank(mut self, rerank: bool) -> Result<Self, Refusal> {
        self.rerank = rerank_choice(self.mode, Some(rerank))?;
        Ok(self)
    }

    /// The requested mode.
    pub fn mode(&self) -> RecallMode {
        self.mode
    }

    /// The namespace and scope it reads through.
    pub fn access(&self) -> &MemoryAccess {
        &self.access
    }
}
