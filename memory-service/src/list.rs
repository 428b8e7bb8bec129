//! `memory_list` and `memory list`: the documents of one namespace, newest first, a page at a time.
//!
//! The store's listing read ([`memory_core::MemoryLister`]) gives the page; documents a forgotten
//! source contributed are then hidden exactly as `memory_get` hides them, so a page may hold fewer
//! documents than its limit while `next_cursor` still leads on. The cursor is the store's opaque one.

use std::sync::Arc;

use memory_core::{DynamicNamespace, ListCursor};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::blocking::on_blocking_pool;
use crate::database::Store;
use crate::grants::Grant;
use crate::refusal::Refusal;
use crate::service::MemoryService;
use crate::wire::{WireDocument, address_of};

/// The page size when none is given.
pub const DEFAULT_LIST_LIMIT: u32 = 20;
/// The largest page size.
pub const MAX_LIST_LIMIT: u32 = 100;

/// Arguments of `memory_list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArguments {
    /// The `next_cursor` of the previous page; absent or null for the first page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Most documents in the page: 1 to 100, default 20.
    #[serde(default)]
    pub limit: Option<u32>,
}

/// Result of `memory_list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListResult {
    /// The documents, newest first.
    pub documents: Vec<WireDocument>,
    /// The cursor of the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// One page of `namespace`'s documents; limits and the cursor are checked before the store is read.
/// With a `grant`, the documents it cannot read are left out of the page (which may then hold fewer
/// than `limit`; the cursor still continues after the whole page).
pub async fn list<S: Store>(
    service: &MemoryService<S>,
    namespace: &DynamicNamespace,
    grant: Option<&Grant>,
    arguments: ListArguments,
) -> Result<ListResult, Refusal> {
    let limit = arguments.limit.unwrap_or(DEFAULT_LIST_LIMIT);
    if limit == 0 {
        return Err(Refusal::invalid_input("limit must be at least 1"));
    }
    if limit > MAX_LIST_LIMIT {
        return Err(Refusal::too_large(
            "limit",
            u64::from(MAX_LIST_LIMIT),
            u64::from(limit),
        ));
    }
    let cursor = arguments
        .cursor
        .as_deref()
        .map(ListCursor::decode)
        .transpose()?;
    let address = address_of(namespace)?;
    let store: Arc<S> = Arc::clone(service.store());
    let page = on_blocking_pool(async move {
        store
            .list(
                &address,
                cursor,
                usize::try_from(limit).unwrap_or(usize::MAX),
            )
            .await
    })
    .await??;
    let mut documents = page.documents;
    if let Some(grant) = grant {
        documents.retain(|document| grant.can_read(document));
    }
    let visible = service.recall().visible_all(documents).await?;
    Ok(ListResult {
        documents: visible
            .into_iter()
            .map(WireDocument::from_document)
            .collect::<Result<_, _>>()?,
        next_cursor: page.next.map(ListCursor::encode),
    })
}
