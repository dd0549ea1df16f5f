//! CPU seconds of processes, from `/proc/<pid>/stat` (user + system, every thread).
// Each benchmark binary includes this module and uses part of it.
#![allow(dead_code)]

/// CPU seconds `pid` has used; 0 when it cannot be read.
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // Fields after the command name (which may hold spaces, inside parentheses).
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds of `pids`, summed.
pub fn cpu_seconds_of(pids: &[u32]) -> f64 {
    pids.iter().map(|&pid| cpu_seconds(pid)).sum()
}

/// CPU seconds this process has used.
pub fn own_cpu_seconds() -> f64 {
    cpu_seconds(std::process::id())
}
