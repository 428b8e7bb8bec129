//! Which grant a bearer token holds, and the re-read of the grants file on SIGHUP.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};

use super::Grant;
use super::file::{GrantTable, GrantsError, load_file};

/// The grants of one server: the grants file's (re-read by [`Grants::reload`]) and the server's own
/// grant ([`Grant::server`]), which the `--token-file` token holds, or, with neither a file nor a
/// token, every caller (loopback only: memory-cli's `http::check_token_policy`).
#[derive(Debug)]
pub struct Grants {
    file: Option<PathBuf>,
    table: RwLock<Arc<GrantTable>>,
    token: Option<(String, Arc<Grant>)>,
    open: Option<Arc<Grant>>,
}

impl Grants {
    /// Loads `file` (refusing a faulty one) beside the `token` of `--token-file`/`MEMORY_TOKEN`,
    /// which holds `server`, the server's own grant.
    pub fn new(
        file: Option<PathBuf>,
        token: Option<String>,
        server: Arc<Grant>,
    ) -> Result<Self, GrantsError> {
        let table = match &file {
            Some(path) => load_file(path)?,
            None => GrantTable::new(),
        };
        let open = (file.is_none() && token.is_none()).then(|| Arc::clone(&server));
        Ok(Self {
            file,
            table: RwLock::new(Arc::new(table)),
            token: token.map(|token| (token, server)),
            open,
        })
    }

    /// The grant of the file named `name`, as `memory serve --grants FILE --grant NAME` holds it on
    /// standard input and output (there is no bearer token there).
    pub fn named(&self, name: &str) -> Option<Arc<Grant>> {
        self.current()
            .values()
            .find(|grant| grant.name() == name)
            .cloned()
    }

    /// Whether callers must present a token.
    pub fn requires_token(&self) -> bool {
        self.open.is_none()
    }

    /// Whether a grants file is in use (then the simple tools are listed whatever the server's
    /// defaults: each grant may bring its own).
    pub fn has_file(&self) -> bool {
        self.file.is_some()
    }

    /// The number of grants in force (the file's, plus the token's).
    pub fn count(&self) -> usize {
        self.current().len() + usize::from(self.token.is_some())
    }

    /// The grant `token` holds; `None` (a `401`) for a missing or unknown one. Without a token and
    /// a grants file every caller holds the server's grant.
    pub fn caller(&self, token: Option<&str>) -> Option<Arc<Grant>> {
        if let Some(open) = &self.open {
            return Some(Arc::clone(open));
        }
        let token = token?;
        if let Some((expected, grant)) = &self.token
            && same_token(token.as_bytes(), expected.as_bytes())
        {
            return Some(Arc::clone(grant));
        }
        // A lookup by digest: the digest of a guess tells nothing about the digests that exist.
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        self.current().get(&digest).cloned()
    }

    /// Re-reads the grants file: on success the new grants answer every later request (requests in
    /// flight keep the grant they started with) and the count is answered; on failure the old grants
    /// stay in force.
    pub fn reload(&self) -> Result<usize, GrantsError> {
        let Some(path) = &self.file else {
            return Ok(self.count());
        };
        let table = load_file(path)?;
        let count = table.len();
        *self
            .table
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(table);
        Ok(count + usize::from(self.token.is_some()))
    }

    fn current(&self) -> Arc<GrantTable> {
        Arc::clone(
            &self
                .table
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// The lower-case hex SHA-256 of `token`: how a grants file names it (`token_sha256`).
pub fn token_digest(token: &str) -> String {
    memory_core::ids::lower_hex(&Sha256::digest(token.as_bytes()))
}

/// Compares in time independent of where the first difference is.
pub(crate) fn same_token(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
}
