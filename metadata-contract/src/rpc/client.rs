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

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use prost::Message;
use shale_proto::metadata_rpc as pb;
use shale_proto::metadata_rpc::metadata_client::MetadataClient;
use shale_storage::object_store::path::Path;
use shale_storage::object_store::ObjectStore;
use tokio::sync::{mpsc, oneshot, watch, Mutex};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::Status;

use super::commit_pipe::{self, Call};
use super::MAX_MESSAGE_BYTES;
use crate::leader_record::{read_record, LEADER_RECORD};
use crate::wire::{commit_request_to_wire, error_from_wire, malformed, pipeline_to_wire, tail_from_wire};
use crate::wire_catalog::{catalog_call_to_wire, catalog_reply_from_wire};
use crate::{
    CatalogCall, CatalogReply, CommitRequest, CommitTicket, IndexEntry, Lookup, MetadataApi, MetadataError,
    PipelinePosition, Position, Result, Retry, TailWatch,
};

/// Pause before another round when no address answered.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Client timeouts.
#[derive(Clone, Debug)]
pub struct RemoteConfig {
    /// Connecting to one address.
    pub connect_timeout: Duration,
    /// One attempt of one call.
    pub call_timeout: Duration,
    /// All attempts of one call, across failovers.
    pub failover_timeout: Duration,
    /// The cluster token sent with every call (`authorization: Bearer`), when metadata
    /// requires one.
    pub token: Option<ClusterToken>,
    /// With a CA certificate (PEM), metadata is reached over TLS and its certificate must
    /// chain to this CA; addresses without a scheme become `https://`.
    pub ca_pem: Option<Vec<u8>>,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(1),
            call_timeout: Duration::from_secs(10),
            failover_timeout: Duration::from_secs(30),
            token: None,
            ca_pem: None,
        }
    }
}

/// The secret roles present to metadata; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterToken(pub String);

impl std::fmt::Debug for ClusterToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterToken(..)")
    }
}

/// The metadata client: every call carries the cluster token, if there is one.
pub(crate) type Client = MetadataClient<InterceptedService<Channel, BearerToken>>;

/// A gRPC interceptor that adds `authorization: Bearer <token>` to each call (nothing
/// without a token): the cluster token here, an access token in the CLI.
#[derive(Clone, Debug, Default)]
pub struct BearerToken(Option<tonic::metadata::AsciiMetadataValue>);

impl BearerToken {
    /// Fails when the token is not printable ASCII (it could not travel as a header).
    pub fn new(token: Option<&str>) -> std::result::Result<Self, tonic::metadata::errors::InvalidMetadataValue> {
        token.map(|token| format!("Bearer {token}").parse()).transpose().map(BearerToken)
    }
}

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// [`MetadataApi`] over gRPC.
pub struct RemoteMetadata {
    inner: Arc<Inner>,
    watcher: JoinHandle<()>,
    /// The ordered pipeline of commit calls (see `commit_pipe`).
    commits: mpsc::UnboundedSender<Call>,
}

pub(crate) struct Inner {
    addresses: Vec<String>,
    /// Where the leader record lives, if this client may read it.
    store: Option<Arc<dyn ObjectStore>>,
    pub(crate) config: RemoteConfig,
    /// The connected address and its client.
    current: Mutex<Option<(String, Client)>>,
    /// The configured address to try first on the next reconnect.
    next: AtomicUsize,
    /// Waiting reads, woken by the live instance's watch stream.
    tails: TailWatch,
    /// Calls made (not attempts): what tests and benchmarks count.
    calls: std::sync::atomic::AtomicU64,
    /// Index entries the watch stream pushed, by `(stream id, first seq)`: durable and
    /// immutable, so a live read finds the entries of new records here, not by a call.
    recent: moka::sync::Cache<(u64, u64), IndexEntry>,
}

/// Index entries pushed by the watch stream kept for live reads (about 100 bytes each).
const RECENT_ENTRIES: u64 = 1_000_000;

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
        let inner = Arc::new(Inner {
            addresses,
            store,
            config,
            current: Mutex::new(None),
            next: AtomicUsize::new(0),
            tails: TailWatch::default(),
            recent: moka::sync::Cache::new(RECENT_ENTRIES),
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

fn with_scheme(address: &str, tls: bool) -> String {
    if address.starts_with("http://") || address.starts_with("https://") {
        address.to_string()
    } else if tls {
        format!("https://{address}")
    } else {
        format!("http://{address}")
    }
}

impl Inner {
    /// The connected client, connecting if needed: to the leader record's address, then
    /// to the configured ones from the one after the last abandoned.
    pub(crate) async fn connected(&self) -> Option<(String, Client)> {
        let mut current = self.current.lock().await;
        if let Some(connected) = current.as_ref() {
            return Some(connected.clone());
        }
        let start = self.next.load(Ordering::Relaxed);
        let configured =
            (0..self.addresses.len()).map(|step| self.addresses[(start + step) % self.addresses.len()].clone());
        let leader = self.leader_record_address().await;
        let candidates: Vec<String> =
            leader.clone().into_iter().chain(configured.filter(|a| Some(a) != leader.as_ref())).collect();
        for address in candidates {
            let Ok(mut endpoint) = Endpoint::from_shared(address.clone()) else { continue };
            if let Some(ca) = &self.config.ca_pem {
                let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
                match endpoint.tls_config(tls) {
                    Ok(with_tls) => endpoint = with_tls,
                    Err(e) => {
                        tracing::warn!(%address, error = %e, "cannot set up TLS to metadata");
                        continue;
                    }
                }
            }
            let endpoint = endpoint
                .connect_timeout(self.config.connect_timeout)
                .tcp_nodelay(true)
                .http2_keep_alive_interval(Duration::from_secs(5))
                .keep_alive_timeout(Duration::from_secs(5));
            match endpoint.connect().await {
                Ok(channel) => {
                    let token = self.config.token.as_ref().map(|t| t.0.as_str());
                    let client = MetadataClient::with_interceptor(channel, BearerToken::new(token).unwrap_or_default())
                        .max_decoding_message_size(MAX_MESSAGE_BYTES)
                        .max_encoding_message_size(MAX_MESSAGE_BYTES);
                    tracing::info!(%address, "connected to metadata");
                    *current = Some((address.clone(), client.clone()));
                    return Some((address, client));
                }
                Err(e) => tracing::debug!(%address, error = %e, "metadata address not answering"),
            }
        }
        None
    }

    /// The address named in the leader record, if the client has the store and the
    /// record is readable.
    async fn leader_record_address(&self) -> Option<String> {
        let store = self.store.as_ref()?;
        match read_record(store.as_ref(), &Path::from(LEADER_RECORD)).await {
            Ok(record) => record.map(|r| with_scheme(&r.address, self.config.ca_pem.is_some())),
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the leader record");
                None
            }
        }
    }

    /// Consecutive entries from the one starting at `seq`, as the watch stream pushed them.
    fn pushed_entries(&self, stream_id: u64, mut seq: u64, limit: usize) -> Vec<IndexEntry> {
        let mut entries = Vec::new();
        while entries.len() < limit {
            let Some(entry) = self.recent.get(&(stream_id, seq)) else { break };
            seq = entry.end_seq();
            entries.push(entry);
        }
        entries
    }

    /// Stops using the instance at `address`; the next reconnect starts with the
    /// configured address after it.
    pub(crate) async fn abandon(&self, address: &str) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|(a, _)| a == address) {
            *current = None;
            if let Some(index) = self.addresses.iter().position(|a| a == address) {
                self.next.store((index + 1) % self.addresses.len(), Ordering::Relaxed);
            }
        }
    }

    async fn call<T, F, Fut>(&self, what: &'static str, retry: Retry, op: F) -> Result<T>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.config.failover_timeout;
        let mut unanswered = false;
        let mut last_failure = String::from("no metadata address accepted a connection");
        loop {
            if let Some((address, client)) = self.connected().await {
                match tokio::time::timeout(self.config.call_timeout, op(client)).await {
                    Ok(Ok(response)) => return Ok(response.into_inner()),
                    Ok(Err(status)) => match decode_status(&status) {
                        Some(error) if !moves_on(&error) => return Err(error),
                        Some(error) => {
                            last_failure = format!("{address}: {error}");
                            self.abandon(&address).await;
                        }
                        // Something that is not a metadata service listens there.
                        None if status.code() == tonic::Code::Unimplemented => {
                            last_failure = format!("{address}: not a metadata service ({status})");
                            self.abandon(&address).await;
                        }
                        None => {
                            last_failure = format!("{address}: {status}");
                            self.abandon(&address).await;
                            unanswered = true;
                        }
                    },
                    Err(_elapsed) => {
                        last_failure = format!("{address}: no answer within {:?}", self.config.call_timeout);
                        self.abandon(&address).await;
                        unanswered = true;
                    }
                }
                if unanswered && retry == Retry::Once {
                    return Err(MetadataError::Indefinite(format!("{what}: {last_failure}")));
                }
            }
            if Instant::now() >= deadline {
                tracing::warn!(call = what, failure = %last_failure, "metadata call gave up");
                return Err(if unanswered && retry != Retry::Read {
                    MetadataError::Indefinite(format!("{what}: {last_failure}"))
                } else {
                    MetadataError::Unavailable(format!("{what}: {last_failure}"))
                });
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// [`Self::call`] with a request message sent again on every attempt.
    async fn send<Req, T, F, Fut>(&self, what: &'static str, retry: Retry, request: Req, op: F) -> Result<T>
    where
        Req: Clone,
        F: Fn(Client, Req) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        self.call(what, retry, |client| op(client, request.clone())).await
    }
}

/// Errors that say "not here" rather than "no": the call did nothing; try elsewhere.
pub(crate) fn moves_on(error: &MetadataError) -> bool {
    matches!(error, MetadataError::NotLeader | MetadataError::Fenced | MetadataError::Stopped)
}

/// The metadata error a server put in the status details; `None` for transport errors.
fn decode_status(status: &Status) -> Option<MetadataError> {
    if status.details().is_empty() {
        return None;
    }
    pb::Error::decode(status.details()).ok().map(error_from_wire)
}

/// Keeps a watch open on the live instance and wakes the waiting reads of the streams
/// each event names; wakes every waiting read whenever updates may have been missed
/// (on connecting, after a lag, after the watch ends).
async fn follow_tails(inner: Arc<Inner>) {
    loop {
        if let Some((address, mut client)) = inner.connected().await {
            match client.watch(pb::WatchRequest {}).await {
                Ok(response) => {
                    inner.tails.wake_all();
                    let mut events = response.into_inner();
                    while let Ok(Some(event)) = events.message().await {
                        if event.lagged {
                            inner.tails.wake_all();
                        }
                        match event.tails.into_iter().map(tail_from_wire).collect::<Result<Vec<_>>>() {
                            Ok(updates) => {
                                for update in &updates {
                                    for entry in &update.entries {
                                        inner.recent.insert((update.stream_id, entry.first_seq), *entry);
                                    }
                                }
                                inner.tails.notify(&updates);
                            }
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
        self.inner.recent.invalidate(&(stream_id, first_seq));
    }

    async fn lookup(&self, query: Lookup) -> Result<Vec<IndexEntry>> {
        let wire = match query {
            Lookup::From { stream_id, seq, limit: limit_ } => {
                let pushed = self.inner.pushed_entries(stream_id, seq, limit_);
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
