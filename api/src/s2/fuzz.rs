//! Fuzzing by property, run with the unit tests: every parser that takes client bytes
//! (S2S frames, protobuf and JSON bodies, query strings, headers) answers with a value or
//! an `ApiError` for any input, and never panics.

use axum::http::{HeaderMap, HeaderValue};
use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use prost::Message;

use super::config::{BasinConfigJson, BasinPatchJson, StreamConfigJson};
use super::records::read_params;
use super::s2s::{append_input, decode_frame};
use super::wire::{config_body, json_body, AppendInputJson, Format};

/// JSON-ish text: S2's field names, brackets and values mixed at random, so the parsers
/// get past the first byte often.
fn jsonish() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"records\"",
        "\"body\"",
        "\"headers\"",
        "\"timestamp\"",
        "\"config\"",
        "\"retention_policy\"",
        "\"age\"",
        "\"timestamping\"",
        "\"mode\"",
        "\"arrival\"",
        "\"match_seq_num\"",
        "\"fencing_token\"",
        "\"stream_cipher\"",
        "null",
        "true",
        "1",
        "-1",
        "18446744073709551616",
        "\"x\"",
        " ",
    ]);
    prop::collection::vec(pieces, 0..40).prop_map(|parts| parts.concat())
}

proptest! {
    #[test]
    fn s2s_frames_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let mut buf = BytesMut::from(&bytes[..]);
        // Drain frame after frame until the decoder asks for more or refuses.
        while let Ok(Some(_)) = decode_frame(&mut buf) {}
    }

    #[test]
    fn protobuf_append_bodies_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(message) = shale_proto::s2::AppendInput::decode(Bytes::from(bytes)) {
            let _ = append_input("basin-one", "s", message);
        }
    }

    #[test]
    fn json_bodies_never_panic(text in jsonish(), raw in prop::collection::vec(any::<u8>(), 0..512)) {
        for body in [Bytes::from(text), Bytes::from(raw)] {
            if let Ok(input) = json_body::<AppendInputJson>(&body) {
                for record in input.records {
                    let _ = record.into_record(Format::Base64);
                }
            }
            if let Ok(config) = config_body::<StreamConfigJson>(&body) {
                let _ = config.into_config();
            }
            if let Ok(config) = config_body::<BasinConfigJson>(&body) {
                let _ = config.into_config();
            }
            if let Ok(patch) = config_body::<BasinPatchJson>(&body) {
                let _ = patch.into_patch();
            }
        }
    }

    #[test]
    fn read_queries_and_headers_never_panic(query in "[a-z_=&%0-9+.-]{0,64}", format in "[ -~]{0,12}") {
        let mut headers = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_str(&format) {
            headers.insert("s2-format", value);
        }
        let _ = read_params("basin-one".into(), "s".into(), &headers, Some(&query));
    }
}
