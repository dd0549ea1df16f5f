//! The client side of `shale.metadata.v1`, with failover across metadata addresses.
//!
//! Calls go to the instance that answered last. A call that cannot connect, or that is
//! refused with `not_leader`, `fenced` or `stopped` (refused before doing anything),
//! moves on and tries again until `failover_timeout`. Each reconnect tries the address
//! in the leader record (`cluster/leader.json`, when the client has the store) first,
//! then the configured addresses in turn, so a new leader is found even on an address
//! nobody configured. A call that
//! was sent and got no answer is retried only when that is safe: reads always, commits
//! because metadata deduplicates them by segment id, reconfigurations because they
//! set absolute values; other writes report the outcome as unknown (`indefinite`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use shale_proto::metadata_rpc as pb;
use shale_storage::object_store::ObjectStore;
use tokio::sync::{mpsc, oneshot, watch, Mutex};
use tokio::task::JoinHandle;
use tonic::transport::Endpoint;

use super::commit_pipe::{self, Call};
use super::connection::{with_scheme, Connection, RemoteConfig, RETRY_PAUSE};
use crate::wire::{commit_request_to_wire, malformed, pipeline_to_wire, tail_from_wire};
use crate::wire_catalog::{catalog_call_to_wire, catalog_reply_from_wire};
use crate::{
    CatalogCall, CatalogReply, CommitRequest, CommitTicket, IndexEntry, Lookup, MetadataApi, MetadataError,
    PipelinePosition, Position, Result, Retry, TailWatch,
};

/// [`MetadataApi`] over gRPC.
pub struct RemoteMetadata {
    inner: Arc<Connection>,
    watcher: JoinHandle<()>,
    /// The ordered pipeline of commit calls (see `commit_pipe`).
    commits: mpsc::UnboundedSender<Call>,
}

impl Drop for RemoteMetadata {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

impl RemoteMetadata {
    /// A client for the metadata instances at `addresses` (`host:port` or `http://host:port`),
    /// also looking for the leader in the leader record of `store` when given. Connects
    /// lazily; a background task follows the live instance's commit watch.
    pub fn new(addresses: Vec<String>, store: Option<Arc<dyn ObjectStore>>, config: RemoteConfig) -> Result<Self> {
        if addresses.is_empty() {
            return Err(MetadataError::InvalidArgument("at least one metadata address is needed".into()));
        }
        let tls = config.ca_pem.is_some();
        let addresses = addresses.iter().map(|a| with_scheme(a, tls)).collect::<Vec<_>>();
        for address in &addresses {
            Endpoint::from_shared(address.clone())
                .map_err(|e| MetadataError::InvalidArgument(format!("bad metadata address `{address}`: {e}")))?;
        }
        let inner = Arc::new(Connection {
            addresses,
            store,
            config,
            current: Mutex::new(None),
            next: AtomicUsize::new(0),
            tails: TailWatch::default(),
            announced: std::sync::Mutex::default(),
            calls: std::sync::atomic::AtomicU64::new(0),
        });
        let watcher = tokio::spawn(follow_tails(inner.clone()));
        let (commits, calls) = mpsc::unbounded_channel();
        tokio::spawn(commit_pipe::run(inner.clone(), calls));
        Ok(Self { inner, watcher, commits })
    }
}

impl RemoteMetadata {
    /// Unary calls made so far (commits, which travel on the commit stream, excluded).
    pub fn calls_made(&self) -> u64 {
        self.inner.calls.load(Ordering::Relaxed)
    }
}

/// Keeps a watch open on the live instance and wakes the waiting reads of the streams
/// each event names; wakes every waiting read whenever updates may have been missed
/// (on connecting, after a lag, after the watch ends).
async fn follow_tails(inner: Arc<Connection>) {
    loop {
        if let Some((address, mut client)) = inner.connected().await {
            let (role, own_address) = inner.config.identity.clone();
            match client.watch(pb::WatchRequest { role, address: own_address }).await {
                Ok(response) => {
                    inner.tails.wake_all();
                    let mut events = response.into_inner();
                    while let Ok(Some(event)) = events.message().await {
                        if event.lagged {
                            inner.tails.wake_all();
                        }
                        match event.tails.into_iter().map(tail_from_wire).collect::<Result<Vec<_>>>() {
                            Ok(updates) => inner.tails.notify(&updates),
                            Err(e) => {
                                tracing::warn!(error = %e, "malformed watch event");
                                inner.tails.wake_all();
                            }
                        }
                    }
                    tracing::info!(%address, "metadata watch ended");
                }
                Err(status) => tracing::debug!(%address, %status, "metadata watch refused"),
            }
            inner.abandon(&address).await;
        }
        inner.tails.wake_all();
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

fn decode_entries(response: pb::EntriesResponse) -> Result<Vec<IndexEntry>> {
    response.entries.iter().map(|bytes| IndexEntry::decode(bytes).ok_or_else(|| malformed("index entry"))).collect()
}

fn limit(limit: usize) -> u32 {
    u32::try_from(limit).unwrap_or(u32::MAX)
}

#[async_trait]
impl MetadataApi for RemoteMetadata {
    /// Queues the call on the commit pipeline: calls queued one after another are
    /// applied in that order, several in flight at once.
    async fn sequence(&self, requests: Vec<CommitRequest>, position: Option<PipelinePosition>) -> Result<CommitTicket> {
        let wire = pb::CommitRequest {
            segments: requests.iter().map(commit_request_to_wire).collect(),
            position: position.map(pipeline_to_wire),
        };
        let (reply, outcome) = oneshot::channel();
        self.commits
            .send(Call { wire, reply })
            .map_err(|_| MetadataError::Unavailable("commit pipeline stopped".into()))?;
        Ok(CommitTicket::new(async move {
            outcome.await.unwrap_or_else(|_| Err(MetadataError::Indefinite("commit pipeline stopped".into())))
        }))
    }

    fn forget_entry(&self, stream_id: u64, first_seq: u64) {
        self.inner.tails.forget_entry(stream_id, first_seq);
    }

    async fn lookup(&self, query: Lookup) -> Result<Vec<IndexEntry>> {
        let wire = match query {
            Lookup::From { stream_id, seq, limit: limit_ } => {
                let pushed = self.inner.tails.entries_from(stream_id, seq, limit_);
                if !pushed.is_empty() {
                    return Ok(pushed);
                }
                pb::lookup_request::Query::From(pb::EntriesFromRequest { stream_id, seq, limit: limit(limit_) })
            }
            Lookup::AtTime { stream_id, timestamp } => {
                pb::lookup_request::Query::AtTime(pb::EntryAtTimeRequest { stream_id, timestamp })
            }
        };
        let request = pb::LookupRequest { query: Some(wire) };
        let response = self.inner.call("lookup", Retry::Read, |mut c| async move { c.lookup(request).await }).await?;
        decode_entries(response)
    }

    fn subscribe_tail(&self, basin: &str, stream: &str) -> watch::Receiver<Option<Position>> {
        self.inner.tails.subscribe(basin, stream)
    }

    async fn catalog(&self, call: CatalogCall) -> Result<CatalogReply> {
        let request = catalog_call_to_wire(&call);
        let reply = self
            .inner
            .send(call.name(), call.retry(), request, |mut c, request| async move { c.catalog(request).await })
            .await?;
        catalog_reply_from_wire(&call, reply)
    }
}
