//! The segment object: many blocks (one per append) from many streams in one object.
//!
//! ```text
//! header  : "SHALESEG" | version u8 (=1) | 3 zero bytes                       (12 bytes)
//! blocks  : block*                         (what index entries point at)
//! footer  : varint count | (varint len, stream, varint records, varint offset, varint len)*
//! trailer : footer offset u64 LE | crc32c(footer) u32 LE | "SHALEEND"         (20 bytes)
//!
//! block   : kind u8 | varint records | varint arrival ms | record* | crc32c u32 LE
//!           kind: bits 0-3 codec (=0, none); bit 4: sparse (each record starts with its
//!           position, a varint, strictly increasing: its offset minus the entry's first)
//! record  : [varint position] | flags u8 (bit 0: client timestamp present) | [varint zigzag(ts - arrival)]
//!           | varint headers | (varint len, name, varint len, value)* | varint len, body
//! ```
//! `docs/segment-format.md` is the full specification. Sequence numbers are not in the
//! object: the sequencer assigns them at commit and keeps them in the index.

use bytes::{BufMut, Bytes, BytesMut};

use crate::record::{Header, Headers, Record};
use crate::varint;

pub const SEGMENT_MAGIC: &[u8; 8] = b"SHALESEG";
pub const TRAILER_MAGIC: &[u8; 8] = b"SHALEEND";
pub const FORMAT_VERSION: u8 = 1;
pub const HEADER_LEN: usize = 12;
pub const TRAILER_LEN: usize = 20;
const CODEC_NONE: u8 = 0;
/// Block kind bit: the records carry their positions (a key-compacted block has gaps).
const KIND_SPARSE: u8 = 0x10;
const FLAG_TIMESTAMP: u8 = 1;

/// Why an object or block could not be decoded. Always names the object.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum SegmentError {
    #[error("segment truncated: object=`{object}` {detail}")]
    Truncated { object: String, detail: &'static str },
    #[error("not a shale segment: object=`{object}` {detail}")]
    Foreign { object: String, detail: &'static str },
    #[error("segment checksum mismatch: object=`{object}` offset={offset}")]
    Checksum { object: String, offset: u64 },
    #[error("malformed segment: object=`{object}` offset={offset} {detail}")]
    Malformed { object: String, offset: u64, detail: &'static str },
}

/// Object key of a segment: `segments/<ulid>.seg`. The ULID's time prefix makes keys
/// sort by creation time, which GC uses to find old orphans.
pub fn object_path(segment_id: u128) -> String {
    format!("segments/{}.seg", ulid::Ulid(segment_id))
}

/// Where one block sits in its segment object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// The stream the block belongs to (`basin/stream`), for diagnostics and GC.
    pub stream: Bytes,
    pub record_count: u32,
    pub offset: u64,
    pub len: u32,
}

/// A decoded block: the arrival time the gateway stamped and the records as appended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedBlock {
    pub arrival: u64,
    pub records: Vec<Record>,
    /// Each record's offset minus its entry's first, when the block is sparse (written
    /// by key compaction); empty when the records are dense from the entry's first.
    pub positions: Vec<u32>,
}

impl DecodedBlock {
    /// Record `i`'s offset minus its entry's first.
    pub fn position(&self, i: usize) -> u64 {
        self.positions.get(i).map_or(i as u64, |&p| u64::from(p))
    }

    /// The offsets past the entry's first that the block spans: its last record's
    /// position plus one (0 when it holds no record).
    pub fn span(&self) -> u64 {
        self.records.len().checked_sub(1).map_or(0, |last| self.position(last) + 1)
    }
}

/// The decoded footer of a segment object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentFooter {
    pub blocks: Vec<BlockInfo>,
}

/// Encodes one block: the records of one append, stamped with `arrival` (ms).
pub fn encode_block(arrival: u64, records: &[Record]) -> Bytes {
    encode(arrival, records, None)
}

/// Encodes a sparse block: record `i` sits at `positions[i]` past its entry's first
/// offset (strictly increasing, as many as the records). What key compaction writes.
pub fn encode_sparse_block(arrival: u64, records: &[Record], positions: &[u32]) -> Bytes {
    debug_assert_eq!(records.len(), positions.len());
    encode(arrival, records, Some(positions))
}

fn encode(arrival: u64, records: &[Record], positions: Option<&[u32]>) -> Bytes {
    let mut size = 1 + varint::len_u64(records.len() as u64) + varint::len_u64(arrival) + 4;
    for record in records {
        size += 5 + 1 + 10 + varint::len_u64(record.headers.len() as u64) + 10 + record.body.len();
        for header in &record.headers {
            size += 20 + header.name.len() + header.value.len();
        }
    }
    let mut buf = BytesMut::with_capacity(size);
    buf.put_u8(if positions.is_some() { CODEC_NONE | KIND_SPARSE } else { CODEC_NONE });
    varint::put_u64(&mut buf, records.len() as u64);
    varint::put_u64(&mut buf, arrival);
    for (i, record) in records.iter().enumerate() {
        if let Some(positions) = positions {
            varint::put_u64(&mut buf, u64::from(positions.get(i).copied().unwrap_or(i as u32)));
        }
        match record.timestamp {
            Some(ts) => {
                buf.put_u8(FLAG_TIMESTAMP);
                varint::put_u64(&mut buf, varint::zigzag((ts as i64).wrapping_sub(arrival as i64)));
            }
            None => buf.put_u8(0),
        }
        varint::put_u64(&mut buf, record.headers.len() as u64);
        for header in &record.headers {
            put_bytes(&mut buf, &header.name);
            put_bytes(&mut buf, &header.value);
        }
        put_bytes(&mut buf, &record.body);
    }
    let crc = crc32c::crc32c(&buf);
    buf.put_u32_le(crc);
    buf.freeze()
}

fn put_bytes(buf: &mut BytesMut, bytes: &[u8]) {
    varint::put_u64(buf, bytes.len() as u64);
    buf.put_slice(bytes);
}

/// Decodes one block fetched by range from `object`. Record bodies share `block`'s
/// buffer (no copies).
pub fn decode_block(object: &str, block: &Bytes) -> Result<DecodedBlock, SegmentError> {
    let malformed = |detail| SegmentError::Malformed { object: object.to_string(), offset: 0, detail };
    if block.len() < 4 {
        return Err(SegmentError::Truncated { object: object.to_string(), detail: "block shorter than its checksum" });
    }
    let (body, crc_bytes) = block.split_at(block.len() - 4);
    let expected = u32::from_le_bytes([crc_bytes[0], crc_bytes[1], crc_bytes[2], crc_bytes[3]]);
    if crc32c::crc32c(body) != expected {
        return Err(SegmentError::Checksum { object: object.to_string(), offset: 0 });
    }
    let mut input = body;
    let kind = take_u8(&mut input).ok_or_else(|| malformed("missing codec"))?;
    if kind & !KIND_SPARSE != CODEC_NONE {
        return Err(malformed("unknown codec"));
    }
    let sparse = kind & KIND_SPARSE != 0;
    let count = varint::get_u64(&mut input).ok_or_else(|| malformed("bad record count"))?;
    let arrival = varint::get_u64(&mut input).ok_or_else(|| malformed("bad arrival time"))?;
    // Every record takes at least 3 bytes, so a count beyond that is corrupt, not a reason
    // to allocate.
    if count > (input.len() / 3) as u64 {
        return Err(malformed("record count exceeds block size"));
    }
    let mut records = Vec::with_capacity(count as usize);
    let mut positions = Vec::with_capacity(if sparse { count as usize } else { 0 });
    // The block's headers, each record's a span of them: one list for the whole block.
    let mut headers = Vec::new();
    let mut spans = Vec::with_capacity(count as usize);
    for index in 0..count {
        if sparse {
            let position = varint::get_u64(&mut input)
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| malformed("bad record position"))?;
            if positions.last().is_some_and(|&last| position <= last) {
                return Err(malformed("record positions do not increase"));
            }
            positions.push(position);
        }
        let flags = take_u8(&mut input).ok_or_else(|| malformed("missing record flags"))?;
        let timestamp = match flags {
            0 => None,
            FLAG_TIMESTAMP => {
                let delta = varint::get_u64(&mut input).ok_or_else(|| malformed("bad timestamp"))?;
                Some((arrival as i64).wrapping_add(varint::unzigzag(delta)) as u64)
            }
            _ => return Err(malformed("unknown record flags")),
        };
        let header_count = varint::get_u64(&mut input).ok_or_else(|| malformed("bad header count"))?;
        if header_count > (input.len() / 2) as u64 {
            return Err(malformed("header count exceeds block size"));
        }
        let start = headers.len();
        if headers.capacity() == 0 && header_count > 0 {
            // Sized once, as if every record left had as many (a block's records are
            // usually alike: a Kafka key each, or none), where growing by doubling would
            // leave up to half the list unused for as long as the block is cached; never
            // more than the block's bytes can hold (two a header at least).
            let alike = (count - index).saturating_mul(header_count);
            headers.reserve_exact(alike.min((input.len() / 2) as u64) as usize);
        }
        for _ in 0..header_count {
            let name = take_bytes(block, &mut input).ok_or_else(|| malformed("bad header name"))?;
            let value = take_bytes(block, &mut input).ok_or_else(|| malformed("bad header value"))?;
            headers.push(Header { name, value });
        }
        // A block's headers take at least two bytes each, so their count fits in u32.
        let span = u32::try_from(start).ok().zip(u32::try_from(headers.len()).ok());
        spans.push(span.map(|(start, end)| start..end).ok_or_else(|| malformed("too many headers"))?);
        let body = take_bytes(block, &mut input).ok_or_else(|| malformed("bad body"))?;
        records.push(Record { timestamp, headers: Headers::default(), body });
    }
    if !input.is_empty() {
        return Err(malformed("trailing bytes after the last record"));
    }
    headers.shrink_to_fit();
    for (record, shared) in records.iter_mut().zip(Headers::share(headers, spans)) {
        record.headers = shared;
    }
    Ok(DecodedBlock { arrival, records, positions })
}

fn take_u8(input: &mut &[u8]) -> Option<u8> {
    let (&first, rest) = input.split_first()?;
    *input = rest;
    Some(first)
}

/// Takes a length-prefixed byte string as a slice of `whole` (which `input` points into).
fn take_bytes(whole: &Bytes, input: &mut &[u8]) -> Option<Bytes> {
    let len = usize::try_from(varint::get_u64(input)?).ok()?;
    if len > input.len() {
        return None;
    }
    let bytes = whole.slice_ref(&input[..len]);
    *input = &input[len..];
    Some(bytes)
}

/// Builds a segment object from encoded blocks, without copying them: the object is the
/// header, the blocks as they are and the footer, handed to the store as parts.
#[derive(Debug)]
pub struct SegmentBuilder {
    parts: Vec<Bytes>,
    len: usize,
    blocks: Vec<BlockInfo>,
}

impl Default for SegmentBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl SegmentBuilder {
    pub fn new() -> Self {
        let mut header = BytesMut::with_capacity(SEGMENT_MAGIC.len() + 4);
        header.put_slice(SEGMENT_MAGIC);
        header.put_u8(FORMAT_VERSION);
        header.put_slice(&[0, 0, 0]);
        let len = header.len();
        Self { parts: vec![header.freeze()], len, blocks: Vec::new() }
    }

    /// Appends a block made by [`encode_block`] and returns where it lies.
    pub fn push_block(&mut self, stream: Bytes, record_count: u32, block: Bytes) -> BlockInfo {
        let info = BlockInfo {
            stream,
            record_count,
            offset: self.len as u64,
            len: u32::try_from(block.len()).expect("blocks are bounded by the 1 MiB batch limit"),
        };
        self.len += block.len();
        self.parts.push(block);
        self.blocks.push(info.clone());
        info
    }

    /// Bytes so far (header and blocks).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Adds footer and trailer; returns the whole object as its parts, in order.
    pub fn finish_parts(mut self) -> Vec<Bytes> {
        let footer_offset = self.len as u64;
        let mut footer = BytesMut::with_capacity(16 + self.blocks.iter().map(|b| b.stream.len() + 24).sum::<usize>());
        varint::put_u64(&mut footer, self.blocks.len() as u64);
        for block in &self.blocks {
            varint::put_u64(&mut footer, block.stream.len() as u64);
            footer.put_slice(&block.stream);
            varint::put_u64(&mut footer, u64::from(block.record_count));
            varint::put_u64(&mut footer, block.offset);
            varint::put_u64(&mut footer, u64::from(block.len));
        }
        let crc = crc32c::crc32c(&footer);
        footer.put_u64_le(footer_offset);
        footer.put_u32_le(crc);
        footer.put_slice(TRAILER_MAGIC);
        self.parts.push(footer.freeze());
        self.parts
    }

    /// The whole object in one buffer (a copy of [`Self::finish_parts`]).
    pub fn finish(self) -> Bytes {
        let parts = self.finish_parts();
        let mut whole = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
        for part in parts {
            whole.put_slice(&part);
        }
        whole.freeze()
    }
}

/// Checks header and trailer and decodes the footer of a whole segment object.
pub fn decode_footer(object: &str, whole: &[u8]) -> Result<SegmentFooter, SegmentError> {
    let truncated = |detail| SegmentError::Truncated { object: object.to_string(), detail };
    let foreign = |detail| SegmentError::Foreign { object: object.to_string(), detail };
    if whole.len() < HEADER_LEN + TRAILER_LEN {
        return Err(truncated("shorter than header and trailer"));
    }
    if &whole[..8] != SEGMENT_MAGIC {
        return Err(foreign("bad header magic"));
    }
    if whole[8] != FORMAT_VERSION || whole[9..12] != [0, 0, 0] {
        return Err(foreign("unsupported version"));
    }
    let trailer = &whole[whole.len() - TRAILER_LEN..];
    if &trailer[12..] != TRAILER_MAGIC {
        return Err(truncated("missing trailer"));
    }
    let footer_offset = u64::from_le_bytes(trailer[..8].try_into().expect("8-byte slice"));
    let crc = u32::from_le_bytes(trailer[8..12].try_into().expect("4-byte slice"));
    let footer_end = whole.len() - TRAILER_LEN;
    let footer_offset = usize::try_from(footer_offset)
        .ok()
        .filter(|&o| o >= HEADER_LEN && o <= footer_end)
        .ok_or_else(|| truncated("footer offset out of range"))?;
    let footer = &whole[footer_offset..footer_end];
    if crc32c::crc32c(footer) != crc {
        return Err(SegmentError::Checksum { object: object.to_string(), offset: footer_offset as u64 });
    }
    let malformed =
        |detail| SegmentError::Malformed { object: object.to_string(), offset: footer_offset as u64, detail };
    let mut input = footer;
    let count = varint::get_u64(&mut input).ok_or_else(|| malformed("bad block count"))?;
    if count > input.len() as u64 {
        return Err(malformed("block count exceeds footer size"));
    }
    let mut blocks = Vec::with_capacity(count as usize);
    let mut expected_offset = HEADER_LEN as u64;
    for _ in 0..count {
        let stream_len = varint::get_u64(&mut input).ok_or_else(|| malformed("bad stream length"))? as usize;
        if stream_len > input.len() {
            return Err(malformed("stream name past footer end"));
        }
        let stream = Bytes::copy_from_slice(&input[..stream_len]);
        input = &input[stream_len..];
        let record_count = varint::get_u64(&mut input).ok_or_else(|| malformed("bad record count"))?;
        let offset = varint::get_u64(&mut input).ok_or_else(|| malformed("bad block offset"))?;
        let len = varint::get_u64(&mut input).ok_or_else(|| malformed("bad block length"))?;
        if offset != expected_offset {
            return Err(malformed("blocks do not tile the object"));
        }
        let record_count = u32::try_from(record_count).map_err(|_| malformed("record count too large"))?;
        let len = u32::try_from(len).map_err(|_| malformed("block length too large"))?;
        expected_offset = offset + u64::from(len);
        blocks.push(BlockInfo { stream, record_count, offset, len });
    }
    if !input.is_empty() {
        return Err(malformed("trailing bytes in footer"));
    }
    if expected_offset != footer_offset as u64 {
        return Err(malformed("blocks do not end at the footer"));
    }
    Ok(SegmentFooter { blocks })
}

/// Decodes and verifies a whole segment object: every block's checksum and record count.
pub fn decode_segment(object: &str, whole: &Bytes) -> Result<Vec<(BlockInfo, DecodedBlock)>, SegmentError> {
    let footer = decode_footer(object, whole)?;
    footer
        .blocks
        .into_iter()
        .map(|info| {
            let start = info.offset as usize;
            let block = whole.slice(start..start + info.len as usize);
            let decoded = decode_block(object, &block).map_err(|e| at_offset(e, info.offset))?;
            if decoded.records.len() != info.record_count as usize {
                return Err(SegmentError::Malformed {
                    object: object.to_string(),
                    offset: info.offset,
                    detail: "record count differs from footer",
                });
            }
            Ok((info, decoded))
        })
        .collect()
}

/// Rewrites a block-relative error offset to the block's offset in the object.
pub fn at_offset(error: SegmentError, base: u64) -> SegmentError {
    match error {
        SegmentError::Checksum { object, offset } => SegmentError::Checksum { object, offset: base + offset },
        SegmentError::Malformed { object, offset, detail } => {
            SegmentError::Malformed { object, offset: base + offset, detail }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_record() -> impl Strategy<Value = Record> {
        (
            proptest::option::of(0u64..4_000_000_000_000),
            proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..8), proptest::collection::vec(any::<u8>(), 0..8)),
                0..3,
            ),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(timestamp, headers, body)| Record {
                timestamp,
                headers: headers
                    .into_iter()
                    .map(|(n, v)| Header { name: Bytes::from(n), value: Bytes::from(v) })
                    .collect(),
                body: Bytes::from(body),
            })
    }

    fn arb_blocks() -> impl Strategy<Value = Vec<(String, u64, Vec<Record>)>> {
        proptest::collection::vec(
            ("[a-z]{1,6}", 0u64..4_000_000_000_000, proptest::collection::vec(arb_record(), 1..5)),
            1..5,
        )
    }

    fn build(blocks: &[(String, u64, Vec<Record>)]) -> Bytes {
        let mut builder = SegmentBuilder::new();
        for (stream, arrival, records) in blocks {
            let block = encode_block(*arrival, records);
            builder.push_block(Bytes::from(stream.clone()), records.len() as u32, block.clone());
        }
        builder.finish()
    }

    proptest! {
        #[test]
        fn round_trips(blocks in arb_blocks()) {
            let object = build(&blocks);
            let decoded = decode_segment("o", &object).expect("valid segment");
            prop_assert_eq!(decoded.len(), blocks.len());
            for ((info, block), (stream, arrival, records)) in decoded.iter().zip(&blocks) {
                prop_assert_eq!(&info.stream[..], stream.as_bytes());
                prop_assert_eq!(block.arrival, *arrival);
                prop_assert_eq!(&block.records, records);
                // A range read of just this block decodes on its own too.
                let range = object.slice(info.offset as usize..(info.offset + u64::from(info.len)) as usize);
                prop_assert_eq!(&decode_block("o", &range).expect("valid block").records, records);
            }
        }

        #[test]
        fn sparse_blocks_round_trip_with_their_positions(
            arrival in 0u64..4_000_000_000_000,
            records in proptest::collection::vec(arb_record(), 0..6),
            steps in proptest::collection::vec(1u32..1000, 6),
        ) {
            let positions: Vec<u32> = steps.iter().take(records.len()).scan(0u32, |at, step| {
                *at += step;
                Some(*at - 1)
            }).collect();
            let decoded = decode_block("o", &encode_sparse_block(arrival, &records, &positions)).expect("valid block");
            prop_assert_eq!(&decoded.records, &records);
            prop_assert_eq!(&decoded.positions, &positions);
            let span = positions.last().map_or(0, |&last| u64::from(last) + 1);
            prop_assert_eq!(decoded.span(), span);
            let dense = decode_block("o", &encode_block(arrival, &records)).expect("valid block");
            prop_assert!(dense.positions.is_empty());
            prop_assert_eq!(dense.span(), records.len() as u64);
        }

        #[test]
        fn any_flipped_byte_is_an_error(blocks in arb_blocks(), index: prop::sample::Index, bit in 0u8..8) {
            let object = build(&blocks);
            let mut corrupt = object.to_vec();
            let at = index.index(corrupt.len());
            corrupt[at] ^= 1 << bit;
            prop_assert!(decode_segment("o", &Bytes::from(corrupt)).is_err(), "flip at {} went unnoticed", at);
        }

        #[test]
        fn any_truncation_is_an_error(blocks in arb_blocks(), index: prop::sample::Index) {
            let object = build(&blocks);
            let cut = index.index(object.len());
            let result = decode_segment("o", &object.slice(..cut));
            prop_assert!(result.is_err());
        }

        /// Fuzzing by property: whatever the bytes, the decoders answer, never panic.
        #[test]
        fn arbitrary_bytes_never_panic_a_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let bytes = Bytes::from(bytes);
            let _ = decode_segment("o", &bytes);
            let _ = decode_block("o", &bytes);
            let _ = decode_footer("o", &bytes);
        }

        #[test]
        fn truncated_or_flipped_block_is_an_error(records in proptest::collection::vec(arb_record(), 1..5), index: prop::sample::Index, bit in 0u8..8) {
            let block = encode_block(7, &records);
            let cut = index.index(block.len());
            prop_assert!(decode_block("o", &block.slice(..cut)).is_err());
            let mut corrupt = block.to_vec();
            corrupt[cut] ^= 1 << bit;
            prop_assert!(decode_block("o", &Bytes::from(corrupt)).is_err());
        }
    }

    /// A block with a valid checksum whose counts claim as many records, and as many
    /// headers for the first, as its bytes allow: refused, with the header list sized by
    /// the block's bytes, not by the product of the counts (terabytes here).
    #[test]
    fn a_block_claiming_more_headers_than_its_bytes_hold_is_refused() {
        let mut body = BytesMut::new();
        body.put_u8(CODEC_NONE);
        varint::put_u64(&mut body, 300_000);
        varint::put_u64(&mut body, 0);
        body.put_u8(0);
        varint::put_u64(&mut body, 500_000);
        body.resize(1 << 20, 1);
        let crc = crc32c::crc32c(&body);
        body.put_u32_le(crc);
        assert!(matches!(decode_block("o", &body.freeze()), Err(SegmentError::Malformed { .. })));
    }

    #[test]
    fn records_with_and_without_headers_in_one_block_keep_their_own() {
        let header = |name: &'static [u8]| Header { name: Bytes::from_static(name), value: Bytes::from_static(b"v") };
        let record = |headers: Vec<Header>| Record { timestamp: None, headers: headers.into(), body: Bytes::new() };
        let records = vec![
            record(vec![]),
            record(vec![header(b"a")]),
            record(vec![header(b"b"), header(b"c"), header(b"d")]),
            record(vec![]),
            record(vec![header(b"e")]),
        ];
        let decoded = decode_block("o", &encode_block(0, &records)).expect("valid block");
        assert_eq!(decoded.records, records);
    }

    #[test]
    fn a_sparse_block_whose_positions_do_not_increase_is_refused() {
        let record = Record { timestamp: None, headers: Default::default(), body: Bytes::from_static(b"v") };
        let block = encode_sparse_block(0, &[record.clone(), record], &[3, 3]);
        assert!(matches!(decode_block("o", &block), Err(SegmentError::Malformed { .. })));
    }

    #[test]
    fn foreign_object_names_the_object() {
        let err = decode_segment("segments/x.seg", &Bytes::from_static(&[0u8; 64])).expect_err("not a segment");
        assert!(err.to_string().contains("segments/x.seg"), "{err}");
        assert!(matches!(err, SegmentError::Foreign { .. }));
    }
}
