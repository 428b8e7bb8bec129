//! The documentation against the product: the README is a front page of at most 200 lines; every
//! relative link in it and in `docs/` reaches a file; and every shell snippet runs against the built
//! binaries, in a fresh directory with a fresh home, and prints what its page says it prints (each
//! `<!-- expect: TEXT -->` line right after the snippet), unless a visible line right before it says why
//! it is not run (`*Not run by the docs test: REASON.*`). A snippet may start servers and workers in
//! the background (`&`), as a reader would: they are stopped when it ends. A snippet that names
//! `$DATABASE_URL` runs against the tests' PostgreSQL server (`MEMORY_TEST_POSTGRES_URL`), and is
//! counted as not run without one. The counts of snippets run and not run are printed, so what the
//! docs promise without a test is visible too. Every JSON block is a host's configuration: each
//! parses, each MCP server it configures over stdio starts with its arguments and environment and
//! lists the tools the page promises, and each hook command it configures runs and answers.

use std::path::{Path, PathBuf};
use std::process::Command;

use integration_tests::product::{Fixture, McpClient, memory_binary, worker_binary};
use serde_json::Value;

const NOT_RUN: &str = "*Not run by the docs test:";
const EXPECT: &str = "<!-- expect: ";
/// Seconds one snippet may take (it loads the model once or twice).
const SNIPPET_SECONDS: &str = "300";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the repository")
}

/// The README and every page of `docs/`, in order.
fn pages() -> Vec<PathBuf> {
    let root = repository();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .collect();
    pages.sort();
    pages.insert(0, root.join("README.md"));
    pages
}

/// A fenced shell snippet of a page.
struct Snippet {
    page: PathBuf,
    line: usize,
    code: String,
    not_run: Option<String>,
    expected: Vec<String>,
}

fn snippets(page: &Path, wanted: &str) -> Vec<Snippet> {
    let text = std::fs::read_to_string(page).expect("a page");
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let Some(language) = lines[index].strip_prefix("```") else {
            index += 1;
            continue;
        };
        let start = index;
        index += 1;
        while index < lines.len() && !lines[index].starts_with("```") {
            index += 1;
        }
        let code = lines[start + 1..index.min(lines.len())].join("\n");
        index += 1;
        if language.trim() != wanted {
            continue;
        }
        let before = lines[..start]
            .iter()
            .rev()
            .find(|line| !line.trim().is_empty())
            .copied()
            .unwrap_or("");
        let not_run = before
            .strip_prefix(NOT_RUN)
            .map(|reason| reason.trim().trim_end_matches(".*").to_owned());
        let expected = lines[index.min(lines.len())..]
            .iter()
            .map_while(|line| {
                line.strip_prefix(EXPECT)
                    .and_then(|rest| rest.strip_suffix(" -->"))
            })
            .map(str::to_owned)
            .collect();
        found.push(Snippet {
            page: page.to_owned(),
            line: start + 1,
            code,
            not_run,
            expected,
        });
    }
    found
}

#[test]
fn the_readme_is_a_front_page_and_every_link_of_the_docs_reaches_a_file() {
    let root = repository();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "the README has {lines} lines, more than a front page's 200"
    );
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a page");
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            rest = &rest[end..];
            if target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with('#')
                || target.contains(' ')
            {
                continue;
            }
            let file = target.split('#').next().unwrap_or(target);
            let resolved = page.parent().expect("a folder").join(file);
            assert!(
                resolved.exists(),
                "{}: the link to {target} reaches no file",
                page.display()
            );
        }
    }
}

/// The shell a reader runs the docs' commands in, and nothing else of the test's environment: the
/// built `memory` and `remembering-worker` first on `PATH`, the model assets, the user `ana`, and
/// a fresh home for each command.
struct ReaderShell {
    path: std::ffi::OsString,
    assets: std::ffi::OsString,
}

impl ReaderShell {
    fn new() -> Self {
        let bin = memory_binary()
            .parent()
            .expect("the binaries' folder")
            .to_owned();
        assert!(
            worker_binary().starts_with(&bin),
            "memory and remembering-worker are built side by side"
        );
        let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )))
        .expect("PATH");
        let assets = std::env::var_os("MEMORY_ASSETS_DIR")
            .unwrap_or_else(|| repository().join("assets").into());
        Self { path, assets }
    }

    /// `program`, to run in `home` as ana.
    fn command(&self, program: &str, home: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(home)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", home)
            .env("USER", "ana")
            .env("LOGNAME", "ana")
            .env("MEMORY_ASSETS_DIR", &self.assets)
            .env("MEMORY_LOG", "warn");
        command
    }
}

#[test]
fn every_shell_snippet_of_the_docs_runs_unless_it_says_why_not() {
    let root = repository();
    let shell = ReaderShell::new();
    let (mut run, mut not_run) = (0, Vec::new());
    for snippet in pages().iter().flat_map(|page| snippets(page, "sh")) {
        let at = format!(
            "{}:{}",
            snippet
                .page
                .strip_prefix(&root)
                .unwrap_or(&snippet.page)
                .display(),
            snippet.line
        );
        if let Some(reason) = snippet.not_run {
            assert!(!reason.is_empty(), "{at}: a snippet not run says why");
            not_run.push(format!("{at} ({reason})"));
            continue;
        }
        let database = std::env::var("MEMORY_TEST_POSTGRES_URL").ok();
        let needs_database = snippet.code.contains("$DATABASE_URL");
        if needs_database && database.is_none() {
            not_run.push(format!(
                "{at} (no PostgreSQL server: MEMORY_TEST_POSTGRES_URL is unset)"
            ));
            continue;
        }
        let home = tempfile::tempdir().expect("a home");
        // What a snippet left running in the background stops with it (`timeout` stops the whole
        // process group if the snippet itself hangs).
        let script = format!(
            "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{}",
            snippet.code
        );
        let output = shell
            .command("timeout", home.path())
            .args([SNIPPET_SECONDS, "bash", "-euo", "pipefail", "-c", &script])
            .envs(
                database
                    .filter(|_| needs_database)
                    .map(|url| ("DATABASE_URL", url)),
            )
            .output()
            .expect("bash runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{at} failed ({:?}):\n{}\n--- stdout\n{stdout}\n--- stderr\n{}",
            output.status,
            snippet.code,
            String::from_utf8_lossy(&output.stderr)
        );
        for expected in &snippet.expected {
            assert!(
                stdout.contains(expected.as_str()),
                "{at} did not print {expected:?}:\n{stdout}"
            );
        }
        run += 1;
    }
    // The snippets that build an optimized binary to show its help: the help, from the built ones.
    for binary in ["memory", "remembering-worker"] {
        let help = Command::new(memory_binary().with_file_name(binary))
            .arg("--help")
            .output()
            .expect("the binary runs");
        assert!(help.status.success(), "{binary} --help");
    }
    println!(
        "docs snippets: {run} run, {} not run:\n  {}",
        not_run.len(),
        not_run.join("\n  ")
    );
    assert!(run >= 1, "at least one snippet runs");
}

/// A stdio MCP server configuration: the arguments after `serve`, and the environment.
struct StdioServer {
    args: Vec<String>,
    env: Vec<(String, String)>,
}

/// The stdio MCP server a block configures, or `None` for another kind of block (HTTP servers,
/// hooks).
fn stdio_server(config: &Value) -> Option<StdioServer> {
    let servers = config
        .get("mcpServers")
        .or_else(|| config.get("servers"))?
        .as_object()?;
    let server = servers.get("memory")?;
    if server.get("command")?.as_str()? != "memory" {
        return None;
    }
    let args: Vec<String> = server["args"]
        .as_array()?
        .iter()
        .map(|arg| arg.as_str().map(str::to_owned))
        .collect::<Option<_>>()?;
    let serve = args.iter().position(|arg| arg == "serve")?;
    let env = server
        .get("env")
        .and_then(Value::as_object)
        .map(|env| {
            env.iter()
                .map(|(name, value)| (name.clone(), value.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    Some(StdioServer {
        args: args[serve + 1..].to_vec(),
        env,
    })
}

/// Every `command` of a hooks configuration (Claude Code's `settings.json`), by event.
fn hook_commands(config: &Value) -> Vec<(String, String)> {
    let Some(events) = config.get("hooks").and_then(Value::as_object) else {
        return Vec::new();
    };
    events
        .iter()
        .flat_map(|(event, matchers)| {
            matchers
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|matcher| matcher["hooks"].as_array().into_iter().flatten())
                .filter_map(move |hook| Some((event.clone(), hook["command"].as_str()?.to_owned())))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_json_configuration_of_the_docs_parses_and_what_it_starts_runs() {
    let shell = ReaderShell::new();
    let (mut servers, mut hooks, mut parsed) = (0, 0, 0);
    for block in pages().iter().flat_map(|page| snippets(page, "json")) {
        let at = format!("{}:{}", block.page.display(), block.line);
        // `${VAR}` placeholders are the host's to expand; they sit inside strings.
        let config: Value = serde_json::from_str(&block.code)
            .unwrap_or_else(|error| panic!("{at} is not JSON: {error}"));
        parsed += 1;
        if let Some(StdioServer { args, env }) = stdio_server(&config) {
            let fixture = Fixture::new();
            let env: Vec<(&str, &std::ffi::OsStr)> = env
                .iter()
                .map(|(name, value)| (name.as_str(), std::ffi::OsStr::new(value.as_str())))
                .collect();
            let client = McpClient::stdio(&fixture, &args, &env).await;
            let tools = client.tool_names().await;
            for promised in [
                "memory_remember",
                "memory_search",
                "memory_forget",
                "memory_list",
            ] {
                assert!(
                    tools.iter().any(|tool| tool == promised),
                    "{at}: the configured server lists {promised}: {tools:?}"
                );
            }
            client.close().await;
            servers += 1;
        }
        for (event, command) in hook_commands(&config) {
            let home = tempfile::tempdir().expect("a home");
            std::fs::create_dir_all(home.path().join(".local/share")).expect("the data folder");
            let input = serde_json::json!({"session_id": "docs", "transcript_path": "/tmp/docs.jsonl",
                "cwd": "/tmp", "hook_event_name": event, "prompt": "What do I like?"});
            let mut child = shell
                .command("bash", home.path())
                .args(["-c", &command])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("the hook command starts");
            use std::io::Write as _;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.to_string().as_bytes())
                .expect("the hook reads its input");
            let output = child.wait_with_output().expect("the hook ends");
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "{at}: {command} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(
                stdout.trim().is_empty() || serde_json::from_str::<Value>(&stdout).is_ok(),
                "{at}: {command} answers JSON or nothing: {stdout}"
            );
            assert!(
                !home.path().join(".memory").exists()
                    && home.path().join(".local/share/memory.sqlite").exists(),
                "{at}: {command} used the database it names"
            );
            hooks += 1;
        }
    }
    println!(
        "docs JSON: {parsed} parsed, {servers} stdio servers started, {hooks} hook commands run"
    );
    assert!(
        servers >= 3 && hooks >= 3,
        "{servers} servers, {hooks} hooks"
    );
}
