//! Validating an append and encoding it into a block, in the caller's task.

use bytes::Bytes;
use shale_metadata_contract::{CommitAppend, ProducerStamp, TransactionStamp};
use shale_proto::record::{MAX_BATCH_METERED_BYTES, MAX_BATCH_RECORDS, MAX_FENCING_TOKEN_BYTES};
use shale_proto::segment::encode_block;
use shale_proto::{names, Record};

use crate::GatewayError;

/// One append as a caller asks for it: records for one stream, with optional conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppendInput {
    pub basin: String,
    pub stream: String,
    pub records: Vec<Record>,
    /// Succeed only if the stream's tail equals this.
    pub match_seq_num: Option<u64>,
    /// Succeed only if the stream's fencing token equals this.
    pub fencing_token: Option<String>,
    /// An idempotent producer's id and this append's sequence in it.
    pub producer: Option<ProducerStamp>,
    /// A Kafka transactional producer's open transaction: the append is staged in it.
    pub transaction: Option<TransactionStamp>,
    /// How large the batch may be: S2's limits unless the transport's differ.
    pub limits: BatchLimits,
}

/// The most records and metered bytes one append may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    pub records: usize,
    pub metered_bytes: u64,
}

impl BatchLimits {
    /// S2's: 1000 records, 1 MiB.
    pub const S2: Self = Self { records: MAX_BATCH_RECORDS, metered_bytes: MAX_BATCH_METERED_BYTES };
}

impl Default for BatchLimits {
    fn default() -> Self {
        Self::S2
    }
}

/// An append ready for a segment: its block, and what the sequencer needs as a
/// [`CommitAppend`] whose byte range is filled in once the segment is laid out.
#[derive(Clone, Debug)]
pub(crate) struct EncodedAppend {
    pub block: Bytes,
    pub commit: CommitAppend,
}

impl EncodedAppend {
    pub fn stream_key(&self) -> Bytes {
        Bytes::from([self.commit.basin.as_bytes(), b"/", self.commit.stream.as_bytes()].concat())
    }

    pub fn record_count(&self) -> u32 {
        self.commit.client_timestamps.len() as u32
    }
}

/// Checks S2's limits and names, parses command records and encodes the block.
pub(crate) fn encode(input: AppendInput, arrival: u64) -> Result<EncodedAppend, GatewayError> {
    let invalid = GatewayError::InvalidArgument;
    names::validate_basin(&input.basin).map_err(invalid)?;
    names::validate_stream(&input.stream).map_err(invalid)?;
    let limits = input.limits;
    if input.records.is_empty() || input.records.len() > limits.records {
        return Err(invalid(format!("a batch holds 1 to {} records, got {}", limits.records, input.records.len())));
    }
    let metered_bytes: u64 = input.records.iter().map(Record::metered_bytes).sum();
    if metered_bytes > limits.metered_bytes {
        return Err(invalid(format!(
            "a batch holds at most {} metered bytes, got {metered_bytes}",
            limits.metered_bytes
        )));
    }
    if let Some(token) = &input.fencing_token {
        if token.len() > MAX_FENCING_TOKEN_BYTES {
            return Err(invalid(format!("fencing token is longer than {MAX_FENCING_TOKEN_BYTES} bytes")));
        }
    }
    if let Some(producer) = &input.producer {
        producer.validate().map_err(invalid)?;
    }
    let mut commands = Vec::new();
    for (i, record) in input.records.iter().enumerate() {
        if let Some(command) = record.command().map_err(|e| invalid(format!("record {i}: {e}")))? {
            commands.push(command);
        }
    }
    let client_timestamps = input.records.iter().map(|r| r.timestamp).collect();
    Ok(EncodedAppend {
        block: encode_block(arrival, &input.records),
        commit: CommitAppend {
            basin: input.basin,
            stream: input.stream,
            offset: 0,
            len: 0,
            arrival,
            client_timestamps,
            commands,
            match_seq_num: input.match_seq_num,
            fencing_token: input.fencing_token,
            metered_bytes,
            producer: input.producer,
            transaction: input.transaction,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_proto::{Command, Header};

    fn input(records: Vec<Record>) -> AppendInput {
        AppendInput { basin: "test-basin".into(), stream: "s".into(), records, ..Default::default() }
    }

    fn body(len: usize) -> Record {
        Record { body: Bytes::from(vec![b'x'; len]), ..Default::default() }
    }

    #[test]
    fn enforces_limits_and_names() {
        assert!(encode(input(vec![body(1)]), 0).is_ok());
        assert!(matches!(encode(input(vec![]), 0), Err(GatewayError::InvalidArgument(_))));
        assert!(matches!(encode(input(vec![body(1); 1001]), 0), Err(GatewayError::InvalidArgument(_))));
        assert!(matches!(encode(input(vec![body(1024 * 1024)]), 0), Err(GatewayError::InvalidArgument(_))));
        let mut bad_basin = input(vec![body(1)]);
        bad_basin.basin = "NO".into();
        assert!(matches!(encode(bad_basin, 0), Err(GatewayError::InvalidArgument(_))));
        let bad_command = Record {
            headers: vec![Header { name: Bytes::new(), value: Bytes::from_static(b"trim") }].into(),
            body: Bytes::from_static(b"x"),
            timestamp: None,
        };
        assert!(matches!(encode(input(vec![bad_command]), 0), Err(GatewayError::InvalidArgument(_))));
    }

    #[test]
    fn collects_commands_in_order() {
        let fence = Record {
            headers: vec![Header { name: Bytes::new(), value: Bytes::from_static(b"fence") }].into(),
            body: Bytes::from_static(b"tok"),
            timestamp: Some(5),
        };
        let encoded = encode(input(vec![body(1), fence]), 9).expect("valid");
        assert_eq!(encoded.commit.commands, vec![Command::Fence("tok".into())]);
        assert_eq!(encoded.commit.client_timestamps, vec![None, Some(5)]);
    }
}
