//! `shale serve`: metadata, gateway and reader in one process behind the HTTP API.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use shale_api::AppState;
use shale_gateway::Gateway;
use shale_metadata::{Metadata, DEFAULT_DB_PATH};
use shale_reader::Reader;
use shale_storage::object_store::ObjectStore;
use shale_storage::{InstrumentedStore, SystemClock};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::ServeConfig;

/// How long open requests (live reads included) get to finish after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// A running server.
pub struct Running {
    pub http_addr: std::net::SocketAddr,
    pub grpc_addr: std::net::SocketAddr,
    state: AppState,
    stop: Vec<oneshot::Sender<()>>,
    servers: Vec<JoinHandle<()>>,
}

/// Opens the store and database, starts every role and binds the HTTP listener.
pub async fn serve(config: ServeConfig) -> anyhow::Result<Running> {
    let url = config.store_url()?;
    let raw = shale_storage::open_store(&url)?;
    let instrumented = InstrumentedStore::new(raw);
    let store_counters = instrumented.counters();
    let store: Arc<dyn ObjectStore> = Arc::new(instrumented);
    let clock = Arc::new(SystemClock);
    let metadata = Arc::new(
        Metadata::open_with(store.clone(), DEFAULT_DB_PATH, clock.clone(), &config.metadata)
            .await
            .context("opening metadata database")?,
    );
    let gateway = Arc::new(Gateway::start(config.gateway.clone(), store.clone(), metadata.clone(), clock)?);
    let reader = Arc::new(Reader::new(&config.reader, store, metadata.clone()));
    let state = AppState { metadata, gateway, reader, store_counters };

    let http_listener =
        tokio::net::TcpListener::bind(config.http).await.with_context(|| format!("binding {}", config.http))?;
    let grpc_listener =
        tokio::net::TcpListener::bind(config.grpc).await.with_context(|| format!("binding {}", config.grpc))?;
    let http_addr = http_listener.local_addr()?;
    let grpc_addr = grpc_listener.local_addr()?;
    tracing::info!(http = %http_addr, grpc = %grpc_addr, store = %url, "shale serving");
    let (stop_http, http_stopped) = oneshot::channel::<()>();
    let (stop_grpc, grpc_stopped) = oneshot::channel::<()>();
    let http = tokio::spawn({
        let state = state.clone();
        async move {
            let stopped = async {
                let _ = http_stopped.await;
            };
            if let Err(e) = shale_api::serve(http_listener, state, stopped).await {
                tracing::error!(error = %e, "http server failed");
            }
        }
    });
    let grpc = tokio::spawn({
        let state = state.clone();
        async move {
            let stopped = async {
                let _ = grpc_stopped.await;
            };
            if let Err(e) = shale_api::serve_grpc(grpc_listener, state, stopped).await {
                tracing::error!(error = %e, "grpc server failed");
            }
        }
    });
    Ok(Running { http_addr, grpc_addr, state, stop: vec![stop_http, stop_grpc], servers: vec![http, grpc] })
}

impl Running {
    /// Resolves when a newer metadata instance fences this one: the server must stop.
    pub async fn fenced(&self) {
        let mut fenced = self.state.metadata.watch_fenced();
        let _ = fenced.wait_for(|fenced| *fenced).await;
    }

    /// Stops accepting, lets open requests finish (up to a bound), commits pending
    /// appends and closes the database.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        tracing::info!("shutting down");
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
        self.state.gateway.shutdown().await;
        self.state.metadata.close().await?;
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
