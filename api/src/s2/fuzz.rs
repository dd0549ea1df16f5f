//! Every parser that takes client bytes (S2S frames, protobuf and JSON bodies, query
//! strings, headers), driven by arbitrary input: each answers with a value or an
//! `ApiError` and never panics. The functions here are what the cargo-fuzz targets in
//! `fuzz/` call (through `shale_api::fuzz`), and the property tests below run the same
//! functions with every unit test run.

use axum::http::{HeaderMap, HeaderValue};
use bytes::{Bytes, BytesMut};

use super::config::{BasinConfigJson, BasinPatchJson, StreamConfigJson, StreamPatchJson};
use super::read_params::read_params;
use super::s2s::{append_input, decode_frame, FrameCutter};
use super::wire::{config_body, json_body, AppendInputJson, Format};

/// Decodes S2S frames from `data` until the decoder asks for more or refuses: from one
/// buffer, then as a session body arriving in chunks of the size its first byte gives.
pub fn s2s_frames(data: &[u8]) {
    let mut buf = BytesMut::from(data);
    while let Ok(Some(_)) = decode_frame(&mut buf) {}
    let Some((&size, body)) = data.split_first() else { return };
    let mut frames = FrameCutter::default();
    for chunk in body.chunks(usize::from(size).max(1)) {
        frames.push(Bytes::copy_from_slice(chunk));
        loop {
            match frames.next() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

/// Parses `data` as a protobuf append body and turns it into an append; the direct
/// decoder must give what `prost` gives, the same records or the same error.
pub fn protobuf_append(data: &[u8]) {
    let message = Bytes::copy_from_slice(data);
    let decoded = super::append_input::decode(message.clone());
    assert_eq!(decoded, super::append_input::via_prost(message), "the direct decoder differs from prost");
    if let Ok(decoded) = decoded {
        let _ = append_input("basin-one", "s", decoded);
    }
}

/// Parses `data` as every JSON body the API takes: appends, stream and basin configs,
/// stream and basin patches.
pub fn json_bodies(data: &[u8]) {
    let body = Bytes::copy_from_slice(data);
    if let Ok(input) = json_body::<AppendInputJson>(&body) {
        for record in input.records {
            let _ = record.into_record(Format::Base64, &body);
        }
    }
    if let Ok(config) = config_body::<StreamConfigJson>(&body) {
        let _ = config.into_config();
    }
    if let Ok(patch) = config_body::<StreamPatchJson>(&body) {
        let _ = patch.into_patch();
    }
    if let Ok(config) = config_body::<BasinConfigJson>(&body) {
        let _ = config.into_config();
    }
    if let Ok(patch) = config_body::<BasinPatchJson>(&body) {
        let _ = patch.into_patch();
    }
}

/// Parses a read's query string and `s2-format` header: `data` up to its first newline
/// is the format, the rest the query.
pub fn read_query(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (format, query) = text.split_once('\n').unwrap_or(("", &text));
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(format) {
        headers.insert("s2-format", value);
    }
    let _ = read_params("basin-one".into(), "s".into(), &headers, Some(query));
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

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
            s2s_frames(&bytes);
        }

        #[test]
        fn protobuf_append_bodies_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
            protobuf_append(&bytes);
        }

        #[test]
        fn json_bodies_never_panic(text in jsonish(), raw in prop::collection::vec(any::<u8>(), 0..512)) {
            json_bodies(text.as_bytes());
            json_bodies(&raw);
        }

        #[test]
        fn read_queries_and_headers_never_panic(query in "[a-z_=&%0-9+.-]{0,64}", format in "[ -~]{0,12}") {
            read_query(format!("{format}\n{query}").as_bytes());
        }
    }
}
