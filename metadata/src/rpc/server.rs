//! The server side of `shale.metadata.v1`.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use prost::Message;
use shale_proto::metadata_rpc as pb;
use shale_proto::metadata_rpc::metadata_server::{Metadata as MetadataRpc, MetadataServer};
use tokio::sync::{broadcast, mpsc};
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use crate::wire::{commit_call_from_wire, error_to_wire, outcomes_to_wire, tail_to_wire};
use crate::wire_catalog::{catalog_call_from_wire, catalog_reply_to_wire};
use crate::{
    ClusterToken, CommitTicket, LeaderLease, LeasedMetadata, Lookup, Metadata, MetadataApi, MetadataError,
    MAX_MESSAGE_BYTES,
};

/// How often an open watch checks that this instance still holds the lease.
const WATCH_LEASE_CHECK: Duration = Duration::from_millis(100);

/// Serves one [`Metadata`] through [`LeasedMetadata`]: with a lease, every call is
/// refused with `not_leader` while the lease is not held.
#[derive(Clone)]
pub struct MetadataService {
    leased: Arc<LeasedMetadata>,
}

impl MetadataService {
    pub fn new(metadata: Arc<Metadata>, lease: Option<Arc<LeaderLease>>) -> Self {
        Self { leased: Arc::new(LeasedMetadata::new(metadata, lease)) }
    }

    /// The gRPC service; with a cluster token, calls without it are refused
    /// `UNAUTHENTICATED` before they reach metadata.
    pub fn into_server(self, token: Option<&ClusterToken>) -> InterceptedService<MetadataServer<Self>, RequireToken> {
        let server = MetadataServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let expected = token.map(|t| format!("Bearer {}", t.0).into_bytes());
        InterceptedService::new(server, RequireToken(expected.map(Arc::from)))
    }

    fn leader(&self) -> Result<&Metadata, Status> {
        self.leased.check().map_err(status)?;
        Ok(self.leased.metadata())
    }
}

/// Refuses calls that do not carry the cluster token.
#[derive(Clone)]
pub struct RequireToken(Option<Arc<[u8]>>);

impl tonic::service::Interceptor for RequireToken {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.0 else { return Ok(request) };
        match request.metadata().get("authorization") {
            Some(value) if value.as_bytes() == &expected[..] => Ok(request),
            Some(_) => Err(Status::unauthenticated("wrong cluster token")),
            None => Err(Status::unauthenticated("metadata needs the cluster token (authorization: Bearer ...)")),
        }
    }
}

/// A metadata error as a gRPC status: the code from the shared mapping, the error's
/// wire form in the details so the client rebuilds the same value.
/// A call that does not decode: the caller's error (`INVALID_ARGUMENT`), not the
/// "malformed response" a client makes of an answer that does not decode.
fn bad_request(error: MetadataError) -> MetadataError {
    let what = match &error {
        MetadataError::Unavailable(message) => {
            message.strip_prefix("malformed metadata response: ").unwrap_or(message).to_string()
        }
        other => other.to_string(),
    };
    MetadataError::InvalidArgument(format!("the call does not decode: {what}"))
}

fn status(error: MetadataError) -> Status {
    let code = tonic::Code::from_i32(error.code().grpc_code());
    Status::with_details(code, error.to_string(), error_to_wire(&error).encode_to_vec().into())
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::WatchEvent, Status>> + Send>>;
type CommitStream = Pin<Box<dyn Stream<Item = Result<pb::CommitResponse, Status>> + Send>>;

/// Commit calls a stream may have applied and not yet answered.
const COMMIT_STREAM_WINDOW: usize = 64;

fn commit_response(outcome: Result<Vec<Vec<crate::UnitOutcome>>, MetadataError>) -> pb::CommitResponse {
    match outcome {
        Ok(outcomes) => pb::CommitResponse {
            segments: outcomes.iter().map(|outcome| outcomes_to_wire(outcome)).collect(),
            error: None,
        },
        Err(error) => pb::CommitResponse { segments: Vec::new(), error: Some(error_to_wire(&error)) },
    }
}

#[tonic::async_trait]
impl MetadataRpc for MetadataService {
    type CommitStreamStream = CommitStream;

    /// Applies each request in the order it arrives and answers in the same order, each
    /// once durable; several requests are in flight at once.
    async fn commit_stream(
        &self,
        request: Request<tonic::Streaming<pb::CommitRequest>>,
    ) -> Result<Response<Self::CommitStreamStream>, Status> {
        self.leader()?;
        let mut incoming = request.into_inner();
        let (answers, answered) = mpsc::channel(COMMIT_STREAM_WINDOW);
        let (tickets, mut in_order) = mpsc::channel::<Result<CommitTicket, MetadataError>>(COMMIT_STREAM_WINDOW);
        tokio::spawn(async move {
            while let Some(ticket) = in_order.recv().await {
                let outcome = match ticket {
                    Ok(ticket) => ticket.await,
                    Err(e) => Err(e),
                };
                if answers.send(Ok(commit_response(outcome))).await.is_err() {
                    // The gateway went away; keep draining so every applied call finishes.
                    continue;
                }
            }
        });
        let service = self.clone();
        tokio::spawn(async move {
            while let Ok(Some(call)) = incoming.message().await {
                let ticket = match (service.leader(), commit_call_from_wire(call)) {
                    (Err(_), _) if service.leased.metadata().is_fenced() => Err(MetadataError::Fenced),
                    (Err(_), _) => Err(MetadataError::NotLeader),
                    (Ok(metadata), Ok((requests, position))) => metadata.sequence(requests, position).await,
                    (Ok(_), Err(e)) => Err(bad_request(e)),
                };
                // A refused call is resent, with every call after it, on a new stream:
                // none after it may be applied here, or they would land before it.
                let refused =
                    matches!(ticket, Err(MetadataError::NotLeader | MetadataError::Fenced | MetadataError::Stopped));
                if tickets.send(ticket).await.is_err() || refused {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(answered))))
    }

    async fn lookup(&self, request: Request<pb::LookupRequest>) -> Result<Response<pb::EntriesResponse>, Status> {
        let query = match request.into_inner().query {
            Some(pb::lookup_request::Query::From(r)) => {
                Lookup::From { stream_id: r.stream_id, seq: r.seq, limit: r.limit as usize }
            }
            Some(pb::lookup_request::Query::AtTime(r)) => {
                Lookup::AtTime { stream_id: r.stream_id, timestamp: r.timestamp }
            }
            None => return Err(status(MetadataError::InvalidArgument("lookup without a query".into()))),
        };
        let entries = self.leased.lookup(query).await.map_err(status)?;
        Ok(Response::new(pb::EntriesResponse { entries: entries.iter().map(|e| e.encode()).collect() }))
    }

    type WatchStream = WatchStream;

    /// Sends the tails each commit moves, from now on; ends when this instance loses
    /// the lease, so watchers move to the new leader.
    async fn watch(&self, request: Request<pb::WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
        let pb::WatchRequest { role, address } = request.into_inner();
        let leader = self.leader()?;
        let feed = leader.tail_feed();
        // Listed while the stream lives: the guard goes with it.
        let watching = (!role.is_empty()).then(|| leader.watching(role, address));
        let service = self.clone();
        let stream = futures::stream::unfold((feed, service, watching), |(mut feed, service, watching)| async move {
            loop {
                tokio::select! {
                    received = feed.recv() => {
                        let event = match received {
                            Ok(updates) => pb::WatchEvent { tails: updates.iter().map(tail_to_wire).collect(), lagged: false },
                            Err(broadcast::error::RecvError::Lagged(_)) => pb::WatchEvent { tails: Vec::new(), lagged: true },
                            Err(broadcast::error::RecvError::Closed) => return None,
                        };
                        return Some((Ok(event), (feed, service, watching)));
                    }
                    _ = tokio::time::sleep(WATCH_LEASE_CHECK) => {
                        if service.leader().is_err() {
                            return None;
                        }
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn catalog(&self, request: Request<pb::CatalogCall>) -> Result<Response<pb::CatalogReply>, Status> {
        let call = catalog_call_from_wire(request.into_inner()).map_err(|e| status(bad_request(e)))?;
        let reply = self.leased.catalog(call).await.map_err(status)?;
        Ok(Response::new(catalog_reply_to_wire(&reply)))
    }
}
