//! The grants file of `memory serve --http --grants FILE`: TOML, or JSON when the name ends in
//! `.json`, with the same shape.
//!
//! ```toml
//! [[grant]]
//! name = "ana"                    # 1 to 64 of A-Z a-z 0-9 . _ - (a /metrics label)
//! token_sha256 = "9f86d08..."     # SHA-256 of the token, 64 hex digits: the file holds no secret
//! operations = ["recall", "get", "list", "remember", "forget"]   # or ["*"]
//! read_scopes = ["ana"]           # "*" is every scope
//! write_scopes = ["ana"]
//! default_namespace = { name = "notes", version = 1, identity = { user = "ana" } }
//! default_scope = "ana"
//!
//! [[grant.namespaces]]            # one or more
//! name = "notes"                  # "*" (alone) is every namespace
//! version = 1                     # optional: every version when absent
//! fields = { user = "ana" }       # these identity fields fixed, the others free;
//!                                 # or `identity = {...}` for one exact identity; neither: every identity
//! ```
//!
//! Everything is checked before the file is used, and any fault refuses the whole file (a server
//! does not start; a reload keeps the grants it had): unknown fields, a malformed digest, a name or a
//! digest given twice, an unknown operation, a grant with no operation or no namespace, `identity`
//! with `fields`, an invalid scope, defaults outside the grant's own namespaces and read scopes, or only
//! one of the two defaults. A file with no grant is refused too: it would refuse every token.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use memory_core::{DynamicNamespace, MemoryScope};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Grant, GrantedOperation, IdentityRule, NamespaceRule, ScopeSet};
use crate::defaults::Defaults;

/// Most bytes of a grants file.
pub const MAX_GRANTS_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Most grants in one file.
pub const MAX_GRANTS: usize = 10_000;
/// Most namespace rules of one grant.
const MAX_RULES: usize = 1_000;
/// Most characters of a grant's name.
const MAX_NAME_CHARS: usize = 64;

/// Why a grants file was refused.
#[derive(Debug, thiserror::Error)]
pub enum GrantsError {
    /// It could not be read.
    #[error("grants file {path}: {detail}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        detail: String,
    },
    /// It does not parse, or a grant in it is invalid.
    #[error("grants file {path}: {detail}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, and where (never a token).
        detail: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(default)]
    grant: Vec<GrantShape>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantShape {
    name: String,
    token_sha256: String,
    operations: Vec<String>,
    #[serde(default)]
    namespaces: Vec<RuleShape>,
    #[serde(default)]
    read_scopes: Vec<String>,
    #[serde(default)]
    write_scopes: Vec<String>,
    #[serde(default)]
    default_namespace: Option<DynamicNamespace>,
    #[serde(default)]
    default_scope: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleShape {
    name: String,
    #[serde(default)]
    version: Option<u64>,
    #[serde(default)]
    identity: Option<Value>,
    #[serde(default)]
    fields: Option<Map<String, Value>>,
}

/// The grants of a file, by token digest.
pub type GrantTable = HashMap<[u8; 32], Arc<Grant>>;

/// Reads and checks the grants file at `path`.
pub fn load_file(path: &Path) -> Result<GrantTable, GrantsError> {
    let shown = path.display().to_string();
    let read = |detail: String| GrantsError::Read {
        path: shown.clone(),
        detail,
    };
    let file = std::fs::File::open(path).map_err(|error| read(error.to_string()))?;
    let bytes = crate::input::read_bounded(file, MAX_GRANTS_FILE_BYTES).map_err(|failure| {
        read(match failure {
            crate::input::ReadFailure::Refused(refusal) => refusal.message().to_owned(),
            crate::input::ReadFailure::Io(error) => error.to_string(),
        })
    })?;
    let text = String::from_utf8(bytes).map_err(|_| read("not UTF-8".to_owned()))?;
    let json = path
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("json"));
    parse(&text, json).map_err(|detail| GrantsError::Invalid {
        path: shown,
        detail,
    })
}

/// Parses and checks grants text (JSON when `json`, else TOML); the error says what and where.
pub fn parse(text: &str, json: bool) -> Result<GrantTable, String> {
    let shape: FileShape = if json {
        serde_json::from_str(text).map_err(|error| error.to_string())?
    } else {
        toml::from_str(text).map_err(|error| error.to_string())?
    };
    if shape.grant.is_empty() {
        return Err("no [[grant]]: every token would be refused".to_owned());
    }
    if shape.grant.len() > MAX_GRANTS {
        return Err(format!(
            "{} grants, more than the {MAX_GRANTS} allowed",
            shape.grant.len()
        ));
    }
    let mut table = GrantTable::new();
    let mut names = BTreeSet::new();
    for (index, grant) in shape.grant.into_iter().enumerate() {
        let at = format!("grant {} ({:?})", index + 1, grant.name);
        let digest = digest_of(&grant.token_sha256).map_err(|error| format!("{at}: {error}"))?;
        if !names.insert(grant.name.clone()) {
            return Err(format!("{at}: the name is given twice"));
        }
        let grant = checked(grant).map_err(|error| format!("{at}: {error}"))?;
        if table.insert(digest, Arc::new(grant)).is_some() {
            return Err(format!("{at}: token_sha256 is given twice"));
        }
    }
    Ok(table)
}

fn digest_of(hex: &str) -> Result<[u8; 32], String> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err("token_sha256 must be 64 hex digits (the SHA-256 of the token)".to_owned());
    }
    let mut digest = [0u8; 32];
    for (slot, pair) in digest.iter_mut().zip(hex.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).map_err(|error| error.to_string())?;
        *slot = u8::from_str_radix(pair, 16).map_err(|error| error.to_string())?;
    }
    Ok(digest)
}

fn checked(grant: GrantShape) -> Result<Grant, String> {
    let name_ok = !grant.name.is_empty()
        && grant.name.chars().count() <= MAX_NAME_CHARS
        && grant
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !name_ok {
        return Err(format!(
            "name must be 1 to {MAX_NAME_CHARS} of A-Z a-z 0-9 . _ -"
        ));
    }
    let operations = operations(&grant.operations)?;
    if grant.namespaces.is_empty() {
        return Err("no [[grant.namespaces]]: the grant would touch nothing".to_owned());
    }
    if grant.namespaces.len() > MAX_RULES {
        return Err(format!("more than {MAX_RULES} namespace rules"));
    }
    let mut rules = Vec::with_capacity(grant.namespaces.len());
    for rule in grant.namespaces {
        match rule_of(rule)? {
            // Every namespace: the other rules add nothing.
            None => {
                rules.clear();
                break;
            }
            Some(rule) => rules.push(rule),
        }
    }
    let namespaces = (!rules.is_empty()).then_some(rules);
    let read_scopes = scopes(&grant.read_scopes, "read_scopes")?;
    let write_scopes = scopes(&grant.write_scopes, "write_scopes")?;
    let mut built = Grant::new(
        grant.name,
        operations,
        namespaces,
        read_scopes,
        write_scopes,
        None,
    );
    let defaults = match (grant.default_namespace, grant.default_scope) {
        (None, None) => None,
        (Some(namespace), Some(scope)) => {
            let scope =
                MemoryScope::new(scope).map_err(|error| format!("default_scope: {error}"))?;
            let defaults = Defaults::new(namespace, scope)
                .map_err(|refusal| format!("default_namespace: {}", refusal.message()))?;
            built
                .allow_namespace(defaults.address())
                .map_err(|_| "default_namespace is not one of the grant's namespaces")?;
            // A read-only grant has defaults too: writing to them is checked per call.
            built
                .allow_read_scope(defaults.scope())
                .map_err(|_| "default_scope is not in read_scopes")?;
            Some(Arc::new(defaults))
        }
        _ => return Err("give both default_namespace and default_scope, or neither".to_owned()),
    };
    built.defaults = defaults;
    Ok(built)
}

fn operations(names: &[String]) -> Result<BTreeSet<GrantedOperation>, String> {
    if names.is_empty() {
        return Err("operations is empty: the grant would allow nothing".to_owned());
    }
    let mut operations = BTreeSet::new();
    for name in names {
        if name == "*" {
            operations.extend(GrantedOperation::ALL);
            continue;
        }
        let operation = GrantedOperation::parse(name).ok_or_else(|| {
            let known: Vec<&str> = GrantedOperation::ALL
                .iter()
                .map(|operation| operation.as_str())
                .collect();
            format!(
                "unknown operation {name:?} (known: {}, or \"*\")",
                known.join(", ")
            )
        })?;
        operations.insert(operation);
    }
    Ok(operations)
}

/// Most bytes of one `--allow-namespace` rule.
const MAX_RULE_BYTES: usize = 64 * 1024;

/// Parses one namespace rule as the JSON form of a grants file's `[[grant.namespaces]]` entry
/// (`{"name", "version"?, "identity"? | "fields"?}`), as `memory serve --allow-namespace` takes it;
/// `None` is every namespace (`{"name": "*"}`).
pub fn parse_rule(text: &str) -> Result<Option<NamespaceRule>, String> {
    if text.len() > MAX_RULE_BYTES {
        return Err(format!(
            "a namespace rule of {} bytes, more than the {MAX_RULE_BYTES} allowed",
            text.len()
        ));
    }
    let rule: RuleShape = serde_json::from_str(text).map_err(|error| error.to_string())?;
    rule_of(rule)
}

/// The rule, or `None` for `name = "*"` (every namespace).
fn rule_of(rule: RuleShape) -> Result<Option<NamespaceRule>, String> {
    if rule.name == "*" {
        if rule.version.is_some() || rule.identity.is_some() || rule.fields.is_some() {
            return Err("a namespace rule named \"*\" takes no version, identity or fields".into());
        }
        return Ok(None);
    }
    let identity = match (rule.identity, rule.fields) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "namespace rule {:?}: give identity or fields, not both",
                rule.name
            ));
        }
        (Some(identity), None) => {
            // Checked like any identity, so a rule cannot name what no address can hold.
            DynamicNamespace {
                name: rule.name.clone(),
                version: rule.version.unwrap_or(1),
                identity: identity.clone(),
            }
            .address()
            .map_err(|error| format!("namespace rule {:?}: {error}", rule.name))?;
            IdentityRule::Exact(identity)
        }
        (None, Some(fields)) if fields.is_empty() => IdentityRule::Any,
        (None, Some(fields)) => IdentityRule::Fields(fields),
        (None, None) => IdentityRule::Any,
    };
    Ok(Some(NamespaceRule {
        name: Some(rule.name),
        version: rule.version,
        identity,
    }))
}

fn scopes(names: &[String], field: &str) -> Result<ScopeSet, String> {
    let mut set = BTreeSet::new();
    for name in names {
        if name == "*" {
            return Ok(ScopeSet::Any);
        }
        let scope = MemoryScope::new(name.clone()).map_err(|error| format!("{field}: {error}"))?;
        set.insert(scope.as_str().to_owned());
    }
    Ok(ScopeSet::Only(set))
}
