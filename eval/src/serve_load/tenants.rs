//! The tenants of a load run: names, namespaces, scopes, tokens, the grants file, the seeded
//! documents (a `memory import` file) and the texts clients remember and recall.
//!
//! Every id a tenant's documents carry starts with the tenant's tag (`t7-`), and every document's
//! metadata names its tenant (`{"tenant": "tenant-007"}`), so the harness can check any answer
//! against its caller without asking the server.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;
use rand::RngCore as _;
use serde_json::{Value, json};

use crate::corpus::{CorpusShape, generate};

/// The namespace definition every tenant's memory lives in (identity `{"user": TENANT}`).
pub const NAMESPACE_NAME: &str = "notes";
/// The speaker of every seeded document.
const SPEAKER: &str = "user";
/// 2026-01-01T00:00:00Z: the seeded documents' activity time.
const ACTIVITY_AT_MS: i64 = 1_767_225_600_000;
/// Statements (and queries) the corpus generator gives per person, about.
const STATEMENTS_PER_PERSON: usize = 9;

/// One tenant: its index, name (also its scope and its namespace's `user`) and bearer token.
#[derive(Debug, Clone)]
pub struct Tenant {
    /// 0-based index.
    pub index: usize,
    /// `tenant-007`: the grant's name, the scope and the namespace identity's `user`.
    pub name: String,
    /// `t7`: the prefix (with a dash) of every document id of the tenant.
    pub tag: String,
    /// The bearer token (a fresh random one per run).
    pub token: String,
}

impl Tenant {
    /// The tenant's namespace: `{"name": "notes", "version": 1, "identity": {"user": NAME}}`.
    pub fn namespace(&self) -> Value {
        json!({"name": NAMESPACE_NAME, "version": 1, "identity": {"user": self.name}})
    }

    /// Whether `id` is one of this tenant's document ids.
    pub fn owns_id(&self, id: &str) -> bool {
        id.strip_prefix(&self.tag)
            .is_some_and(|rest| rest.starts_with('-'))
    }

    /// The id of the `n`-th seeded document (documents are dealt round-robin: the n-th of the whole
    /// store goes to tenant `n % tenants`).
    pub fn seeded_id(&self, n: usize) -> String {
        format!("{}-s{n}", self.tag)
    }

    /// Checks one answered document or passage: its id must be the tenant's and its metadata, when
    /// it names a tenant, this one. Answers the reason when it is another tenant's.
    pub fn foreign(&self, id: &str, content: Option<&Value>) -> Option<String> {
        if !self.owns_id(id) {
            return Some(format!("id {id} is not {}'s", self.name));
        }
        let tenant = content
            .and_then(|content| content.get("metadata"))
            .and_then(|metadata| metadata.get("tenant"))
            .and_then(Value::as_str);
        match tenant {
            Some(tenant) if tenant != self.name => Some(format!(
                "document {id} is tagged {tenant}, not {}",
                self.name
            )),
            _ => None,
        }
    }
}

/// `tenants` tenants with fresh random tokens.
pub fn tenants(tenants: usize) -> Vec<Tenant> {
    let width = tenants.saturating_sub(1).to_string().len().max(3);
    let mut rng = rand::rng();
    (0..tenants)
        .map(|index| {
            let mut bytes = [0_u8; 24];
            rng.fill_bytes(&mut bytes);
            Tenant {
                index,
                name: format!("tenant-{index:0width$}"),
                tag: format!("t{index}"),
                token: memory_core::ids::lower_hex(&bytes),
            }
        })
        .collect()
}

/// The grants file (JSON, the same shape as the TOML one): one grant per tenant, its token's
/// SHA-256, every operation, its own scope and its own namespace, which are its simple tools'
/// defaults.
pub fn grants_json(tenants: &[Tenant]) -> Value {
    let grants: Vec<Value> = tenants
        .iter()
        .map(|tenant| {
            json!({
                "name": tenant.name,
                "token_sha256": memory_service::grants::token_digest(&tenant.token),
                "operations": ["recall", "get", "list", "put", "remember", "withdraw", "forget",
                               "thread_append", "thread_forget"],
                "read_scopes": [tenant.name],
                "write_scopes": [tenant.name],
                "default_namespace": tenant.namespace(),
                "default_scope": tenant.name,
                "namespaces": [tenant.namespace()],
            })
        })
        .collect();
    json!({ "grant": grants })
}

/// Short statements and questions about people, from the eval corpus (`Name: statement.` and
/// `Which city is Name based in?`), enough for `documents` distinct-ish documents.
#[derive(Debug, Clone)]
pub struct Texts {
    /// Statements.
    pub statements: Vec<String>,
    /// Questions (the recall queries).
    pub queries: Vec<String>,
}

impl Texts {
    /// Texts for about `documents` statements, from the corpus of `seed`.
    pub fn generate(documents: usize, seed: u64) -> Self {
        let corpus = generate(CorpusShape {
            seed,
            people: (documents / STATEMENTS_PER_PERSON + 1).max(20),
            ..CorpusShape::default()
        });
        let (statements, queries) = crate::run::texts(&corpus);
        Self {
            statements,
            queries,
        }
    }

    /// The `n`-th statement (cycling).
    pub fn statement(&self, n: usize) -> &str {
        &self.statements[n % self.statements.len()]
    }

    /// The `n`-th query (cycling).
    pub fn query(&self, n: usize) -> &str {
        &self.queries[n % self.queries.len()]
    }
}

/// One `memory_put` argument (a `memory import` line) for a document of `tenant`.
pub fn put_arguments(tenant: &Tenant, id: &str, operation_id: &str, text: &str) -> Value {
    json!({
        "namespace": tenant.namespace(),
        "id": id,
        "operation_id": operation_id,
        "expected_revision": null,
        "locator": format!("serve-load:{id}"),
        "scopes": [tenant.name],
        "content": {
            "text": text,
            "attributions": [{
                "origin_id": format!("origin-{id}"),
                "speaker": SPEAKER,
                "observers": [tenant.name],
                "locator": format!("serve-load:{id}#1"),
                "activity_at": ACTIVITY_AT_MS,
                "interpretation": "stated",
            }],
            "metadata": {"tenant": tenant.name},
            "recorded_at": ACTIVITY_AT_MS,
            "extracted_at": ACTIVITY_AT_MS,
        },
    })
}

/// Writes the import file of `documents` documents dealt round-robin over `tenants` (document `n`
/// to tenant `n % tenants.len()`, as concurrent tenants would write them).
pub fn write_import(
    path: &Path,
    tenants: &[Tenant],
    documents: usize,
    texts: &Texts,
) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for n in 0..documents {
        let tenant = &tenants[n % tenants.len()];
        let id = tenant.seeded_id(n);
        let line = put_arguments(tenant, &id, &format!("op-{id}"), texts.statement(n));
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use sha2::{Digest as _, Sha256};

    use super::*;

    #[test]
    fn ids_are_checked_against_their_tenant() {
        let all = tenants(12);
        assert_eq!(all[7].name, "tenant-007");
        assert!(all[1].owns_id(&all[1].seeded_id(13)));
        assert!(!all[1].owns_id(&all[11].seeded_id(11)), "t1- is not t11-");
        assert!(all[1].foreign("t1-s1", None).is_none());
        assert!(all[1].foreign("t10-s1", None).is_some());
        let tagged = json!({"metadata": {"tenant": "tenant-002"}});
        assert!(all[1].foreign("t1-s1", Some(&tagged)).is_some());
    }

    #[test]
    fn grants_name_each_token_digest() {
        let all = tenants(2);
        let grants = grants_json(&all);
        let digest = grants["grant"][1]["token_sha256"].as_str().unwrap_or("");
        assert_eq!(digest.len(), 64);
        assert_eq!(
            digest,
            memory_core::ids::lower_hex(&Sha256::digest(all[1].token.as_bytes()))
        );
        assert_eq!(grants["grant"][1]["default_scope"], "tenant-001");
    }
}
