//! `/v1/metrics/...` and `/v1/locations/...`: S2's usage metrics and locations.
//!
//! A stream's `storage` is served: one point of S2's gauge, the stream's bytes now (the
//! metered bytes from its trim point to its tail), when now lies in the asked range.
//! Every other metric set, account and basin, and the locations endpoints answer S2's 501
//! `not_implemented`, as s2-lite answers all of them: Shale keeps no per-basin history of
//! operations, and has one location. A set S2 does not name is a 400, as in S2.

use axum::extract::{Path, RawQuery};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::query::Query;
use crate::{ApiError, Caller};

const ACCOUNT_SETS: &[&str] = &["active-basins", "account-ops", "estimated-billable-usage"];
const BASIN_SETS: &[&str] = &["storage", "append-ops", "read-ops", "read-throughput", "append-throughput", "basin-ops"];
const STREAM_SETS: &[&str] = &["storage"];

/// A metric request's query: its set (one of `sets`) and its range in Unix seconds, either
/// end open when not given. S2 takes the end as exclusive for its sampled series; the one
/// point served here is now, and a range ending now (`s2 ... --end-ago 0s`) holds it.
struct MetricRequest {
    set: String,
    start: Option<u32>,
    end: Option<u32>,
}

impl MetricRequest {
    fn parse(raw: Option<&str>, sets: &[&str]) -> Result<Self, ApiError> {
        let query = Query::parse(raw, &["set", "start", "end", "interval"])?;
        let set = query.string("set").ok_or_else(|| ApiError::bad_query("query parameter `set` is required"))?;
        if !sets.contains(&set) {
            return Err(ApiError::bad_query(format!("unknown metric set `{set}`; one of: {}", sets.join(", "))));
        }
        if let Some(interval) = query.string("interval") {
            if !["minute", "hour", "day"].contains(&interval) {
                return Err(ApiError::bad_query(format!("unknown interval `{interval}`; one of: minute, hour, day")));
            }
        }
        let (start, end) = (query.number::<u32>("start")?, query.number::<u32>("end")?);
        if let (Some(start), Some(end)) = (start, end) {
            if start > end {
                return Err(ApiError::bad(format!("start {start} is after end {end}")));
            }
        }
        Ok(MetricRequest { set: set.to_string(), start, end })
    }

    fn covers(&self, now_s: u32) -> bool {
        self.start.is_none_or(|start| start <= now_s) && self.end.is_none_or(|end| now_s <= end)
    }
}

pub async fn account(RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let request = MetricRequest::parse(raw.as_deref(), ACCOUNT_SETS)?;
    Err(ApiError::NotImplemented(format!("account metric set `{}` is not implemented", request.set)))
}

pub async fn basin(Path(_basin): Path<String>, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let request = MetricRequest::parse(raw.as_deref(), BASIN_SETS)?;
    Err(ApiError::NotImplemented(format!("basin metric set `{}` is not implemented", request.set)))
}

pub async fn stream(
    Caller(service): Caller,
    Path((basin, stream)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let request = MetricRequest::parse(raw.as_deref(), STREAM_SETS)?;
    let bytes = service.stream_storage(&basin, &stream).await?;
    let now_s = u32::try_from(service.clock().now_ms() / 1000).unwrap_or(u32::MAX);
    let values = if request.covers(now_s) { vec![json!([now_s, bytes as f64])] } else { Vec::new() };
    let gauge = json!({ "name": "storage", "unit": "bytes", "values": values });
    Ok(Json(json!({ "values": [{ "gauge": gauge }] })).into_response())
}

pub async fn locations() -> ApiError {
    ApiError::NotImplemented("locations are not implemented".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_query_names_a_known_set_and_an_ordered_range() {
        let ok = MetricRequest::parse(Some("set=storage&start=10&end=20&interval=hour"), STREAM_SETS).unwrap();
        assert_eq!((ok.set.as_str(), ok.start, ok.end), ("storage", Some(10), Some(20)));
        assert!(ok.covers(10) && ok.covers(20) && !ok.covers(9) && !ok.covers(21));
        assert!(MetricRequest::parse(Some("set=storage"), STREAM_SETS).unwrap().covers(0), "an open range");
        for bad in [
            "",
            "start=1",
            "set=append-ops",
            "set=storage&interval=week",
            "set=storage&start=2&end=1",
            "set=storage&x=1",
        ] {
            let error = MetricRequest::parse(Some(bad), STREAM_SETS).err().unwrap();
            assert_eq!(error.http_status(), 400, "{bad}");
        }
        assert!(MetricRequest::parse(Some("set=append-ops"), BASIN_SETS).is_ok());
    }
}
