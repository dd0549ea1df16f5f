//! Where tiering passes spend their time, summed since the tierer started: basins tiered,
//! and the wall time of each step of a basin's pass, for `/metrics` and the benchmarks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// The steps of a basin's pass, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Reading the committed state, publishing it, collecting the garbage it allows.
    Prepare,
    /// Listing the basin's streams and reading the records to tier from the log.
    Gather,
    /// Encoding and writing the pass's data files, manifest and manifest list.
    Write,
    /// The commit record's conditional put, its publication and the sweep.
    Commit,
    /// Deciding on maintenance and, when due, writing and committing it.
    Maintain,
}

impl Step {
    pub const ALL: [Step; 5] = [Step::Prepare, Step::Gather, Step::Write, Step::Commit, Step::Maintain];

    pub fn name(self) -> &'static str {
        match self {
            Step::Prepare => "prepare",
            Step::Gather => "gather",
            Step::Write => "write",
            Step::Commit => "commit",
            Step::Maintain => "maintain",
        }
    }
}

/// Totals since start.
#[derive(Debug, Default)]
pub struct PassStats {
    basins_tiered: AtomicU64,
    step_micros: [AtomicU64; Step::ALL.len()],
}

/// A copy of [`PassStats`]' totals; the difference of two is what happened in between.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassTotals {
    pub basins_tiered: u64,
    pub step_micros: [u64; Step::ALL.len()],
}

impl PassTotals {
    /// What happened between `earlier` and these totals.
    pub fn since(&self, earlier: &PassTotals) -> PassTotals {
        let mut step_micros = self.step_micros;
        for (now, before) in step_micros.iter_mut().zip(earlier.step_micros) {
            *now = now.saturating_sub(before);
        }
        PassTotals { basins_tiered: self.basins_tiered.saturating_sub(earlier.basins_tiered), step_micros }
    }

    /// Mean time of `step` per basin tiered.
    pub fn mean(&self, step: Step) -> Duration {
        let total = self.step_micros[step as usize];
        Duration::from_micros(total.checked_div(self.basins_tiered).unwrap_or(0))
    }
}

impl PassStats {
    pub fn totals(&self) -> PassTotals {
        PassTotals {
            basins_tiered: self.basins_tiered.load(Ordering::Relaxed),
            step_micros: std::array::from_fn(|i| self.step_micros[i].load(Ordering::Relaxed)),
        }
    }

    /// Times one basin's pass: each [`StepTimer::done`] adds the time since the one before.
    pub fn time_basin(&self) -> StepTimer<'_> {
        self.basins_tiered.fetch_add(1, Ordering::Relaxed);
        StepTimer { stats: self, since: Instant::now() }
    }

    /// Prometheus text for `/metrics`.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let passes = [("shale_tiering_basin_passes_total", "Tiering passes over a basin", &self.basins_tiered)];
        shale_storage::render_counters(&passes, out);
        let name = "shale_tiering_step_seconds_total";
        let _ = writeln!(out, "# HELP {name} Wall time of tiering passes by step\n# TYPE {name} counter");
        for step in Step::ALL {
            let seconds = self.step_micros[step as usize].load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(out, "{name}{{step=\"{}\"}} {seconds}", step.name());
        }
    }
}

/// The clock of one basin's pass.
pub struct StepTimer<'a> {
    stats: &'a PassStats,
    since: Instant,
}

impl StepTimer<'_> {
    /// `step` ended now.
    pub fn done(&mut self, step: Step) {
        let now = Instant::now();
        let micros = now.duration_since(self.since).as_micros() as u64;
        self.stats.step_micros[step as usize].fetch_add(micros, Ordering::Relaxed);
        self.since = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn each_step_gets_the_time_since_the_step_before() {
        let stats = PassStats::default();
        let before = stats.totals();
        let mut timer = stats.time_basin();
        tokio::time::advance(Duration::from_millis(3)).await;
        timer.done(Step::Prepare);
        tokio::time::advance(Duration::from_millis(5)).await;
        timer.done(Step::Gather);
        timer.done(Step::Write);
        let spent = stats.totals().since(&before);
        assert_eq!(spent.basins_tiered, 1);
        assert_eq!(spent.mean(Step::Prepare), Duration::from_millis(3));
        assert_eq!(spent.mean(Step::Gather), Duration::from_millis(5));
        assert_eq!(spent.mean(Step::Write), Duration::ZERO);
        let mut out = String::new();
        stats.render(&mut out);
        assert!(out.contains("shale_tiering_step_seconds_total{step=\"gather\"} 0.005\n"), "{out}");
        assert!(
            out.contains("# TYPE shale_tiering_basin_passes_total counter\nshale_tiering_basin_passes_total 1\n"),
            "{out}"
        );
    }
}
