//! Tracked consumers on `/metrics`, with bounded cardinality: how many there are and
//! their summed lag in records, then per-consumer series (lag in records, bytes and
//! seconds) for the `top` furthest behind only.

use std::collections::HashMap;
use std::fmt::Write;

use shale_metadata_contract::{CatalogCall, ConsumerPosition, MetadataError, StreamRecord};

use super::Service;
use crate::ServiceError;

/// Most consumers one scrape looks at.
pub const MAX_SCANNED_CONSUMERS: usize = 10_000;

impl Service {
    /// Appends the consumer series to `out` (a reader's `/metrics`).
    pub async fn render_consumer_lag(&self, top: usize, out: &mut String) -> Result<(), ServiceError> {
        let call = CatalogCall::ListConsumers {
            basin: String::new(),
            stream: String::new(),
            start_after: String::new(),
            limit: MAX_SCANNED_CONSUMERS,
        };
        let consumers = self.metadata.catalog(call).await?.into_consumers()?.items;
        // Each stream's record, looked up once, or `None` once it is deleted (its positions
        // await collection).
        let mut records: HashMap<(String, String), Option<StreamRecord>> = HashMap::new();
        let mut behind: Vec<(u64, ConsumerPosition)> = Vec::with_capacity(consumers.len());
        for position in consumers {
            let key = (position.basin.clone(), position.stream.clone());
            if !records.contains_key(&key) {
                let record = match self.metadata.stream(&key.0, &key.1).await {
                    Ok(info) => Some(info.record),
                    Err(MetadataError::StreamNotFound { .. } | MetadataError::BasinNotFound(_)) => None,
                    Err(e) => return Err(e.into()),
                };
                records.insert(key.clone(), record);
            }
            if let Some(Some(record)) = records.get(&key) {
                behind.push((record.next_seq.saturating_sub(position.seq_num), position));
            }
        }
        let total: u64 = behind.iter().map(|(records, _)| records).sum();
        let _ = writeln!(out, "# HELP shale_consumers Tracked consumers (at most {MAX_SCANNED_CONSUMERS} counted)");
        let _ = writeln!(out, "# TYPE shale_consumers gauge\nshale_consumers {}", behind.len());
        let _ = writeln!(out, "# HELP shale_consumer_lag_records_sum Records all tracked consumers are behind");
        let _ = writeln!(out, "# TYPE shale_consumer_lag_records_sum gauge\nshale_consumer_lag_records_sum {total}");
        behind.sort_by_key(|(records, _)| std::cmp::Reverse(*records));
        behind.truncate(top);
        let mut series = [
            ("shale_consumer_lag_records", "Records a top-lagging consumer is behind", String::new()),
            ("shale_consumer_lag_bytes", "Metered bytes a top-lagging consumer is behind", String::new()),
            ("shale_consumer_lag_seconds", "Age of a top-lagging consumer's first unread record", String::new()),
        ];
        for (_, position) in &behind {
            let Some(Some(record)) = records.get(&(position.basin.clone(), position.stream.clone())) else {
                continue;
            };
            let lag = self.lag(position, record).await?;
            let labels = format!(
                "basin=\"{}\",stream=\"{}\",consumer=\"{}\"",
                label(&position.basin),
                label(&position.stream),
                label(&position.name)
            );
            let _ = writeln!(series[0].2, "{}{{{labels}}} {}", series[0].0, lag.records);
            if let Some(bytes) = lag.bytes {
                let _ = writeln!(series[1].2, "{}{{{labels}}} {bytes}", series[1].0);
            }
            let _ = writeln!(series[2].2, "{}{{{labels}}} {}", series[2].0, lag.seconds);
        }
        for (name, help, lines) in &mut series {
            let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{lines}");
        }
        Ok(())
    }
}

/// A Prometheus label value: backslash, quote and newline escaped.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn label_values_are_escaped() {
        assert_eq!(super::label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
