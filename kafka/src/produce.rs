//! Produce: each partition's batch becomes one atomic append to its stream, all of a
//! request's partitions appended at once (so they share segments), answered after their
//! commits. acks=1 and acks=all mean the same here: an ack is always after the commit.
//! An idempotent producer's batch carries its producer id, epoch and base sequence to
//! metadata's producer state, which applies a retried batch once.

use bytes::Bytes;
use futures::future::join_all;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_gateway::{AppendInput, BatchLimits};
use shale_metadata_contract::{MetadataError, ProducerStamp};
use shale_service::ServiceError;

use crate::records::{decode_produced, ProducedBatch, Refused};
use crate::topics::{self, stream_of, MAX_MESSAGE_BYTES};
use crate::Kafka;

/// Shale's producer id for Kafka producer `id` at `epoch`: a new epoch starts afresh.
pub fn producer_name(id: i64, epoch: i16) -> String {
    format!("kafka-{id}-{epoch}")
}

pub async fn produce(kafka: &Kafka, request: ProduceRequest) -> ProduceResponse {
    let acks_valid = matches!(request.acks, -1..=1);
    let mut topics = Vec::new();
    for topic in request.topic_data {
        let name = topic.name.0.to_string();
        let partitions = topic.partition_data.into_iter().map(|p| {
            let name = name.clone();
            async move {
                let response = PartitionProduceResponse::default().with_index(p.index).with_log_append_time_ms(-1);
                if !acks_valid {
                    return failed(response, ResponseError::InvalidRequiredAcks, "acks must be -1, 0 or 1".into());
                }
                let bytes = p.records.unwrap_or_default();
                match produce_partition(kafka, &name, p.index, &bytes).await {
                    Ok((base_offset, append_time)) => {
                        response.with_base_offset(base_offset).with_log_append_time_ms(append_time.unwrap_or(-1))
                    }
                    Err((error, message)) => failed(response, error, message),
                }
            }
        });
        let partition_responses = join_all(partitions).await;
        topics
            .push(TopicProduceResponse::default().with_name(topic.name).with_partition_responses(partition_responses));
    }
    ProduceResponse::default().with_responses(topics)
}

fn failed(response: PartitionProduceResponse, error: ResponseError, message: String) -> PartitionProduceResponse {
    response.with_error_code(error.code()).with_base_offset(-1).with_error_message(Some(StrBytes::from_string(message)))
}

/// Appends one partition's batch: its base offset, and its append time for a topic that
/// uses LogAppendTime.
async fn produce_partition(
    kafka: &Kafka,
    topic: &str,
    partition: i32,
    bytes: &Bytes,
) -> Result<(i64, Option<i64>), (ResponseError, String)> {
    if let Err(message) = topics::valid_topic(topic) {
        return Err((ResponseError::InvalidTopicException, message));
    }
    if bytes.len() as u64 > MAX_MESSAGE_BYTES {
        let message = format!("a batch of {} bytes is over max.message.bytes ({MAX_MESSAGE_BYTES})", bytes.len());
        return Err((ResponseError::MessageTooLarge, message));
    }
    let batch = decode_produced(bytes).map_err(|refused| match refused {
        Refused::Corrupt(why) => (ResponseError::CorruptMessage, why),
        Refused::Invalid(why) => (ResponseError::InvalidRecord, why),
        Refused::TooLarge(why) => (ResponseError::MessageTooLarge, why),
    })?;
    let metered: u64 = batch.records.iter().map(shale_proto::Record::metered_bytes).sum();
    if metered > KAFKA_BATCH_LIMITS.metered_bytes || batch.records.len() > KAFKA_BATCH_LIMITS.records {
        let message = format!(
            "a batch of {} records and {metered} bytes decompressed is over the limit of {} records and {} bytes",
            batch.records.len(),
            KAFKA_BATCH_LIMITS.records,
            KAFKA_BATCH_LIMITS.metered_bytes
        );
        return Err((ResponseError::MessageTooLarge, message));
    }
    if batch.transactional {
        return Err((ResponseError::InvalidTxnState, "transactions are not served yet".into()));
    }
    let input = append_input(kafka, topic, partition, batch);
    let ack = match kafka.service.append(input.clone()).await {
        Err(e) if is_missing_stream(&e) && kafka.config.auto_create_topics => {
            topics::auto_create(kafka, topic, partition).await?;
            kafka.service.append(input).await
        }
        other => other,
    };
    let ack = ack.map_err(|e| (crate::error::code_of(&e), e.to_string()))?;
    let base = i64::try_from(ack.start.seq_num).unwrap_or(i64::MAX);
    // A LogAppendTime topic's records all carry their arrival time; CreateTime topics
    // answer -1 as Kafka does.
    let append_time = input_is_arrival(kafka, topic).await.then_some(ack.start.timestamp as i64);
    Ok((base, append_time))
}

fn append_input(kafka: &Kafka, topic: &str, partition: i32, batch: ProducedBatch) -> AppendInput {
    AppendInput {
        basin: kafka.config.basin.clone(),
        stream: stream_of(topic, partition),
        records: batch.records,
        match_seq_num: None,
        fencing_token: None,
        producer: batch.producer.map(|(id, epoch, seq)| ProducerStamp {
            id: producer_name(id, epoch),
            seq: u64::try_from(seq).unwrap_or_default(),
            counts_records: true,
        }),
        limits: KAFKA_BATCH_LIMITS,
    }
}

/// A Kafka batch may hold more records than S2's 1000 (librdkafka sends up to 10,000)
/// and, decompressed, more than 1 MiB: up to this much goes into one append.
pub const KAFKA_BATCH_LIMITS: BatchLimits = BatchLimits { records: 200_000, metered_bytes: 8 << 20 };

pub fn is_missing_stream(error: &ServiceError) -> bool {
    matches!(error.metadata(), Some(MetadataError::StreamNotFound { .. }))
}

/// Whether the topic's partitions take arrival timestamps (LogAppendTime). Asked only
/// of the first partition, whose config every partition shares.
async fn input_is_arrival(kafka: &Kafka, topic: &str) -> bool {
    kafka.topic_configs.is_arrival(kafka, topic).await
}
