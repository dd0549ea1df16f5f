//! SlateDB key families. Every integer is big-endian so byte order is numeric order.
//!
//! | key | value |
//! |---|---|
//! | `b/<basin>` | basin record (version byte 1 + protobuf, `records.proto`; JSON before) |
//! | `s/<basin>/<stream>` | stream record (the same format) |
//! | `i/<stream id u64><last seq u64>` | index entry (binary, [`crate::IndexEntry`]) |
//! | `t/<stream id u64><last ts u64><last seq u64>` | the same index entry, by time |
//! | `o/<segment id u128>` | number of blocks the segment holds (for GC) |
//! | `c/<segment id u128>` | the segment's commit outcome (acks), for retried commits; expires |
//! | `d/<stream id u64>` | deleted stream awaiting GC of its index and blocks |
//! | `m/next_stream_id` | next internal stream id (u64) |
//! | `m/writer` | id of the instance that last confirmed it is the writer |
//! | `m/gc_cursor` | the last segment key orphan collection settled |

pub const NEXT_STREAM_ID: &[u8] = b"m/next_stream_id";

/// The instance that last confirmed it is the writer (see `leader`).
pub const WRITER: &[u8] = b"m/writer";

/// The last segment key orphan collection settled.
pub const GC_CURSOR: &[u8] = b"m/gc_cursor";

pub fn basin(basin: &str) -> Vec<u8> {
    [b"b/", basin.as_bytes()].concat()
}

pub const BASIN_PREFIX: &[u8] = b"b/";

pub fn streams_of_basin(basin: &str) -> Vec<u8> {
    [b"s/", basin.as_bytes(), b"/"].concat()
}

pub fn stream(basin: &str, stream: &str) -> Vec<u8> {
    [b"s/", basin.as_bytes(), b"/", stream.as_bytes()].concat()
}

pub fn index(stream_id: u64, last_seq: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(18);
    key.extend_from_slice(b"i/");
    key.extend_from_slice(&stream_id.to_be_bytes());
    key.extend_from_slice(&last_seq.to_be_bytes());
    key
}

pub fn by_time(stream_id: u64, last_ts: u64, last_seq: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(26);
    key.extend_from_slice(b"t/");
    key.extend_from_slice(&stream_id.to_be_bytes());
    key.extend_from_slice(&last_ts.to_be_bytes());
    key.extend_from_slice(&last_seq.to_be_bytes());
    key
}

/// The first key after every `prefix`-family key of `stream_id` (`x/<id+1>`).
pub fn end_of_stream(family: &[u8; 2], stream_id: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(10);
    key.extend_from_slice(family);
    match stream_id.checked_add(1) {
        Some(next) => key.extend_from_slice(&next.to_be_bytes()),
        None => key.extend_from_slice(&[0xff; 9]),
    }
    key
}

pub fn segment(segment_id: u128) -> Vec<u8> {
    [&b"o/"[..], &segment_id.to_be_bytes()].concat()
}

pub fn commit_outcome(segment_id: u128) -> Vec<u8> {
    [&b"c/"[..], &segment_id.to_be_bytes()].concat()
}

pub fn deleted_stream(stream_id: u64) -> Vec<u8> {
    [&b"d/"[..], &stream_id.to_be_bytes()].concat()
}

/// The smallest key greater than every key starting with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0xff; prefix.len() + 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_keys_sort_by_stream_then_seq() {
        assert!(index(1, 5) < index(1, 6));
        assert!(index(1, u64::MAX) < index(2, 0));
        assert!(index(1, 300) > index(1, 255));
        assert!(index(1, u64::MAX) < end_of_stream(b"i/", 1));
        assert!(by_time(3, 10, 99) < by_time(3, 11, 0));
    }

    #[test]
    fn prefix_end_bounds_the_prefix() {
        assert_eq!(prefix_end(b"s/a/"), b"s/a0".to_vec());
        assert!(stream("basin", "zzz\u{10ffff}") < prefix_end(&streams_of_basin("basin")));
        assert_eq!(prefix_end(&[0x61, 0xff]), vec![0x62]);
    }
}
