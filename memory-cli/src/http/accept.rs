//! The accept loop of `memory serve --http`: HTTP/1.1 connections served by hyper with a header
//! read timeout, shut down gracefully.
//!
//! Why not `axum::serve`: it gives no way to set hyper's header read timeout, and without it a client
//! that opens a connection and sends nothing (or a header a byte a minute) holds it forever. hyper
//! starts the timeout whenever the connection is ready for a request, so it also closes kept-alive
//! connections left idle. A stalled request body is bounded by the router's body timeout
//! ([`super::gate::Limits::body_timeout`]).

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// How long a failed `accept` (too many open files, say) waits before the next one.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How long shutdown waits for connections to finish their requests.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `shutdown` completes, then lets connections finish the request
/// they are answering (up to [`DRAIN_TIMEOUT`]).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Answers are small and awaited: no Nagle delay.
        let _ = stream.set_nodelay(true);
        let connection =
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A client that goes away or times out ends its connection; nothing to report.
            let _ = connection.await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await;
}
