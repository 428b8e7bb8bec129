//! `memory-eval serve-load`: figures of `memory serve --http` under load (issue 32's "Figures under
//! load"). A bench, not a timed test: it reports latencies and never asserts on them; it fails only
//! on correctness (an answer holding another tenant's memory, an acknowledged write missing).
//!
//! Everything goes through the built `memory` binary with its defaults:
//! 1. Seeding: `--docs` documents dealt round-robin over `--tenants` tenants, each in its tenant's
//!    namespace (`notes`, identity `{"user": "tenant-007"}`) and scope (`tenant-007`), written with
//!    `memory import` (texts: the eval corpus's short statements about people).
//! 2. `memory serve --http 127.0.0.1:0 --grants FILE` (a grant per tenant, a fresh random token each,
//!    the file holding only their SHA-256), ready on `/healthz`, then `memory_sync` until the index
//!    holds every document (progress logged every 15 s).
//! 3. Idle recall: one client, `--idle-recalls` sequential `memory_search` calls (after 10 warm-up
//!    calls) on the otherwise idle server.
//! 4. Load: `--clients` concurrent MCP clients (client i is tenant i % tenants, with its token), each
//!    one session kept for the run ([`memory_client::server::ServerSession`]), calling the mix of
//!    [`report::MIX`] for `--duration-secs` or `--ops` calls each. Every answer is checked against the
//!    caller's tenant (ids carry a tenant prefix, metadata the tenant's name).
//! 5. After the load every acknowledged remember not forgotten is read back by its owner
//!    (`memory_get`, the acknowledged revision and text), every acknowledged forget must hide its
//!    document; the server's peak RSS (`VmHWM`) is read; the servers are stopped.
//!
//! With `--postgres URL` the store is a fresh schema of that database and two servers share it
//! (clients alternate between them); a third of the way into the load server `a` is killed with
//! SIGKILL and restarted (on the same port when it is free), its clients reconnect, and their errors
//! until it is back (ready and synced) count as `restart_unavailable`, not unexpected; server `b`'s
//! answers during that downtime are counted.

pub mod client;
pub mod outcome;
pub mod report;
pub mod server;
pub mod tenants;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use memory_client::discovery::Discovery;
use memory_client::server::ServerSession;
use serde_json::{Value, json};

use self::client::{Client, ClientPlan, Endpoint, Shared};
use self::outcome::{ClientOutcome, Op, WriteCheck};
use self::report::{RestartFigures, ServeLoadReport, ServerFigures};
use self::server::{Server, ServerAccess, ServerSpec, Target};
use self::tenants::Texts;
use crate::metrics::percentiles;

/// Longest wait for a server to be ready (model and vectors loaded).
const READY_TIMEOUT: Duration = Duration::from_secs(900);
/// Longest wait for `memory_sync` (indexing 100,000 documents on two cores takes minutes).
const SYNC_TIMEOUT: Duration = Duration::from_secs(4 * 3600);
/// Recalls before the idle ones are timed.
const WARM_UP_RECALLS: usize = 10;
/// How often progress is logged.
const PROGRESS_EVERY: Duration = Duration::from_secs(15);
/// A server's clean shutdown is waited for this long, then it is killed.
const STOP_GRACE: Duration = Duration::from_secs(60);

/// What `memory-eval serve-load` runs.
#[derive(Debug, Clone)]
pub struct ServeLoadOptions {
    /// The report folder: `serve-load.json` goes here, the store and logs to `OUT/serve-load/`.
    pub out: PathBuf,
    /// The `memory` binary, else the one beside this executable.
    pub memory_bin: Option<PathBuf>,
    /// Documents seeded.
    pub docs: usize,
    /// Tenants (a grant each).
    pub tenants: usize,
    /// Concurrent clients.
    pub clients: usize,
    /// How long the load runs (unless `ops` is given).
    pub duration: Duration,
    /// Calls per client instead of a duration.
    pub ops: Option<u64>,
    /// Sequential recalls timed on the idle server.
    pub idle_recalls: usize,
    /// Each client's mean pause between calls (each pause drawn from 0.5 to 1.5 times it, the
    /// first from 0 to 2 times it, so clients do not call in step); 0: a closed loop that
    /// saturates the server.
    pub think: Duration,
    /// The seed of the texts and of the clients' choices.
    pub seed: u64,
    /// A PostgreSQL URL: two servers on a fresh schema of it, one killed and restarted midway.
    pub postgres: Option<String>,
    /// Reuse the seeded SQLite store of an earlier run with the same documents, tenants and seed.
    pub reuse_store: bool,
    /// Log progress lines on stderr.
    pub verbose: bool,
}

/// What a finished store records, so `--reuse-store` knows it matches.
fn manifest(options: &ServeLoadOptions) -> Value {
    json!({"docs": options.docs, "tenants": options.tenants, "seed": options.seed})
}

fn log(options: &ServeLoadOptions, message: &str) {
    if options.verbose {
        eprintln!("serve-load: {message}");
    }
}

/// Where the children find the model: `$MEMORY_ASSETS_DIR`, else `./assets` when it exists (the
/// workspace's), else the binary's own lookup.
pub(crate) fn assets_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("MEMORY_ASSETS_DIR").filter(|dir| !dir.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let local = std::env::current_dir().ok()?.join("assets");
    local.is_dir().then_some(local)
}

/// Runs the whole measurement and writes `OUT/serve-load.json`.
pub async fn run(options: &ServeLoadOptions) -> anyhow::Result<ServeLoadReport> {
    anyhow::ensure!(options.tenants > 0, "--tenants must be at least 1");
    anyhow::ensure!(options.clients > 0, "--clients must be at least 1");
    let binary = server::find_binary(options.memory_bin.as_deref())?;
    let work = options.out.join("serve-load");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let work = work.canonicalize()?;
    let run_tag = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis())
    );
    let tenants = Arc::new(tenants::tenants(options.tenants));
    let texts = Arc::new(Texts::generate(options.docs.max(1_000), options.seed));

    // A grant per tenant.
    let grants = work.join("grants.json");
    std::fs::write(
        &grants,
        serde_json::to_string_pretty(&tenants::grants_json(&tenants))?,
    )?;

    // The store.
    let postgres = options.postgres.clone();
    let target = Target {
        binary: binary.clone(),
        db: match &postgres {
            Some(url) => url.clone(),
            None => work.join("serve-load.sqlite").display().to_string(),
        },
        schema: postgres.as_ref().map(|_| format!("serve_load_{run_tag}")),
        assets: assets_dir(),
    };
    let manifest_path = work.join("store.json");
    let reused = postgres.is_none()
        && options.reuse_store
        && Path::new(&target.db).is_file()
        && std::fs::read_to_string(&manifest_path)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            == Some(manifest(options));
    let mut import_seconds = 0.0;
    if reused {
        log(options, &format!("reusing the seeded store {}", target.db));
    } else {
        if postgres.is_none() {
            for suffix in ["", "-wal", "-shm", ".serve.json"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", target.db));
            }
        }
        let _ = std::fs::remove_file(&manifest_path);
        let import = work.join("seed.jsonl");
        tenants::write_import(&import, &tenants, options.docs, &texts)?;
        log(
            options,
            &format!(
                "importing {} documents for {} tenants",
                options.docs, options.tenants
            ),
        );
        let started = Instant::now();
        let summary = target.import(&import).await?;
        import_seconds = started.elapsed().as_secs_f64();
        log(
            options,
            &format!("imported in {import_seconds:.1} s: {summary}"),
        );
    }

    let spec = |name: &str| ServerSpec {
        target: target.clone(),
        access: ServerAccess::Grants(grants.clone()),
        log: work.join(format!("server-{name}.log")),
        runtime_dir: postgres.as_ref().map(|_| work.join(format!("run-{name}"))),
    };
    for name in ["a", "b"] {
        if let Some(dir) = spec(name).runtime_dir {
            std::fs::create_dir_all(&dir)?;
        }
    }
    let sync_token = tenants[0].token.clone();
    let started = Instant::now();
    let mut server_a = Server::start(&spec("a"), "127.0.0.1:0").await?;
    log(
        options,
        &format!("server a (pid {}) at {}", server_a.pid, server_a.url),
    );
    server_a.wait_ready(READY_TIMEOUT).await?;
    sync(options, &server_a, &sync_token).await?;
    let mut server_b = None;
    if postgres.is_some() {
        let mut b = Server::start(&spec("b"), "127.0.0.1:0").await?;
        log(options, &format!("server b (pid {}) at {}", b.pid, b.url));
        b.wait_ready(READY_TIMEOUT).await?;
        sync(options, &b, &sync_token).await?;
        server_b = Some(b);
    }
    let sync_seconds = started.elapsed().as_secs_f64();
    if postgres.is_none() {
        std::fs::write(&manifest_path, manifest(options).to_string())?;
    }
    log(
        options,
        &format!("seeded and synced in {sync_seconds:.1} s"),
    );

    let endpoint_a = Arc::new(Endpoint::new(&server_a.url));
    let endpoint_b = server_b
        .as_ref()
        .map(|server| Arc::new(Endpoint::new(&server.url)));
    let endpoint_of = |client: usize| match &endpoint_b {
        Some(b) if client % 2 == 1 => Arc::clone(b),
        _ => Arc::clone(&endpoint_a),
    };
    let plan_of = |client: usize| {
        let tenant = tenants[client % tenants.len()].clone();
        ClientPlan {
            index: client,
            token: tenant.token.clone(),
            tenant,
            tenants: Arc::clone(&tenants),
            seeded: options.docs,
            texts: Arc::clone(&texts),
            ops: options.ops,
            seed: options.seed,
            run_tag: run_tag.clone(),
            think: options.think,
            epoch: Instant::now(),
        }
    };

    // Idle recall: one client alone on the server.
    let mut merged = ClientOutcome::default();
    let idle = {
        let mut client = Client::new(plan_of(0), Arc::clone(&endpoint_a), Arc::default());
        for _ in 0..WARM_UP_RECALLS {
            client.recall().await;
        }
        client.take_outcome();
        for _ in 0..options.idle_recalls {
            client.recall().await;
        }
        let outcome = client.finish().await;
        let figures = percentiles(
            outcome
                .latencies
                .get(&Op::Recall)
                .map_or(&[][..], Vec::as_slice),
        );
        merged.absorb_errors(&outcome);
        figures
    };
    log(
        options,
        &format!(
            "idle recall: p50 {:.1} ms, p99 {:.1} ms over {} calls",
            idle.p50_ms, idle.p99_ms, idle.samples
        ),
    );

    // The load.
    let shared = Arc::new(Shared::default());
    log(
        options,
        &format!(
            "load: {} clients, {}",
            options.clients,
            options.ops.map_or_else(
                || format!("{} s", options.duration.as_secs()),
                |ops| format!("{ops} calls each")
            )
        ),
    );
    let cpu_at_start = [
        server_a.cpu_seconds(),
        server_b.as_ref().and_then(Server::cpu_seconds),
    ];
    let load_started = Instant::now();
    let handles: Vec<_> = (0..options.clients)
        .map(|client| {
            let plan = ClientPlan {
                epoch: load_started,
                ..plan_of(client)
            };
            let runner = Client::new(plan, endpoint_of(client), Arc::clone(&shared));
            tokio::spawn(runner.run())
        })
        .collect();
    let mut processes = Vec::new();
    let mut restart = None;
    let total_ops = options.ops.map(|ops| ops * options.clients as u64);
    let mut next_log = PROGRESS_EVERY;
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let elapsed = load_started.elapsed();
        let completed = shared.completed.load(Ordering::Relaxed);
        if elapsed >= next_log {
            next_log += PROGRESS_EVERY;
            log(
                options,
                &format!("{:.0} s, {completed} calls", elapsed.as_secs_f64()),
            );
        }
        if handles.iter().all(tokio::task::JoinHandle::is_finished) {
            break;
        }
        if options.ops.is_none() && elapsed >= options.duration {
            break;
        }
        let due = match total_ops {
            Some(total) => completed * 3 >= total,
            None => elapsed * 3 >= options.duration,
        };
        if let (Some(b), None, true) = (&endpoint_b, &restart, due) {
            processes.push(ServerFigures {
                name: "a".to_owned(),
                pid: server_a.pid,
                peak_rss_bytes: server_a.peak_rss_bytes(),
                load_cpu_seconds: None,
            });
            let (restarted, figures) = kill_and_restart(
                options,
                server_a,
                &spec("a"),
                &endpoint_a,
                b,
                &sync_token,
                elapsed,
            )
            .await?;
            server_a = restarted;
            restart = Some(figures);
        }
    }
    shared.stop.store(true, Ordering::SeqCst);
    let mut outcomes = Vec::with_capacity(handles.len());
    for handle in handles {
        outcomes.push(handle.await.context("a load client panicked")?);
    }
    let load_seconds = load_started.elapsed().as_secs_f64();
    let load_cpu = |server: &Server, at_start: Option<f64>| Some(server.cpu_seconds()? - at_start?);
    let load_cpu_seconds = [
        load_cpu(&server_a, cpu_at_start[0]).filter(|_| restart.is_none()),
        server_b
            .as_ref()
            .and_then(|server| load_cpu(server, cpu_at_start[1])),
    ];
    log(
        options,
        &format!("load done in {load_seconds:.1} s; checking acknowledged writes"),
    );

    // Every acknowledged write, read back by its owner.
    let checks: Vec<_> = outcomes
        .iter()
        .enumerate()
        .map(|(client, outcome)| {
            let mut checker = Client::new(plan_of(client), endpoint_of(client), Arc::default());
            let alive = outcome.alive.clone();
            let forgotten = outcome.forgotten.clone();
            tokio::spawn(async move { checker.check_writes(&alive, &forgotten).await })
        })
        .collect();
    let mut written = WriteCheck::default();
    for check in checks {
        written.merge(check.await.context("a write check panicked")?);
    }
    for outcome in outcomes {
        merged.merge(outcome);
    }

    processes.push(ServerFigures {
        name: if restart.is_some() {
            "a (restarted)"
        } else {
            "a"
        }
        .to_owned(),
        pid: server_a.pid,
        peak_rss_bytes: server_a.peak_rss_bytes(),
        load_cpu_seconds: load_cpu_seconds[0],
    });
    if let Some(b) = &server_b {
        processes.push(ServerFigures {
            name: "b".to_owned(),
            pid: b.pid,
            peak_rss_bytes: b.peak_rss_bytes(),
            load_cpu_seconds: load_cpu_seconds[1],
        });
    }
    server_a.stop(STOP_GRACE).await?;
    if let Some(b) = server_b {
        b.stop(STOP_GRACE).await?;
    }
    if let (Some(url), Some(schema)) = (&postgres, &target.schema)
        && let Err(error) = drop_schema(url, schema).await
    {
        eprintln!("serve-load: could not drop schema {schema}: {error:#}");
    }

    let (operations, errors_by_kind, errors_by_operation) = report::operations(&merged);
    let total_calls: u64 = merged.calls.values().sum();
    let ok_calls: u64 = operations.iter().map(|op| op.ok).sum();
    let recall_p99 = operations
        .iter()
        .find(|op| op.op == Op::Recall.name())
        .map(|op| op.latency.p99_ms);
    let mut cross_tenant_examples = merged.cross_tenant_examples.clone();
    cross_tenant_examples.extend(written.cross_tenant.iter().take(5).cloned());
    let report = ServeLoadReport {
        backend: if postgres.is_some() {
            "postgres"
        } else {
            "sqlite"
        },
        binary: binary.display().to_string(),
        documents: options.docs,
        tenants: options.tenants,
        clients: options.clients,
        servers: if endpoint_b.is_some() { 2 } else { 1 },
        cpus: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        think_ms: u64::try_from(options.think.as_millis()).unwrap_or(u64::MAX),
        mix: report::MIX,
        store_reused: reused,
        import_seconds,
        sync_seconds,
        serve_load_recall_p99_ratio: recall_p99
            .filter(|_| idle.p99_ms > 0.0)
            .map(|p99| p99 / idle.p99_ms),
        idle_recall: idle,
        load_seconds,
        operations,
        total_calls,
        throughput_ops_per_second: total_calls as f64 / load_seconds.max(1e-9),
        ok_ops_per_second: ok_calls as f64 / load_seconds.max(1e-9),
        errors_by_kind,
        errors_by_operation,
        deliberate_refusals: merged.refusals,
        unexpected_errors: merged.unexpected,
        restart_unavailable: merged.restart_unavailable,
        reconnects: merged.reconnects,
        cross_tenant_answers: merged.cross_tenant + written.cross_tenant.len() as u64,
        cross_tenant_examples,
        acknowledged_writes: written.checked,
        acknowledged_writes_missing: written.missing,
        missing_examples: written.examples,
        acknowledged_forgets: written.forgets_checked,
        acknowledged_forgets_visible: written.forgets_visible,
        unknown_state_writes: merged.unknown_state,
        peak_rss_bytes: processes
            .iter()
            .filter_map(|server| server.peak_rss_bytes)
            .max(),
        server_processes: processes,
        restart,
        slowest_calls: {
            let mut slowest = merged.slowest.clone();
            outcome::keep_slowest(&mut slowest);
            slowest
        },
    };
    std::fs::create_dir_all(&options.out)?;
    std::fs::write(
        options.out.join("serve-load.json"),
        serde_json::to_string_pretty(&report)? + "\n",
    )?;
    Ok(report)
}

/// Calls `memory_sync` on `server` until it answers (retrying a lost or refused call), logging the
/// index's progress from `/metrics` meanwhile.
async fn sync(options: &ServeLoadOptions, server: &Server, token: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let authority = server.authority.clone();
    let metrics_token = token.to_owned();
    let verbose = options.verbose;
    let ticker = tokio::spawn(async move {
        loop {
            tokio::time::sleep(PROGRESS_EVERY).await;
            let figures = match server::http_get(&authority, "/metrics", Some(&metrics_token)).await
            {
                Ok((200, body)) => match (
                    server::gauge(&body, "memory_chunks"),
                    server::gauge(&body, "memory_index_lag"),
                ) {
                    (Some(chunks), Some(lag)) => {
                        format!(": {chunks} chunks searchable, {lag} changes behind")
                    }
                    _ => " (/metrics shows no index yet)".to_owned(),
                },
                Ok((status, _)) => format!(" (/metrics answered {status})"),
                Err(error) => format!(" (/metrics: {error})"),
            };
            if verbose {
                eprintln!(
                    "serve-load: syncing {} for {:.0} s{figures}",
                    authority,
                    started.elapsed().as_secs_f64()
                );
            }
        }
    });
    let discovery = Discovery {
        version: memory_client::discovery::VERSION,
        url: server.url.clone(),
        pid: server.pid,
        token: Some(token.to_owned()),
    };
    let result = async {
        let mut failures = 0_u32;
        loop {
            anyhow::ensure!(
                started.elapsed() < SYNC_TIMEOUT,
                "memory_sync did not finish within {SYNC_TIMEOUT:?}"
            );
            let answer = match ServerSession::connect(&discovery).await {
                Ok(mut session) => {
                    let answer = session.call_tool("memory_sync", json!({})).await;
                    session.close().await;
                    answer
                }
                Err(error) => Err(error),
            };
            match answer {
                Ok(answer) if !answer.is_error => return Ok(answer.content),
                Ok(answer)
                    if matches!(
                        answer
                            .content
                            .pointer("/error/kind")
                            .and_then(Value::as_str),
                        Some("unavailable" | "deadline" | "busy")
                    ) => {}
                Ok(answer) => anyhow::bail!("memory_sync was refused: {}", answer.content),
                Err(error) if failures < 20 => {
                    failures += 1;
                    eprintln!("serve-load: memory_sync failed ({error}); retrying");
                }
                Err(error) => return Err(error.into()),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    .await;
    ticker.abort();
    let answer = result?;
    log(
        options,
        &format!(
            "{} synced in {:.1} s: {answer}",
            server.authority,
            started.elapsed().as_secs_f64()
        ),
    );
    Ok(())
}

/// Kills server `a` (SIGKILL) while its clients run, restarts it (on its port when free, else
/// another), waits until it is ready and synced, and answers the new server with the downtime's
/// figures.
async fn kill_and_restart(
    options: &ServeLoadOptions,
    mut killed: Server,
    spec: &ServerSpec,
    endpoint: &Endpoint,
    survivor: &Endpoint,
    token: &str,
    at: Duration,
) -> anyhow::Result<(Server, RestartFigures)> {
    let authority = killed.authority.clone();
    endpoint.going_down();
    let down_at = Instant::now();
    let survivor_before = survivor.answered.load(Ordering::SeqCst);
    killed.kill().await?;
    log(
        options,
        &format!(
            "killed server a (pid {}) at {:.1} s",
            killed.pid,
            at.as_secs_f64()
        ),
    );
    let (mut server, same_port) = match Server::start(spec, &authority).await {
        Ok(server) => (server, true),
        Err(error) => {
            eprintln!("serve-load: {authority} could not be bound again ({error:#}); another port");
            (Server::start(spec, "127.0.0.1:0").await?, false)
        }
    };
    server.wait_ready(READY_TIMEOUT).await?;
    sync(options, &server, token).await?;
    endpoint.back_up(&server.url);
    let figures = RestartFigures {
        killed_at_seconds: at.as_secs_f64(),
        downtime_seconds: down_at.elapsed().as_secs_f64(),
        same_port,
        survivor_answers_during_downtime: survivor
            .answered
            .load(Ordering::SeqCst)
            .saturating_sub(survivor_before),
    };
    log(
        options,
        &format!(
            "server a back at {} after {:.1} s; server b answered {} calls meanwhile",
            server.url, figures.downtime_seconds, figures.survivor_answers_during_downtime
        ),
    );
    Ok((server, figures))
}

/// Drops the run's schema.
async fn drop_schema(url: &str, schema: &str) -> anyhow::Result<()> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await?;
    drop(client);
    let _ = connection.await;
    Ok(())
}
