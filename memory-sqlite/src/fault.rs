//! Fault-injection points around every write transaction, for crash and fault tests.
//!
//! They are compiled only with the crate feature `failpoints` and stay inert until configured through the
//! [`fail`] crate (`fail::cfg(name, action)` or the `FAILPOINTS` environment variable). The action
//! `return(ARG)` chooses the fault:
//! - `return(abort)`: the process aborts on the spot, like a crash with no clean shutdown;
//! - `return(io)`: an injected I/O failure; inside the transaction or at commit it poisons the store;
//! - `return` with any other argument: an ordinary injected failure (the transaction rolls back).
//!
//! `panic`, `sleep(ms)`, `pause` and the other actions of the `fail` crate work as usual.

/// Before `BEGIN IMMEDIATE`: nothing has been written yet.
pub const BEFORE_BEGIN: &str = "memory_sqlite::before_begin";
/// Inside the transaction, after every row was written, before `COMMIT`.
pub const INSIDE_TRANSACTION: &str = "memory_sqlite::inside_transaction";
/// In place of `COMMIT`: a fault here stands for a failed commit or sync; the transaction rolls back.
pub const COMMIT: &str = "memory_sqlite::commit";
/// Right after `COMMIT` returned: the write is durable, the caller has not been answered.
pub const AFTER_COMMIT: &str = "memory_sqlite::after_commit";
/// The lost acknowledgement: the write committed, then the caller receives an error instead of its receipt.
pub const LOST_ACKNOWLEDGEMENT: &str = "memory_sqlite::lost_acknowledgement";

/// What an injected fault turns into inside the write path.
#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
pub(crate) fn injected(point: &'static str, argument: Option<&str>) -> crate::transaction::TxError {
    match argument {
        Some("abort") => std::process::abort(),
        Some("io") => crate::transaction::TxError::Injected { point, io: true },
        _ => crate::transaction::TxError::Injected { point, io: false },
    }
}

/// Evaluates a failpoint inside a function returning `Result<_, TxError>`.
macro_rules! failpoint {
    ($name:expr) => {
        fail::fail_point!($name, |argument: Option<String>| Err(
            $crate::fault::injected($name, argument.as_deref())
        ))
    };
}
pub(crate) use failpoint;
