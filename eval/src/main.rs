//! `memory-eval`: the main job of the README.
//!
//! Until the evaluation harness lands it runs a short demonstration of the memory model on a store:
//! a create, an idempotent replay, a stale-revision conflict, an update, a withdrawal and a refused put
//! after it, printing what happened at each step.

use anyhow::{Context, Result};
use memory_core::{
    DocumentId, MemoryContent, MemoryError, MemoryReader, MemoryScope, MemoryWrite, MemoryWriter,
    Namespace, NamespaceDefinition, OperationId, Revision,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The demonstration's namespace definition: one user's conversations in one tenant.
struct UserConversations;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct UserIdentity {
    tenant: String,
    user: String,
}

impl NamespaceDefinition for UserConversations {
    const NAME: &'static str = "user-conversations";
    const VERSION: u64 = 1;
    type Identity = UserIdentity;
}

fn put(
    namespace: &Namespace<UserConversations>,
    operation: &str,
    expected: Option<Revision>,
    text: &str,
) -> Result<MemoryWrite> {
    Ok(MemoryWrite::Put {
        key: namespace.key(DocumentId::new("favourite-editor")?),
        operation_id: OperationId::new(operation)?,
        expected_revision: expected,
        locator: "demo:thread-1#1".to_owned(),
        content: MemoryContent::text(text),
        scopes: vec![MemoryScope::new("assistant")?],
    })
}

fn describe(result: &Result<memory_core::WriteOutcome, MemoryError>) -> String {
    match result {
        Ok(outcome) => format!(
            "ok revision={} replayed={}",
            outcome.receipt.document.revision, outcome.replayed
        ),
        Err(error) => format!("refused kind={} ({error})", error.kind().as_str()),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let store = memory_core::InMemoryStore::new();
    let namespace = Namespace::<UserConversations>::make(UserIdentity {
        tenant: "acme".to_owned(),
        user: "ada".to_owned(),
    })?;

    let create = put(&namespace, "op-1", None, "Ada prefers Helix as her editor.")?;
    let first = store.apply(create.clone()).await;
    println!("create:            {}", describe(&first));
    let first_revision = first.context("create failed")?.receipt.document.revision;

    let replay = store.apply(create).await;
    println!("replay same op:    {}", describe(&replay));

    let update = put(&namespace, "op-2", Some(first_revision.clone()), "Ada switched to Zed.")?;
    let second = store.apply(update).await;
    println!("update:            {}", describe(&second));
    let second_revision = second.context("update failed")?.receipt.document.revision;

    let stale = put(&namespace, "op-3", Some(first_revision), "Ada uses vim.")?;
    println!("stale update:      {}", describe(&store.apply(stale).await));

    let withdraw = MemoryWrite::Withdraw {
        key: namespace.key(DocumentId::new("favourite-editor")?),
        operation_id: OperationId::new("op-4")?,
        expected_revision: second_revision.clone(),
        reason: "user asked to forget".to_owned(),
    };
    println!("withdraw:          {}", describe(&store.apply(withdraw).await));

    let after = put(&namespace, "op-5", Some(second_revision), "Ada uses Emacs.")?;
    println!("put after forget:  {}", describe(&store.apply(after).await));

    let read = store
        .read(&namespace.key(DocumentId::new("favourite-editor")?))
        .await?;
    println!("read after forget: {}", if read.is_none() { "none" } else { "present" });
    Ok(())
}
