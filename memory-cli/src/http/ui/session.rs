//! The inspector's sessions: a token entered once in the sign-in page is exchanged for a random
//! session id, kept in this process only (a restart ends every session) and carried by a cookie that
//! scripts cannot read (`HttpOnly`) and other sites cannot send (`SameSite=Strict`). The token itself
//! is never stored, echoed or put in a URL.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use axum::http::header::COOKIE;
use rand::RngCore;

use crate::grants::Grant;

/// The session cookie's name.
pub const COOKIE_NAME: &str = "memory_ui";
/// How long a session lasts after sign-in.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 60 * 60);
/// Most sessions kept at once: past it, the one that expires soonest is ended.
pub const MAX_SESSIONS: usize = 10_000;

struct Session {
    grant: Arc<Grant>,
    expires: Instant,
}

/// What a request's cookie says.
pub enum Lookup {
    /// A live session, holding this grant.
    Live(String, Arc<Grant>),
    /// A cookie naming no live session: expired, signed out, or from before a restart.
    Expired,
    /// No session cookie.
    None,
}

/// The sessions of one server process.
pub struct Sessions {
    sessions: Mutex<HashMap<String, Session>>,
    ttl: Duration,
}

impl Default for Sessions {
    fn default() -> Self {
        Self::with_ttl(SESSION_TTL)
    }
}

fn lock(sessions: &Mutex<HashMap<String, Session>>) -> MutexGuard<'_, HashMap<String, Session>> {
    sessions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Sessions {
    /// Sessions that last `ttl` after sign-in.
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    /// Opens a session for `grant`; answers its id (256 random bits, hex).
    pub fn open(&self, grant: Arc<Grant>) -> String {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let id = memory_core::ids::lower_hex(&bytes);
        let now = Instant::now();
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, session| session.expires > now);
        if sessions.len() >= MAX_SESSIONS
            && let Some(soonest) = sessions
                .iter()
                .min_by_key(|(_, session)| session.expires)
                .map(|(id, _)| id.clone())
        {
            sessions.remove(&soonest);
        }
        sessions.insert(
            id.clone(),
            Session {
                grant,
                expires: now + self.ttl,
            },
        );
        id
    }

    /// The session the request's cookie names.
    pub fn lookup(&self, headers: &HeaderMap) -> Lookup {
        let Some(id) = cookie(headers) else {
            return Lookup::None;
        };
        let mut sessions = lock(&self.sessions);
        match sessions.get(&id) {
            Some(session) if session.expires > Instant::now() => {
                let grant = Arc::clone(&session.grant);
                Lookup::Live(id, grant)
            }
            Some(_) => {
                sessions.remove(&id);
                Lookup::Expired
            }
            None => Lookup::Expired,
        }
    }

    /// Ends the session `id`.
    pub fn close(&self, id: &str) {
        lock(&self.sessions).remove(id);
    }
}

/// The session id of the request's cookie, if it carries one.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_owned())
        .filter(|value| value.len() == 64 && value.bytes().all(|byte| byte.is_ascii_hexdigit()))
}

/// The `Set-Cookie` value that carries session `id`.
pub fn set_cookie(id: &str, ttl: Duration) -> String {
    format!(
        "{COOKIE_NAME}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}",
        ttl.as_secs()
    )
}

/// The `Set-Cookie` value that removes the session cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE_NAME}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn a_session_is_found_by_its_cookie_until_it_expires_or_closes() {
        let sessions = Sessions::with_ttl(Duration::from_millis(50));
        let grant = Arc::new(Grant::local("t", None));
        let id = sessions.open(grant);
        let mut headers = HeaderMap::new();
        headers.insert(
            COOKIE,
            HeaderValue::from_str(&format!("other=1; {COOKIE_NAME}={id}")).expect("header"),
        );
        assert!(matches!(sessions.lookup(&headers), Lookup::Live(..)));
        sessions.close(&id);
        assert!(matches!(sessions.lookup(&headers), Lookup::Expired));
        let id = sessions.open(Arc::new(Grant::local("t", None)));
        headers.insert(
            COOKIE,
            HeaderValue::from_str(&format!("{COOKIE_NAME}={id}")).expect("header"),
        );
        std::thread::sleep(Duration::from_millis(60));
        assert!(matches!(sessions.lookup(&headers), Lookup::Expired));
        headers.insert(COOKIE, HeaderValue::from_static("memory_ui=not-an-id"));
        assert!(matches!(sessions.lookup(&headers), Lookup::None));
        assert!(set_cookie(&id, SESSION_TTL).contains("HttpOnly; SameSite=Strict"));
    }
}
