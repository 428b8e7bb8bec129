//! What the load clients measured and saw, and the checks of every answer against its caller's
//! tenant.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::tenants::Tenant;

/// Cross-tenant answers (and missing writes) kept as examples in the report.
pub const EXAMPLES: usize = 5;
/// The slowest calls kept for the report.
pub const SLOWEST: usize = 20;

/// One of the slowest calls: when it started and how long it took, so stalls that hit every
/// client at once show as calls started at about the same time.
#[derive(Debug, Clone, Serialize)]
pub struct SlowCall {
    /// Its kind.
    pub op: &'static str,
    /// Seconds since the load started.
    pub at_seconds: f64,
    /// Its time, ms.
    pub ms: f64,
}

/// Keeps the [`SLOWEST`] slowest of `calls`, slowest first.
pub fn keep_slowest(calls: &mut Vec<SlowCall>) {
    calls.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    calls.truncate(SLOWEST);
}

/// One kind of call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Hybrid recall.
    Recall,
    /// Remember a new document.
    Remember,
    /// One page of the tenant's documents.
    List,
    /// Forget a document the client remembered.
    Forget,
    /// A call into another tenant's namespace, which must be refused `forbidden`.
    DeliberateRefusal,
}

impl Op {
    /// Every kind, in report order.
    pub const ALL: [Self; 5] = [
        Self::Recall,
        Self::Remember,
        Self::List,
        Self::Forget,
        Self::DeliberateRefusal,
    ];

    /// The report's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Recall => "recall",
            Self::Remember => "remember",
            Self::List => "list",
            Self::Forget => "forget",
            Self::DeliberateRefusal => "deliberate_refusal",
        }
    }
}

/// A write the server acknowledged.
#[derive(Debug, Clone)]
pub struct Acknowledged {
    /// The document id.
    pub id: String,
    /// The acknowledged revision.
    pub revision: String,
    /// Its text.
    pub text: String,
}

/// The deliberate refusals' answers.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Refusals {
    /// Calls made.
    pub attempted: u64,
    /// Answered `forbidden`, as they must be.
    pub forbidden: u64,
    /// Refused with another kind.
    pub other_kind: u64,
    /// Answered as if allowed.
    pub answered: u64,
}

/// What one client measured and saw.
#[derive(Debug, Default)]
pub struct ClientOutcome {
    /// Milliseconds of each successful call, by kind.
    pub latencies: BTreeMap<Op, Vec<f64>>,
    /// The slowest successful calls.
    pub slowest: Vec<SlowCall>,
    /// Calls by kind (answered or not).
    pub calls: BTreeMap<Op, u64>,
    /// Errors by kind of call and error kind (tool refusals' kinds; `http-429`, `unreachable`,
    /// `protocol` for transport errors). Deliberate refusals answered `forbidden` are not here.
    pub errors: BTreeMap<(Op, String), u64>,
    /// Errors that are neither deliberate refusals nor a killed server's downtime.
    pub unexpected: u64,
    /// Errors of calls to a killed server before it was back (PostgreSQL run).
    pub restart_unavailable: u64,
    /// Reconnections (new sessions) after the first.
    pub reconnects: u64,
    /// The deliberate refusals.
    pub refusals: Refusals,
    /// Answers holding another tenant's document or passage.
    pub cross_tenant: u64,
    /// A few of them, described.
    pub cross_tenant_examples: Vec<String>,
    /// Acknowledged remembers not forgotten since.
    pub alive: Vec<Acknowledged>,
    /// Acknowledged forgets.
    pub forgotten: Vec<Acknowledged>,
    /// Forgets not acknowledged (the document's state is unknown, so it is not checked).
    pub unknown_state: u64,
}

impl ClientOutcome {
    pub(super) fn error(&mut self, op: Op, kind: &str, unexpected: bool) {
        *self.errors.entry((op, kind.to_owned())).or_default() += 1;
        if unexpected {
            self.unexpected += 1;
        }
    }

    pub(super) fn cross(&mut self, what: String) {
        self.cross_tenant += 1;
        if self.cross_tenant_examples.len() < EXAMPLES {
            self.cross_tenant_examples.push(what);
        }
    }

    /// Adds `other`'s errors (not its calls or times) to this one: the idle client's.
    pub fn absorb_errors(&mut self, other: &Self) {
        for (key, count) in &other.errors {
            *self.errors.entry(key.clone()).or_default() += count;
        }
        self.unexpected += other.unexpected;
        self.cross_tenant += other.cross_tenant;
        self.cross_tenant_examples
            .extend(other.cross_tenant_examples.iter().take(EXAMPLES).cloned());
    }

    /// Records a successful call of `op` that took `elapsed` and ended now.
    pub fn record(&mut self, op: Op, epoch: Instant, elapsed: Duration) {
        let ms = elapsed.as_secs_f64() * 1_000.0;
        self.latencies.entry(op).or_default().push(ms);
        let started = Instant::now()
            .checked_sub(elapsed)
            .unwrap_or(epoch)
            .saturating_duration_since(epoch);
        self.slowest.push(SlowCall {
            op: op.name(),
            at_seconds: started.as_secs_f64(),
            ms,
        });
        if self.slowest.len() >= 4 * SLOWEST {
            keep_slowest(&mut self.slowest);
        }
    }

    /// Merges `other` into this one.
    pub fn merge(&mut self, other: Self) {
        for (op, mut samples) in other.latencies {
            self.latencies.entry(op).or_default().append(&mut samples);
        }
        self.slowest.extend(other.slowest);
        keep_slowest(&mut self.slowest);
        for (op, calls) in other.calls {
            *self.calls.entry(op).or_default() += calls;
        }
        for (key, count) in other.errors {
            *self.errors.entry(key).or_default() += count;
        }
        self.unexpected += other.unexpected;
        self.restart_unavailable += other.restart_unavailable;
        self.reconnects += other.reconnects;
        self.refusals.attempted += other.refusals.attempted;
        self.refusals.forbidden += other.refusals.forbidden;
        self.refusals.other_kind += other.refusals.other_kind;
        self.refusals.answered += other.refusals.answered;
        self.cross_tenant += other.cross_tenant;
        for example in other.cross_tenant_examples {
            if self.cross_tenant_examples.len() < EXAMPLES {
                self.cross_tenant_examples.push(example);
            }
        }
        self.alive.extend(other.alive);
        self.forgotten.extend(other.forgotten);
        self.unknown_state += other.unknown_state;
    }
}

/// The after-load check of one client's writes.
#[derive(Debug, Default)]
pub struct WriteCheck {
    /// Acknowledged remembers not forgotten, read back.
    pub checked: u64,
    /// Of those, absent or not as acknowledged.
    pub missing: u64,
    /// A few of them.
    pub examples: Vec<String>,
    /// Acknowledged forgets read back.
    pub forgets_checked: u64,
    /// Of those, still visible.
    pub forgets_visible: u64,
    /// Failed reads (retried).
    pub errors: u64,
    /// Another tenant's documents answered.
    pub cross_tenant: Vec<String>,
}

impl WriteCheck {
    /// Adds `other` to this one.
    pub fn merge(&mut self, other: Self) {
        self.checked += other.checked;
        self.missing += other.missing;
        for example in other.examples {
            if self.examples.len() < EXAMPLES {
                self.examples.push(example);
            }
        }
        self.forgets_checked += other.forgets_checked;
        self.forgets_visible += other.forgets_visible;
        self.errors += other.errors;
        self.cross_tenant.extend(other.cross_tenant);
    }
}

/// Every recalled passage of `content` that is not `tenant`'s.
pub fn passages_foreign(tenant: &Tenant, content: &Value) -> Vec<String> {
    content
        .get("passages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|passage| {
            let id = passage
                .pointer("/source/id")
                .and_then(Value::as_str)
                .unwrap_or("");
            tenant.foreign(id, passage.get("content"))
        })
        .collect()
}

/// Whether an answered document (a `WireDocument`) is not `tenant`'s: its id, its metadata's tenant
/// and its namespace's identity.
pub fn document_foreign(tenant: &Tenant, document: Option<&Value>) -> Vec<String> {
    let Some(document) = document.filter(|document| !document.is_null()) else {
        return Vec::new();
    };
    let id = document.get("id").and_then(Value::as_str).unwrap_or("");
    let mut foreign: Vec<String> = tenant
        .foreign(id, document.get("content"))
        .into_iter()
        .collect();
    let user = document
        .pointer("/namespace/identity/user")
        .and_then(Value::as_str);
    if user.is_some_and(|user| user != tenant.name) {
        foreign.push(format!("document {id} is in {user:?}'s namespace"));
    }
    foreign
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn answers_are_checked_against_the_caller() {
        let tenants = super::super::tenants::tenants(3);
        let mine = json!({"passages": [{"source": {"id": "t1-s1"}, "content": {"metadata": {"tenant": "tenant-001"}}}]});
        assert!(passages_foreign(&tenants[1], &mine).is_empty());
        assert_eq!(passages_foreign(&tenants[2], &mine).len(), 1);
        let document = json!({"id": "t1-s4", "namespace": {"identity": {"user": "tenant-002"}}});
        assert_eq!(document_foreign(&tenants[1], Some(&document)).len(), 1);
    }
}
