//! Typed refusals: the `{"error": {"kind", "message"}}` answer every interface gives for a request it
//! will not carry out.
//!
//! The kinds are exactly [`ErrorKind::as_str`] of memory-core, so a refusal from the command line, the MCP
//! server or the library means the same thing. Messages name the field or limit at fault; they are meant
//! for the caller only and are never logged.
//!
//! Every error type the interfaces meet becomes a refusal here and nowhere else, one `From` each:
//! [`MemoryError`] (documents), [`ActivityError`] (thread log, progress, remembering store),
//! [`RecallError`] and [`SemanticError`] (semantic index and embedder); plus
//! [`Refusal::connecting`] for a failed connection to the database `--db` names, and [`to_json`] for an
//! answer that cannot be encoded. Each keeps its error's kind; only an embedder that cannot load and a
//! connection that cannot be made get a message saying what to do.

use memory_core::activity::ActivityError;
use memory_core::recall::RecallError;
use memory_core::{ErrorKind, MemoryError};
use memory_postgres::{PostgresFailure, postgres_failure};
use semantic_index::{EmbedError, FETCH_ASSETS_COMMAND, SemanticError};
use serde::Serialize;
use serde_json::{Value, json};

/// A request that was refused, with the kind a caller acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} refusal: {message}", kind.as_str())]
pub struct Refusal {
    kind: ErrorKind,
    message: String,
}

impl Refusal {
    /// A refusal of `kind` explained by `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// Malformed JSON, a wrong type, an unknown or missing field, an out-of-range value.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }

    /// A size limit exceeded before any work was done.
    pub fn too_large(limit: &str, max: u64, actual: u64) -> Self {
        Self::new(
            ErrorKind::TooLarge,
            format!("{limit} exceeds its limit: {actual} > {max}"),
        )
    }

    /// Something this build or this store cannot do (yet, or right now).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The explanation.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The wire form: `{"error": {"kind": K, "message": text}}`.
    pub fn to_json(&self) -> Value {
        json!({ "error": { "kind": self.kind.as_str(), "message": self.message } })
    }
}

impl From<MemoryError> for Refusal {
    fn from(error: MemoryError) -> Self {
        // `Display` of a storage error hides its source; the kind says what a caller can do about it.
        Self::new(error.kind(), error.to_string())
    }
}

/// An activity store error: limits and input faults keep their kind, a busy store or a full queue is
/// `unavailable` (retry later), inconsistent stored data `corrupt`, anything else `storage`.
impl From<ActivityError> for Refusal {
    fn from(error: ActivityError) -> Self {
        // `Display` of a storage error names the operation, never its source or any user data.
        Self::new(error.kind(), error.to_string())
    }
}

/// A remembering pass's failure: store errors keep their kind; a corrupt saved output is `corrupt`,
/// limits out of range `invalid-input`, anything else (an extractor failure, too many rebases, a
/// poisoned worker) `unavailable`, since a later pass may succeed.
impl From<remembering::RememberingError> for Refusal {
    fn from(error: remembering::RememberingError) -> Self {
        use remembering::RememberingError as E;
        match error {
            E::Activity(error) => Self::from(error),
            E::Memory(error) => Self::from(error),
            error @ E::CorruptOutput { .. } => Self::new(ErrorKind::Corrupt, error.to_string()),
            error @ E::InvalidLimits { .. } => Self::invalid_input(error.to_string()),
            error => Self::unavailable(error.to_string()),
        }
    }
}

impl From<RecallError> for Refusal {
    fn from(error: RecallError) -> Self {
        Self::new(error.kind(), error.to_string())
    }
}

/// A semantic-index failure. An embedder that cannot be loaded makes every semantic mode
/// `unavailable`, and the message says how to install the model.
impl From<SemanticError> for Refusal {
    fn from(error: SemanticError) -> Self {
        match error {
            SemanticError::Store(error) => Self::from(error),
            SemanticError::Embed(
                error @ (EmbedError::MissingAsset { .. }
                | EmbedError::RuntimeLoad { .. }
                | EmbedError::ModelMismatch),
            ) => {
                let mut message = format!("semantic recall is unavailable: {error}");
                if !message.contains(FETCH_ASSETS_COMMAND) {
                    message.push_str(&format!(
                        " (run `{FETCH_ASSETS_COMMAND}` or set MEMORY_ASSETS_DIR)"
                    ));
                }
                Self::unavailable(message)
            }
            // The index's capacity is a setting of this process, not of the store: say which.
            error @ SemanticError::TooLarge {
                limit: "max_chunks",
                ..
            } => Self::new(
                error.kind(),
                format!(
                    "{error} chunks in the semantic index; raise --max-chunks \
                     (MEMORY_MAX_CHUNKS) or withdraw documents"
                ),
            ),
            other => Self::new(other.kind(), other.to_string()),
        }
    }
}

impl From<EmbedError> for Refusal {
    fn from(error: EmbedError) -> Self {
        Self::from(SemanticError::Embed(error))
    }
}

impl Refusal {
    /// A failed connection to the PostgreSQL database `--db` names (a SQLite file opens without
    /// one). A server that cannot be reached or refuses the connection, or a pool that cannot be
    /// built, is `unavailable`: the caller may retry once the server is back. A URL that does not
    /// parse is `invalid-input`; anything else (a schema newer than this build) keeps its own kind.
    /// Messages never hold the URL.
    pub fn connecting(error: MemoryError) -> Self {
        match postgres_failure(&error) {
            Some(failure @ PostgresFailure::InvalidUrl(_)) => {
                Self::invalid_input(format!("--db: {failure}"))
            }
            Some(failure @ (PostgresFailure::Postgres(_) | PostgresFailure::Pool(_))) => {
                Self::unavailable(format!(
                    "could not connect to the PostgreSQL database: {failure}"
                ))
            }
            // Connection attempts exhausted their retries: say what was being done, not just "busy".
            _ if error.kind() == ErrorKind::Unavailable => Self::unavailable(format!(
                "could not connect to the PostgreSQL database ({error}): is the server running and reachable?"
            )),
            _ => Self::from(error),
        }
    }
}

/// `answer` as JSON: an answer of ours that cannot be encoded is `corrupt`.
pub fn to_json(answer: &impl Serialize) -> Result<Value, Refusal> {
    serde_json::to_value(answer).map_err(|error| {
        Refusal::new(
            ErrorKind::Corrupt,
            format!("the answer cannot be encoded as JSON: {error}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use memory_core::StoreFault;
    use memory_core::activity::ThreadId;

    use super::*;

    #[test]
    fn activity_errors_keep_their_kind_and_message() {
        let cases = [
            (
                ThreadId::new("").expect_err("empty"),
                ErrorKind::InvalidInput,
            ),
            (
                ThreadId::new("t".repeat(513)).expect_err("too long"),
                ErrorKind::TooLarge,
            ),
            (
                ActivityError::Store(StoreFault::Busy {
                    operation: "append",
                }),
                ErrorKind::Unavailable,
            ),
            (
                ActivityError::Store(StoreFault::Corrupt {
                    what: "a record".to_owned(),
                }),
                ErrorKind::Corrupt,
            ),
        ];
        for (error, kind) in cases {
            let message = error.to_string();
            let refusal = Refusal::from(error);
            assert_eq!(refusal.kind(), kind, "{refusal}");
            assert_eq!(refusal.message(), message);
        }
    }

    #[test]
    fn recall_errors_keep_their_kind_and_message() {
        let deadline = RecallError::Deadline { timeout_ms: 5 };
        let refusal = Refusal::from(deadline);
        assert_eq!(refusal.kind(), ErrorKind::Deadline);
        assert_eq!(refusal.message(), "recall did not finish within 5 ms");
        let busy = RecallError::Source(MemoryError::Store(StoreFault::Busy { operation: "read" }));
        assert_eq!(Refusal::from(busy).kind(), ErrorKind::Unavailable);
    }

    #[test]
    fn a_model_that_cannot_load_names_the_fetch_script_and_other_semantic_errors_keep_their_kind() {
        for error in [
            EmbedError::ModelMismatch,
            EmbedError::MissingAsset {
                path: "model.onnx".into(),
            },
        ] {
            let refusal = Refusal::from(error);
            assert_eq!(refusal.kind(), ErrorKind::Unavailable);
            assert!(
                refusal.message().contains(FETCH_ASSETS_COMMAND),
                "{refusal}"
            );
        }
        let budget = Refusal::from(SemanticError::Budget {
            limit: "max_output_bytes",
            max: 1,
            actual: 2,
        });
        assert_eq!(budget.kind(), ErrorKind::Budget);
        let store = Refusal::from(SemanticError::Store(MemoryError::Store(
            StoreFault::Poisoned,
        )));
        assert_eq!(store.kind(), ErrorKind::Storage);
    }

    #[test]
    fn a_failed_connection_is_unavailable_and_a_bad_url_invalid_input() {
        let pool = MemoryError::storage("connect", PostgresFailure::Pool("no room".to_owned()));
        let refusal = Refusal::connecting(pool);
        assert_eq!(refusal.kind(), ErrorKind::Unavailable);
        assert!(
            refusal
                .message()
                .starts_with("could not connect to the PostgreSQL database"),
            "{refusal}"
        );
        let busy = MemoryError::Store(StoreFault::Busy {
            operation: "connect",
        });
        let refusal = Refusal::connecting(busy);
        assert_eq!(refusal.kind(), ErrorKind::Unavailable);
        assert!(
            refusal.message().contains("is the server running"),
            "{refusal}"
        );
        let too_new = MemoryError::storage(
            "connect",
            PostgresFailure::SchemaTooNew {
                found: 9,
                supported: 1,
            },
        );
        assert_eq!(Refusal::connecting(too_new).kind(), ErrorKind::Storage);
        // A URL that does not parse: no server is contacted.
        let error = memory_postgres::PostgresStore::builder("postgres://u:secret@host:no-port/db")
            .connect_blocking()
            .map(|_| ())
            .expect_err("the URL does not parse");
        let refusal = Refusal::connecting(error);
        assert_eq!(refusal.kind(), ErrorKind::InvalidInput, "{refusal}");
        assert!(refusal.message().starts_with("--db: "), "{refusal}");
        assert!(!refusal.message().contains("secret"), "{refusal}");
    }

    #[test]
    fn wire_form_uses_the_kebab_case_kind() {
        let refusal = Refusal::from(MemoryError::OperationConflict {
            operation_id: memory_core::OperationId::new("op").expect("valid id"),
        });
        assert_eq!(
            refusal.to_json(),
            json!({"error": {"kind": "operation-conflict", "message": "operation id was already used with a different command"}})
        );
    }

    #[test]
    fn address_limits_are_too_large_and_other_address_faults_invalid() {
        let too_deep = memory_core::AddressError::LimitExceeded {
            limit: "identity depth",
            max: 16,
            actual: 17,
        };
        assert_eq!(
            Refusal::from(MemoryError::from(too_deep)).kind(),
            ErrorKind::TooLarge
        );
        let bad_name = memory_core::AddressError::InvalidName { units: 0 };
        assert_eq!(
            Refusal::from(MemoryError::from(bad_name)).kind(),
            ErrorKind::InvalidInput
        );
    }
}
