//! The seam the corrupt-receipt rules need: a way to overwrite a stored receipt behind the store's back.

use std::future::Future;

use memory_core::document::{MemoryDocument, MemoryKey};
use memory_core::error::MemoryError;
use memory_core::in_memory::InMemoryStore;
use memory_core::ports::{MemoryReader, MemoryWriter};
use memory_core::write::{MemoryReceipt, MemoryWrite, WriteOutcome};

/// Overwrites stored receipts, to simulate corrupt storage. Implemented by a store's test adapter only.
pub trait ReceiptTamper: Send + Sync {
    /// Replaces the receipt stored for `(receipt.document.key.namespace, receipt.operation_id)` with
    /// `receipt` as given, without any check, and leaves everything else (current documents, the command
    /// digest if stored apart) as it was. The receipt exists when this is called.
    fn overwrite_receipt(
        &self,
        receipt: MemoryReceipt,
    ) -> impl Future<Output = Result<(), MemoryError>> + Send;
}

impl ReceiptTamper for InMemoryStore {
    async fn overwrite_receipt(&self, receipt: MemoryReceipt) -> Result<(), MemoryError> {
        self.overwrite_receipt_for_tests(receipt);
        Ok(())
    }
}

/// A store paired with a separate tamper (for example a raw connection to the same database), so a store
/// crate need not implement [`ReceiptTamper`] on the store itself.
#[derive(Debug)]
pub struct TamperableStore<S, T> {
    /// The store under test.
    pub store: S,
    /// What overwrites its receipts.
    pub tamper: T,
}

impl<S, T> TamperableStore<S, T> {
    /// Pairs a store with its tamper.
    pub fn new(store: S, tamper: T) -> Self {
        Self { store, tamper }
    }
}

impl<S: MemoryReader, T: Send + Sync> MemoryReader for TamperableStore<S, T> {
    fn read(
        &self,
        key: &MemoryKey,
    ) -> impl Future<Output = Result<Option<MemoryDocument>, MemoryError>> + Send {
        self.store.read(key)
    }

    fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> impl Future<Output = Result<Vec<Option<MemoryDocument>>, MemoryError>> + Send {
        self.store.read_many(keys)
    }
}

impl<S: MemoryWriter, T: Send + Sync> MemoryWriter for TamperableStore<S, T> {
    fn apply(
        &self,
        write: MemoryWrite,
    ) -> impl Future<Output = Result<WriteOutcome, MemoryError>> + Send {
        self.store.apply(write)
    }
}

impl<S: Send + Sync, T: ReceiptTamper> ReceiptTamper for TamperableStore<S, T> {
    fn overwrite_receipt(
        &self,
        receipt: MemoryReceipt,
    ) -> impl Future<Output = Result<(), MemoryError>> + Send {
        self.tamper.overwrite_receipt(receipt)
    }
}
