//! The activity port suites: the rules of [`memory_core::activity`] that every thread log,
//! progress store and remembering store must keep, checked through the ports only.
//!
//! A backend describes itself with an [`ActivityBackend`]: a fresh, empty set of stores whose handles
//! can be opened as often as a rule needs (each one "another process" where the backend has
//! connections), and runs every suite with one call:
//!
//! ```no_run
//! use memory_testkit::InMemoryActivity;
//! use memory_testkit::activity::run_all;
//!
//! #[test]
//! fn in_memory_activity_keeps_every_rule() {
//!     run_all(InMemoryActivity::new).assert_all_passed();
//! }
//! ```
//!
//! Every rule runs on a fresh backend from the factory; the report names each broken rule. The suites
//! are synchronous, like the ports: call them from a plain `#[test]`, not inside an async runtime.

mod gappy;
mod progress;
mod remembering;
mod thread_log;

pub use gappy::GappyLog;
pub use progress::{PROGRESS_RULES, run_progress_suite};
pub use remembering::{REMEMBERING_RULES, run_remembering_suite};
pub use thread_log::{THREAD_LOG_RULES, run_thread_log_suite};

use std::fmt::Debug;

use super::fixtures::Failure;
use super::reference::InMemoryActivity;
use super::report::ContractReport;
use memory_core::activity::{
    ActivityError, PendingOutput, ProcessorId, ProcessorVersion, ProgressKey, ProgressStore,
    RememberingStore, Sequence, ThreadDestination, ThreadId, ThreadLog, WorkerId,
};
use memory_core::document::MemoryScope;

/// One backend's activity stores, as the suites see them.
///
/// The methods panic when the backend cannot open a handle: that is a failed test setup, not a rule.
pub trait ActivityBackend {
    /// Its thread log.
    type Log: ThreadLog;
    /// Its progress store.
    type Progress: ProgressStore;
    /// Its remembering store.
    type Remembering: RememberingStore;

    /// A handle on this backend's thread log; each call may open a new connection (or pool), as
    /// another process sharing the storage would.
    fn thread_log(&self) -> Self::Log;

    /// A handle on this backend's progress store (see [`ActivityBackend::thread_log`]).
    fn progress(&self) -> Self::Progress;

    /// A handle on this backend's remembering store (see [`ActivityBackend::thread_log`]).
    fn remembering(&self) -> Self::Remembering;
}

impl ActivityBackend for InMemoryActivity {
    type Log = Self;
    type Progress = Self;
    type Remembering = Self;

    fn thread_log(&self) -> Self {
        self.clone()
    }

    fn progress(&self) -> Self {
        self.clone()
    }

    fn remembering(&self) -> Self {
        self.clone()
    }
}

/// Runs the thread log, progress and remembering suites, each rule on a fresh backend from `factory`.
pub fn run_all<B, F>(mut factory: F) -> ContractReport
where
    B: ActivityBackend,
    F: FnMut() -> B,
{
    let mut report = run_thread_log_suite(&mut factory);
    report.absorb(run_progress_suite(&mut factory));
    report.absorb(run_remembering_suite(&mut factory));
    report
}

/// Runs only the named rules (of the three suites), for narrowing down a failure or for testing the
/// suites themselves; a name that is no rule is reported as a failure.
pub fn run_activity_rules<B, F>(mut factory: F, rules: &[&str]) -> ContractReport
where
    B: ActivityBackend,
    F: FnMut() -> B,
{
    let selected = |rule: &str| rules.contains(&rule);
    let mut report = ContractReport::default();
    thread_log::run_selected(&mut factory, &selected, &mut report);
    progress::run_selected(&mut factory, &selected, &mut report);
    remembering::run_selected(&mut factory, &selected, &mut report);
    for rule in rules {
        let known = [THREAD_LOG_RULES, PROGRESS_RULES, REMEMBERING_RULES]
            .iter()
            .any(|names| names.contains(rule));
        if !known {
            report.record(
                "unknown-rule",
                Err(format!("no activity rule is named `{rule}`")),
            );
        }
    }
    report
}

/// Defines a synchronous suite from one list of `"rule-name" => check` pairs: the public list of
/// names and the runner, so the two cannot drift apart.
macro_rules! sync_suite {
    (
        $(#[$names_doc:meta])* $names:ident;
        $(#[$run_doc:meta])* $run:ident;
        $backend:ident;
        $($rule:literal => $check:ident),+ $(,)?
    ) => {
        $(#[$names_doc])*
        pub const $names: &[&str] = &[$($rule),+];

        pub(super) fn run_selected<B: $backend, F: FnMut() -> B>(
            factory: &mut F,
            selected: &dyn Fn(&str) -> bool,
            report: &mut $crate::report::ContractReport,
        ) {
            $(
                if selected($rule) {
                    let backend = factory();
                    let result: $crate::fixtures::Checked = $check(&backend);
                    report.record($rule, result.map_err(|failure| failure.0));
                }
            )+
        }

        $(#[$run_doc])*
        pub fn $run<B: $backend, F: FnMut() -> B>(
            mut factory: F,
        ) -> $crate::report::ContractReport {
            let mut report = $crate::report::ContractReport::default();
            run_selected(&mut factory, &|_| true, &mut report);
            report
        }
    };
}
pub(crate) use sync_suite;

/// The value of a call that must succeed, or a failure naming `step`.
pub(crate) fn ok<T>(result: Result<T, ActivityError>, step: &str) -> Result<T, Failure> {
    result.map_err(|error| Failure(format!("{step}: refused with {error:?}")))
}

/// Checks that a call was refused the way `expected` says, or fails naming `step`.
pub(crate) fn refused<T: Debug>(
    result: Result<T, ActivityError>,
    expected: impl FnOnce(&ActivityError) -> bool,
    step: &str,
) -> Result<(), Failure> {
    match result {
        Err(error) if expected(&error) => Ok(()),
        Err(error) => Err(Failure(format!("{step}: refused with {error:?}"))),
        Ok(value) => Err(Failure(format!("{step}: accepted ({value:?})"))),
    }
}

pub(crate) fn thread(name: &str) -> Result<ThreadId, Failure> {
    Ok(ThreadId::new(name)?)
}

/// The per-user destination of `user`, recallable through `scopes`.
pub(crate) fn destination(user: &str, scopes: &[&str]) -> Result<ThreadDestination, Failure> {
    let scopes = scopes
        .iter()
        .map(|scope| MemoryScope::new(*scope))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ThreadDestination::for_user(user, scopes)?)
}

pub(crate) fn worker(name: &str) -> Result<WorkerId, Failure> {
    Ok(WorkerId::new(name)?)
}

pub(crate) fn progress_key(
    processor: &str,
    version: u64,
    thread_name: &str,
) -> Result<ProgressKey, Failure> {
    Ok(ProgressKey {
        processor: ProcessorId::new(processor)?,
        version: ProcessorVersion::new(version),
        thread: thread(thread_name)?,
    })
}

pub(crate) fn pending(
    key: &ProgressKey,
    sequence: u64,
    output: serde_json::Value,
) -> PendingOutput {
    PendingOutput {
        sequence: Sequence::new(sequence),
        work_id: key.work_id(Sequence::new(sequence)),
        output,
    }
}
