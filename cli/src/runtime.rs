//! The async runtime every `shale` command runs on, and how many worker threads it has.
//!
//! One fewer than the machine's cores (at least one): a server's file writes and their
//! fsyncs run on the blocking pool's threads and its sockets' work in the kernel, and a
//! worker for every core kept waking the others to take a task each: on 2 cores under
//! `s2 bench` at 50 MiB/s, two workers made 120,000 context switches per GiB and one
//! 79,000, at 0.89x the CPU per GiB with the same ack latency and catch-up rate
//! (`docs/benchmarks.md`). Tokio's own `TOKIO_WORKER_THREADS`, when set, wins.

use std::io;

/// Tokio's variable for the worker count; its builder reads it when no count is given.
const WORKERS_VARIABLE: &str = "TOKIO_WORKER_THREADS";

/// The multi-threaded runtime with [`async_workers`] workers and every driver enabled.
pub fn build() -> io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(workers) = async_workers(std::env::var_os(WORKERS_VARIABLE).is_some(), cores) {
        builder.worker_threads(workers);
    }
    builder.build()
}

/// Workers for a machine with `cores` cores; `None` leaves the count to tokio, which then
/// reads it from the environment.
pub fn async_workers(set_in_environment: bool, cores: usize) -> Option<usize> {
    (!set_in_environment).then(|| cores.saturating_sub(1).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_core_is_left_to_blocking_work_and_the_environment_wins() {
        assert_eq!(async_workers(false, 1), Some(1));
        assert_eq!(async_workers(false, 2), Some(1));
        assert_eq!(async_workers(false, 16), Some(15));
        assert_eq!(async_workers(true, 16), None);
    }
}
