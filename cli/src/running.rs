//! A running server of any role: its listeners and tasks, how it serves the client API
//! and Kafka's protocol, and how it shuts down.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use shale_api::AppState;
use shale_gateway::Gateway;
use shale_metadata::{HaltReason, Metadata};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::dir_lock::DirLock;
use crate::ServeConfig;

/// How long open requests (live reads included) get to finish after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// A running server of any role.
pub struct Running {
    pub http_addr: SocketAddr,
    pub grpc_addr: SocketAddr,
    /// Where Kafka's protocol is served, when it is.
    pub kafka_addr: Option<SocketAddr>,
    /// The metadata this process owns, if it runs that role.
    pub(crate) metadata: Option<Arc<Metadata>>,
    pub(crate) gateway: Option<Arc<Gateway>>,
    pub(crate) stop: Vec<oneshot::Sender<()>>,
    pub(crate) servers: Vec<JoinHandle<()>>,
    pub(crate) background: Vec<JoinHandle<()>>,
    /// `shale serve`'s lock on its local data directory, released when the process ends.
    pub(crate) lock: Option<DirLock>,
    /// Ends the client API's live reads when the process stops.
    pub(crate) draining: Option<shale_api::Draining>,
}

/// A listener on `addr`, or an error naming it.
pub(crate) async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))
}

/// Serves `router` on `listener` with the process's connection limits, TLS and CORS.
pub(crate) fn spawn_http(
    listener: TcpListener,
    router: shale_api::Router,
    config: &ServeConfig,
    tls: Option<shale_api::TlsAcceptor>,
) -> anyhow::Result<(oneshot::Sender<()>, JoinHandle<()>)> {
    let router = shale_api::with_cors(router, &config.cors).map_err(anyhow::Error::msg)?;
    let limits = config.connections;
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let stopped = async {
            let _ = stopped.await;
        };
        if let Err(e) = shale_api::serve(listener, router, limits, tls, stopped).await {
            tracing::error!(error = %e, "http server failed");
        }
    });
    Ok((stop, server))
}

impl Running {
    /// Serves Kafka's protocol over `service` on `listener`, when there is one. The basin
    /// Kafka clients see exists before this returns, so before the start line is shown.
    pub(crate) async fn serve_kafka(
        &mut self,
        config: &ServeConfig,
        listener: Option<TcpListener>,
        service: shale_api::Service,
        cluster: shale_kafka::Cluster,
        metrics: Arc<shale_kafka::KafkaMetrics>,
    ) -> anyhow::Result<()> {
        let Some(listener) = listener else { return Ok(()) };
        let addr = listener.local_addr()?;
        service
            .ensure_basin(&config.kafka.basin, Default::default())
            .await
            .map_err(|e| anyhow::anyhow!("creating the Kafka basin {}: {e}", config.kafka.basin))?;
        let (stop, stopped) = oneshot::channel::<()>();
        let kafka = config.kafka.clone();
        let tls = config.tls.acceptor()?;
        let server = tokio::spawn(async move {
            let stopped = async {
                let _ = stopped.await;
            };
            if let Err(e) = shale_kafka::serve(listener, service, kafka, cluster, tls, metrics, stopped).await {
                tracing::error!(error = %e, "kafka listener failed");
            }
        });
        self.kafka_addr = Some(addr);
        self.stop.push(stop);
        self.servers.push(server);
        Ok(())
    }

    /// Where Kafka is served, as the start line shows it.
    pub(crate) fn kafka_shown(&self) -> String {
        self.kafka_addr.map_or_else(|| "off".to_string(), |a| a.to_string())
    }
}

/// The client API's listeners, bound before anything else is opened.
pub(crate) struct ClientListeners {
    pub(crate) http: TcpListener,
    grpc: TcpListener,
}

impl ClientListeners {
    pub(crate) async fn bind(config: &ServeConfig) -> anyhow::Result<Self> {
        Ok(Self { http: bind(config.http).await?, grpc: bind(config.grpc).await? })
    }
}

/// Serves the client API (HTTP and `shale.v1` gRPC) for `state` on `listeners`.
pub(crate) fn client_api(config: &ServeConfig, state: AppState, listeners: ClientListeners) -> anyhow::Result<Running> {
    if state.auth.is_on() {
        tracing::info!(revocation_bound = ?config.auth.revocation_bound, "access control on: every call needs a token");
    } else {
        tracing::warn!("access control is off (no SHALE_ROOT_TOKEN or [auth] root_token_file): anyone who reaches the ports can do anything");
    }
    let (http_listener, grpc_listener) = (listeners.http, listeners.grpc);
    let http_addr = http_listener.local_addr()?;
    let grpc_addr = grpc_listener.local_addr()?;
    let (limits, tls) = (config.connections, config.tls.acceptor()?);
    let (stop_http, http) = spawn_http(http_listener, shale_api::router(state.clone()), config, tls.clone())?;
    let (stop_grpc, grpc_stopped) = oneshot::channel::<()>();
    let (gateway, draining) = (state.gateway.clone(), state.draining.clone());
    let grpc = tokio::spawn(async move {
        let stopped = async {
            let _ = grpc_stopped.await;
        };
        if let Err(e) = shale_api::serve_grpc(grpc_listener, state, limits, tls, stopped).await {
            tracing::error!(error = %e, "grpc server failed");
        }
    });
    Ok(Running {
        http_addr,
        grpc_addr,
        kafka_addr: None,
        metadata: None,
        gateway,
        stop: vec![stop_http, stop_grpc],
        servers: vec![http, grpc],
        background: Vec::new(),
        lock: None,
        draining: Some(draining),
    })
}

impl Running {
    /// Resolves when the metadata this process owns halts (a newer instance fenced it,
    /// or a durable write failed); never for processes that own none.
    pub async fn halted(&self) -> HaltReason {
        match &self.metadata {
            Some(metadata) => {
                let mut halted = metadata.watch_halted();
                let reason = match halted.wait_for(Option::is_some).await {
                    Ok(reason) => reason.unwrap_or(HaltReason::WriteFailed),
                    Err(_) => HaltReason::WriteFailed,
                };
                reason
            }
            None => std::future::pending().await,
        }
    }

    /// Ends live reads (S2's error event, gRPC `UNAVAILABLE`), stops accepting, lets
    /// open requests finish (up to a bound), commits pending appends and closes the
    /// database.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        tracing::info!("shutting down");
        if let Some(draining) = &self.draining {
            draining.begin();
        }
        for stop in self.stop {
            let _ = stop.send(());
        }
        let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
        for mut server in self.servers {
            if tokio::time::timeout_at(deadline, &mut server).await.is_err() {
                tracing::warn!(timeout = ?DRAIN_TIMEOUT, "open requests did not finish; closing them");
                server.abort();
            }
        }
        for task in self.background {
            task.abort();
        }
        if let Some(gateway) = &self.gateway {
            gateway.shutdown().await;
        }
        if let Some(metadata) = &self.metadata {
            metadata.close().await?;
        }
        tracing::info!("stopped");
        Ok(())
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn wait_for_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
