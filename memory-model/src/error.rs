//! Every failure of a model call, typed, so a caller can tell one worth a later try from one a
//! retry would repeat. No message carries the key: details come from our own words, transport
//! errors (which never see the header's value) and server bodies with the key's text redacted.

/// Why a model call failed.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum ModelError {
    /// The endpoint or key is unusable as given (a bad URL, a bad key file, `https://` in a build
    /// without TLS). Fixing the configuration is the only remedy.
    #[error("model configuration: {detail}")]
    Config {
        /// What is wrong.
        detail: String,
    },
    /// The endpoint could not be reached or the connection broke (connect and I/O errors).
    #[error("model endpoint unreachable: {detail}")]
    Unreachable {
        /// The transport's account of it.
        detail: String,
    },
    /// No answer within the limit (or the endpoint answered 408).
    #[error("model endpoint gave no answer within {after_ms} ms")]
    Timeout {
        /// Milliseconds waited.
        after_ms: u64,
    },
    /// The endpoint answered 429.
    #[error("model endpoint is rate limiting (429){}", retry_after_text(*.retry_after_ms))]
    RateLimited {
        /// When to try again, from its `Retry-After` header, if it said.
        retry_after_ms: Option<u64>,
    },
    /// The endpoint failed (5xx).
    #[error("model endpoint failed with HTTP {status}")]
    Server {
        /// The HTTP status.
        status: u16,
    },
    /// The endpoint refused the request (a 4xx other than 408 and 429, or an unexpected status);
    /// the same request would be refused again.
    #[error("model endpoint refused the request with HTTP {status}: {detail}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The first 200 characters of its body, the key's text redacted.
        detail: String,
    },
    /// The answer is not a usable chat completion: not JSON, no first choice's message content,
    /// cut short at `max_tokens`, or longer than [`MAX_ANSWER_BYTES`](crate::MAX_ANSWER_BYTES).
    #[error("model answer unusable: {detail}")]
    Malformed {
        /// What is wrong with it (never its text).
        detail: String,
    },
    /// The request exceeds a bound and was not sent.
    #[error("request too large: {limit} is {actual}, at most {max}")]
    TooLarge {
        /// Which bound.
        limit: &'static str,
        /// The bound.
        max: u64,
        /// The request's size.
        actual: u64,
    },
}

/// Every [`ModelError::kind`], in declaration order (the meter's slots).
pub(crate) const KINDS: [&str; 8] = [
    "config",
    "unreachable",
    "timeout",
    "rate_limited",
    "server",
    "refused",
    "malformed",
    "too_large",
];

impl ModelError {
    /// Whether a later try may succeed: the endpoint unreachable, a timeout, 429 or 5xx. The
    /// others would fail the same way again.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Unreachable { .. }
                | Self::Timeout { .. }
                | Self::RateLimited { .. }
                | Self::Server { .. }
        )
    }

    /// A stable lower-case name of the variant, for metrics and logs: `config`, `unreachable`,
    /// `timeout`, `rate_limited`, `server`, `refused`, `malformed` or `too_large`.
    pub fn kind(&self) -> &'static str {
        KINDS[self.slot()]
    }

    /// The variant's position in [`KINDS`].
    pub(crate) fn slot(&self) -> usize {
        match self {
            Self::Config { .. } => 0,
            Self::Unreachable { .. } => 1,
            Self::Timeout { .. } => 2,
            Self::RateLimited { .. } => 3,
            Self::Server { .. } => 4,
            Self::Refused { .. } => 5,
            Self::Malformed { .. } => 6,
            Self::TooLarge { .. } => 7,
        }
    }
}

fn retry_after_text(retry_after_ms: Option<u64>) -> String {
    retry_after_ms.map_or_else(String::new, |ms| format!(", retry after {ms} ms"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_stable_and_transience_follows_them() {
        let all = [
            ModelError::Config {
                detail: String::new(),
            },
            ModelError::Unreachable {
                detail: String::new(),
            },
            ModelError::Timeout { after_ms: 1 },
            ModelError::RateLimited {
                retry_after_ms: None,
            },
            ModelError::Server { status: 500 },
            ModelError::Refused {
                status: 400,
                detail: String::new(),
            },
            ModelError::Malformed {
                detail: String::new(),
            },
            ModelError::TooLarge {
                limit: "request_bytes",
                max: 1,
                actual: 2,
            },
        ];
        let kinds: Vec<_> = all.iter().map(ModelError::kind).collect();
        assert_eq!(kinds, KINDS);
        let transient: Vec<_> = all
            .iter()
            .filter(|e| e.is_transient())
            .map(ModelError::kind)
            .collect();
        assert_eq!(
            transient,
            ["unreachable", "timeout", "rate_limited", "server"]
        );
    }

    #[test]
    fn rate_limited_says_when_to_retry() {
        let with = ModelError::RateLimited {
            retry_after_ms: Some(2000),
        };
        assert!(with.to_string().ends_with("retry after 2000 ms"));
        let without = ModelError::RateLimited {
            retry_after_ms: None,
        };
        assert!(without.to_string().ends_with("(429)"));
    }
}
