//! ListOffsets (earliest, latest, by timestamp, max timestamp) and DeleteRecords, which
//! trims: it appends S2's `trim` command record, so the trim takes one offset at the
//! tail that fetches step over.

use bytes::Bytes;
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;
use shale_gateway::AppendInput;
use shale_proto::{Header, Record};
use shale_reader::{ReadLimits, ReadRequest, ReadStart};
use shale_service::ServiceError;

use crate::error::code;
use crate::topics::stream_of;
use crate::Kafka;

/// ListOffsets' special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// A sequence number as a Kafka offset.
pub(crate) fn offset(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// The first record at or after `start` (and the stream's tail).
async fn first_from(kafka: &Kafka, stream: &str, start: ReadStart) -> Result<(Option<(u64, u64)>, u64), ServiceError> {
    let request = ReadRequest {
        basin: kafka.config.basin.clone(),
        stream: stream.to_string(),
        start,
        limits: ReadLimits { count: Some(1), bytes: None },
        until: None,
        clamp: true,
        wait: std::time::Duration::ZERO,
    };
    let output = kafka.service.read(&request).await?;
    Ok((output.records.first().map(|r| (r.seq_num, r.timestamp)), output.tail.seq_num))
}

/// `(offset, timestamp)` ListOffsets answers for `timestamp` on `stream`.
async fn lookup(kafka: &Kafka, stream: &str, timestamp: i64) -> Result<(i64, i64), ServiceError> {
    match timestamp {
        LATEST => Ok((offset(kafka.service.check_tail(&kafka.config.basin, stream).await?.seq_num), -1)),
        EARLIEST => {
            let (first, tail) = first_from(kafka, stream, ReadStart::SeqNum(0)).await?;
            Ok((offset(first.map_or(tail, |(seq, _)| seq)), -1))
        }
        MAX_TIMESTAMP => {
            // Timestamps never decrease within a stream: the last record has the largest.
            let (last, _) = first_from(kafka, stream, ReadStart::TailOffset(1)).await?;
            Ok(last.map_or((-1, -1), |(seq, ts)| (offset(seq), offset(ts))))
        }
        t if t >= 0 => {
            let (first, _) = first_from(kafka, stream, ReadStart::Timestamp(t as u64)).await?;
            Ok(first.map_or((-1, -1), |(seq, ts)| (offset(seq), offset(ts))))
        }
        _ => Err(ServiceError::bad(format!("timestamp {timestamp} is not served"))),
    }
}

pub async fn list(kafka: &Kafka, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let mut topics = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::new();
        for p in topic.partitions {
            let answer = ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
            partitions.push(match lookup(kafka, &stream_of(&name, p.partition_index), p.timestamp).await {
                Ok((offset, timestamp)) => answer.with_offset(offset).with_timestamp(timestamp),
                Err(e) => answer.with_error_code(code(&e)).with_offset(-1).with_timestamp(-1),
            });
        }
        topics.push(ListOffsetsTopicResponse::default().with_name(topic.name).with_partitions(partitions));
    }
    ListOffsetsResponse::default().with_topics(topics)
}

/// Trims `stream` below `offset` (-1: the high watermark); the new low watermark.
async fn trim(kafka: &Kafka, stream: &str, offset: i64) -> Result<i64, (i16, String)> {
    let basin = &kafka.config.basin;
    let tail = kafka.service.check_tail(basin, stream).await.map_err(|e| (code(&e), e.to_string()))?.seq_num;
    let point = match offset {
        -1 => tail,
        o if o >= 0 && (o as u64) <= tail => o as u64,
        o => {
            return Err((
                ResponseError::OffsetOutOfRange.code(),
                format!("offset {o} is past the high watermark {tail}"),
            ))
        }
    };
    let command = Record {
        timestamp: None,
        headers: vec![Header { name: Bytes::new(), value: Bytes::from_static(b"trim") }].into(),
        body: Bytes::copy_from_slice(&point.to_be_bytes()),
    };
    let input =
        AppendInput { basin: basin.clone(), stream: stream.to_string(), records: vec![command], ..Default::default() };
    kafka.service.append(input).await.map_err(|e| (code(&e), e.to_string()))?;
    Ok(self::offset(point))
}

pub async fn delete_records(kafka: &Kafka, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut topics = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::new();
        for p in topic.partitions {
            let answer = DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
            partitions.push(match trim(kafka, &stream_of(&name, p.partition_index), p.offset).await {
                Ok(low) => answer.with_low_watermark(low),
                Err((error, message)) => {
                    tracing::debug!(topic = %name, partition = p.partition_index, %message, "kafka delete records refused");
                    answer.with_error_code(error).with_low_watermark(-1)
                }
            });
        }
        topics.push(DeleteRecordsTopicResult::default().with_name(topic.name).with_partitions(partitions));
    }
    DeleteRecordsResponse::default().with_topics(topics)
}
