//! Limits of refreshes and queries, validated before any work.

use crate::error::SemanticError;
use crate::index::IndexKind;

/// Default and largest bound on output JSON and on source bytes read by one query.
pub const DEFAULT_QUERY_BYTES_BUDGET: usize = 16 * 1024 * 1024;
/// Largest accepted `max_output_bytes` / `max_source_bytes`.
pub const MAX_QUERY_BYTES_BUDGET: usize = 64 * 1024 * 1024;

/// Bounds of one refresh, checked before the embedder is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefreshLimits {
    /// Most UTF-8 bytes of source text embedded (default 16 MiB).
    pub max_source_bytes: usize,
    /// Most chunks one source may produce (default 16,384).
    pub max_chunks_per_source: usize,
}

impl Default for RefreshLimits {
    fn default() -> Self {
        Self {
            max_source_bytes: 16 * 1024 * 1024,
            max_chunks_per_source: 16_384,
        }
    }
}

impl RefreshLimits {
    /// Checks that both limits are positive.
    pub fn validate(&self) -> Result<(), SemanticError> {
        if self.max_source_bytes == 0 || self.max_chunks_per_source == 0 {
            return Err(SemanticError::invalid(
                "refresh limits",
                "max_source_bytes and max_chunks_per_source must be positive",
            ));
        }
        Ok(())
    }
}

/// Limits of one query (SPEC §4).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryLimits {
    /// Most UTF-8 bytes of query text.
    pub max_query_bytes: usize,
    /// Most candidates kept from the index (and so most hits returned).
    pub max_candidates: usize,
    /// The search fails when it would score more chunks than this.
    pub max_scanned_chunks: usize,
    /// Candidates scoring below this cosine similarity are dropped.
    pub min_score: f32,
    /// Deadline for the whole query, embedding and revalidation included.
    pub timeout_ms: u64,
    /// Most UTF-8 JSON bytes of the returned hits (default 16 MiB, at most 64 MiB).
    pub max_output_bytes: usize,
    /// Most UTF-8 JSON bytes of the distinct authorized, current sources read (default 16 MiB, at most
    /// 64 MiB); missing, withdrawn, unauthorized and stale sources do not count.
    pub max_source_bytes: usize,
    /// Which index answers.
    pub index: IndexKind,
}

impl QueryLimits {
    /// Limits with the required values given and the byte budgets at their defaults.
    pub fn new(
        max_query_bytes: usize,
        max_candidates: usize,
        max_scanned_chunks: usize,
        min_score: f32,
        timeout_ms: u64,
        index: IndexKind,
    ) -> Self {
        Self {
            max_query_bytes,
            max_candidates,
            max_scanned_chunks,
            min_score,
            timeout_ms,
            max_output_bytes: DEFAULT_QUERY_BYTES_BUDGET,
            max_source_bytes: DEFAULT_QUERY_BYTES_BUDGET,
            index,
        }
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), SemanticError> {
        let positive = [
            ("max_query_bytes", self.max_query_bytes),
            ("max_candidates", self.max_candidates),
            ("max_scanned_chunks", self.max_scanned_chunks),
            ("max_output_bytes", self.max_output_bytes),
            ("max_source_bytes", self.max_source_bytes),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(SemanticError::invalid(field, "must be positive"));
            }
        }
        if self.timeout_ms == 0 {
            return Err(SemanticError::invalid("timeout_ms", "must be positive"));
        }
        if !self.min_score.is_finite() {
            return Err(SemanticError::invalid("min_score", "must be finite"));
        }
        for (field, value) in [
            ("max_output_bytes", self.max_output_bytes),
            ("max_source_bytes", self.max_source_bytes),
        ] {
            if value > MAX_QUERY_BYTES_BUDGET {
                return Err(SemanticError::TooLarge {
                    limit: field,
                    max: MAX_QUERY_BYTES_BUDGET as u64,
                    actual: value as u64,
                });
            }
        }
        Ok(())
    }
}
