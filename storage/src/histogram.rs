use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds, in seconds, of [`Histogram`] buckets.
pub const LATENCY_BUCKETS: [f64; 14] =
    [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0];

/// A fixed-bucket latency histogram, rendered in Prometheus text format.
#[derive(Debug)]
pub struct Histogram {
    counts: [AtomicU64; LATENCY_BUCKETS.len()],
    overflow: AtomicU64,
    sum_micros: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            overflow: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn observe(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        self.sum_micros.fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
        match LATENCY_BUCKETS.iter().position(|&bound| secs <= bound) {
            Some(i) => self.counts[i].fetch_add(1, Ordering::Relaxed),
            None => self.overflow.fetch_add(1, Ordering::Relaxed),
        };
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u64>() + self.overflow.load(Ordering::Relaxed)
    }

    /// Appends `name_bucket`, `name_sum` and `name_count` lines.
    pub fn render(&self, name: &str, help: &str, out: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        self.render_series(name, "", out);
    }

    /// Appends this histogram's lines as one series of `name` (whose HELP and TYPE lines
    /// the caller wrote): `labels` is `key="value",...` without braces, or empty.
    pub fn render_series(&self, name: &str, labels: &str, out: &mut String) {
        use std::fmt::Write;
        let sep = if labels.is_empty() { "" } else { "," };
        let braced = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let mut cumulative = 0;
        for (bound, count) in LATENCY_BUCKETS.iter().zip(&self.counts) {
            cumulative += count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.overflow.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {cumulative}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{braced} {sum}\n{name}_count{braced} {cumulative}");
    }
}

/// Appends Prometheus counter lines for `(name, help, value)` triples.
pub fn render_counters(counters: &[(&str, &str, &AtomicU64)], out: &mut String) {
    use std::fmt::Write;
    for (name, help, value) in counters {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", value.load(Ordering::Relaxed));
    }
}

/// Prometheus text for gauges held in atomics: `(name, help, value)`.
pub fn render_gauges(gauges: &[(&str, &str, &AtomicU64)], out: &mut String) {
    use std::fmt::Write;
    for (name, help, value) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {}", value.load(Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_cumulative_buckets() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(15));
        h.observe(Duration::from_secs(60));
        let mut out = String::new();
        h.render("x", "help", &mut out);
        assert!(out.contains("x_bucket{le=\"0.001\"} 1"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.02\"} 2"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 3"), "{out}");
        let mut labeled = String::new();
        h.render_series("x", "route=\"/a\"", &mut labeled);
        assert!(labeled.contains("x_bucket{route=\"/a\",le=\"0.02\"} 2"), "{labeled}");
        assert!(labeled.contains("x_count{route=\"/a\"} 3"), "{labeled}");
        assert_eq!(h.count(), 3);
    }
}
