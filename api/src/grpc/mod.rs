//! The public gRPC API, `shale.v1`: translates its messages to the same service calls
//! as the S2 API, with errors mapped through [`ApiError`]. Server reflection is on, so
//! `grpcurl -plaintext 127.0.0.1:50051 list` works.

mod convert;
mod sessions;
mod tokens;

use std::pin::Pin;

use futures::Stream;
use shale_proto::grpc as pb;
use shale_proto::grpc::access_tokens_server::AccessTokensServer;
use shale_proto::grpc::basins_server::{Basins, BasinsServer};
use shale_proto::grpc::records_server::{Records, RecordsServer};
use shale_proto::grpc::streams_server::{Streams, StreamsServer};
use tonic::{Request, Response, Status, Streaming};

use tower_http::request_id::{PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::{layers, ApiError, AppState};
use shale_service::ServiceError;
use shale_service::{ListQuery, ReadSessionRequest, Service};

type Result<T> = std::result::Result<Response<T>, Status>;
type EventStream<T> = Pin<Box<dyn Stream<Item = std::result::Result<T, Status>> + Send>>;

/// Serves `shale.v1` and reflection on `listener` until `shutdown` resolves.
pub async fn serve_grpc(
    listener: tokio::net::TcpListener,
    state: AppState,
    limits: crate::ConnectionLimits,
    tls: Option<crate::TlsAcceptor>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::result::Result<(), tonic::transport::Error> {
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .expect("the generated descriptor set is valid");
    // Older clients (grpcio's reflection, older grpcurl) speak v1alpha.
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .expect("the generated descriptor set is valid");
    let layers = tower::ServiceBuilder::new()
        .layer(SetRequestIdLayer::x_request_id(state.request_ids()))
        .layer(PropagateRequestIdLayer::x_request_id())
        // One line per call with its gRPC status, at a level by who was at fault (the
        // trace layer's own failure line would log every caller's mistake as an error).
        .layer(
            TraceLayer::new_for_grpc()
                .make_span_with(layers::grpc_span(state.role.name()))
                .on_response(layers::grpc_headers_logged)
                .on_eos(layers::grpc_end_logged)
                .on_failure(()),
        )
        .layer(layers::CountRequests { metrics: state.requests.clone(), grpc_services: grpc_services() })
        .map_response(correct_grpc_status)
        .layer(crate::auth::authenticate_grpc(state.auth.clone()));
    let service = GrpcService { service: state.service() };
    crate::listener::grpc_server(limits)
        .layer(layers)
        .add_service(BasinsServer::new(service.clone()))
        .add_service(StreamsServer::new(service.clone()))
        .add_service(AccessTokensServer::new(service.clone()))
        .add_service(RecordsServer::new(service))
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .serve_with_incoming_shutdown(crate::listener::capped_incoming(listener, limits, tls), shutdown)
        .await
}

/// gRPC statuses tonic picks itself before a handler runs, corrected to what the call
/// deserves: a request that does not decode, has no message, or is flagged compressed
/// without naming an encoding is the client's error (`INVALID_ARGUMENT`, not
/// `INTERNAL`), a message over the size limit is `RESOURCE_EXHAUSTED` (gRPC's code for
/// it, not `OUT_OF_RANGE`).
fn correct_grpc_status<B>(mut response: axum::http::Response<B>) -> axum::http::Response<B> {
    let headers = response.headers_mut();
    let code = headers.get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<i32>().ok());
    // tonic percent-encodes the message's spaces in the header.
    let message = headers.get("grpc-message").and_then(|v| v.to_str().ok()).unwrap_or("").replace("%20", " ");
    let corrected = match code {
        Some(13) if client_framing_fault(&message) => "3",
        Some(11) if message.contains("message length too large") => "8",
        _ => return response,
    };
    headers.insert("grpc-status", axum::http::HeaderValue::from_static(corrected));
    response
}

/// Whether tonic's `INTERNAL` message is about the request's framing.
fn client_framing_fault(message: &str) -> bool {
    message.starts_with("failed to decode")
        || message.starts_with("Missing request message")
        || message.contains("compressed-flag but no grpc-encoding")
}

/// The gRPC services this listener serves, by their generated names: the request
/// metrics label calls to their methods by path, any other call as `other`.
fn grpc_services() -> std::sync::Arc<[&'static str]> {
    use tonic::server::NamedService;
    std::sync::Arc::new([
        <BasinsServer<GrpcService> as NamedService>::NAME,
        <StreamsServer<GrpcService> as NamedService>::NAME,
        <AccessTokensServer<GrpcService> as NamedService>::NAME,
        <RecordsServer<GrpcService> as NamedService>::NAME,
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ])
}

#[derive(Clone)]
struct GrpcService {
    service: Service,
}

/// Calls whose message names a basin: their request line shows it.
trait AboutBasin {
    fn basin(&self) -> &str;
}

macro_rules! about_basin {
    ($($message:ty),* $(,)?) => {
        $(impl AboutBasin for $message {
            fn basin(&self) -> &str {
                &self.basin
            }
        })*
    };
}

about_basin!(
    pb::CreateBasinRequest,
    pb::DeleteBasinRequest,
    pb::GetTableStatusRequest,
    pb::ListStreamsRequest,
    pb::CreateStreamRequest,
    pb::DeleteStreamRequest,
    pb::CommitConsumerRequest,
    pb::GetConsumerRequest,
    pb::ListConsumersRequest,
    pb::AppendRequest,
    pb::ReadRequest,
    pb::AppendAtomicRequest,
    pb::CheckTailRequest,
);

impl GrpcService {
    /// [`Self::caller`], for a call about a basin, which its request line names.
    fn caller_in<T: AboutBasin>(&self, request: &Request<T>) -> std::result::Result<Service, Status> {
        layers::record_basin(request.get_ref().basin());
        self.caller(request)
    }

    /// The service acting for the caller the auth layer found.
    fn caller<T>(&self, request: &Request<T>) -> std::result::Result<Service, Status> {
        let access = request.extensions().get::<crate::auth::Access>().cloned().ok_or_else(|| {
            Status::from(ApiError::from(ServiceError::Unauthenticated("the request was not authenticated".into())))
        })?;
        Ok(self.service.for_caller(access))
    }
}

fn ok<T>(value: T) -> Result<T> {
    Ok(Response::new(value))
}

fn err(error: impl Into<ApiError>) -> Status {
    error.into().into()
}

fn list_query(prefix: String, start_after: String, limit: u32) -> ListQuery {
    ListQuery { prefix, start_after, limit: Some(limit as usize) }
}

#[tonic::async_trait]
impl Basins for GrpcService {
    async fn list_basins(&self, request: Request<pb::ListBasinsRequest>) -> Result<pb::ListBasinsResponse> {
        let service = self.caller(&request)?;
        let r = request.into_inner();
        let page = service.list_basins(&list_query(r.prefix, r.start_after, r.limit)).await.map_err(err)?;
        let basins =
            page.items.into_iter().map(|b| pb::BasinInfo { name: b.name, created_at: b.created_at_ms }).collect();
        ok(pb::ListBasinsResponse { basins, has_more: page.has_more })
    }

    async fn create_basin(&self, request: Request<pb::CreateBasinRequest>) -> Result<pb::BasinInfo> {
        let service = self.caller_in(&request)?;
        let r = request.into_inner();
        let (record, _) = service.create_basin(&r.basin, convert::basin_config(r.config), None).await.map_err(err)?;
        ok(pb::BasinInfo { name: record.name, created_at: record.created_at_ms })
    }

    async fn delete_basin(&self, request: Request<pb::DeleteBasinRequest>) -> Result<pb::DeleteBasinResponse> {
        let service = self.caller_in(&request)?;
        service.delete_basin(&request.into_inner().basin).await.map_err(err)?;
        ok(pb::DeleteBasinResponse {})
    }

    async fn get_table_status(&self, request: Request<pb::GetTableStatusRequest>) -> Result<pb::TableStatus> {
        let service = self.caller_in(&request)?;
        let status = service.table_status(&request.into_inner().basin).await.map_err(err)?;
        let streams = status
            .streams
            .into_iter()
            .map(|s| pb::StreamTableStatus { stream: s.stream, tiered_seq: s.tiered_seq, tail: s.tail })
            .collect();
        ok(pb::TableStatus {
            location: status.location,
            after_secs: status.after_secs,
            passes: status.passes,
            rows: status.rows,
            files: status.files,
            streams,
            metadata_location: status.metadata_location.unwrap_or_default(),
        })
    }
}

#[tonic::async_trait]
impl Streams for GrpcService {
    async fn list_streams(&self, request: Request<pb::ListStreamsRequest>) -> Result<pb::ListStreamsResponse> {
        let service = self.caller_in(&request)?;
        let r = request.into_inner();
        let query = list_query(r.prefix, r.start_after, r.limit);
        let page = service.list_streams(&r.basin, &query).await.map_err(err)?;
        let streams =
            page.items.into_iter().map(|s| pb::StreamInfo { name: s.name, created_at: s.created_at_ms }).collect();
        ok(pb::ListStreamsResponse { streams, has_more: page.has_more })
    }

    async fn create_stream(&self, request: Request<pb::CreateStreamRequest>) -> Result<pb::StreamInfo> {
        let service = self.caller_in(&request)?;
        let r = request.into_inner();
        let config = convert::stream_config(r.config).map_err(err)?;
        let (info, _) = service.create_stream(&r.basin, &r.stream, config, None).await.map_err(err)?;
        ok(pb::StreamInfo { name: info.name, created_at: info.record.created_at_ms })
    }

    async fn delete_stream(&self, request: Request<pb::DeleteStreamRequest>) -> Result<pb::DeleteStreamResponse> {
        let service = self.caller_in(&request)?;
        let r = request.into_inner();
        service.delete_stream(&r.basin, &r.stream).await.map_err(err)?;
        ok(pb::DeleteStreamResponse {})
    }

    async fn commit_consumer(&self, request: Request<pb::CommitConsumerRequest>) -> Result<pb::Consumer> {
        let service = self.caller_in(&request)?;
        let r = request.into_inner();
        let view =
            service.commit_consumer(&r.basin, &r.stream, &r.name, r.seq_num, r.match_seq_num, String::new()).await;
        ok(convert::consumer(view.map_err(err)?))
    }

    async fn get_consumer(&self, request: Request<pb::GetConsumerRequest>) -> Result<pb::Consumer> {
        let service = self.caller_in(&request)?;
        let r = request.into_inner();
        ok(convert::consumer(service.consumer(&r.basin, &r.stream, &r.name).await.map_err(err)?))
    }

    async fn list_consumers(&self, request: Request<pb::ListConsumersRequest>) -> Result<pb::ListConsumersResponse> {
        let service = self.caller_in(&request)?;
        let r = request.into_inner();
        let query = list_query(String::new(), r.start_after, r.limit);
        let page = service.list_consumers(&r.basin, &r.stream, &query).await.map_err(err)?;
        ok(pb::ListConsumersResponse {
            consumers: page.items.into_iter().map(convert::consumer).collect(),
            has_more: page.has_more,
        })
    }
}

#[tonic::async_trait]
impl Records for GrpcService {
    async fn append(&self, request: Request<pb::AppendRequest>) -> Result<pb::AppendAck> {
        let service = self.caller_in(&request)?;
        let ack = service.append(convert::append_input(request.into_inner()).map_err(err)?).await.map_err(err)?;
        ok(convert::ack(ack))
    }

    type AppendSessionStream = EventStream<pb::AppendAck>;

    async fn append_session(
        &self,
        request: Request<Streaming<pb::AppendRequest>>,
    ) -> Result<Self::AppendSessionStream> {
        let service = self.caller(&request)?;
        ok(sessions::append_session(&service, request.into_inner())?)
    }

    async fn read(&self, request: Request<pb::ReadRequest>) -> Result<pb::ReadResponse> {
        let service = self.caller_in(&request)?;
        let read = convert::read_request(request.into_inner());
        let output = service.read(&read).await.map_err(err)?;
        ok(convert::read_response(&output.records, output.tail))
    }

    type ReadSessionStream = EventStream<pb::ReadSessionResponse>;

    async fn read_session(&self, request: Request<pb::ReadRequest>) -> Result<Self::ReadSessionStream> {
        let service = self.caller_in(&request)?;
        let read = convert::read_request(request.into_inner());
        let session = ReadSessionRequest { read, idle_limit: None, resumed_after: (0, 0) };
        ok(sessions::read_session(&service, session).await?)
    }

    async fn append_atomic(&self, request: Request<pb::AppendAtomicRequest>) -> Result<pb::AppendAtomicResponse> {
        let service = self.caller_in(&request)?;
        let r = request.into_inner();
        let mut inputs = Vec::with_capacity(r.appends.len());
        for mut append in r.appends {
            if !append.basin.is_empty() && append.basin != r.basin {
                return Err(err(ApiError::bad("every append of an atomic append must be to the request's basin")));
            }
            append.basin.clone_from(&r.basin);
            inputs.push(convert::append_input(append).map_err(err)?);
        }
        let acks = service.append_atomic(inputs).await.map_err(err)?;
        ok(pb::AppendAtomicResponse { acks: acks.into_iter().map(convert::ack).collect() })
    }

    async fn check_tail(&self, request: Request<pb::CheckTailRequest>) -> Result<pb::CheckTailResponse> {
        let service = self.caller_in(&request)?;
        let r = request.into_inner();
        let tail = service.check_tail(&r.basin, &r.stream).await.map_err(err)?;
        ok(pb::CheckTailResponse { tail: Some(convert::position(tail)) })
    }
}
