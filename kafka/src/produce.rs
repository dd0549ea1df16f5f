//! Produce: each partition's batch becomes one append to its stream, submitted to the
//! gateway as soon as the request is read (so a request's partitions share segments,
//! and a connection's requests are sequenced in the order they arrived), and answered
//! after their commits. acks=1 and acks=all mean the same here: an ack is always after
//! the commit. An idempotent producer's batch carries its producer id, epoch and base
//! sequence to metadata's producer state, which applies a retried batch once. A
//! transactional producer's batch is staged in its open transaction (`transactions`):
//! acknowledged once durable, with no offset yet (base offset -1), visible when the
//! transaction commits.

use bytes::Bytes;
use futures::future::{join_all, BoxFuture};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_gateway::{AppendInput, BatchLimits, PendingAppend};
use shale_metadata_contract::{ProducerStamp, TransactionStamp};
use shale_proto::record::kafka_key;
use shale_proto::ErrorCode;
use shale_service::ServiceError;

use crate::in_flight::InFlight;
use crate::records::{decode_produced, ProducedBatch, Refused};
use crate::topic_cache::TopicTraits;
use crate::topics::{self, stream_of, MAX_MESSAGE_BYTES};
use crate::Kafka;

/// Shale's producer id for Kafka producer `id` at `epoch`: a new epoch starts afresh.
pub fn producer_name(id: i64, epoch: i16) -> String {
    format!("kafka-{id}-{epoch}")
}

/// The Kafka producer id and epoch a [`producer_name`] names; `None` for the producers
/// of S2's API.
pub fn producer_of_name(name: &str) -> Option<(i64, i16)> {
    let (id, epoch) = name.strip_prefix("kafka-")?.rsplit_once('-')?;
    Some((id.parse().ok()?, epoch.parse().ok()?))
}

/// Submits every partition's batch of `request`, in the order the request lists them;
/// the returned future awaits their commits and gives the response.
pub async fn submit(
    kafka: &Kafka,
    request: ProduceRequest,
    in_flight: &InFlight,
) -> BoxFuture<'static, ProduceResponse> {
    let acks_valid = matches!(request.acks, -1..=1);
    let transactional_id = request.transactional_id.as_ref().map(|id| id.0.to_string());
    let mut topics: Vec<(TopicName, Vec<Submitted>)> = Vec::new();
    for topic in request.topic_data {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for p in topic.partition_data {
            let response = PartitionProduceResponse::default().with_index(p.index).with_log_append_time_ms(-1);
            let submitted = if acks_valid {
                let bytes = p.records.unwrap_or_default();
                let batch = Batch {
                    topic: &name,
                    partition: p.index,
                    bytes: &bytes,
                    transactional_id: transactional_id.as_deref(),
                };
                match submit_partition(kafka, batch, in_flight).await {
                    Ok((ack, arrival, staged)) => Submitted::Pending { response, ack, arrival, staged },
                    Err((error, message)) => Submitted::Answered(failed(response, error, message)),
                }
            } else {
                Submitted::Answered(failed(
                    response,
                    ResponseError::InvalidRequiredAcks,
                    "acks must be -1, 0 or 1".into(),
                ))
            };
            partitions.push(submitted);
        }
        topics.push((topic.name, partitions));
    }
    Box::pin(async move {
        let mut responses = Vec::with_capacity(topics.len());
        for (name, partitions) in topics {
            let answers = join_all(partitions.into_iter().map(Submitted::answer)).await;
            responses.push(TopicProduceResponse::default().with_name(name).with_partition_responses(answers));
        }
        ProduceResponse::default().with_responses(responses)
    })
}

/// One partition of a produce request once submitted.
enum Submitted {
    /// Refused before it reached the gateway.
    Answered(PartitionProduceResponse),
    /// In the gateway; `arrival` when the topic stamps records with their append time,
    /// `staged` when the batch is staged in a transaction (it has no offset yet).
    Pending { response: PartitionProduceResponse, ack: PendingAppend, arrival: bool, staged: bool },
}

/// One partition's batch of a produce request.
#[derive(Clone, Copy)]
struct Batch<'a> {
    topic: &'a str,
    partition: i32,
    bytes: &'a Bytes,
    transactional_id: Option<&'a str>,
}

impl Submitted {
    async fn answer(self) -> PartitionProduceResponse {
        let (response, ack, arrival, staged) = match self {
            Submitted::Answered(response) => return response,
            Submitted::Pending { response, ack, arrival, staged } => (response, ack, arrival, staged),
        };
        match ack.await.map_err(ServiceError::from) {
            Ok(acks) if staged && !acks.is_empty() => response.with_base_offset(-1),
            Ok(acks) => match acks.first() {
                Some(ack) => {
                    let base = i64::try_from(ack.start.seq_num).unwrap_or(i64::MAX);
                    // A LogAppendTime topic's records all carry their arrival time;
                    // CreateTime topics answer -1 as Kafka does.
                    let append_time = if arrival { i64::try_from(ack.start.timestamp).unwrap_or(-1) } else { -1 };
                    response.with_base_offset(base).with_log_append_time_ms(append_time)
                }
                None => failed(response, ResponseError::UnknownServerError, "the commit answered no ack".into()),
            },
            Err(e) => failed(response, produce_code(&e), e.to_string()),
        }
    }
}

/// Kafka's code for a failed produce: a fenced transactional producer's batch gets
/// INVALID_PRODUCER_EPOCH, as Kafka's partition leaders answer it.
fn produce_code(error: &ServiceError) -> ResponseError {
    match crate::error::code_of(error) {
        ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        code => code,
    }
}

fn failed(response: PartitionProduceResponse, error: ResponseError, message: String) -> PartitionProduceResponse {
    response.with_error_code(error.code()).with_base_offset(-1).with_error_message(Some(StrBytes::from_string(message)))
}

/// Submits one partition's batch: its pending ack, whether the topic takes
/// LogAppendTime, and whether the batch is staged in a transaction. A topic missing here
/// is created first when auto-creation is on.
async fn submit_partition(
    kafka: &Kafka,
    batch: Batch<'_>,
    in_flight: &InFlight,
) -> Result<(PendingAppend, bool, bool), (ResponseError, String)> {
    let Batch { topic, partition, .. } = batch;
    let input = decode_partition(kafka, batch)?;
    let staged = input.transaction.is_some();
    let traits = match kafka.topic_configs.traits(kafka, topic).await {
        Some(traits) => traits,
        None if kafka.config.auto_create_topics => {
            topics::auto_create(kafka, topic, partition).await?;
            kafka.topic_configs.traits(kafka, topic).await.unwrap_or_default()
        }
        // The append itself answers that the partition does not exist.
        None => TopicTraits::default(),
    };
    if traits.compacted && input.records.iter().any(|r| kafka_key(&r.headers).is_none()) {
        return Err((ResponseError::InvalidRecord, "Compacted topic cannot accept message without key".into()));
    }
    let arrival = traits.arrival;
    let service_error = |e: ServiceError| (crate::error::code_of(&e), e.to_string());
    match kafka.service.submit_append(input) {
        Ok(ack) => Ok((ack, arrival, staged)),
        Err(e) if e.code() == ErrorCode::Overloaded => {
            // The gateway holds as many bytes as it may: wait for this connection's
            // earlier requests to commit, then submit once more (decoding the batch
            // again is cheaper than keeping a copy of every input for this rare case).
            in_flight.wait_for_earlier().await;
            let input = decode_partition(kafka, batch)?;
            kafka.service.submit_append(input).map(|ack| (ack, arrival, staged)).map_err(service_error)
        }
        Err(e) => Err(service_error(e)),
    }
}

/// One partition's batch checked and decoded into its append.
fn decode_partition(kafka: &Kafka, batch: Batch<'_>) -> Result<AppendInput, (ResponseError, String)> {
    let Batch { topic, partition, bytes, transactional_id } = batch;
    if let Err(message) = topics::valid_topic(topic) {
        return Err((ResponseError::InvalidTopicException, message));
    }
    if bytes.len() as u64 > MAX_MESSAGE_BYTES {
        let message = format!("a batch of {} bytes is over max.message.bytes ({MAX_MESSAGE_BYTES})", bytes.len());
        return Err((ResponseError::MessageTooLarge, message));
    }
    let produced = decode_produced(bytes.clone(), &KAFKA_BATCH_LIMITS).map_err(|refused| match refused {
        Refused::Corrupt(why) => (ResponseError::CorruptMessage, why),
        Refused::Invalid(why) => (ResponseError::InvalidRecord, why),
        Refused::TooLarge(why) => (ResponseError::MessageTooLarge, why),
    })?;
    let transaction = match (produced.transactional, transactional_id, produced.producer) {
        (false, _, _) => None,
        (true, Some(id), Some((producer_id, epoch, _))) => {
            Some(TransactionStamp { transactional_id: id.to_string(), producer_id, epoch })
        }
        (true, None, _) => {
            return Err((
                ResponseError::TransactionalIdNotFound,
                "a transactional batch needs the request's transactional id".into(),
            ));
        }
        (true, Some(_), None) => {
            return Err((ResponseError::InvalidProducerIdMapping, "a transactional batch needs a producer id".into()));
        }
    };
    Ok(append_input(kafka, topic, partition, produced, transaction))
}

fn append_input(
    kafka: &Kafka,
    topic: &str,
    partition: i32,
    batch: ProducedBatch,
    transaction: Option<TransactionStamp>,
) -> AppendInput {
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
        transaction,
        limits: KAFKA_BATCH_LIMITS,
    }
}

/// A Kafka batch may hold more records than S2's 1000 (librdkafka sends up to 10,000)
/// and, decompressed, more than 1 MiB: up to this much goes into one append.
pub const KAFKA_BATCH_LIMITS: BatchLimits = BatchLimits { records: 200_000, metered_bytes: 8 << 20 };

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_producer_name_gives_back_its_id_and_epoch() {
        assert_eq!(producer_of_name(&producer_name(1 << 40, 3)), Some((1 << 40, 3)));
        assert_eq!(producer_of_name("my-s2-producer"), None);
        assert_eq!(producer_of_name("kafka-x-1"), None);
    }
}
