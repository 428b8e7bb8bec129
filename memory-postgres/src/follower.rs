//! Following the shared change sequence across processes and hosts.
//!
//! A [`ChangeFollower`] keeps one dedicated connection (outside the pool: `LISTEN` belongs to a session)
//! that `LISTEN`s on [`CHANGE_CHANNEL`] and publishes the latest change head it
//! knows of. Notifications only wake it: the head it publishes is always a committed one (PostgreSQL
//! delivers a `NOTIFY` after its transaction commits), and readers fetch the changes themselves through
//! [`ChangeFeed::changes_since`], the source of truth. A notification can be missed (the connection
//! broke, the follower was reconnecting, the server restarted), so the follower also reads the head
//!
//! - right after every (re)connection, once `LISTEN` is in place, so nothing committed while it was away
//!   stays unseen, and
//! - every [`FollowerOptions::poll_interval`] (default [`DEFAULT_FOLLOW_POLL_INTERVAL`], one second),
//!   the bound on how long a missed notification can delay a change.
//!
//! A lost connection is reopened after [`FollowerOptions::reconnect_delay`], doubling per failed attempt
//! up to [`MAX_RECONNECT_DELAY`], forever: the follower stops only when dropped.
//!
//! The follower is itself a [`ChangeFeed`] (and a [`MemoryReader`]) over its store whose
//! [`changes_since`](ChangeFeed::changes_since), when nothing is new, waits for the next change for up
//! to [`FollowerOptions::idle_wait`] before answering empty. A generic follower of a feed, such as
//! semantic-index's `Indexer`, given the follower instead of the store therefore wakes on the
//! notification instead of on its own poll timer; its poll interval then only paces empty rounds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memory_core::{
    Change, ChangeFeed, ChangeSequence, MemoryDocument, MemoryError, MemoryKey, MemoryReader,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::store::{CHANGE_CHANNEL, PostgresStore};

/// Default [`FollowerOptions::poll_interval`]: a missed notification delays a change by at most about
/// this, while an idle follower costs the server one tiny query per second.
pub const DEFAULT_FOLLOW_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Default [`FollowerOptions::reconnect_delay`].
pub const DEFAULT_RECONNECT_DELAY: Duration = Duration::from_millis(100);
/// The longest pause between reconnection attempts.
pub const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(5);
/// Default [`FollowerOptions::idle_wait`]: a caller that checks for shutdown between feed calls (the
/// `Indexer` does; `Indexer::shutdown` waits for the call in progress) stops within about a second, and
/// an idle follower's feed costs one query per second.
pub const DEFAULT_IDLE_WAIT: Duration = Duration::from_secs(1);

/// How a [`ChangeFollower`] listens, polls and reconnects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerOptions {
    /// How often the head is read even without a notification (the fallback for missed ones).
    pub poll_interval: Duration,
    /// The first pause before reopening a lost connection; it doubles per failed attempt up to
    /// [`MAX_RECONNECT_DELAY`].
    pub reconnect_delay: Duration,
    /// How long the follower's [`ChangeFeed::changes_since`] waits for a new change before answering
    /// empty. Bounded so that a caller that checks for shutdown between calls still stops promptly.
    pub idle_wait: Duration,
}

impl Default for FollowerOptions {
    fn default() -> Self {
        Self {
            poll_interval: DEFAULT_FOLLOW_POLL_INTERVAL,
            reconnect_delay: DEFAULT_RECONNECT_DELAY,
            idle_wait: DEFAULT_IDLE_WAIT,
        }
    }
}

/// Counters of a follower, for logs and tests.
#[derive(Debug, Default)]
struct Counters {
    notifications: AtomicU64,
    connections: AtomicU64,
}

/// Follows a store's change sequence from another process or host; see the [module](self) docs.
/// Dropping it stops its task and closes its connection.
pub struct ChangeFollower {
    store: PostgresStore,
    head: watch::Receiver<ChangeSequence>,
    counters: Arc<Counters>,
    options: FollowerOptions,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for ChangeFollower {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ChangeFollower")
            .field("known_head", &self.known_head())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Drop for ChangeFollower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PostgresStore {
    /// Starts following this store's change sequence with default options; see [`ChangeFollower`].
    pub async fn follow_changes(&self) -> Result<ChangeFollower, MemoryError> {
        self.follow_changes_with(FollowerOptions::default()).await
    }

    /// Starts following this store's change sequence. Returns once the head has been read through the
    /// pool (so [`ChangeFollower::known_head`] starts at a committed head); the `LISTEN` connection is
    /// opened in the background and retried until it succeeds.
    pub async fn follow_changes_with(
        &self,
        options: FollowerOptions,
    ) -> Result<ChangeFollower, MemoryError> {
        let start = self.head().await?;
        let (sender, head) = watch::channel(start);
        let counters = Arc::new(Counters::default());
        let task = self.handle.spawn(follow(
            self.handle.db.config.clone(),
            options,
            sender,
            counters.clone(),
        ));
        Ok(ChangeFollower {
            store: self.clone(),
            head,
            counters,
            options,
            task,
        })
    }
}

impl ChangeFollower {
    /// The latest committed change head this follower knows of (never ahead of the database).
    pub fn known_head(&self) -> ChangeSequence {
        *self.head.borrow()
    }

    /// A receiver that changes whenever the known head advances.
    pub fn subscribe(&self) -> watch::Receiver<ChangeSequence> {
        self.head.clone()
    }

    /// Notifications for this store's schema received so far.
    pub fn notifications(&self) -> u64 {
        self.counters.notifications.load(Ordering::Relaxed)
    }

    /// `LISTEN` connections opened so far (more than one means it reconnected).
    pub fn connections(&self) -> u64 {
        self.counters.connections.load(Ordering::Relaxed)
    }

    /// The store followed.
    pub fn store(&self) -> &PostgresStore {
        &self.store
    }

    /// Waits until the known head is past `after` and returns it. Waits as long as it takes; wrap it
    /// in a timeout to bound it.
    pub async fn wait_past(&self, after: ChangeSequence) -> Result<ChangeSequence, MemoryError> {
        let mut head = self.head.clone();
        // The watch lives as long as the task; it only closes if the task ended.
        head.wait_for(|head| *head > after)
            .await
            .map(|head| *head)
            .map_err(|_| crate::db::Stopped.into_port())
    }

    /// [`Self::wait_past`] for at most `limit`; `None` when nothing new came in that time. The timer
    /// runs on the store's runtime, so this works from any executor.
    pub async fn wait_past_for(
        &self,
        after: ChangeSequence,
        limit: Duration,
    ) -> Result<Option<ChangeSequence>, MemoryError> {
        let mut head = self.head.clone();
        self.store
            .handle
            .run(async move {
                match tokio::time::timeout(limit, head.wait_for(|head| *head > after)).await {
                    Ok(Ok(head)) => Ok(Some(*head)),
                    Ok(Err(_)) => Err(crate::db::Stopped.into_port()),
                    Err(_) => Ok(None),
                }
            })
            .await
    }
}

impl ChangeFeed for ChangeFollower {
    async fn head(&self) -> Result<ChangeSequence, MemoryError> {
        self.store.head().await
    }

    /// The store's changes after `after`; when there are none, waits up to
    /// [`FollowerOptions::idle_wait`] for the known head to pass `after` and reads again.
    async fn changes_since(
        &self,
        after: ChangeSequence,
        limit: usize,
    ) -> Result<Vec<Change>, MemoryError> {
        let changes = self.store.changes_since(after, limit).await?;
        if !changes.is_empty() {
            return Ok(changes);
        }
        match self.wait_past_for(after, self.options.idle_wait).await? {
            Some(_) => self.store.changes_since(after, limit).await,
            None => Ok(changes),
        }
    }
}

impl MemoryReader for ChangeFollower {
    async fn read(&self, key: &MemoryKey) -> Result<Option<MemoryDocument>, MemoryError> {
        self.store.read(key).await
    }

    async fn read_many(
        &self,
        keys: &[MemoryKey],
    ) -> Result<Vec<Option<MemoryDocument>>, MemoryError> {
        self.store.read_many(keys).await
    }
}

/// The follower task: (re)connect, `LISTEN`, read the head, then publish notified and polled heads
/// until the connection breaks; forever.
async fn follow(
    mut config: tokio_postgres::Config,
    options: FollowerOptions,
    head: watch::Sender<ChangeSequence>,
    counters: Arc<Counters>,
) {
    let name = format!(
        "{} follower",
        config.get_application_name().unwrap_or("memory-postgres")
    );
    config.application_name(&name);
    let mut delay = options.reconnect_delay;
    loop {
        match listen_once(&config, options, &head, &counters).await {
            // It was connected: start the next round of attempts from the short delay.
            Ok(()) => delay = options.reconnect_delay,
            Err(error) => {
                tracing::debug!(%error, "change follower could not connect");
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_RECONNECT_DELAY);
    }
}

/// How long a head poll may go unanswered before the connection is taken as lost.
const POLL_ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// One connection's life. `Ok` once it had listened and then broke; `Err` when it never got that far.
async fn listen_once(
    config: &tokio_postgres::Config,
    options: FollowerOptions,
    head: &watch::Sender<ChangeSequence>,
    counters: &Counters,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let (payloads, mut received) = mpsc::unbounded_channel::<String>();
    // The connection must be polled for the client's queries to progress and to see notifications;
    // the channel closes when the connection ends, which is how the loop below learns of it.
    let driver = tokio::spawn(async move {
        while let Some(message) =
            std::future::poll_fn(|context| connection.poll_message(context)).await
        {
            match message {
                Ok(AsyncMessage::Notification(notification)) => {
                    if payloads.send(notification.payload().to_owned()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(%error, "change follower connection ended");
                    return;
                }
            }
        }
    });
    let mut listened = false;
    let result = async {
        client
            .batch_execute(&format!("LISTEN {CHANGE_CHANNEL}"))
            .await?;
        // The schema the store's writers name in their payloads: the same search path resolves to the
        // same `current_schema()`.
        let schema: String = client
            .query_one("SELECT current_schema()::text", &[])
            .await?
            .try_get(0)?;
        let prefix = format!("{schema}:");
        let poll = client
            .prepare("SELECT head FROM memory_change_head")
            .await?;
        counters.connections.fetch_add(1, Ordering::Relaxed);
        listened = true;
        let mut ticker = tokio::time::interval(options.poll_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate: the head read right after `LISTEN`, which catches whatever
        // committed while this connection was not listening.
        loop {
            tokio::select! {
                payload = received.recv() => {
                    let Some(payload) = payload else { return Ok(()) };
                    let Some(value) = payload.strip_prefix(&prefix) else { continue };
                    // Another schema's notice, or a malformed one, only costs a wake-up.
                    if let Ok(value) = value.parse::<u64>() {
                        counters.notifications.fetch_add(1, Ordering::Relaxed);
                        advance(head, ChangeSequence::new(value));
                    }
                }
                _ = ticker.tick() => {
                    // A silent network drop would leave this query waiting as long as TCP lets it:
                    // an unanswered poll counts as a lost connection, and the caller reconnects.
                    let Ok(answer) =
                        tokio::time::timeout(POLL_ANSWER_TIMEOUT, client.query_one(&poll, &[])).await
                    else {
                        tracing::debug!("change follower poll went unanswered; reconnecting");
                        return Ok(());
                    };
                    let value: i64 = answer?.try_get(0)?;
                    advance(head, ChangeSequence::new(u64::try_from(value).unwrap_or(0)));
                }
            }
        }
    }
    .await;
    driver.abort();
    match result {
        Err(error) if !listened => Err(error),
        // A connection that listened and then broke: reconnect soon.
        Err(error) => {
            tracing::debug!(%error, "change follower lost its connection");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// Publishes `value` if it is past the known head (notifications may arrive out of order with polls).
fn advance(head: &watch::Sender<ChangeSequence>, value: ChangeSequence) {
    head.send_if_modified(|known| {
        if value > *known {
            *known = value;
            true
        } else {
            false
        }
    });
}
