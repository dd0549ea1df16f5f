//! The Kafka listener's counters on `/metrics`: connections open and accepted, those
//! closed by an error (a malformed request, a refused login, a broken socket), and the
//! requests read, by API (one series per API the listener serves: bounded cardinality).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kafka_protocol::messages::ApiKey;

use crate::versions::SERVED;

/// What one Kafka listener counts. Shared by its connections; rendered by the process's
/// `/metrics`.
#[derive(Debug)]
pub struct KafkaMetrics {
    connections_open: AtomicU64,
    connections_accepted: AtomicU64,
    connections_failed: AtomicU64,
    /// Requests read, one counter per entry of [`SERVED`], in its order.
    requests: Vec<AtomicU64>,
    /// Requests for an API the listener does not serve.
    requests_unknown: AtomicU64,
}

impl Default for KafkaMetrics {
    fn default() -> Self {
        KafkaMetrics {
            connections_open: AtomicU64::new(0),
            connections_accepted: AtomicU64::new(0),
            connections_failed: AtomicU64::new(0),
            requests: SERVED.iter().map(|_| AtomicU64::new(0)).collect(),
            requests_unknown: AtomicU64::new(0),
        }
    }
}

/// One open connection, counted until it is dropped.
pub(crate) struct OpenConnection(Arc<KafkaMetrics>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections_open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl KafkaMetrics {
    /// Counts a connection accepted; it is open until the value returned is dropped.
    pub(crate) fn opened(self: &Arc<Self>) -> OpenConnection {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(self.clone())
    }

    /// Counts a connection closed by an error.
    pub(crate) fn failed(&self) {
        self.connections_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one request read.
    pub(crate) fn request(&self, api: ApiKey) {
        match SERVED.iter().position(|(served, ..)| *served == api) {
            Some(index) => self.requests[index].fetch_add(1, Ordering::Relaxed),
            None => self.requests_unknown.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// Counts a request whose API key is not one Kafka defines.
    pub(crate) fn unknown_request(&self) {
        self.requests_unknown.fetch_add(1, Ordering::Relaxed);
    }

    /// Appends the series in Prometheus' text format.
    pub fn render(&self, out: &mut String) {
        shale_storage::render_gauges(
            &[("shale_kafka_connections", "Kafka connections open", &self.connections_open)],
            out,
        );
        shale_storage::render_counters(
            &[
                ("shale_kafka_connections_total", "Kafka connections accepted", &self.connections_accepted),
                (
                    "shale_kafka_connections_failed_total",
                    "Kafka connections closed by an error (a malformed or refused request, a failed login, a broken socket)",
                    &self.connections_failed,
                ),
            ],
            out,
        );
        let name = "shale_kafka_requests_total";
        let _ = writeln!(out, "# HELP {name} Kafka requests read, by API\n# TYPE {name} counter");
        for ((api, ..), count) in SERVED.iter().zip(&self.requests) {
            let _ = writeln!(out, "{name}{{api=\"{api:?}\"}} {}", count.load(Ordering::Relaxed));
        }
        let _ = writeln!(out, "{name}{{api=\"unknown\"}} {}", self.requests_unknown.load(Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(metrics: &KafkaMetrics, name: &str) -> String {
        let mut out = String::new();
        metrics.render(&mut out);
        let line = out.lines().find(|line| line.starts_with(&format!("{name} "))).unwrap_or_default();
        line.rsplit(' ').next().unwrap_or_default().to_string()
    }

    #[test]
    fn counts_connections_until_they_close_and_requests_by_api() {
        let metrics = Arc::new(KafkaMetrics::default());
        let first = metrics.opened();
        let second = metrics.opened();
        drop(first);
        assert_eq!(series(&metrics, "shale_kafka_connections"), "1");
        assert_eq!(series(&metrics, "shale_kafka_connections_total"), "2");
        drop(second);
        metrics.failed();
        assert_eq!(series(&metrics, "shale_kafka_connections"), "0");
        assert_eq!(series(&metrics, "shale_kafka_connections_failed_total"), "1");

        metrics.request(ApiKey::Produce);
        metrics.request(ApiKey::Produce);
        metrics.request(ApiKey::Metadata);
        metrics.unknown_request();
        assert_eq!(series(&metrics, "shale_kafka_requests_total{api=\"Produce\"}"), "2");
        assert_eq!(series(&metrics, "shale_kafka_requests_total{api=\"Metadata\"}"), "1");
        assert_eq!(series(&metrics, "shale_kafka_requests_total{api=\"Fetch\"}"), "0");
        assert_eq!(series(&metrics, "shale_kafka_requests_total{api=\"unknown\"}"), "1");
    }
}
