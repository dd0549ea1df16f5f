//! The Kafka listener's series on `/metrics`: connections open and accepted, those
//! closed by an error (a malformed request, a refused login, a broken socket), the
//! requests read, by API (one series per API the listener serves: bounded cardinality),
//! and the groups, share sessions and share-partitions it holds in memory.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use kafka_protocol::messages::ApiKey;

use crate::versions::SERVED;
use crate::{groups, shares};

/// What one Kafka listener counts. Shared by its connections; rendered by the process's
/// `/metrics`.
pub struct KafkaMetrics {
    connections_open: AtomicU64,
    connections_accepted: AtomicU64,
    connections_failed: AtomicU64,
    /// Requests read, one counter per entry of [`SERVED`], in its order.
    requests: Vec<AtomicU64>,
    /// Requests for an API the listener does not serve.
    requests_unknown: AtomicU64,
    /// The listener's group coordinator and share groups, once it serves.
    held: OnceLock<(Arc<groups::Coordinator>, Arc<shares::Shares>)>,
}

impl Default for KafkaMetrics {
    fn default() -> Self {
        KafkaMetrics {
            connections_open: AtomicU64::new(0),
            connections_accepted: AtomicU64::new(0),
            connections_failed: AtomicU64::new(0),
            requests: SERVED.iter().map(|_| AtomicU64::new(0)).collect(),
            requests_unknown: AtomicU64::new(0),
            held: OnceLock::new(),
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

    /// Shows what `groups` and `shares` hold from now on.
    pub(crate) fn watch(&self, groups: Arc<groups::Coordinator>, shares: Arc<shares::Shares>) {
        let _ = self.held.set((groups, shares));
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
        if let Some((groups, shares)) = self.held.get() {
            let (classic, consumer) = groups.sizes();
            let (share, sessions, partitions) = shares.sizes();
            let name = "shale_kafka_groups";
            let _ = writeln!(out, "# HELP {name} Kafka groups held in memory, by protocol\n# TYPE {name} gauge");
            for (protocol, count) in [("classic", classic), ("consumer", consumer), ("share", share)] {
                let _ = writeln!(out, "{name}{{protocol=\"{protocol}\"}} {count}");
            }
            for (name, help, count) in [
                ("shale_kafka_share_sessions", "Share sessions open", sessions),
                ("shale_kafka_share_partitions", "Share-partitions held in memory", partitions),
            ] {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {count}");
            }
        }
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

    #[test]
    fn shows_what_the_listener_holds_once_it_serves() {
        let metrics = KafkaMetrics::default();
        assert_eq!(series(&metrics, "shale_kafka_share_sessions"), "", "nothing before the listener serves");
        let clock: Arc<dyn shale_storage::Clock> = Arc::new(shale_storage::ManualClock::new(0));
        let shares = shares::Shares::new(clock.clone(), &crate::KafkaConfig::default());
        metrics.watch(Arc::new(groups::Coordinator::new(clock)), Arc::new(shares));
        for name in [
            "shale_kafka_groups{protocol=\"classic\"}",
            "shale_kafka_groups{protocol=\"consumer\"}",
            "shale_kafka_groups{protocol=\"share\"}",
            "shale_kafka_share_sessions",
            "shale_kafka_share_partitions",
        ] {
            assert_eq!(series(&metrics, name), "0", "{name}");
        }
    }
}
