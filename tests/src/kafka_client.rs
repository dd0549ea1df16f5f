//! A bare Kafka client over one connection, one request at a time, for tests that must
//! know exactly what each request did: a produce is one request (acked at a base offset,
//! refused with a code, or unanswered), a fetch one read with the high watermark it saw.
//! Built on the `kafka-protocol` crate's messages; no retries, no metadata cache.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey,
    CreateTopicsRequest, CreateTopicsResponse, DeleteRecordsRequest, DeleteRecordsResponse, EndTxnRequest,
    EndTxnResponse, FetchRequest, FetchResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    InitProducerIdRequest, InitProducerIdResponse, JoinGroupRequest, JoinGroupResponse, ListOffsetsRequest,
    ListOffsetsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    ProduceRequest, ProduceResponse, ProducerId, RequestHeader, ResponseHeader, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `values` as one record batch v2 (no key, one timestamp, offsets from 0).
pub fn batch(values: &[Bytes], compression: Compression) -> anyhow::Result<Bytes> {
    producer_batch(values, compression, None, false)
}

/// A producer's id, epoch and the batch's base sequence (idempotent or transactional).
#[derive(Clone, Copy, Debug)]
pub struct TxnProducer {
    pub id: i64,
    pub epoch: i16,
    pub sequence: i32,
}

fn producer_batch(
    values: &[Bytes],
    compression: Compression,
    producer: Option<TxnProducer>,
    transactional: bool,
) -> anyhow::Result<Bytes> {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: producer.map_or(-1, |p| p.id),
            producer_epoch: producer.map_or(-1, |p| p.epoch),
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // Offset minus sequence constant: the codec keeps them in one batch.
            sequence: producer.map_or(0, |p| p.sequence) + i as i32,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(v.clone()),
            headers: Default::default(),
        })
        .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(&mut out, records.iter(), &RecordEncodeOptions { version: 2, compression })?;
    Ok(out.freeze())
}

/// Why a request has no answer: the connection failed or the answer did not come in time.
pub type Unanswered = String;

pub struct KafkaConn {
    socket: TcpStream,
    next_id: i32,
    timeout: Duration,
}

/// What a fetch of one partition returned.
pub struct Fetched {
    pub error: i16,
    pub high_watermark: i64,
    /// `(offset, value)` in offset order.
    pub records: Vec<(i64, String)>,
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

impl KafkaConn {
    /// Connects to `addr`; each request gets at most `timeout` for its answer.
    pub async fn connect(addr: &str, timeout: Duration) -> Result<Self, Unanswered> {
        let socket = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| format!("connecting to {addr} timed out"))?
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        socket.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Self { socket, next_id: 1, timeout })
    }

    /// Sends `request` as `api` at `version` and decodes its answer.
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, Unanswered> {
        let correlation_id = self.next_id;
        self.next_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("shale-tests")));
        let mut body = BytesMut::new();
        header.encode(&mut body, api.request_header_version(version)).map_err(|e| e.to_string())?;
        request.encode(&mut body, version).map_err(|e| e.to_string())?;
        let exchange = async {
            self.socket.write_all(&(body.len() as i32).to_be_bytes()).await?;
            self.socket.write_all(&body).await?;
            let mut len = [0u8; 4];
            self.socket.read_exact(&mut len).await?;
            let mut frame = vec![0u8; i32::from_be_bytes(len).max(0) as usize];
            self.socket.read_exact(&mut frame).await?;
            Ok::<_, std::io::Error>(Bytes::from(frame))
        };
        let mut frame = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| format!("{api:?} unanswered after {:?}", self.timeout))?
            .map_err(|e| format!("{api:?}: {e}"))?;
        let response_header =
            ResponseHeader::decode(&mut frame, api.response_header_version(version)).map_err(|e| e.to_string())?;
        if response_header.correlation_id != correlation_id {
            return Err(format!("{api:?} answered as {} (asked {correlation_id})", response_header.correlation_id));
        }
        Resp::decode(&mut frame, version).map_err(|e| e.to_string())
    }

    /// A JoinGroup at `version` as clients send it: when the answer is MEMBER_ID_REQUIRED
    /// (KIP-394), again with the member id it gives. The last answer.
    pub async fn join_group(
        &mut self,
        version: i16,
        request: &JoinGroupRequest,
    ) -> Result<JoinGroupResponse, Unanswered> {
        let answer: JoinGroupResponse = self.call(ApiKey::JoinGroup, version, request).await?;
        if answer.error_code != kafka_protocol::ResponseError::MemberIdRequired.code() {
            return Ok(answer);
        }
        let again = request.clone().with_member_id(answer.member_id);
        self.call(ApiKey::JoinGroup, version, &again).await
    }

    pub async fn create_topic(&mut self, topic: &str, partitions: i32) -> Result<i16, Unanswered> {
        let creatable = CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(-1);
        let request = CreateTopicsRequest::default().with_topics(vec![creatable]).with_timeout_ms(10_000);
        let response: CreateTopicsResponse = self.call(ApiKey::CreateTopics, 5, &request).await?;
        Ok(response.topics[0].error_code)
    }

    /// DeleteRecords of `partition` before offset `before` (a trim): the error code.
    pub async fn delete_records(&mut self, topic: &str, partition: i32, before: i64) -> Result<i16, Unanswered> {
        let trim = DeleteRecordsPartition::default().with_partition_index(partition).with_offset(before);
        let topic = DeleteRecordsTopic::default().with_name(name(topic)).with_partitions(vec![trim]);
        let request = DeleteRecordsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
        let response: DeleteRecordsResponse = self.call(ApiKey::DeleteRecords, 1, &request).await?;
        Ok(response.topics[0].partitions[0].error_code)
    }

    /// Produces `values` as one batch to `partition` with acks=all: the error code and
    /// the base offset.
    pub async fn produce(&mut self, topic: &str, partition: i32, values: &[String]) -> Result<(i16, i64), Unanswered> {
        self.produce_batch(topic, partition, values, None, None).await
    }

    /// `values` as one batch of `producer` (transactional under `transactional_id`), sent
    /// with acks=all: the error code and the base offset.
    async fn produce_batch(
        &mut self,
        topic: &str,
        partition: i32,
        values: &[String],
        producer: Option<TxnProducer>,
        transactional_id: Option<&str>,
    ) -> Result<(i16, i64), Unanswered> {
        let values: Vec<Bytes> = values.iter().map(|v| Bytes::from(v.clone())).collect();
        let batch = producer_batch(&values, Compression::None, producer, transactional_id.is_some())
            .map_err(|e| e.to_string())?;
        let data = PartitionProduceData::default().with_index(partition).with_records(Some(batch));
        let topic = TopicProduceData::default().with_name(name(topic)).with_partition_data(vec![data]);
        let request = ProduceRequest::default()
            .with_transactional_id(transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_string()))))
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![topic]);
        let response: ProduceResponse = self.call(ApiKey::Produce, 9, &request).await?;
        let p = &response.responses[0].partition_responses[0];
        Ok((p.error_code, p.base_offset))
    }

    /// InitProducerId for an idempotent producer, a new one or `producer`'s next epoch
    /// (KIP-360): the error code, producer id and epoch.
    pub async fn init_idempotent(&mut self, producer: Option<TxnProducer>) -> Result<(i16, i64, i16), Unanswered> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1)
            .with_producer_id(ProducerId(producer.map_or(-1, |p| p.id)))
            .with_producer_epoch(producer.map_or(-1, |p| p.epoch));
        let response: InitProducerIdResponse = self.call(ApiKey::InitProducerId, 4, &request).await?;
        Ok((response.error_code, response.producer_id.0, response.producer_epoch))
    }

    /// An idempotent produce of `values` as one batch: the error code and base offset.
    pub async fn produce_idempotent(
        &mut self,
        producer: TxnProducer,
        topic: &str,
        partition: i32,
        values: &[String],
    ) -> Result<(i16, i64), Unanswered> {
        self.produce_batch(topic, partition, values, Some(producer), None).await
    }

    /// InitProducerId for `transactional_id`: the error code, producer id and epoch.
    pub async fn init_transactional(&mut self, transactional_id: &str) -> Result<(i16, i64, i16), Unanswered> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_string(transactional_id.to_string()))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let response: InitProducerIdResponse = self.call(ApiKey::InitProducerId, 4, &request).await?;
        Ok((response.error_code, response.producer_id.0, response.producer_epoch))
    }

    /// AddPartitionsToTxn (version 3): the first error code, 0 when all were added.
    pub async fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer: TxnProducer,
        topic: &str,
        partitions: &[i32],
    ) -> Result<i16, Unanswered> {
        let wanted = AddPartitionsToTxnTopic::default().with_name(name(topic)).with_partitions(partitions.to_vec());
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_string(transactional_id.to_string())))
            .with_v3_and_below_producer_id(ProducerId(producer.id))
            .with_v3_and_below_producer_epoch(producer.epoch)
            .with_v3_and_below_topics(vec![wanted]);
        let response: AddPartitionsToTxnResponse = self.call(ApiKey::AddPartitionsToTxn, 3, &request).await?;
        let codes = response.results_by_topic_v3_and_below.iter().flat_map(|t| &t.results_by_partition);
        Ok(codes.map(|p| p.partition_error_code).find(|&c| c != 0).unwrap_or(0))
    }

    /// A transactional produce of `values` as one batch: the error code and base offset.
    pub async fn produce_transactional(
        &mut self,
        transactional_id: &str,
        producer: TxnProducer,
        topic: &str,
        partition: i32,
        values: &[String],
    ) -> Result<(i16, i64), Unanswered> {
        self.produce_batch(topic, partition, values, Some(producer), Some(transactional_id)).await
    }

    /// AddOffsetsToTxn (version 3): `group`'s offsets join the producer's transaction; the
    /// error code.
    pub async fn add_offsets(
        &mut self,
        transactional_id: &str,
        producer: TxnProducer,
        group: &str,
    ) -> Result<i16, Unanswered> {
        let request = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(transactional_id.to_string())))
            .with_producer_id(ProducerId(producer.id))
            .with_producer_epoch(producer.epoch)
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())));
        let response: AddOffsetsToTxnResponse = self.call(ApiKey::AddOffsetsToTxn, 3, &request).await?;
        Ok(response.error_code)
    }

    /// EndTxn (version 3), committing or aborting: the error code.
    pub async fn end_transaction(
        &mut self,
        transactional_id: &str,
        producer: TxnProducer,
        commit: bool,
    ) -> Result<i16, Unanswered> {
        let request = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(transactional_id.to_string())))
            .with_producer_id(ProducerId(producer.id))
            .with_producer_epoch(producer.epoch)
            .with_committed(commit);
        let response: EndTxnResponse = self.call(ApiKey::EndTxn, 3, &request).await?;
        Ok(response.error_code)
    }

    /// One fetch of `partition` from `offset` (no waiting), up to 1 MiB.
    pub async fn fetch(&mut self, topic: &str, partition: i32, offset: i64) -> Result<Fetched, Unanswered> {
        let wanted = FetchPartition::default()
            .with_partition(partition)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(1 << 20);
        let topic = FetchTopic::default().with_topic(name(topic)).with_partitions(vec![wanted]);
        let request = FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_min_bytes(0)
            .with_max_wait_ms(0)
            .with_topics(vec![topic]);
        let response: FetchResponse = self.call(ApiKey::Fetch, 12, &request).await?;
        let answer = &response.responses[0].partitions[0];
        let mut records = Vec::new();
        if let Some(mut bytes) = answer.records.clone() {
            for set in RecordBatchDecoder::decode_all(&mut bytes).map_err(|e| e.to_string())? {
                for r in set.records {
                    let value = r.value.map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default();
                    records.push((r.offset, value));
                }
            }
        }
        Ok(Fetched { error: answer.error_code, high_watermark: answer.high_watermark, records })
    }

    /// The partition's latest offset (ListOffsets -1): error code and offset.
    pub async fn latest(&mut self, topic: &str, partition: i32) -> Result<(i16, i64), Unanswered> {
        self.list_offsets(topic, partition, -1, 5).await
    }

    /// ListOffsets of `timestamp` (or a special one: -1 latest, -2 earliest, ...) at
    /// `version`: error code and offset.
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
        version: i16,
    ) -> Result<(i16, i64), Unanswered> {
        let p = ListOffsetsPartition::default().with_partition_index(partition).with_timestamp(timestamp);
        let topic = ListOffsetsTopic::default().with_name(name(topic)).with_partitions(vec![p]);
        let request = ListOffsetsRequest::default().with_topics(vec![topic]);
        let response: ListOffsetsResponse = self.call(ApiKey::ListOffsets, version, &request).await?;
        let p = &response.topics[0].partitions[0];
        Ok((p.error_code, p.offset))
    }

    /// `group`'s coordinator as `host:port`, or the error code.
    pub async fn coordinator(&mut self, group: &str) -> Result<Result<String, i16>, Unanswered> {
        let request = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.to_string()));
        let response: FindCoordinatorResponse = self.call(ApiKey::FindCoordinator, 3, &request).await?;
        if response.error_code != 0 {
            return Ok(Err(response.error_code));
        }
        Ok(Ok(format!("{}:{}", response.host, response.port)))
    }

    /// Commits `offset` for `group` on `partition` as a consumer that assigns its own
    /// partitions (no member, generation -1): the error code.
    pub async fn commit(&mut self, group: &str, topic: &str, partition: i32, offset: i64) -> Result<i16, Unanswered> {
        let p = OffsetCommitRequestPartition::default().with_partition_index(partition).with_committed_offset(offset);
        let topic = OffsetCommitRequestTopic::default().with_name(name(topic)).with_partitions(vec![p]);
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![topic]);
        let response: OffsetCommitResponse = self.call(ApiKey::OffsetCommit, 8, &request).await?;
        Ok(response.topics[0].partitions[0].error_code)
    }

    /// `group`'s committed offset on `partition` (-1 for none): error code and offset.
    pub async fn committed(&mut self, group: &str, topic: &str, partition: i32) -> Result<(i16, i64), Unanswered> {
        let wanted = OffsetFetchRequestTopic::default().with_name(name(topic)).with_partition_indexes(vec![partition]);
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_topics(Some(vec![wanted]));
        let response: OffsetFetchResponse = self.call(ApiKey::OffsetFetch, 7, &request).await?;
        if response.error_code != 0 {
            return Ok((response.error_code, -1));
        }
        let p = &response.topics[0].partitions[0];
        Ok((p.error_code, p.committed_offset))
    }
}
