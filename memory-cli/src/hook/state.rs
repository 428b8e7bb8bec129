//! What hooks keep outside the database: the per-session locks that make "check, then append" one
//! step, and the log of hook errors that `memory status` shows.
//!
//! The folder ([`dir_for`]): for a SQLite database, beside the file as `<database path>.hooks/`; for
//! PostgreSQL, `$XDG_STATE_HOME/memory` (else `~/.local/state/memory`, else the temporary directory)
//! as `hooks-<first 16 hex digits of sha256(URL)>/`, so the URL (and its password) never appears in a
//! path. It is created with mode 0700.
//!
//! - `sessions/<sha256(session)[..32]>.lock`: an advisory lock held while a hook reads the thread's
//!   tail and appends, so two hooks of one session (a retry racing the original) cannot both append.
//!   It orders hooks on one machine; that is where a session's hooks run.
//! - `errors.jsonl`: one line per failed hook, `{"at", "hook", "kind", "message"}` (messages never hold
//!   the user's words or the database URL). It is kept under [`MAX_LOG_BYTES`]: past that the oldest
//!   half is dropped.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::database::Database;
use crate::hook::input::hex_digest;

/// Most bytes of the error log; past it the oldest half is dropped.
pub const MAX_LOG_BYTES: u64 = 256 * 1024;
/// Most UTF-8 bytes of one logged message.
pub const MAX_MESSAGE_BYTES: usize = 1_024;

/// The hook state folder of `database` (see the module docs).
pub fn dir_for(database: &Database) -> PathBuf {
    match database {
        Database::Sqlite(path) => {
            let mut name = path.as_os_str().to_owned();
            name.push(".hooks");
            PathBuf::from(name)
        }
        Database::Postgres { url, .. } => {
            let base = std::env::var_os("XDG_STATE_HOME")
                .filter(|dir| !dir.is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME")
                        .filter(|dir| !dir.is_empty())
                        .map(|home| PathBuf::from(home).join(".local").join("state"))
                })
                .unwrap_or_else(std::env::temp_dir);
            base.join("memory")
                .join(format!("hooks-{}", &hex_digest(url.as_bytes())[..16]))
        }
    }
}

fn create_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// An exclusive lock on one session's hooks; released when dropped.
#[derive(Debug)]
pub struct SessionLock {
    _file: File,
}

impl SessionLock {
    /// Waits for the lock of `session` in `dir` (a blocking call: run it off the async workers, under
    /// the hook's deadline).
    pub fn acquire(dir: &Path, session: &str) -> std::io::Result<Self> {
        let sessions = dir.join("sessions");
        create_dir(&sessions)?;
        let path = sessions.join(format!("{}.lock", &hex_digest(session.as_bytes())[..32]));
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        file.lock()?;
        Ok(Self { _file: file })
    }
}

/// One logged hook error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookErrorLine {
    /// When, epoch milliseconds.
    pub at: i64,
    /// The hook event (`prompt`, `session-start`, `turn-end`, or `input` before one was known).
    pub hook: String,
    /// The error kind (memory-core's kinds, plus `deadline` for a hook past its own deadline).
    pub kind: String,
    /// Why.
    pub message: String,
}

/// Appends `line` to the error log of `dir`, dropping the oldest half once it passes
/// [`MAX_LOG_BYTES`].
pub fn record_error(dir: &Path, mut line: HookErrorLine) -> std::io::Result<()> {
    if line.message.len() > MAX_MESSAGE_BYTES {
        let mut end = MAX_MESSAGE_BYTES;
        while !line.message.is_char_boundary(end) {
            end -= 1;
        }
        line.message.truncate(end);
    }
    create_dir(dir)?;
    let path = dir.join("errors.jsonl");
    let mut text = serde_json::to_vec(&line).map_err(std::io::Error::other)?;
    text.push(b'\n');
    let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
    // One write of one line: appends of concurrent hooks do not interleave within a line.
    file.write_all(&text)?;
    if file.metadata()?.len() > MAX_LOG_BYTES {
        file.lock()?;
        let kept = tail(&path, MAX_LOG_BYTES / 2)?;
        let mut temporary = tempfile::NamedTempFile::new_in(dir)?;
        temporary.write_all(&kept)?;
        temporary.persist(&path).map_err(|error| error.error)?;
    }
    Ok(())
}

/// The last `max` bytes of `path`, from the first line that starts within them.
fn tail(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    let length = file.metadata()?.len();
    let start = length.saturating_sub(max);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    if start > 0 {
        let first = bytes
            .iter()
            .position(|byte| *byte == b'\n')
            .map_or(bytes.len(), |at| at + 1);
        bytes.drain(..first);
    }
    Ok(bytes)
}

/// The hook errors `memory status` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HookErrors {
    /// Errors in the log.
    pub total: u64,
    /// Per kind: how many, and the latest one.
    pub by_kind: BTreeMap<String, KindErrors>,
    /// Why the log could not be read, when it could not (`null` otherwise; no log is no error).
    pub unreadable: Option<String>,
}

/// The errors of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindErrors {
    /// How many the log holds.
    pub count: u64,
    /// The latest one.
    pub last: HookErrorLine,
}

/// Reads the error log of `dir`; a missing log is no errors.
pub fn read_errors(dir: &Path) -> HookErrors {
    let path = dir.join("errors.jsonl");
    let bytes = match tail(&path, MAX_LOG_BYTES) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return HookErrors::default(),
        Err(error) => {
            return HookErrors {
                unreadable: Some(format!("{}: {error}", path.display())),
                ..HookErrors::default()
            };
        }
    };
    let mut errors = HookErrors::default();
    let mut malformed = 0_u64;
    for line in bytes
        .split(|byte| *byte == b'\n')
        .filter(|line| !line.is_empty())
    {
        let Ok(line) = serde_json::from_slice::<HookErrorLine>(line) else {
            malformed += 1;
            continue;
        };
        errors.total += 1;
        let entry = errors
            .by_kind
            .entry(line.kind.clone())
            .or_insert_with(|| KindErrors {
                count: 0,
                last: line.clone(),
            });
        entry.count += 1;
        entry.last = line;
    }
    if malformed > 0 {
        errors.unreadable = Some(format!(
            "{malformed} lines of {} are not hook errors",
            path.display()
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(kind: &str, message: &str) -> HookErrorLine {
        HookErrorLine {
            at: 1,
            hook: "prompt".to_owned(),
            kind: kind.to_owned(),
            message: message.to_owned(),
        }
    }

    #[test]
    fn errors_are_counted_by_kind_with_the_latest_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(read_errors(dir.path()), HookErrors::default());
        record_error(dir.path(), line("unavailable", "first")).expect("logged");
        record_error(dir.path(), line("storage", "disk")).expect("logged");
        record_error(dir.path(), line("unavailable", "second")).expect("logged");
        let errors = read_errors(dir.path());
        assert_eq!(errors.total, 3);
        assert_eq!(errors.by_kind["unavailable"].count, 2);
        assert_eq!(errors.by_kind["unavailable"].last.message, "second");
        assert_eq!(errors.by_kind["storage"].count, 1);
    }

    #[test]
    fn the_log_stays_bounded() {
        let dir = tempfile::tempdir().expect("temp dir");
        let message = "x".repeat(MAX_MESSAGE_BYTES * 2);
        for _ in 0..600 {
            record_error(dir.path(), line("deadline", &message)).expect("logged");
        }
        let length = std::fs::metadata(dir.path().join("errors.jsonl"))
            .expect("log")
            .len();
        assert!(length <= MAX_LOG_BYTES, "{length}");
        let errors = read_errors(dir.path());
        assert!(errors.total > 100, "{errors:?}");
        assert_eq!(errors.unreadable, None);
    }
}
