//! ListOffsets (earliest, latest, by timestamp, max timestamp, earliest local, latest
//! tiered) and DeleteRecords, which trims: it appends S2's `trim` command record, so the
//! trim takes one offset at the tail that fetches step over.

use bytes::Bytes;
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;
use shale_gateway::AppendInput;
use shale_proto::{Header, Record};
use shale_reader::{ReadLimits, ReadOutput, ReadRequest, ReadStart};
use shale_service::ServiceError;

use crate::error::code;
use crate::records::is_shown;
use crate::topics::stream_of;
use crate::Kafka;

/// ListOffsets' special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
/// The start of the log a broker keeps locally (KIP-405). A partition's log is all in
/// the object store, none of it local to a broker or apart from the rest: its earliest.
const EARLIEST_LOCAL: i64 = -4;
/// The last offset copied to remote storage (KIP-1005). Nothing is: -1, as Kafka answers
/// for a topic without remote storage. (The table tier keeps copies of records, read
/// through S2's API; it is no part of the Kafka log.)
const LATEST_TIERED: i64 = -5;

/// The first ListOffsets version that may ask for `timestamp`: an earlier one asking is
/// UNSUPPORTED_VERSION, as Kafka's brokers answer it.
fn first_version_of(timestamp: i64) -> i16 {
    match timestamp {
        MAX_TIMESTAMP => 7,
        EARLIEST_LOCAL => 8,
        LATEST_TIERED => 9,
        _ => 0,
    }
}

/// A sequence number as a Kafka offset.
pub(crate) fn offset(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// How far back from the tail the max timestamp's record is looked for when the last
/// record is a command (a trim or a fence appends one; several in a row are rare).
const COMMANDS_LOOKED_PAST: u64 = 64;

/// Up to `count` records from `start` (the records, then the stream's tail).
async fn read(kafka: &Kafka, stream: &str, start: ReadStart, count: u64) -> Result<ReadOutput, ServiceError> {
    let request = ReadRequest {
        basin: kafka.config.basin.clone(),
        stream: stream.to_string(),
        start,
        limits: ReadLimits { count: Some(count), ..ReadLimits::default() },
        until: None,
        clamp: true,
        wait: std::time::Duration::ZERO,
    };
    kafka.service.read(&request).await
}

/// The first record at or after `start` (and the stream's tail).
async fn first_from(kafka: &Kafka, stream: &str, start: ReadStart) -> Result<(Option<(u64, u64)>, u64), ServiceError> {
    let output = read(kafka, stream, start, 1).await?;
    Ok((output.records.first().map(|r| (r.seq_num, r.timestamp)), output.tail.seq_num))
}

/// The last record Kafka consumers see: timestamps never decrease within a stream, so it
/// has the largest. S2's command records are stepped over one at a time (a record may
/// be large, so no more than one is held), within the last [`COMMANDS_LOOKED_PAST`].
async fn last_shown(kafka: &Kafka, stream: &str) -> Result<Option<(u64, u64)>, ServiceError> {
    for back in 1..=COMMANDS_LOOKED_PAST {
        let output = read(kafka, stream, ReadStart::TailOffset(back), 1).await?;
        match output.records.first() {
            Some(record) if is_shown(record) => return Ok(Some((record.seq_num, record.timestamp))),
            // Past the first record (or none at all).
            Some(record) if output.tail.seq_num.saturating_sub(record.seq_num) < back => return Ok(None),
            Some(_) => {}
            None => return Ok(None),
        }
    }
    Ok(None)
}

/// `(offset, timestamp)` ListOffsets answers for `timestamp` on `stream`.
async fn lookup(kafka: &Kafka, stream: &str, timestamp: i64) -> Result<(i64, i64), ServiceError> {
    match timestamp {
        LATEST => Ok((offset(kafka.service.check_tail(&kafka.config.basin, stream).await?.seq_num), -1)),
        EARLIEST | EARLIEST_LOCAL => {
            let (first, tail) = first_from(kafka, stream, ReadStart::SeqNum(0)).await?;
            Ok((offset(first.map_or(tail, |(seq, _)| seq)), -1))
        }
        MAX_TIMESTAMP => {
            let last = last_shown(kafka, stream).await?;
            Ok(last.map_or((-1, -1), |(seq, ts)| (offset(seq), offset(ts))))
        }
        LATEST_TIERED => Ok((-1, -1)),
        t if t >= 0 => {
            let (first, _) = first_from(kafka, stream, ReadStart::Timestamp(t as u64)).await?;
            Ok(first.map_or((-1, -1), |(seq, ts)| (offset(seq), offset(ts))))
        }
        _ => Err(ServiceError::bad(format!("timestamp {timestamp} is not served"))),
    }
}

pub async fn list(kafka: &Kafka, request: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let mut topics = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::new();
        for p in topic.partitions {
            let answer = ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
            if version < first_version_of(p.timestamp) {
                let unsupported = ResponseError::UnsupportedVersion.code();
                partitions.push(answer.with_error_code(unsupported).with_offset(-1).with_timestamp(-1));
                continue;
            }
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
