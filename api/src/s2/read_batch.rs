//! S2's `ReadBatch` message encoded straight from the records a read returns, with the
//! protobuf encoding `prost` would produce for the same message: no intermediate message
//! is built, so a catch-up read neither allocates per record nor touches each record's
//! shared buffer (a reference-count increment and decrement per header and body, on one
//! counter every core contends for). Bodies and headers are copied once, into the output.

use bytes::{BufMut, Bytes, BytesMut};
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, WireType};
use shale_metadata_contract::Position;
use shale_proto::SequencedRecord;

/// A batch measured for encoding: each record's length, worked out once, gives both the
/// message's length and the record's length prefix.
pub struct Measured<'a> {
    records: &'a [SequencedRecord],
    tail: Option<Position>,
    record_lens: Vec<usize>,
    len: usize,
}

/// Measures the `ReadBatch` of `records` and `tail`.
pub fn measure(records: &[SequencedRecord], tail: Option<Position>) -> Measured<'_> {
    let record_lens: Vec<usize> = records.iter().map(record_len).collect();
    let len = record_lens.iter().map(|&len| nested_len(1, len)).sum::<usize>()
        + tail.map_or(0, |tail| nested_len(2, position_len(tail)));
    Measured { records, tail, record_lens, len }
}

impl Measured<'_> {
    /// The encoded message's length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends the message to `out`.
    pub fn encode(&self, out: &mut impl BufMut) {
        for (record, &len) in self.records.iter().zip(&self.record_lens) {
            encode_nested_key(1, len, out);
            put_u64(1, record.seq_num, out);
            put_u64(2, record.timestamp, out);
            for header in &record.headers {
                encode_nested_key(3, bytes_len(1, &header.name) + bytes_len(2, &header.value), out);
                put_bytes(1, &header.name, out);
                put_bytes(2, &header.value, out);
            }
            put_bytes(4, &record.body, out);
        }
        if let Some(tail) = self.tail {
            encode_nested_key(2, position_len(tail), out);
            put_u64(1, tail.seq_num, out);
            put_u64(2, tail.timestamp, out);
        }
    }
}

/// The message on its own, for a unary protobuf answer.
pub fn to_bytes(records: &[SequencedRecord], tail: Option<Position>) -> Bytes {
    let batch = measure(records, tail);
    let mut out = BytesMut::with_capacity(batch.len());
    batch.encode(&mut out);
    out.freeze()
}

fn record_len(record: &SequencedRecord) -> usize {
    u64_len(1, record.seq_num)
        + u64_len(2, record.timestamp)
        + record.headers.iter().map(|h| nested_len(3, bytes_len(1, &h.name) + bytes_len(2, &h.value))).sum::<usize>()
        + bytes_len(4, &record.body)
}

fn position_len(position: Position) -> usize {
    u64_len(1, position.seq_num) + u64_len(2, position.timestamp)
}

/// Proto3 leaves zero scalars and empty bytes out.
fn u64_len(tag: u32, value: u64) -> usize {
    if value == 0 {
        0
    } else {
        key_len(tag) + encoded_len_varint(value)
    }
}

fn bytes_len(tag: u32, value: &[u8]) -> usize {
    if value.is_empty() {
        0
    } else {
        key_len(tag) + encoded_len_varint(value.len() as u64) + value.len()
    }
}

fn nested_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

fn put_u64(tag: u32, value: u64, out: &mut impl BufMut) {
    if value != 0 {
        encode_key(tag, WireType::Varint, out);
        encode_varint(value, out);
    }
}

fn put_bytes(tag: u32, value: &[u8], out: &mut impl BufMut) {
    if !value.is_empty() {
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint(value.len() as u64, out);
        out.put_slice(value);
    }
}

fn encode_nested_key(tag: u32, len: usize, out: &mut impl BufMut) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use prost::Message;
    use shale_proto::s2 as pb;
    use shale_proto::Header;

    use super::*;

    /// The message `prost` builds for the same records.
    fn via_prost(records: &[SequencedRecord], tail: Option<Position>) -> Vec<u8> {
        pb::ReadBatch {
            records: records
                .iter()
                .map(|r| pb::SequencedRecord {
                    seq_num: r.seq_num,
                    timestamp: r.timestamp,
                    headers: r
                        .headers
                        .iter()
                        .map(|h| pb::Header { name: h.name.clone(), value: h.value.clone() })
                        .collect(),
                    body: r.body.clone(),
                })
                .collect(),
            tail: tail.map(|t| pb::StreamPosition { seq_num: t.seq_num, timestamp: t.timestamp }),
        }
        .encode_to_vec()
    }

    fn bytes() -> impl Strategy<Value = Bytes> {
        prop::collection::vec(any::<u8>(), 0..300).prop_map(Bytes::from)
    }

    fn record() -> impl Strategy<Value = SequencedRecord> {
        let header = (bytes(), bytes()).prop_map(|(name, value)| Header { name, value });
        (prop_oneof![Just(0u64), any::<u64>()], any::<u64>(), prop::collection::vec(header, 0..3), bytes()).prop_map(
            |(seq_num, timestamp, headers, body)| SequencedRecord { seq_num, timestamp, headers: headers.into(), body },
        )
    }

    proptest! {
        #[test]
        fn encodes_what_prost_encodes(
            records in prop::collection::vec(record(), 0..8),
            tail in prop::option::of((any::<u64>(), prop_oneof![Just(0u64), any::<u64>()])),
        ) {
            let tail = tail.map(|(seq_num, timestamp)| Position { seq_num, timestamp });
            let ours = to_bytes(&records, tail);
            prop_assert_eq!(ours.len(), measure(&records, tail).len());
            prop_assert_eq!(&ours[..], &via_prost(&records, tail)[..]);
        }
    }
}
