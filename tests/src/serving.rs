//! The harness of `memory serve` with options: an rmcp client over stdio or over streamable HTTP, the
//! HTTP server's discovery file and token, and scrapes of `/healthz` and `/metrics`.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use memory_cli::discovery::Discovery;
use rmcp::ServiceExt;
use rmcp::model::Tool;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::product::{Fixture, McpClient, memory_binary};

/// The default-namespace flags of the simple tools: namespace `notes` of user `u1`, scope `assistant`.
pub fn default_flags() -> Vec<String> {
    vec![
        "--namespace".to_owned(),
        json!({"name": "notes", "version": 1, "identity": {"user": "u1"}}).to_string(),
        "--scope".to_owned(),
        "assistant".to_owned(),
    ]
}

/// The product harness's MCP client ([`McpClient`]), also over streamable HTTP and with server
/// options: one client type, whatever the transport.
impl McpClient {
    /// Starts `memory --db DB serve ARGS` as a child process and completes the MCP handshake on stdio
    /// ([`Fixture::serve_with`]).
    pub async fn stdio(fixture: &Fixture, args: &[String], env: &[(&str, &OsStr)]) -> Self {
        fixture.serve_with(args, env).await
    }

    /// Connects to `url` over streamable HTTP, sending `token` as the bearer token when given.
    pub async fn http(url: &str, token: Option<&str>) -> Result<Self, String> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
        if let Some(token) = token {
            config = config.auth_header(token.to_owned());
        }
        let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
        ().serve(transport)
            .await
            .map(|service| McpClient { service })
            .map_err(|error| error.to_string())
    }

    /// Every tool the server lists.
    pub async fn tools(&self) -> Vec<Tool> {
        self.service
            .list_all_tools()
            .await
            .expect("the tools are listed")
    }

    /// The names of every tool the server lists.
    pub async fn tool_names(&self) -> Vec<String> {
        self.tools()
            .await
            .iter()
            .map(|tool| tool.name.to_string())
            .collect()
    }
}

/// A running `memory serve --http` child process; stopped with SIGTERM when dropped.
#[derive(Debug)]
pub struct HttpServer {
    child: Child,
    /// The MCP URL the server announced.
    pub url: String,
    /// Where its discovery file is.
    pub discovery: PathBuf,
}

impl HttpServer {
    /// Writes `grants` (a grants file's text) beside the fixture's database and starts the server
    /// with `--grants FILE`: a server a team shares.
    pub fn with_grants(fixture: &Fixture, grants: &str) -> Self {
        let path = fixture.dir.path().join("grants.toml");
        std::fs::write(&path, grants).expect("the grants file");
        let args = [
            "--grants".to_owned(),
            path.to_str().expect("UTF-8 path").to_owned(),
        ];
        Self::start(fixture, &args, &[])
    }

    /// Starts `memory --db DB serve --http 127.0.0.1:0 ARGS` and waits for the line announcing its URL
    /// (the server prints it once the socket listens and the discovery file is written).
    pub fn start(fixture: &Fixture, args: &[String], env: &[(&str, &OsStr)]) -> Self {
        let mut child = Command::new(memory_binary())
            .env_remove("MEMORY_DB")
            .env_remove("MEMORY_LOG")
            .env_remove("MEMORY_TOKEN")
            .env_remove("MEMORY_NAMESPACE")
            .env_remove("MEMORY_SCOPE")
            .env_remove("MEMORY_USER")
            .envs(env.iter().copied())
            .arg("--db")
            .arg(&fixture.db)
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let mut lines = BufReader::new(stderr).lines();
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(url) = line.strip_prefix("memory: serving MCP at ") {
                        break url.to_owned();
                    }
                }
                _ => {
                    let status = child.wait().ok();
                    panic!("the server exited before listening: {status:?}");
                }
            }
        };
        // Keep draining standard error so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let mut discovery = fixture.db.as_os_str().to_owned();
        discovery.push(".serve.json");
        Self {
            child,
            url,
            discovery: PathBuf::from(discovery),
        }
    }

    /// `http://HOST:PORT` (the URL without `/mcp`).
    pub fn base(&self) -> String {
        self.url.trim_end_matches("/mcp").to_owned()
    }

    /// The discovery file as the server wrote it.
    pub fn discovery(&self) -> Discovery {
        Discovery::read(&self.discovery)
            .expect("a well-formed discovery file")
            .expect("the discovery file exists while serving")
    }

    /// Sends `signal` (a `kill` name: `HUP`, `KILL`, ...) to the server.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal}: {status:?}");
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.terminate()
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.child.wait().expect("the server exits")
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.terminate();
        }
    }
}

/// Waits (up to two minutes) until the server at `base` (`http://HOST:PORT`) says `/healthz`
/// `ready`: its model and vectors are loaded, so a request's time is the request's own. From
/// synchronous tests.
pub fn wait_until_ready(base: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(ready(base));
}

/// [`wait_until_ready`] from async tests.
pub async fn ready(base: &str) {
    for _ in 0..1_200 {
        if get(&format!("{base}/healthz"), None).await.0 == 200 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the server at {base} did not become ready");
}

/// Waits until the server at `base` has indexed every change of its store (`/metrics`
/// `memory_index_lag` 0, read as a loopback caller without a token): its indexer's last write is
/// committed, so nothing it does next holds the database.
pub fn wait_until_indexed(base: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        for _ in 0..1_200 {
            let (status, metrics) = get(&format!("{base}/metrics"), None).await;
            if status == 200
                && sample(&parse_metrics(&metrics), "memory_index_lag", &[]) == Some(0.0)
            {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("the server at {base} did not catch its index up");
    });
}

/// A plain GET of `url` with an optional bearer token: the status and the body.
pub async fn get(url: &str, token: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    (status, response.text().await.expect("a text body"))
}

/// One sample of a metrics scrape: its name, labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's name (`memory_writes_total`, ...).
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// Parses the OpenMetrics/Prometheus text format's samples (comment lines skipped); panics on a line
/// that is neither, so a malformed scrape fails the test.
pub fn parse_metrics(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("a sample line has a value: {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("a sample's value is a number: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("labels are closed: {line}"));
                let labels = body
                    .split(',')
                    .filter(|pair| !pair.is_empty())
                    .map(|pair| {
                        let (key, value) = pair
                            .split_once('=')
                            .unwrap_or_else(|| panic!("a label is key=value: {line}"));
                        let value = value
                            .strip_prefix('"')
                            .and_then(|value| value.strip_suffix('"'))
                            .unwrap_or_else(|| panic!("a label value is quoted: {line}"));
                        (key.to_owned(), value.to_owned())
                    })
                    .collect();
                (name.to_owned(), labels)
            }
            None => (series.to_owned(), BTreeMap::new()),
        };
        samples.push(Sample {
            name,
            labels,
            value,
        });
    }
    samples
}

/// The value of the sample `name` with exactly `labels`, if scraped.
pub fn sample(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    samples
        .iter()
        .find(|sample| sample.name == name && sample.labels == labels)
        .map(|sample| sample.value)
}

/// Writes `token` to a file in `dir` and answers its path.
pub fn token_file(dir: &Path, token: &str) -> PathBuf {
    let path = dir.join("token");
    std::fs::write(&path, format!("{token}\n")).expect("token file");
    path
}

/// A tenant's grants-file entry (TOML): every operation in its own `notes` namespace (any identity
/// whose `user` is `name`), its own scope, and defaults there; `token`'s digest holds it.
pub fn tenant_grant(name: &str, token: &str) -> String {
    scoped_grant(name, token, name)
}

/// A grant to everything (every namespace, scope and operation) for `token`, in a grants file: it
/// reads `/metrics` and the inspector's overview.
pub fn everything_grant(name: &str, token: &str) -> String {
    format!(
        r#"
[[grant]]
name = "{name}"
token_sha256 = "{digest}"
operations = ["*"]
read_scopes = ["*"]
write_scopes = ["*"]

[[grant.namespaces]]
name = "*"
"#,
        digest = memory_cli::grants::token_digest(token),
    )
}

/// [`tenant_grant`] whose scope is `scope` instead of the tenant's name.
pub fn scoped_grant(name: &str, token: &str, scope: &str) -> String {
    format!(
        r#"
[[grant]]
name = "{name}"
token_sha256 = "{digest}"
operations = ["*"]
read_scopes = ["{scope}"]
write_scopes = ["{scope}"]
default_namespace = {{ name = "notes", version = 1, identity = {{ user = "{name}" }} }}
default_scope = "{scope}"

[[grant.namespaces]]
name = "notes"
fields = {{ user = "{name}" }}
"#,
        digest = memory_cli::grants::token_digest(token),
    )
}
