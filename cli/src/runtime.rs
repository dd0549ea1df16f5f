//! The async runtime every `shale` command runs on, and how many worker threads it has.
//!
//! A server on a local directory runs one worker fewer than the machine's cores (at least
//! one): its file writes and their fsyncs run on the blocking pool's threads, and a worker
//! for every core kept waking the others to take a task each. On 2 cores under `s2 bench`
//! at 50 MiB/s, two workers made 120,000 context switches per GiB and one 79,000, at
//! 0.85-0.94x the CPU per GiB with the same ack latency (`docs/benchmarks.md`). On an
//! object store every request is async network work, and one worker fewer cost a Kafka
//! agent a third of its 16-partition catch-up at 30 ms per request: there every core runs
//! a worker, as do client commands. Tokio's own `TOKIO_WORKER_THREADS`, when set, wins.

use std::io;

/// Tokio's variable for the worker count; its builder reads it when no count is given.
const WORKERS_VARIABLE: &str = "TOKIO_WORKER_THREADS";

/// The multi-threaded runtime with [`async_workers`] workers and every driver enabled.
pub fn build(writes_local_files: bool) -> io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(workers) = async_workers(std::env::var_os(WORKERS_VARIABLE).is_some(), cores, writes_local_files) {
        builder.worker_threads(workers);
    }
    builder.build()
}

/// Workers for a machine with `cores` cores; `None` leaves the count to tokio, which then
/// reads it from the environment.
pub fn async_workers(set_in_environment: bool, cores: usize, writes_local_files: bool) -> Option<usize> {
    if set_in_environment {
        return None;
    }
    let reserved = usize::from(writes_local_files);
    Some(cores.saturating_sub(reserved).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_directory_leaves_one_core_to_blocking_work_and_the_environment_wins() {
        assert_eq!(async_workers(false, 1, true), Some(1));
        assert_eq!(async_workers(false, 2, true), Some(1));
        assert_eq!(async_workers(false, 16, true), Some(15));
        assert_eq!(async_workers(false, 2, false), Some(2));
        assert_eq!(async_workers(false, 16, false), Some(16));
        assert_eq!(async_workers(true, 16, true), None);
    }
}
