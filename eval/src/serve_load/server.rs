//! The `memory` binary as the load run drives it: `memory import` to seed, `memory serve --http` as a
//! child process (started, announced, ready, measured, killed, restarted), and plain HTTP GETs of
//! `/healthz` and `/metrics`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, Command};

/// The line `memory serve --http` prints once it listens.
const ANNOUNCEMENT: &str = "memory: serving MCP at ";
/// Longest wait for the announcement (the store is opened first).
const ANNOUNCE_TIMEOUT: Duration = Duration::from_secs(600);

/// The `memory` binary: `--memory-bin`, else `memory` beside this executable (`target/<profile>/`),
/// else beside its parent folder (a test executable in `target/<profile>/deps/`).
pub fn find_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        if path.is_file() {
            return Ok(path.to_owned());
        }
        bail!("--memory-bin {} is not a file", path.display());
    }
    let name = format!("memory{}", std::env::consts::EXE_SUFFIX);
    let executable = std::env::current_exe().context("this executable's path")?;
    let mut folder = executable.parent();
    for _ in 0..2 {
        let Some(dir) = folder else { break };
        let candidate = dir.join(&name);
        if candidate.is_file() {
            return Ok(candidate);
        }
        folder = dir.parent();
    }
    bail!(
        "no `memory` binary beside {}: build it (`cargo build -p memory-cli --bin memory`, with \
         --release for a release run) or pass --memory-bin",
        executable.display()
    )
}

/// Where the store is and how the binary is run against it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The `memory` binary.
    pub binary: PathBuf,
    /// `--db`: a SQLite path or a `postgres://` URL.
    pub db: String,
    /// `--schema` (PostgreSQL only).
    pub schema: Option<String>,
    /// `MEMORY_ASSETS_DIR` for the children, when set.
    pub assets: Option<PathBuf>,
}

impl Target {
    fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        for variable in [
            "MEMORY_DB",
            "MEMORY_TOKEN",
            "MEMORY_NAMESPACE",
            "MEMORY_SCOPE",
            "MEMORY_USER",
            "MEMORY_LOG",
        ] {
            command.env_remove(variable);
        }
        if let Some(assets) = &self.assets {
            command.env("MEMORY_ASSETS_DIR", assets);
        }
        command.arg("--db").arg(&self.db);
        if let Some(schema) = &self.schema {
            command.arg("--schema").arg(schema);
        }
        command.stdin(Stdio::null()).kill_on_drop(true);
        command
    }

    /// `memory import FILE`: the product's bulk path. Answers its summary line (standard output).
    pub async fn import(&self, file: &Path) -> anyhow::Result<String> {
        let output = self
            .command()
            .arg("import")
            .arg(file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .await
            .context("running memory import")?;
        let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if !output.status.success() {
            bail!(
                "memory import failed ({}): {stdout} {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
        }
        Ok(stdout)
    }
}

/// One `memory serve --http` child.
#[derive(Debug)]
pub struct Server {
    child: Child,
    /// Its process id.
    pub pid: u32,
    /// The MCP endpoint it announced.
    pub url: String,
    /// `HOST:PORT`.
    pub authority: String,
    /// When it was started.
    pub started: Instant,
}

/// Who may call a server.
#[derive(Debug, Clone)]
pub enum ServerAccess {
    /// `--grants FILE`: a grant per tenant.
    Grants(PathBuf),
    /// `--allow-namespace RULE`: the server's own grant, which a loopback caller without a token
    /// holds, also reaches every namespace the rule admits.
    AllowNamespace(String),
}

/// What a server is started with.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// The store.
    pub target: Target,
    /// Who may call it.
    pub access: ServerAccess,
    /// Standard error goes here (appended, so a restart keeps the first run's lines).
    pub log: PathBuf,
    /// `XDG_RUNTIME_DIR` (where a PostgreSQL server's discovery file goes: one per server).
    pub runtime_dir: Option<PathBuf>,
}

impl Server {
    /// Starts `memory serve --http ADDR` and waits for its announcement (not for readiness:
    /// [`Server::wait_ready`]).
    pub async fn start(spec: &ServerSpec, addr: &str) -> anyhow::Result<Self> {
        let mut command = spec.target.command();
        command.args(["serve", "--http", addr]);
        match &spec.access {
            ServerAccess::Grants(grants) => command.arg("--grants").arg(grants),
            ServerAccess::AllowNamespace(rule) => command.args(["--allow-namespace", rule]),
        };
        if let Some(dir) = &spec.runtime_dir {
            command.env("XDG_RUNTIME_DIR", dir);
        }
        let started = Instant::now();
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", spec.target.binary.display()))?;
        let pid = child.id().context("the server's pid")?;
        let stderr = child.stderr.take().context("the server's stderr")?;
        let mut log = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)
            .await
            .with_context(|| format!("opening {}", spec.log.display()))?;
        let mut lines = BufReader::new(stderr).lines();
        let announced = tokio::time::timeout(ANNOUNCE_TIMEOUT, async {
            while let Some(line) = lines.next_line().await? {
                log.write_all(line.as_bytes()).await?;
                log.write_all(b"\n").await?;
                if let Some(url) = line.strip_prefix(ANNOUNCEMENT) {
                    return Ok::<_, std::io::Error>(Some(url.trim().to_owned()));
                }
            }
            Ok(None)
        })
        .await;
        let url = match announced {
            Ok(Ok(Some(url))) => url,
            Ok(Ok(None)) => {
                let status = child.wait().await.ok();
                bail!(
                    "the server exited before listening ({status:?}); see {}",
                    spec.log.display()
                );
            }
            Ok(Err(error)) => bail!("reading the server's stderr: {error}"),
            Err(_) => bail!("the server did not announce itself within {ANNOUNCE_TIMEOUT:?}"),
        };
        // Keep draining standard error into the log so the server never blocks on a full pipe.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if log.write_all(line.as_bytes()).await.is_err()
                    || log.write_all(b"\n").await.is_err()
                {
                    break;
                }
            }
        });
        let authority = url
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .with_context(|| format!("announced URL {url}"))?
            .to_owned();
        Ok(Self {
            child,
            pid,
            url,
            authority,
            started,
        })
    }

    /// Waits until `/healthz` answers 200 (store open, model loaded).
    pub async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok((200, _)) = http_get(&self.authority, "/healthz", None).await {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("the server exited before it was ready: {status}");
            }
            if Instant::now() > deadline {
                bail!(
                    "the server at {} was not ready within {timeout:?}",
                    self.url
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Its peak resident set so far (`VmHWM`), where the system reports it (Linux).
    pub fn peak_rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }

    /// CPU seconds (user and system) it has used so far, where the system reports them (Linux; at
    /// the usual 100 clock ticks a second).
    pub fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        // The fields after the command name, which is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = |index: usize| fields.get(index)?.parse::<u64>().ok();
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
        Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
    }

    /// SIGKILL, then reaps it.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        self.child.start_kill().context("killing the server")?;
        self.child.wait().await.context("reaping the server")?;
        Ok(())
    }

    /// SIGTERM (the server's clean shutdown), then waits for it, killing it after `grace`.
    pub async fn stop(mut self, grace: Duration) -> anyhow::Result<()> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .await;
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            self.kill().await?;
        }
        Ok(())
    }
}

/// A plain HTTP/1.1 GET of `path` at `authority`: the status and the body.
pub async fn http_get(
    authority: &str,
    path: &str,
    token: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(authority).await?;
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    if let Some(token) = token {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        (&mut stream).take(4 << 20).read_to_end(&mut response),
    )
    .await??;
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .context("an HTTP status line")?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// One unlabelled gauge's value from a `/metrics` scrape (`memory_chunks 1234`).
pub fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}
