//! Recall limits, validated once when built so recall itself never meets an out-of-range value.

use std::time::Duration;

use crate::recall::error::RecallError;

/// Default of [`RecallLimits::max_input_bytes`]: 16 MiB.
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;
/// Largest allowed [`RecallLimits::max_input_bytes`]: 64 MiB.
pub const MAX_MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// The hard limits of one recall.
///
/// Build with [`RecallLimits::builder`]; every limit except `max_input_bytes` is required and positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecallLimits {
    max_sources: u32,
    max_items: u32,
    max_bytes: u64,
    max_tokens: u64,
    timeout_ms: u64,
    max_input_bytes: u64,
}

impl RecallLimits {
    /// A builder with nothing set.
    pub fn builder() -> RecallLimitsBuilder {
        RecallLimitsBuilder::default()
    }

    /// Most distinct authority-qualified sources the text may cite.
    pub fn max_sources(&self) -> u32 {
        self.max_sources
    }

    /// Most passages (citations) in the text.
    pub fn max_items(&self) -> u32 {
        self.max_items
    }

    /// Most UTF-8 bytes of the whole rendered text.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Most tokens of the whole rendered text, as the caller's counter counts them.
    pub fn max_tokens(&self) -> u64 {
        self.max_tokens
    }

    /// The deadline of the whole recall, in milliseconds.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    /// The deadline as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Most aggregate UTF-8 JSON bytes of every passage considered, omitted and duplicate ones included.
    pub fn max_input_bytes(&self) -> u64 {
        self.max_input_bytes
    }
}

/// Builds [`RecallLimits`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RecallLimitsBuilder {
    max_sources: Option<u32>,
    max_items: Option<u32>,
    max_bytes: Option<u64>,
    max_tokens: Option<u64>,
    timeout_ms: Option<u64>,
    max_input_bytes: Option<u64>,
}

impl RecallLimitsBuilder {
    /// Sets [`RecallLimits::max_sources`] (required, positive).
    pub fn max_sources(mut self, value: u32) -> Self {
        self.max_sources = Some(value);
        self
    }

    /// Sets [`RecallLimits::max_items`] (required, positive).
    pub fn max_items(mut self, value: u32) -> Self {
        self.max_items = Some(value);
        self
    }

    /// Sets [`RecallLimits::max_bytes`] (required, positive).
    pub fn max_bytes(mut self, value: u64) -> Self {
        self.max_bytes = Some(value);
        self
    }

    /// Sets [`RecallLimits::max_tokens`] (required, positive).
    pub fn max_tokens(mut self, value: u64) -> Self {
        self.max_tokens = Some(value);
        self
    }

    /// Sets [`RecallLimits::timeout_ms`] (required, positive).
    pub fn timeout_ms(mut self, value: u64) -> Self {
        self.timeout_ms = Some(value);
        self
    }

    /// Sets [`RecallLimits::max_input_bytes`] (default 16 MiB; positive, at most 64 MiB).
    pub fn max_input_bytes(mut self, value: u64) -> Self {
        self.max_input_bytes = Some(value);
        self
    }

    /// Validates and builds the limits.
    pub fn build(self) -> Result<RecallLimits, RecallError> {
        let max_input_bytes = self.max_input_bytes.unwrap_or(DEFAULT_MAX_INPUT_BYTES);
        if max_input_bytes > MAX_MAX_INPUT_BYTES {
            return Err(RecallError::InvalidLimits {
                field: "max_input_bytes",
                reason: format!("must be at most {MAX_MAX_INPUT_BYTES}, got {max_input_bytes}"),
            });
        }
        // Items first: a caller's `max_sources` defaults to its `max_items`, so a zero there is
        // named as the field the caller gave.
        let max_items = required("max_items", self.max_items.map(u64::from))?
            .try_into()
            .unwrap_or(u32::MAX);
        Ok(RecallLimits {
            max_sources: required("max_sources", self.max_sources.map(u64::from))?
                .try_into()
                .unwrap_or(u32::MAX),
            max_items,
            max_bytes: required("max_bytes", self.max_bytes)?,
            max_tokens: required("max_tokens", self.max_tokens)?,
            timeout_ms: required("timeout_ms", self.timeout_ms)?,
            max_input_bytes: required("max_input_bytes", Some(max_input_bytes))?,
        })
    }
}

fn required(field: &'static str, value: Option<u64>) -> Result<u64, RecallError> {
    match value {
        None => Err(RecallError::InvalidLimits {
            field,
            reason: "is required".to_owned(),
        }),
        Some(0) => Err(RecallError::InvalidLimits {
            field,
            reason: "must be positive".to_owned(),
        }),
        Some(value) => Ok(value),
    }
}
