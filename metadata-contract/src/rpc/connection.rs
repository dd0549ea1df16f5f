//! The connection state of the metadata client: the configured addresses, the live
//! instance's client, failover between them, and the retry rules every call follows
//! (see `client` for what is retried when). The commit pipeline and the unary calls
//! share it.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use shale_proto::metadata_rpc as pb;
use shale_proto::metadata_rpc::metadata_client::MetadataClient;
use shale_storage::object_store::path::Path;
use shale_storage::object_store::ObjectStore;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::Status;

use super::MAX_MESSAGE_BYTES;
use crate::leader_record::{read_record, LEADER_RECORD};
use crate::wire::error_from_wire;
use crate::{ClusterTiming, MetadataError, Result, Retry, TailWatch};

/// Pause before another round when no address answered.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The client's settings.
#[derive(Clone, Debug)]
pub struct RemoteConfig {
    /// Connecting to one address.
    pub connect_timeout: Duration,
    /// The cluster's timing: the client follows its `call_timeout` and
    /// `failover_timeout`.
    pub timing: ClusterTiming,
    /// The cluster token sent with every call (`authorization: Bearer`), when metadata
    /// requires one.
    pub token: Option<ClusterToken>,
    /// With a CA certificate (PEM), metadata is reached over TLS and its certificate must
    /// chain to this CA; addresses without a scheme become `https://`.
    pub ca_pem: Option<Vec<u8>>,
    /// This process's role and HTTP address, told to metadata when watching (its list of
    /// the processes it serves); empty when not given.
    pub identity: (String, String),
}

impl Default for RemoteConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(1),
            timing: ClusterTiming::default(),
            token: None,
            ca_pem: None,
            identity: (String::new(), String::new()),
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

/// One client's connection to metadata, shared by its calls and its commit pipeline.
pub(crate) struct Connection {
    pub(crate) addresses: Vec<String>,
    /// Where the leader record lives, if this client may read it.
    pub(crate) store: Option<Arc<dyn ObjectStore>>,
    pub(crate) config: RemoteConfig,
    /// The connected address and its client.
    pub(crate) current: Mutex<Option<(String, Client)>>,
    /// The configured address to try first on the next reconnect.
    pub(crate) next: AtomicUsize,
    /// Waiting reads, woken by the live instance's watch stream.
    pub(crate) tails: TailWatch,
    /// Calls made (not attempts): what tests and benchmarks count.
    pub(crate) calls: std::sync::atomic::AtomicU64,
    /// The address last logged as connected: reconnecting to it (while it waits for the
    /// lease, or after a dropped connection) is not news.
    pub(crate) announced: std::sync::Mutex<Option<String>>,
}

pub(crate) fn with_scheme(address: &str, tls: bool) -> String {
    if address.starts_with("http://") || address.starts_with("https://") {
        address.to_string()
    } else if tls {
        format!("https://{address}")
    } else {
        format!("http://{address}")
    }
}

impl Connection {
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
                    self.announce(&address);
                    *current = Some((address.clone(), client.clone()));
                    return Some((address, client));
                }
                Err(e) => tracing::debug!(%address, error = %e, "metadata address not answering"),
            }
        }
        None
    }

    /// Logs a connection at info when it is to another address than the last one.
    fn announce(&self, address: &str) {
        let mut announced = self.announced.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if announced.as_deref() == Some(address) {
            tracing::debug!(%address, "connected to metadata again");
        } else {
            tracing::info!(%address, "connected to metadata");
            *announced = Some(address.to_string());
        }
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

    pub(crate) async fn call<T, F, Fut>(&self, what: &'static str, retry: Retry, op: F) -> Result<T>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.config.timing.failover_timeout;
        let mut unanswered = false;
        let mut last_failure = String::from("no metadata address accepted a connection");
        loop {
            if let Some((address, client)) = self.connected().await {
                match tokio::time::timeout(self.config.timing.call_timeout, op(client)).await {
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
                        last_failure = format!("{address}: no answer within {:?}", self.config.timing.call_timeout);
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
    pub(crate) async fn send<Req, T, F, Fut>(&self, what: &'static str, retry: Retry, request: Req, op: F) -> Result<T>
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
