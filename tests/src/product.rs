//! The harness of the end-to-end product tests: the built `memory` binary, run one-shot or served over
//! MCP, against a fresh SQLite file.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// The built `memory` binary: `target/<profile>/memory`, the folder above this test executable's
/// `deps/`. Panics (this is test support) naming the build command when it is missing.
pub fn memory_binary() -> PathBuf {
    let executable = std::env::current_exe().expect("the test knows its own path");
    let profile_dir = executable
        .parent()
        .and_then(Path::parent)
        .expect("test executables live in target/<profile>/deps");
    let binary = profile_dir.join(format!("memory{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.is_file(),
        "{} is missing: build it with `cargo build -p memory-cli --bin memory` (or run the whole \
         workspace's tests, which build it)",
        binary.display()
    );
    binary
}

/// The built `remembering-worker` binary, beside [`memory_binary`].
pub fn worker_binary() -> PathBuf {
    let memory = memory_binary();
    let worker = memory.with_file_name(format!(
        "remembering-worker{}",
        std::env::consts::EXE_SUFFIX
    ));
    assert!(
        worker.is_file(),
        "{} is missing: build it with `cargo build -p memory-cli --bin remembering-worker`",
        worker.display()
    );
    worker
}

/// A temporary directory holding one database file.
#[derive(Debug)]
pub struct Fixture {
    /// The directory (removed on drop).
    pub dir: tempfile::TempDir,
    /// The SQLite file inside it.
    pub db: PathBuf,
    /// Global options placed before every command (e.g. `--max-chunks N`).
    pub options: Vec<String>,
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

impl Fixture {
    /// A fresh, empty database.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = dir.path().join("memory.sqlite");
        Self {
            dir,
            db,
            options: Vec::new(),
        }
    }

    /// The same fixture with extra global options before every command.
    pub fn with_options(mut self, options: &[&str]) -> Self {
        self.options = options.iter().map(|option| (*option).to_owned()).collect();
        self
    }

    /// `memory --db DB [options] <args...>` with extra environment variables.
    pub fn run_env(&self, args: &[&str], env: &[(&str, &OsStr)]) -> Outcome {
        let mut command = Command::new(memory_binary());
        command.env_remove("MEMORY_DB").env_remove("MEMORY_LOG");
        command.envs(env.iter().copied());
        command.arg("--db").arg(&self.db).args(&self.options);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("the binary starts");
        drop(child.stdin.take());
        let output = child.wait_with_output().expect("the binary finishes");
        let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
        let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
        Outcome {
            code: output.status.code().unwrap_or(-1),
            stdout,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            json,
        }
    }

    /// `memory --db DB [options] <args...>`.
    pub fn run(&self, args: &[&str]) -> Outcome {
        self.run_env(args, &[])
    }

    /// `memory --db DB <operation> JSON`.
    pub fn call(&self, operation: &str, argument: &Value) -> Outcome {
        self.run(&[operation, &argument.to_string()])
    }

    /// Runs one pass of `remembering-worker --once` over the database (intent passes, then activity
    /// passes over every thread) and asserts it succeeded.
    pub fn worker_pass(&self) {
        self.worker_pass_with(&[]);
    }

    /// One `remembering-worker --once` pass with `flags` besides.
    pub fn worker_pass_with(&self, flags: &[&str]) {
        let output = Command::new(worker_binary())
            .env_remove("MEMORY_DB")
            .arg("--db")
            .arg(&self.db)
            .arg("--once")
            .args(flags)
            .output()
            .expect("the worker runs");
        assert!(
            output.status.success(),
            "worker pass failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Writes `lines` (one `memory_put` argument each) as a JSON Lines file and imports it.
    pub fn import(&self, lines: &[Value]) -> Outcome {
        let path = self.dir.path().join("import.jsonl");
        let mut file = std::fs::File::create(&path).expect("import file");
        for line in lines {
            writeln!(file, "{line}").expect("import line");
        }
        drop(file);
        let path = path.to_str().expect("UTF-8 temporary path").to_owned();
        self.run(&["import", &path])
    }

    /// Starts `memory --db DB [options] serve` and completes the MCP handshake.
    pub async fn serve(&self) -> McpClient {
        self.serve_env(&[]).await
    }

    /// [`Self::serve`] with extra environment variables. The server holds every namespace
    /// (`--allow-any-namespace`): the product tests name the namespaces they write and recall, and
    /// what a server's grant admits is `tests/host_grant.rs`'s to prove.
    pub async fn serve_env(&self, env: &[(&str, &OsStr)]) -> McpClient {
        self.serve_with(&["--allow-any-namespace".to_owned()], env)
            .await
    }

    /// Starts `memory --db DB [options] serve ARGS` with extra environment variables (the caller's
    /// `MEMORY_*` defaults removed) and completes the MCP handshake on stdio. The server's standard
    /// error is discarded unless `PRODUCT_SERVER_STDERR` is set (then it is inherited, for diagnosing a
    /// bench).
    pub async fn serve_with(&self, args: &[String], env: &[(&str, &OsStr)]) -> McpClient {
        let command = tokio::process::Command::new(memory_binary()).configure(|command| {
            command
                .env_remove("MEMORY_DB")
                .env_remove("MEMORY_LOG")
                .env_remove("MEMORY_NAMESPACE")
                .env_remove("MEMORY_SCOPE")
                .env_remove("MEMORY_USER")
                .envs(env.iter().copied())
                .arg("--db")
                .arg(&self.db)
                .args(&self.options)
                .arg("serve")
                .args(args);
        });
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(if std::env::var_os("PRODUCT_SERVER_STDERR").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("the server starts");
        McpClient {
            service: ().serve(transport).await.expect("the MCP handshake"),
        }
    }
}

/// What one run of the binary gave.
#[derive(Debug)]
pub struct Outcome {
    /// The exit status.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Standard output parsed as JSON (`null` when empty or not JSON).
    pub json: Value,
}

impl Outcome {
    /// Asserts exit status 0 and answers the JSON.
    pub fn success(&self) -> &Value {
        assert_eq!(self.code, 0, "expected success, got {self:#?}");
        &self.json
    }

    /// Asserts exit status 2 with `{"error": {"kind": kind, ..}}` and answers the message.
    pub fn refused(&self, kind: &str) -> &str {
        assert_eq!(self.code, 2, "expected a refusal, got {self:#?}");
        assert_eq!(self.json["error"]["kind"], kind, "{self:#?}");
        self.json["error"]["message"]
            .as_str()
            .expect("a refusal explains itself")
    }
}

/// An MCP client connected to a `memory serve` child process.
pub struct McpClient {
    pub(crate) service: RunningService<RoleClient, ()>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("McpClient").finish_non_exhaustive()
    }
}

impl McpClient {
    /// Calls `tool` and answers its result, refusals included.
    pub async fn call(&self, tool: &str, arguments: Value) -> CallToolResult {
        let Value::Object(arguments) = arguments else {
            panic!("tool arguments are an object");
        };
        self.service
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await
            .expect("a tool call gets a result")
    }

    /// Calls `tool` and answers its structured content, asserting success.
    pub async fn success(&self, tool: &str, arguments: Value) -> Value {
        let result = self.call(tool, arguments).await;
        assert_eq!(result.is_error, Some(false), "{tool}: {result:#?}");
        result.structured_content.expect("structured content")
    }

    /// Calls `tool`, asserting a refusal of `kind`; answers the error message.
    pub async fn refused(&self, tool: &str, arguments: Value, kind: &str) -> String {
        let result = self.call(tool, arguments).await;
        assert_eq!(result.is_error, Some(true), "{tool}: {result:#?}");
        let content = result.structured_content.expect("structured error");
        assert_eq!(content["error"]["kind"], kind, "{content:#}");
        content["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Ends the session and waits for the server to exit.
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// The assets folder the binaries find by default: `MEMORY_ASSETS_DIR`, else the workspace's
/// (fetched by scripts/fetch-assets.sh).
pub fn default_assets() -> PathBuf {
    std::env::var_os("MEMORY_ASSETS_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets"),
        PathBuf::from,
    )
}

/// An assets folder holding the default folder's runtime and embedding model, linked, and no rerank
/// model: semantic recall works, a hybrid recall that loads the rerank model does not.
pub fn embedder_only_assets() -> tempfile::TempDir {
    let source = default_assets()
        .canonicalize()
        .expect("the model assets are fetched");
    let folder = tempfile::tempdir().expect("assets folder");
    for part in ["onnxruntime", "model"] {
        std::os::unix::fs::symlink(source.join(part), folder.path().join(part)).expect("link");
    }
    folder
}

/// The namespace every product test writes to.
pub fn namespace() -> Value {
    json!({"name": "notes", "version": 1, "identity": {"user": "u1"}})
}

/// `memory_put` arguments creating document `id` with `text`, recallable through scope `assistant`.
pub fn put(id: &str, text: &str) -> Value {
    json!({
        "namespace": namespace(),
        "id": id,
        "operation_id": format!("op-{id}"),
        "expected_revision": null,
        "locator": format!("chat:{id}"),
        "scopes": ["assistant"],
        "content": {
            "text": text,
            "attributions": [{
                "origin_id": format!("msg-{id}"), "speaker": "user", "observers": ["assistant"],
                "locator": format!("chat:{id}#1"), "activity_at": 1767225600000_i64,
                "interpretation": "stated"
            }],
            "metadata": {},
            "recorded_at": 1767225600000_i64,
            "extracted_at": 1767225600000_i64
        }
    })
}

/// `memory_recall` arguments for `query` in `mode` with `max_items` and generous other limits.
pub fn recall(query: &str, mode: &str, max_items: u32) -> Value {
    json!({
        "namespace": namespace(), "scope": "assistant", "query": query, "mode": mode,
        "limits": {
            "max_items": max_items, "max_bytes": 200000, "max_tokens": 50000, "timeout_ms": 60000
        }
    })
}

/// The recall modes, in the order tests run them.
pub const MODES: [&str; 4] = ["lexical", "exact", "hnsw", "hybrid"];

/// The distinct document ids a recall result cites.
pub fn cited_documents(result: &Value) -> Vec<String> {
    let mut ids: Vec<String> = result["passages"]
        .as_array()
        .expect("passages")
        .iter()
        .map(|passage| {
            passage["source"]["id"]
                .as_str()
                .expect("source id")
                .to_owned()
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The chat messages of an assembled context (`messages`), asserting every tool call is followed by
/// its result.
pub fn paired(messages: &Value) -> &Vec<Value> {
    let messages = messages.as_array().expect("messages");
    for (index, message) in messages.iter().enumerate() {
        for (offset, call) in message["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            assert_eq!(
                messages[index + 1 + offset]["tool_call_id"],
                call["id"],
                "a call without its result: {messages:#?}"
            );
        }
    }
    messages
}
