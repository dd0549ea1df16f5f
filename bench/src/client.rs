//! A small S2-compatible HTTP client for the workloads, plus `/metrics` and process stats.

use anyhow::bail;
use serde_json::{json, Value};

pub const BASIN: &str = "bench-basin";

#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    /// Appends and management go here (a gateway, or an all-in-one server).
    pub base: String,
    /// Reads go here (a reader; the same as `base` for an all-in-one server).
    pub read_base: String,
    /// Other processes whose object requests count too (e.g. the metadata role).
    pub extra_metrics: Vec<String>,
}

impl Client {
    pub async fn ensure_basin(&self) -> anyhow::Result<()> {
        self.http.put(format!("{}/v1/basins/{BASIN}", self.base)).json(&json!({})).send().await?;
        Ok(())
    }

    pub async fn ensure_stream(&self, stream: &str) -> anyhow::Result<()> {
        let response = self
            .http
            .put(format!("{}/v1/streams/{stream}", self.base))
            .header("s2-basin", BASIN)
            .json(&json!({}))
            .send()
            .await?;
        if !response.status().is_success() {
            bail!("creating {stream}: {} {}", response.status(), response.text().await?);
        }
        Ok(())
    }

    /// Merges `patch` (S2's stream config JSON) into the stream's config.
    pub async fn reconfigure_stream(&self, stream: &str, patch: Value) -> anyhow::Result<()> {
        let response = self
            .http
            .patch(format!("{}/v1/streams/{stream}", self.base))
            .header("s2-basin", BASIN)
            .json(&patch)
            .send()
            .await?;
        if !response.status().is_success() {
            bail!("reconfiguring {stream}: {} {}", response.status(), response.text().await?);
        }
        Ok(())
    }

    /// Appends a JSON body (`{"records": [...]}`); returns the ack.
    pub async fn append(&self, stream: &str, body: &Value) -> anyhow::Result<Value> {
        let response = self
            .http
            .post(format!("{}/v1/streams/{stream}/records", self.base))
            .header("s2-basin", BASIN)
            .json(body)
            .send()
            .await?;
        if !response.status().is_success() {
            bail!("append failed: {} {}", response.status(), response.text().await?);
        }
        Ok(response.json().await?)
    }

    /// One unary read as protobuf (S2's `ReadBatch`): (records, metered-ish bytes, next seq).
    pub async fn read_protobuf(&self, stream: &str, seq: u64) -> anyhow::Result<(usize, u64, u64)> {
        use prost::Message;
        let response = self
            .http
            .get(format!("{}/v1/streams/{stream}/records?seq_num={seq}", self.read_base))
            .header("s2-basin", BASIN)
            .header("accept", "application/protobuf")
            .send()
            .await?;
        if !response.status().is_success() {
            bail!("read failed: {} {}", response.status(), response.text().await?);
        }
        let batch = shale_proto::s2::ReadBatch::decode(response.bytes().await?)?;
        let bytes = batch.records.iter().map(|r| r.body.len() as u64 + 8).sum();
        let next = batch.records.last().map(|r| r.seq_num + 1).unwrap_or(seq);
        Ok((batch.records.len(), bytes, next))
    }

    /// Counters from the write side's `/metrics` plus the extra processes', if Shale.
    pub async fn metrics(&self) -> Option<Metrics> {
        let mut total = self.metrics_of(&self.base).await?;
        for base in &self.extra_metrics {
            total = total.plus(self.metrics_of(base).await?);
        }
        Some(total)
    }

    /// Counters from the read side's `/metrics`, if Shale.
    pub async fn read_metrics(&self) -> Option<Metrics> {
        self.metrics_of(&self.read_base).await
    }

    /// One counter or gauge summed over the write side's and the extra processes' `/metrics`.
    pub async fn metric(&self, name: &str) -> f64 {
        let mut total = 0.0;
        for base in std::iter::once(&self.base).chain(&self.extra_metrics) {
            let Ok(response) = self.http.get(format!("{base}/metrics")).send().await else { continue };
            let Ok(text) = response.text().await else { continue };
            total += text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0);
        }
        total
    }

    async fn metrics_of(&self, base: &str) -> Option<Metrics> {
        let text = self.http.get(format!("{base}/metrics")).send().await.ok()?.text().await.ok()?;
        let value = |name: &str| -> f64 {
            text.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        };
        if !text.contains("shale_object_puts_total") {
            return None;
        }
        Some(Metrics {
            puts: value("shale_object_puts_total"),
            gets: value("shale_object_gets_total"),
            segments: value("shale_segments_written_total"),
            block_hits: value("shale_cache_block_hits_total"),
            block_misses: value("shale_cache_block_misses_total"),
            lists: value("shale_object_lists_total"),
            deletes: value("shale_object_deletes_total"),
            requests: ["puts", "gets", "deletes", "lists"]
                .iter()
                .map(|op| value(&format!("shale_object_{op}_total")))
                .sum(),
        })
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Metrics {
    pub puts: f64,
    pub gets: f64,
    pub segments: f64,
    pub block_hits: f64,
    pub block_misses: f64,
    pub lists: f64,
    pub deletes: f64,
    /// Every object-store request: PUTs, GETs, deletes and lists.
    pub requests: f64,
}

impl Metrics {
    fn plus(self, other: Metrics) -> Metrics {
        Metrics {
            puts: self.puts + other.puts,
            gets: self.gets + other.gets,
            segments: self.segments + other.segments,
            block_hits: self.block_hits + other.block_hits,
            block_misses: self.block_misses + other.block_misses,
            lists: self.lists + other.lists,
            deletes: self.deletes + other.deletes,
            requests: self.requests + other.requests,
        }
    }

    pub fn since(self, before: Metrics) -> Metrics {
        Metrics {
            puts: self.puts - before.puts,
            gets: self.gets - before.gets,
            segments: self.segments - before.segments,
            block_hits: self.block_hits - before.block_hits,
            block_misses: self.block_misses - before.block_misses,
            lists: self.lists - before.lists,
            deletes: self.deletes - before.deletes,
            requests: self.requests - before.requests,
        }
    }
}

/// Resident memory of this process in MiB (server included when in process).
pub fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:").map(|v| v.trim().trim_end_matches(" kB").trim().to_string()))
        })
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}
