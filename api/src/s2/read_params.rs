//! A read's parameters as S2's query string and headers give them: for plain reads, SSE
//! and S2S sessions alike.

use std::time::Duration;

use axum::http::HeaderMap;
use shale_reader::{ReadLimits, ReadRequest, ReadStart};
use shale_service::ReadSessionRequest;

use super::query::Query;
use super::wire::Format;
use crate::ApiError;

/// A read's parameters as S2's query string gives them.
pub struct ReadParams {
    pub request: ReadRequest,
    pub format: Format,
    /// On a session (SSE or S2S), how long to follow once caught up: `wait` as given, else,
    /// as S2 defines it, 0 when the read is bounded (`count`, `bytes` or `until`) and no
    /// bound (follow forever) when it is not.
    pub session_wait: Option<Duration>,
}

impl ReadParams {
    pub fn session(self) -> ReadSessionRequest {
        ReadSessionRequest { read: self.request, idle_limit: self.session_wait, resumed_after: (0, 0) }
    }
}

pub fn read_params(
    basin: String,
    stream: String,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<ReadParams, ApiError> {
    let query =
        Query::parse(query, &["seq_num", "timestamp", "tail_offset", "count", "bytes", "until", "clamp", "wait"])?;
    let starts = [
        query.number::<u64>("seq_num")?.map(ReadStart::SeqNum),
        query.number::<u64>("timestamp")?.map(ReadStart::Timestamp),
        query.number::<u64>("tail_offset")?.map(ReadStart::TailOffset),
    ];
    let mut given = starts.into_iter().flatten();
    let start = given.next().unwrap_or_default();
    if given.next().is_some() {
        return Err(ApiError::bad("give at most one of seq_num, timestamp and tail_offset"));
    }
    let wait = query.number::<u64>("wait")?.map(Duration::from_secs);
    // A read stops before a record past `bytes`, as S2's do ([`ReadLimits::at_least_one`]).
    let limits = ReadLimits { count: query.number("count")?, bytes: query.number("bytes")?, at_least_one: false };
    let until = query.number("until")?;
    let bounded = limits.count.is_some() || limits.bytes.is_some() || until.is_some();
    let session_wait = wait.or(bounded.then_some(Duration::ZERO));
    let request = ReadRequest {
        basin,
        stream,
        start,
        limits,
        until,
        clamp: query.boolean("clamp")?.unwrap_or(false),
        wait: wait.unwrap_or_default(),
    };
    Ok(ReadParams { request, format: Format::from_headers(headers)?, session_wait })
}
