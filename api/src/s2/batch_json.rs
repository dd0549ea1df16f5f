//! S2's `ReadBatch` as JSON text, written straight from the records into one buffer sized
//! for it: what the unary JSON read answers and each SSE `batch` event carries.
//!
//! serde's derive would build a `String` per body (through `from_utf8_lossy`'s scalar
//! check), then escape it a byte at a time into a buffer that grows by doubling: under an
//! SSE read of 1 KiB records those three were 45% of the server's CPU. Here a body is
//! checked by `str::from_utf8` (invalid UTF-8 is replaced, as `Format::Raw` promises),
//! escaped by [`push_json_string`], which copies runs that need no escape eight bytes at
//! a test, and base64 is appended in place. An SSE event is written around it in the
//! same buffer. The text is the same serde_json writes for
//! the same shape (the tests compare them).

use std::fmt::Write;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use shale_metadata_contract::Position;
use shale_proto::SequencedRecord;

use super::wire::Format;

/// JSON bytes per record besides its body and headers: field names, numbers, punctuation.
const RECORD_OVERHEAD: usize = 96;

/// `{"records":[{"seq_num":..,"timestamp":..,"headers":[["name","value"]],"body":".."}],"tail":{..}}`.
pub fn read_batch(records: &[SequencedRecord], tail: Option<Position>, format: Format) -> String {
    let mut out = String::new();
    push_read_batch(&mut out, records, tail, format);
    out
}

/// [`read_batch`] appended to `out`, which grows once for it. The text holds no line
/// break (strings escape theirs), so it fits on one SSE `data:` line.
pub fn push_read_batch(out: &mut String, records: &[SequencedRecord], tail: Option<Position>, format: Format) {
    out.reserve(capacity(records, format));
    out.push_str("{\"records\":[");
    for (i, record) in records.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_record(out, record, format);
    }
    out.push(']');
    if let Some(tail) = tail {
        out.push_str(",\"tail\":");
        push_position(out, tail);
    }
    out.push('}');
}

fn capacity(records: &[SequencedRecord], format: Format) -> usize {
    let encoded = |len: usize| match format {
        Format::Raw => len + len / 8,
        Format::Base64 => len.div_ceil(3) * 4,
    };
    let bytes: usize = records
        .iter()
        .map(|record| {
            let headers: usize =
                record.headers.iter().map(|h| encoded(h.name.len()) + encoded(h.value.len()) + 8).sum();
            RECORD_OVERHEAD + headers + encoded(record.body.len())
        })
        .sum();
    bytes + 64
}

fn push_record(out: &mut String, record: &SequencedRecord, format: Format) {
    out.push_str("{\"seq_num\":");
    push_u64(out, record.seq_num);
    out.push_str(",\"timestamp\":");
    push_u64(out, record.timestamp);
    out.push_str(",\"headers\":[");
    for (i, header) in record.headers.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        push_bytes(out, &header.name, format);
        out.push(',');
        push_bytes(out, &header.value, format);
        out.push(']');
    }
    out.push_str("],\"body\":");
    push_bytes(out, &record.body, format);
    out.push('}');
}

fn push_position(out: &mut String, position: Position) {
    out.push_str("{\"seq_num\":");
    push_u64(out, position.seq_num);
    out.push_str(",\"timestamp\":");
    push_u64(out, position.timestamp);
    out.push('}');
}

fn push_u64(out: &mut String, value: u64) {
    // Writing to a `String` cannot fail.
    let _ = write!(out, "{value}");
}

/// Record bytes as a JSON string in `format`: UTF-8 text (invalid sequences replaced) or
/// standard base64.
fn push_bytes(out: &mut String, bytes: &[u8], format: Format) {
    match format {
        Format::Raw => match std::str::from_utf8(bytes) {
            Ok(text) => push_json_string(out, text),
            Err(_) => push_json_string(out, &String::from_utf8_lossy(bytes)),
        },
        Format::Base64 => {
            out.push('"');
            STANDARD.encode_string(bytes, out);
            out.push('"');
        }
    }
}

/// `text` as a JSON string literal, escaped as serde_json escapes it: `"` and `\`, the
/// control characters with a short form (`\b \f \n \r \t`), other control characters as
/// `\u00XX`; everything else as it is.
pub fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut at = 0;
    while at < bytes.len() {
        if let Some(word) = bytes.get(at..at + 8) {
            let word = u64::from_le_bytes(word.try_into().expect("a slice of eight bytes"));
            if !needs_escape(word) {
                at += 8;
                continue;
            }
        }
        let byte = bytes[at];
        if let Some(escaped) = escape(byte) {
            // Every byte escaped is ASCII, so both ends are character boundaries.
            out.push_str(&text[start..at]);
            match escaped {
                Escape::Short(short) => {
                    out.push('\\');
                    out.push(short);
                }
                Escape::Unicode => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    out.push_str("\\u00");
                    out.push(char::from(HEX[usize::from(byte >> 4)]));
                    out.push(char::from(HEX[usize::from(byte & 0xf)]));
                }
            }
            start = at + 1;
        }
        at += 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

enum Escape {
    Short(char),
    Unicode,
}

fn escape(byte: u8) -> Option<Escape> {
    Some(match byte {
        b'"' => Escape::Short('"'),
        b'\\' => Escape::Short('\\'),
        b'\n' => Escape::Short('n'),
        b'\r' => Escape::Short('r'),
        b'\t' => Escape::Short('t'),
        0x08 => Escape::Short('b'),
        0x0c => Escape::Short('f'),
        0x00..=0x1f => Escape::Unicode,
        _ => return None,
    })
}

/// Whether any of the eight bytes in `word` is a control character, `"` or `\`.
fn needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    // A byte below 0x20 borrows in `word - 0x20..`; a byte with its high bit set
    // (UTF-8 beyond ASCII) is masked out by `!word`, and it never needs an escape.
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    below_space | has_zero(word ^ (ONES * u64::from(b'"'))) | has_zero(word ^ (ONES * u64::from(b'\\'))) != 0
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use proptest::prelude::*;
    use serde_json::json;
    use shale_proto::Header;

    use super::*;

    fn escaped(text: &str) -> String {
        let mut out = String::new();
        push_json_string(&mut out, text);
        out
    }

    #[test]
    fn every_character_that_needs_an_escape_gets_serde_jsons() {
        let all: String = (0u8..0x80).map(char::from).chain("é€😀\u{7f}".chars()).collect();
        for text in [all.as_str(), "", "plain text that is longer than eight bytes", "\"\\", "a\u{1}b\u{1f}c"] {
            assert_eq!(escaped(text), serde_json::to_string(text).expect("serialises"), "{text:?}");
        }
    }

    #[test]
    fn the_eight_byte_test_finds_every_byte_that_needs_an_escape_wherever_it_is() {
        for byte in 0..=u8::MAX {
            for position in 0..8 {
                let mut word = [b'a'; 8];
                word[position] = byte;
                let expected = byte < 0x20 || byte == b'"' || byte == b'\\';
                assert_eq!(needs_escape(u64::from_le_bytes(word)), expected, "byte {byte:#x} at {position}");
            }
        }
    }

    proptest! {
        #[test]
        fn any_text_is_escaped_as_serde_json_escapes_it(
            text in any::<String>(),
            special in proptest::collection::vec(prop_oneof![0u8..0x20, Just(b'"'), Just(b'\\'), b'a'..=b'z'], 0..40),
        ) {
            let special = String::from_utf8(special).expect("ASCII");
            for text in [text.as_str(), special.as_str(), &format!("{text}{special}{text}")] {
                prop_assert_eq!(escaped(text), serde_json::to_string(text).expect("serialises"));
            }
        }
    }

    fn record(seq_num: u64, body: &[u8], headers: &[(&[u8], &[u8])]) -> SequencedRecord {
        SequencedRecord {
            seq_num,
            timestamp: 1_700_000_000_000 + seq_num,
            headers: headers
                .iter()
                .map(|(name, value)| Header {
                    name: Bytes::copy_from_slice(name),
                    value: Bytes::copy_from_slice(value),
                })
                .collect(),
            body: Bytes::copy_from_slice(body),
        }
    }

    #[test]
    fn a_batch_reads_back_as_s2s_read_batch_in_either_format() {
        let records = vec![
            record(7, b"hello \"world\"\n", &[(b"k", b"v\t1")]),
            record(8, &[0xff, b'a', 0xc3], &[]),
            record(9, b"", &[(b"", b"")]),
        ];
        let tail = Position { seq_num: 10, timestamp: 1_700_000_000_099 };
        let raw: serde_json::Value =
            serde_json::from_str(&read_batch(&records, Some(tail), Format::Raw)).expect("JSON");
        assert_eq!(
            raw,
            json!({
                "records": [
                    {"seq_num": 7, "timestamp": 1_700_000_000_007u64, "headers": [["k", "v\t1"]], "body": "hello \"world\"\n"},
                    {"seq_num": 8, "timestamp": 1_700_000_000_008u64, "headers": [], "body": "\u{fffd}a\u{fffd}"},
                    {"seq_num": 9, "timestamp": 1_700_000_000_009u64, "headers": [["", ""]], "body": ""},
                ],
                "tail": {"seq_num": 10, "timestamp": 1_700_000_000_099u64},
            })
        );
        let base64: serde_json::Value =
            serde_json::from_str(&read_batch(&records[..1], None, Format::Base64)).expect("JSON");
        assert_eq!(
            base64,
            json!({"records": [{"seq_num": 7, "timestamp": 1_700_000_000_007u64, "headers": [["aw==", "dgkx"]], "body": "aGVsbG8gIndvcmxkIgo="}]})
        );
        assert_eq!(read_batch(&[], None, Format::Raw), r#"{"records":[]}"#);
    }

    #[test]
    fn the_buffer_is_sized_once_for_plain_bodies() {
        let body = vec![b'x'; 1024];
        let records: Vec<_> = (0..256).map(|i| record(i, &body, &[(b"name", b"value")])).collect();
        for format in [Format::Raw, Format::Base64] {
            let text = read_batch(&records, Some(Position { seq_num: 256, timestamp: 1 }), format);
            assert!(
                text.len() <= capacity(&records, format),
                "{format:?}: {} > {}",
                text.len(),
                capacity(&records, format)
            );
        }
    }
}
