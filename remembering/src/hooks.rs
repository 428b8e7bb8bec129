//! Named points of a pass where tests inject crashes, pauses and faults. Production passes use
//! [`NoHooks`], which does nothing.
//!
//! Why hooks and not the `fail` crate that `memory-sqlite` uses (feature `failpoints`): the `fail`
//! registry is process-global, so two tests in one test binary that configure the same point interfere
//! unless every such test is serialized. A pass's faults here are per processor instance, so each test
//! injects its own crash, pause or side effect (forget a source mid-pass, let a second worker claim)
//! deterministically and in parallel with other tests. Hooks can also *await* (a pause until a second
//! worker has advanced), which a `fail` action cannot do inside async code without blocking the
//! runtime. The cost is one virtual call per point on a path dominated by SQLite and memory writes;
//! no feature flag is needed because [`NoHooks`] injects nothing.

use std::future::Future;
use std::pin::Pin;

/// A point in a pass, in the order a pass reaches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PassPoint {
    /// The lease was claimed.
    Claimed,
    /// A record's output was extracted, not yet saved.
    Extracted,
    /// The pending output (or proposal) was saved.
    OutputSaved,
    /// Just before a write is sent to the memory store.
    BeforeApply,
    /// The memory store answered a write.
    AfterApply,
    /// The cursor advanced (or the intent completed).
    Advanced,
    /// The source was re-checked before the command was prepared.
    Rechecked,
    /// The exact command was saved, not yet sent.
    CommandSaved,
}

impl PassPoint {
    /// Every point a committed-activity pass reaches, for crash tests.
    pub const ACTIVITY: [Self; 6] = [
        Self::Claimed,
        Self::Extracted,
        Self::OutputSaved,
        Self::BeforeApply,
        Self::AfterApply,
        Self::Advanced,
    ];

    /// A stable name, for test arguments.
    pub fn name(self) -> &'static str {
        match self {
            Self::Claimed => "claimed",
            Self::Extracted => "extracted",
            Self::OutputSaved => "output-saved",
            Self::BeforeApply => "before-apply",
            Self::AfterApply => "after-apply",
            Self::Advanced => "advanced",
            Self::Rechecked => "rechecked",
            Self::CommandSaved => "command-saved",
        }
    }

    /// The point of a name.
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::Claimed,
            Self::Extracted,
            Self::OutputSaved,
            Self::BeforeApply,
            Self::AfterApply,
            Self::Advanced,
            Self::Rechecked,
            Self::CommandSaved,
        ]
        .into_iter()
        .find(|point| point.name() == name)
    }
}

/// A boxed future returned by hooks.
pub type HookFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Called at every [`PassPoint`].
pub trait PassHooks: Send + Sync {
    /// Reached `point`; may pause (await), crash the process, or return at once.
    fn at(&self, point: PassPoint) -> HookFuture<'_>;
}

/// Hooks that do nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl PassHooks for NoHooks {
    fn at(&self, _point: PassPoint) -> HookFuture<'_> {
        Box::pin(std::future::ready(()))
    }
}
