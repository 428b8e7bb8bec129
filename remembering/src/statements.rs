//! What of a user's input becomes memory: the input is split into sentences, each with its byte range
//! in the original text, and each sentence is classified. Statements are kept; everything else is
//! dropped and counted by a [`DropReason`], so nothing is dropped silently.
//!
//! Pure functions, no model: the rules are deliberately conservative. A sentence is dropped only when
//! it clearly is not something the user states (a question, a request to the assistant, a greeting,
//! an acknowledgement, pasted code or output, or nothing at all); anything in doubt is kept, because a
//! dropped fact is lost while a kept pleasantry only costs a little recall noise.
//!
//! Segmentation works in two steps:
//! - Lines are grouped into blocks: fenced blocks (```` ``` ```` or `~~~`), runs of lines that look like
//!   code, logs, stack traces or shell sessions (indented lines continue such a run), and prose
//!   paragraphs (separated by blank lines or by the other blocks). Code blocks and prose paragraphs
//!   over [`MAX_PROSE_BYTES`] are dropped whole as [`DropReason::Code`].
//! - Prose is split into sentences at `.`, `!`, `?` and `…` runs followed by whitespace (not after
//!   abbreviations, initials, list numbers, or an ellipsis that the sentence continues after), at
//!   CJK full stops, and at line breaks (except where a line is merely wrapped: it ends in a
//!   lower-case letter or a comma and the next one starts in lower case).
//!
//! Every [`Sentence`] is trimmed of surrounding whitespace; together they cover every non-whitespace
//! byte of the text exactly once, in order.

use std::collections::BTreeMap;

/// Most UTF-8 bytes of a prose sentence or paragraph kept as a statement: anything longer is pasted
/// material (an article, a log, output), dropped as [`DropReason::Code`]. A spoken statement of this
/// size (about 300 words) does not occur in conversation.
pub const MAX_PROSE_BYTES: usize = 2_000;

/// Why a part of a user's input was not kept as memory. The names ([`DropReason::as_str`]) are
/// stable: they are stored in extraction notes and shown by `memory status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// A question (`question`): it asks rather than states.
    Question,
    /// A request to the assistant (`request`): "can you…", "please…", "tell me…", "let's…".
    Request,
    /// A greeting or farewell (`greeting`): "hi", "good morning", "how have you been?".
    Greeting,
    /// An acknowledgement or reaction (`acknowledgement`): "thanks", "ok", "got it", "that's great".
    Acknowledgement,
    /// Pasted code, logs or tool output, or prose over [`MAX_PROSE_BYTES`] (`code`).
    Code,
    /// No letters or digits at all (`empty`): punctuation, emoji, or an input of only whitespace.
    Empty,
    /// A statement the same record already made (`repeated`): the record is one witness of it, so
    /// it is kept once. Assigned by the extractor, never by [`classify`].
    Repeated,
}

impl DropReason {
    /// Every reason, in the order of their names.
    pub const ALL: [Self; 7] = [
        Self::Acknowledgement,
        Self::Code,
        Self::Empty,
        Self::Greeting,
        Self::Question,
        Self::Repeated,
        Self::Request,
    ];

    /// The stable name stored in extraction notes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Question => "question",
            Self::Request => "request",
            Self::Greeting => "greeting",
            Self::Acknowledgement => "acknowledgement",
            Self::Code => "code",
            Self::Empty => "empty",
            Self::Repeated => "repeated",
        }
    }
}

/// What a sentence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SentenceKind {
    /// Something the speaker states: kept as memory.
    Statement,
    /// Not kept, for this reason.
    Dropped(DropReason),
}

/// One sentence (or one dropped block) of a text: its byte range and its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sentence {
    /// Byte offset of its first byte in the text (on a char boundary).
    pub start: usize,
    /// Byte offset just past its last byte (on a char boundary).
    pub end: usize,
    /// What it is.
    pub kind: SentenceKind,
}

impl Sentence {
    /// Its text within `source`, the text it was segmented from (empty for any other text whose
    /// boundaries do not match).
    pub fn text<'a>(&self, source: &'a str) -> &'a str {
        source.get(self.start..self.end).unwrap_or("")
    }
}

/// Splits `text` into trimmed sentences and classifies each (see the module documentation).
pub fn segment(text: &str) -> Vec<Sentence> {
    let lines = lines(text);
    let mut sentences = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let trimmed = line.text(text).trim();
        if trimmed.is_empty() {
            index += 1;
            continue;
        }
        let last = if let Some(fence) = fence_marker(trimmed) {
            fenced_block_end(text, &lines, index, fence)
        } else if looks_like_code_line(trimmed) {
            code_run_end(text, &lines, index)
        } else {
            let last = paragraph_end(text, &lines, index);
            prose(text, line.start, lines[last].end, &mut sentences);
            index = last + 1;
            continue;
        };
        push_trimmed(
            text,
            line.start,
            lines[last].end,
            SentenceKind::Dropped(DropReason::Code),
            &mut sentences,
        );
        index = last + 1;
    }
    sentences
}

/// How many sentences were dropped, by reason name.
pub fn dropped_counts(sentences: &[Sentence]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for sentence in sentences {
        if let SentenceKind::Dropped(reason) = sentence.kind {
            *counts.entry(reason.as_str().to_owned()).or_insert(0) += 1;
        }
    }
    counts
}

/// The text two statements must share to be the same statement: case-folded, whitespace collapsed to
/// single spaces, typographic apostrophes made plain, and leading and trailing punctuation (list
/// markers, quotes, full stops, emoji) stripped.
pub fn normalize(sentence: &str) -> String {
    let lowered = sentence
        .to_lowercase()
        .replace(['\u{2019}', '\u{2018}'], "'");
    let collapsed = lowered.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_owned()
}

/// Classifies one sentence of prose (see [`DropReason`] for what is dropped).
pub fn classify(sentence: &str) -> SentenceKind {
    let sentence = sentence.trim();
    if !sentence.chars().any(char::is_alphanumeric) {
        return SentenceKind::Dropped(DropReason::Empty);
    }
    // Inline fences are pasted code even inside a line of prose.
    if sentence.len() > MAX_PROSE_BYTES || sentence.contains("```") {
        return SentenceKind::Dropped(DropReason::Code);
    }
    let words = words(sentence);
    if let Some(reason) = pleasantry(&words) {
        return SentenceKind::Dropped(reason);
    }
    if is_request(sentence, &words) {
        return SentenceKind::Dropped(DropReason::Request);
    }
    if is_question(sentence, &words) {
        return SentenceKind::Dropped(DropReason::Question);
    }
    SentenceKind::Statement
}

// ---------------------------------------------------------------------------------------------
// Lines and blocks

/// A line's byte range, without its `\n`.
#[derive(Debug, Clone, Copy)]
struct Line {
    start: usize,
    end: usize,
}

impl Line {
    fn text(self, source: &str) -> &str {
        source.get(self.start..self.end).unwrap_or("")
    }
}

fn lines(text: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (index, byte) in text.bytes().enumerate() {
        if byte == b'\n' {
            lines.push(Line { start, end: index });
            start = index + 1;
        }
    }
    lines.push(Line {
        start,
        end: text.len(),
    });
    lines
}

fn fence_marker(trimmed: &str) -> Option<&'static str> {
    ["```", "~~~"]
        .into_iter()
        .find(|fence| trimmed.starts_with(fence))
}

/// The last line of the fenced block opening at `first`: its closing fence, or the text's last line
/// when it is never closed. A line that opens and closes itself (```` ```ls``` ````) is a block alone.
fn fenced_block_end(text: &str, lines: &[Line], first: usize, fence: &str) -> usize {
    let opening = lines[first].text(text).trim();
    if opening.len() > 2 * fence.len() && opening.ends_with(fence) {
        return first;
    }
    (first + 1..lines.len())
        .find(|&index| lines[index].text(text).trim_start().starts_with(fence))
        .unwrap_or(lines.len() - 1)
}

/// The last line of a run of code-like lines starting at `first`; indented lines continue it (the
/// body of a pasted function, the frames of a stack trace).
fn code_run_end(text: &str, lines: &[Line], first: usize) -> usize {
    let mut last = first;
    for (index, line) in lines.iter().enumerate().skip(first + 1) {
        let raw = line.text(text);
        let trimmed = raw.trim();
        if trimmed.is_empty() || fence_marker(trimmed).is_some() {
            break;
        }
        if looks_like_code_line(trimmed) || raw.starts_with([' ', '\t']) {
            last = index;
        } else {
            break;
        }
    }
    last
}

/// The last line of the prose paragraph starting at `first`.
fn paragraph_end(text: &str, lines: &[Line], first: usize) -> usize {
    let mut last = first;
    for (index, line) in lines.iter().enumerate().skip(first + 1) {
        let trimmed = line.text(text).trim();
        if trimmed.is_empty() || fence_marker(trimmed).is_some() || looks_like_code_line(trimmed) {
            break;
        }
        last = index;
    }
    last
}

/// Pushes `text[start..end]` trimmed, unless nothing but whitespace is left.
fn push_trimmed(
    text: &str,
    start: usize,
    end: usize,
    kind: SentenceKind,
    sentences: &mut Vec<Sentence>,
) {
    let Some(slice) = text.get(start..end) else {
        return;
    };
    let leading = slice.len() - slice.trim_start().len();
    let trailing = slice.len() - slice.trim_end().len();
    if leading == slice.len() {
        return;
    }
    sentences.push(Sentence {
        start: start + leading,
        end: end - trailing,
        kind,
    });
}

/// Splits the prose paragraph `text[start..end]` into sentences and classifies them.
fn prose(text: &str, start: usize, end: usize, sentences: &mut Vec<Sentence>) {
    let Some(paragraph) = text.get(start..end) else {
        return;
    };
    if paragraph.trim().len() > MAX_PROSE_BYTES {
        push_trimmed(
            text,
            start,
            end,
            SentenceKind::Dropped(DropReason::Code),
            sentences,
        );
        return;
    }
    for (from, to) in sentence_ranges(paragraph) {
        let kind = classify(paragraph.get(from..to).unwrap_or(""));
        push_trimmed(text, start + from, start + to, kind, sentences);
    }
}

// ---------------------------------------------------------------------------------------------
// Sentence boundaries

fn is_terminal(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…' | '。' | '！' | '？')
}

fn is_closer(c: char) -> bool {
    matches!(
        c,
        ')' | ']' | '}' | '"' | '\'' | '”' | '’' | '»' | '›' | '」' | '』' | '）'
    )
}

/// Titles and other abbreviations whose full stop does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "approx", "fig", "inc", "ltd",
    "dept", "gen", "gov", "lt", "col", "capt", "sgt", "ave", "rd", "blvd", "jan", "feb", "mar",
    "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
];

/// Byte ranges of the sentences of a paragraph (untrimmed; they tile the paragraph).
fn sentence_ranges(paragraph: &str) -> Vec<(usize, usize)> {
    let chars: Vec<(usize, char)> = paragraph.char_indices().collect();
    let mut ranges = Vec::new();
    let mut start = 0;
    let mut index = 0;
    while index < chars.len() {
        let (offset, c) = chars[index];
        if c == '\n' {
            if !is_wrapped_line(&chars, start, index) {
                ranges.push((start, offset));
                start = offset + 1;
            }
            index += 1;
            continue;
        }
        if !is_terminal(c) {
            index += 1;
            continue;
        }
        let mut after = index;
        while after < chars.len() && is_terminal(chars[after].1) {
            after += 1;
        }
        let terminals = after - index;
        while after < chars.len() && is_closer(chars[after].1) {
            after += 1;
        }
        let closed = after - index > terminals;
        let end = chars
            .get(after)
            .map_or(paragraph.len(), |&(offset, _)| offset);
        let cjk = chars[index..index + terminals]
            .iter()
            .any(|&(_, c)| matches!(c, '。' | '！' | '？'));
        let at_space = chars.get(after).is_none_or(|&(_, c)| c.is_whitespace());
        if (cjk || at_space) && (closed || !continues(paragraph, &chars, start, index, after)) {
            ranges.push((start, end));
            start = end;
        }
        index = after;
    }
    if start < paragraph.len() {
        ranges.push((start, paragraph.len()));
    }
    ranges
}

/// Whether the line break at `newline` only wraps a sentence: the line ends in a lower-case letter
/// or a comma and the next one starts with a lower-case letter.
fn is_wrapped_line(chars: &[(usize, char)], start: usize, newline: usize) -> bool {
    let before = chars[..newline]
        .iter()
        .rev()
        .take_while(|&&(offset, _)| offset >= start)
        .map(|&(_, c)| c)
        .find(|c| !c.is_whitespace());
    let after = chars[newline + 1..]
        .iter()
        .map(|&(_, c)| c)
        .find(|c| !c.is_whitespace());
    matches!(before, Some(c) if c.is_lowercase() || c == ',')
        && matches!(after, Some(c) if c.is_lowercase())
}

/// Whether the terminal run at `chars[at..after]` does not end the sentence: an ellipsis followed by
/// lower case, or a single full stop after an abbreviation, an initial, a dotted token (`e.g`,
/// `U.S`) or a list number opening the sentence.
fn continues(
    paragraph: &str,
    chars: &[(usize, char)],
    start: usize,
    at: usize,
    after: usize,
) -> bool {
    let run: String = chars[at..after].iter().map(|&(_, c)| c).collect();
    let next = chars[after..]
        .iter()
        .map(|&(_, c)| c)
        .find(|c| !c.is_whitespace());
    if run == "..." || run == "…" {
        return next.is_some_and(char::is_lowercase);
    }
    if run != "." {
        return false;
    }
    let token_start = chars[..at]
        .iter()
        .rev()
        .take_while(|&&(offset, c)| offset >= start && (c.is_alphanumeric() || c == '.'))
        .last()
        .map_or(chars[at].0, |&(offset, _)| offset);
    let token = paragraph.get(token_start..chars[at].0).unwrap_or("");
    if token.is_empty() {
        return false;
    }
    if token.contains('.') {
        return true;
    }
    let mut letters = token.chars();
    if let (Some(first), None) = (letters.next(), letters.next())
        && first.is_alphabetic()
    {
        return true;
    }
    if ABBREVIATIONS.contains(&token.to_lowercase().as_str()) {
        return true;
    }
    // "1. Buy milk": a list number, with nothing but list markers before it in the sentence.
    token.chars().all(|c| c.is_ascii_digit())
        && paragraph
            .get(start..token_start)
            .unwrap_or("")
            .chars()
            .all(|c| c.is_whitespace() || matches!(c, '-' | '*' | '•' | '(' | '#'))
}

// ---------------------------------------------------------------------------------------------
// Code, logs and tool output

/// Whether one trimmed line looks like code, a log line, a stack frame, a shell command or tool
/// output rather than something a person wrote in conversation.
fn looks_like_code_line(line: &str) -> bool {
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

// ---------------------------------------------------------------------------------------------
// Words and phrases

/// One word: lower-cased (apostrophes kept, typographic ones made plain), and whether it was
/// written with a capital (a name, when it is not the pronoun `I`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    lower: String,
    capitalized: bool,
}

fn words(sentence: &str) -> Vec<Word> {
    sentence
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '\'' | '\u{2019}')))
        .map(|word| word.trim_matches(|c| matches!(c, '\'' | '\u{2019}')))
        .filter(|word| !word.is_empty())
        .map(|word| Word {
            lower: word.to_lowercase().replace('\u{2019}', "'"),
            capitalized: word.chars().next().is_some_and(char::is_uppercase),
        })
        .collect()
}

/// The length in words of the longest phrase of `phrases` at `words[at..]`.
fn phrase_at(words: &[Word], at: usize, phrases: &[&str]) -> Option<usize> {
    phrases
        .iter()
        .filter_map(|phrase| {
            let parts: Vec<&str> = phrase.split(' ').collect();
            let candidate = words.get(at..at + parts.len())?;
            candidate
                .iter()
                .zip(&parts)
                .all(|(word, part)| word.lower == *part)
                .then_some(parts.len())
        })
        .max()
}

fn is_any(word: Option<&Word>, set: &[&str]) -> bool {
    word.is_some_and(|word| set.contains(&word.lower.as_str()))
}

const GREETINGS: &[&str] = &[
    "hi",
    "hii",
    "hello",
    "hey",
    "heya",
    "hiya",
    "yo",
    "howdy",
    "greetings",
    "good morning",
    "good afternoon",
    "good evening",
    "good night",
    "goodnight",
    "morning",
    "evening",
    "gm",
    "welcome",
    "welcome back",
    "bye",
    "goodbye",
    "bye bye",
    "see you",
    "see ya",
    "see you later",
    "see you soon",
    "see you tomorrow",
    "see you then",
    "talk soon",
    "talk later",
    "talk to you later",
    "talk to you soon",
    "ttyl",
    "take care",
    "cya",
    "later",
    "have a good day",
    "have a good one",
    "have a good night",
    "have a good weekend",
    "have a nice day",
    "have a nice weekend",
    "have a great day",
    "have a great weekend",
    "have a great time",
    "have fun",
    "good to see you",
    "nice to see you",
    "great to see you",
    "so good to see you",
    "good to hear from you",
    "great to hear from you",
    "nice to hear from you",
    "nice to meet you",
    "pleased to meet you",
    "long time no see",
    "long time no talk",
    "how are you",
    "how are you doing",
    "how are u",
    "how r u",
    "how's it going",
    "how is it going",
    "how have you been",
    "how've you been",
    "how's everything",
    "how is everything",
    "how are things",
    "how's life",
    "how you doing",
    "what's up",
    "whats up",
    "wassup",
    "sup",
    "what's new",
    "hope you're well",
    "hope you are well",
    "hope you're doing well",
    "hope you are doing well",
    "hope all is well",
    "hope you're good",
    "can't wait to see you",
    "cannot wait to see you",
];

const ACKNOWLEDGEMENTS: &[&str] = &[
    "thanks",
    "thank you",
    "thank u",
    "thx",
    "ty",
    "tysm",
    "many thanks",
    "much appreciated",
    "appreciate it",
    "i appreciate it",
    "i appreciate that",
    "ok",
    "okay",
    "k",
    "kk",
    "okie",
    "alright",
    "all right",
    "sure",
    "sure thing",
    "of course",
    "great",
    "good",
    "cool",
    "nice",
    "awesome",
    "perfect",
    "excellent",
    "amazing",
    "wonderful",
    "fantastic",
    "incredible",
    "brilliant",
    "lovely",
    "sweet",
    "wow",
    "whoa",
    "oh",
    "ah",
    "ahh",
    "aww",
    "aw",
    "oops",
    "haha",
    "hahaha",
    "hehe",
    "lol",
    "lmao",
    "hmm",
    "hm",
    "um",
    "uh",
    "yes",
    "yeah",
    "yep",
    "yup",
    "yea",
    "ya",
    "no",
    "nope",
    "nah",
    "got it",
    "gotcha",
    "i see",
    "understood",
    "noted",
    "makes sense",
    "that makes sense",
    "sounds good",
    "sounds great",
    "sounds fun",
    "sounds amazing",
    "sounds awesome",
    "sounds like fun",
    "that's great",
    "that's awesome",
    "that's amazing",
    "that's cool",
    "that's nice",
    "that's wonderful",
    "that's fantastic",
    "that's good",
    "that's true",
    "that's right",
    "that's incredible",
    "that's exciting",
    "that's sweet",
    "that's so cool",
    "that's fair",
    "that is great",
    "that is awesome",
    "that is amazing",
    "how cool",
    "how nice",
    "how exciting",
    "how wonderful",
    "true",
    "right",
    "exactly",
    "indeed",
    "agreed",
    "definitely",
    "absolutely",
    "totally",
    "fine",
    "no problem",
    "no worries",
    "np",
    "you're welcome",
    "me too",
    "same",
    "same here",
    "good to know",
    "good to hear",
    "glad to hear it",
    "glad to hear that",
    "congrats",
    "congratulations",
    "well done",
    "good job",
    "nice job",
    "great job",
    "good luck",
    "best of luck",
    "sorry",
    "my bad",
    "never mind",
    "nevermind",
    "nvm",
    "done",
    "i agree",
    "love it",
    "love that",
    "no way",
    "no worries at all",
    "not yet",
    "not really",
    "of course not",
    "maybe",
    "probably",
    "i guess",
    "i think so",
    "i don't think so",
    "i don't know",
    "idk",
    "not sure",
    "i'm not sure",
    "go for it",
    "sounds tough",
    "sounds hard",
    "sounds rough",
    "sounds lovely",
    "sounds nice",
    "sounds cool",
    "sounds perfect",
    "sounds interesting",
    "that sounds tough",
    "that's so sweet of you",
    "that's sweet of you",
    "so sweet of you",
    "that's so kind of you",
    "that's kind of you",
    "so kind of you",
    "you're the best",
];

/// Words that may accompany a greeting or an acknowledgement without adding anything to it.
const FILLERS: &[&str] = &[
    "there",
    "everyone",
    "everybody",
    "all",
    "guys",
    "folks",
    "friend",
    "friends",
    "buddy",
    "pal",
    "mate",
    "man",
    "dude",
    "bro",
    "girl",
    "again",
    "today",
    "tonight",
    "too",
    "so",
    "much",
    "very",
    "really",
    "super",
    "a",
    "lot",
    "and",
    "well",
    "you",
    "both",
    "dear",
    "then",
    "just",
    "that",
    "sounds",
    "oh",
    "ah",
    "now",
    "anyway",
    "indeed",
    "also",
    "y'all",
];

/// Greeting or acknowledgement: the sentence is nothing but such phrases, fillers and at most two
/// names of the person addressed. Which one is the first phrase's.
fn pleasantry(words: &[Word]) -> Option<DropReason> {
    let mut reason = None;
    let mut names = 0;
    let mut at = 0;
    while at < words.len() {
        let greeting = phrase_at(words, at, GREETINGS);
        let acknowledgement = phrase_at(words, at, ACKNOWLEDGEMENTS);
        let longest = greeting.max(acknowledgement);
        if let Some(length) = longest {
            reason.get_or_insert(if greeting >= acknowledgement {
                DropReason::Greeting
            } else {
                DropReason::Acknowledgement
            });
            at += length;
            continue;
        }
        let word = &words[at];
        if FILLERS.contains(&word.lower.as_str()) {
            at += 1;
            continue;
        }
        // A name is allowed only after a phrase, as the person addressed ("Thanks, Caroline!"):
        // "Lisbon is lovely" names a place and says something about it.
        if reason.is_some() && word.capitalized && word.lower != "i" && names < 2 {
            names += 1;
            at += 1;
            continue;
        }
        return None;
    }
    reason
}

/// Words and phrases that may open a request without changing it: "ok so can you…", "also,
/// please…", "by the way, take a look…".
const REQUEST_OPENERS: &[&str] = &[
    "ok",
    "okay",
    "so",
    "and",
    "also",
    "now",
    "hey",
    "hi",
    "hello",
    "then",
    "alright",
    "well",
    "oh",
    "um",
    "uh",
    "actually",
    "just",
    "but",
    "btw",
    "by the way",
    "sorry",
    "thanks",
    "great",
    "cool",
    "yes",
    "yeah",
    "hmm",
    "anyway",
    "first",
    "next",
    "finally",
    "again",
    "quickly",
    "quick",
    "one more thing",
    "quick question",
    "please",
];

/// Phrases and imperative verbs that ask the assistant to do something. Verbs whose past tense is
/// spelled the same (read, set, put) are left out: "Read a great book yesterday" is a statement.
const REQUESTS: &[&str] = &[
    "can you",
    "could you",
    "would you",
    "will you",
    "can u",
    "could u",
    "would u",
    "won't you",
    "can't you",
    "would you mind",
    "do you mind",
    "would you be able to",
    "are you able to",
    "is it possible to",
    "is it possible for you to",
    "please",
    "pls",
    "plz",
    "kindly",
    "i need you to",
    "i want you to",
    "i'd like you to",
    "i would like you to",
    "i'd love it if you",
    "i'd like to ask you",
    "i was wondering if you could",
    "i wonder if you could",
    "let's",
    "lets",
    "let us",
    "let me know",
    "tell me",
    "tell us",
    "show me",
    "show us",
    "give me",
    "give us",
    "get me",
    "help me",
    "help us",
    "walk me through",
    "remind me",
    "tell",
    "show",
    "give",
    "help",
    "write",
    "explain",
    "summarize",
    "summarise",
    "list",
    "find",
    "search",
    "look up",
    "look into",
    "look at",
    "take a look",
    "check out",
    "create",
    "make",
    "generate",
    "draft",
    "compose",
    "fix",
    "debug",
    "check",
    "review",
    "translate",
    "describe",
    "compare",
    "suggest",
    "recommend",
    "calculate",
    "compute",
    "convert",
    "rewrite",
    "rephrase",
    "edit",
    "update",
    "add",
    "remove",
    "delete",
    "rename",
    "refactor",
    "implement",
    "build",
    "run",
    "install",
    "send",
    "schedule",
    "teach",
    "define",
    "outline",
    "brainstorm",
    "continue",
    "answer",
    "provide",
    "format",
    "print",
    "fetch",
    "email",
    "remind",
    "proofread",
    "analyze",
    "analyse",
    "imagine",
    "pretend",
    "act as",
    "repeat",
    "elaborate",
    "clarify",
    "go ahead",
    "simplify",
    "shorten",
    "expand",
    "optimize",
    "optimise",
    "draw",
    "plot",
    "sort",
];

/// What makes a request a statement after all: asking to remember something is the memory itself
/// ("please remember that I'm vegetarian").
const MEMORY_VERBS: &[&str] = &[
    "remember",
    "note",
    "keep in mind",
    "bear in mind",
    "don't forget",
    "do not forget",
    "not forget",
    "make a note",
    "take note",
    "memorize",
    "memorise",
    "never forget",
];

/// Phrases that look like requests but state a standing preference or instruction worth keeping.
const NOT_REQUESTS: &[&str] = &["make sure", "let me tell you", "let me explain"];

fn is_request(sentence: &str, words: &[Word]) -> bool {
    let mut at = 0;
    while phrase_at(words, at, REQUESTS).is_none() {
        let Some(length) = phrase_at(words, at, REQUEST_OPENERS) else {
            break;
        };
        at += length;
    }
    // A name addressing the assistant: "Claude, can you…". Only a capitalised word followed by a
    // comma that is no pronoun, determiner or contraction: "I'll show you…", "We give them…" and
    // "Gonna continue…" state things (LoCoMo lost evidence turns to this rule without the comma).
    if phrase_at(words, at, REQUESTS).is_none()
        && words
            .get(at)
            .is_some_and(|word| is_addressed_name(sentence, word))
        && phrase_at(words, at + 1, REQUESTS).is_some()
    {
        at += 1;
    }
    if phrase_at(words, at, NOT_REQUESTS).is_some() {
        return false;
    }
    let Some(length) = phrase_at(words, at, REQUESTS) else {
        return false;
    };
    let mut rest = at + length;
    while is_any(
        words.get(rest),
        &["please", "just", "also", "kindly", "you", "always"],
    ) {
        rest += 1;
    }
    phrase_at(words, rest, MEMORY_VERBS).is_none()
}

/// Whether `word` reads as a name addressing someone: capitalised, followed by a comma in the
/// sentence, and no pronoun, determiner or contraction.
fn is_addressed_name(sentence: &str, word: &Word) -> bool {
    word.capitalized
        && !SUBJECTS.contains(&word.lower.as_str())
        && !word.lower.contains('\'')
        && !matches!(word.lower.as_str(), "gonna" | "gotta" | "wanna")
        && sentence
            .to_lowercase()
            .contains(&format!("{},", word.lower))
}

const WH_WORDS: &[&str] = &[
    "what", "where", "when", "who", "whom", "whose", "why", "how", "which",
];

const WH_CONTRACTIONS: &[&str] = &[
    "what's", "where's", "who's", "how's", "when's", "why's", "whats", "wheres", "hows", "whos",
    "what'd", "where'd", "how'd", "who'd", "why'd", "whatcha", "wanna",
];

const AUXILIARIES: &[&str] = &[
    "is",
    "are",
    "was",
    "were",
    "am",
    "do",
    "does",
    "did",
    "can",
    "could",
    "would",
    "should",
    "will",
    "shall",
    "may",
    "might",
    "must",
    "have",
    "has",
    "had",
    "isn't",
    "aren't",
    "wasn't",
    "weren't",
    "don't",
    "doesn't",
    "didn't",
    "can't",
    "couldn't",
    "wouldn't",
    "shouldn't",
    "won't",
    "haven't",
    "hasn't",
];

const SUBJECTS: &[&str] = &[
    "i",
    "you",
    "he",
    "she",
    "it",
    "we",
    "they",
    "this",
    "that",
    "there",
    "these",
    "those",
    "the",
    "a",
    "an",
    "my",
    "your",
    "his",
    "her",
    "our",
    "their",
    "anyone",
    "anybody",
    "someone",
    "somebody",
    "everyone",
    "everybody",
    "u",
    "ya",
    "y'all",
    "any",
];

/// Tags that turn a statement into a request for confirmation without taking its content away: "I
/// moved to Lisbon last spring, did I tell you?" is kept.
const TAGS: &[&str] = &[
    "right",
    "you know",
    "remember",
    "isn't it",
    "wasn't it",
    "didn't i",
    "don't you think",
    "ok",
    "okay",
    "yeah",
    "huh",
    "eh",
    "haven't i",
    "did i tell you",
    "did i mention",
    "did i mention that",
    "you see",
    "no",
    "true",
    "correct",
    "isn't that right",
    "am i right",
    "didn't we",
    "wasn't i",
];

/// Declarative openings of a tagged statement.
const FIRST_PERSON: &[&str] = &[
    "i", "i'm", "i've", "i'd", "i'll", "my", "we", "we're", "we've", "our", "me", "mine",
];

fn is_question(sentence: &str, words: &[Word]) -> bool {
    let ending: String = sentence
        .chars()
        .rev()
        .take_while(|c| !c.is_alphanumeric())
        .collect();
    if ending.contains(['?', '？']) {
        return !is_tagged_statement(sentence);
    }
    if ending.contains(['.', '!', '。', '！', '…']) {
        return false;
    }
    starts_interrogative(words)
}

fn is_tagged_statement(sentence: &str) -> bool {
    let Some((head, tail)) = sentence.rsplit_once(',') else {
        return false;
    };
    let tail_words = words(tail);
    let is_tag =
        phrase_at(&tail_words, 0, TAGS) == Some(tail_words.len()) && !tail_words.is_empty();
    let head_words = words(head);
    // The statement may open with a name or an interjection: "Mel, I moved to Lisbon, right?".
    is_tag
        && head_words
            .iter()
            .take(3)
            .any(|word| FIRST_PERSON.contains(&word.lower.as_str()))
        && classify(head) == SentenceKind::Statement
}

/// A question without a question mark ("where did I put my keys"): a wh-word followed by an
/// auxiliary, or an auxiliary followed by its subject.
fn starts_interrogative(words: &[Word]) -> bool {
    let (Some(first), second) = (words.first(), words.get(1)) else {
        return false;
    };
    let first = first.lower.as_str();
    if WH_CONTRACTIONS.contains(&first) {
        return true;
    }
    if WH_WORDS.contains(&first) {
        let follows = |set: &[&str]| is_any(second, set);
        return follows(AUXILIARIES)
            || (first == "how"
                && follows(&[
                    "much", "many", "long", "often", "far", "old", "come", "about", "big", "soon",
                ]))
            || (matches!(first, "what" | "which")
                && follows(&[
                    "about", "if", "kind", "time", "else", "happened", "type", "sort", "one",
                ]))
            || (first == "why" && follows(&["not"]));
    }
    AUXILIARIES.contains(&first) && is_any(second, SUBJECTS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    fn kinds(text: &str) -> Vec<(String, SentenceKind)> {
        segment(text)
            .iter()
            .map(|sentence| (sentence.text(text).to_owned(), sentence.kind))
            .collect()
    }

    fn kept(text: &str) -> Vec<String> {
        kinds(text)
            .into_iter()
            .filter(|(_, kind)| *kind == SentenceKind::Statement)
            .map(|(text, _)| text)
            .collect()
    }

    fn dropped(reason: DropReason) -> SentenceKind {
        SentenceKind::Dropped(reason)
    }

    #[test]
    fn statements_are_kept_with_their_byte_ranges() {
        let text = "  I moved to Lisbon last spring. My sister Bea lives in Porto!  ";
        let sentences = segment(text);
        assert_eq!(sentences.len(), 2);
        assert_eq!(sentences[0].text(text), "I moved to Lisbon last spring.");
        assert_eq!((sentences[0].start, sentences[0].end), (2, 32));
        assert_eq!(sentences[1].text(text), "My sister Bea lives in Porto!");
        assert!(
            sentences
                .iter()
                .all(|sentence| sentence.kind == SentenceKind::Statement)
        );
    }

    #[test]
    fn questions_are_dropped() {
        for question in [
            "Where did I move?",
            "where did I move",
            "What is my sister's name?",
            "Do you know where I live?",
            "Did you get my message",
            "how much does it cost",
            "What's the weather like",
            "Is it going to rain tomorrow?",
            "Really?!",
        ] {
            assert_eq!(
                kinds(question),
                vec![(question.to_owned(), dropped(DropReason::Question))],
                "{question}"
            );
        }
    }

    #[test]
    fn requests_are_dropped_unless_they_ask_to_remember() {
        for request in [
            "Can you remind me where I live?",
            "Could you summarize this article for me?",
            "Please write a haiku about autumn.",
            "Tell me a joke.",
            "show me the logs",
            "Give me three ideas for dinner",
            "Help me plan my trip.",
            "Let's go hiking sometime!",
            "Ok so can you fix the tests?",
            "Claude, can you check this?",
            "I was wondering if you could proofread my essay.",
            "Remind me to call mom tomorrow.",
        ] {
            assert_eq!(
                kinds(request),
                vec![(request.to_owned(), dropped(DropReason::Request))],
                "{request}"
            );
        }
        for keep in [
            "Please remember that I'm allergic to peanuts.",
            "Remember that my sister is called Bea.",
            "Please note I'm vegetarian.",
            "Don't forget I work night shifts.",
            "Make sure you always answer in Portuguese.",
            "Read a great book about whales yesterday.",
            "Call me Ana.",
            // A capitalised first word before a request verb is no addressed name without a comma
            // (LoCoMo evidence turns the first cut dropped).
            "I'll show you what Samantha looks like.",
            "We give them lots of activities to keep them busy.",
            "Gonna continue my edu and check out career options, which is pretty exciting!",
            "You'll find it, just keep trying new things.",
        ] {
            assert_eq!(kept(keep), vec![keep.to_owned()], "{keep}");
        }
    }

    #[test]
    fn greetings_and_acknowledgements_are_dropped() {
        for (text, reason) in [
            ("Hi!", DropReason::Greeting),
            ("Hey Mel!", DropReason::Greeting),
            ("Good morning, everyone.", DropReason::Greeting),
            ("Good to see you!", DropReason::Greeting),
            ("How have you been?", DropReason::Greeting),
            ("Take care!", DropReason::Greeting),
            ("Thanks!", DropReason::Acknowledgement),
            ("Thank you so much, Caroline!", DropReason::Acknowledgement),
            ("ok", DropReason::Acknowledgement),
            ("Got it.", DropReason::Acknowledgement),
            ("Sure", DropReason::Acknowledgement),
            ("Yes.", DropReason::Acknowledgement),
            ("No", DropReason::Acknowledgement),
            ("Cool cool", DropReason::Acknowledgement),
            ("Wow, that's so cool!", DropReason::Acknowledgement),
            ("That sounds great, Mel!", DropReason::Acknowledgement),
        ] {
            assert_eq!(
                kinds(text),
                vec![(text.to_owned(), dropped(reason))],
                "{text}"
            );
        }
        // An acknowledgement that goes on to state something is a statement.
        for keep in [
            "No, I live in Porto.",
            "Yes, I moved to Lisbon in 2021.",
            "Thanks, I'm feeling much better since the surgery.",
            "Great, my new job starts on Monday.",
        ] {
            assert_eq!(kept(keep), vec![keep.to_owned()], "{keep}");
        }
    }

    #[test]
    fn a_locomo_style_conversation_keeps_its_informative_sentences() {
        let turn = "Hey Mel! Good to see you! How have you been?";
        assert_eq!(
            kinds(turn)
                .into_iter()
                .map(|(_, kind)| kind)
                .collect::<Vec<_>>(),
            vec![
                dropped(DropReason::Greeting),
                dropped(DropReason::Greeting),
                dropped(DropReason::Greeting),
            ]
        );
        let turn = "I went to a LGBTQ support group yesterday and it was so powerful.";
        assert_eq!(kept(turn), vec![turn.to_owned()]);
        let turn = "Wow, Caroline, that's great! What made you decide to go? I'm so proud of you \
                    for taking that step.";
        assert_eq!(
            kept(turn),
            vec!["I'm so proud of you for taking that step.".to_owned()]
        );
        let turn = "Thanks, Mel! The transgender stories were so inspiring. I'm planning to \
                    go back next week, and I've started researching adoption agencies.";
        assert_eq!(
            kept(turn),
            vec![
                "The transgender stories were so inspiring.".to_owned(),
                "I'm planning to go back next week, and I've started researching adoption \
                 agencies."
                    .to_owned(),
            ]
        );
        let turn = "Yeah, I painted that lake sunrise last year! It's special to me.";
        assert_eq!(
            kept(turn),
            vec![
                "Yeah, I painted that lake sunrise last year!".to_owned(),
                "It's special to me.".to_owned(),
            ]
        );
        let turn = "Mel, I moved to Lisbon last spring, did I tell you?";
        assert_eq!(kept(turn), vec![turn.to_owned()]);
    }

    #[test]
    fn sentence_boundaries_respect_abbreviations_lists_and_wrapping() {
        assert_eq!(
            kept("Dr. Silva is my doctor. She works at St. Mary's."),
            vec!["Dr. Silva is my doctor.", "She works at St. Mary's."]
        );
        assert_eq!(
            kept("I like fruit, e.g. apples and pears. J. K. Rowling is my favourite author."),
            vec![
                "I like fruit, e.g. apples and pears.",
                "J. K. Rowling is my favourite author."
            ]
        );
        assert_eq!(
            kept("My goals:\n1. Run a marathon\n2. Learn Portuguese"),
            vec!["My goals:", "1. Run a marathon", "2. Learn Portuguese"]
        );
        assert_eq!(
            kept("I moved to Lisbon\nlast spring and I love it"),
            vec!["I moved to Lisbon\nlast spring and I love it"]
        );
        assert_eq!(
            kept("I was thinking... maybe I'll paint again. I sold a painting for 3.5 euros."),
            vec![
                "I was thinking... maybe I'll paint again.",
                "I sold a painting for 3.5 euros."
            ]
        );
        assert_eq!(
            kept("我住在里斯本。我喜欢茶。"),
            vec!["我住在里斯本。", "我喜欢茶。"]
        );
        assert_eq!(
            kept("She said \"I'm moving to Faro.\" Then she left."),
            vec!["She said \"I'm moving to Faro.\"", "Then she left."]
        );
    }

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

    #[test]
    fn nothing_but_punctuation_is_empty() {
        assert_eq!(
            kinds("I love it! 😊 ..."),
            vec![
                ("I love it!".to_owned(), SentenceKind::Statement),
                ("😊 ...".to_owned(), dropped(DropReason::Empty)),
            ]
        );
        assert!(segment("   \n\t ").is_empty());
    }

    #[test]
    fn normalized_text_ignores_case_spacing_and_trailing_punctuation() {
        assert_eq!(normalize("I moved to  Lisbon."), "i moved to lisbon");
        assert_eq!(
            normalize("i moved to lisbon"),
            normalize(" I MOVED\nto Lisbon!! ")
        );
        assert_eq!(normalize("- I’m vegetarian."), normalize("I'm vegetarian"));
        assert_ne!(
            normalize("I moved to Lisbon."),
            normalize("I moved to Porto.")
        );
    }

    #[test]
    fn counts_name_each_dropped_sentence_once() {
        let text = "Hi! Thanks. Where do I live? Can you help? I live in Lisbon. ```x```";
        let sentences = segment(text);
        let counts = dropped_counts(&sentences);
        assert_eq!(
            counts,
            BTreeMap::from([
                ("acknowledgement".to_owned(), 1),
                ("code".to_owned(), 1),
                ("greeting".to_owned(), 1),
                ("question".to_owned(), 1),
                ("request".to_owned(), 1),
            ])
        );
        let names: Vec<&str> = DropReason::ALL
            .iter()
            .map(|reason| reason.as_str())
            .collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
    }

    /// Chat-like text: words, punctuation, line breaks, fences, code-ish tokens and odd characters.
    fn chat_text() -> impl Strategy<Value = String> {
        let token = prop_oneof![
            4 => prop::sample::select(vec![
                "I", "live", "in", "Lisbon", "hi", "thanks", "can", "you", "where", "what", "ok",
                "please", "tell", "me", "Dr", "e.g", "1", "3.5", "at", "fn", "git", "push",
                "$", "{", "}", "(", ")", "=", ";", "ERROR", "2024-05-01", "12:00:03", "😊",
                "é", "我", "’", "\"", "Mel",
            ])
            .prop_map(str::to_owned),
            2 => prop::sample::select(vec![
                ".", "!", "?", "...", "…", "。", "?!", ",", "\n", "\n\n", "```", "~~~", "  ",
                "\t", "\r\n", " ", "    ",
            ])
            .prop_map(str::to_owned),
            1 => any::<char>().prop_map(String::from),
        ];
        prop::collection::vec(token, 0..60).prop_map(|tokens| tokens.join(" "))
    }

    fn check_invariants(text: &str) -> Result<(), TestCaseError> {
        let sentences = segment(text);
        let mut covered = vec![false; text.len()];
        let mut previous_end = 0;
        for sentence in &sentences {
            prop_assert!(sentence.start < sentence.end, "{sentence:?}");
            prop_assert!(sentence.end <= text.len());
            prop_assert!(sentence.start >= previous_end, "in order, no overlap");
            prop_assert!(text.is_char_boundary(sentence.start));
            prop_assert!(text.is_char_boundary(sentence.end));
            let slice = sentence.text(text);
            prop_assert_eq!(slice, slice.trim(), "trimmed");
            for flag in &mut covered[sentence.start..sentence.end] {
                *flag = true;
            }
            previous_end = sentence.end;
        }
        for (offset, c) in text.char_indices() {
            if !c.is_whitespace() {
                prop_assert!(covered[offset], "byte {offset} ({c:?}) is in no sentence");
            }
        }
        // Every sentence is kept or counted under exactly one reason.
        let counts = dropped_counts(&sentences);
        let kept = sentences
            .iter()
            .filter(|sentence| sentence.kind == SentenceKind::Statement)
            .count() as u64;
        prop_assert_eq!(kept + counts.values().sum::<u64>(), sentences.len() as u64);
        for sentence in &sentences {
            if sentence.kind == SentenceKind::Statement {
                prop_assert!(sentence.text(text).chars().any(char::is_alphanumeric));
                prop_assert!(sentence.text(text).len() <= MAX_PROSE_BYTES);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn any_text_is_covered_in_order_without_panicking(text in any::<String>()) {
            check_invariants(&text)?;
        }

        #[test]
        fn chat_like_text_is_covered_in_order_without_panicking(text in chat_text()) {
            check_invariants(&text)?;
        }

        #[test]
        fn long_text_is_covered_in_order_without_panicking(
            text in prop::collection::vec(chat_text(), 0..8).prop_map(|parts| parts.join("\n"))
        ) {
            check_invariants(&text)?;
            let _ = normalize(&text);
        }
    }
}
