//! Kafka transactions as metadata keeps them: a transactional id's producer id, epoch
//! and open transaction ([`TransactionState`]), the calls that move it
//! ([`TransactionCall`]), and the stamp a staged append carries ([`TransactionStamp`]).
//!
//! An append stamped with a transaction is staged, not sequenced: its block stays in its
//! uploaded segment and metadata keeps where it is. Committing the transaction gives
//! every staged append its offsets and applies the group offsets committed in it, in one
//! write; aborting drops them. Until then nothing of the transaction is visible.

use shale_proto::metadata_rpc as pb;

use crate::records::{decode_v1, encode_stored};
use crate::wire::malformed;
use crate::{MetadataError, Result, Stored};

/// Set on an append by a Kafka transactional producer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TransactionStamp {
    pub transactional_id: String,
    pub producer_id: i64,
    pub epoch: i16,
}

/// How a transactional id's last transaction ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TransactionOutcome {
    #[default]
    None,
    Committed,
    Aborted,
}

/// A group offset committed inside a transaction, applied when it commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionOffset {
    pub basin: String,
    pub stream: String,
    pub group: String,
    pub seq_num: u64,
    pub commit_metadata: String,
}

/// One group offset a transaction commits: the stream, the next sequence number to
/// read, and the commit's metadata string (empty when none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOffset {
    pub stream: String,
    pub seq_num: u64,
    pub commit_metadata: String,
}

/// A transactional id's record: its producer id and epoch, and its open transaction
/// (`started_ms > 0`) with the streams and groups added to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransactionState {
    pub transactional_id: String,
    pub producer_id: i64,
    pub epoch: i16,
    pub timeout_ms: u64,
    /// When the open transaction started (metadata's clock); 0 when none is open.
    pub started_ms: u64,
    /// `(basin, stream)` added to the open transaction.
    pub streams: Vec<(String, String)>,
    pub groups: Vec<String>,
    pub offsets: Vec<TransactionOffset>,
    /// Appends staged so far under this id: the number of the next one.
    pub staged: u64,
    /// The number of the open transaction's first staged append.
    pub staged_from: u64,
    pub last_outcome: TransactionOutcome,
    pub updated_ms: u64,
}

impl TransactionState {
    /// Longest transactional id, in bytes.
    pub const MAX_ID_BYTES: usize = 256;

    pub fn is_open(&self) -> bool {
        self.started_ms > 0
    }

    /// When the open transaction times out (ms), if one is open.
    pub fn deadline_ms(&self) -> Option<u64> {
        self.is_open().then(|| self.started_ms.saturating_add(self.timeout_ms))
    }

    /// Checks that `producer_id`/`epoch` are this id's current producer: an older epoch
    /// was fenced by a newer `InitProducerId`.
    pub fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<()> {
        if producer_id != self.producer_id {
            return Err(refusal(
                TransactionRefusal::UnknownProducer,
                format!("producer id {producer_id} is not the current one of `{}`", self.transactional_id),
            ));
        }
        if epoch < self.epoch {
            return Err(refusal(
                TransactionRefusal::ProducerFenced,
                format!("epoch {epoch} was fenced by epoch {} of `{}`", self.epoch, self.transactional_id),
            ));
        }
        if epoch > self.epoch {
            return Err(refusal(
                TransactionRefusal::UnknownProducer,
                format!("epoch {epoch} is ahead of `{}`'s current {}", self.transactional_id, self.epoch),
            ));
        }
        Ok(())
    }

    /// Checks that a transaction is open, for a call that adds to one.
    pub fn check_open(&self) -> Result<()> {
        if self.is_open() {
            return Ok(());
        }
        Err(refusal(
            TransactionRefusal::InvalidState,
            format!("`{}` has no open transaction: add its partitions first", self.transactional_id),
        ))
    }
}

/// Why a transaction call was refused, as Kafka's client acts on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionRefusal {
    /// A newer epoch of the transactional id exists (Kafka's PRODUCER_FENCED).
    ProducerFenced,
    /// The call does not fit the transaction's state (INVALID_TXN_STATE).
    InvalidState,
    /// No such transactional id or producer id (INVALID_PRODUCER_ID_MAPPING).
    UnknownProducer,
}

impl TransactionRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            TransactionRefusal::ProducerFenced => "producer_fenced",
            TransactionRefusal::InvalidState => "invalid_state",
            TransactionRefusal::UnknownProducer => "unknown_producer",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        [Self::ProducerFenced, Self::InvalidState, Self::UnknownProducer].into_iter().find(|r| r.as_str() == name)
    }
}

pub fn refusal(refusal: TransactionRefusal, message: String) -> MetadataError {
    MetadataError::Transaction { refusal, message }
}

/// One call of a transactional producer (or of an admin listing transactions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionCall {
    pub transactional_id: String,
    /// The caller's producer id and epoch; for [`TransactionOp::Init`] the ones it had
    /// (-1 when none).
    pub producer_id: i64,
    pub epoch: i16,
    pub op: TransactionOp,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransactionOp {
    /// Aborts any open transaction and bumps the epoch (fencing older ones); a new id
    /// takes `new_producer_id` at epoch 0.
    Init {
        timeout_ms: u64,
        new_producer_id: i64,
    },
    /// Opens the transaction if needed and adds streams of `basin` to it.
    AddStreams {
        basin: String,
        streams: Vec<String>,
    },
    AddGroup {
        group: String,
    },
    /// Group offsets applied when the transaction commits.
    CommitOffsets {
        basin: String,
        group: String,
        offsets: Vec<GroupOffset>,
    },
    /// Commits (`true`) or aborts the open transaction; a retry of the last one that
    /// ended the same way succeeds.
    End {
        commit: bool,
    },
    Describe,
    List,
}

impl TransactionOp {
    fn to_wire(&self, call: &mut pb::TransactionCall) -> pb::TransactionOp {
        match self {
            TransactionOp::Init { timeout_ms, new_producer_id } => {
                (call.timeout_ms, call.new_producer_id) = (*timeout_ms, *new_producer_id);
                pb::TransactionOp::Init
            }
            TransactionOp::AddStreams { basin, streams } => {
                (call.basin, call.streams) = (basin.clone(), streams.clone());
                pb::TransactionOp::AddStreams
            }
            TransactionOp::AddGroup { group } => {
                call.group = group.clone();
                pb::TransactionOp::AddGroup
            }
            TransactionOp::CommitOffsets { basin, group, offsets } => {
                (call.basin, call.group) = (basin.clone(), group.clone());
                call.streams = offsets.iter().map(|o| o.stream.clone()).collect();
                call.positions = offsets.iter().map(|o| o.seq_num).collect();
                if offsets.iter().any(|o| !o.commit_metadata.is_empty()) {
                    call.commit_metadata = offsets.iter().map(|o| o.commit_metadata.clone()).collect();
                }
                pb::TransactionOp::CommitOffsets
            }
            TransactionOp::End { commit: true } => pb::TransactionOp::Commit,
            TransactionOp::End { commit: false } => pb::TransactionOp::Abort,
            TransactionOp::Describe => pb::TransactionOp::Describe,
            TransactionOp::List => pb::TransactionOp::List,
        }
    }
}

pub fn transaction_call_to_wire(call: &TransactionCall) -> pb::TransactionCall {
    let mut wire = pb::TransactionCall {
        transactional_id: call.transactional_id.clone(),
        producer_id: call.producer_id,
        epoch: i32::from(call.epoch),
        ..pb::TransactionCall::default()
    };
    wire.op = call.op.to_wire(&mut wire) as i32;
    wire
}

pub fn transaction_call_from_wire(call: pb::TransactionCall) -> Result<TransactionCall> {
    let op = match pb::TransactionOp::try_from(call.op).map_err(|_| malformed("transaction op"))? {
        pb::TransactionOp::Init => {
            TransactionOp::Init { timeout_ms: call.timeout_ms, new_producer_id: call.new_producer_id }
        }
        pb::TransactionOp::AddStreams => TransactionOp::AddStreams { basin: call.basin, streams: call.streams },
        pb::TransactionOp::AddGroup => TransactionOp::AddGroup { group: call.group },
        pb::TransactionOp::CommitOffsets => {
            if call.streams.len() != call.positions.len() {
                return Err(malformed("one position per stream"));
            }
            let mut commit_metadata = call.commit_metadata;
            match commit_metadata.len() {
                0 => commit_metadata.resize(call.streams.len(), String::new()),
                n if n != call.streams.len() => return Err(malformed("one commit metadata per stream, or none")),
                _ => {}
            }
            let offsets = call
                .streams
                .into_iter()
                .zip(call.positions)
                .zip(commit_metadata)
                .map(|((stream, seq_num), commit_metadata)| GroupOffset { stream, seq_num, commit_metadata })
                .collect();
            TransactionOp::CommitOffsets { basin: call.basin, group: call.group, offsets }
        }
        pb::TransactionOp::Commit => TransactionOp::End { commit: true },
        pb::TransactionOp::Abort => TransactionOp::End { commit: false },
        pb::TransactionOp::Describe => TransactionOp::Describe,
        pb::TransactionOp::List => TransactionOp::List,
        pb::TransactionOp::Unspecified => return Err(malformed("transaction op")),
    };
    let epoch = i16::try_from(call.epoch).map_err(|_| malformed("producer epoch"))?;
    Ok(TransactionCall { transactional_id: call.transactional_id, producer_id: call.producer_id, epoch, op })
}

pub fn transaction_to_wire(state: &TransactionState) -> pb::TransactionRecord {
    pb::TransactionRecord {
        transactional_id: state.transactional_id.clone(),
        producer_id: state.producer_id,
        epoch: i32::from(state.epoch),
        timeout_ms: state.timeout_ms,
        started_ms: state.started_ms,
        streams: state
            .streams
            .iter()
            .map(|(basin, stream)| pb::TransactionStream { basin: basin.clone(), stream: stream.clone() })
            .collect(),
        groups: state.groups.clone(),
        offsets: state
            .offsets
            .iter()
            .map(|o| pb::TransactionOffset {
                basin: o.basin.clone(),
                stream: o.stream.clone(),
                group: o.group.clone(),
                seq_num: o.seq_num,
                commit_metadata: o.commit_metadata.clone(),
            })
            .collect(),
        staged: state.staged,
        staged_from: state.staged_from,
        last_outcome: match state.last_outcome {
            TransactionOutcome::None => 0,
            TransactionOutcome::Committed => 1,
            TransactionOutcome::Aborted => 2,
        },
        updated_ms: state.updated_ms,
    }
}

pub fn transaction_from_wire(record: pb::TransactionRecord) -> Result<TransactionState> {
    Ok(TransactionState {
        transactional_id: record.transactional_id,
        producer_id: record.producer_id,
        epoch: i16::try_from(record.epoch).map_err(|_| malformed("producer epoch"))?,
        timeout_ms: record.timeout_ms,
        started_ms: record.started_ms,
        streams: record.streams.into_iter().map(|s| (s.basin, s.stream)).collect(),
        groups: record.groups,
        offsets: record
            .offsets
            .into_iter()
            .map(|o| TransactionOffset {
                basin: o.basin,
                stream: o.stream,
                group: o.group,
                seq_num: o.seq_num,
                commit_metadata: o.commit_metadata,
            })
            .collect(),
        staged: record.staged,
        staged_from: record.staged_from,
        last_outcome: match record.last_outcome {
            1 => TransactionOutcome::Committed,
            2 => TransactionOutcome::Aborted,
            _ => TransactionOutcome::None,
        },
        updated_ms: record.updated_ms,
    })
}

impl Stored for TransactionState {
    fn to_stored(&self) -> Vec<u8> {
        encode_stored(transaction_to_wire(self))
    }

    fn from_stored(key: &[u8], bytes: &[u8]) -> Result<Self> {
        transaction_from_wire(decode_v1::<pb::TransactionRecord>(key, bytes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(stream: &str, seq_num: u64, commit_metadata: &str) -> GroupOffset {
        GroupOffset { stream: stream.into(), seq_num, commit_metadata: commit_metadata.into() }
    }

    #[test]
    fn calls_and_records_round_trip() {
        for op in [
            TransactionOp::Init { timeout_ms: 60_000, new_producer_id: 77 },
            TransactionOp::AddStreams { basin: "b".into(), streams: vec!["t/0".into(), "t/1".into()] },
            TransactionOp::AddGroup { group: "g".into() },
            TransactionOp::CommitOffsets { basin: "b".into(), group: "g".into(), offsets: vec![offset("in/0", 9, "")] },
            TransactionOp::CommitOffsets {
                basin: "b".into(),
                group: "g".into(),
                offsets: vec![offset("in/0", 9, ""), offset("in/1", 3, "kept")],
            },
            TransactionOp::End { commit: true },
            TransactionOp::End { commit: false },
            TransactionOp::Describe,
            TransactionOp::List,
        ] {
            let call = TransactionCall { transactional_id: "tx".into(), producer_id: 5, epoch: 3, op };
            assert_eq!(transaction_call_from_wire(transaction_call_to_wire(&call)).unwrap(), call);
        }
        let state = TransactionState {
            transactional_id: "tx".into(),
            producer_id: 5,
            epoch: 2,
            timeout_ms: 1000,
            started_ms: 10,
            streams: vec![("b".into(), "t/0".into())],
            groups: vec!["g".into()],
            offsets: vec![TransactionOffset {
                basin: "b".into(),
                stream: "in/0".into(),
                group: "g".into(),
                seq_num: 4,
                commit_metadata: "m".into(),
            }],
            staged: 7,
            staged_from: 5,
            last_outcome: TransactionOutcome::Aborted,
            updated_ms: 11,
        };
        assert_eq!(TransactionState::from_stored(b"x/tx", &state.to_stored()).unwrap(), state);
    }

    #[test]
    fn older_epochs_are_fenced_and_other_producers_unknown() {
        let state = TransactionState { transactional_id: "tx".into(), producer_id: 5, epoch: 2, ..Default::default() };
        assert!(state.check_producer(5, 2).is_ok());
        let fenced = state.check_producer(5, 1).unwrap_err();
        assert!(matches!(fenced, MetadataError::Transaction { refusal: TransactionRefusal::ProducerFenced, .. }));
        let other = state.check_producer(6, 2).unwrap_err();
        assert!(matches!(other, MetadataError::Transaction { refusal: TransactionRefusal::UnknownProducer, .. }));
        assert!(state.check_open().is_err());
    }
}
