//! SlateDB key families. Every integer is big-endian so byte order is numeric order.
//!
//! | key | value |
//! |---|---|
//! | `b/<basin>` | basin record (version byte 1 + protobuf, `records.proto`; JSON before) |
//! | `s/<basin>/<stream>` | stream record (the same format) |
//! | `i/<stream id u64><last seq u64>` | index entry (binary, [`crate::IndexEntry`]) |
//! | `t/<stream id u64><last ts u64><last seq u64>` | the same index entry, by time |
//! | `o/<segment id u128>` | the segment's live references ([`crate::refs::SegmentRefs`]) |
//! | `z/<segment id u128>` | a segment no entry references any more, awaiting deletion ([`crate::refs::Released`]) |
//! | `c/<segment id u128>` | the segment's commit outcome (acks), for retried commits; expires |
//! | `d/<stream id u64>` | deleted stream awaiting GC of its index and blocks |
//! | `k/<stream id u64>` | the stream's compaction cursor: entries below it are compacted (u64) |
//! | `p/<stream id u64><producer id>` | an idempotent producer's latest acks on the stream (`producers`); expires |
//! | `n/<stream id u64><consumer name>` | a tracked consumer's committed position (`consumers`) |
//! | `a/<token id>` | access token record ([`crate::AccessTokenRecord`]: id, secret hash, scope) |
//! | `h/<secret hash>` | the id of the access token whose secret hashes to this (SHA-256) |
//! | `m/next_stream_id` | next internal stream id (u64) |
//! | `m/writer` | id of the instance that last confirmed it is the writer |
//! | `m/gc_cursor` | the last segment key orphan collection settled |
//! | `w/<due ms u64><stream id u64>` | the stream's key: reclaim visits it by then (`agenda`) |
//! | `u/<stream id u64>` | the stream's key: it has entries above its compaction cursor (`agenda`) |
//! | `x/<transactional id>` | a Kafka transactional id's producer, epoch and open transaction (`transactional`) |
//! | `y/<id length u16><transactional id><n u64>` | an append staged in that transaction (`transactional`) |
//! | `q/<stream id u64>` | the stream's key compaction cursor and its key (`key_compaction`) |
//! | `f/<segment id u128>` | a compacted object less than half named (`defragment`) |
//! | `r/<segment id u128><stream id u64>` | the stream's key: the compacted object holds its blocks (`defragment`) |
//! | `m/agenda_seeded` | present once `w/` and `u/` cover every stream (`agenda`) |

pub const NEXT_STREAM_ID: &[u8] = b"m/next_stream_id";

/// The instance that last confirmed it is the writer (see `leader`).
pub const WRITER: &[u8] = b"m/writer";

/// The last segment key orphan collection settled.
pub const GC_CURSOR: &[u8] = b"m/gc_cursor";

/// Present once the reclaim agenda and uncompacted marks cover every stream.
pub const AGENDA_SEEDED: &[u8] = b"m/agenda_seeded";

pub const RECLAIM_AGENDA_PREFIX: &[u8] = b"w/";
pub const UNCOMPACTED_PREFIX: &[u8] = b"u/";

pub fn reclaim_agenda(due_ms: u64, stream_id: u64) -> Vec<u8> {
    [RECLAIM_AGENDA_PREFIX, &due_ms.to_be_bytes(), &stream_id.to_be_bytes()].concat()
}

/// The stream id of a `w/` key.
pub fn agenda_stream_id_of(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.get(10..18)?.try_into().ok()?))
}

pub const FRAGMENTED_PREFIX: &[u8] = b"f/";

pub fn fragmented(segment_id: u128) -> Vec<u8> {
    [FRAGMENTED_PREFIX, &segment_id.to_be_bytes()].concat()
}

pub fn compacted_stream(segment_id: u128, stream_id: u64) -> Vec<u8> {
    [&b"r/"[..], &segment_id.to_be_bytes(), &stream_id.to_be_bytes()].concat()
}

/// Every `r/` key of a compacted object.
pub fn compacted_streams_of(segment_id: u128) -> Vec<u8> {
    [&b"r/"[..], &segment_id.to_be_bytes()].concat()
}

pub const KEY_COMPACTION_PREFIX: &[u8] = b"q/";

pub fn key_compaction(stream_id: u64) -> Vec<u8> {
    [KEY_COMPACTION_PREFIX, &stream_id.to_be_bytes()].concat()
}

pub fn key_compaction_stream_id_of(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.strip_prefix(KEY_COMPACTION_PREFIX)?.try_into().ok()?))
}

pub fn uncompacted(stream_id: u64) -> Vec<u8> {
    [UNCOMPACTED_PREFIX, &stream_id.to_be_bytes()].concat()
}

/// The stream id of a `u/` key.
pub fn uncompacted_stream_id_of(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.get(2..)?.try_into().ok()?))
}

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

/// Per-stream key families keyed by a name after the stream id.
fn stream_named(family: &[u8; 2], stream_id: u64, name: &str) -> Vec<u8> {
    [&family[..], &stream_id.to_be_bytes(), name.as_bytes()].concat()
}

pub fn producer(stream_id: u64, producer: &str) -> Vec<u8> {
    stream_named(b"p/", stream_id, producer)
}

pub fn consumer(stream_id: u64, name: &str) -> Vec<u8> {
    stream_named(b"n/", stream_id, name)
}

/// The prefix of every key of `family` (`p/` or `n/`) of one stream.
pub fn of_stream(family: &[u8; 2], stream_id: u64) -> Vec<u8> {
    stream_named(family, stream_id, "")
}

/// Per-stream families removed with a deleted stream, apart from its index.
pub const STREAM_NAMED_FAMILIES: [&[u8; 2]; 2] = [b"p/", b"n/"];

pub const ACCESS_TOKEN_PREFIX: &[u8] = b"a/";

pub fn access_token(id: &str) -> Vec<u8> {
    [ACCESS_TOKEN_PREFIX, id.as_bytes()].concat()
}

pub fn access_token_secret(secret_hash: &[u8]) -> Vec<u8> {
    [b"h/", secret_hash].concat()
}

pub const STREAM_PREFIX: &[u8] = b"s/";
pub const SEGMENT_PREFIX: &[u8] = b"o/";
pub const RELEASED_PREFIX: &[u8] = b"z/";
pub const DELETED_STREAM_PREFIX: &[u8] = b"d/";

pub fn segment(segment_id: u128) -> Vec<u8> {
    [SEGMENT_PREFIX, &segment_id.to_be_bytes()].concat()
}

pub fn released(segment_id: u128) -> Vec<u8> {
    [RELEASED_PREFIX, &segment_id.to_be_bytes()].concat()
}

/// The segment id of an `o/` or `z/` key.
pub fn segment_id_of(key: &[u8]) -> Option<u128> {
    Some(u128::from_be_bytes(key.get(2..)?.try_into().ok()?))
}

/// The stream id of a `d/` key.
pub fn deleted_stream_id_of(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.get(2..)?.try_into().ok()?))
}

/// `s/<basin>/<stream>` -> (basin, stream). Basin names hold no `/`; stream names may.
pub fn stream_names_of(key: &[u8]) -> Option<(String, String)> {
    let rest = std::str::from_utf8(key.strip_prefix(STREAM_PREFIX)?).ok()?;
    let (basin, stream) = rest.split_once('/')?;
    Some((basin.to_string(), stream.to_string()))
}

pub fn commit_outcome(segment_id: u128) -> Vec<u8> {
    [&b"c/"[..], &segment_id.to_be_bytes()].concat()
}

pub fn compaction_cursor(stream_id: u64) -> Vec<u8> {
    [&b"k/"[..], &stream_id.to_be_bytes()].concat()
}

pub fn deleted_stream(stream_id: u64) -> Vec<u8> {
    [&b"d/"[..], &stream_id.to_be_bytes()].concat()
}

pub const TRANSACTION_PREFIX: &[u8] = b"x/";

pub fn transaction(transactional_id: &str) -> Vec<u8> {
    [TRANSACTION_PREFIX, transactional_id.as_bytes()].concat()
}

/// The prefix of every staged append of one transactional id (its length first, so no
/// id's keys are a prefix of another's).
pub fn staged_prefix(transactional_id: &str) -> Vec<u8> {
    let len = u16::try_from(transactional_id.len()).unwrap_or(u16::MAX);
    [&b"y/"[..], &len.to_be_bytes(), transactional_id.as_bytes()].concat()
}

pub fn staged(transactional_id: &str, n: u64) -> Vec<u8> {
    [staged_prefix(transactional_id), n.to_be_bytes().to_vec()].concat()
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

    #[test]
    fn keys_decode_to_what_built_them() {
        assert_eq!(segment_id_of(&segment(u128::MAX - 3)), Some(u128::MAX - 3));
        assert_eq!(segment_id_of(&released(7)), Some(7));
        assert_eq!(deleted_stream_id_of(&deleted_stream(42)), Some(42));
        assert_eq!(agenda_stream_id_of(&reclaim_agenda(9, 42)), Some(42));
        assert!(reclaim_agenda(9, u64::MAX) < reclaim_agenda(10, 0), "the agenda sorts by due time first");
        assert_eq!(uncompacted_stream_id_of(&uncompacted(7)), Some(7));
        assert_eq!(stream_names_of(&stream("basin-1", "a/b")), Some(("basin-1".into(), "a/b".into())));
        assert_eq!(segment_id_of(b"o/short"), None);
        assert!(producer(7, "p-1").ends_with(b"p-1"));
        assert!(consumer(7, "z").starts_with(&of_stream(b"n/", 7)));
        assert!(!consumer(8, "a").starts_with(&of_stream(b"n/", 7)));
    }
}
