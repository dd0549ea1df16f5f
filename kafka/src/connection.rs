//! One client connection: read a frame, decode its header, check the API version, decode
//! the body, dispatch, answer. Requests are answered one at a time in arrival order, as a
//! Kafka broker does (a fetch's long poll holds the connection's later requests).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;
use kafka_protocol::ResponseError;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::frame::{self, Decoded, Request};
use crate::{cluster, fetch, groups, offsets, produce, producers, topics, versions, Kafka, KafkaError};

pub async fn run(kafka: Arc<Kafka>, socket: TcpStream, peer: SocketAddr) {
    if let Err(e) = serve(&kafka, socket).await {
        tracing::info!(%peer, error = %e, "kafka connection closed");
    }
}

async fn serve(kafka: &Kafka, mut socket: TcpStream) -> Result<(), KafkaError> {
    socket.set_nodelay(true)?;
    let mut buf = BytesMut::new();
    let mut out = BytesMut::new();
    while let Some(frame) = frame::read_frame(&mut socket, &mut buf, kafka.config.max_request_bytes).await? {
        let request = match frame::decode_header(frame)? {
            Decoded::Request(request) => request,
            Decoded::UnknownApi { api_key, correlation_id } => {
                // Kafka closes the connection on an unknown API key; a client probing with
                // ApiVersions never sends one.
                return Err(KafkaError::Malformed(format!(
                    "unknown api key {api_key} (correlation id {correlation_id})"
                )));
            }
        };
        let Some(response) = answer(kafka, &request).await? else { continue };
        // An ApiVersions at a version not served is answered at version 0, which every
        // client can read, so it can retry at one both sides know.
        let version = match request.api_key {
            ApiKey::ApiVersions if !versions::served(request.api_key, request.header.request_api_version) => 0,
            _ => request.header.request_api_version,
        };
        write_response(&mut out, &request, version, &response)?;
        socket.write_all(&out).await?;
    }
    Ok(())
}

/// The response to one request; `None` for a produce with `acks=0`, which gets none.
async fn answer(kafka: &Kafka, request: &Request) -> Result<Option<ResponseKind>, KafkaError> {
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
    let body = frame::decode_body(request)?;
    let response = match body {
        RequestKind::ApiVersions(_) => {
            ResponseKind::ApiVersions(ApiVersionsResponse::default().with_api_keys(versions::api_versions()))
        }
        RequestKind::Metadata(r) => ResponseKind::Metadata(cluster::metadata(kafka, r, version).await),
        RequestKind::DescribeCluster(r) => ResponseKind::DescribeCluster(cluster::describe(kafka, r)),
        RequestKind::FindCoordinator(r) => ResponseKind::FindCoordinator(cluster::find_coordinator(kafka, r, version)),
        RequestKind::Produce(r) => {
            let acks = r.acks;
            let response = produce::produce(kafka, r).await;
            if acks == 0 {
                return Ok(None);
            }
            ResponseKind::Produce(response)
        }
        RequestKind::Fetch(r) => ResponseKind::Fetch(fetch::fetch(kafka, r).await),
        RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(offsets::list(kafka, r).await),
        RequestKind::DeleteRecords(r) => ResponseKind::DeleteRecords(offsets::delete_records(kafka, r).await),
        RequestKind::InitProducerId(r) => ResponseKind::InitProducerId(producers::init(kafka, r)),
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
        RequestKind::DescribeGroups(r) => ResponseKind::DescribeGroups(groups::describe(kafka, r)),
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(groups::list(kafka, r)),
        RequestKind::DeleteGroups(r) => ResponseKind::DeleteGroups(groups::delete(kafka, r).await),
        other => return Err(KafkaError::Malformed(format!("{other:?} is listed but not dispatched"))),
    };
    Ok(Some(response))
}

/// Lays out one response frame in `out`: length, header, body.
fn write_response(
    out: &mut BytesMut,
    request: &Request,
    version: i16,
    response: &ResponseKind,
) -> Result<(), KafkaError> {
    let header_version = request.api_key.response_header_version(version);
    out.clear();
    out.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(request.header.correlation_id);
    header.encode(out, header_version).map_err(|e| KafkaError::Encode(e.to_string()))?;
    response.encode(out, version).map_err(|e| KafkaError::Encode(e.to_string()))?;
    let len = i32::try_from(out.len() - 4).map_err(|_| KafkaError::Encode("response past 2 GiB".into()))?;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}
