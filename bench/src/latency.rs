//! Latency percentiles for the benchmarks' JSON output.

use serde_json::{json, Value};

/// p50, p90, p99 and p999 of `latencies` in milliseconds (two decimals), and their count.
pub fn percentiles(latencies: &mut [std::time::Duration]) -> Value {
    latencies.sort();
    let at = |q: f64| {
        let i = ((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1).min(latencies.len().saturating_sub(1));
        latencies.get(i).map(|d| (d.as_secs_f64() * 1e5).round() / 100.0).unwrap_or(0.0)
    };
    json!({ "p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99), "p999_ms": at(0.999), "n": latencies.len() })
}
