//! Translations between `shale.v1` messages and domain types.

use shale_gateway::AppendInput;
use shale_metadata_contract::{AppendAck, BasinConfig, Position, RetentionPolicy, StreamConfig, TimestampingConfig};
use shale_proto::grpc as pb;
use shale_proto::{SequencedRecord, TimestampingMode};
use shale_reader::{ReadLimits, ReadRequest, ReadStart};

use shale_service::ServiceError;
use shale_service::{producer_stamp, ConsumerView};

pub fn position(p: Position) -> pb::StreamPosition {
    pb::StreamPosition { seq_num: p.seq_num, timestamp: p.timestamp }
}

pub fn ack(ack: AppendAck) -> pb::AppendAck {
    pb::AppendAck { start: Some(position(ack.start)), end: Some(position(ack.end)), tail: Some(position(ack.tail)) }
}

pub fn append_input(request: pb::AppendRequest) -> Result<AppendInput, ServiceError> {
    Ok(AppendInput {
        basin: request.basin,
        stream: request.stream,
        records: request
            .records
            .into_iter()
            .map(|r| {
                shale_proto::Record::from_parts(r.timestamp, r.headers.into_iter().map(|h| (h.name, h.value)), r.body)
            })
            .collect(),
        match_seq_num: request.match_seq_num,
        fencing_token: request.fencing_token,
        producer: producer_stamp(request.producer_id, request.producer_seq)?,
        ..Default::default()
    })
}

pub fn record(r: &SequencedRecord) -> pb::SequencedRecord {
    pb::SequencedRecord {
        seq_num: r.seq_num,
        timestamp: r.timestamp,
        headers: r.headers.iter().map(|h| pb::Header { name: h.name.clone(), value: h.value.clone() }).collect(),
        body: r.body.clone(),
    }
}

pub fn read_response(records: &[SequencedRecord], tail: Position) -> pb::ReadResponse {
    pb::ReadResponse { records: records.iter().map(record).collect(), tail: Some(position(tail)) }
}

pub fn read_request(request: pb::ReadRequest) -> ReadRequest {
    let start = match request.start {
        None => ReadStart::default(),
        Some(pb::read_request::Start::SeqNum(seq)) => ReadStart::SeqNum(seq),
        Some(pb::read_request::Start::Timestamp(ts)) => ReadStart::Timestamp(ts),
        Some(pb::read_request::Start::TailOffset(offset)) => ReadStart::TailOffset(offset),
    };
    ReadRequest {
        basin: request.basin,
        stream: request.stream,
        start,
        limits: ReadLimits { count: request.count, bytes: request.bytes, at_least_one: false },
        until: request.until,
        clamp: request.clamp,
        wait: std::time::Duration::from_secs(u64::from(request.wait_secs)),
    }
}

pub fn basin_config(config: Option<pb::BasinConfig>) -> BasinConfig {
    let config = config.unwrap_or_default();
    BasinConfig {
        default_stream_config: None,
        create_stream_on_append: config.create_stream_on_append,
        create_stream_on_read: config.create_stream_on_read,
        // The table tier is configured over the HTTP API (a Shale extension of S2's JSON).
        tables: None,
    }
}

pub fn stream_config(config: Option<pb::StreamConfig>) -> Result<StreamConfig, ServiceError> {
    let Some(config) = config else { return Ok(StreamConfig::default()) };
    let mode = match pb::TimestampingMode::try_from(config.timestamping_mode) {
        Ok(pb::TimestampingMode::Unspecified) => None,
        Ok(pb::TimestampingMode::ClientPrefer) => Some(TimestampingMode::ClientPrefer),
        Ok(pb::TimestampingMode::ClientRequire) => Some(TimestampingMode::ClientRequire),
        Ok(pb::TimestampingMode::Arrival) => Some(TimestampingMode::Arrival),
        Err(_) => return Err(ServiceError::bad(format!("unknown timestamping mode {}", config.timestamping_mode))),
    };
    let timestamping = (mode.is_some() || config.timestamping_uncapped)
        .then_some(TimestampingConfig { mode, uncapped: Some(config.timestamping_uncapped) });
    Ok(StreamConfig {
        timestamping,
        retention_policy: config.retention_age_secs.map(RetentionPolicy::Age),
        ..StreamConfig::default()
    })
}

pub fn consumer(view: ConsumerView) -> pb::Consumer {
    pb::Consumer {
        name: view.position.name,
        seq_num: view.position.seq_num,
        updated_at_ms: view.position.updated_ms,
        lag: Some(pb::ConsumerLag { records: view.lag.records, bytes: view.lag.bytes, seconds: view.lag.seconds }),
    }
}
