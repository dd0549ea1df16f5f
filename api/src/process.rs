//! The process's own metrics in Prometheus' standard names (`process_*`, read from
//! `/proc/self` on Linux; left out elsewhere) and `shale_build_info`.

use std::fmt::Write;

/// Appends `shale_build_info` and the `process_*` metrics for a process running `role`.
pub fn render_process_metrics(role: &str, out: &mut String) {
    let version = env!("CARGO_PKG_VERSION");
    let _ = writeln!(
        out,
        "# HELP shale_build_info The running build: version, and the role this process runs\n\
         # TYPE shale_build_info gauge\n\
         shale_build_info{{version=\"{version}\",role=\"{role}\"}} 1"
    );
    if let Some(stats) = ProcessStats::read() {
        stats.render(out);
    }
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let _ = writeln!(
            out,
            "# HELP shale_runtime_workers The async runtime's worker threads\n\
             # TYPE shale_runtime_workers gauge\n\
             shale_runtime_workers {}",
            runtime.metrics().num_workers()
        );
    }
}

/// What `/proc/self` says about this process.
struct ProcessStats {
    cpu_seconds: f64,
    start_time_seconds: f64,
    resident_bytes: u64,
    virtual_bytes: u64,
    threads: u64,
    open_fds: u64,
    max_fds: Option<u64>,
}

impl ProcessStats {
    fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name (which may hold spaces), numbered from 3 (state).
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
        // SAFETY: sysconf only reads a system constant.
        let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
        let (ticks, page) = (u64::try_from(ticks).ok().filter(|t| *t > 0)?, u64::try_from(page).ok()?);
        let boot_time = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|line| line.strip_prefix("btime ").and_then(|v| v.trim().parse::<u64>().ok()))?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        let max_fds = std::fs::read_to_string("/proc/self/limits").ok().and_then(|limits| {
            let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
            line.split_whitespace().nth(3)?.parse().ok()
        });
        Some(Self {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks as f64,
            start_time_seconds: boot_time as f64 + field(22)? as f64 / ticks as f64,
            virtual_bytes: field(23)?,
            resident_bytes: field(24)? * page,
            threads: field(20)?,
            open_fds,
            max_fds,
        })
    }

    fn render(&self, out: &mut String) {
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        };
        metric(
            "process_cpu_seconds_total",
            "counter",
            "CPU time, user and system, in seconds",
            self.cpu_seconds.to_string(),
        );
        metric(
            "process_start_time_seconds",
            "gauge",
            "Start time since the epoch, in seconds",
            self.start_time_seconds.to_string(),
        );
        metric("process_resident_memory_bytes", "gauge", "Resident memory in bytes", self.resident_bytes.to_string());
        metric("process_virtual_memory_bytes", "gauge", "Virtual memory in bytes", self.virtual_bytes.to_string());
        metric("process_threads", "gauge", "OS threads", self.threads.to_string());
        metric("process_open_fds", "gauge", "Open file descriptors", self.open_fds.to_string());
        if let Some(max) = self.max_fds {
            metric("process_max_fds", "gauge", "Limit on open file descriptors", max.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On Linux every standard process metric is present and plausible.
    #[test]
    #[cfg(target_os = "linux")]
    fn process_metrics_are_read_from_proc() {
        let mut out = String::new();
        render_process_metrics("gateway", &mut out);
        assert!(out.contains("shale_build_info{version=\"") && out.contains("role=\"gateway\"} 1"), "{out}");
        let value = |name: &str| -> f64 {
            let line =
                out.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name}: {out}"));
            line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{line}"))
        };
        assert!(value("process_resident_memory_bytes") > 1e6, "{out}");
        assert!(value("process_threads") >= 1.0 && value("process_open_fds") >= 3.0, "{out}");
        let now = shale_storage::Clock::now_ms(&shale_storage::SystemClock) as f64 / 1000.0;
        let started = value("process_start_time_seconds");
        assert!(started <= now + 1.0 && started > now - 86_400.0 * 30.0, "{started} vs {now}");
        assert!(value("process_cpu_seconds_total") >= 0.0);
        assert!(!out.contains("shale_runtime_workers"), "no runtime, no worker count: {out}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn the_runtime_s_workers_are_counted() {
        let mut out = String::new();
        render_process_metrics("serve", &mut out);
        assert!(out.lines().any(|l| l == "shale_runtime_workers 3"), "{out}");
    }
}
