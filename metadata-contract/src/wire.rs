//! Conversions between the metadata model and `shale.metadata.v1` messages, and the
//! error encoding both ends share.

use shale_proto::metadata_rpc as pb;
use shale_proto::Command;

use crate::{
    AppendAck, CommitAppend, CommitRequest, CommitUnit, IndexEntry, MetadataError, PipelinePosition, Position,
    ProducerStamp, TailUpdate, TransactionStamp, UnitOutcome,
};

pub fn commit_request_to_wire(request: &CommitRequest) -> pb::Segment {
    pb::Segment {
        segment_id: request.segment_id.to_be_bytes().to_vec(),
        units: request
            .units
            .iter()
            .map(|unit| pb::CommitUnit { appends: unit.appends.iter().map(append_to_wire).collect() })
            .collect(),
    }
}

fn append_to_wire(append: &CommitAppend) -> pb::CommitAppend {
    pb::CommitAppend {
        basin: append.basin.clone(),
        stream: append.stream.clone(),
        offset: append.offset,
        len: append.len,
        arrival: append.arrival,
        client_timestamps: append.client_timestamps.iter().map(|t| t.unwrap_or(0)).collect(),
        timestamp_given: append.client_timestamps.iter().map(Option::is_some).collect(),
        commands: append
            .commands
            .iter()
            .map(|command| pb::Command {
                command: Some(match command {
                    Command::Fence(token) => pb::command::Command::Fence(token.clone()),
                    Command::Trim(seq) => pb::command::Command::Trim(*seq),
                }),
            })
            .collect(),
        match_seq_num: append.match_seq_num,
        fencing_token: append.fencing_token.clone(),
        metered_bytes: append.metered_bytes,
        producer: append.producer.as_ref().map(|p| pb::ProducerStamp {
            id: p.id.clone(),
            seq: p.seq,
            counts_records: p.counts_records,
        }),
        transaction: append.transaction.as_ref().map(|t| pb::TransactionStamp {
            transactional_id: t.transactional_id.clone(),
            producer_id: t.producer_id,
            epoch: i32::from(t.epoch),
        }),
    }
}

/// A 16-byte big-endian id (segment ULIDs, pipeline ids).
pub(crate) fn id_from_wire(bytes: &[u8], what: &str) -> Result<u128, MetadataError> {
    let id: [u8; 16] =
        bytes.try_into().map_err(|_| MetadataError::InvalidArgument(format!("{what} must be 16 bytes")))?;
    Ok(u128::from_be_bytes(id))
}

pub fn commit_request_from_wire(segment: pb::Segment) -> Result<CommitRequest, MetadataError> {
    let segment_id = id_from_wire(&segment.segment_id, "segment id")?;
    let units = segment
        .units
        .into_iter()
        .map(|unit| {
            Ok(CommitUnit { appends: unit.appends.into_iter().map(append_from_wire).collect::<Result<_, _>>()? })
        })
        .collect::<Result<_, MetadataError>>()?;
    Ok(CommitRequest { segment_id, units })
}

fn append_from_wire(append: pb::CommitAppend) -> Result<CommitAppend, MetadataError> {
    if append.client_timestamps.len() != append.timestamp_given.len() {
        return Err(MetadataError::InvalidArgument("one timestamp_given flag per client timestamp".into()));
    }
    let commands = append
        .commands
        .into_iter()
        .map(|command| match command.command {
            Some(pb::command::Command::Fence(token)) => Ok(Command::Fence(token)),
            Some(pb::command::Command::Trim(seq)) => Ok(Command::Trim(seq)),
            None => Err(MetadataError::InvalidArgument("empty command".into())),
        })
        .collect::<Result<_, _>>()?;
    Ok(CommitAppend {
        basin: append.basin,
        stream: append.stream,
        offset: append.offset,
        len: append.len,
        arrival: append.arrival,
        client_timestamps: append
            .client_timestamps
            .into_iter()
            .zip(append.timestamp_given)
            .map(|(timestamp, given)| given.then_some(timestamp))
            .collect(),
        commands,
        match_seq_num: append.match_seq_num,
        fencing_token: append.fencing_token,
        metered_bytes: append.metered_bytes,
        producer: append.producer.map(|p| ProducerStamp { id: p.id, seq: p.seq, counts_records: p.counts_records }),
        transaction: append
            .transaction
            .map(|t| {
                let epoch = i16::try_from(t.epoch)
                    .map_err(|_| MetadataError::InvalidArgument("a producer epoch is a 16-bit number".into()))?;
                Ok::<_, MetadataError>(TransactionStamp {
                    transactional_id: t.transactional_id,
                    producer_id: t.producer_id,
                    epoch,
                })
            })
            .transpose()?,
    })
}

pub fn outcomes_to_wire(outcomes: &[UnitOutcome]) -> pb::SegmentOutcome {
    pb::SegmentOutcome {
        units: outcomes
            .iter()
            .map(|outcome| pb::UnitOutcome {
                outcome: Some(match outcome {
                    Ok(acks) => {
                        pb::unit_outcome::Outcome::Acks(pb::UnitAcks { acks: acks.iter().map(ack_to_wire).collect() })
                    }
                    Err(error) => pb::unit_outcome::Outcome::Error(error_to_wire(error)),
                }),
            })
            .collect(),
    }
}

pub fn outcomes_from_wire(outcome: pb::SegmentOutcome) -> Result<Vec<UnitOutcome>, MetadataError> {
    outcome
        .units
        .into_iter()
        .map(|unit| match unit.outcome {
            Some(pb::unit_outcome::Outcome::Acks(acks)) => {
                Ok(Ok(acks.acks.into_iter().map(ack_from_wire).collect::<Result<_, _>>()?))
            }
            Some(pb::unit_outcome::Outcome::Error(error)) => Ok(Err(error_from_wire(error))),
            None => Err(malformed("unit outcome without acks or error")),
        })
        .collect()
}

fn ack_to_wire(ack: &AppendAck) -> pb::AppendAck {
    pb::AppendAck {
        start: Some(position_to_wire(ack.start)),
        end: Some(position_to_wire(ack.end)),
        tail: Some(position_to_wire(ack.tail)),
    }
}

fn ack_from_wire(ack: pb::AppendAck) -> Result<AppendAck, MetadataError> {
    let position = |p: Option<pb::Position>| {
        p.map(|p| Position { seq_num: p.seq_num, timestamp: p.timestamp })
            .ok_or_else(|| malformed("ack without position"))
    };
    Ok(AppendAck { start: position(ack.start)?, end: position(ack.end)?, tail: position(ack.tail)? })
}

fn position_to_wire(position: Position) -> pb::Position {
    pb::Position { seq_num: position.seq_num, timestamp: position.timestamp }
}

pub fn tail_to_wire(update: &TailUpdate) -> pb::StreamTail {
    pb::StreamTail {
        basin: update.basin.clone(),
        stream: update.stream.clone(),
        next_seq: update.tail.seq_num,
        last_timestamp: update.tail.timestamp,
        stream_id: update.stream_id,
        entries: update.entries.iter().map(IndexEntry::encode).collect(),
    }
}

pub fn tail_from_wire(tail: pb::StreamTail) -> Result<TailUpdate, MetadataError> {
    let entries = tail
        .entries
        .iter()
        .map(|bytes| IndexEntry::decode(bytes).ok_or_else(|| malformed("index entry")))
        .collect::<Result<_, _>>()?;
    Ok(TailUpdate {
        basin: tail.basin,
        stream: tail.stream,
        stream_id: tail.stream_id,
        tail: Position { seq_num: tail.next_seq, timestamp: tail.last_timestamp },
        entries,
    })
}

pub fn pipeline_to_wire(position: PipelinePosition) -> pb::PipelinePosition {
    pb::PipelinePosition {
        pipeline: position.pipeline.to_be_bytes().to_vec(),
        seq: position.seq,
        seen_through: position.seen_through,
        first_send: position.first_send,
    }
}

pub fn pipeline_from_wire(position: pb::PipelinePosition) -> Result<PipelinePosition, MetadataError> {
    let pipeline = id_from_wire(&position.pipeline, "pipeline id")?;
    Ok(PipelinePosition {
        pipeline,
        seq: position.seq,
        seen_through: position.seen_through,
        first_send: position.first_send,
    })
}

/// A commit call as the server takes it.
pub fn commit_call_from_wire(
    call: pb::CommitRequest,
) -> Result<(Vec<CommitRequest>, Option<PipelinePosition>), MetadataError> {
    let requests = call.segments.into_iter().map(commit_request_from_wire).collect::<Result<Vec<_>, _>>()?;
    let position = call.position.map(pipeline_from_wire).transpose()?;
    Ok((requests, position))
}

/// A commit call's outcomes as the client takes them, checked against what it sent.
pub fn commit_outcomes_from_wire(
    requests: &[pb::Segment],
    response: pb::CommitResponse,
) -> Result<Vec<Vec<UnitOutcome>>, MetadataError> {
    if let Some(error) = response.error {
        return Err(error_from_wire(error));
    }
    if response.segments.len() != requests.len() {
        return Err(malformed("one outcome list per segment"));
    }
    let mut all = Vec::with_capacity(requests.len());
    for (request, segment) in requests.iter().zip(response.segments) {
        let outcomes = outcomes_from_wire(segment)?;
        if outcomes.len() != request.units.len() {
            return Err(malformed("one outcome per unit"));
        }
        all.push(outcomes);
    }
    Ok(all)
}

pub fn malformed(what: &str) -> MetadataError {
    MetadataError::Unavailable(format!("malformed metadata response: {what}"))
}

pub fn error_to_wire(error: &MetadataError) -> pb::Error {
    if let MetadataError::AtomicMember { stream, error } = error {
        let mut wire = error_to_wire(error);
        wire.kind = format!("{ATOMIC_MEMBER}{}", wire.kind);
        wire.member_stream = stream.clone();
        return wire;
    }
    let mut wire = pb::Error { message: error.to_string(), ..pb::Error::default() };
    wire.kind = match error {
        MetadataError::BasinNotFound(basin) => {
            wire.basin = basin.clone();
            "basin_not_found"
        }
        MetadataError::BasinExists(basin) => {
            wire.basin = basin.clone();
            "basin_exists"
        }
        MetadataError::StreamNotFound { basin, stream } => {
            (wire.basin, wire.stream) = (basin.clone(), stream.clone());
            "stream_not_found"
        }
        MetadataError::AccessTokenExists(id) => {
            wire.basin = id.clone();
            "access_token_exists"
        }
        MetadataError::AccessTokenNotFound(id) => {
            wire.basin = id.clone();
            "access_token_not_found"
        }
        MetadataError::StreamExists { basin, stream } => {
            (wire.basin, wire.stream) = (basin.clone(), stream.clone());
            "stream_exists"
        }
        MetadataError::SeqNumMismatch { expected, actual } => {
            (wire.expected, wire.actual) = (*expected, *actual);
            "seq_num_mismatch"
        }
        MetadataError::FencingTokenMismatch { actual } => {
            wire.actual_token = actual.clone();
            "fencing_token_mismatch"
        }
        // The refusal travels in the `actual_token` field.
        MetadataError::Transaction { refusal, message } => {
            wire.actual_token = refusal.as_str().into();
            wire.message = message.clone();
            "transaction"
        }
        MetadataError::ProducerSeqMismatch { expected, got } => {
            (wire.expected, wire.actual) = (*expected, *got);
            "producer_seq_mismatch"
        }
        MetadataError::InvalidArgument(message) => {
            wire.message = message.clone();
            "invalid_argument"
        }
        MetadataError::AtomicGroupFailed(message) => {
            wire.message = message.clone();
            "atomic_group_failed"
        }
        MetadataError::EarlierAppendFailed { basin, stream } => {
            (wire.basin, wire.stream) = (basin.clone(), stream.clone());
            "earlier_append_failed"
        }
        MetadataError::Fenced => "fenced",
        MetadataError::NotLeader => "not_leader",
        MetadataError::Stopped => "stopped",
        MetadataError::Indefinite(message) => {
            wire.message = message.clone();
            "indefinite"
        }
        MetadataError::Storage(e) => {
            wire.message = e.to_string();
            "unavailable"
        }
        MetadataError::Unavailable(message) => {
            wire.message = message.clone();
            "unavailable"
        }
        MetadataError::Corrupt { key, reason } => {
            (wire.basin, wire.message) = (key.clone(), reason.clone());
            "corrupt"
        }
        MetadataError::AtomicMember { .. } => "unreachable: handled above",
    }
    .to_string();
    wire
}

/// The kind prefix of an atomic append's member error.
const ATOMIC_MEMBER: &str = "atomic/";

pub fn error_from_wire(mut wire: pb::Error) -> MetadataError {
    if let Some(kind) = wire.kind.strip_prefix(ATOMIC_MEMBER) {
        let stream = std::mem::take(&mut wire.member_stream);
        wire.kind = kind.to_string();
        return MetadataError::AtomicMember { stream, error: Box::new(error_from_wire(wire)) };
    }
    match wire.kind.as_str() {
        "basin_not_found" => MetadataError::BasinNotFound(wire.basin),
        "basin_exists" => MetadataError::BasinExists(wire.basin),
        "stream_not_found" => MetadataError::StreamNotFound { basin: wire.basin, stream: wire.stream },
        // The token id travels in the `basin` field.
        "access_token_exists" => MetadataError::AccessTokenExists(wire.basin),
        "access_token_not_found" => MetadataError::AccessTokenNotFound(wire.basin),
        "stream_exists" => MetadataError::StreamExists { basin: wire.basin, stream: wire.stream },
        "seq_num_mismatch" => MetadataError::SeqNumMismatch { expected: wire.expected, actual: wire.actual },
        "fencing_token_mismatch" => MetadataError::FencingTokenMismatch { actual: wire.actual_token },
        "transaction" => match crate::TransactionRefusal::parse(&wire.actual_token) {
            Some(refusal) => MetadataError::Transaction { refusal, message: wire.message },
            None => MetadataError::Unavailable(wire.message),
        },
        "producer_seq_mismatch" => MetadataError::ProducerSeqMismatch { expected: wire.expected, got: wire.actual },
        "invalid_argument" => MetadataError::InvalidArgument(wire.message),
        "atomic_group_failed" => MetadataError::AtomicGroupFailed(wire.message),
        "earlier_append_failed" => MetadataError::EarlierAppendFailed { basin: wire.basin, stream: wire.stream },
        "fenced" => MetadataError::Fenced,
        "not_leader" => MetadataError::NotLeader,
        "stopped" => MetadataError::Stopped,
        "indefinite" => MetadataError::Indefinite(wire.message),
        "corrupt" => MetadataError::Corrupt { key: wire.basin, reason: wire.message },
        _ => MetadataError::Unavailable(wire.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_survives_the_wire() {
        let errors = [
            MetadataError::BasinNotFound("b".into()),
            MetadataError::BasinExists("b".into()),
            MetadataError::StreamNotFound { basin: "b".into(), stream: "s".into() },
            MetadataError::StreamExists { basin: "b".into(), stream: "s".into() },
            MetadataError::AccessTokenExists("t".into()),
            MetadataError::AccessTokenNotFound("t".into()),
            MetadataError::SeqNumMismatch { expected: 3, actual: 7 },
            MetadataError::FencingTokenMismatch { actual: "tok".into() },
            MetadataError::ProducerSeqMismatch { expected: 4, got: 9 },
            MetadataError::InvalidArgument("bad".into()),
            MetadataError::AtomicGroupFailed("other".into()),
            MetadataError::Transaction {
                refusal: crate::TransactionRefusal::ProducerFenced,
                message: "epoch 1 was fenced".into(),
            },
            MetadataError::AtomicMember {
                stream: "s".into(),
                error: Box::new(MetadataError::SeqNumMismatch { expected: 1, actual: 2 }),
            },
            MetadataError::EarlierAppendFailed { basin: "b".into(), stream: "s".into() },
            MetadataError::Fenced,
            MetadataError::NotLeader,
            MetadataError::Stopped,
            MetadataError::Indefinite("lost".into()),
            MetadataError::Unavailable("down".into()),
            MetadataError::Corrupt { key: "k".into(), reason: "r".into() },
        ];
        for error in errors {
            let back = error_from_wire(error_to_wire(&error));
            assert_eq!(back.to_string(), error.to_string());
            assert_eq!(back.code(), error.code());
        }
    }

    #[test]
    fn commit_requests_and_outcomes_survive_the_wire() {
        let request = CommitRequest {
            segment_id: u128::MAX - 5,
            units: vec![CommitUnit {
                appends: vec![CommitAppend {
                    basin: "b".into(),
                    stream: "s".into(),
                    offset: 10,
                    len: 20,
                    arrival: 30,
                    client_timestamps: vec![None, Some(0), Some(99)],
                    commands: vec![Command::Fence("t".into()), Command::Trim(4)],
                    match_seq_num: Some(2),
                    fencing_token: None,
                    metered_bytes: 77,
                    producer: Some(ProducerStamp { id: "p-1".into(), seq: 41, counts_records: true }),
                    transaction: Some(TransactionStamp { transactional_id: "tx".into(), producer_id: 9, epoch: 2 }),
                }],
            }],
        };
        assert_eq!(commit_request_from_wire(commit_request_to_wire(&request)).unwrap(), request);

        let p = |seq_num, timestamp| Position { seq_num, timestamp };
        let outcomes: Vec<UnitOutcome> = vec![
            Ok(vec![AppendAck { start: p(0, 1), end: p(3, 2), tail: p(3, 2) }]),
            Err(MetadataError::SeqNumMismatch { expected: 1, actual: 3 }),
        ];
        let back = outcomes_from_wire(outcomes_to_wire(&outcomes)).unwrap();
        assert_eq!(back[0].as_ref().unwrap(), outcomes[0].as_ref().unwrap());
        assert!(matches!(back[1], Err(MetadataError::SeqNumMismatch { expected: 1, actual: 3 })));
    }
}
