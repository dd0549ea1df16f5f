//! Serving HTTP with the limits a public listener needs: a connection cap (past it a
//! new connection is answered `503` with S2's JSON body and closed, so descriptors never
//! run out), a deadline for a connection's first bytes and for a request's headers
//! (slow or silent clients are dropped), HTTP/2 keep-alive pings (dead peers are
//! dropped), `TCP_NODELAY`, bursts of writes gathered into larger sends
//! ([`crate::coalesce`]), and a graceful stop. gRPC listeners get the same cap,
//! first-bytes deadline, keep-alive and gathered sends through [`capped_incoming`] and
//! [`grpc_server`].

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::capped::CappedStream;
use crate::coalesce::CoalescedWrites;
use crate::tls::Conn;

/// Connection limits of the client-facing listeners (`[connections]` in the config).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionLimits {
    /// Open connections per listener; one more is answered 503 and closed. Keep it below
    /// the process's descriptor limit (`ulimit -n`) minus what the store uses.
    pub max_connections: usize,
    /// A client must send its first bytes (any protocol), and each HTTP/1.1 request's
    /// headers, within this long, or the connection is closed: slow or silent clients
    /// hold no connection for long.
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// HTTP/2 pings on a quiet connection this often; a peer that does not answer
    /// within the same time is dropped. Live reads keep their connections busy.
    #[serde(with = "humantime_serde")]
    pub keep_alive_interval: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            header_read_timeout: Duration::from_secs(10),
            keep_alive_interval: Duration::from_secs(30),
        }
    }
}

/// The largest HTTP/2 DATA frame this listener accepts.
const MAX_RECEIVED_FRAME_BYTES: u32 = 1 << 20;

/// What a connection past the cap is told before it is closed.
const OVER_CAPACITY: &str = r#"{"code":"unavailable","message":"too many open connections; retry shortly"}"#;

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and
/// waits for open connections to finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    tls: Option<TlsAcceptor>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    // Room past the API's header limits, so that a request over them reaches
    // `layers::header_limits` and gets its JSON 431 instead of the stack's bare one.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_headers(4 * crate::http_layers::MAX_HEADERS);
    builder
        .http2()
        .max_header_list_size(4 * crate::http_layers::MAX_HEADER_BYTES as u32)
        // Clients may send DATA frames up to this (HTTP/2's default is 16 KiB): an S2S
        // append of a few hundred KiB then arrives in one frame, not dozens.
        .max_frame_size(MAX_RECEIVED_FRAME_BYTES)
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.keep_alive_interval)
        .keep_alive_timeout(limits.keep_alive_interval);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors or the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, max = limits.max_connections, "connection refused: too many open connections");
            tokio::spawn(refuse(stream));
            continue;
        };
        let stream = CappedStream::new(stream, slot, limits.header_read_timeout);
        let service = TowerToHyperService::new(router.clone());
        let (builder, watcher, tls) = (builder.clone(), graceful.watcher(), tls.clone());
        tokio::spawn(async move {
            let conn = match Conn::open(stream, tls.as_ref()).await {
                Ok(conn) => conn,
                Err(e) => return tracing::debug!(%peer, error = %e, "TLS handshake failed"),
            };
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(CoalescedWrites::new(conn)), service);
            if let Err(e) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    graceful.shutdown().await;
    Ok(())
}

async fn refuse(mut stream: tokio::net::TcpStream) {
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{OVER_CAPACITY}",
        OVER_CAPACITY.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(response.as_bytes())).await;
    let _ = stream.shutdown().await;
}

/// A gRPC server builder with the listener's HTTP/2 keep-alive: quiet connections are
/// pinged every `keep_alive_interval`, and dropped when a ping goes unanswered as long.
pub fn grpc_server(limits: ConnectionLimits) -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(limits.keep_alive_interval))
        .http2_keepalive_timeout(Some(limits.keep_alive_interval))
}

/// Accepted gRPC connections, `TCP_NODELAY`, writes gathered into larger sends, at most
/// `limits.max_connections` open at once: one more is closed at once (the client sees
/// the connection refused and may retry), so descriptors never run out; one that sends
/// nothing within `limits.header_read_timeout` is closed.
pub fn capped_incoming(
    listener: TcpListener,
    limits: ConnectionLimits,
    tls: Option<TlsAcceptor>,
) -> impl futures::Stream<Item = std::io::Result<CoalescedWrites<Conn>>> {
    // Handshakes run in their own tasks, so a slow client never holds up the next accept.
    let (opened, incoming) = tokio::sync::mpsc::channel(64);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    tokio::spawn(async move {
        loop {
            // Stops (and frees the port) once the server drops the incoming stream.
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = opened.closed() => return,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                tracing::warn!(max = limits.max_connections, "gRPC connection refused: too many open connections");
                continue;
            };
            let stream = CappedStream::new(stream, slot, limits.header_read_timeout);
            let (sender, tls) = (opened.clone(), tls.clone());
            tokio::spawn(async move {
                match Conn::open(stream, tls.as_ref()).await {
                    Ok(conn) => {
                        let _ = sender.send(Ok::<_, std::io::Error>(CoalescedWrites::new(conn))).await;
                    }
                    Err(e) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(incoming)
}
