//! Where the memory of an appended thread goes, decided once for every interface: `memory thread
//! append`, the MCP tool `memory_thread_append` and `memory hook` (see
//! [`memory_core::activity::destination`] for the binding itself).
//!
//! Decisions:
//! - A namespace given (the call's `namespace`, else `--namespace`/`MEMORY_NAMESPACE`, else a
//!   server's default namespace) is the destination's namespace. Without one, the destination is the
//!   **per-user default**: `{"name": "memory.user", "version": 1, "identity": {"user": USER}}`, where
//!   USER is the call's `user`, else `--user`/`MEMORY_USER`, else the OS user (`$USER`, `$USERNAME`,
//!   `$LOGNAME`, else the account database's name for the process's user). So every session of one user on one database shares one memory, and two users do
//!   not share theirs.
//! - Naming both a namespace and a user in one call is refused (`invalid-input`): which one wins would
//!   be a guess.
//! - The scope is the call's `scope`, else `--scope`/`MEMORY_SCOPE`, else `agent` (the worker's
//!   historical default). The recall side (the hook) recalls the same namespace with the same scope.
//! - No user known at all (no flag, no variable, no OS user) is `invalid-input`, never a shared
//!   fallback name: a shared name would mix users' memories.

use memory_core::activity::ThreadDestination;
use memory_core::activity::destination::{USER_NAMESPACE, user_namespace};
use memory_core::{DynamicNamespace, MemoryScope};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::refusal::Refusal;

/// The scope granted and recalled when none is given: the remembering worker's default.
pub const DEFAULT_SCOPE: &str = "agent";

/// The OS user's name: `$USER`, `$USERNAME` or `$LOGNAME`, else the account database's name for the
/// process's user (a service or container often runs without those variables).
pub fn os_user() -> Option<String> {
    ["USER", "USERNAME", "LOGNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|value| !value.is_empty()))
        .or_else(|| whoami::username().ok().filter(|name| !name.is_empty()))
}

/// Who a local caller (the command line, the Python package) is: `user` if given, else
/// `MEMORY_USER`, else the OS user; `None` when no user is known. Whose per-user namespace a call
/// that names none works in, and whom a withdrawal names ([`local_principal`]).
pub fn local_user(user: Option<&str>) -> Option<String> {
    user.map(str::to_owned)
        .filter(|name| !name.is_empty())
        .or_else(|| {
            std::env::var("MEMORY_USER")
                .ok()
                .filter(|name| !name.is_empty())
        })
        .or_else(os_user)
}

/// Who speaks a local caller's own words when the caller names no speaker: [`local_user`] (`user`,
/// else `MEMORY_USER`, else the OS user), else `user`. The hook and the Python package both default
/// to it, so the same words typed through either are the same speaker's statement, and the worker
/// keeps them as one memory.
pub fn local_speaker(user: Option<&str>) -> String {
    local_user(user).unwrap_or_else(|| "user".to_owned())
}

/// [`local_user`] as a withdrawal's tombstone names them: `user:NAME`; `None` when no user is known
/// (the tombstone then names no one rather than a made-up name).
pub fn local_principal(user: Option<&str>) -> Option<String> {
    local_user(user).map(|name| memory_core::write::by_user(&name))
}

/// The per-user default namespace of `user`, as the operations' JSON takes it.
pub fn user_dynamic_namespace(user: &str) -> DynamicNamespace {
    DynamicNamespace {
        name: USER_NAMESPACE.to_owned(),
        version: 1,
        identity: serde_json::json!({ "user": user }),
    }
}

/// What a call says about its destination (every field optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DestinationRequest {
    /// The namespace: `{"name", "version", "identity"}`.
    pub namespace: Option<DynamicNamespace>,
    /// The scope granted to what is remembered (and recalled by the hook).
    pub scope: Option<String>,
    /// The user whose per-user namespace is the destination (when no namespace is given).
    pub user: Option<String>,
}

/// What a process falls back to when a call leaves a field out (its flags, its environment).
#[derive(Debug, Clone, Default)]
pub struct DestinationDefaults {
    /// `--namespace` / `MEMORY_NAMESPACE`, or a server's default namespace.
    pub namespace: Option<DynamicNamespace>,
    /// `--scope` / `MEMORY_SCOPE`.
    pub scope: Option<MemoryScope>,
    /// `--user` / `MEMORY_USER`; the OS user is asked only when this is `None`.
    pub user: Option<String>,
}

/// A resolved destination: what to bind, and the same namespace and scope for recall.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The binding an append names.
    pub destination: ThreadDestination,
    /// The namespace, in the operations' JSON form (for recall).
    pub namespace: DynamicNamespace,
    /// The scope (for recall).
    pub scope: MemoryScope,
}

impl DestinationDefaults {
    /// Resolves `request` against these defaults (the rules are the module's).
    pub fn resolve(&self, request: &DestinationRequest) -> Result<Resolved, Refusal> {
        if request.namespace.is_some() && request.user.is_some() {
            return Err(Refusal::invalid_input(
                "destination: give a namespace or a user, not both",
            ));
        }
        let scope = match &request.scope {
            Some(scope) => MemoryScope::new(scope.clone())
                .map_err(|error| Refusal::invalid_input(format!("scope: {error}")))?,
            None => match &self.scope {
                Some(scope) => scope.clone(),
                None => MemoryScope::new(DEFAULT_SCOPE)
                    .map_err(|error| Refusal::invalid_input(format!("scope: {error}")))?,
            },
        };
        // A user named in the call means that user's namespace, not the process's default one.
        let process_namespace = self.namespace.as_ref().filter(|_| request.user.is_none());
        let namespace = match request.namespace.as_ref().or(process_namespace) {
            Some(namespace) => namespace.clone(),
            None => {
                let user = request
                    .user
                    .clone()
                    .or_else(|| self.user.clone())
                    .or_else(os_user)
                    .ok_or_else(|| {
                        Refusal::invalid_input(
                            "user: none is known; give --user or MEMORY_USER (or a namespace)",
                        )
                    })?;
                // The limits of a user name are checked here, before anything is written.
                user_namespace(&user)?;
                user_dynamic_namespace(&user)
            }
        };
        let address = crate::wire::address_of(&namespace)?;
        let destination = ThreadDestination::new(address, vec![scope.clone()])?;
        Ok(Resolved {
            destination,
            namespace,
            scope,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::ErrorKind;

    fn defaults_for(user: &str) -> DestinationDefaults {
        DestinationDefaults {
            user: Some(user.to_owned()),
            ..DestinationDefaults::default()
        }
    }

    #[test]
    fn without_a_namespace_each_user_has_one_destination_for_every_session() {
        let ana = defaults_for("ana")
            .resolve(&DestinationRequest::default())
            .expect("resolves");
        assert_eq!(ana.namespace, user_dynamic_namespace("ana"));
        assert_eq!(ana.scope.as_str(), DEFAULT_SCOPE);
        let again = defaults_for("ana")
            .resolve(&DestinationRequest::default())
            .expect("resolves");
        assert_eq!(ana.destination, again.destination);
        let bea = defaults_for("ana")
            .resolve(&DestinationRequest {
                user: Some("bea".to_owned()),
                ..DestinationRequest::default()
            })
            .expect("resolves");
        assert_ne!(ana.destination, bea.destination);
    }

    #[test]
    fn a_call_overrides_the_process_defaults_and_bad_input_is_refused() {
        let namespace = DynamicNamespace {
            name: "notes".to_owned(),
            version: 1,
            identity: serde_json::json!({"team": "a"}),
        };
        let defaults = DestinationDefaults {
            namespace: Some(namespace.clone()),
            scope: Some(MemoryScope::new("team").expect("valid")),
            user: None,
        };
        let resolved = defaults
            .resolve(&DestinationRequest::default())
            .expect("resolves");
        assert_eq!(resolved.namespace, namespace);
        assert_eq!(resolved.scope.as_str(), "team");
        // A user named in the call means that user's namespace, not the process's default one.
        let user = defaults
            .resolve(&DestinationRequest {
                user: Some("ana".to_owned()),
                ..DestinationRequest::default()
            })
            .expect("resolves");
        assert_eq!(user.namespace, user_dynamic_namespace("ana"));
        for (request, kind) in [
            (
                DestinationRequest {
                    namespace: Some(namespace.clone()),
                    user: Some("ana".to_owned()),
                    scope: None,
                },
                ErrorKind::InvalidInput,
            ),
            (
                DestinationRequest {
                    user: Some(String::new()),
                    ..DestinationRequest::default()
                },
                ErrorKind::InvalidInput,
            ),
            (
                DestinationRequest {
                    user: Some("u".repeat(257)),
                    ..DestinationRequest::default()
                },
                ErrorKind::TooLarge,
            ),
            (
                DestinationRequest {
                    scope: Some(String::new()),
                    ..DestinationRequest::default()
                },
                ErrorKind::InvalidInput,
            ),
            (
                DestinationRequest {
                    namespace: Some(DynamicNamespace {
                        name: String::new(),
                        version: 1,
                        identity: serde_json::json!({}),
                    }),
                    ..DestinationRequest::default()
                },
                ErrorKind::InvalidInput,
            ),
        ] {
            let refusal = defaults_for("ana").resolve(&request).expect_err("refused");
            assert_eq!(refusal.kind(), kind, "{request:?}: {refusal}");
        }
    }
}
