//! The documentation against the product: the README is a front page of at most 200 lines; every
//! relative link in it and in `docs/` reaches a file; and every shell snippet runs against the built
//! binaries, in a fresh directory with a fresh home, and prints what its page says it prints (each
//! `<!-- expect: TEXT -->` line right after the snippet), unless a visible line right before it says why
//! it is not run (`*Not run by the docs test: REASON.*`). A snippet may start servers and workers in
//! the background (`&`), as a reader would: they are stopped when it ends. A snippet that names
//! `$DATABASE_URL` runs against the tests' PostgreSQL server (`MEMORY_TEST_POSTGRES_URL`), and is
//! counted as not run without one. The counts of snippets run
//! and not run are printed, so what the docs promise without a test is visible too.

use std::path::{Path, PathBuf};
use std::process::Command;

use integration_tests::product::{memory_binary, worker_binary};

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

fn snippets(page: &Path) -> Vec<Snippet> {
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
        if language.trim() != "sh" {
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

#[test]
fn every_shell_snippet_of_the_docs_runs_unless_it_says_why_not() {
    let root = repository();
    let bin = memory_binary()
        .parent()
        .expect("the binaries' folder")
        .to_owned();
    assert!(
        worker_binary().starts_with(&bin),
        "memory and remembering-worker are built side by side"
    );
    let assets =
        std::env::var_os("MEMORY_ASSETS_DIR").unwrap_or_else(|| root.join("assets").into());
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    let (mut run, mut not_run) = (0, Vec::new());
    for snippet in pages().iter().flat_map(|page| snippets(page)) {
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
        let output = Command::new("timeout")
            .args([SNIPPET_SECONDS, "bash", "-euo", "pipefail", "-c", &script])
            .current_dir(home.path())
            .env_clear()
            .env("PATH", &path)
            .env("HOME", home.path())
            .env("USER", "ana")
            .env("LOGNAME", "ana")
            .env("MEMORY_ASSETS_DIR", &assets)
            .env("MEMORY_LOG", "warn")
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
        let help = Command::new(bin.join(binary))
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
