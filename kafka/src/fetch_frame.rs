//! A fetch answer laid out for the socket without copying its records: the frame's fields
//! are encoded into one small buffer and every partition's records go out as the buffer
//! the fetch filled, so megabytes of batches are not copied again into the frame. The
//! layout is Kafka's FetchResponse v4 to v12 (the versions served) and is checked byte
//! for byte against the protocol crate's encoder; an answer with a field this encoder
//! does not lay out (tagged fields, a diverging epoch, node endpoints) is encoded by the
//! protocol crate instead.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::FetchResponse;

/// The first flexible (compact, tagged) version of Fetch.
const FIRST_FLEXIBLE: i16 = 12;
/// The last version laid out here.
const LAST_LAID_OUT: i16 = 12;

/// A response frame as pieces to write in order.
#[derive(Default)]
pub struct FrameParts {
    parts: VecDeque<Bytes>,
    remaining: usize,
}

impl FrameParts {
    fn push(&mut self, part: Bytes) {
        if !part.is_empty() {
            self.remaining += part.len();
            self.parts.push_back(part);
        }
    }
}

impl Buf for FrameParts {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.parts.front().map_or(&[], |part| part.as_ref())
    }

    fn advance(&mut self, mut cnt: usize) {
        self.remaining -= cnt.min(self.remaining);
        while cnt > 0 {
            let Some(front) = self.parts.front_mut() else { return };
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.parts.pop_front();
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut filled = 0;
        for (slot, part) in dst.iter_mut().zip(&self.parts) {
            *slot = IoSlice::new(part);
            filled += 1;
        }
        filled
    }
}

/// Whether `response` at `version` has only fields [`lay_out`] writes.
pub fn can_lay_out(response: &FetchResponse, version: i16) -> bool {
    (4..=LAST_LAID_OUT).contains(&version)
        && response.unknown_tagged_fields.is_empty()
        && response.node_endpoints.is_empty()
        && response.responses.iter().all(|topic| {
            topic.unknown_tagged_fields.is_empty()
                && topic.partitions.iter().all(|p| {
                    let plain = PartitionData::default();
                    p.unknown_tagged_fields.is_empty()
                        && p.diverging_epoch == plain.diverging_epoch
                        && p.current_leader == plain.current_leader
                        && p.snapshot_id == plain.snapshot_id
                        && (version >= 11 || p.preferred_read_replica == plain.preferred_read_replica)
                        && p.aborted_transactions.iter().flatten().all(|t| t.unknown_tagged_fields.is_empty())
                })
        })
}

/// The whole frame (length, header, body) of `response`, which [`can_lay_out`] at
/// `version`.
pub fn lay_out(correlation_id: i32, version: i16, response: &FetchResponse) -> FrameParts {
    let flexible = version >= FIRST_FLEXIBLE;
    let mut frame = FrameParts::default();
    let mut fields = BytesMut::with_capacity(256);
    fields.put_i32(0); // the frame's length, set at the end
    fields.put_i32(correlation_id);
    if flexible {
        put_varint(&mut fields, 0); // the header's tagged fields
    }
    fields.put_i32(response.throttle_time_ms);
    if version >= 7 {
        fields.put_i16(response.error_code);
        fields.put_i32(response.session_id);
    }
    put_len(&mut fields, flexible, Some(response.responses.len()));
    for topic in &response.responses {
        put_string(&mut fields, flexible, &topic.topic.0);
        put_len(&mut fields, flexible, Some(topic.partitions.len()));
        for p in &topic.partitions {
            fields.put_i32(p.partition_index);
            fields.put_i16(p.error_code);
            fields.put_i64(p.high_watermark);
            fields.put_i64(p.last_stable_offset);
            if version >= 5 {
                fields.put_i64(p.log_start_offset);
            }
            put_len(&mut fields, flexible, p.aborted_transactions.as_ref().map(Vec::len));
            for aborted in p.aborted_transactions.iter().flatten() {
                fields.put_i64(aborted.producer_id.0);
                fields.put_i64(aborted.first_offset);
                if flexible {
                    put_varint(&mut fields, 0);
                }
            }
            if version >= 11 {
                fields.put_i32(p.preferred_read_replica.0);
            }
            put_len(&mut fields, flexible, p.records.as_ref().map(Bytes::len));
            if let Some(records) = p.records.as_ref().filter(|r| !r.is_empty()) {
                frame.push(fields.split().freeze());
                frame.push(records.clone());
            }
            if flexible {
                put_varint(&mut fields, 0); // the partition's tagged fields
            }
        }
        if flexible {
            put_varint(&mut fields, 0); // the topic's tagged fields
        }
    }
    if flexible {
        put_varint(&mut fields, 0); // the response's tagged fields
    }
    frame.push(fields.freeze());
    let length = i32::try_from(frame.remaining - 4).unwrap_or(i32::MAX);
    let mut first = frame.parts.pop_front().map(BytesMut::from).unwrap_or_default();
    first[..4].copy_from_slice(&length.to_be_bytes());
    frame.parts.push_front(first.freeze());
    frame
}

/// An array's or bytes' length: `None` is null.
fn put_len(out: &mut BytesMut, flexible: bool, len: Option<usize>) {
    match (flexible, len) {
        (true, None) => put_varint(out, 0),
        (true, Some(n)) => put_varint(out, u64::try_from(n).unwrap_or(u64::MAX) + 1),
        (false, None) => out.put_i32(-1),
        (false, Some(n)) => out.put_i32(i32::try_from(n).unwrap_or(i32::MAX)),
    }
}

/// A non-null string: an int16 length, or a compact one.
fn put_string(out: &mut BytesMut, flexible: bool, value: &str) {
    if flexible {
        put_varint(out, value.len() as u64 + 1);
    } else {
        out.put_i16(i16::try_from(value.len()).unwrap_or(i16::MAX));
    }
    out.put_slice(value.as_bytes());
}

fn put_varint(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch};
    use kafka_protocol::messages::{BrokerId, ProducerId, ResponseHeader, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn partition(index: i32, records: Option<&'static [u8]>) -> PartitionData {
        PartitionData::default()
            .with_partition_index(index)
            .with_high_watermark(100 + i64::from(index))
            .with_last_stable_offset(90)
            .with_log_start_offset(3)
            .with_records(records.map(Bytes::from_static))
    }

    fn response(version: i16) -> FetchResponse {
        let aborted = vec![AbortedTransaction::default().with_producer_id(ProducerId(7)).with_first_offset(12)];
        let mut busy = partition(0, Some(b"a batch's bytes")).with_aborted_transactions(Some(aborted));
        if version >= 11 {
            busy = busy.with_preferred_read_replica(BrokerId(2));
        }
        let topics = vec![
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("orders")))
                .with_partitions(vec![
                    busy,
                    partition(1, Some(b"")),
                    partition(2, None).with_aborted_transactions(None).with_error_code(1),
                    partition(3, Some(b"more records")),
                ]),
            FetchableTopicResponse::default().with_topic(TopicName(StrBytes::from_static_str("t"))),
        ];
        let mut response = FetchResponse::default().with_throttle_time_ms(5).with_responses(topics);
        if version >= 7 {
            response = response.with_error_code(0).with_session_id(0);
        }
        response
    }

    /// The frame as the protocol crate encodes it.
    fn encoded(correlation_id: i32, version: i16, response: &FetchResponse) -> Vec<u8> {
        let mut out = BytesMut::new();
        out.put_i32(0);
        let header_version = if version >= FIRST_FLEXIBLE { 1 } else { 0 };
        ResponseHeader::default().with_correlation_id(correlation_id).encode(&mut out, header_version).unwrap();
        response.encode(&mut out, version).unwrap();
        let len = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&len.to_be_bytes());
        out.to_vec()
    }

    #[test]
    fn the_frame_is_the_protocol_crates_encoding_at_every_version_served() {
        for version in 4..=LAST_LAID_OUT {
            let response = response(version);
            assert!(can_lay_out(&response, version), "v{version}");
            let mut parts = lay_out(42, version, &response);
            let records_parts = parts.parts.iter().filter(|p| p.as_ref() == b"a batch's bytes").count();
            assert_eq!(records_parts, 1, "v{version}: the records are a part of their own");
            let laid_out = parts.copy_to_bytes(parts.remaining());
            assert_eq!(laid_out.as_ref(), encoded(42, version, &response).as_slice(), "v{version}");
        }
    }

    #[test]
    fn fields_not_laid_out_leave_the_answer_to_the_protocol_crate() {
        let mut response = response(12);
        response.responses[0].partitions[0].current_leader = LeaderIdAndEpoch::default().with_leader_id(BrokerId(1));
        assert!(!can_lay_out(&response, 12));
        assert!(!can_lay_out(&self::response(13), 13));
    }

    #[test]
    fn parts_are_written_whole_across_partial_advances() {
        let mut parts = lay_out(1, 12, &response(12));
        let whole = encoded(1, 12, &response(12));
        let mut written = Vec::new();
        while parts.has_remaining() {
            let mut slices = [IoSlice::new(&[]); 4];
            let n = parts.chunks_vectored(&mut slices);
            // Take 3 bytes of the first slice at a time, as a short write would.
            let take = slices[..n].first().map_or(0, |s| s.len().min(3));
            written.extend_from_slice(&parts.chunk()[..take]);
            parts.advance(take);
        }
        assert_eq!(written, whole);
    }
}
