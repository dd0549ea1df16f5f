//! Kafka records to Shale records and back. One Kafka record is one Shale record: the
//! value is the body, Kafka headers are headers, the timestamp is the record's. Two
//! reserved headers keep what a body and headers cannot: [`KEY_HEADER`] holds the key
//! (absent: a null key; empty: an empty key) and [`NULL_VALUE_HEADER`] marks a null value
//! (a tombstone), so a null key or value stays distinct from an empty one. A produced
//! header with a reserved name is refused.
//!
//! Fetches answer record batches v2, uncompressed, encoded here straight from the stored
//! records (no intermediate Kafka record per row): the records come from segments that
//! are already compressed at rest if the operator chose so, and compressing again on the
//! way out would spend the agent's CPU for loopback-or-zone traffic.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::records::{
    Record as KafkaRecord, RecordBatchDecoder, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};
use shale_proto::{varint, Header, Record, SequencedRecord};

use crate::decompress::{decompress, TooLarge, MAX_DECOMPRESSED_BYTES};

use shale_proto::record::{KEY_HEADER, NULL_VALUE_HEADER};

/// One produced batch: its records for Shale, and its idempotent producer, if any.
#[derive(Debug)]
pub struct ProducedBatch {
    pub records: Vec<Record>,
    /// `(producer id, epoch, base sequence)` of an idempotent producer.
    pub producer: Option<(i64, i16, i32)>,
    pub transactional: bool,
}

/// Why a produced partition's records are refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The bytes do not decode or fail their CRC: CORRUPT_MESSAGE.
    Corrupt(String),
    /// They decode but break a rule (several batches, a reserved header): INVALID_RECORD.
    Invalid(String),
    /// They decompress past [`MAX_DECOMPRESSED_BYTES`]: MESSAGE_TOO_LARGE.
    TooLarge(String),
}

/// Decodes a partition's produced bytes: exactly one record batch v2, as Kafka requires
/// from produce v3 on. The CRC is checked and the batch decompressed, within
/// [`MAX_DECOMPRESSED_BYTES`]. Uncompressed records are slices of `bytes`, not copies.
pub fn decode_produced(bytes: Bytes) -> Result<ProducedBatch, Refused> {
    let mut buf = bytes;
    let bounded = |compressed: &mut Bytes, codec| decompress(compressed, codec, MAX_DECOMPRESSED_BYTES);
    // The codec's decoders index into what they are given; a fault in them must cost
    // one request, not the process.
    let sets = std::panic::catch_unwind(move || {
        let mut sets = Vec::new();
        while buf.has_remaining() {
            sets.push(RecordBatchDecoder::decode_with_custom_compression(&mut buf, Some(bounded))?);
        }
        Ok::<_, anyhow::Error>(sets)
    })
    .map_err(|_| Refused::Corrupt("record batch does not decode".into()))?
    .map_err(|e| match e.downcast_ref::<TooLarge>() {
        Some(too_large) => Refused::TooLarge(too_large.to_string()),
        None => Refused::Corrupt(e.to_string()),
    })?;
    let [set] = sets.as_slice() else {
        return Err(Refused::Invalid(format!("a partition's records must be one batch, got {}", sets.len())));
    };
    if set.version != 2 {
        return Err(Refused::Invalid(format!("record batch v{} is not served; v2 is", set.version)));
    }
    let Some(first) = set.records.first() else {
        return Err(Refused::Invalid("the record batch is empty".into()));
    };
    let producer = (first.producer_id >= 0).then_some((first.producer_id, first.producer_epoch, first.sequence));
    let transactional = first.transactional;
    let records = set.records.iter().map(to_shale).collect::<Result<_, _>>()?;
    Ok(ProducedBatch { records, producer, transactional })
}

fn to_shale(record: &KafkaRecord) -> Result<Record, Refused> {
    if record.control {
        return Err(Refused::Invalid("control records are written by the broker, not produced".into()));
    }
    let mut headers = Vec::with_capacity(record.headers.len() + 1);
    if let Some(key) = &record.key {
        headers.push(Header { name: Bytes::from_static(KEY_HEADER), value: key.clone() });
    }
    if record.value.is_none() {
        headers.push(Header { name: Bytes::from_static(NULL_VALUE_HEADER), value: Bytes::new() });
    }
    for (name, value) in &record.headers {
        let name = Bytes::from(name.clone());
        if name.as_ref() == KEY_HEADER || name.as_ref() == NULL_VALUE_HEADER || name.is_empty() {
            return Err(Refused::Invalid(format!("header name `{}` is reserved", String::from_utf8_lossy(&name))));
        }
        headers.push(Header { name, value: value.clone().unwrap_or_default() });
    }
    let timestamp = u64::try_from(record.timestamp).ok();
    Ok(Record { timestamp, headers: headers.into(), body: record.value.clone().unwrap_or_default() })
}

/// Appends `records` to `out` as one uncompressed record batch v2 (Kafka's protocol
/// guide, "Record Batch"), written straight from the stored records: S2's command
/// records (fence, trim; a header with an empty name) are left out, which Kafka
/// consumers step over as a gap in the offsets. Nothing is written when none is left.
pub fn encode_batch(records: &[SequencedRecord], out: &mut BytesMut) {
    let shown: Vec<&SequencedRecord> = records.iter().filter(|r| is_shown(r)).collect();
    let (Some(first), Some(last)) = (shown.first(), shown.last()) else { return };
    let base_offset = offset_of(first);
    let base_timestamp = timestamp_of(first);
    let max_timestamp = shown.iter().map(|r| timestamp_of(r)).max().unwrap_or(base_timestamp);
    let start = out.len();
    out.put_i64(base_offset);
    out.put_i32(0); // batch length, set below
    out.put_i32(NO_PARTITION_LEADER_EPOCH);
    out.put_i8(2); // magic
    out.put_u32(0); // CRC, set below
    let crc_from = out.len();
    out.put_i16(0); // attributes: no compression, CreateTime, not transactional
    out.put_i32(i32::try_from(offset_of(last) - base_offset).unwrap_or(i32::MAX));
    out.put_i64(base_timestamp);
    out.put_i64(max_timestamp);
    out.put_i64(NO_PRODUCER_ID);
    out.put_i16(NO_PRODUCER_EPOCH);
    out.put_i32(-1); // base sequence: none without a producer
    out.put_i32(i32::try_from(shown.len()).unwrap_or(i32::MAX));
    for record in shown {
        put_record(record, base_offset, base_timestamp, out);
    }
    let batch_length = i32::try_from(out.len() - start - 12).unwrap_or(i32::MAX);
    out[start + 8..start + 12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c::crc32c(&out[crc_from..]);
    out[crc_from - 4..crc_from].copy_from_slice(&crc.to_be_bytes());
}

/// Whether Kafka consumers see `record`: S2's command records (a header with an empty
/// name) are not shown.
pub fn is_shown(record: &SequencedRecord) -> bool {
    !record.headers.iter().any(|h| h.name.is_empty())
}

fn offset_of(record: &SequencedRecord) -> i64 {
    i64::try_from(record.seq_num).unwrap_or(i64::MAX)
}

fn timestamp_of(record: &SequencedRecord) -> i64 {
    i64::try_from(record.timestamp).unwrap_or(i64::MAX)
}

/// One record of a batch: its length, then attributes, deltas, key, value and headers,
/// the reserved headers turned back into the key and a null value.
fn put_record(record: &SequencedRecord, base_offset: i64, base_timestamp: i64, out: &mut BytesMut) {
    let mut key: Option<&[u8]> = None;
    let mut null_value = false;
    let mut headers = 0i64;
    let mut headers_len = 0usize;
    for header in &record.headers {
        match header.name.as_ref() {
            KEY_HEADER => key = Some(&header.value),
            NULL_VALUE_HEADER => null_value = true,
            name => {
                headers += 1;
                headers_len += bytes_len(header_name(name).len()) + bytes_len(header.value.len());
            }
        }
    }
    let value: Option<&[u8]> = (!null_value).then_some(&record.body);
    let timestamp_delta = timestamp_of(record) - base_timestamp;
    let offset_delta = offset_of(record) - base_offset;
    let body_len = 1
        + varint_len(timestamp_delta)
        + varint_len(offset_delta)
        + nullable_len(key)
        + nullable_len(value)
        + varint_len(headers)
        + headers_len;
    put_varint(out, body_len as i64);
    out.put_i8(0);
    put_varint(out, timestamp_delta);
    put_varint(out, offset_delta);
    put_nullable(out, key);
    put_nullable(out, value);
    put_varint(out, headers);
    for header in &record.headers {
        if header.name.as_ref() != KEY_HEADER && header.name.as_ref() != NULL_VALUE_HEADER {
            put_nullable(out, Some(&header_name(&header.name)));
            put_nullable(out, Some(&header.value));
        }
    }
}

/// A header's name as Kafka's (a UTF-8 string): S2's names are bytes, so one that is not
/// UTF-8 goes out with U+FFFD in place of what is not, as Java's clients would read it.
fn header_name(name: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match String::from_utf8_lossy(name) {
        std::borrow::Cow::Borrowed(_) => std::borrow::Cow::Borrowed(name),
        std::borrow::Cow::Owned(replaced) => std::borrow::Cow::Owned(replaced.into_bytes()),
    }
}

/// Kafka's varint: zigzag, then an unsigned LEB128 varint.
fn put_varint(out: &mut BytesMut, value: i64) {
    varint::put_u64(out, varint::zigzag(value));
}

fn varint_len(value: i64) -> usize {
    varint::len_u64(varint::zigzag(value))
}

fn bytes_len(len: usize) -> usize {
    varint_len(len as i64) + len
}

fn nullable_len(bytes: Option<&[u8]>) -> usize {
    bytes.map_or(1, |b| bytes_len(b.len()))
}

/// A length-prefixed byte string, `-1` for null.
fn put_nullable(out: &mut BytesMut, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i64);
            out.put_slice(b);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{Compression, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    use proptest::prelude::*;

    use super::*;

    fn produced(key: Option<&'static [u8]>, value: Option<&'static [u8]>, compression: Compression) -> Bytes {
        let mut headers = IndexMap::new();
        headers.insert(StrBytes::from_static_str("h"), Some(Bytes::from_static(b"v")));
        let record = KafkaRecord {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: 7,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: 12,
            timestamp: 1_700_000_000_000,
            key: key.map(Bytes::from_static),
            value: value.map(Bytes::from_static),
            headers,
        };
        let mut out = BytesMut::new();
        RecordBatchEncoder::encode(&mut out, [&record], &RecordEncodeOptions { version: 2, compression }).unwrap();
        out.freeze()
    }

    /// What a Kafka client decodes from a fetched batch (the codec checks its CRC).
    fn fetched(records: &[SequencedRecord]) -> Vec<KafkaRecord> {
        let mut out = BytesMut::new();
        encode_batch(records, &mut out);
        let sets = RecordBatchDecoder::decode_all(&mut out.freeze()).unwrap();
        assert!(sets.len() <= 1, "one batch");
        sets.into_iter().flat_map(|set| set.records).collect()
    }

    /// An uncompressed batch's values and keys are the produced bytes themselves: the
    /// request is not copied before it is decoded.
    #[test]
    fn uncompressed_records_are_slices_of_the_produced_bytes() {
        let bytes = produced(Some(b"key"), Some(b"value"), Compression::None);
        let range = bytes.as_ptr_range();
        let batch = decode_produced(bytes.clone()).unwrap();
        let [record] = batch.records.as_slice() else { panic!("one record") };
        assert_eq!(&record.body[..], b"value");
        assert!(range.contains(&record.body.as_ptr()), "the value points into the produced bytes");
        let key = record.headers.iter().find(|h| h.name.as_ref() == KEY_HEADER).unwrap();
        assert!(range.contains(&key.value.as_ptr()), "the key points into the produced bytes");
    }

    #[test]
    fn keys_and_values_keep_null_apart_from_empty_through_a_round_trip() {
        type Field = Option<&'static [u8]>;
        let cases: [(Field, Field); 4] = [(None, None), (Some(b""), Some(b"")), (Some(b"k"), None), (None, Some(b"v"))];
        for compression in
            [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd]
        {
            for (key, value) in cases {
                let batch = decode_produced(produced(key, value, compression)).unwrap();
                assert_eq!(batch.producer, Some((7, 0, 12)));
                let [record] = batch.records.as_slice() else { panic!("one record") };
                let stored = SequencedRecord {
                    seq_num: 5,
                    timestamp: record.timestamp.unwrap(),
                    headers: record.headers.clone(),
                    body: record.body.clone(),
                };
                let [back] = fetched(&[stored]).try_into().unwrap();
                assert_eq!(back.key.as_deref(), key, "{compression:?}");
                assert_eq!(back.value.as_deref(), value, "{compression:?}");
                assert_eq!(back.headers.len(), 1);
                assert_eq!(
                    back.headers.get(&StrBytes::from_static_str("h")).cloned().flatten().as_deref(),
                    Some(&b"v"[..])
                );
                assert_eq!(back.offset, 5);
                assert_eq!(back.timestamp, 1_700_000_000_000);
                assert_eq!(back.producer_id, NO_PRODUCER_ID);
            }
        }
    }

    #[test]
    fn a_bad_crc_or_a_reserved_header_is_refused() {
        let mut bytes = produced(Some(b"k"), Some(b"v"), Compression::None).to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        assert!(matches!(decode_produced(bytes.clone().into()), Err(Refused::Corrupt(_))));
        assert!(matches!(decode_produced(Bytes::from_static(&[0, 1, 2])), Err(Refused::Corrupt(_))));
        let mut two = produced(None, Some(b"a"), Compression::None).to_vec();
        two.extend_from_slice(&produced(None, Some(b"b"), Compression::None));
        assert!(matches!(decode_produced(two.into()), Err(Refused::Invalid(_))));
    }

    #[test]
    fn a_read_with_gaps_and_commands_encodes_as_one_batch_without_the_commands() {
        let stored = |seq_num| SequencedRecord {
            seq_num,
            timestamp: 5,
            headers: Default::default(),
            body: Bytes::from_static(b"v"),
        };
        let trim = SequencedRecord {
            seq_num: 5,
            timestamp: 5,
            headers: vec![Header { name: Bytes::new(), value: Bytes::from_static(b"trim") }].into(),
            body: Bytes::from_static(&[0; 8]),
        };
        let records = vec![stored(3), stored(4), trim.clone(), stored(6), stored(9)];
        let offsets: Vec<i64> = fetched(&records).iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![3, 4, 6, 9]);
        assert!(fetched(&[trim]).is_empty(), "only commands: no batch at all");
    }

    fn arbitrary_record() -> impl Strategy<Value = SequencedRecord> {
        let header = (proptest::collection::vec(any::<u8>(), 1..8), proptest::collection::vec(any::<u8>(), 0..300));
        (
            0u64..1 << 40,
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..3000),
            proptest::collection::vec(header, 0..4),
        )
            .prop_map(|(timestamp, key, null_value, body, headers)| {
                // Kafka's codec here keeps one value per header name: names unique.
                let mut seen = std::collections::HashSet::new();
                let mut all: Vec<Header> = headers
                    .into_iter()
                    .filter(|(name, _)| name != KEY_HEADER && name != NULL_VALUE_HEADER)
                    .filter(|(name, _)| seen.insert(String::from_utf8_lossy(name).into_owned()))
                    .map(|(name, value)| Header { name: name.into(), value: value.into() })
                    .collect();
                if let Some(key) = key {
                    all.push(Header { name: Bytes::from_static(KEY_HEADER), value: key.into() });
                }
                if null_value {
                    all.push(Header { name: Bytes::from_static(NULL_VALUE_HEADER), value: Bytes::new() });
                }
                SequencedRecord { seq_num: 0, timestamp, headers: all.into(), body: body.into() }
            })
    }

    proptest! {
        /// Whatever the records, the batch decodes with Kafka's own codec (CRC and
        /// lengths right) to the same offsets, timestamps, keys, values and headers.
        #[test]
        fn any_records_decode_back_with_kafkas_codec(
            mut records in proptest::collection::vec(arbitrary_record(), 1..20),
            first in 0u64..1 << 40,
            gaps in proptest::collection::vec(1u64..5, 20),
        ) {
            let mut seq = first;
            for (record, gap) in records.iter_mut().zip(&gaps) {
                record.seq_num = seq;
                seq += gap;
            }
            let back = fetched(&records);
            prop_assert_eq!(back.len(), records.len());
            for (record, back) in records.iter().zip(&back) {
                let header = |name: &[u8]| record.headers.iter().find(|h| h.name.as_ref() == name).map(|h| h.value.clone());
                prop_assert_eq!(back.offset, record.seq_num as i64);
                prop_assert_eq!(back.timestamp, record.timestamp as i64);
                prop_assert_eq!(back.key.clone(), header(KEY_HEADER));
                let value = header(NULL_VALUE_HEADER).is_none().then(|| record.body.clone());
                prop_assert_eq!(back.value.clone(), value);
                let plain: Vec<(Vec<u8>, Vec<u8>)> = record
                    .headers
                    .iter()
                    .filter(|h| h.name.as_ref() != KEY_HEADER && h.name.as_ref() != NULL_VALUE_HEADER)
                    .map(|h| (String::from_utf8_lossy(&h.name).into_owned().into_bytes(), h.value.to_vec()))
                    .collect();
                let decoded: Vec<(Vec<u8>, Vec<u8>)> = back
                    .headers
                    .iter()
                    .map(|(name, value)| (name.as_bytes().to_vec(), value.clone().unwrap_or_default().to_vec()))
                    .collect();
                prop_assert_eq!(decoded, plain);
            }
        }
    }
}
