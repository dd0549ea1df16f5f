//! S2's `s2s/proto` sessions over HTTP, and the conversions between S2's record messages
//! and Shale's types (also used for `application/protobuf` unary bodies).
//!
//! Framing (S2's `s2s.md`): a 3-byte big-endian length of what follows, a flag byte
//! `[T][CC][R][RRRR]` (T terminal, CC compression 00 none / 01 zstd / 10 gzip, R reconnect
//! advice, never set by Shale), then a protobuf message, or for a terminal frame a 2-byte
//! HTTP status and the JSON error body. Shale decodes every compression and sends
//! uncompressed frames.

use std::io::Read;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::stream::{self, Stream, StreamExt};
use prost::Message;
use shale_gateway::AppendInput;
use shale_metadata_contract::{AppendAck, Position};
use shale_proto::s2 as pb;
use shale_proto::{ErrorCode, SequencedRecord};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::append_input::{self, DecodedAppend};
use super::read_batch;
use crate::ApiError;
use shale_service::producer_stamp;
use shale_service::ServiceError;
use shale_service::{FollowEvent, ReadSessionRequest, Service, MAX_PENDING_APPENDS};

pub const CONTENT_TYPE: &str = "s2s/proto";
/// Largest frame S2 allows (length prefix value), and the limit for decompressed bodies.
const MAX_FRAME_BYTES: usize = 2 * 1024 * 1024;
const FLAG_TERMINAL: u8 = 0b1000_0000;
/// Read batches (up to 1 MiB each) a read session prepares ahead of the client.
const READ_AHEAD_FRAMES: usize = 4;
const FLAG_COMPRESSION: u8 = 0b0110_0000;

/// A regular frame carrying `message`, encoded straight into the frame.
pub fn regular_frame(message: &impl Message) -> Bytes {
    frame_with(0, message.encoded_len(), |out| {
        // Cannot fail: the buffer has room for the whole message.
        let _ = message.encode(out);
    })
}

/// A terminal frame carrying an error's HTTP status and JSON body.
pub fn terminal_frame(error: &ApiError) -> Bytes {
    let json = error.body().to_string();
    let mut body = Vec::with_capacity(2 + json.len());
    body.put_u16(error.http_status());
    body.extend_from_slice(json.as_bytes());
    frame(FLAG_TERMINAL, &body)
}

fn frame(flag: u8, body: &[u8]) -> Bytes {
    frame_with(flag, body.len(), |out| out.put_slice(body))
}

/// A frame whose `body_len` bytes of body `write_body` writes in place after the length
/// prefix and the flag byte.
fn frame_with(flag: u8, body_len: usize, write_body: impl FnOnce(&mut BytesMut)) -> Bytes {
    let len = body_len + 1;
    let mut out = BytesMut::with_capacity(3 + len);
    out.put_uint(len as u64, 3);
    out.put_u8(flag);
    write_body(&mut out);
    out.freeze()
}

/// One decoded frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    Regular(Bytes),
    Terminal(Bytes),
}

/// Takes one frame off the front of `buf`, or `None` when more bytes are needed.
pub fn decode_frame(buf: &mut BytesMut) -> Result<Option<Frame>, ServiceError> {
    let Some(len) = frame_len(buf)? else { return Ok(None) };
    if buf.len() < 3 + len {
        // Room for the whole frame at once, not a growth step per chunk.
        buf.reserve(3 + len - buf.len());
        return Ok(None);
    }
    buf.advance(3);
    finish_frame(buf.split_to(len).freeze()).map(Some)
}

/// The length the prefix at the front of `head` gives (flag byte and body), checked;
/// `None` while the prefix is incomplete.
fn frame_len(head: &[u8]) -> Result<Option<usize>, ServiceError> {
    let [a, b, c, ..] = *head else { return Ok(None) };
    let len = (usize::from(a) << 16) | (usize::from(b) << 8) | usize::from(c);
    if len == 0 || len > MAX_FRAME_BYTES {
        return Err(bad_frame(format!("s2s frame length {len} is outside 1..={MAX_FRAME_BYTES}")));
    }
    Ok(Some(len))
}

/// A frame from its flag byte and body (`frame` is at least the flag byte).
fn finish_frame(mut frame: Bytes) -> Result<Frame, ServiceError> {
    let flag = frame.get_u8();
    let body = match (flag & FLAG_COMPRESSION) >> 5 {
        0 => frame,
        1 => decompress(zstd::stream::read::Decoder::new(&frame[..]).map_err(bad_compression)?)?,
        2 => decompress(flate2::read::GzDecoder::new(&frame[..]))?,
        _ => return Err(bad_frame("s2s frame uses an unknown compression")),
    };
    Ok(if flag & FLAG_TERMINAL != 0 { Frame::Terminal(body) } else { Frame::Regular(body) })
}

/// Cuts frames out of a body's chunks as they arrive. A frame lying whole inside one
/// chunk is a slice of it, not a copy (the listener accepts 1 MiB HTTP/2 frames, so an
/// append's frame usually arrives in one chunk); only a frame split across chunks is
/// gathered, and only its own bytes are copied, never the frames after it.
#[derive(Default)]
pub(super) struct FrameCutter {
    /// What is left of the last chunk.
    rest: Bytes,
    /// The start of a frame split across chunks.
    partial: BytesMut,
}

impl FrameCutter {
    /// Takes the next chunk; the previous one must be used up (`next` returned `None`).
    pub(super) fn push(&mut self, chunk: Bytes) {
        debug_assert!(self.rest.is_empty(), "a chunk pushed before the last was used up");
        self.rest = chunk;
    }

    /// Whether no byte of a frame is held.
    fn is_empty(&self) -> bool {
        self.rest.is_empty() && self.partial.is_empty()
    }

    /// The next whole frame, or `None` when it needs another chunk.
    pub(super) fn next(&mut self) -> Result<Option<Frame>, ServiceError> {
        if self.partial.is_empty() {
            if let Some(len) = frame_len(&self.rest)? {
                if self.rest.len() >= 3 + len {
                    let mut frame = self.rest.split_to(3 + len);
                    frame.advance(3);
                    return finish_frame(frame).map(Some);
                }
            }
        }
        loop {
            // What the frame at the front of `partial` needs: its prefix, then all of it.
            let wanted = frame_len(&self.partial)?.map_or(3, |len| 3 + len);
            if self.partial.len() == wanted {
                return decode_frame(&mut self.partial);
            }
            if self.rest.is_empty() {
                return Ok(None);
            }
            let take = (wanted - self.partial.len()).min(self.rest.len());
            self.partial.reserve(wanted - self.partial.len());
            self.partial.extend_from_slice(&self.rest.split_to(take));
        }
    }
}

fn bad_frame(message: impl Into<String>) -> ServiceError {
    ServiceError::unreadable(ErrorCode::BadFrame, message)
}

fn bad_compression(e: std::io::Error) -> ServiceError {
    bad_frame(format!("s2s frame does not decompress: {e}"))
}

fn decompress(reader: impl Read) -> Result<Bytes, ServiceError> {
    let mut out = Vec::new();
    reader.take(MAX_FRAME_BYTES as u64 + 1).read_to_end(&mut out).map_err(bad_compression)?;
    if out.len() > MAX_FRAME_BYTES {
        return Err(bad_frame("s2s frame decompresses past 2 MiB"));
    }
    Ok(Bytes::from(out))
}

/// Regular frames from a request body, each decoded by `decode`; ends at end of body or
/// at a terminal frame.
fn messages<M: Send + 'static>(
    body: Body,
    decode: fn(Bytes) -> Result<M, prost::DecodeError>,
) -> impl Stream<Item = Result<M, ServiceError>> + Unpin + Send {
    let state = (body.into_data_stream(), FrameCutter::default(), false);
    Box::pin(stream::unfold(state, move |(mut data, mut frames, done)| async move {
        if done {
            return None;
        }
        loop {
            match frames.next() {
                Ok(Some(Frame::Regular(body))) => {
                    let message = decode(body)
                        .map_err(|e| ServiceError::unreadable(ErrorCode::BadProto, format!("bad s2s message: {e}")));
                    return Some((message, (data, frames, false)));
                }
                Ok(Some(Frame::Terminal(_))) => return None,
                Ok(None) => {}
                Err(e) => return Some((Err(e), (data, frames, true))),
            }
            match data.next().await {
                Some(Ok(chunk)) => frames.push(chunk),
                Some(Err(e)) => {
                    return Some((Err(ServiceError::bad(format!("reading session body: {e}"))), (data, frames, true)))
                }
                None if frames.is_empty() => return None,
                None => return Some((Err(bad_frame("session body ended inside a frame")), (data, frames, true))),
            }
        }
    }))
}

fn session_response(frames: impl Stream<Item = Bytes> + Send + 'static) -> Response {
    let body = Body::from_stream(frames.map(Ok::<_, std::convert::Infallible>));
    ([("content-type", CONTENT_TYPE)], body).into_response()
}

/// An append session: `AppendInput` frames in, `AppendAck` frames out in order, a
/// terminal frame at the first failure.
pub fn append_session(service: &Service, basin: String, stream: String, body: Body) -> Result<Response, ApiError> {
    let (acks_tx, acks) = mpsc::channel(MAX_PENDING_APPENDS);
    let inputs = messages(body, append_input::decode).map(move |m| m.and_then(|m| append_input(&basin, &stream, m)));
    service.append_session(inputs, acks_tx)?;
    let frames = ReceiverStream::new(acks).map(|ack| match ack {
        Ok(ack) => regular_frame(&append_ack(ack)),
        Err(error) => terminal_frame(&ApiError::from(error)),
    });
    Ok(session_response(frames))
}

/// A read session: `ReadBatch` frames, an empty batch as heartbeat while following, a
/// terminal frame on error; the body ends when a bounded read is complete.
pub async fn read_session(service: &Service, request: ReadSessionRequest) -> Result<Response, ApiError> {
    let follower = service.read_session(request).await?;
    let frames = follower.run_ahead(READ_AHEAD_FRAMES, |event| match event {
        FollowEvent::Batch(output, _) => Some(read_batch_frame(&output.records, Some(output.tail))),
        FollowEvent::Heartbeat(tail) => Some(read_batch_frame(&[], Some(tail))),
        FollowEvent::Done => None,
        FollowEvent::Error(error) => Some(terminal_frame(&ApiError::from(error))),
    });
    Ok(session_response(frames))
}

/// The append a decoded `AppendInput` asks for.
pub fn append_input(basin: &str, stream: &str, input: DecodedAppend) -> Result<AppendInput, ServiceError> {
    let fields = input.fields;
    Ok(AppendInput {
        basin: basin.to_string(),
        stream: stream.to_string(),
        records: input.records,
        match_seq_num: fields.match_seq_num,
        fencing_token: fields.fencing_token,
        producer: producer_stamp(fields.producer_id, fields.producer_seq)?,
        ..Default::default()
    })
}

fn position(p: Position) -> pb::StreamPosition {
    pb::StreamPosition { seq_num: p.seq_num, timestamp: p.timestamp }
}

pub fn append_ack(ack: AppendAck) -> pb::AppendAck {
    pb::AppendAck { start: Some(position(ack.start)), end: Some(position(ack.end)), tail: Some(position(ack.tail)) }
}

/// A regular frame carrying a `ReadBatch` of `records`, encoded in place.
pub fn read_batch_frame(records: &[SequencedRecord], tail: Option<Position>) -> Bytes {
    let batch = read_batch::measure(records, tail);
    frame_with(0, batch.len(), |out| batch.encode(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_wait_for_whole_frames() {
        let ack = append_ack(AppendAck {
            start: Position { seq_num: 1, timestamp: 2 },
            end: Position { seq_num: 3, timestamp: 4 },
            tail: Position { seq_num: 3, timestamp: 4 },
        });
        let bytes = regular_frame(&ack);
        let mut buf = BytesMut::from(&bytes[..bytes.len() - 1]);
        assert_eq!(decode_frame(&mut buf).expect("valid prefix"), None, "partial frame waits");
        buf.extend_from_slice(&bytes[bytes.len() - 1..]);
        let Some(Frame::Regular(body)) = decode_frame(&mut buf).expect("valid frame") else { panic!("regular frame") };
        assert_eq!(pb::AppendAck::decode(body).expect("decodes"), ack);
        assert!(buf.is_empty());
    }

    #[test]
    fn decodes_compressed_frames_and_terminal_frames() {
        let input = pb::AppendInput {
            records: vec![pb::AppendRecord { body: vec![7; 4096].into(), ..Default::default() }],
            ..Default::default()
        };
        let raw = input.encode_to_vec();
        let zstd = zstd::encode_all(&raw[..], 3).expect("compresses");
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gzip, &raw).expect("compresses");
        let gzip = gzip.finish().expect("compresses");
        for (flag, body) in [(0b0010_0000u8, zstd), (0b0100_0000u8, gzip)] {
            let mut buf = BytesMut::from(&frame(flag, &body)[..]);
            let Some(Frame::Regular(decoded)) = decode_frame(&mut buf).expect("valid") else { panic!("regular") };
            assert_eq!(pb::AppendInput::decode(decoded).expect("decodes"), input);
        }
        let mut buf = BytesMut::from(&terminal_frame(&ApiError::bad("nope"))[..]);
        let Some(Frame::Terminal(body)) = decode_frame(&mut buf).expect("valid") else { panic!("terminal") };
        assert_eq!(u16::from_be_bytes([body[0], body[1]]), 400);
        assert!(std::str::from_utf8(&body[2..]).expect("json").contains("nope"));
        let code = |result: Result<Option<Frame>, ServiceError>| result.err().map(|e| e.code());
        let mut bad = BytesMut::from(&frame(0b0110_0000, b"x")[..]);
        assert_eq!(code(decode_frame(&mut bad)), Some(ErrorCode::BadFrame), "unknown compression is S2's bad_frame");
        let mut empty = BytesMut::from(&[0u8, 0, 0][..]);
        assert_eq!(code(decode_frame(&mut empty)), Some(ErrorCode::BadFrame), "so is a zero length");
    }

    /// Every frame the cutter gives for `chunks`, until it needs more; the error, if any.
    fn cut(chunks: &[Bytes]) -> (Vec<Frame>, Option<ServiceError>, bool) {
        let (mut cutter, mut frames) = (FrameCutter::default(), Vec::new());
        for chunk in chunks {
            cutter.push(chunk.clone());
            loop {
                match cutter.next() {
                    Ok(Some(frame)) => frames.push(frame),
                    Ok(None) => break,
                    Err(e) => return (frames, Some(e), false),
                }
            }
        }
        (frames, None, cutter.is_empty())
    }

    /// A frame whole inside a chunk comes out as a slice of that chunk: no copy.
    #[test]
    fn a_frame_inside_one_chunk_is_not_copied() {
        let chunk: Bytes = [frame(0, &[1; 100]), frame(0, &[2; 50])].concat().into();
        let (frames, error, drained) = cut(std::slice::from_ref(&chunk));
        assert!(error.is_none() && drained);
        let range = chunk.as_ptr_range();
        for (frame, (byte, len)) in frames.iter().zip([(1u8, 100), (2, 50)]) {
            let Frame::Regular(body) = frame else { panic!("regular frame") };
            assert_eq!(&body[..], &vec![byte; len][..]);
            assert!(range.contains(&body.as_ptr()), "the body points into the chunk");
        }
    }

    proptest::proptest! {
        /// However a body is cut into chunks, the cutter gives the frames `decode_frame`
        /// gives for the whole body, and holds nothing after the last.
        #[test]
        fn any_chunking_gives_the_same_frames(
            bodies in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300), 1..6),
            cuts in proptest::collection::vec(0usize..2000, 0..8),
        ) {
            let whole: Vec<u8> = bodies.iter().map(|b| frame(0, b)).collect::<Vec<_>>().concat();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (whole.len() + 1)).collect();
            cuts.extend([0, whole.len()]);
            cuts.sort_unstable();
            let chunks: Vec<Bytes> = cuts.windows(2).map(|w| Bytes::copy_from_slice(&whole[w[0]..w[1]])).collect();
            let (frames, error, drained) = cut(&chunks);
            proptest::prop_assert!(error.is_none() && drained);
            let mut buf = BytesMut::from(&whole[..]);
            let mut expected = Vec::new();
            while let Some(frame) = decode_frame(&mut buf).expect("valid frames") {
                expected.push(frame);
            }
            proptest::prop_assert_eq!(frames, expected);
        }
    }

    /// A bad length is an error whether it arrives whole or split.
    #[test]
    fn a_bad_length_is_an_error_in_any_chunking() {
        let bad = [0u8, 0, 0, 9];
        for chunks in [
            vec![Bytes::copy_from_slice(&bad)],
            vec![Bytes::copy_from_slice(&bad[..1]), Bytes::copy_from_slice(&bad[1..])],
        ] {
            assert_eq!(cut(&chunks).1.map(|e| e.code()), Some(ErrorCode::BadFrame));
        }
        let (frames, error, drained) = cut(&[Bytes::copy_from_slice(&frame(0, b"ab")[..3])]);
        assert!(frames.is_empty() && error.is_none() && !drained, "a frame cut short waits");
    }
}
