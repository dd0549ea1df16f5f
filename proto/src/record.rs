//! Records, their metered size, and S2 command records.

use std::ops::{Deref, Range};
use std::sync::Arc;

use bytes::Bytes;

/// Most records one append batch may carry (S2's limit).
pub const MAX_BATCH_RECORDS: usize = 1000;
/// Most metered bytes one append batch may carry (S2's limit, 1 MiB).
pub const MAX_BATCH_METERED_BYTES: u64 = 1024 * 1024;
/// Longest fencing token, in bytes (S2's limit).
pub const MAX_FENCING_TOKEN_BYTES: usize = 36;
/// The reserved header holding a record's key (Kafka's record key): absent for no key,
/// empty for an empty key. The Kafka listener writes it; the table tier gives it a column.
pub const KEY_HEADER: &[u8] = b"kafka.key";
/// The reserved header marking a record whose value is null (a Kafka tombstone).
pub const NULL_VALUE_HEADER: &[u8] = b"kafka.null-value";
/// The reserved header listing which of a Kafka record's headers have a null value (each
/// stored empty): their positions among its headers, from 0, in decimal, comma-separated
/// (`0,3`). Absent when none is null.
pub const NULL_HEADERS_HEADER: &[u8] = b"kafka.null-headers";

/// One header: a name/value pair of bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub name: Bytes,
    pub value: Bytes,
}

/// A record's headers. Those decoded from a stored block are a range of one list holding
/// the whole block's headers, allocated once for the block: a record read from a cached
/// block is cloned into every read that returns it, and cloning its headers is then one
/// reference count, not an allocation and a count per name and value. Those a request
/// carried keep the list they were decoded into (no copy into a shared list that nothing
/// shares).
#[derive(Clone, Debug)]
pub struct Headers(List);

// Every record in a cached block holds one: no larger than the `Vec` it replaces.
const _: () = assert!(std::mem::size_of::<Headers>() == std::mem::size_of::<Vec<Header>>());

#[derive(Clone, Debug)]
enum List {
    Owned(Vec<Header>),
    /// `all[start..end]` of a list many records share (an `Arc<Vec>`, not an `Arc<[_]>`:
    /// a thin pointer keeps `Headers` as small as a `Vec`, and the list is not copied).
    Shared {
        all: Arc<Vec<Header>>,
        start: u32,
        end: u32,
    },
}

impl Headers {
    /// Moves `all` into one shared list (one allocation, none when it is empty) and gives
    /// each of `spans`, in order, as one record's headers: spans lie within `all`.
    pub fn share(all: Vec<Header>, spans: impl IntoIterator<Item = Range<u32>>) -> impl Iterator<Item = Headers> {
        let all = (!all.is_empty()).then(|| Arc::new(all));
        spans.into_iter().map(move |span| match &all {
            Some(all) if !span.is_empty() => {
                debug_assert!(span.start < span.end && span.end as usize <= all.len(), "a span outside the list");
                Headers(List::Shared { all: Arc::clone(all), start: span.start, end: span.end })
            }
            _ => Headers::default(),
        })
    }
}

impl Default for Headers {
    fn default() -> Self {
        Headers(List::Owned(Vec::new()))
    }
}

impl Deref for Headers {
    type Target = [Header];

    fn deref(&self) -> &[Header] {
        match &self.0 {
            List::Owned(headers) => headers,
            List::Shared { all, start, end } => &all[*start as usize..*end as usize],
        }
    }
}

impl AsRef<[Header]> for Headers {
    fn as_ref(&self) -> &[Header] {
        self
    }
}

impl From<Vec<Header>> for Headers {
    fn from(headers: Vec<Header>) -> Self {
        Headers(List::Owned(headers))
    }
}

impl FromIterator<Header> for Headers {
    fn from_iter<I: IntoIterator<Item = Header>>(headers: I) -> Self {
        Headers(List::Owned(headers.into_iter().collect()))
    }
}

impl<'a> IntoIterator for &'a Headers {
    type Item = &'a Header;
    type IntoIter = std::slice::Iter<'a, Header>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl PartialEq for Headers {
    fn eq(&self, other: &Headers) -> bool {
        self.as_ref() == other.as_ref()
    }
}

impl Eq for Headers {}

impl PartialEq<Vec<Header>> for Headers {
    fn eq(&self, other: &Vec<Header>) -> bool {
        self.as_ref() == other.as_slice()
    }
}

/// A record as a client appends it. `timestamp` is the client's, in milliseconds since
/// the Unix epoch, if it gave one.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Record {
    pub timestamp: Option<u64>,
    pub headers: Headers,
    pub body: Bytes,
}

/// A record as a reader returns it: numbered and with its final timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequencedRecord {
    pub seq_num: u64,
    pub timestamp: u64,
    pub headers: Headers,
    pub body: Bytes,
}

/// A Kafka record's key: the value of its [`KEY_HEADER`], if it has one.
pub fn kafka_key(headers: &[Header]) -> Option<&Bytes> {
    headers.iter().find(|h| h.name.as_ref() == KEY_HEADER).map(|h| &h.value)
}

/// Whether a Kafka record's value is null (a tombstone): it has the [`NULL_VALUE_HEADER`].
pub fn is_tombstone(headers: &[Header]) -> bool {
    headers.iter().any(|h| h.name.as_ref() == NULL_VALUE_HEADER)
}

/// Metered size as S2 defines it: 8 bytes of overhead, 2 per header, plus every header
/// name, header value and body byte.
pub fn metered_bytes(headers: &[Header], body: &[u8]) -> u64 {
    let header_bytes: usize = headers.iter().map(|h| h.name.len() + h.value.len()).sum();
    (8 + 2 * headers.len() + header_bytes + body.len()) as u64
}

impl Record {
    /// A record from the parts every wire format carries (the protobuf messages of
    /// `shale.v1` and `s2.v1` both have a timestamp, name/value headers and a body).
    pub fn from_parts<B: Into<Bytes>>(
        timestamp: Option<u64>,
        headers: impl IntoIterator<Item = (B, B)>,
        body: B,
    ) -> Record {
        let headers = headers.into_iter().map(|(name, value)| Header { name: name.into(), value: value.into() });
        Record { timestamp, headers: headers.collect(), body: body.into() }
    }

    pub fn metered_bytes(&self) -> u64 {
        metered_bytes(&self.headers, &self.body)
    }

    /// The command this record carries, if it is a command record (exactly one header,
    /// with an empty name). `Err` describes a malformed command.
    pub fn command(&self) -> Result<Option<Command>, String> {
        Command::parse(&self.headers, &self.body)
    }
}

impl SequencedRecord {
    pub fn metered_bytes(&self) -> u64 {
        metered_bytes(&self.headers, &self.body)
    }
}

/// An S2 command record: a record with one header whose name is empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Sets the stream's fencing token to the body (at most 36 bytes of UTF-8).
    Fence(String),
    /// Moves the stream's trim point up to the given sequence number.
    Trim(u64),
}

impl Command {
    /// Parses a command record; `Ok(None)` when the record is not a command.
    pub fn parse(headers: &[Header], body: &[u8]) -> Result<Option<Command>, String> {
        let [header] = headers else {
            if headers.iter().any(|h| h.name.is_empty()) {
                return Err("a command record must have exactly one header".into());
            }
            return Ok(None);
        };
        if !header.name.is_empty() {
            return Ok(None);
        }
        match header.value.as_ref() {
            b"fence" => {
                let token = std::str::from_utf8(body).map_err(|_| "fencing token must be UTF-8".to_string())?;
                if token.len() > MAX_FENCING_TOKEN_BYTES {
                    return Err(format!(
                        "fencing token is {} bytes, at most {MAX_FENCING_TOKEN_BYTES} allowed",
                        token.len()
                    ));
                }
                Ok(Some(Command::Fence(token.to_string())))
            }
            b"trim" => {
                let bytes: [u8; 8] = body
                    .try_into()
                    .map_err(|_| "trim command body must be an 8-byte big-endian sequence number".to_string())?;
                Ok(Some(Command::Trim(u64::from_be_bytes(bytes))))
            }
            other => Err(format!("unknown command record `{}`", String::from_utf8_lossy(other))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &'static [u8], value: &'static [u8]) -> Header {
        Header { name: Bytes::from_static(name), value: Bytes::from_static(value) }
    }

    /// The shared list a record's headers are a range of.
    fn shared_list(headers: &Headers) -> &Arc<Vec<Header>> {
        let List::Shared { all, .. } = &headers.0 else { panic!("a shared list") };
        all
    }

    #[test]
    fn shared_headers_are_shared_by_clones_and_others_are_kept_as_they_came() {
        let all = vec![header(b"a", b"1"), header(b"b", b"2"), header(b"c", b"3")];
        let records: Vec<Headers> = Headers::share(all, [0..2, 2..2, 2..3]).collect();
        assert_eq!(records[0], vec![header(b"a", b"1"), header(b"b", b"2")]);
        assert!(matches!(&records[1].0, List::Owned(list) if list.capacity() == 0), "no headers, no list");
        assert_eq!(records[2], vec![header(b"c", b"3")]);
        assert!(Arc::ptr_eq(shared_list(&records[0]), shared_list(&records[2])), "one list for every record");
        let shared = records[0].clone();
        assert!(Arc::ptr_eq(shared_list(&shared), shared_list(&records[0])), "a clone shares the list");
        assert_eq!(Arc::strong_count(shared_list(&shared)), 3);

        let sent = vec![header(b"c", b"3")];
        let address = sent.as_ptr();
        let owned = Headers::from(sent);
        let List::Owned(list) = &owned.0 else { panic!("a request's list") };
        assert_eq!(list.as_ptr(), address, "a request's list is kept, not copied");
        assert_eq!(owned, vec![header(b"c", b"3")]);
        assert_ne!(owned, shared);

        let none: Vec<Headers> = Headers::share(Vec::new(), [0..0, 0..0]).collect();
        assert!(none.iter().all(|headers| matches!(&headers.0, List::Owned(list) if list.capacity() == 0)));
        assert_eq!(none[0], Headers::default());
        assert!(none[0].is_empty());
    }

    #[test]
    fn metered_bytes_counts_overhead_headers_and_body() {
        assert_eq!(metered_bytes(&[], b""), 8);
        assert_eq!(metered_bytes(&[header(b"ab", b"cde")], b"xyz"), 8 + 2 + 5 + 3);
    }

    #[test]
    fn parses_commands() {
        assert_eq!(Command::parse(&[header(b"", b"fence")], b"tok"), Ok(Some(Command::Fence("tok".into()))));
        assert_eq!(Command::parse(&[header(b"", b"trim")], &7u64.to_be_bytes()), Ok(Some(Command::Trim(7))));
        assert_eq!(Command::parse(&[header(b"k", b"fence")], b""), Ok(None));
        assert_eq!(Command::parse(&[], b"plain"), Ok(None));
        assert!(Command::parse(&[header(b"", b"trim")], b"short").is_err());
        assert!(Command::parse(&[header(b"", b"nope")], b"").is_err());
        assert!(Command::parse(&[header(b"", b"fence")], &[b'x'; 37]).is_err());
        assert!(Command::parse(&[header(b"", b"fence"), header(b"a", b"b")], b"").is_err());
    }
}
