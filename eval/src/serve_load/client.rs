//! One load client: an MCP session of its own (memory-cli's hook client, [`ServerSession`]) with its
//! tenant's token, calling the tools in the run's mix, timing every call and checking every answer
//! against its tenant.
//!
//! The mix: 1% deliberate refusals (every hundredth call, the first included: a `memory_recall` or
//! a `memory_get` in another tenant's namespace, which must answer `forbidden`; only with grants),
//! and of the rest 70% recall (`memory_search`, hybrid), 15% remember (`memory_remember`), 10% list
//! (`memory_list`, one page of 20) and 5% forget (`memory_forget` of a document this client
//! remembered; a remember instead when it has none left). Without grants (a binary before issue 32) every client shares one token and the
//! precise tools stand in: `memory_recall` hybrid, `memory_put`, `memory_recall` mode `recent` for the
//! list, `memory_withdraw`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use memory_client::discovery::Discovery;
use memory_client::server::{ServerError, ServerSession, ToolAnswer};
use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use super::outcome::{
    Acknowledged, ClientOutcome, EXAMPLES, Op, WriteCheck, document_foreign, passages_foreign,
};
use super::tenants::{Tenant, Texts};

/// Passages a recall answers (`memory_search`'s default).
const RECALL_ITEMS: u32 = 5;
/// Documents a list page holds.
const LIST_LIMIT: u32 = 20;
/// One call in this many is a deliberate refusal: 1%.
const REFUSAL_EVERY: u64 = 100;

/// One server as its clients see it: its URL, and whether it is down (killed, not yet back).
#[derive(Debug)]
pub struct Endpoint {
    /// The MCP URL (a restart on another port changes it).
    pub url: RwLock<String>,
    /// Bumped at every kill: a session from an earlier generation is gone.
    pub generation: AtomicU64,
    /// Set just before a kill, cleared once the restarted server is ready.
    pub down: AtomicBool,
    /// Calls this server answered successfully (the survivor's calls during the other's downtime).
    pub answered: AtomicU64,
}

impl Endpoint {
    /// A server at `url`, up.
    pub fn new(url: &str) -> Self {
        Self {
            url: RwLock::new(url.to_owned()),
            generation: AtomicU64::new(0),
            down: AtomicBool::new(false),
            answered: AtomicU64::new(0),
        }
    }

    /// The current URL.
    pub fn url(&self) -> String {
        self.url
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Marks it down (before a kill).
    pub fn going_down(&self) {
        self.down.store(true, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Marks it up again at `url`.
    pub fn back_up(&self, url: &str) {
        *self
            .url
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = url.to_owned();
        self.down.store(false, Ordering::SeqCst);
    }

    fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}

/// What every client shares.
#[derive(Debug, Default)]
pub struct Shared {
    /// Set when the run is over.
    pub stop: AtomicBool,
    /// Calls completed by every client.
    pub completed: AtomicU64,
}

/// What one client does.
#[derive(Debug, Clone)]
pub struct ClientPlan {
    /// 0-based client index.
    pub index: usize,
    /// Its tenant.
    pub tenant: Tenant,
    /// Every tenant (the targets of deliberate refusals).
    pub tenants: Arc<Vec<Tenant>>,
    /// Documents seeded in the store (to name another tenant's seeded document).
    pub seeded: usize,
    /// Texts to remember and queries to recall.
    pub texts: Arc<Texts>,
    /// The bearer token it sends.
    pub token: String,
    /// Calls to make, or `None` to run until [`Shared::stop`].
    pub ops: Option<u64>,
    /// The run's seed (each client's choices derive from it and its index).
    pub seed: u64,
    /// A tag unique to this run, in every id the client writes.
    pub run_tag: String,
    /// Pause between calls.
    pub think: Duration,
    /// When the load started: the slowest calls are reported in seconds since.
    pub epoch: Instant,
}

/// The kind of a failed call: the tool refusal's kind, or the transport's.
fn error_kind(answer: &Result<ToolAnswer, ServerError>) -> Option<String> {
    match answer {
        Ok(answer) if answer.is_error => Some(
            answer
                .content
                .pointer("/error/kind")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned(),
        ),
        Ok(_) => None,
        Err(error) => Some(transport_kind(error)),
    }
}

/// `unreachable`, `expired-session`, `http-NNN` or `protocol`.
fn transport_kind(error: &ServerError) -> String {
    match error {
        ServerError::Unreachable { .. } => "unreachable".to_owned(),
        ServerError::SessionExpired { .. } => {
            memory_client::server::EXPIRED_SESSION_KIND.to_owned()
        }
        ServerError::Protocol(message) => message
            .split_once("HTTP ")
            .and_then(|(_, rest)| rest.get(..3))
            .filter(|code| code.bytes().all(|byte| byte.is_ascii_digit()))
            .map_or_else(|| "protocol".to_owned(), |code| format!("http-{code}")),
    }
}

/// A client's connection: its session, and the server generation it was opened in.
struct Connection {
    session: Option<ServerSession>,
    generation: u64,
}

/// One client's run.
pub struct Client {
    plan: ClientPlan,
    endpoint: Arc<Endpoint>,
    shared: Arc<Shared>,
    rng: ChaCha8Rng,
    connection: Connection,
    outcome: ClientOutcome,
    remembered: u64,
}

impl Client {
    /// A client of `endpoint`, not yet connected.
    pub fn new(plan: ClientPlan, endpoint: Arc<Endpoint>, shared: Arc<Shared>) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(plan.seed ^ (plan.index as u64).wrapping_mul(0x9e37));
        Self {
            plan,
            endpoint,
            shared,
            rng,
            connection: Connection {
                session: None,
                generation: 0,
            },
            outcome: ClientOutcome::default(),
            remembered: 0,
        }
    }

    /// Opens a session (retrying while the server is down or restarting, until the run stops).
    async fn connect(&mut self) -> anyhow::Result<()> {
        if let Some(session) = self.connection.session.take() {
            session.close().await;
        }
        let mut failures = 0_u32;
        loop {
            if self.endpoint.is_down() {
                if self.shared.stop.load(Ordering::SeqCst) {
                    anyhow::bail!("the run ended while the server was down");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            let generation = self.endpoint.generation();
            let discovery = Discovery {
                version: memory_client::discovery::VERSION,
                url: self.endpoint.url(),
                pid: 0,
                token: Some(self.plan.token.clone()),
            };
            match ServerSession::connect(&discovery).await {
                Ok(session) => {
                    self.connection = Connection {
                        session: Some(session),
                        generation,
                    };
                    return Ok(());
                }
                Err(error) if failures < 50 => {
                    failures += 1;
                    tracing::debug!(%error, "connecting");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Calls `tool`, reconnecting first when the server was restarted since the session opened.
    /// Answers the call's answer and its time.
    async fn call(
        &mut self,
        tool: &str,
        arguments: Value,
    ) -> (Result<ToolAnswer, ServerError>, Duration) {
        if self.connection.session.is_none()
            || self.connection.generation != self.endpoint.generation()
        {
            if self.connection.session.is_some() {
                self.outcome.reconnects += 1;
            }
            if let Err(error) = self.connect().await {
                return (
                    Err(ServerError::Protocol(format!("reconnecting: {error}"))),
                    Duration::ZERO,
                );
            }
        }
        let Some(session) = self.connection.session.as_mut() else {
            return (
                Err(ServerError::Protocol("no session".to_owned())),
                Duration::ZERO,
            );
        };
        let started = Instant::now();
        let answer = session.call_tool(tool, arguments).await;
        let elapsed = started.elapsed();
        if matches!(&answer, Ok(answer) if !answer.is_error) {
            self.endpoint.answered.fetch_add(1, Ordering::Relaxed);
        }
        (answer, elapsed)
    }

    /// Records a failed call of `op`: a call to a killed server (or answered by a session it lost)
    /// is downtime, anything else unexpected; a transport error drops the session.
    fn failed(&mut self, op: Op, answer: &Result<ToolAnswer, ServerError>, kind: &str) {
        let restarted =
            self.endpoint.is_down() || self.connection.generation != self.endpoint.generation();
        if answer.is_err() {
            // The next call opens a new session (the server may have dropped this one).
            self.connection.session = None;
        }
        if restarted && (answer.is_err() || kind == "unavailable") {
            self.outcome.restart_unavailable += 1;
            *self
                .outcome
                .errors
                .entry((op, format!("restart:{kind}")))
                .or_default() += 1;
        } else {
            self.outcome.error(op, kind, true);
        }
    }

    /// What was measured so far, taken (the client starts afresh).
    pub fn take_outcome(&mut self) -> ClientOutcome {
        std::mem::take(&mut self.outcome)
    }

    /// Ends the session; answers what was measured.
    pub async fn finish(mut self) -> ClientOutcome {
        if let Some(session) = self.connection.session.take() {
            session.close().await;
        }
        self.outcome
    }

    /// Pauses a random time between `low` and `2 - low` times the plan's pause (none without one).
    async fn think(&mut self, low: f64) {
        if !self.plan.think.is_zero() {
            let factor = self.rng.random_range(low..2.0 - low);
            tokio::time::sleep(self.plan.think.mul_f64(factor)).await;
        }
    }

    /// Runs the plan; answers what was measured.
    pub async fn run(mut self) -> ClientOutcome {
        // Clients that start together and pause alike would call in bursts: start at a random
        // point of one pause, and draw each pause around its mean.
        self.think(0.0).await;
        let mut made = 0_u64;
        loop {
            if self.shared.stop.load(Ordering::SeqCst)
                || self.plan.ops.is_some_and(|ops| made >= ops)
            {
                break;
            }
            self.one(made).await;
            made += 1;
            self.shared.completed.fetch_add(1, Ordering::Relaxed);
            self.think(0.5).await;
        }
        if let Some(session) = self.connection.session.take() {
            session.close().await;
        }
        self.outcome
    }

    /// The `made`-th call of the mix: every [`REFUSAL_EVERY`]-th (the first included) a deliberate
    /// refusal, the others drawn.
    async fn one(&mut self, made: u64) {
        let refusals = self.plan.tenants.len() > 1;
        if refusals && made.is_multiple_of(REFUSAL_EVERY) {
            return self.deliberate_refusal().await;
        }
        match self.rng.random_range(0..100) {
            0..70 => {
                self.recall().await;
            }
            70..85 => self.remember().await,
            85..95 => self.list().await,
            _ if self.outcome.alive.is_empty() => self.remember().await,
            _ => self.forget().await,
        }
    }

    /// A hybrid recall of a random query; answers whether it succeeded.
    pub async fn recall(&mut self) -> bool {
        let query = self
            .plan
            .texts
            .query(self.rng.random_range(0..usize::MAX))
            .to_owned();
        let arguments = json!({"query": query, "limit": RECALL_ITEMS});
        self.timed(Op::Recall, "memory_search", arguments, |tenant, content| {
            passages_foreign(tenant, content)
        })
        .await
        .is_some()
    }

    /// One call of `op`; on success records its time, checks its content and answers it.
    async fn timed(
        &mut self,
        op: Op,
        tool: &str,
        arguments: Value,
        check: impl Fn(&Tenant, &Value) -> Vec<String>,
    ) -> Option<Value> {
        *self.outcome.calls.entry(op).or_default() += 1;
        let (answer, elapsed) = self.call(tool, arguments).await;
        if let Some(kind) = error_kind(&answer) {
            self.failed(op, &answer, &kind);
            return None;
        }
        let content = answer.map(|answer| answer.content).ok()?;
        self.outcome.record(op, self.plan.epoch, elapsed);
        for foreign in check(&self.plan.tenant, &content) {
            self.outcome
                .cross(format!("{} {tool}: {foreign}", self.plan.tenant.name));
        }
        Some(content)
    }

    async fn remember(&mut self) {
        let text = self
            .plan
            .texts
            .statement(self.rng.random_range(0..usize::MAX))
            .to_owned();
        let id = format!(
            "{}-c{}-{}-r{}",
            self.plan.tenant.tag, self.plan.index, self.plan.run_tag, self.remembered
        );
        self.remembered += 1;
        let arguments =
            json!({"text": text, "id": id, "metadata": {"tenant": self.plan.tenant.name}});
        let answer = self
            .timed(
                Op::Remember,
                "memory_remember",
                arguments,
                |tenant, content| document_foreign(tenant, content.get("document")),
            )
            .await;
        if let Some(revision) = answer
            .as_ref()
            .and_then(|answer| answer.get("revision"))
            .and_then(Value::as_str)
        {
            self.outcome.alive.push(Acknowledged {
                id,
                revision: revision.to_owned(),
                text,
            });
        }
    }

    async fn list(&mut self) {
        let arguments = json!({"limit": LIST_LIMIT});
        self.timed(Op::List, "memory_list", arguments, |tenant, content| {
            let mut foreign = passages_foreign(tenant, content);
            for document in content
                .get("documents")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                foreign.extend(document_foreign(tenant, Some(document)));
            }
            foreign
        })
        .await;
    }

    async fn forget(&mut self) {
        let index = self.rng.random_range(0..self.outcome.alive.len());
        let target = self.outcome.alive.swap_remove(index);
        let arguments = json!({"id": target.id, "reason": "serve-load forgets what it remembered"});
        let answer = self
            .timed(Op::Forget, "memory_forget", arguments, |tenant, content| {
                document_foreign(tenant, content.get("document"))
            })
            .await;
        if answer.is_some() {
            self.outcome.forgotten.push(target);
        } else {
            self.outcome.unknown_state += 1;
        }
    }

    /// A `memory_recall` or `memory_get` in another tenant's namespace: must be `forbidden`.
    async fn deliberate_refusal(&mut self) {
        let count = self.plan.tenants.len();
        let other = (self.plan.tenant.index + self.rng.random_range(1..count)) % count;
        let other = self.plan.tenants[other].clone();
        let (tool, arguments) = if self.rng.random_bool(0.5) {
            let query = self
                .plan
                .texts
                .query(self.rng.random_range(0..usize::MAX))
                .to_owned();
            (
                "memory_recall",
                recall_arguments(&other, &query, "hybrid", RECALL_ITEMS),
            )
        } else {
            // A document the other tenant really has (seeded round-robin), when there is one.
            let n = other.index
                + count
                    * self
                        .rng
                        .random_range(0..self.plan.seeded.div_ceil(count).max(1));
            (
                "memory_get",
                json!({"namespace": other.namespace(), "id": other.seeded_id(n)}),
            )
        };
        let op = Op::DeliberateRefusal;
        *self.outcome.calls.entry(op).or_default() += 1;
        self.outcome.refusals.attempted += 1;
        let (answer, elapsed) = self.call(tool, arguments).await;
        match (&answer, error_kind(&answer)) {
            (Ok(_), Some(kind)) if kind == "forbidden" => {
                self.outcome.refusals.forbidden += 1;
                self.outcome.record(op, self.plan.epoch, elapsed);
            }
            (Ok(_), Some(kind)) => {
                self.outcome.refusals.other_kind += 1;
                self.failed(op, &answer, &kind);
            }
            (Err(_), Some(kind)) => self.failed(op, &answer, &kind),
            (Ok(answer), None) => {
                self.outcome.refusals.answered += 1;
                self.outcome.error(op, "not-refused", true);
                let leaked = answer
                    .content
                    .get("passages")
                    .and_then(Value::as_array)
                    .is_some_and(|passages| !passages.is_empty())
                    || answer
                        .content
                        .get("document")
                        .is_some_and(|document| !document.is_null());
                if leaked {
                    self.outcome.cross(format!(
                        "{} {tool} into {}'s namespace answered its memory",
                        self.plan.tenant.name, other.name
                    ));
                }
            }
            (Err(_), None) => {}
        }
    }

    /// After the load: every acknowledged remember not forgotten must be readable by its owner with
    /// its acknowledged revision, and every acknowledged forget must hide its document. Answers
    /// (missing writes with examples, visible forgets).
    pub async fn check_writes(
        &mut self,
        alive: &[Acknowledged],
        forgotten: &[Acknowledged],
    ) -> WriteCheck {
        let mut check = WriteCheck::default();
        for (written, must_exist) in alive
            .iter()
            .map(|ack| (ack, true))
            .chain(forgotten.iter().map(|ack| (ack, false)))
        {
            let arguments = json!({"namespace": self.plan.tenant.namespace(), "id": written.id});
            let mut document = None;
            let mut answered = false;
            for _ in 0..5 {
                let (answer, _) = self.call("memory_get", arguments.clone()).await;
                match answer {
                    Ok(answer) if !answer.is_error => {
                        document = answer.content.get("document").cloned();
                        answered = true;
                        break;
                    }
                    Ok(answer) => {
                        check.errors += 1;
                        tracing::warn!(content = %answer.content, "memory_get refused");
                    }
                    Err(error) => {
                        check.errors += 1;
                        self.connection.session = None;
                        tracing::warn!(%error, "memory_get failed");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
            let document = document.filter(|document| !document.is_null());
            if let Some(document) = &document {
                for foreign in document_foreign(&self.plan.tenant, Some(document)) {
                    check.cross_tenant.push(foreign);
                }
            }
            let present = document.as_ref().is_some_and(|document| {
                document.get("withdrawn").is_none_or(Value::is_null)
                    && document.get("revision").and_then(Value::as_str)
                        == Some(written.revision.as_str())
                    && document.pointer("/content/text").and_then(Value::as_str)
                        == Some(written.text.as_str())
            });
            let visible = document
                .as_ref()
                .is_some_and(|document| document.get("withdrawn").is_none_or(Value::is_null));
            if must_exist {
                check.checked += 1;
                if !present {
                    check.missing += 1;
                    if check.examples.len() < EXAMPLES {
                        check.examples.push(if answered {
                            format!("{} {}: {:?}", self.plan.tenant.name, written.id, document)
                        } else {
                            format!(
                                "{} {}: memory_get never answered",
                                self.plan.tenant.name, written.id
                            )
                        });
                    }
                }
            } else {
                check.forgets_checked += 1;
                if visible {
                    check.forgets_visible += 1;
                }
            }
        }
        if let Some(session) = self.connection.session.take() {
            session.close().await;
        }
        check
    }
}

/// `memory_recall` arguments in `tenant`'s namespace and scope, with `memory_search`'s limits.
fn recall_arguments(tenant: &Tenant, query: &str, mode: &str, items: u32) -> Value {
    json!({
        "namespace": tenant.namespace(),
        "scope": tenant.name,
        "query": query,
        "mode": mode,
        "limits": {
            "max_items": items,
            "max_bytes": memory_service::simple::SEARCH_MAX_BYTES,
            "max_tokens": memory_service::simple::SEARCH_MAX_TOKENS,
            "timeout_ms": memory_service::simple::SEARCH_TIMEOUT_MS,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_errors_are_named_by_status() {
        assert_eq!(
            transport_kind(&ServerError::Protocol(
                "tools/call: HTTP 429 Too Many Requests".into()
            )),
            "http-429"
        );
        assert_eq!(
            transport_kind(&ServerError::Protocol("event stream: eof".into())),
            "protocol"
        );
        assert_eq!(
            transport_kind(&ServerError::Unreachable {
                url: "u".into(),
                detail: "d".into()
            }),
            "unreachable"
        );
    }
}
