//! Kafka records to Shale records and back. One Kafka record is one Shale record: the
//! value is the body, Kafka headers are headers, the timestamp is the record's. Two
//! reserved headers keep what a body and headers cannot: [`KEY_HEADER`] holds the key
//! (absent: a null key; empty: an empty key) and [`NULL_VALUE_HEADER`] marks a null value
//! (a tombstone), so a null key or value stays distinct from an empty one. A produced
//! header with a reserved name is refused.
//!
//! Fetches answer record batches v2, uncompressed: the records come from segments that
//! are already compressed at rest if the operator chose so, and compressing again on the
//! way out would spend the agent's CPU for loopback-or-zone traffic.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record as KafkaRecord, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};
use shale_proto::{Header, Record, SequencedRecord};

use crate::decompress::{decompress, TooLarge, MAX_DECOMPRESSED_BYTES};

/// The header holding a record's key.
pub const KEY_HEADER: &[u8] = b"kafka.key";
/// The header marking a null value (a tombstone).
pub const NULL_VALUE_HEADER: &[u8] = b"kafka.null-value";

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
/// [`MAX_DECOMPRESSED_BYTES`].
pub fn decode_produced(bytes: &[u8]) -> Result<ProducedBatch, Refused> {
    let mut buf = Bytes::copy_from_slice(bytes);
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
    Ok(Record { timestamp, headers, body: record.value.clone().unwrap_or_default() })
}

/// A stored record as Kafka sees it; `None` for S2's command records (fence, trim),
/// which Kafka consumers step over as a gap in the offsets.
pub fn to_kafka(record: &SequencedRecord) -> Option<KafkaRecord> {
    if record.headers.iter().any(|h| h.name.is_empty()) {
        return None;
    }
    let mut key = None;
    let mut null_value = false;
    let mut headers = IndexMap::new();
    for header in &record.headers {
        match header.name.as_ref() {
            KEY_HEADER => key = Some(header.value.clone()),
            NULL_VALUE_HEADER => null_value = true,
            name => {
                let name = StrBytes::from_string(String::from_utf8_lossy(name).into_owned());
                headers.insert(name, Some(header.value.clone()));
            }
        }
    }
    let offset = i64::try_from(record.seq_num).unwrap_or(i64::MAX);
    Some(KafkaRecord {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
        timestamp_type: TimestampType::Creation,
        offset,
        // The codec starts a new batch wherever offset minus sequence changes; keeping
        // it constant puts every record of a read in one batch. Without a producer id
        // the batch's sequence means nothing to consumers.
        sequence: offset as i32,
        timestamp: i64::try_from(record.timestamp).unwrap_or(i64::MAX),
        key,
        value: (!null_value).then(|| record.body.clone()),
        headers,
    })
}

/// Appends `records` to `out` as one uncompressed record batch v2.
pub fn encode_batch(records: &[KafkaRecord], out: &mut BytesMut) -> Result<(), String> {
    if records.is_empty() {
        return Ok(());
    }
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(out, records.iter(), &options).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
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

    #[test]
    fn keys_and_values_keep_null_apart_from_empty_through_a_round_trip() {
        type Field = Option<&'static [u8]>;
        let cases: [(Field, Field); 4] = [(None, None), (Some(b""), Some(b"")), (Some(b"k"), None), (None, Some(b"v"))];
        for compression in
            [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd]
        {
            for (key, value) in cases {
                let batch = decode_produced(&produced(key, value, compression)).unwrap();
                assert_eq!(batch.producer, Some((7, 0, 12)));
                let [record] = batch.records.as_slice() else { panic!("one record") };
                let stored = SequencedRecord {
                    seq_num: 5,
                    timestamp: record.timestamp.unwrap(),
                    headers: record.headers.clone(),
                    body: record.body.clone(),
                };
                let back = to_kafka(&stored).unwrap();
                assert_eq!(back.key.as_deref(), key, "{compression:?}");
                assert_eq!(back.value.as_deref(), value, "{compression:?}");
                assert_eq!(back.headers.len(), 1);
                assert_eq!(back.offset, 5);
                assert_eq!(back.timestamp, 1_700_000_000_000);
            }
        }
    }

    #[test]
    fn a_bad_crc_or_a_reserved_header_is_refused() {
        let mut bytes = produced(Some(b"k"), Some(b"v"), Compression::None).to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        assert!(matches!(decode_produced(&bytes), Err(Refused::Corrupt(_))));
        assert!(matches!(decode_produced(&[0, 1, 2]), Err(Refused::Corrupt(_))));
        let mut two = produced(None, Some(b"a"), Compression::None).to_vec();
        two.extend_from_slice(&produced(None, Some(b"b"), Compression::None));
        assert!(matches!(decode_produced(&two), Err(Refused::Invalid(_))));
    }

    #[test]
    fn a_read_with_gaps_encodes_as_one_batch() {
        let stored =
            |seq_num| SequencedRecord { seq_num, timestamp: 5, headers: vec![], body: Bytes::from_static(b"v") };
        let records: Vec<_> = [3, 4, 6, 9].into_iter().map(|s| to_kafka(&stored(s)).unwrap()).collect();
        let mut out = BytesMut::new();
        encode_batch(&records, &mut out).unwrap();
        let sets = RecordBatchDecoder::decode_all(&mut out.freeze()).unwrap();
        assert_eq!(sets.len(), 1, "one batch");
        assert_eq!(sets[0].records.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![3, 4, 6, 9]);
    }

    #[test]
    fn command_records_are_not_shown_to_kafka() {
        let trim = SequencedRecord {
            seq_num: 1,
            timestamp: 1,
            headers: vec![Header { name: Bytes::new(), value: Bytes::from_static(b"trim") }],
            body: Bytes::from_static(&[0; 8]),
        };
        assert!(to_kafka(&trim).is_none());
    }
}
