//! One client connection: read a frame, decode its header, check the API version, decode
//! the body, dispatch, answer. Answers go out in arrival order. Produce requests are
//! submitted as they are read and answered as they commit, so a producer's in-flight
//! requests share segments instead of waiting for one commit each; every other request
//! runs alone, as on a Kafka broker (a fetch's long poll holds the requests after it).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use futures::future::BoxFuture;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;
use kafka_protocol::ResponseError;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::frame::{self, Decoded, Request};
use crate::in_flight::{InFlight, Slot, MAX_IN_FLIGHT};
use crate::sasl::{Login, Step};
use crate::{
    acls, active_producers, cluster, elections, fetch_frame, fetch_session, groups, log_dirs, offsets, produce,
    producers, shares, topics, transactions, versions, Kafka, KafkaError,
};

pub async fn run(kafka: Arc<Kafka>, socket: impl AsyncRead + AsyncWrite + Send + Unpin, peer: SocketAddr) {
    if let Err(e) = serve(&kafka, socket).await {
        kafka.metrics.failed();
        tracing::info!(%peer, error = %e, "kafka connection closed");
    }
}

/// A request read and dispatched, waiting for its turn to be answered.
struct Queued<'a> {
    reply: Reply,
    /// The response; `None` for a produce with `acks=0`, which gets none.
    response: BoxFuture<'a, Result<Option<ResponseKind>, KafkaError>>,
    /// Its place among the connection's unanswered requests, given back once answered.
    _slot: Slot,
}

/// What a response's header needs from its request.
struct Reply {
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
}

async fn serve(listener: &Kafka, socket: impl AsyncRead + AsyncWrite + Send + Unpin) -> Result<(), KafkaError> {
    let (mut input, mut output) = tokio::io::split(socket);
    let mut buf = BytesMut::new();
    let kafka = if listener.sasl {
        match log_in(listener, &mut input, &mut output, &mut buf).await? {
            Some(access) => listener.for_caller(access),
            None => return Ok(()),
        }
    } else {
        listener.clone()
    };
    let kafka = &kafka;
    let fetches = fetch_session::FetchState::default();
    let (queue, answers) = mpsc::channel(MAX_IN_FLIGHT as usize);
    let reading = read_requests(kafka, &fetches, input, buf, queue);
    let writing = write_responses(output, answers);
    tokio::pin!(reading, writing);
    tokio::select! {
        // The client is done (or sent what closes the connection): answer what was
        // read before, then close.
        read = &mut reading => {
            let written = writing.await;
            read.and(written)
        }
        // An answer closed the connection, or the socket broke.
        written = &mut writing => written,
    }
}

/// The login of a connection while access control is on: ApiVersions, SaslHandshake and
/// SaslAuthenticate only, answered one at a time, until the caller is known (`None`:
/// the client left first). Anything else, or a failed login, closes the connection.
async fn log_in(
    kafka: &Kafka,
    input: &mut (impl AsyncRead + Unpin),
    output: &mut (impl AsyncWrite + Unpin),
    buf: &mut BytesMut,
) -> Result<Option<shale_service::auth::Access>, KafkaError> {
    let mut login = Login::default();
    let mut out = BytesMut::new();
    while let Some(frame) = frame::read_frame(input, buf, kafka.config.max_request_bytes).await? {
        let Decoded::Request(request) = frame::decode_header(frame)? else {
            kafka.metrics.unknown_request();
            return Err(KafkaError::Refused("an unknown api key before logging in".into()));
        };
        kafka.metrics.request(request.api_key);
        let (api_key, version) = (request.api_key, request.header.request_api_version);
        let reply = Reply { api_key, version, correlation_id: request.header.correlation_id };
        if api_key == ApiKey::ApiVersions {
            if let Some(response) = answer(kafka, request, &fetch_session::FetchState::default()).await? {
                write_response(&mut out, &reply, &response)?;
                output.write_all(&out).await?;
            }
            continue;
        }
        if !versions::served(api_key, version) {
            return Err(KafkaError::Malformed(format!("{api_key:?} version {version} is not served")));
        }
        let (response, outcome) = match frame::decode_body(&request)? {
            RequestKind::SaslHandshake(r) => (ResponseKind::SaslHandshake(login.handshake(r)), None),
            RequestKind::SaslAuthenticate(r) => match login.authenticate(kafka.service.authenticator(), r).await {
                Step::Continue(response) => (ResponseKind::SaslAuthenticate(response), None),
                Step::Done(response, access) => (ResponseKind::SaslAuthenticate(response), Some(Ok(access))),
                Step::Failed(response) => {
                    (ResponseKind::SaslAuthenticate(response), Some(Err("sasl authentication failed")))
                }
            },
            _ => {
                return Err(KafkaError::Refused(format!(
                    "{api_key:?} before logging in: access control is on, log in with SASL first"
                )))
            }
        };
        write_response(&mut out, &reply, &response)?;
        output.write_all(&out).await?;
        match outcome {
            None => {}
            Some(Err(why)) => return Err(KafkaError::Refused(why.into())),
            Some(Ok(access)) if access.token().is_some_and(|t| t.auto_prefix_streams) => {
                return Err(KafkaError::Refused(
                    "a token that auto-prefixes stream names cannot be used over Kafka (topic names are stream names)"
                        .into(),
                ))
            }
            Some(Ok(access)) => return Ok(Some(access)),
        }
    }
    Ok(None)
}

/// Reads requests until the connection ends, queueing each for its answer in order.
/// A caller whose token is revoked or expires is cut off at its next request (within
/// the revocation bound).
async fn read_requests<'a>(
    kafka: &'a Kafka,
    fetches: &'a fetch_session::FetchState,
    mut input: impl AsyncRead + Unpin,
    mut buf: BytesMut,
    queue: mpsc::Sender<Queued<'a>>,
) -> Result<(), KafkaError> {
    let in_flight = InFlight::new();
    while let Some(frame) = frame::read_frame(&mut input, &mut buf, kafka.config.max_request_bytes).await? {
        if let Err(e) = kafka.service.authenticator().recheck(kafka.service.access()).await {
            return Err(KafkaError::Refused(format!("the connection's token no longer holds: {e}")));
        }
        let request = match frame::decode_header(frame)? {
            Decoded::Request(request) => request,
            Decoded::UnknownApi { api_key, correlation_id } => {
                kafka.metrics.unknown_request();
                // Kafka closes the connection on an unknown API key; a client probing with
                // ApiVersions never sends one.
                return Err(KafkaError::Malformed(format!(
                    "unknown api key {api_key} (correlation id {correlation_id})"
                )));
            }
        };
        kafka.metrics.request(request.api_key);
        let served = versions::served(request.api_key, request.header.request_api_version);
        let reply = Reply {
            api_key: request.api_key,
            // An ApiVersions at a version not served is answered at version 0, which
            // every client can read, so it can retry at one both sides know.
            version: if request.api_key == ApiKey::ApiVersions && !served {
                0
            } else {
                request.header.request_api_version
            },
            correlation_id: request.header.correlation_id,
        };
        let queued = if request.api_key == ApiKey::Produce && served {
            let slot = in_flight.produce_slot(request.body.len()).await;
            let RequestKind::Produce(produce) = frame::decode_body(&request)? else {
                return Err(KafkaError::Malformed("a produce request decoded as another".into()));
            };
            let acks = produce.acks;
            let response = produce::submit(kafka, produce, &in_flight).await;
            let response: BoxFuture<'a, _> = Box::pin(async move {
                let response = response.await;
                Ok((acks != 0).then_some(ResponseKind::Produce(response)))
            });
            Queued { reply, response, _slot: slot }
        } else {
            let slot = in_flight.exclusive().await;
            Queued { reply, response: Box::pin(answer(kafka, request, fetches)), _slot: slot }
        };
        if queue.send(queued).await.is_err() {
            break;
        }
    }
    Ok(())
}

/// Answers queued requests in the order they were read.
async fn write_responses(
    mut output: impl AsyncWrite + Unpin,
    mut answers: mpsc::Receiver<Queued<'_>>,
) -> Result<(), KafkaError> {
    let mut out = BytesMut::new();
    while let Some(queued) = answers.recv().await {
        match queued.response.await? {
            // A fetch's records go out as fetched, not copied into the frame.
            Some(ResponseKind::Fetch(fetched)) if fetch_frame::can_lay_out(&fetched, queued.reply.version) => {
                let mut frame = fetch_frame::lay_out(queued.reply.correlation_id, queued.reply.version, &fetched);
                output.write_all_buf(&mut frame).await?;
            }
            Some(response) => {
                write_response(&mut out, &queued.reply, &response)?;
                output.write_all(&out).await?;
            }
            None => {}
        }
    }
    Ok(())
}

/// The response to one request other than a produce (which `read_requests` submits).
async fn answer(
    kafka: &Kafka,
    request: Request,
    fetches: &fetch_session::FetchState,
) -> Result<Option<ResponseKind>, KafkaError> {
    let version = request.header.request_api_version;
    if !versions::served(request.api_key, version) {
        if request.api_key == ApiKey::ApiVersions {
            // Kafka answers an unsupported ApiVersions at version 0 with the error and its
            // list, so the client can pick a version it shares.
            let response = ApiVersionsResponse::default()
                .with_error_code(ResponseError::UnsupportedVersion.code())
                .with_api_keys(versions::api_versions());
            return Ok(Some(ResponseKind::ApiVersions(response)));
        }
        return Err(KafkaError::Malformed(format!("{:?} version {version} is not served", request.api_key)));
    }
    let body = frame::decode_body(&request)?;
    let response = match body {
        RequestKind::ApiVersions(_) => {
            ResponseKind::ApiVersions(ApiVersionsResponse::default().with_api_keys(versions::api_versions()))
        }
        RequestKind::Metadata(r) => {
            let client_id = request.header.client_id.as_deref().unwrap_or_default();
            ResponseKind::Metadata(cluster::metadata(kafka, r, version, client_id).await)
        }
        RequestKind::DescribeCluster(r) => ResponseKind::DescribeCluster(cluster::describe(kafka, r)),
        RequestKind::DescribeAcls(_) => ResponseKind::DescribeAcls(acls::describe(kafka)),
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(acls::create(kafka, r)),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(acls::delete(kafka, r)),
        RequestKind::ConsumerGroupDescribe(r) => {
            ResponseKind::ConsumerGroupDescribe(groups::describe_consumer_groups(kafka, r))
        }
        RequestKind::ConsumerGroupHeartbeat(r) => {
            let client_id = request.header.client_id.as_deref().unwrap_or_default();
            ResponseKind::ConsumerGroupHeartbeat(groups::consumer_heartbeat(kafka, r, version, client_id).await)
        }
        RequestKind::ShareGroupHeartbeat(r) => {
            let client_id = request.header.client_id.as_deref().unwrap_or_default();
            ResponseKind::ShareGroupHeartbeat(shares::heartbeat(kafka, r, client_id).await)
        }
        RequestKind::ShareGroupDescribe(r) => ResponseKind::ShareGroupDescribe(shares::describe(kafka, r)),
        RequestKind::DescribeShareGroupOffsets(r) => {
            ResponseKind::DescribeShareGroupOffsets(shares::describe_offsets(kafka, r).await)
        }
        RequestKind::AlterShareGroupOffsets(r) => {
            ResponseKind::AlterShareGroupOffsets(shares::alter_offsets(kafka, r).await)
        }
        RequestKind::DeleteShareGroupOffsets(r) => {
            ResponseKind::DeleteShareGroupOffsets(shares::delete_offsets(kafka, r).await)
        }
        RequestKind::ShareFetch(r) => {
            let client_id = request.header.client_id.as_deref().unwrap_or_default();
            ResponseKind::ShareFetch(shares::fetch(kafka, r, client_id).await)
        }
        RequestKind::ShareAcknowledge(r) => ResponseKind::ShareAcknowledge(shares::acknowledge(kafka, r).await),
        RequestKind::ElectLeaders(r) => ResponseKind::ElectLeaders(elections::elect(kafka, r).await),
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(active_producers::describe(kafka, r).await)
        }
        RequestKind::DescribeLogDirs(r) => {
            let client_id = request.header.client_id.as_deref().unwrap_or_default();
            let brokers = kafka.brokers.for_zone(cluster::zone_of(client_id));
            ResponseKind::DescribeLogDirs(log_dirs::describe(kafka, r, &brokers).await)
        }
        RequestKind::FindCoordinator(r) => ResponseKind::FindCoordinator(cluster::find_coordinator(kafka, r, version)),
        RequestKind::Fetch(r) => ResponseKind::Fetch(fetch_session::fetch(kafka, r, version, fetches).await),
        RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(offsets::list(kafka, r, version).await),
        RequestKind::DeleteRecords(r) => ResponseKind::DeleteRecords(offsets::delete_records(kafka, r).await),
        RequestKind::InitProducerId(r) if r.transactional_id.is_some() => {
            ResponseKind::InitProducerId(transactions::init(kafka, r, version).await)
        }
        RequestKind::InitProducerId(r) => ResponseKind::InitProducerId(producers::init(kafka, r)),
        RequestKind::AddPartitionsToTxn(r) => {
            ResponseKind::AddPartitionsToTxn(transactions::add_partitions(kafka, r, version).await)
        }
        RequestKind::AddOffsetsToTxn(r) => {
            ResponseKind::AddOffsetsToTxn(transactions::add_offsets(kafka, r, version).await)
        }
        RequestKind::TxnOffsetCommit(r) => {
            ResponseKind::TxnOffsetCommit(transactions::commit_offsets(kafka, r, version).await)
        }
        RequestKind::EndTxn(r) => ResponseKind::EndTxn(transactions::end(kafka, r, version).await),
        RequestKind::DescribeTransactions(r) => {
            ResponseKind::DescribeTransactions(transactions::describe(kafka, r).await)
        }
        RequestKind::ListTransactions(r) => ResponseKind::ListTransactions(transactions::list(kafka, r).await),
        RequestKind::CreateTopics(r) => ResponseKind::CreateTopics(topics::create(kafka, r).await),
        RequestKind::DeleteTopics(r) => ResponseKind::DeleteTopics(topics::delete(kafka, r, version).await),
        RequestKind::CreatePartitions(r) => ResponseKind::CreatePartitions(topics::create_partitions(kafka, r).await),
        RequestKind::DescribeConfigs(r) => ResponseKind::DescribeConfigs(topics::describe_configs(kafka, r).await),
        RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(topics::alter_configs(kafka, r).await),
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(topics::incremental_alter_configs(kafka, r).await)
        }
        RequestKind::JoinGroup(r) => {
            let client_id = request.header.client_id.as_deref().unwrap_or_default();
            ResponseKind::JoinGroup(groups::join(kafka, r, version, client_id).await)
        }
        RequestKind::SyncGroup(r) => ResponseKind::SyncGroup(groups::sync(kafka, r).await),
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(groups::heartbeat(kafka, r)),
        RequestKind::LeaveGroup(r) => ResponseKind::LeaveGroup(groups::leave(kafka, r, version)),
        RequestKind::OffsetCommit(r) => ResponseKind::OffsetCommit(groups::commit_offsets(kafka, r).await),
        RequestKind::OffsetFetch(r) => ResponseKind::OffsetFetch(groups::fetch_offsets(kafka, r, version).await),
        RequestKind::DescribeGroups(r) => ResponseKind::DescribeGroups(groups::describe(kafka, r).await),
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(groups::list(kafka, r).await),
        RequestKind::DeleteGroups(r) => ResponseKind::DeleteGroups(groups::delete(kafka, r).await),
        RequestKind::OffsetDelete(r) => ResponseKind::OffsetDelete(groups::delete_offsets(kafka, r).await),
        // Without access control there is nothing to log in to.
        RequestKind::SaslHandshake(_) => ResponseKind::SaslHandshake(
            kafka_protocol::messages::SaslHandshakeResponse::default()
                .with_error_code(ResponseError::UnsupportedSaslMechanism.code()),
        ),
        other => return Err(KafkaError::Malformed(format!("{other:?} is listed but not dispatched"))),
    };
    Ok(Some(response))
}

/// Lays out one response frame in `out`: length, header, body.
fn write_response(out: &mut BytesMut, reply: &Reply, response: &ResponseKind) -> Result<(), KafkaError> {
    let header_version = reply.api_key.response_header_version(reply.version);
    out.clear();
    out.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(reply.correlation_id);
    header.encode(out, header_version).map_err(|e| KafkaError::Encode(e.to_string()))?;
    response.encode(out, reply.version).map_err(|e| KafkaError::Encode(e.to_string()))?;
    let len = i32::try_from(out.len() - 4).map_err(|_| KafkaError::Encode("response past 2 GiB".into()))?;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}
