//! The simple tools: `memory_remember`, `memory_search`, `memory_forget` and `memory_list` in the
//! server's default namespace and scope (`memory serve --namespace JSON --scope NAME`).
//!
//! They are the precise operations with every field an LLM gets wrong filled by the server:
//! - `memory_remember {text, id?, expected_revision?, speaker?, metadata?}` is a `memory_put` granted
//!   to the default scope.
//!   Its operation id is `remember-<sha256 of the call>` (the canonical JSON of the tool name, namespace,
//!   scope and arguments), so a retried call is the same operation. Without an `id` the document id is
//!   derived from the same digest (`m-<first 24 hex>`), so remembering the same text twice stores it
//!   once. Replacing an existing document takes the caller's `expected_revision`, as `memory_put`
//!   does: the server never reads the current revision and writes over it, since an edit made in
//!   between (a person's correction) would then be lost silently. Without one, or with a stale one,
//!   the store answers `conflict` and nothing changes. The attribution names the call's operation id as its origin, the speaker (`user` by
//!   default) and the default scope as observer; both times are the server's clock.
//!   A retry must send the same command as the first call for the store to replay its receipt, yet
//!   the first call chose its times and expected revision from the state it saw. So when the current
//!   document of the id was written by this very call (its attribution's origin is the operation id and
//!   its content is the call's), the first command is rebuilt from that document (its predecessor and
//!   times) and sent again: the store answers the first receipt, `replayed: true`.
//! - `memory_search {query, limit?}` is a hybrid `memory_recall` with [`SEARCH_DEFAULT_LIMIT`] passages
//!   (at most [`SEARCH_MAX_LIMIT`]), [`SEARCH_MAX_BYTES`] bytes, [`SEARCH_MAX_TOKENS`] tokens and
//!   [`SEARCH_TIMEOUT_MS`].
//! - `memory_forget {id, reason}` withdraws the current revision, which the server looks up; an id with
//!   no current document is `not-found`.
//! - `memory_list {cursor?, limit?}`: see [`crate::list`].

use memory_core::{
    Clock as _, ErrorKind, MemoryAttribution, MemoryContent, MemoryDocument, MemoryWrite,
    OperationId, Revision,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::database::Store;
pub use crate::defaults::Defaults;
use crate::grants::Grant;
use crate::list::{ListArguments, ListResult};
use crate::recall_service::RecallQuery;
use crate::refusal::Refusal;
use crate::service::{MemoryService, Request};
use crate::wire::{RecallArguments, RecallMode, RecallResult, WireRecallLimits, WriteResult};
use memory_core::ids::lower_hex;

/// Passages `memory_search` returns by default.
pub const SEARCH_DEFAULT_LIMIT: u32 = 5;
/// Most passages `memory_search` returns.
pub const SEARCH_MAX_LIMIT: u32 = 50;
/// Bytes of rendered text `memory_search` answers at most.
pub const SEARCH_MAX_BYTES: u64 = 8_000;
/// Tokens of rendered text `memory_search` answers at most.
pub const SEARCH_MAX_TOKENS: u64 = 2_000;
/// The deadline of one `memory_search`.
pub const SEARCH_TIMEOUT_MS: u64 = 10_000;
/// The speaker `memory_remember` attributes text to when none is given.
pub const DEFAULT_SPEAKER: &str = "user";
/// The locator of every document `memory_remember` writes (and of its attribution).
pub const REMEMBER_LOCATOR: &str = "mcp:memory_remember";

/// Arguments of `memory_remember`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberArguments {
    /// The text to remember.
    pub text: String,
    /// The document id. Without one the id is derived from the call, so the same text is stored
    /// once.
    #[serde(default)]
    pub id: Option<String>,
    /// The current revision of the document `id` names, to replace it (as `memory_put` takes it);
    /// replacing an existing document without it, or with a stale one, is refused as `conflict`.
    // Left out of the call's digest when absent, so calls without it keep their operation ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_revision: Option<String>,
    /// Who said it (default `user`).
    #[serde(default)]
    pub speaker: Option<String>,
    /// Application metadata kept with the text.
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// Arguments of `memory_search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArguments {
    /// What to recall, as plain words.
    pub query: String,
    /// Most passages: 1 to 50, default 5.
    #[serde(default)]
    pub limit: Option<u32>,
}

/// Arguments of `memory_forget`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetArguments {
    /// The document id (as `memory_remember` or `memory_list` answered it).
    pub id: String,
    /// Why it is forgotten.
    pub reason: String,
}

/// `memory_remember` (the Python package's `add` and `update` too).
pub async fn remember<S: Store>(
    service: &MemoryService<S>,
    defaults: &Defaults,
    grant: &Grant,
    arguments: RememberArguments,
) -> Result<WriteResult, Refusal> {
    grant.allow_write_scopes([defaults.scope()])?;
    let expected = arguments
        .expected_revision
        .clone()
        .map(Revision::new)
        .transpose()?;
    let digest = defaults.digest_of("memory_remember", &arguments)?;
    let operation_id = OperationId::new(format!("remember-{digest}"))?;
    let id = match &arguments.id {
        Some(id) => id.clone(),
        None => format!("m-{}", &digest[..24]),
    };
    let key = defaults.key(&id)?;
    let speaker = arguments
        .speaker
        .clone()
        .unwrap_or_else(|| DEFAULT_SPEAKER.to_owned());
    let metadata = arguments.metadata.clone().unwrap_or_default();
    let current = service.read_current(&key).await?;
    if let Some(document) = &current {
        grant.allow_replace(document)?;
    }
    let replacing_unnamed = expected.is_none() && current.is_some();
    let write = match current {
        // Written by this very call: send the first command again, so the store replays its receipt.
        Some(document) if written_by(&document, &operation_id, &arguments.text, &metadata) => {
            MemoryWrite::Put {
                key,
                operation_id,
                expected_revision: document.predecessor,
                locator: document.locator,
                content: document.content,
                scopes: document.scopes,
            }
        }
        // The caller's expected revision, never the one read above: the store refuses a stale one.
        _ => {
            let now = memory_core::SystemClock.now_millis();
            MemoryWrite::Put {
                key,
                expected_revision: expected,
                locator: REMEMBER_LOCATOR.to_owned(),
                content: MemoryContent {
                    text: arguments.text,
                    attributions: vec![MemoryAttribution {
                        origin_id: operation_id.as_str().to_owned(),
                        speaker,
                        observers: vec![defaults.scope().as_str().to_owned()],
                        locator: REMEMBER_LOCATOR.to_owned(),
                        activity_at: None,
                        interpretation: "stated".to_owned(),
                    }],
                    metadata,
                    recorded_at: now,
                    extracted_at: now,
                },
                scopes: vec![defaults.scope().clone()],
                operation_id,
            }
        }
    };
    service.write(write).await.map_err(|refusal| {
        if replacing_unnamed && refusal.kind() == ErrorKind::Conflict {
            Refusal::new(
                ErrorKind::Conflict,
                "a document with this id exists: to replace it, pass its current revision as \
                 expected_revision (memory_list shows it)",
            )
        } else {
            refusal
        }
    })
}

/// Whether `document` is what the call with `operation_id` wrote.
fn written_by(
    document: &MemoryDocument,
    operation_id: &OperationId,
    text: &str,
    metadata: &Map<String, Value>,
) -> bool {
    document.content.text == text
        && document.content.metadata == *metadata
        && document
            .content
            .attributions
            .iter()
            .any(|attribution| attribution.origin_id == operation_id.as_str())
}

/// `memory_search`.
pub async fn search<S: Store>(
    service: &MemoryService<S>,
    defaults: &Defaults,
    arguments: SearchArguments,
) -> Result<RecallResult, Refusal> {
    search_in_mode(service, defaults, arguments, RecallMode::Hybrid).await
}

/// `memory_search` in another recall mode (the Python package's `search(query, mode=...)`): the same
/// limits and checks, `mode` instead of hybrid.
pub async fn search_in_mode<S: Store>(
    service: &MemoryService<S>,
    defaults: &Defaults,
    arguments: SearchArguments,
    mode: RecallMode,
) -> Result<RecallResult, Refusal> {
    let limit = arguments.limit.unwrap_or(SEARCH_DEFAULT_LIMIT);
    if limit == 0 {
        return Err(Refusal::invalid_input("limit must be at least 1"));
    }
    if limit > SEARCH_MAX_LIMIT {
        return Err(Refusal::too_large(
            "limit",
            u64::from(SEARCH_MAX_LIMIT),
            u64::from(limit),
        ));
    }
    let mut recall = search_arguments(defaults, arguments.query, limit);
    recall.mode = mode;
    let query = RecallQuery::new(recall)?;
    let answer = service.run(Request::Recall(query)).await?;
    serde_json::from_value(answer).map_err(|error| {
        Refusal::new(
            ErrorKind::Corrupt,
            format!("recall answer does not decode: {error}"),
        )
    })
}

/// The recall `memory_search` runs.
pub fn search_arguments(defaults: &Defaults, query: String, limit: u32) -> RecallArguments {
    RecallArguments {
        namespace: defaults.namespace().clone(),
        scope: defaults.scope().as_str().to_owned(),
        query,
        mode: RecallMode::Hybrid,
        limits: WireRecallLimits {
            max_items: limit,
            max_sources: None,
            max_bytes: SEARCH_MAX_BYTES,
            max_tokens: SEARCH_MAX_TOKENS,
            timeout_ms: SEARCH_TIMEOUT_MS,
        },
        rerank: None,
    }
}

/// `memory_forget`.
pub async fn forget<S: Store>(
    service: &MemoryService<S>,
    defaults: &Defaults,
    grant: &Grant,
    arguments: ForgetArguments,
) -> Result<WriteResult, Refusal> {
    let key = defaults.key(&arguments.id)?;
    let digest = defaults.digest_of("memory_forget", &arguments)?;
    let Some(current) = service.read_current(&key).await? else {
        return Err(Refusal::new(
            ErrorKind::NotFound,
            "no current document has this id (never written, or already forgotten)",
        ));
    };
    grant.allow_replace(&current)?;
    // The revision is part of the operation: forgetting a later revision is another operation.
    let operation_id = OperationId::new(format!(
        "forget-{}",
        &hex_digest(&[digest.as_bytes(), current.revision.as_str().as_bytes()])[..48]
    ))?;
    service
        .write(MemoryWrite::Withdraw {
            key,
            operation_id,
            expected_revision: current.revision,
            reason: arguments.reason,
            by: Some(grant.principal()),
        })
        .await
}

/// The lower-case hex SHA-256 of `parts`, each prefixed by its length (so no two lists of parts
/// share a digest): the operation ids the simple tools and the notes derive.
pub(crate) fn hex_digest(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    lower_hex(&hasher.finalize())
}

/// `memory_list` in the default namespace.
pub async fn list<S: Store>(
    service: &MemoryService<S>,
    defaults: &Defaults,
    grant: &Grant,
    arguments: ListArguments,
) -> Result<ListResult, Refusal> {
    crate::list::list(service, defaults.namespace(), Some(grant), arguments).await
}
