//! S2's JSON shapes and the `s2-format` byte encoding.

use std::borrow::Cow;
use std::time::{Duration, UNIX_EPOCH};

use axum::http::HeaderMap;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use shale_metadata_contract::{AppendAck, Position};
use shale_proto::{names, Header, Record};

use crate::ApiError;

/// How record bytes travel in JSON (`s2-format` header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// UTF-8 strings; on reads, invalid UTF-8 is replaced.
    Raw,
    /// Standard base64.
    Base64,
}

impl Format {
    pub fn from_headers(headers: &HeaderMap) -> Result<Self, ApiError> {
        let Some(value) = headers.get("s2-format") else { return Ok(Format::Raw) };
        match value.to_str() {
            Ok("raw") | Ok("json") => Ok(Format::Raw),
            Ok("base64") => Ok(Format::Base64),
            Ok(other) => Err(ApiError::bad_header(format!("s2-format must be raw or base64, got `{other}`"))),
            Err(_) => Err(ApiError::bad_header("s2-format must be raw or base64, got a value that is not ASCII")),
        }
    }

    /// The bytes a JSON string of `message` stands for. Raw text becomes them without a
    /// copy: a string without escapes is a slice of the message, one with escapes the
    /// string serde built.
    fn decode(self, what: &str, s: Cow<'_, str>, message: &Bytes) -> Result<Bytes, ApiError> {
        match (self, s) {
            (Format::Raw, Cow::Borrowed(s)) => Ok(slice_of(message, s.as_bytes())),
            (Format::Raw, Cow::Owned(s)) => Ok(Bytes::from(s.into_bytes())),
            (Format::Base64, s) => STANDARD
                .decode(s.as_bytes())
                .map(Bytes::from)
                .map_err(|e| ApiError::bad(format!("{what} is not valid base64: {e}"))),
        }
    }
}

/// `part` as a slice of `message` when it lies within it, else a copy.
fn slice_of(message: &Bytes, part: &[u8]) -> Bytes {
    let within = message.as_ptr_range();
    let range = part.as_ptr_range();
    if part.is_empty() || (within.start <= range.start && range.end <= within.end) {
        message.slice_ref(part)
    } else {
        Bytes::copy_from_slice(part)
    }
}

/// The basin a stream call names in its `s2-basin` header.
pub fn basin_header(headers: &HeaderMap) -> Result<String, ApiError> {
    let basin = headers
        .get("s2-basin")
        .ok_or_else(|| ApiError::bad_header("missing s2-basin header naming the basin"))?
        .to_str()
        .map_err(|_| ApiError::bad_header("s2-basin header is not ASCII"))?;
    names::validate_basin(basin).map_err(ApiError::bad_header)?;
    Ok(basin.to_string())
}

/// S2's answer header on creates and PUTs: `created`, `updated` or `noop`.
pub const PROVISION_RESULT: &str = "s2-provision-result";

/// The `s2-request-token` header (at most 36 bytes) that makes a create idempotent.
pub fn request_token(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get("s2-request-token") else { return Ok(None) };
    let token = value.to_str().map_err(|_| ApiError::bad_header("s2-request-token is not ASCII"))?;
    if token.len() > 36 {
        return Err(ApiError::bad_header("s2-request-token is longer than 36 bytes"));
    }
    Ok(Some(token))
}

/// Parses a JSON body; an empty body reads as `null`.
pub fn json_body<'a, T: Deserialize<'a>>(body: &'a Bytes) -> Result<T, ApiError> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) { b"null" } else { body };
    serde_json::from_slice(body).map_err(|e| ApiError::bad_json(format!("invalid JSON body: {e}")))
}

/// A basin or stream management body: S2's shapes there are objects all the way down,
/// so an array anywhere (`"config": []`, which serde would read as an empty struct) is
/// refused with where it was.
pub fn config_body<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let value: serde_json::Value = json_body(body)?;
    if let Some(path) = first_array(&value, "") {
        return Err(ApiError::bad_json(format!("invalid JSON body: expected an object, not an array, at `{path}`")));
    }
    serde_json::from_value(value).map_err(|e| ApiError::bad_json(format!("invalid JSON body: {e}")))
}

fn first_array(value: &serde_json::Value, path: &str) -> Option<String> {
    match value {
        serde_json::Value::Array(_) => Some(if path.is_empty() { "(body)".into() } else { path.to_string() }),
        serde_json::Value::Object(fields) => fields.iter().find_map(|(name, field)| {
            let path = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
            first_array(field, &path)
        }),
        _ => None,
    }
}

pub fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendInputJson<'a> {
    #[serde(borrow)]
    pub records: Vec<AppendRecordJson<'a>>,
    #[serde(default)]
    pub match_seq_num: Option<u64>,
    #[serde(default)]
    pub fencing_token: Option<String>,
    /// Shale extension: an idempotent producer's id and this append's sequence.
    #[serde(default)]
    pub producer_id: Option<String>,
    #[serde(default)]
    pub producer_seq: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendRecordJson<'a> {
    #[serde(default)]
    pub timestamp: Option<u64>,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// Borrowed from the request where it has no escapes (serde's `borrow` on a `Cow`).
    #[serde(default, borrow)]
    pub body: Cow<'a, str>,
}

impl AppendRecordJson<'_> {
    /// The record, `message` being the request body this one was read from.
    pub fn into_record(self, format: Format, message: &Bytes) -> Result<Record, ApiError> {
        let text = |what, s: String| format.decode(what, Cow::Owned(s), message);
        let headers = self
            .headers
            .into_iter()
            .map(|(name, value)| Ok(Header { name: text("header name", name)?, value: text("header value", value)? }))
            .collect::<Result<_, ApiError>>()?;
        Ok(Record { timestamp: self.timestamp, headers, body: format.decode("body", self.body, message)? })
    }
}

/// S2's `StreamPosition`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct PositionJson {
    pub seq_num: u64,
    pub timestamp: u64,
}

impl From<Position> for PositionJson {
    fn from(p: Position) -> Self {
        Self { seq_num: p.seq_num, timestamp: p.timestamp }
    }
}

/// S2's `AppendAck`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct AppendAckJson {
    pub start: PositionJson,
    pub end: PositionJson,
    pub tail: PositionJson,
}

impl From<AppendAck> for AppendAckJson {
    fn from(ack: AppendAck) -> Self {
        Self { start: ack.start.into(), end: ack.end.into(), tail: ack.tail.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(message: &Bytes, format: Format) -> Vec<Record> {
        let input: AppendInputJson = json_body(message).expect("an append body");
        input.records.into_iter().map(|r| r.into_record(format, message).expect("a record")).collect()
    }

    #[test]
    fn raw_bodies_without_escapes_are_slices_of_the_request() {
        let message =
            Bytes::from_static(br#"{"records":[{"body":"plain"},{"body":"say \"hi\"","headers":[["k","v"]]}]}"#);
        let records = records(&message, Format::Raw);
        assert_eq!(records[0].body, "plain");
        assert!(message.as_ptr_range().contains(&records[0].body.as_ptr()), "not copied");
        assert_eq!(records[1].body, "say \"hi\"");
        assert!(!message.as_ptr_range().contains(&records[1].body.as_ptr()), "unescaped into a string of its own");
        assert_eq!(records[1].headers[0], Header { name: "k".into(), value: "v".into() });
    }

    #[test]
    fn base64_bodies_are_decoded_and_bad_ones_refused() {
        let message = Bytes::from_static(br#"{"records":[{"body":"aGk="},{"body":""}]}"#);
        let bodies: Vec<Bytes> = records(&message, Format::Base64).into_iter().map(|r| r.body).collect();
        assert_eq!(bodies, vec![Bytes::from_static(b"hi"), Bytes::new()]);
        let bad = Bytes::from_static(br#"{"records":[{"body":"not base64!"}]}"#);
        let input: AppendInputJson = json_body(&bad).expect("an append body");
        let error = input.records.into_iter().next().map(|r| r.into_record(Format::Base64, &bad));
        assert!(matches!(error, Some(Err(_))));
    }

    #[test]
    fn text_outside_the_message_is_copied() {
        let message = Bytes::from_static(b"inside");
        let elsewhere = b"elsewhere".to_vec();
        assert_eq!(slice_of(&message, &elsewhere), "elsewhere");
        assert_eq!(slice_of(&message, &message[2..4]).as_ptr(), message[2..].as_ptr());
    }
}
