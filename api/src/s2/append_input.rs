//! S2's `AppendInput` decoded straight into the records an append carries, as `prost`
//! reads the same bytes but without building a `pb::AppendRecord` and a header list per
//! record first: bodies, header names and values are slices of the message, and a
//! batch's headers are one list its records share (one allocation per batch, not one per
//! record). The message's other fields (match, fencing token, producer) are few bytes and
//! go through `prost`.
//!
//! The direct path takes only what it reads exactly as `prost` would: anything else (a
//! field of another wire type than its own, a group, a length past the end, a bad key or
//! varint) sends the whole message through `prost` instead, so every message decodes to
//! what `prost` gives and every error is `prost`'s, word for word.

use bytes::Bytes;
use prost::encoding::{decode_key, decode_varint, WireType};
use prost::{DecodeError, Message};
use shale_proto::s2 as pb;
use shale_proto::{Header, Headers, Record};

/// An `AppendInput`: its records, and every other field in a message whose records are
/// empty.
#[derive(Debug, Default, PartialEq)]
pub struct DecodedAppend {
    pub records: Vec<Record>,
    pub fields: pb::AppendInput,
}

/// Decodes an `AppendInput` message.
pub fn decode(message: Bytes) -> Result<DecodedAppend, DecodeError> {
    match direct(&message) {
        Some(decoded) => Ok(decoded),
        None => via_prost(message),
    }
}

/// The message decoded by `prost`, then turned into records one by one.
pub fn via_prost(message: Bytes) -> Result<DecodedAppend, DecodeError> {
    let mut fields = pb::AppendInput::decode(message)?;
    let records = std::mem::take(&mut fields.records)
        .into_iter()
        .map(|r| Record::from_parts(r.timestamp, r.headers.into_iter().map(|h| (h.name, h.value)), r.body))
        .collect();
    Ok(DecodedAppend { records, fields })
}

/// The direct path: `None` where the message needs `prost` (see the module's doc).
fn direct(message: &Bytes) -> Option<DecodedAppend> {
    let mut records = Vec::new();
    // Each record's first header in `headers`, then the end of the last record's.
    let mut first_headers = Vec::new();
    let mut headers = Vec::new();
    // The fields other than records, as they were sent, for `prost`.
    let mut other = Vec::new();
    let mut rest: &[u8] = message;
    while !rest.is_empty() {
        let field_start = rest;
        let (tag, wire_type) = decode_key(&mut rest).ok()?;
        if tag == 1 {
            let record = length_delimited(wire_type, &mut rest)?;
            first_headers.push(u32::try_from(headers.len()).ok()?);
            records.push(decode_record(message, record, &mut headers)?);
        } else {
            skip(wire_type, &mut rest)?;
            other.extend_from_slice(&field_start[..field_start.len() - rest.len()]);
        }
    }
    first_headers.push(u32::try_from(headers.len()).ok()?);
    let fields =
        if other.is_empty() { pb::AppendInput::default() } else { pb::AppendInput::decode(&other[..]).ok()? };
    let spans = first_headers.windows(2).map(|w| w[0]..w[1]);
    for (record, shared) in records.iter_mut().zip(Headers::share(headers, spans)) {
        record.headers = shared;
    }
    Some(DecodedAppend { records, fields })
}

/// An `AppendRecord` (timestamp 1, headers 2, body 3) but its headers, which go onto
/// `headers`; a repeated scalar keeps its last value, as `prost` does.
fn decode_record(message: &Bytes, mut rest: &[u8], headers: &mut Vec<Header>) -> Option<Record> {
    let mut record = Record::default();
    while !rest.is_empty() {
        let (tag, wire_type) = decode_key(&mut rest).ok()?;
        match tag {
            1 if wire_type == WireType::Varint => record.timestamp = Some(decode_varint(&mut rest).ok()?),
            2 => headers.push(decode_header(message, length_delimited(wire_type, &mut rest)?)?),
            3 => record.body = message.slice_ref(length_delimited(wire_type, &mut rest)?),
            1 => return None,
            _ => skip(wire_type, &mut rest)?,
        }
    }
    Some(record)
}

/// A `Header`: name 1, value 2.
fn decode_header(message: &Bytes, mut rest: &[u8]) -> Option<Header> {
    let mut header = Header { name: Bytes::new(), value: Bytes::new() };
    while !rest.is_empty() {
        let (tag, wire_type) = decode_key(&mut rest).ok()?;
        match tag {
            1 => header.name = message.slice_ref(length_delimited(wire_type, &mut rest)?),
            2 => header.value = message.slice_ref(length_delimited(wire_type, &mut rest)?),
            _ => skip(wire_type, &mut rest)?,
        }
    }
    Some(header)
}

/// A length-delimited field's bytes, taken off `rest`; `None` for another wire type or a
/// length past the end.
fn length_delimited<'a>(wire_type: WireType, rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    if wire_type != WireType::LengthDelimited {
        return None;
    }
    let len = usize::try_from(decode_varint(rest).ok()?).ok()?;
    let value = rest.get(..len)?;
    *rest = &rest[len..];
    Some(value)
}

/// Skips an unknown field; `None` for a group (left to `prost`) or a field past the end.
fn skip(wire_type: WireType, rest: &mut &[u8]) -> Option<()> {
    let len = match wire_type {
        WireType::Varint => return decode_varint(rest).ok().map(drop),
        WireType::LengthDelimited => return length_delimited(wire_type, rest).map(drop),
        WireType::ThirtyTwoBit => 4,
        WireType::SixtyFourBit => 8,
        WireType::StartGroup | WireType::EndGroup => return None,
    };
    *rest = rest.get(len..)?;
    Some(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
        prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
    }

    fn append_record() -> impl Strategy<Value = pb::AppendRecord> {
        let header = (bytes(12), bytes(12)).prop_map(|(name, value)| pb::Header { name, value });
        (prop::option::of(any::<u64>()), prop::collection::vec(header, 0..4), bytes(64))
            .prop_map(|(timestamp, headers, body)| pb::AppendRecord { timestamp, headers, body })
    }

    fn append_input() -> impl Strategy<Value = pb::AppendInput> {
        (
            prop::collection::vec(append_record(), 0..6),
            prop::option::of(any::<u64>()),
            prop::option::of("[a-z]{0,8}"),
            prop::option::of(("[a-z]{1,8}", any::<u64>())),
        )
            .prop_map(|(records, match_seq_num, fencing_token, producer)| pb::AppendInput {
                records,
                match_seq_num,
                fencing_token,
                producer_id: producer.as_ref().map(|p| p.0.clone()),
                producer_seq: producer.map(|p| p.1),
                ..Default::default()
            })
    }

    /// A field as bytes on the wire: key, then value.
    fn field(tag: u32, wire_type: WireType, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        prost::encoding::encode_key(tag, wire_type, &mut out);
        if wire_type == WireType::LengthDelimited {
            prost::encoding::encode_varint(value.len() as u64, &mut out);
        }
        out.extend_from_slice(value);
        out
    }

    /// Fields no writer of these messages sends but a decoder must take: a field
    /// repeated (the last value counts), unknown fields of every wire type but groups.
    fn unusual(tags: std::ops::Range<u32>, known: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
        let unknown = prop_oneof![
            (tags.clone(), any::<u64>()).prop_map(|(t, v)| {
                let mut value = Vec::new();
                prost::encoding::encode_varint(v, &mut value);
                field(t, WireType::Varint, &value)
            }),
            (tags.clone(), any::<u32>()).prop_map(|(t, v)| field(t, WireType::ThirtyTwoBit, &v.to_le_bytes())),
            (tags.clone(), any::<u64>()).prop_map(|(t, v)| field(t, WireType::SixtyFourBit, &v.to_le_bytes())),
            (tags, bytes(8)).prop_map(|(t, v)| field(t, WireType::LengthDelimited, &v)),
        ];
        prop::collection::vec(prop_oneof![3 => known, 1 => unknown], 0..6).prop_map(|fields| fields.concat())
    }

    fn unusual_message() -> impl Strategy<Value = Vec<u8>> {
        let header = unusual(3..6, (1..3u32, bytes(6)).prop_map(|(t, v)| field(t, WireType::LengthDelimited, &v)));
        let record_field = prop_oneof![
            any::<u64>().prop_map(|v| {
                let mut value = Vec::new();
                prost::encoding::encode_varint(v, &mut value);
                field(1, WireType::Varint, &value)
            }),
            header.prop_map(|h| field(2, WireType::LengthDelimited, &h)),
            bytes(16).prop_map(|b| field(3, WireType::LengthDelimited, &b)),
        ];
        let record = unusual(4..9, record_field).prop_map(|r| field(1, WireType::LengthDelimited, &r));
        let other =
            prop_oneof![Just(field(2, WireType::Varint, &[5])), Just(field(3, WireType::LengthDelimited, b"token")),];
        unusual(5..9, prop_oneof![3 => record, 1 => other])
    }

    proptest! {
        #[test]
        fn repeated_and_unknown_fields_decode_as_with_prost(message in unusual_message()) {
            let message = Bytes::from(message);
            let direct = direct(&message);
            prop_assert!(direct.is_some(), "a well-formed message took the fallback");
            prop_assert_eq!(direct, via_prost(message).ok());
        }

        #[test]
        fn decodes_what_prost_decodes_without_it(input in append_input()) {
            let message = Bytes::from(input.encode_to_vec());
            let direct = direct(&message);
            prop_assert!(direct.is_some(), "a message prost wrote took the fallback");
            prop_assert_eq!(direct, via_prost(message).ok());
        }

        #[test]
        fn any_bytes_decode_or_fail_as_with_prost(
            input in append_input(),
            cut in any::<prop::sample::Index>(),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            tail in prop::collection::vec(any::<u8>(), 0..8),
        ) {
            let mut message = input.encode_to_vec();
            for (at, byte) in flips {
                if !message.is_empty() {
                    let at = at.index(message.len());
                    message[at] ^= byte;
                }
            }
            message.truncate(cut.index(message.len() + 1));
            message.extend_from_slice(&tail);
            let message = Bytes::from(message);
            prop_assert_eq!(decode(message.clone()), via_prost(message));
        }
    }

    #[test]
    fn a_batch_shares_one_header_list_and_slices_the_message() {
        let input = pb::AppendInput {
            records: vec![
                pb::AppendRecord {
                    timestamp: Some(7),
                    headers: vec![
                        pb::Header { name: "a".into(), value: "1".into() },
                        pb::Header { name: "a".into(), value: "2".into() },
                    ],
                    body: "one".into(),
                },
                pb::AppendRecord { timestamp: None, headers: vec![], body: "two".into() },
                pb::AppendRecord {
                    timestamp: None,
                    headers: vec![pb::Header { name: "".into(), value: "fence".into() }],
                    body: "".into(),
                },
            ],
            match_seq_num: Some(3),
            ..Default::default()
        };
        let message = Bytes::from(input.encode_to_vec());
        let decoded = direct(&message).expect("direct path");
        assert_eq!(decoded.fields.match_seq_num, Some(3));
        let headers: Vec<Vec<(&[u8], &[u8])>> = decoded
            .records
            .iter()
            .map(|r| r.headers.iter().map(|h| (h.name.as_ref(), h.value.as_ref())).collect())
            .collect();
        assert_eq!(headers, vec![vec![(&b"a"[..], &b"1"[..]), (b"a", b"2")], vec![], vec![(b"", b"fence")]]);
        assert_eq!(decoded.records[0].timestamp, Some(7));
        assert_eq!(decoded.records[1].body, "two");
        let inside = message.as_ptr_range();
        assert!(inside.contains(&decoded.records[0].body.as_ptr()), "the body is a slice of the message");
    }

    #[test]
    fn what_the_direct_path_leaves_goes_through_prost() {
        // A record field as a varint, a group at the top level, a header name as a varint.
        for message in [&[0x08, 0x01][..], &[0x13, 0x14], &[0x0a, 0x04, 0x12, 0x02, 0x08, 0x01]] {
            let message = Bytes::copy_from_slice(message);
            assert_eq!(direct(&message), None);
            assert_eq!(decode(message.clone()), via_prost(message));
        }
        // A group in an unknown top-level field (5), which prost skips: decoded, records and all.
        let mut message = vec![0x2b, 0x08, 0x01, 0x2c];
        message.extend(pb::AppendInput { records: vec![Default::default()], ..Default::default() }.encode_to_vec());
        let decoded = decode(Bytes::from(message)).expect("prost skips the group");
        assert_eq!(decoded.records.len(), 1);
    }
}
