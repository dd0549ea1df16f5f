//! Kafka records to Shale records and back. One Kafka record is one Shale record: the
//! value is the body, Kafka headers are headers, in order and repeats kept, the timestamp
//! is the record's. Three reserved headers keep what a body and headers cannot:
//! [`KEY_HEADER`] holds the key (absent: a null key; empty: an empty key),
//! [`NULL_VALUE_HEADER`] marks a null value (a tombstone), and [`NULL_HEADERS_HEADER`]
//! lists the headers whose values are null, so a null key, value or header value stays
//! distinct from an empty one. A produced header with a reserved name is refused.
//!
//! Produced batches are decoded here from Kafka's protocol guide ("Record Batch"),
//! straight into Shale records: keys, values and headers are slices of the request (or
//! of its decompressed records), and a batch's headers share one list.
//!
//! Fetches answer record batches v2, uncompressed, encoded here straight from the stored
//! records (no intermediate Kafka record per row): the records come from segments that
//! are already compressed at rest if the operator chose so, and compressing again on the
//! way out would spend the agent's CPU for loopback-or-zone traffic.

use std::fmt::Write;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::records::{Compression, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use shale_proto::{varint, Header, Headers, Record, SequencedRecord};

use shale_gateway::BatchLimits;

use crate::decompress::{decompress, TooLarge, MAX_DECOMPRESSED_BYTES};

use shale_proto::record::{KEY_HEADER, NULL_HEADERS_HEADER, NULL_VALUE_HEADER};

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

/// Where a batch's fields start (the protocol guide's "Record Batch"): the base offset
/// and batch length come first, then what the length counts.
pub(crate) mod batch {
    pub const LENGTH: usize = 8;
    pub const MAGIC: usize = 16;
    pub const CRC: usize = 17;
    /// The CRC covers the batch from its attributes to its end.
    pub const ATTRIBUTES: usize = 21;
    pub const BASE_TIMESTAMP: usize = 27;
    pub const PRODUCER_ID: usize = 43;
    pub const PRODUCER_EPOCH: usize = 51;
    pub const BASE_SEQUENCE: usize = 53;
    pub const RECORD_COUNT: usize = 57;
    pub const RECORDS: usize = 61;
    pub const COMPRESSION_MASK: i16 = 0x7;
    pub const TRANSACTIONAL: i16 = 1 << 4;
    pub const CONTROL: i16 = 1 << 5;
}

/// The fewest bytes a record takes: its length, attributes, two deltas, a null key and
/// value, no headers.
const MIN_RECORD_BYTES: usize = 7;

/// Decodes a partition's produced bytes: exactly one record batch v2, as Kafka requires
/// from produce v3 on, within `limits` (its record count is checked before any record is
/// decoded, and its metered bytes as they are, so a batch over them costs no more memory
/// than one within them). The CRC is checked and the batch decompressed, within
/// [`MAX_DECOMPRESSED_BYTES`]. Uncompressed records are slices of `bytes`, not copies.
pub fn decode_produced(bytes: Bytes, limits: &BatchLimits) -> Result<ProducedBatch, Refused> {
    let corrupt = |why: &str| Refused::Corrupt(why.to_string());
    if bytes.len() <= batch::MAGIC {
        return Err(corrupt("the record batch is truncated"));
    }
    let magic = bytes[batch::MAGIC] as i8;
    if magic != 2 {
        return Err(Refused::Invalid(format!("record batch v{magic} is not served; v2 is")));
    }
    let length = usize::try_from(be_i32(&bytes, batch::LENGTH)).map_err(|_| corrupt("a negative batch length"))?;
    let end = (batch::LENGTH + 4).saturating_add(length);
    if end < batch::RECORDS || end > bytes.len() {
        return Err(corrupt("the record batch is truncated"));
    }
    if end < bytes.len() {
        return Err(Refused::Invalid(format!(
            "a partition's records must be one batch; {} bytes follow it",
            bytes.len() - end
        )));
    }
    if crc32c::crc32c(&bytes[batch::ATTRIBUTES..]) != u32::from_be_bytes(be_array(&bytes, batch::CRC)) {
        return Err(corrupt("the record batch fails its CRC"));
    }
    let attributes = i16::from_be_bytes(be_array(&bytes, batch::ATTRIBUTES));
    if attributes & batch::CONTROL != 0 {
        return Err(Refused::Invalid("control records are written by the broker, not produced".into()));
    }
    let compression = match attributes & batch::COMPRESSION_MASK {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        other => return Err(Refused::Corrupt(format!("unknown compression codec {other}"))),
    };
    let count = usize::try_from(be_i32(&bytes, batch::RECORD_COUNT)).map_err(|_| corrupt("a negative record count"))?;
    if count == 0 {
        return Err(Refused::Invalid("the record batch is empty".into()));
    }
    if count > limits.records {
        return Err(Refused::TooLarge(format!("a batch of {count} records is over the limit of {}", limits.records)));
    }
    let base_timestamp = i64::from_be_bytes(be_array(&bytes, batch::BASE_TIMESTAMP));
    let producer_id = i64::from_be_bytes(be_array(&bytes, batch::PRODUCER_ID));
    let epoch = i16::from_be_bytes(be_array(&bytes, batch::PRODUCER_EPOCH));
    let base_sequence = be_i32(&bytes, batch::BASE_SEQUENCE);
    let compressed = bytes.slice(batch::RECORDS..);
    // The codecs' decoders index into what they are given; a fault in them must cost
    // one request, not the process.
    let records = std::panic::catch_unwind(move || decompress(compressed, compression, MAX_DECOMPRESSED_BYTES))
        .map_err(|_| corrupt("the records do not decompress"))?
        .map_err(|e| match e.downcast_ref::<TooLarge>() {
            Some(too_large) => Refused::TooLarge(too_large.to_string()),
            None => Refused::Corrupt(format!("the records do not decompress: {e}")),
        })?;
    Ok(ProducedBatch {
        records: decode_records(records, count, base_timestamp, limits.metered_bytes)?,
        producer: (producer_id >= 0).then_some((producer_id, epoch, base_sequence)),
        transactional: attributes & batch::TRANSACTIONAL != 0,
    })
}

fn be_array<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

fn be_i32(bytes: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(be_array(bytes, at))
}

/// The `count` records of a batch, exactly filling `data`, as Shale records of at most
/// `metered_bytes` in all.
fn decode_records(data: Bytes, count: usize, base_timestamp: i64, metered_bytes: u64) -> Result<Vec<Record>, Refused> {
    let mut reader = Reader { data: &data, at: 0, metered_left: metered_bytes, metered_limit: metered_bytes };
    let mut records = Vec::with_capacity(count.min(data.len() / MIN_RECORD_BYTES));
    let mut headers = Vec::new();
    let mut spans = Vec::with_capacity(records.capacity());
    for _ in 0..count {
        let start = headers.len();
        let (timestamp, body) = reader.record(base_timestamp, &mut headers)?;
        let end = u32::try_from(headers.len()).map_err(|_| Refused::Invalid("too many headers".into()))?;
        spans.push(start as u32..end);
        records.push(Record { timestamp, headers: Headers::default(), body });
    }
    if reader.at != data.len() {
        return Err(Refused::Corrupt(format!("{} bytes follow the batch's last record", data.len() - reader.at)));
    }
    for (record, shared) in records.iter_mut().zip(Headers::share(headers, spans)) {
        record.headers = shared;
    }
    Ok(records)
}

/// Reads records from a batch's (decompressed) records, as slices of them, charging
/// each its metered bytes.
struct Reader<'a> {
    data: &'a Bytes,
    at: usize,
    metered_left: u64,
    metered_limit: u64,
}

impl Reader<'_> {
    fn truncated() -> Refused {
        Refused::Corrupt("a record is truncated".into())
    }

    /// Takes `bytes` of S2's metering (see [`shale_proto::record::metered_bytes`]) from
    /// what the batch may still take.
    fn charge(&mut self, bytes: usize) -> Result<(), Refused> {
        self.metered_left = self.metered_left.checked_sub(bytes as u64).ok_or_else(|| {
            Refused::TooLarge(format!("the batch's records are over {} bytes, metered as S2 does", self.metered_limit))
        })?;
        Ok(())
    }

    fn push(&mut self, headers: &mut Vec<Header>, header: Header) -> Result<(), Refused> {
        self.charge(2 + header.name.len() + header.value.len())?;
        headers.push(header);
        Ok(())
    }

    /// Where `len` bytes from the cursor end, if the data holds them.
    fn end_of(&self, len: usize) -> Result<usize, Refused> {
        self.at.checked_add(len).filter(|end| *end <= self.data.len()).ok_or_else(Self::truncated)
    }

    fn varint(&mut self) -> Result<i64, Refused> {
        let mut rest = self.data.get(self.at..).ok_or_else(Self::truncated)?;
        let value = varint::get_u64(&mut rest).ok_or_else(Self::truncated)?;
        self.at = self.data.len() - rest.len();
        Ok(varint::unzigzag(value))
    }

    /// A length-prefixed byte string; `None` for length -1 (null).
    fn nullable(&mut self) -> Result<Option<Bytes>, Refused> {
        match self.varint()? {
            -1 => Ok(None),
            len => {
                let len = usize::try_from(len).map_err(|_| Refused::Corrupt(format!("a length of {len}")))?;
                let end = self.end_of(len)?;
                let bytes = self.data.slice(self.at..end);
                self.at = end;
                Ok(Some(bytes))
            }
        }
    }

    /// One record: its timestamp and value, its key and headers pushed to `headers`
    /// (the reserved ones first, then the record's, then the positions of null values).
    fn record(&mut self, base_timestamp: i64, headers: &mut Vec<Header>) -> Result<(Option<u64>, Bytes), Refused> {
        let len = usize::try_from(self.varint()?).map_err(|_| Refused::Corrupt("a negative record length".into()))?;
        let end = self.end_of(len)?;
        self.at = self.at.checked_add(1).filter(|at| *at <= end).ok_or_else(Self::truncated)?; // attributes
        let timestamp_delta = self.varint()?;
        self.varint()?; // offset delta: the partition assigns offsets
        let key = self.nullable()?;
        let value = self.nullable()?;
        self.charge(8 + value.as_ref().map_or(0, Bytes::len))?;
        if let Some(key) = key {
            self.push(headers, Header { name: Bytes::from_static(KEY_HEADER), value: key })?;
        }
        if value.is_none() {
            self.push(headers, Header { name: Bytes::from_static(NULL_VALUE_HEADER), value: Bytes::new() })?;
        }
        let count = self.varint()?;
        let count = usize::try_from(count).map_err(|_| Refused::Corrupt(format!("a header count of {count}")))?;
        let mut null_positions = String::new();
        for position in 0..count {
            let name = self.nullable()?.ok_or_else(|| Refused::Corrupt("a header without a name".into()))?;
            if is_reserved(&name) || name.is_empty() {
                let name = String::from_utf8_lossy(&name);
                return Err(Refused::Invalid(format!("header name `{name}` is reserved")));
            }
            let value = self.nullable()?;
            if value.is_none() {
                let separator = if null_positions.is_empty() { "" } else { "," };
                let _ = write!(null_positions, "{separator}{position}");
            }
            self.push(headers, Header { name, value: value.unwrap_or_default() })?;
        }
        if !null_positions.is_empty() {
            self.push(headers, Header { name: Bytes::from_static(NULL_HEADERS_HEADER), value: null_positions.into() })?;
        }
        if self.at != end {
            return Err(Refused::Corrupt("a record's length does not match its fields".into()));
        }
        let timestamp = base_timestamp.checked_add(timestamp_delta).and_then(|t| u64::try_from(t).ok());
        Ok((timestamp, value.unwrap_or_default()))
    }
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
/// the reserved headers turned back into the key, a null value and null header values.
fn put_record(record: &SequencedRecord, base_offset: i64, base_timestamp: i64, out: &mut BytesMut) {
    let mut key: Option<&[u8]> = None;
    let mut null_value = false;
    let mut null_positions: Option<&[u8]> = None;
    let mut headers = 0i64;
    let mut headers_len = 0usize;
    for header in &record.headers {
        match header.name.as_ref() {
            KEY_HEADER => key = Some(&header.value),
            NULL_VALUE_HEADER => null_value = true,
            NULL_HEADERS_HEADER => null_positions = Some(&header.value),
            // A null value takes as many bytes as an empty one (the varint -1 or 0).
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
    let mut nulls = null_positions.map(parse_positions).unwrap_or_default().into_iter().peekable();
    let plain = record.headers.iter().filter(|h| !is_reserved(&h.name));
    for (position, header) in plain.enumerate() {
        while nulls.next_if(|p| *p < position).is_some() {}
        let listed = nulls.next_if_eq(&position).is_some();
        // Only an empty value can be null: a listed one with bytes keeps them.
        let value = (!(listed && header.value.is_empty())).then_some(header.value.as_ref());
        put_nullable(out, Some(&header_name(&header.name)));
        put_nullable(out, value);
    }
}

/// Whether `name` is one of the reserved headers a Kafka record's key, null value and
/// null header values are kept in (Kafka consumers see them as those, not as headers).
fn is_reserved(name: &[u8]) -> bool {
    name == KEY_HEADER || name == NULL_VALUE_HEADER || name == NULL_HEADERS_HEADER
}

/// The positions a [`NULL_HEADERS_HEADER`] lists, in order (what does not parse is
/// passed over: S2's clients may write the header too).
fn parse_positions(list: &[u8]) -> Vec<usize> {
    let mut positions: Vec<usize> =
        list.split(|b| *b == b',').filter_map(|p| std::str::from_utf8(p).ok()?.parse().ok()).collect();
    positions.sort_unstable();
    positions
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
    use kafka_protocol::records::{
        Record as KafkaRecord, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use proptest::prelude::*;

    use super::*;

    /// The most records the tests' batches may hold, and their metered bytes.
    const LIMITS: BatchLimits = BatchLimits { records: 100, metered_bytes: 1 << 20 };

    fn decode(bytes: Bytes) -> Result<ProducedBatch, Refused> {
        decode_produced(bytes, &LIMITS)
    }

    fn produced(key: Option<&'static [u8]>, value: Option<&'static [u8]>, compression: Compression) -> Bytes {
        produced_with_header("h", key, value, compression)
    }

    /// A batch of one record by Kafka's codec, with one header `header` = "v".
    fn produced_with_header(
        header: &'static str,
        key: Option<&'static [u8]>,
        value: Option<&'static [u8]>,
        compression: Compression,
    ) -> Bytes {
        let mut headers = IndexMap::new();
        headers.insert(StrBytes::from_static_str(header), Some(Bytes::from_static(b"v")));
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
        let batch = decode(bytes.clone()).unwrap();
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
                let batch = decode(produced(key, value, compression)).unwrap();
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
        assert!(matches!(decode(bytes.clone().into()), Err(Refused::Corrupt(_))));
        assert!(matches!(decode(Bytes::from_static(&[0, 1, 2])), Err(Refused::Corrupt(_))));
        let mut two = produced(None, Some(b"a"), Compression::None).to_vec();
        two.extend_from_slice(&produced(None, Some(b"b"), Compression::None));
        assert!(matches!(decode(two.into()), Err(Refused::Invalid(_))));
        for reserved in ["kafka.key", "kafka.null-value", "kafka.null-headers", ""] {
            let bytes = produced_with_header(reserved, None, Some(b"v"), Compression::None);
            assert!(matches!(decode(bytes), Err(Refused::Invalid(_))), "{reserved:?}");
        }
        let unreserved = produced_with_header("kafka.other", None, Some(b"v"), Compression::None);
        assert!(decode(unreserved).is_ok());
    }

    /// `batch` with its length and CRC made right again after a change.
    fn resealed(mut batch: Vec<u8>) -> Bytes {
        let length = (batch.len() - batch::LENGTH - 4) as i32;
        batch[batch::LENGTH..batch::LENGTH + 4].copy_from_slice(&length.to_be_bytes());
        let crc = crc32c::crc32c(&batch[batch::ATTRIBUTES..]);
        batch[batch::CRC..batch::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        batch.into()
    }

    #[test]
    fn records_that_do_not_fill_their_batch_exactly_are_corrupt() {
        let stored = |seq_num| SequencedRecord {
            seq_num,
            timestamp: 5,
            headers: vec![Header { name: Bytes::from_static(b"h"), value: Bytes::from_static(b"v") }].into(),
            body: Bytes::from_static(b"value"),
        };
        let mut out = BytesMut::new();
        encode_batch(&[stored(0), stored(1)], &mut out);
        let batch = out.to_vec();
        assert_eq!(decode(resealed(batch.clone())).unwrap().records.len(), 2, "sealed as it was, it decodes");
        let with_count = |count: i32| {
            let mut changed = batch.clone();
            changed[batch::RECORD_COUNT..batch::RECORDS].copy_from_slice(&count.to_be_bytes());
            resealed(changed)
        };
        for count in [1, 3, -1] {
            assert!(matches!(decode(with_count(count)), Err(Refused::Corrupt(_))), "count {count}");
        }
        assert!(matches!(decode(with_count(0)), Err(Refused::Invalid(_))), "an empty batch");
        let over = i32::try_from(LIMITS.records + 1).unwrap();
        assert!(matches!(decode(with_count(over)), Err(Refused::TooLarge(_))), "refused by its count");
        // One byte more inside the batch; the first record's length one short or long.
        let mut longer = batch.clone();
        longer.push(0);
        assert!(matches!(decode(resealed(longer)), Err(Refused::Corrupt(_))));
        for delta in [-1i8, 1] {
            let mut changed = batch.clone();
            // A record's length is a zigzag varint: 2 more or less is one more or less.
            changed[batch::RECORDS] = changed[batch::RECORDS].wrapping_add_signed(2 * delta);
            assert!(matches!(decode(resealed(changed)), Err(Refused::Corrupt(_))), "{delta}");
        }
        // Each cut short of the whole batch is refused, and nothing panics.
        for len in 0..batch.len() {
            assert!(decode(Bytes::copy_from_slice(&batch[..len])).is_err(), "cut at {len}");
        }
    }

    #[test]
    fn a_batch_metered_over_its_limit_is_too_large_and_one_at_it_is_not() {
        let stored = |seq_num| SequencedRecord {
            seq_num,
            timestamp: 5,
            headers: vec![
                Header { name: Bytes::from_static(KEY_HEADER), value: Bytes::from_static(b"key") },
                Header { name: Bytes::from_static(b"h"), value: Bytes::from_static(b"v") },
            ]
            .into(),
            body: Bytes::from_static(b"value"),
        };
        let mut out = BytesMut::new();
        encode_batch(&[stored(0), stored(1)], &mut out);
        let batch = out.freeze();
        let metered: u64 = decode(batch.clone()).unwrap().records.iter().map(Record::metered_bytes).sum();
        assert_eq!(metered, 2 * (8 + 2 * 2 + (9 + 3) + (1 + 1) + 5), "S2's metering of each record");
        let at = BatchLimits { records: 2, metered_bytes: metered };
        assert_eq!(decode_produced(batch.clone(), &at).unwrap().records.len(), 2);
        let under = BatchLimits { metered_bytes: metered - 1, ..at };
        assert!(matches!(decode_produced(batch.clone(), &under), Err(Refused::TooLarge(_))));
        let fewer = BatchLimits { records: 1, ..at };
        assert!(matches!(decode_produced(batch, &fewer), Err(Refused::TooLarge(_))));
    }

    /// A Kafka record as it is stored: the reserved headers first, its headers in order
    /// (repeated names and null values among them), then the positions of the null ones.
    fn arbitrary_kafka_record() -> impl Strategy<Value = SequencedRecord> {
        let name = proptest::collection::vec(any::<u8>(), 1..6).prop_filter("not reserved", |n| !is_reserved(n));
        let value = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40));
        (
            0u64..1 << 40,
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
            proptest::collection::vec((name.clone(), value), 0..6),
            proptest::collection::vec(name, 0..3),
        )
            .prop_map(|(timestamp, key, value, headers, repeated)| {
                let mut all = Vec::new();
                if let Some(key) = key {
                    all.push(Header { name: Bytes::from_static(KEY_HEADER), value: key.into() });
                }
                if value.is_none() {
                    all.push(Header { name: Bytes::from_static(NULL_VALUE_HEADER), value: Bytes::new() });
                }
                // Names Kafka sends as UTF-8 (the fetch makes them so), some repeated.
                let utf8 = |name: Vec<u8>| Bytes::from(String::from_utf8_lossy(&name).into_owned());
                let mut nulls = Vec::new();
                let repeats = repeated.into_iter().map(|name| (name, Some(b"again".to_vec())));
                for (position, (name, value)) in headers.into_iter().chain(repeats).enumerate() {
                    if value.is_none() {
                        nulls.push(position.to_string());
                    }
                    all.push(Header { name: utf8(name), value: value.unwrap_or_default().into() });
                }
                if let Some(first) = all.iter().position(|h| !is_reserved(&h.name)) {
                    let again = all[first].clone();
                    all.push(again);
                }
                if !nulls.is_empty() {
                    all.push(Header { name: Bytes::from_static(NULL_HEADERS_HEADER), value: nulls.join(",").into() });
                }
                SequencedRecord { seq_num: 0, timestamp, headers: all.into(), body: value.unwrap_or_default().into() }
            })
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
                    .filter(|(name, _)| !is_reserved(name))
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
        /// A fetched batch produced again stores the same records: keys, null values,
        /// repeated header names and null header values survive both directions.
        #[test]
        fn stored_records_fetched_and_produced_again_are_the_same(
            mut records in proptest::collection::vec(arbitrary_kafka_record(), 1..20),
        ) {
            for (seq_num, record) in records.iter_mut().enumerate() {
                record.seq_num = seq_num as u64;
            }
            let mut out = BytesMut::new();
            encode_batch(&records, &mut out);
            let back = decode(out.freeze()).unwrap();
            prop_assert_eq!(back.records.len(), records.len());
            for (record, back) in records.iter().zip(&back.records) {
                prop_assert_eq!(&back.headers, &record.headers);
                prop_assert_eq!(&back.body, &record.body);
                prop_assert_eq!(back.timestamp, Some(record.timestamp));
            }
        }

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
                    .filter(|h| !is_reserved(&h.name))
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
