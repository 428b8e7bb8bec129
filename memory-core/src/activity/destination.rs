//! Where a thread's memory goes: its **destination**, a namespace and the scopes allowed to recall
//! what is remembered from it.
//!
//! A thread is bound to a destination when its first record is appended, by whoever appends it (an
//! agent host's hook, `memory thread append`, the MCP tool). The binding is stored with the thread
//! and never changed by a later append: an append that names another destination is refused with
//! [`super::ActivityError::DestinationConflict`] and writes nothing, so no caller can redirect a
//! thread's memory into another tenant. Extractors never choose it (a model must not be able to
//! select a tenant): the worker hands each record's extractor the thread's destination.
//!
//! Without an explicit namespace, a host binds the **per-user default**
//! ([`ThreadDestination::for_user`]): definition [`USER_NAMESPACE`] version 1, identity
//! `{"user": NAME}`, the same for every session of that user on one database, so what a user said in
//! one session is recalled in the next.
//!
//! Threads appended before destinations existed have no binding; the worker writes them where it
//! always did ([`ThreadDestination::legacy_thread`], a namespace per thread) unless it is given a
//! default, and `memory thread rebind` binds them.

use serde::{Deserialize, Serialize};

use super::{ActivityError, ThreadId};
use crate::StoreFault;
use crate::document::MemoryScope;
use crate::namespace::NamespaceAddress;

/// The namespace definition of the per-user default destination (version 1, identity
/// `{"user": NAME}`).
pub const USER_NAMESPACE: &str = "memory.user";
/// The namespace definition of the per-thread destination threads had before bindings existed
/// (version 1, identity `{"thread": THREAD}`).
pub const LEGACY_THREAD_NAMESPACE: &str = "remembering.thread-statements";
/// Most scopes one destination grants.
pub const MAX_DESTINATION_SCOPES: usize = 16;
/// Most UTF-8 bytes of a user name in the per-user default.
pub const MAX_USER_BYTES: usize = 256;
/// Most UTF-8 bytes of a destination's stored JSON (an address is at most 4,096 bytes, each scope at
/// most 256 and a little JSON around them).
pub const MAX_DESTINATION_JSON_BYTES: usize = 4_096 + MAX_DESTINATION_SCOPES * (256 + 8) + 64;

/// A thread's destination: the namespace its memory is written to, and the scopes (1 to
/// [`MAX_DESTINATION_SCOPES`], kept sorted and without duplicates) that may recall it.
#[derive(Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ThreadDestination {
    namespace: NamespaceAddress,
    scopes: Vec<MemoryScope>,
}

impl std::fmt::Debug for ThreadDestination {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The address names an identity: only its fingerprint is shown.
        formatter
            .debug_struct("ThreadDestination")
            .field("namespace", &self.namespace)
            .field("scopes", &self.scopes.len())
            .finish()
    }
}

/// The stored form, read back through [`ThreadDestination::from_stored`], which checks everything.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredDestination {
    namespace: String,
    scopes: Vec<String>,
}

impl ThreadDestination {
    /// A destination of `namespace` recallable through `scopes` (1 to [`MAX_DESTINATION_SCOPES`];
    /// sorted and deduplicated here, so two spellings of one set compare equal).
    pub fn new(
        namespace: NamespaceAddress,
        mut scopes: Vec<MemoryScope>,
    ) -> Result<Self, ActivityError> {
        scopes.sort();
        scopes.dedup();
        if scopes.is_empty() {
            return Err(ActivityError::invalid(
                "destination scopes",
                "at least one scope is needed, or nothing could recall the thread's memory",
            ));
        }
        if scopes.len() > MAX_DESTINATION_SCOPES {
            return Err(ActivityError::TooLarge {
                limit: "destination scopes",
                max: MAX_DESTINATION_SCOPES as u64,
                actual: scopes.len() as u64,
            });
        }
        Ok(Self { namespace, scopes })
    }

    /// The per-user default destination of `user` ([`USER_NAMESPACE`]). The user name is 1 to
    /// [`MAX_USER_BYTES`] bytes with no control characters.
    pub fn for_user(user: &str, scopes: Vec<MemoryScope>) -> Result<Self, ActivityError> {
        Self::new(user_namespace(user)?, scopes)
    }

    /// The per-thread destination of a thread appended before bindings existed
    /// ([`LEGACY_THREAD_NAMESPACE`]).
    pub fn legacy_thread(
        thread: &ThreadId,
        scopes: Vec<MemoryScope>,
    ) -> Result<Self, ActivityError> {
        let namespace = NamespaceAddress::encode(
            LEGACY_THREAD_NAMESPACE,
            1,
            &serde_json::json!({ "thread": thread.as_str() }),
        )
        .map_err(|error| ActivityError::invalid("thread namespace", error.to_string()))?;
        Self::new(namespace, scopes)
    }

    /// The namespace memory is written to. Sensitive: never log it.
    pub fn namespace(&self) -> &NamespaceAddress {
        &self.namespace
    }

    /// The scopes that may recall it, sorted.
    pub fn scopes(&self) -> &[MemoryScope] {
        &self.scopes
    }

    /// The JSON a store keeps: `{"namespace": ADDRESS, "scopes": [...]}`.
    pub fn to_stored(&self) -> String {
        serde_json::json!({
            "namespace": self.namespace.as_str(),
            "scopes": self.scopes.iter().map(MemoryScope::as_str).collect::<Vec<_>>(),
        })
        .to_string()
    }

    /// Reads a stored destination back, checking every limit again: a row that no longer validates
    /// is [`StoreFault::Corrupt`], never trusted.
    pub fn from_stored(json: &str) -> Result<Self, ActivityError> {
        let corrupt = |what: String| ActivityError::Store(StoreFault::Corrupt { what });
        if json.len() > MAX_DESTINATION_JSON_BYTES {
            return Err(corrupt(format!(
                "stored destination is {} bytes, past {MAX_DESTINATION_JSON_BYTES}",
                json.len()
            )));
        }
        let stored: StoredDestination = serde_json::from_str(json)
            .map_err(|error| corrupt(format!("stored destination does not parse: {error}")))?;
        let namespace = NamespaceAddress::parse(&stored.namespace)
            .map_err(|error| corrupt(format!("stored destination namespace: {error}")))?;
        let scopes = stored
            .scopes
            .into_iter()
            .map(MemoryScope::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| corrupt(format!("stored destination scope: {error}")))?;
        let destination = Self::new(namespace, scopes)
            .map_err(|error| corrupt(format!("stored destination: {error}")))?;
        if destination.to_stored() != json {
            return Err(corrupt("stored destination is not canonical".to_owned()));
        }
        Ok(destination)
    }
}

/// The per-user default namespace of `user`.
pub fn user_namespace(user: &str) -> Result<NamespaceAddress, ActivityError> {
    if user.is_empty() {
        return Err(ActivityError::invalid("user", "must not be empty"));
    }
    if user.len() > MAX_USER_BYTES {
        return Err(ActivityError::TooLarge {
            limit: "user bytes",
            max: MAX_USER_BYTES as u64,
            actual: user.len() as u64,
        });
    }
    if user.chars().any(char::is_control) {
        return Err(ActivityError::invalid(
            "user",
            "must not contain control characters",
        ));
    }
    NamespaceAddress::encode(USER_NAMESPACE, 1, &serde_json::json!({ "user": user }))
        .map_err(|error| ActivityError::invalid("user", error.to_string()))
}

/// How many threads are bound to one destination (what `memory status` shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationCount {
    /// The destination.
    pub destination: ThreadDestination,
    /// Threads bound to it.
    pub threads: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(name: &str) -> MemoryScope {
        MemoryScope::new(name).expect("valid")
    }

    #[test]
    fn scopes_are_a_set_and_the_stored_form_round_trips() {
        let one = ThreadDestination::for_user("ana", vec![scope("b"), scope("a"), scope("b")])
            .expect("valid");
        let two = ThreadDestination::for_user("ana", vec![scope("a"), scope("b")]).expect("valid");
        assert_eq!(one, two);
        assert_eq!(
            ThreadDestination::from_stored(&one.to_stored()).expect("reads"),
            one
        );
        assert_ne!(
            one,
            ThreadDestination::for_user("bea", vec![scope("a"), scope("b")]).expect("valid")
        );
    }

    #[test]
    fn bad_destinations_are_refused_with_their_kinds() {
        assert!(matches!(
            ThreadDestination::for_user("ana", Vec::new()),
            Err(ActivityError::InvalidInput { .. })
        ));
        let many = (0..=MAX_DESTINATION_SCOPES)
            .map(|index| scope(&format!("s{index}")))
            .collect();
        assert!(matches!(
            ThreadDestination::for_user("ana", many),
            Err(ActivityError::TooLarge { .. })
        ));
        assert!(matches!(
            ThreadDestination::for_user("", vec![scope("a")]),
            Err(ActivityError::InvalidInput { .. })
        ));
        assert!(matches!(
            ThreadDestination::for_user(&"u".repeat(MAX_USER_BYTES + 1), vec![scope("a")]),
            Err(ActivityError::TooLarge { .. })
        ));
        assert!(matches!(
            ThreadDestination::for_user("a\nb", vec![scope("a")]),
            Err(ActivityError::InvalidInput { .. })
        ));
    }

    #[test]
    fn a_stored_destination_that_no_longer_validates_is_corrupt() {
        let good = ThreadDestination::for_user("ana", vec![scope("a")]).expect("valid");
        for stored in [
            String::new(),
            "{}".to_owned(),
            r#"{"namespace":"[1,\"x\",1,{}]","scopes":[]}"#.to_owned(),
            r#"{"namespace":"not an address","scopes":["a"]}"#.to_owned(),
            good.to_stored().replace("\"a\"", "\"\""),
            good.to_stored()
                .replace("{\"namespace\"", "{ \"namespace\""),
            "x".repeat(MAX_DESTINATION_JSON_BYTES + 1),
        ] {
            assert!(
                matches!(
                    ThreadDestination::from_stored(&stored),
                    Err(ActivityError::Store(StoreFault::Corrupt { .. }))
                ),
                "{stored}"
            );
        }
    }
}
