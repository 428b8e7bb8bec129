//! `--namespace` and `--scope`, shared by the `memory` commands and `memory hook`: a module of its
//! own, so the command line and the hook's arguments both name it without naming each other.

use clap::Args;

use crate::refusal::Refusal;

/// The namespace and scope a command reads and writes by default: `--namespace JSON` (or
/// `$MEMORY_NAMESPACE`) and `--scope NAME` (or `$MEMORY_SCOPE`). Each command says what it does
/// without them; the JSON is decoded and checked by [`Self::namespace`], so a malformed one is refused
/// before any store is opened.
#[derive(Debug, Clone, Default, Args)]
pub struct NamespaceArgs {
    /// The namespace, as the operations' JSON: `{"name", "version", "identity"}`.
    #[arg(long, env = "MEMORY_NAMESPACE", value_name = "JSON")]
    pub namespace: Option<String>,
    /// The scope the reader holds (and writes are granted to).
    #[arg(long, env = "MEMORY_SCOPE", value_name = "NAME")]
    pub scope: Option<String>,
}

impl NamespaceArgs {
    /// The namespace given, decoded and address-checked; `None` when none was given.
    pub fn namespace(&self) -> Result<Option<memory_core::DynamicNamespace>, Refusal> {
        let Some(text) = &self.namespace else {
            return Ok(None);
        };
        let namespace: memory_core::DynamicNamespace = crate::input::decode_bytes(text.as_bytes())
            .map_err(|refusal| {
                Refusal::invalid_input(format!("--namespace: {}", refusal.message()))
            })?;
        crate::wire::address_of(&namespace)?;
        Ok(Some(namespace))
    }

    /// The scope given, checked; `None` when none was given.
    pub fn scope(&self) -> Result<Option<memory_core::MemoryScope>, Refusal> {
        self.scope
            .as_deref()
            .map(|scope| {
                memory_core::MemoryScope::new(scope)
                    .map_err(|error| Refusal::invalid_input(format!("--scope: {error}")))
            })
            .transpose()
    }
}
