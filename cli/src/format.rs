//! How records are written as lines and read back: `shale append` parses one record per
//! input line, `shale read` and `shale tail` print one per output line, in the formats
//! S2's CLI names (`text`, `json`, `json-binsafe`) plus `raw` for binary bodies.

use std::io::Write;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde::{Deserialize, Serialize};
use shale_proto::grpc as pb;

/// How records are written to stdout or read from stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// One body per line as UTF-8 text: appends refuse lines that are not UTF-8, reads
    /// print bodies that are not with replacement characters. Headers are not shown.
    #[default]
    Text,
    /// One body per line, byte for byte: any bytes but a newline, in and out.
    Raw,
    /// One JSON object per line: {"seq_num", "timestamp", "headers": [[name, value]],
    /// "body"} (appends take "timestamp", "headers" and "body"), with UTF-8 strings; empty
    /// headers and body are left out, as S2's CLI prints them.
    Json,
    /// As json, with the body and every header name and value in base64: any bytes.
    #[value(alias = "base64")]
    JsonBinsafe,
}

/// A record line that could not be parsed.
#[derive(Debug, PartialEq, Eq)]
pub struct BadLine(pub String);

impl Format {
    /// The record one input line (without its newline) describes. Only `raw` keeps a
    /// carriage return before the newline.
    pub fn parse(self, line: &[u8]) -> Result<pb::AppendRecord, BadLine> {
        let line = match self {
            Format::Raw => line,
            _ => line.strip_suffix(b"\r").unwrap_or(line),
        };
        match self {
            Format::Raw => Ok(body_only(line.to_vec())),
            Format::Text => match std::str::from_utf8(line) {
                Ok(_) => Ok(body_only(line.to_vec())),
                Err(e) => Err(BadLine(format!("not UTF-8 ({e}); --format raw or json-binsafe take any bytes"))),
            },
            Format::Json | Format::JsonBinsafe => {
                let record: JsonRecordIn = serde_json::from_slice(line)
                    .map_err(|e| BadLine(format!("bad JSON record `{}`: {e}", String::from_utf8_lossy(line))))?;
                let bytes = |text: String| self.decode(text);
                let headers = record
                    .headers
                    .into_iter()
                    .map(|(name, value)| Ok(pb::Header { name: bytes(name)?.into(), value: bytes(value)?.into() }))
                    .collect::<Result<_, BadLine>>()?;
                Ok(pb::AppendRecord { timestamp: record.timestamp, headers, body: bytes(record.body)?.into() })
            }
        }
    }

    /// Writes one record as a line.
    pub fn write(self, out: &mut impl Write, record: &pb::SequencedRecord) -> std::io::Result<()> {
        match self {
            Format::Raw => out.write_all(&record.body)?,
            Format::Text => out.write_all(String::from_utf8_lossy(&record.body).as_bytes())?,
            Format::Json | Format::JsonBinsafe => {
                let line = JsonRecordOut {
                    seq_num: record.seq_num,
                    timestamp: record.timestamp,
                    headers: record.headers.iter().map(|h| (self.encode(&h.name), self.encode(&h.value))).collect(),
                    body: self.encode(&record.body),
                };
                serde_json::to_writer(&mut *out, &line)?;
            }
        }
        out.write_all(b"\n")
    }

    fn encode(self, bytes: &[u8]) -> String {
        match self {
            Format::JsonBinsafe => BASE64.encode(bytes),
            _ => String::from_utf8_lossy(bytes).into_owned(),
        }
    }

    fn decode(self, text: String) -> Result<Vec<u8>, BadLine> {
        match self {
            Format::JsonBinsafe => BASE64.decode(&text).map_err(|e| BadLine(format!("`{text}` is not base64: {e}"))),
            _ => Ok(text.into_bytes()),
        }
    }
}

fn body_only(body: Vec<u8>) -> pb::AppendRecord {
    pb::AppendRecord { body: body.into(), ..Default::default() }
}

/// An input line in the JSON formats, as S2's CLI reads it.
#[derive(Deserialize)]
struct JsonRecordIn {
    timestamp: Option<u64>,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: String,
}

/// An output line in the JSON formats, as S2's CLI prints it (empty headers and body
/// left out).
#[derive(Serialize)]
struct JsonRecordOut {
    seq_num: u64,
    timestamp: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    headers: Vec<(String, String)>,
    #[serde(skip_serializing_if = "String::is_empty")]
    body: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequenced(record: pb::AppendRecord) -> pb::SequencedRecord {
        pb::SequencedRecord { seq_num: 7, timestamp: 9, headers: record.headers, body: record.body }
    }

    /// Every format reads back what it wrote, for the bytes it can carry.
    #[test]
    fn formats_round_trip_what_they_can_carry() {
        let binary = b"x\x00\xffy".to_vec();
        for (format, line) in [
            (Format::Raw, binary.clone()),
            (Format::Text, "héllo".as_bytes().to_vec()),
            (Format::Json, br#"{"body":"b","headers":[["k","v"]],"timestamp":5}"#.to_vec()),
            (Format::JsonBinsafe, br#"{"body":"eAD/eQ==","headers":[["AA==","/w=="]]}"#.to_vec()),
        ] {
            let record = format.parse(&line).unwrap();
            let mut out = Vec::new();
            format.write(&mut out, &sequenced(record.clone())).unwrap();
            let again = match format {
                Format::Raw | Format::Text => format.parse(out.strip_suffix(b"\n").unwrap()).unwrap(),
                Format::Json | Format::JsonBinsafe => {
                    let mut again = format.parse(out.strip_suffix(b"\n").unwrap()).unwrap();
                    assert_eq!(again.timestamp, Some(9), "{format:?}: the sequenced timestamp is printed");
                    again.timestamp = record.timestamp;
                    again
                }
            };
            assert_eq!(again, record, "{format:?}");
        }
        let binsafe = Format::JsonBinsafe.parse(br#"{"body":"eAD/eQ==","headers":[["AA==","/w=="]]}"#).unwrap();
        assert_eq!(binsafe.body.as_ref(), binary.as_slice());
        assert_eq!((binsafe.headers[0].name.as_ref(), binsafe.headers[0].value.as_ref()), (&b"\0"[..], &b"\xff"[..]));
    }

    #[test]
    fn bad_lines_are_refused_with_the_reason() {
        assert!(Format::Text.parse(b"x\xff").unwrap_err().0.contains("not UTF-8"));
        assert!(Format::Json.parse(b"{").unwrap_err().0.contains("bad JSON record `{`"));
        assert!(Format::Json.parse(br#"{"headers":[["k"]]}"#).is_err(), "a header is a pair");
        assert!(Format::JsonBinsafe.parse(br#"{"body":"not base64!"}"#).unwrap_err().0.contains("not base64"));
    }

    /// S2's CLI leaves out empty headers and bodies; binary bodies survive json-binsafe
    /// and come out lossy (never failing) in text and json.
    #[test]
    fn output_lines_match_s2s_cli() {
        let record = pb::SequencedRecord {
            seq_num: 1,
            timestamp: 2,
            headers: Default::default(),
            body: b"\xff".to_vec().into(),
        };
        let line = |format: Format| {
            let mut out = Vec::new();
            format.write(&mut out, &record).unwrap();
            String::from_utf8_lossy(&out).into_owned()
        };
        assert_eq!(line(Format::Json), "{\"seq_num\":1,\"timestamp\":2,\"body\":\"\u{fffd}\"}\n");
        assert_eq!(line(Format::JsonBinsafe), "{\"seq_num\":1,\"timestamp\":2,\"body\":\"/w==\"}\n");
        assert_eq!(line(Format::Text), "\u{fffd}\n");
        let empty = pb::SequencedRecord { seq_num: 3, timestamp: 4, ..Default::default() };
        let mut out = Vec::new();
        Format::Json.write(&mut out, &empty).unwrap();
        assert_eq!(out, b"{\"seq_num\":3,\"timestamp\":4}\n");
    }
}
