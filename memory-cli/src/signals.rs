//! How the long-running binaries (`memory serve`, `remembering-worker`) learn to stop (SIGINT or
//! SIGTERM), and how `memory serve --http --grants` learns to re-read its grants (SIGHUP).

use std::future::Future;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Completes on SIGINT or SIGTERM. The handlers are installed when this is called, not when the
/// future is first polled: a signal arriving between a start-up announcement (the server's
/// "serving MCP at" line, which supervisors and tests wait for) and that first poll would otherwise
/// take the default action and kill the process without its shutdown (graph saved, discovery file
/// removed, loads waited for). Call it within the runtime, before announcing anything.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    let interrupt = listen(SignalKind::interrupt(), "SIGINT");
    let terminate = listen(SignalKind::terminate(), "SIGTERM");
    async move {
        tokio::select! {
            () = received(interrupt) => {}
            () = received(terminate) => {}
        }
    }
}

/// Calls `reload` on every SIGHUP, for the life of the runtime. The handler is installed when this
/// is called (before the server announces itself), so a SIGHUP never takes the default action,
/// which would end the process.
pub fn on_hangup(reload: impl Fn() + Send + 'static) {
    let Some(mut hangup) = listen(SignalKind::hangup(), "SIGHUP") else {
        return;
    };
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            reload();
        }
    });
}

fn listen(kind: SignalKind, name: &'static str) -> Option<Signal> {
    match signal(kind) {
        Ok(signal) => Some(signal),
        Err(error) => {
            tracing::warn!(%error, signal = name, "cannot listen for the signal");
            None
        }
    }
}

/// Completes when `signal` arrives; never when it could not be listened for.
async fn received(signal: Option<Signal>) {
    match signal {
        Some(mut signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}
