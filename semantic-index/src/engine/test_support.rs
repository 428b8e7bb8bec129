//! What the engine's unit tests share: a key, a written document and the test profile.

#![allow(clippy::unwrap_used)]

use memory_core::{
    DocumentId, InMemoryStore, MemoryAccess, MemoryContent, MemoryKey, MemoryScope, MemoryWrite,
    MemoryWriter, NamespaceAddress, OperationId,
};

use crate::profile::{ChunkingConfig, Preprocessing, SemanticProfile};

const NAMESPACE: &str = r#"[1,"engine-tests",1,{"user":"u"}]"#;

/// Document `id` of the tests' namespace.
pub(crate) fn key(id: &str) -> MemoryKey {
    MemoryKey {
        namespace: NamespaceAddress::parse(NAMESPACE).unwrap(),
        id: DocumentId::new(id).unwrap(),
    }
}

/// The tests' namespace through scope `recall`.
pub(crate) fn access() -> MemoryAccess {
    MemoryAccess {
        namespace: NamespaceAddress::parse(NAMESPACE).unwrap(),
        scope: MemoryScope::new("recall").unwrap(),
    }
}

/// Creates document `id` with `text`, visible through scope `recall`.
pub(crate) async fn put(documents: &InMemoryStore, id: &str, text: &str, operation: usize) {
    documents
        .apply(MemoryWrite::Put {
            key: key(id),
            operation_id: OperationId::new(format!("op-{operation}")).unwrap(),
            expected_revision: None,
            locator: format!("test:{id}"),
            content: MemoryContent::text(text),
            scopes: vec![MemoryScope::new("recall").unwrap()],
        })
        .await
        .unwrap();
}

/// The deterministic embedder's profile: 16 dimensions, chunks of 64 bytes, text only.
pub(crate) fn profile() -> SemanticProfile {
    SemanticProfile {
        provider: "test".to_owned(),
        model: "deterministic".to_owned(),
        model_revision: "1".to_owned(),
        dimensions: 16,
        max_sequence_length: 128,
        chunking: ChunkingConfig {
            max_chunk_bytes: 64,
        },
        preprocessing: Preprocessing::TextOnly,
    }
}
