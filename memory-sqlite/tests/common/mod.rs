//! Builders shared by this crate's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use memory_core::{
    DocumentId, ManualClock, MemoryAccess, MemoryAttribution, MemoryContent, MemoryKey,
    MemoryScope, MemoryWrite, NamespaceAddress, OperationId, Revision,
};
use memory_sqlite::{SqliteStore, Synchronous};

/// The fixed time every test store reads from its clock.
pub const NOW: i64 = 1_700_000_000_000;

/// A fresh directory that outlives the test (removed with the system's temporary files).
pub fn fresh_dir() -> PathBuf {
    tempfile::tempdir().expect("temporary directory").keep()
}

/// A fresh store file path.
pub fn fresh_path() -> PathBuf {
    fresh_dir().join("memory.sqlite")
}

/// Opens a store on a manual clock standing at [`NOW`].
pub fn open(path: &Path) -> SqliteStore {
    SqliteStore::builder()
        .clock(Arc::new(ManualClock::new(NOW)))
        .synchronous(Synchronous::Normal)
        .open(path)
        .expect("store opens")
}

pub fn namespace(tenant: &str) -> NamespaceAddress {
    NamespaceAddress::encode(
        "memory-sqlite-tests",
        1,
        &serde_json::json!({ "tenant": tenant }),
    )
    .expect("valid namespace")
}

pub fn key(tenant: &str, id: &str) -> MemoryKey {
    MemoryKey {
        namespace: namespace(tenant),
        id: DocumentId::new(id).expect("valid id"),
    }
}

pub fn scope(name: &str) -> MemoryScope {
    MemoryScope::new(name).expect("valid scope")
}

pub fn access(tenant: &str, scope_name: &str) -> MemoryAccess {
    MemoryAccess {
        namespace: namespace(tenant),
        scope: scope(scope_name),
    }
}

pub fn op(id: &str) -> OperationId {
    OperationId::new(id).expect("valid operation id")
}

/// Content with one attribution by `speaker`.
pub fn said(text: &str, speaker: &str) -> MemoryContent {
    MemoryContent {
        attributions: vec![MemoryAttribution {
            origin_id: "thread-1".to_owned(),
            speaker: speaker.to_owned(),
            observers: Vec::new(),
            locator: "record-1".to_owned(),
            activity_at: None,
            interpretation: "stated".to_owned(),
        }],
        ..MemoryContent::text(text)
    }
}

/// A put with the given scopes.
pub fn put(
    key: &MemoryKey,
    operation: &str,
    expected: Option<&Revision>,
    content: MemoryContent,
    scopes: &[&str],
) -> MemoryWrite {
    MemoryWrite::Put {
        key: key.clone(),
        operation_id: op(operation),
        expected_revision: expected.cloned(),
        locator: format!("loc:{}", key.id),
        content,
        scopes: scopes.iter().map(|name| scope(name)).collect(),
    }
}

pub fn withdraw(key: &MemoryKey, operation: &str, expected: &Revision) -> MemoryWrite {
    MemoryWrite::Withdraw {
        key: key.clone(),
        operation_id: op(operation),
        expected_revision: expected.clone(),
        reason: "asked to forget".to_owned(),
    }
}

/// Sizes of the database file and its WAL (0 when absent).
pub fn file_sizes(path: &Path) -> (u64, u64) {
    let size = |path: &Path| std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    (size(path), size(Path::new(&wal)))
}
