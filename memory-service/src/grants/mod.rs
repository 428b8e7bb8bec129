//! Per-tenant grants of a shared `memory serve --http`: what each bearer token may touch.
//!
//! A [`Grant`] binds one token (by its SHA-256, see [`file`]) to a name, the namespaces it may use,
//! the scopes it may read and write, and the operations it may call; the simple tools' default
//! namespace and scope come from it. Every MCP tool asks the caller's grant before it reads or
//! writes anything ([`Grant::allow_operation`], [`Grant::allow_namespace`], the scope checks), so a
//! refused call changes nothing.
//!
//! Every server runs under a grant: the host picks the tenant, never the model. Without `--grants`,
//! stdio, the `--token-file`/`MEMORY_TOKEN` token and a loopback caller without a token hold the
//! **server's grant** ([`Grant::server`]): the configured destination (`--namespace`/`--scope`) and
//! the per-user namespace of `--user` (else the OS user) that the hook and the worker use, every
//! operation, plus the namespaces of each `--allow-namespace RULE` (a grants file's rule as JSON);
//! `--allow-any-namespace` makes it a grant to every namespace (the behaviour before grants). Its
//! scopes are every scope of those namespaces: the namespace is the tenant; a scope partitions what
//! one tenant's host recalls (the hook recalls the per-user namespace through its own `--scope`), and
//! the server's grant cannot tell which scope a namespace's host will use. With `--grants FILE`,
//! stdio holds the grant `--grant NAME` names (it has no bearer token), and the server's grant is
//! held only by the `--token-file` token over HTTP.
//!
//! What a refusal reveals: a call outside the grant's operations, namespaces or scopes is
//! `forbidden` before the store is read, with the same words whatever the target, so it says nothing
//! about whether the target exists. Inside a granted namespace, documents are filtered by scope: a
//! document none of whose scopes the grant reads is absent to `memory_get` and `memory_list`, and
//! replacing or withdrawing it is `forbidden` (so a grant sharing a namespace with another learns
//! that such an id is taken, nothing more). Thread ids are one name space per database: a thread
//! bound to a destination outside the grant is `forbidden` to append to and to forget in, and a
//! forget in a thread with no binding is `forbidden` too (not `not-found`), so forgetting never
//! tells another tenant's thread from none; a first append to a taken thread id tells that it is
//! taken. Hosts should use unguessable thread ids (the hook uses the host's session ids).

mod file;
mod table;

use std::collections::BTreeSet;
use std::sync::Arc;

use memory_core::write::by_grant;
use memory_core::{DynamicNamespace, ErrorKind, MemoryDocument, MemoryScope, NamespaceAddress};
use serde_json::{Map, Value};

use crate::defaults::Defaults;
use crate::refusal::Refusal;

pub use file::{GrantsError, MAX_GRANTS, MAX_GRANTS_FILE_BYTES, load_file, parse, parse_rule};
pub use table::{Grants, token_digest};

/// An operation a grant may allow; each MCP tool is one of them (`memory_sync` needs none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GrantedOperation {
    /// `memory_recall`, `memory_search`.
    Recall,
    /// `memory_get`.
    Get,
    /// `memory_list`.
    List,
    /// `memory_put`.
    Put,
    /// `memory_remember`.
    Remember,
    /// `memory_withdraw`.
    Withdraw,
    /// `memory_forget`.
    Forget,
    /// `memory_thread_append`.
    ThreadAppend,
    /// `memory_thread_forget`.
    ThreadForget,
    /// `memory_context`, `memory_history_read`, `memory_history_search`: read a thread the grant's
    /// namespaces hold.
    ThreadRead,
    /// `memory_compact`: append a compaction to such a thread.
    ThreadCompact,
    /// `memory_new_context`: append a rollover (a new window) to such a thread.
    ThreadRollover,
    /// `memory_read_notes`: read such a thread's notes.
    NotesRead,
    /// `memory_write_notes`: replace such a thread's notes.
    NotesWrite,
}

impl GrantedOperation {
    /// Every operation, in the order the documentation lists them.
    pub const ALL: [Self; 14] = [
        Self::Recall,
        Self::Get,
        Self::List,
        Self::Put,
        Self::Remember,
        Self::Withdraw,
        Self::Forget,
        Self::ThreadAppend,
        Self::ThreadForget,
        Self::ThreadRead,
        Self::ThreadCompact,
        Self::ThreadRollover,
        Self::NotesRead,
        Self::NotesWrite,
    ];

    /// The name a grants file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Recall => "recall",
            Self::Get => "get",
            Self::List => "list",
            Self::Put => "put",
            Self::Remember => "remember",
            Self::Withdraw => "withdraw",
            Self::Forget => "forget",
            Self::ThreadAppend => "thread_append",
            Self::ThreadForget => "thread_forget",
            Self::ThreadRead => "thread_read",
            Self::ThreadCompact => "thread_compact",
            Self::ThreadRollover => "thread_rollover",
            Self::NotesRead => "notes_read",
            Self::NotesWrite => "notes_write",
        }
    }

    /// The operation a grants file names, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|operation| operation.as_str() == name)
    }
}

/// Scopes a grant reads or writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeSet {
    /// Every scope (`"*"`).
    Any,
    /// These scopes only.
    Only(BTreeSet<String>),
}

impl ScopeSet {
    /// The set in words: `every scope`, or the scopes, comma-separated.
    pub fn describe(&self) -> String {
        match self {
            Self::Any => "every scope".to_owned(),
            Self::Only(scopes) if scopes.is_empty() => "none".to_owned(),
            Self::Only(scopes) => scopes.iter().cloned().collect::<Vec<_>>().join(", "),
        }
    }

    /// Whether `scope` is in the set.
    pub fn contains(&self, scope: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Only(scopes) => scopes.contains(scope),
        }
    }
}

/// Which identities of a definition a namespace rule admits.
#[derive(Debug, Clone, PartialEq)]
pub enum IdentityRule {
    /// Every identity.
    Any,
    /// Exactly this identity.
    Exact(Value),
    /// Every object identity with these fields at these values (other fields free).
    Fields(Map<String, Value>),
}

/// One namespace rule: a definition name (or `*` for every namespace), optionally a version, and
/// which identities.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceRule {
    /// The definition name; `None` is every namespace.
    pub name: Option<String>,
    /// The definition version; `None` is every version.
    pub version: Option<u64>,
    /// Which identities.
    pub identity: IdentityRule,
}

impl NamespaceRule {
    /// The rule admitting exactly the namespace at `address` (as stored, so it compares with what
    /// [`Grant::admits_namespace`] reads from an address); `None` for an address that does not split.
    pub fn exactly(address: &NamespaceAddress) -> Option<Self> {
        let (name, version, identity) = address.parts().ok()?;
        Some(Self {
            name: Some(name),
            version: Some(version),
            identity: IdentityRule::Exact(identity),
        })
    }

    /// The rule in words, as a page shows it: `notes (version 1), identities with {"user":"ana"}`.
    pub fn describe(&self) -> String {
        let Some(name) = &self.name else {
            return "every namespace".to_owned();
        };
        let version = self.version.map_or_else(
            || "every version".to_owned(),
            |version| format!("version {version}"),
        );
        let identity = match &self.identity {
            IdentityRule::Any => "any identity".to_owned(),
            IdentityRule::Exact(identity) => format!("identity {identity}"),
            IdentityRule::Fields(fields) => {
                format!("identities with {}", Value::Object(fields.clone()))
            }
        };
        format!("{name} ({version}), {identity}")
    }

    /// Whether the namespace `name`/`version`/`identity` is admitted.
    pub fn admits(&self, name: &str, version: u64, identity: &Value) -> bool {
        if self.name.as_deref().is_some_and(|rule| rule != name)
            || self.version.is_some_and(|rule| rule != version)
        {
            return false;
        }
        match &self.identity {
            IdentityRule::Any => true,
            IdentityRule::Exact(rule) => rule == identity,
            IdentityRule::Fields(fields) => identity.as_object().is_some_and(|object| {
                fields
                    .iter()
                    .all(|(field, value)| object.get(field) == Some(value))
            }),
        }
    }
}

/// What one token may touch.
#[derive(Debug, Clone)]
pub struct Grant {
    name: String,
    operations: BTreeSet<GrantedOperation>,
    /// `None`: every namespace.
    namespaces: Option<Vec<NamespaceRule>>,
    read_scopes: ScopeSet,
    write_scopes: ScopeSet,
    defaults: Option<Arc<Defaults>>,
    /// The server's own grant (the host's): it reads `/metrics` whatever its namespaces.
    host: bool,
    /// Who holds it when not `grant:NAME` ([`Grant::held_by`]).
    held_by: Option<String>,
}

/// What one request touches, as a grant is checked against it ([`Grant::check`]); each request type
/// says it of itself (`Request::touches` in [`crate::service`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Touches<'a> {
    /// The operation it runs; `None` for one every caller may run (`memory_sync`).
    pub operation: Option<GrantedOperation>,
    /// The namespace it reads or writes.
    pub namespace: Option<&'a NamespaceAddress>,
    /// The scope it reads through.
    pub read_scope: Option<&'a MemoryScope>,
    /// The scopes it grants a document to.
    pub write_scopes: &'a [MemoryScope],
}

/// The name of the server's own grant ([`Grant::server`]; a `/metrics` label).
pub const SERVER_GRANT: &str = "server";

/// A refusal of a call outside the caller's grant: the same words whatever the target.
pub fn forbidden(what: &str) -> Refusal {
    Refusal::new(
        ErrorKind::Forbidden,
        format!("this token's grant does not allow {what}"),
    )
}

impl Grant {
    /// A grant to every operation, namespace and scope (a `--token-file` token, or a server without
    /// one), with the server's defaults.
    pub fn everything(name: &str, defaults: Option<Arc<Defaults>>) -> Self {
        Self {
            name: name.to_owned(),
            operations: GrantedOperation::ALL.into_iter().collect(),
            namespaces: None,
            read_scopes: ScopeSet::Any,
            write_scopes: ScopeSet::Any,
            defaults,
            host: true,
            held_by: None,
        }
    }

    /// The server's own grant (see the module's docs): every operation and scope in `namespaces`
    /// (`None`: every namespace, `--allow-any-namespace`), with the server's defaults.
    pub fn server(namespaces: Option<Vec<NamespaceRule>>, defaults: Option<Arc<Defaults>>) -> Self {
        Self {
            namespaces,
            ..Self::everything(SERVER_GRANT, defaults)
        }
    }

    /// An in-process host's grant (the `memory` command line, the Python package, the eval harness):
    /// every operation, namespace and scope, held by `principal` when one is known (the local user,
    /// [`crate::destination::local_principal`]: who its withdrawals name), else by `grant:NAME`. Such a
    /// host opens the database file itself, so the file's permissions, not a grant, bound what it
    /// reaches; it still passes this grant to the one check every door makes ([`Grant::check`]).
    pub fn local(name: &str, principal: Option<String>) -> Self {
        let grant = Self::everything(name, None);
        match principal {
            Some(principal) => grant.held_by(principal),
            None => grant,
        }
    }

    /// A grant to nothing: what a request holds when no grant was found for it (fail closed).
    pub fn nothing() -> Self {
        Self {
            name: "none".to_owned(),
            operations: BTreeSet::new(),
            namespaces: Some(Vec::new()),
            read_scopes: ScopeSet::Only(BTreeSet::new()),
            write_scopes: ScopeSet::Only(BTreeSet::new()),
            defaults: None,
            host: false,
            held_by: None,
        }
    }

    /// A grant; `namespaces` `None` is every namespace. The defaults are not checked against the
    /// grant here ([`file`] does it for a grants file).
    pub fn new(
        name: String,
        operations: BTreeSet<GrantedOperation>,
        namespaces: Option<Vec<NamespaceRule>>,
        read_scopes: ScopeSet,
        write_scopes: ScopeSet,
        defaults: Option<Arc<Defaults>>,
    ) -> Self {
        Self {
            held_by: None,
            name,
            operations,
            namespaces,
            read_scopes,
            write_scopes,
            defaults,
            host: false,
        }
    }

    /// The same grant held by `principal` (an in-process host acting for its local user,
    /// [`crate::destination::local_principal`]) instead of `grant:NAME`.
    pub fn held_by(mut self, principal: String) -> Self {
        self.held_by = Some(principal);
        self
    }

    /// Who holds it: the `by` of the withdrawals it asks for (`grant:NAME` unless [`Grant::held_by`]
    /// said otherwise). A door stamps it; a caller's arguments never name it.
    pub fn principal(&self) -> String {
        self.held_by.clone().unwrap_or_else(|| by_grant(&self.name))
    }

    /// The name (a `/metrics` label; never a secret).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The simple tools' namespace and scope for this grant's calls.
    pub fn defaults(&self) -> Option<&Arc<Defaults>> {
        self.defaults.as_ref()
    }

    /// The namespace rules it admits; `None` is every namespace.
    pub fn namespace_rules(&self) -> Option<&[NamespaceRule]> {
        self.namespaces.as_deref()
    }

    /// The scopes it reads through.
    pub fn read_scopes(&self) -> &ScopeSet {
        &self.read_scopes
    }

    /// The scopes it writes to.
    pub fn write_scopes(&self) -> &ScopeSet {
        &self.write_scopes
    }

    /// The operations it allows, in the order the documentation lists them.
    pub fn operations(&self) -> impl Iterator<Item = GrantedOperation> + '_ {
        GrantedOperation::ALL
            .into_iter()
            .filter(|operation| self.operations.contains(operation))
    }

    /// Whether it allows everything (then no document is filtered).
    pub fn is_unrestricted(&self) -> bool {
        self.namespaces.is_none()
            && self.read_scopes == ScopeSet::Any
            && self.write_scopes == ScopeSet::Any
            && self.operations.len() == GrantedOperation::ALL.len()
    }

    /// Whether it reads `/metrics`, which names every grant: the server's own grant (the host's)
    /// and a grant to everything.
    pub fn reads_metrics(&self) -> bool {
        self.host || self.is_unrestricted()
    }

    /// The one check of a request against the grant, before anything is read or written for it:
    /// the operation, the namespace, the scope it reads through and the scopes it writes, as
    /// [`Touches`] names them. A write's replaced document is checked by its service
    /// ([`Grant::allow_replace`]), which reads it.
    pub fn check(&self, touches: &Touches<'_>) -> Result<(), Refusal> {
        if let Some(operation) = touches.operation {
            self.allow_operation(operation)?;
        }
        if let Some(namespace) = touches.namespace {
            self.allow_namespace(namespace)?;
        }
        if let Some(scope) = touches.read_scope {
            self.allow_read_scope(scope)?;
        }
        self.allow_write_scopes(touches.write_scopes)
    }

    /// Refuses an operation the grant does not list.
    pub fn allow_operation(&self, operation: GrantedOperation) -> Result<(), Refusal> {
        if self.operations.contains(&operation) {
            Ok(())
        } else {
            Err(forbidden(&format!("the {} operation", operation.as_str())))
        }
    }

    /// Whether a thread with `binding` is the grant's to use: bound to one of its namespaces, or, when
    /// `binding_it` (an append that binds it), not bound yet. A thread bound elsewhere and one nobody
    /// bound are refused in the same words, so a refusal tells nothing of another tenant's threads.
    pub fn allow_thread(
        &self,
        binding: Option<&memory_core::activity::ThreadBinding>,
        binding_it: bool,
    ) -> Result<(), Refusal> {
        match binding {
            Some(binding) if self.admits_namespace(binding.destination.namespace()) => Ok(()),
            None if binding_it => Ok(()),
            _ => Err(forbidden("this thread")),
        }
    }

    /// The destination defaults of a call: the grant's, else the server's `server`.
    pub fn destination_defaults_or(
        &self,
        server: &crate::destination::DestinationDefaults,
    ) -> crate::destination::DestinationDefaults {
        match &self.defaults {
            Some(defaults) => defaults.destination_defaults(),
            None => server.clone(),
        }
    }

    /// Whether the namespace at `address` is one of the grant's.
    pub fn admits_namespace(&self, address: &NamespaceAddress) -> bool {
        let Some(rules) = &self.namespaces else {
            return true;
        };
        // A stored or just-encoded address always splits; one that does not is admitted by nothing.
        match address.parts() {
            Ok((name, version, identity)) => rules
                .iter()
                .any(|rule| rule.admits(&name, version, &identity)),
            Err(_) => false,
        }
    }

    /// Refuses a namespace outside the grant.
    pub fn allow_namespace(&self, address: &NamespaceAddress) -> Result<(), Refusal> {
        if self.admits_namespace(address) {
            Ok(())
        } else {
            Err(forbidden("this namespace"))
        }
    }

    /// Refuses a namespace (in its JSON form) outside the grant; an invalid one keeps its own refusal.
    pub fn allow_dynamic(&self, namespace: &DynamicNamespace) -> Result<NamespaceAddress, Refusal> {
        let address = crate::wire::address_of(namespace)?;
        self.allow_namespace(&address)?;
        Ok(address)
    }

    /// Refuses reading through a scope the grant does not read.
    pub fn allow_read_scope(&self, scope: &MemoryScope) -> Result<(), Refusal> {
        if self.read_scopes.contains(scope.as_str()) {
            Ok(())
        } else {
            Err(forbidden("reading through this scope"))
        }
    }

    /// Refuses granting a document to a scope the grant does not write.
    pub fn allow_write_scopes<'a>(
        &self,
        scopes: impl IntoIterator<Item = &'a MemoryScope>,
    ) -> Result<(), Refusal> {
        if scopes
            .into_iter()
            .all(|scope| self.write_scopes.contains(scope.as_str()))
        {
            Ok(())
        } else {
            Err(forbidden("writing to this scope"))
        }
    }

    /// Whether the grant sees `document`: it is in a granted namespace and one of its scopes is read.
    pub fn can_read(&self, document: &MemoryDocument) -> bool {
        self.admits_namespace(&document.key.namespace)
            && (self.read_scopes == ScopeSet::Any
                || document
                    .scopes
                    .iter()
                    .any(|scope| self.read_scopes.contains(scope.as_str())))
    }

    /// Refuses replacing or withdrawing `document` unless the grant sees it and writes every scope
    /// it is granted to.
    pub fn allow_replace(&self, document: &MemoryDocument) -> Result<(), Refusal> {
        if self.can_read(document) {
            self.allow_write_scopes(&document.scopes)
        } else {
            Err(forbidden("changing this document"))
        }
    }

    /// The grant's defaults, else `fallback` (the server's) when the grant admits them; a default the
    /// grant does not admit is refused, never used.
    pub fn defaults_or(
        &self,
        fallback: Option<&Arc<Defaults>>,
    ) -> Result<Option<Arc<Defaults>>, Refusal> {
        if let Some(defaults) = &self.defaults {
            return Ok(Some(Arc::clone(defaults)));
        }
        let Some(defaults) = fallback else {
            return Ok(None);
        };
        self.allow_namespace(defaults.address())?;
        self.allow_read_scope(defaults.scope())?;
        Ok(Some(Arc::clone(defaults)))
    }
}

#[cfg(test)]
mod tests;
