//! Which lines are code, logs, stack traces, shell commands or tool output rather than something a
//! person wrote in conversation: segmentation drops runs of such lines whole as `code`.

/// Whether one trimmed line looks like code, a log line, a stack frame, a shell command or tool
/// output rather than something a person wrote in conversation.
pub(super) fn looks_like_code_line(line: &str) -> bool {
    if line.is_empty() {
        return false;
    }
    const STRONG: &[&str] = &[
        "$ ",
        ">>> ",
        "#!",
        "#include",
        "#define",
        "Traceback (most recent call last)",
        "Exception in thread",
        "Caused by: ",
        "error[E",
        "npm ERR!",
        "diff --git",
        "@@ ",
        "<?",
        "</",
        "PS C:\\",
        "C:\\",
        "sudo ",
        "--> ",
    ];
    if STRONG.iter().any(|prefix| line.starts_with(prefix)) {
        return true;
    }
    if line.contains("panicked at") || is_log_line(line) || is_stack_frame(line) {
        return true;
    }
    if is_exception_line(line) || is_keyword_code(line) || is_command(line) {
        return true;
    }
    // A line of brackets and separators only: the tail of a pasted block.
    if !line.chars().any(char::is_alphanumeric)
        && line.contains(['{', '}', '[', ']', '(', ')', ';'])
    {
        return true;
    }
    if line.ends_with('{') || (line.starts_with(['{', '[']) && line.ends_with(['}', ']', ','])) {
        return true;
    }
    symbol_density_is_code(line)
}

/// `2024-05-01 12:00:03 …`, `[2024-…]`, `[INFO] …`, `ERROR: …`, `12:00:03 …`.
fn is_log_line(line: &str) -> bool {
    let bytes = line.as_bytes();
    let digit = |index: usize| bytes.get(index).is_some_and(u8::is_ascii_digit);
    let is_date = |at: usize| {
        (0..4).all(|i| digit(at + i))
            && bytes.get(at + 4) == Some(&b'-')
            && digit(at + 5)
            && digit(at + 6)
            && bytes.get(at + 7) == Some(&b'-')
            && digit(at + 8)
            && digit(at + 9)
    };
    let is_time = |at: usize| {
        digit(at)
            && digit(at + 1)
            && bytes.get(at + 2) == Some(&b':')
            && digit(at + 3)
            && digit(at + 4)
            && bytes.get(at + 5) == Some(&b':')
            && digit(at + 6)
            && digit(at + 7)
    };
    if is_date(0) && matches!(bytes.get(10), Some(b' ' | b'T')) && digit(11) {
        return true;
    }
    if is_time(0) || (bytes.first() == Some(&b'[') && (is_date(1) || is_time(1))) {
        return true;
    }
    const LEVELS: &[&str] = &[
        "INFO", "ERROR", "ERR", "WARN", "WARNING", "DEBUG", "TRACE", "FATAL", "CRITICAL",
    ];
    let unbracketed = line.strip_prefix('[').unwrap_or(line);
    LEVELS.iter().any(|level| {
        unbracketed
            .strip_prefix(level)
            .is_some_and(|rest| rest.starts_with([' ', ':', ']']))
    })
}

/// `at com.example.Foo.bar(Foo.java:12)`, `at Object.<anonymous> (/app/x.js:1:5)`,
/// `File "x.py", line 3, in <module>`.
fn is_stack_frame(line: &str) -> bool {
    if let Some(rest) = line.strip_prefix("at ") {
        let token = rest.split_whitespace().next().unwrap_or("");
        let token = token.trim_end_matches(|c: char| !c.is_alphanumeric() && c != ')' && c != '>');
        return token.contains(['.', '/', '<', '\\'])
            && (line.contains('(') || line.ends_with(')'));
    }
    line.starts_with("File \"") && line.contains(", line ")
}

/// `ValueError: invalid literal`, `java.lang.NullPointerException`, `TypeError: x is undefined`.
fn is_exception_line(line: &str) -> bool {
    let head = line
        .split([':', ' '])
        .next()
        .unwrap_or("")
        .rsplit('.')
        .next()
        .unwrap_or("");
    let named = ["Error", "Exception"]
        .iter()
        .any(|suffix| head.len() > suffix.len() && head.ends_with(suffix));
    named
        && head.chars().next().is_some_and(char::is_uppercase)
        && head.chars().all(char::is_alphanumeric)
        && (line.len() == head.len() || line.contains(": ") || !line.contains(' '))
}

/// Source lines that start with a keyword and carry a code signal.
fn is_keyword_code(line: &str) -> bool {
    let signal = line.contains(['(', '{', '=', ';']) || line.ends_with(':');
    let first = line.split_whitespace().next().unwrap_or("");
    let second = line.split_whitespace().nth(1).unwrap_or("");
    match first {
        "def" | "fn" | "function" | "func" | "async" => line.contains('('),
        "class" | "struct" | "enum" | "impl" | "trait" | "interface" => {
            line.ends_with(':') || line.ends_with('{')
        }
        "pub" | "pub(crate)" => {
            first == "pub(crate)"
                || matches!(
                    second,
                    "fn" | "struct"
                        | "enum"
                        | "mod"
                        | "use"
                        | "const"
                        | "trait"
                        | "type"
                        | "static"
                        | "async"
                        | "unsafe"
                        | "impl"
                )
        }
        "return" => line.ends_with(';'),
        "const" | "let" | "var" | "val" => line.contains('=') && !line.contains("let me"),
        "import" => !line.ends_with(['.', '?', '!']) && line.split_whitespace().count() <= 6,
        "from" => line.contains(" import "),
        "use" => line.ends_with(';') && line.contains("::"),
        "if" | "for" | "while" | "switch" | "catch" => second.starts_with('('),
        "else" | "try" | "finally" | "do" => line.ends_with('{'),
        "elif" | "except" => line.ends_with(':'),
        "}" | "});" | "};" | "}," | ");" => true,
        "SELECT" | "INSERT" | "UPDATE" | "DELETE" | "CREATE" | "ALTER" | "DROP" => {
            line.contains(" FROM ")
                || line.contains(" INTO ")
                || line.contains(" SET ")
                || line.contains(" TABLE ")
                || line.ends_with(';')
        }
        "//" | "/*" | "*/" | "#[" | "#[derive" => true,
        _ => signal && (first.starts_with("//") || first.starts_with("#[") || first.contains("::")),
    }
}

/// A shell command of a well-known tool with one of its subcommands: `git push origin main`,
/// `cargo test -p x`, `npm install`.
fn is_command(line: &str) -> bool {
    let mut words = line.split_whitespace();
    let (Some(tool), Some(sub)) = (words.next(), words.next()) else {
        return false;
    };
    let subcommands: &[&str] = match tool {
        "git" => &[
            "clone",
            "commit",
            "push",
            "pull",
            "checkout",
            "status",
            "log",
            "diff",
            "add",
            "rebase",
            "merge",
            "reset",
            "stash",
            "branch",
            "fetch",
            "init",
            "remote",
            "switch",
            "restore",
            "cherry-pick",
            "tag",
            "show",
        ],
        "cargo" => &[
            "build", "test", "run", "check", "clippy", "add", "install", "fmt", "bench", "doc",
            "new", "update", "publish",
        ],
        "npm" | "pnpm" | "yarn" => &[
            "install", "i", "run", "test", "start", "ci", "init", "publish", "exec", "add",
        ],
        "pip" | "pip3" => &["install", "uninstall", "freeze", "list", "show"],
        "docker" => &[
            "run", "build", "ps", "exec", "compose", "pull", "push", "images", "logs", "stop", "rm",
        ],
        "kubectl" => &[
            "get", "apply", "describe", "logs", "delete", "exec", "create",
        ],
        "curl" | "wget" => return sub.starts_with('-') || sub.contains("://"),
        _ => return false,
    };
    subcommands.contains(&sub) && !line.ends_with(['.', '?', '!'])
}

/// Lines dense in brackets, operators and sigils (JSON, minified code, shell pipelines).
fn symbol_density_is_code(line: &str) -> bool {
    let mut total = 0_usize;
    let mut symbols = 0_usize;
    for c in line.chars().filter(|c| !c.is_whitespace()) {
        total += 1;
        if "{}[]()<>;=|&\\$#@*^~`".contains(c) {
            symbols += 1;
        }
    }
    total >= 12 && symbols * 5 >= total
}

#[cfg(test)]
mod tests {
    use crate::statements::test_support::{dropped, kept, kinds};
    use crate::statements::{DropReason, SentenceKind};

    #[test]
    fn code_logs_and_pasted_output_are_dropped_whole() {
        let text = "I'm debugging my parser. Here is the error:\n\
                    Traceback (most recent call last):\n  File \"main.py\", line 3, in <module>\n    \
                    parse(x)\nValueError: invalid literal\nI think the input is empty.";
        let got = kinds(text);
        assert_eq!(
            got,
            vec![
                (
                    "I'm debugging my parser.".to_owned(),
                    SentenceKind::Statement
                ),
                ("Here is the error:".to_owned(), SentenceKind::Statement),
                (
                    "Traceback (most recent call last):\n  File \"main.py\", line 3, in <module>\n    \
                     parse(x)\nValueError: invalid literal"
                        .to_owned(),
                    dropped(DropReason::Code)
                ),
                (
                    "I think the input is empty.".to_owned(),
                    SentenceKind::Statement
                ),
            ]
        );
        let fenced = "My config:\n```toml\n[server]\nport = 8080\n\nI use this\n```\nIt works.";
        assert_eq!(
            kinds(fenced)
                .into_iter()
                .map(|(_, kind)| kind)
                .collect::<Vec<_>>(),
            vec![
                SentenceKind::Statement,
                dropped(DropReason::Code),
                SentenceKind::Statement
            ]
        );
        for line in [
            "$ cargo test -p remembering",
            "2024-05-01 12:00:03 ERROR connection refused",
            "[INFO] server started on :8080",
            "    at com.example.Foo.bar(Foo.java:12)",
            "thread 'main' panicked at src/main.rs:4:5:",
            "git push origin main",
            "{\"name\": \"x\", \"tags\": [1, 2, 3]}",
            "fn main() {",
            "```unterminated fence\nI live in Lisbon",
        ] {
            assert!(
                kinds(line)
                    .iter()
                    .all(|(_, kind)| *kind == dropped(DropReason::Code)),
                "{line}: {:?}",
                kinds(line)
            );
        }
        let long = "I like tea and ".repeat(200);
        assert_eq!(
            kinds(&long),
            vec![(long.trim().to_owned(), dropped(DropReason::Code))]
        );
        // Prose mentioning code stays prose.
        assert_eq!(
            kept("I use `cargo test` every day. I work at the park (it's nice: really)."),
            vec![
                "I use `cargo test` every day.",
                "I work at the park (it's nice: really)."
            ]
        );
    }
}
