//! The five operations' arguments and results, as they travel in JSON (the contract of issue 7).
//!
//! Arguments are strict: unknown fields are refused (`deny_unknown_fields`), ids and scopes travel as
//! strings and are validated by memory-core's constructors when converted, so an oversized id is
//! `too-large` and an empty one `invalid-input`, with the same words as the library. Their JSON Schemas
//! (schemars) are the MCP tools' input schemas.

use memory_core::StoreFault;
use memory_core::{
    DocumentId, DynamicNamespace, MemoryContent, MemoryDocument, MemoryError, MemoryKey,
    MemoryScope, MemoryWrite, NamespaceAddress, OperationId, Revision, WriteOutcome,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::refusal::Refusal;

/// Arguments of `memory_put`: create (no expected revision) or replace (the current one) a document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PutArguments {
    /// The namespace: `{name, version, identity}`.
    pub namespace: DynamicNamespace,
    /// The document id within the namespace.
    pub id: String,
    /// Idempotency key, unique per namespace: retrying the same command with it returns the first answer.
    pub operation_id: String,
    /// `null` to create; otherwise the revision this write replaces.
    pub expected_revision: Option<String>,
    /// Where the document came from, as the writer names it.
    pub locator: String,
    /// Scopes allowed to recall the document; an empty list grants none.
    pub scopes: Vec<String>,
    /// The content.
    pub content: MemoryContent,
}

/// Arguments of `memory_withdraw`: withdraw a document for good.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WithdrawArguments {
    /// The namespace: `{name, version, identity}`.
    pub namespace: DynamicNamespace,
    /// The document id within the namespace.
    pub id: String,
    /// Idempotency key, unique per namespace.
    pub operation_id: String,
    /// The current revision, the one being withdrawn.
    pub expected_revision: String,
    /// Why it is withdrawn.
    pub reason: String,
}

/// Arguments of `memory_get`: read one current document, and with `revisions` its history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetArguments {
    /// The namespace: `{name, version, identity}`.
    pub namespace: DynamicNamespace,
    /// The document id within the namespace.
    pub id: String,
    /// Also answer up to this many of the document's revisions, newest first (1 to 1,000), as
    /// `memory history` does; a withdrawn document answers its tombstone and revisions without words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisions: Option<u32>,
}

/// Arguments of `memory history`: a document's revisions, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryArguments {
    /// The namespace: `{name, version, identity}`.
    pub namespace: DynamicNamespace,
    /// The document id within the namespace.
    pub id: String,
    /// Most revisions answered, newest first: 1 to 1,000, default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// Revisions a history read answers when the call names no number.
pub const DEFAULT_HISTORY_LIMIT: u32 = 100;

/// The number of revisions a call asks for, checked before any read: 1 to
/// [`memory_core::revisions::MAX_REVISIONS_PER_READ`].
pub fn revisions_limit(field: &'static str, asked: u32) -> Result<usize, Refusal> {
    let max = memory_core::revisions::MAX_REVISIONS_PER_READ;
    if asked == 0 {
        return Err(Refusal::invalid_input(format!(
            "{field} must be at least 1"
        )));
    }
    let asked = usize::try_from(asked).unwrap_or(usize::MAX);
    if asked > max {
        return Err(Refusal::too_large(field, max as u64, asked as u64));
    }
    Ok(asked)
}

/// One revision of a document's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireRevision {
    /// The revision (opaque).
    pub revision: String,
    /// The revision it replaced; `null` for the first.
    pub predecessor: Option<String>,
    /// When it was written, epoch milliseconds.
    pub modified_at: i64,
    /// What it wrote: the text, its attributions (who said it) and metadata. `null` for a
    /// withdrawal's tombstone and for a revision whose words are no longer kept (past the store's
    /// bound of revisions per document, withdrawn, or written from a forgotten source).
    pub content: Option<MemoryContent>,
    /// Where it came from.
    pub locator: String,
    /// Scopes allowed to recall it.
    pub scopes: Vec<String>,
    /// Set on the withdrawal's tombstone: why it was withdrawn.
    pub withdrawn: Option<WireWithdrawal>,
}

impl WireRevision {
    /// The wire form of a stored revision, its content shown only when `words_shown`.
    pub fn from_document(document: MemoryDocument, words_shown: bool) -> Self {
        let shown = words_shown && document.withdrawn.is_none();
        Self {
            revision: document.revision.as_str().to_owned(),
            predecessor: document
                .predecessor
                .map(|revision| revision.as_str().to_owned()),
            modified_at: document.modified_at,
            content: shown.then_some(document.content),
            locator: document.locator,
            scopes: document
                .scopes
                .iter()
                .map(|scope| scope.as_str().to_owned())
                .collect(),
            withdrawn: document.withdrawn.map(|withdrawal| WireWithdrawal {
                reason: withdrawal.reason,
                by: withdrawal.by,
            }),
        }
    }
}

/// Result of `memory history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryResult {
    /// The revisions, newest first; empty when the id was never written.
    pub revisions: Vec<WireRevision>,
}

/// How `memory_recall` finds candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RecallMode {
    /// Full-text (BM25) search.
    Lexical,
    /// Exact cosine search over embeddings.
    Exact,
    /// Approximate (HNSW) cosine search over embeddings.
    Hnsw,
    /// Lexical and semantic results fused.
    #[default]
    Hybrid,
    /// The namespace's newest documents visible through the scope, newest first; the query is not
    /// used (it may be empty). What a session's start recalls when it has no query.
    Recent,
}

impl RecallMode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lexical => "lexical",
            Self::Exact => "exact",
            Self::Hnsw => "hnsw",
            Self::Hybrid => "hybrid",
            Self::Recent => "recent",
        }
    }
}

/// Hard limits of one recall; all required and positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireRecallLimits {
    /// Most passages in the result.
    pub max_items: u32,
    /// Most distinct documents cited (memory-core's `max_sources`: passages of one document share its
    /// source); defaults to `max_items`, so by default every passage may come from another document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sources: Option<u32>,
    /// Most UTF-8 bytes of rendered text.
    pub max_bytes: u64,
    /// Most tokens of rendered text.
    pub max_tokens: u64,
    /// Deadline of the whole recall, in milliseconds.
    pub timeout_ms: u64,
}

/// Arguments of `memory_recall`: the memory relevant to `query`, visible through `scope`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArguments {
    /// The namespace: `{name, version, identity}`.
    pub namespace: DynamicNamespace,
    /// The scope the reader holds.
    pub scope: String,
    /// What to recall, as plain words (never query syntax).
    pub query: String,
    /// `lexical`, `exact`, `hnsw`, `hybrid` (the default) or `recent` (the newest documents; the query
    /// is not used).
    #[serde(default)]
    pub mode: RecallMode,
    /// Hard limits of the answer.
    pub limits: WireRecallLimits,
    /// Whether hybrid recall's rerank stage orders the revalidated passages (see
    /// `semantic_index::recall::RerankWeights`); absent means the default, which is on for hybrid
    /// recall (`semantic_index::recall::DEFAULT_RERANK`). The stage reads fusion's signals, so
    /// `true` with another mode is refused (`invalid-input`); `false` is accepted with any mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank: Option<bool>,
}

/// Arguments of `memory_sync`: none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncArguments {}

/// Why a document was withdrawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireWithdrawal {
    /// The reason the withdrawing write gave.
    pub reason: String,
    /// Who withdrew it, as the door named its caller (`grant:NAME`, `user:NAME`, `worker`); absent
    /// on tombstones written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A document as every interface returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireDocument {
    /// Its namespace, in canonical form (identity object keys sorted).
    pub namespace: DynamicNamespace,
    /// Its id.
    pub id: String,
    /// Its revision (opaque).
    pub revision: String,
    /// The revision it replaced; `null` for the first.
    pub predecessor: Option<String>,
    /// Where it came from.
    pub locator: String,
    /// Its content (empty once withdrawn).
    pub content: MemoryContent,
    /// Scopes allowed to recall it.
    pub scopes: Vec<String>,
    /// When this revision was written, epoch milliseconds.
    pub modified_at: i64,
    /// Set once withdrawn.
    pub withdrawn: Option<WireWithdrawal>,
}

/// Result of `memory_put` and `memory_withdraw`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteResult {
    /// The revision the write created (the original one for a replay).
    pub revision: String,
    /// True when an identical earlier command's answer was returned and nothing was written.
    pub replayed: bool,
    /// The document as this write left it.
    pub document: WireDocument,
}

/// Result of `memory_get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetResult {
    /// The current document; `null` when there is none (never written, or withdrawn).
    pub document: Option<WireDocument>,
    /// With the `revisions` argument: the document's revisions, newest first (see `memory history`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisions: Option<Vec<WireRevision>>,
}

/// Where a recalled passage came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WirePassageSource {
    /// The document id.
    pub id: String,
    /// The document's locator.
    pub locator: String,
    /// The revision the passage was taken from, when known.
    pub revision: Option<String>,
}

/// What the two rankings of a hybrid recall gave a passage's document, each in its own scale.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WireRankings {
    /// Its lexical (BM25) score; `null` when the lexical ranking did not hold it.
    pub lexical: Option<f64>,
    /// Its best chunk's cosine similarity with the query; `null` when the embedding ranking did
    /// not hold it.
    pub embedding: Option<f64>,
}

/// One recalled passage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WirePassage {
    /// Its source document.
    pub source: WirePassageSource,
    /// The passage's id within its source.
    pub passage_id: String,
    /// Its content (current text and provenance, after revalidation).
    pub content: MemoryContent,
    /// Its citation in `text`, `memory:N`.
    pub citation: String,
    /// Relevance as the finding index reported it (higher is better; scales differ between modes;
    /// 0 for a correction the search did not find, brought in by the passage it corrects).
    pub score: f64,
    /// Hybrid recall: what each ranking gave the passage's document before fusion (`score` is the
    /// fused, reranked score). Absent in the other modes, whose `score` is their one ranking's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rankings: Option<WireRankings>,
    /// The citation (`memory:N`) of the passage that corrects this one, cited ahead of it: the
    /// speaker said, in words, that this is no longer so. Derived at read time from the correction's
    /// `corrects` member; absent when nothing cited corrects it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected_by: Option<String>,
}

/// Result of `memory_recall`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallResult {
    /// The rendered, citation-numbered block to place before a model call.
    pub text: String,
    /// The passages cited in `text`, in citation order.
    pub passages: Vec<WirePassage>,
    /// One report per source consulted.
    pub outcomes: Vec<WireOutcome>,
    /// The index that ranked the embedding candidates: `exact` or `hnsw` (an `hnsw` recall is
    /// answered by `exact` while the graph is not ready, and says so here); `null` for `lexical`.
    pub answered_by: Option<AnsweredBy>,
    /// Semantic modes: the change-feed position the embedding index held when it searched (at
    /// least `store_head`: a recall waits for its index to hold every change committed before it);
    /// `null` for `lexical` and `recent`, whose index is the store's own.
    #[serde(default)]
    pub index_position: Option<u64>,
    /// Semantic modes: the store's change head read when the recall began; `null` for `lexical`
    /// and `recent`.
    #[serde(default)]
    pub store_head: Option<u64>,
}

/// Which embedding index ranked a semantic recall's candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AnsweredBy {
    /// The exact scan.
    Exact,
    /// The HNSW graph.
    Hnsw,
}

/// What happened at one recall source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireOutcome {
    /// The source's id (`memory` for the store's own index).
    pub id: String,
    /// Whether the recall required this source.
    pub essential: bool,
    /// `found`, `no-match`, `unavailable` or `insufficient-freshness`.
    pub status: String,
    /// The reason a source gave for being unavailable.
    pub reason: Option<String>,
    /// Passages that got a citation of their own.
    pub selected: u64,
    /// Passages that duplicated a cited one and share its citation.
    pub deduplicated: u64,
    /// Passages left out by the limits.
    pub omitted: u64,
}

/// Result of `memory_sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncResult {
    /// The change-sequence position through which every committed write is searchable in every mode
    /// (except the `unindexed` documents).
    pub indexed: u64,
    /// Documents the semantic index could not hold (too large, too many chunks, invalid), never
    /// reported as searchable by the embedding modes; `memory status` shows them by reason.
    pub unindexed: u64,
}

/// The canonical address of a wire namespace, after every limit check.
pub fn address_of(namespace: &DynamicNamespace) -> Result<NamespaceAddress, Refusal> {
    namespace
        .address()
        .map_err(|error| Refusal::from(MemoryError::from(error)))
}

/// The key of `id` in `namespace`.
pub fn key_of(namespace: &DynamicNamespace, id: &str) -> Result<MemoryKey, Refusal> {
    Ok(MemoryKey {
        namespace: address_of(namespace)?,
        id: DocumentId::new(id)?,
    })
}

impl PutArguments {
    /// The memory-core write these arguments ask for.
    pub fn into_write(self) -> Result<MemoryWrite, Refusal> {
        let key = key_of(&self.namespace, &self.id)?;
        let expected_revision = self.expected_revision.map(Revision::new).transpose()?;
        let scopes = self
            .scopes
            .into_iter()
            .map(MemoryScope::new)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MemoryWrite::Put {
            key,
            operation_id: OperationId::new(self.operation_id)?,
            expected_revision,
            locator: self.locator,
            content: self.content,
            scopes,
        })
    }
}

impl WithdrawArguments {
    /// The memory-core write these arguments ask for.
    pub fn into_write(self) -> Result<MemoryWrite, Refusal> {
        Ok(MemoryWrite::Withdraw {
            key: key_of(&self.namespace, &self.id)?,
            operation_id: OperationId::new(self.operation_id)?,
            expected_revision: Revision::new(self.expected_revision)?,
            reason: self.reason,
            by: None,
        })
    }
}

impl WriteResult {
    /// The wire form of a write's outcome.
    pub fn from_outcome(outcome: WriteOutcome) -> Result<Self, Refusal> {
        let document = WireDocument::from_document(outcome.receipt.document)?;
        Ok(Self {
            revision: document.revision.clone(),
            replayed: outcome.replayed,
            document,
        })
    }
}

impl WireDocument {
    /// The wire form of a stored document.
    pub fn from_document(document: MemoryDocument) -> Result<Self, Refusal> {
        Ok(Self {
            namespace: namespace_of(&document.key.namespace)?,
            id: document.key.id.as_str().to_owned(),
            revision: document.revision.as_str().to_owned(),
            predecessor: document
                .predecessor
                .map(|revision| revision.as_str().to_owned()),
            locator: document.locator,
            content: document.content,
            scopes: document
                .scopes
                .iter()
                .map(|scope| scope.as_str().to_owned())
                .collect(),
            modified_at: document.modified_at,
            withdrawn: document.withdrawn.map(|withdrawal| WireWithdrawal {
                reason: withdrawal.reason,
                by: withdrawal.by,
            }),
        })
    }
}

/// Splits a canonical address `[1,name,version,identity]` back into its wire namespace.
pub fn namespace_of(address: &NamespaceAddress) -> Result<DynamicNamespace, Refusal> {
    let corrupt = || {
        Refusal::from(MemoryError::Store(StoreFault::Corrupt {
            what: "stored namespace address is not [1,name,version,identity]".to_owned(),
        }))
    };
    let Ok(Value::Array(mut parts)) = serde_json::from_str::<Value>(address.as_str()) else {
        return Err(corrupt());
    };
    if parts.len() != 4 {
        return Err(corrupt());
    }
    let identity = parts.pop().unwrap_or(Value::Null);
    let version = parts[2].as_u64().ok_or_else(corrupt)?;
    let name = parts[1].as_str().ok_or_else(corrupt)?.to_owned();
    Ok(DynamicNamespace {
        name,
        version,
        identity,
    })
}

#[cfg(test)]
mod tests {
    use memory_core::ErrorKind;
    use serde_json::json;

    use super::*;
    use crate::input::decode_bytes;

    fn put_json() -> Value {
        json!({
            "namespace": {"name": "notes", "version": 1, "identity": {"user": "u1", "a": [1, 2]}},
            "id": "doc-1",
            "operation_id": "op-1",
            "expected_revision": null,
            "locator": "thread:1",
            "scopes": ["agent"],
            "content": {
                "text": "The user prefers tea.",
                "attributions": [{
                    "origin_id": "m1", "speaker": "user", "observers": ["agent"], "locator": "m1",
                    "activity_at": null, "interpretation": "stated"
                }],
                "metadata": {"topic": "drinks"},
                "recorded_at": 1, "extracted_at": 2
            }
        })
    }

    #[test]
    fn put_arguments_convert_and_the_namespace_round_trips_canonically() {
        let arguments: PutArguments =
            decode_bytes(put_json().to_string().as_bytes()).expect("valid put");
        let write = arguments.into_write().expect("valid write");
        let namespace = namespace_of(&write.key().namespace).expect("canonical address");
        assert_eq!(namespace.name, "notes");
        assert_eq!(namespace.version, 1);
        assert_eq!(namespace.identity, json!({"a": [1, 2], "user": "u1"}));
    }

    #[test]
    fn oversized_id_is_too_large_and_empty_scope_is_invalid() {
        let mut value = put_json();
        value["id"] = json!("x".repeat(DocumentId::MAX_BYTES + 1));
        let arguments: PutArguments = decode_bytes(value.to_string().as_bytes()).expect("parses");
        assert_eq!(
            arguments.into_write().expect_err("too long").kind(),
            ErrorKind::TooLarge
        );

        let mut value = put_json();
        value["scopes"] = json!([""]);
        let arguments: PutArguments = decode_bytes(value.to_string().as_bytes()).expect("parses");
        assert_eq!(
            arguments.into_write().expect_err("empty scope").kind(),
            ErrorKind::InvalidInput
        );
    }

    #[test]
    fn unknown_fields_are_refused_at_every_level() {
        for pointer in ["", "/namespace", "/content", "/content/attributions/0"] {
            let mut value = put_json();
            value
                .pointer_mut(pointer)
                .and_then(Value::as_object_mut)
                .expect("an object")
                .insert("surprise".to_owned(), json!(true));
            let refusal =
                decode_bytes::<PutArguments>(value.to_string().as_bytes()).expect_err(pointer);
            assert_eq!(refusal.kind(), ErrorKind::InvalidInput, "{pointer}");
        }
    }

    #[test]
    fn recall_mode_defaults_to_hybrid_and_rejects_other_names() {
        let mut value = json!({
            "namespace": {"name": "notes", "version": 1, "identity": null},
            "scope": "agent", "query": "tea",
            "limits": {"max_items": 3, "max_bytes": 1000, "max_tokens": 300, "timeout_ms": 500}
        });
        let arguments: RecallArguments = decode_bytes(value.to_string().as_bytes()).expect("valid");
        assert_eq!(arguments.mode, RecallMode::Hybrid);
        value["mode"] = json!("fuzzy");
        assert_eq!(
            decode_bytes::<RecallArguments>(value.to_string().as_bytes())
                .expect_err("unknown mode")
                .kind(),
            ErrorKind::InvalidInput
        );
    }
}
