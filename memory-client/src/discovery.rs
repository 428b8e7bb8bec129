//! The discovery file: how a process on this machine finds the `memory serve --http` serving a database.
//!
//! While `memory serve --http ADDR` is listening it keeps one JSON file (contract version 1):
//!
//! ```json
//! {"version": 1, "url": "http://127.0.0.1:8181/mcp", "pid": 4242, "token": "..."}
//! ```
//!
//! - `version`: always `1` for this layout; a reader refuses any other.
//! - `url`: the MCP endpoint (streamable HTTP), built from the address actually bound (so `:0` names
//!   the port the system chose).
//! - `pid`: the serving process.
//! - `token`: the bearer token clients must send (`Authorization: Bearer TOKEN`), or `null` when the
//!   server takes none (loopback only). The file is created with mode 0600, so only its owner reads it.
//!
//! Where it lives ([`path_for`]): for a SQLite database, beside the file, named `<database path>.serve.json`
//! (`notes.sqlite` → `notes.sqlite.serve.json`); for PostgreSQL, in `$XDG_RUNTIME_DIR` (else the temporary
//! directory) as `memory-serve-<first 16 hex digits of sha256(URL)>.json`, so the URL (and its password)
//! never appears in a file name.
//!
//! It is written atomically (a temporary file in the same folder, then a rename), so a reader sees either
//! no file or a whole one, and removed at clean shutdown ([`DiscoveryGuard`]). A server killed without
//! shutdown leaves it behind: a reader should check that `pid` is alive (or simply try the URL). A missing
//! file reads as `None`; a malformed one is an error, never silently ignored.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use memory_service::database::Database;

/// The layout version this build writes and reads.
pub const VERSION: u32 = 1;

/// Most bytes a discovery file may have: a few hundred are normal; anything larger is not ours.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// The contents of a discovery file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Discovery {
    /// The layout version, [`VERSION`].
    pub version: u32,
    /// The MCP endpoint, `http://HOST:PORT/mcp`.
    pub url: String,
    /// The serving process's id.
    pub pid: u32,
    /// The bearer token, or `None` when the server requires none.
    pub token: Option<String>,
}

/// Why a discovery file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The file system refused.
    #[error("discovery file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The file is not a version-1 discovery file.
    #[error("discovery file {path} is malformed: {detail}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

/// Where the discovery file of `database` lives (see the module docs).
pub fn path_for(database: &Database) -> PathBuf {
    match database {
        Database::Sqlite(path) => {
            let mut name = path.as_os_str().to_owned();
            name.push(".serve.json");
            PathBuf::from(name)
        }
        Database::Postgres { url, .. } => {
            let digest = Sha256::digest(url.as_bytes());
            let hex = memory_core::ids::lower_hex(&digest[..8]);
            let dir = std::env::var_os("XDG_RUNTIME_DIR")
                .filter(|dir| !dir.is_empty())
                .map_or_else(std::env::temp_dir, PathBuf::from);
            dir.join(format!("memory-serve-{hex}.json"))
        }
    }
}

impl Discovery {
    /// Reads `path`: `None` when there is no file, an error when it is not a version-1 discovery file.
    pub fn read(path: &Path) -> Result<Option<Self>, DiscoveryError> {
        let io = |source| DiscoveryError::Io {
            path: path.to_owned(),
            source,
        };
        let malformed = |detail: String| DiscoveryError::Malformed {
            path: path.to_owned(),
            detail,
        };
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(io(error)),
        };
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, MAX_FILE_BYTES + 1),
            &mut bytes,
        )
        .map_err(io)?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(malformed(format!("longer than {MAX_FILE_BYTES} bytes")));
        }
        let discovery: Self =
            serde_json::from_slice(&bytes).map_err(|error| malformed(error.to_string()))?;
        if discovery.version != VERSION {
            return Err(malformed(format!(
                "version {} (this build reads {VERSION})",
                discovery.version
            )));
        }
        Ok(Some(discovery))
    }

    /// Writes `self` to `path` atomically with mode 0600: a temporary file in the same folder, synced,
    /// then renamed over `path`.
    pub fn write(&self, path: &Path) -> Result<(), DiscoveryError> {
        let io = |source| DiscoveryError::Io {
            path: path.to_owned(),
            source,
        };
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        // tempfile creates the file with mode 0600 on Unix, before anything is written to it.
        let mut file = tempfile::Builder::new()
            .prefix(".memory-serve-")
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(io)?;
        let text = serde_json::to_vec(self).map_err(|error| DiscoveryError::Malformed {
            path: path.to_owned(),
            detail: error.to_string(),
        })?;
        file.write_all(&text).map_err(io)?;
        file.as_file().sync_all().map_err(io)?;
        file.persist(path).map_err(|error| io(error.error))?;
        Ok(())
    }
}

/// Removes the discovery file when dropped (clean shutdown), unless another server has replaced it
/// since.
#[derive(Debug)]
pub struct DiscoveryGuard {
    path: PathBuf,
    pid: u32,
}

impl DiscoveryGuard {
    /// Writes `discovery` to `path` and returns the guard that removes it.
    pub fn publish(path: PathBuf, discovery: &Discovery) -> Result<Self, DiscoveryError> {
        discovery.write(&path)?;
        Ok(Self {
            path,
            pid: discovery.pid,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DiscoveryGuard {
    fn drop(&mut self) {
        // Only our own file: a second server on the same database may have published its own since.
        if let Ok(Some(current)) = Discovery::read(&self.path)
            && current.pid == self.pid
            && let Err(error) = std::fs::remove_file(&self.path)
        {
            tracing::warn!(%error, "could not remove the discovery file");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn sample() -> Discovery {
        Discovery {
            version: VERSION,
            url: "http://127.0.0.1:8181/mcp".to_owned(),
            pid: 4242,
            token: Some("secret".to_owned()),
        }
    }

    #[test]
    fn a_sqlite_database_has_its_file_beside_it() {
        let database = Database::Sqlite(PathBuf::from("/data/notes.sqlite"));
        assert_eq!(
            path_for(&database),
            PathBuf::from("/data/notes.sqlite.serve.json")
        );
    }

    #[test]
    fn a_postgres_database_is_named_by_the_digest_of_its_url() {
        let url = "postgres://memory:secret@db.internal:5432/memory".to_owned();
        let database = Database::Postgres {
            url: url.clone(),
            schema: None,
        };
        let path = path_for(&database);
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("");
        let digest = Sha256::digest(url.as_bytes());
        let expected = format!(
            "memory-serve-{}.json",
            memory_core::ids::lower_hex(&digest[..8])
        );
        assert_eq!(name, expected);
        assert_eq!(name.len(), "memory-serve-.json".len() + 16);
        assert!(!path.to_string_lossy().contains("secret"));
    }

    #[test]
    fn written_files_read_back_with_mode_0600_and_a_missing_one_is_none() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("memory.sqlite.serve.json");
        assert!(Discovery::read(&path).expect("readable").is_none());
        sample().write(&path).expect("written");
        assert_eq!(Discovery::read(&path).expect("readable"), Some(sample()));
        let mode = std::fs::metadata(&path)
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Only the file itself is left: the temporary file was renamed, not copied.
        assert_eq!(std::fs::read_dir(dir.path()).expect("listing").count(), 1);
    }

    #[test]
    fn malformed_files_are_errors() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("x.serve.json");
        for text in [
            "not json",
            r#"{"version": 2, "url": "http://h:1/mcp", "pid": 1, "token": null}"#,
            r#"{"version": 1, "url": "http://h:1/mcp"}"#,
        ] {
            std::fs::write(&path, text).expect("written");
            assert!(
                matches!(
                    Discovery::read(&path),
                    Err(DiscoveryError::Malformed { .. })
                ),
                "{text}"
            );
        }
    }

    #[test]
    fn the_guard_removes_only_its_own_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db.serve.json");
        let guard = DiscoveryGuard::publish(path.clone(), &sample()).expect("published");
        drop(guard);
        assert!(!path.exists());

        let guard = DiscoveryGuard::publish(path.clone(), &sample()).expect("published");
        let other = Discovery { pid: 7, ..sample() };
        other.write(&path).expect("replaced");
        drop(guard);
        assert_eq!(Discovery::read(&path).expect("readable"), Some(other));
    }
}
