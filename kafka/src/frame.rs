//! Kafka's framing: a 4-byte big-endian length, then the request (header and body) or
//! response. A frame longer than the configured bound, or with a negative length, closes
//! the connection before its body is read.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::KafkaError;

/// Reads one frame's bytes; `None` at a clean end of the connection.
pub async fn read_frame(
    socket: &mut (impl AsyncRead + Unpin),
    buf: &mut BytesMut,
    max: usize,
) -> Result<Option<Bytes>, KafkaError> {
    let mut len = [0u8; 4];
    match socket.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = i32::from_be_bytes(len);
    let Some(size) = usize::try_from(len).ok().filter(|&size| size <= max && size >= 4) else {
        return Err(KafkaError::FrameTooLarge { len: len.into(), max });
    };
    // Read into the buffer's spare capacity: zeroing a produce request's megabyte first
    // cost as much as the copy that fills it.
    buf.clear();
    buf.reserve(size);
    while buf.len() < size {
        let wanted = (size - buf.len()) as u64;
        if AsyncReadExt::take(&mut *socket, wanted).read_buf(buf).await? == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
    }
    Ok(Some(buf.split().freeze()))
}

/// A request whose header decoded: its API is known, but its version may not be served.
#[derive(Debug)]
pub struct Request {
    pub header: RequestHeader,
    pub api_key: ApiKey,
    /// The body, still encoded (decoded once the version is known to be served).
    pub body: Bytes,
}

/// What the first bytes of a request say.
#[derive(Debug)]
pub enum Decoded {
    Request(Request),
    /// An API key this build does not know: answered by ApiVersions' error only for
    /// ApiVersions itself, else the connection is closed as Kafka does.
    UnknownApi {
        api_key: i16,
        correlation_id: i32,
    },
}

/// Decodes a request's header (its version depends on the API and its version).
pub fn decode_header(mut frame: Bytes) -> Result<Decoded, KafkaError> {
    if frame.len() < 8 {
        return Err(KafkaError::Malformed("request shorter than its header".into()));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let Ok(api_key) = ApiKey::try_from(key) else {
        return Ok(Decoded::UnknownApi { api_key: key, correlation_id });
    };
    let header_version = api_key.request_header_version(version);
    let header = RequestHeader::decode(&mut frame, header_version).map_err(|e| KafkaError::Malformed(e.to_string()))?;
    Ok(Decoded::Request(Request { header, api_key, body: frame }))
}

/// Decodes a request's body at its version.
pub fn decode_body(request: &Request) -> Result<RequestKind, KafkaError> {
    let mut body = request.body.clone();
    let decoded = RequestKind::decode(request.api_key, &mut body, request.header.request_api_version).map_err(|e| {
        KafkaError::Malformed(format!("{:?} v{}: {e}", request.api_key, request.header.request_api_version))
    })?;
    if body.has_remaining() {
        tracing::debug!(api = ?request.api_key, left = body.remaining(), "kafka request had trailing bytes");
    }
    Ok(decoded)
}

/// The whole decode of one frame's bytes, header and body, as the connection does it:
/// for fuzzing.
pub fn decode_request(frame: &[u8]) -> Result<(), KafkaError> {
    if let Decoded::Request(request) = decode_header(Bytes::copy_from_slice(frame))? {
        if crate::versions::served(request.api_key, request.header.request_api_version) {
            decode_body(&request)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn a_frame_past_the_bound_or_negative_is_refused_before_its_body() {
        for len in [i32::MAX, -1, 2] {
            let bytes = len.to_be_bytes().to_vec();
            let error = read_frame(&mut bytes.as_slice(), &mut BytesMut::new(), 1 << 20).await.unwrap_err();
            assert!(matches!(error, KafkaError::FrameTooLarge { .. }), "{error}");
        }
        let mut ok = 8i32.to_be_bytes().to_vec();
        ok.extend_from_slice(&[0, 18, 0, 3, 0, 0, 0, 7]);
        let frame = read_frame(&mut ok.as_slice(), &mut BytesMut::new(), 1 << 20).await.unwrap().unwrap();
        assert_eq!(frame.len(), 8);
        assert!(read_frame(&mut &[][..], &mut BytesMut::new(), 1 << 20).await.unwrap().is_none());
    }

    /// A frame that arrives in pieces is read whole, the next one after it is read on
    /// its own, and a connection that ends inside a frame is an error, not a frame.
    #[tokio::test]
    async fn frames_arriving_in_pieces_are_read_whole_and_a_cut_one_is_an_error() {
        let (mut client, mut server) = tokio::io::duplex(64);
        let body: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for frame in [&body[..], &body[..10]] {
                client.write_all(&(frame.len() as i32).to_be_bytes()).await.unwrap();
                for piece in frame.chunks(7) {
                    client.write_all(piece).await.unwrap();
                }
            }
            client.write_all(&100i32.to_be_bytes()).await.unwrap();
            client.write_all(&[1, 2, 3]).await.unwrap();
            body
        });
        let mut buf = BytesMut::new();
        let first = read_frame(&mut server, &mut buf, 1 << 20).await.unwrap().unwrap();
        let second = read_frame(&mut server, &mut buf, 1 << 20).await.unwrap().unwrap();
        let cut = read_frame(&mut server, &mut buf, 1 << 20).await;
        let body = writer.await.unwrap();
        assert_eq!(&first[..], &body[..]);
        assert_eq!(&second[..], &body[..10]);
        assert!(cut.is_err(), "a frame cut short: {cut:?}");
    }

    #[test]
    fn unknown_api_keys_and_short_headers_are_told_apart() {
        let unknown = decode_header(Bytes::from_static(&[0x7f, 0, 0, 0, 0, 0, 0, 9])).unwrap();
        assert!(matches!(unknown, Decoded::UnknownApi { api_key: 0x7f00, correlation_id: 9 }));
        assert!(decode_header(Bytes::from_static(&[0, 18, 0])).is_err());
    }
}
