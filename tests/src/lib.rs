//! Test harness: a local S3-compatible server (moto), storage backends to run the same
//! suites on, an in-process node (metadata + gateway + reader) over any store, and
//! `shale serve` on a loopback port with an SSE client, a linearizability checker for
//! recorded histories (`history`) and of committed offsets (`committed`), a bare Kafka
//! client that knows what each request did (`kafka_client`), and the table tier as DuckDB and pyiceberg read it
//! (`tables`).

#![allow(clippy::unwrap_used)]

pub mod committed;
pub mod history;
pub mod kafka_client;
mod moto;
mod node;
mod server;
pub mod tables;
pub mod tls;
pub mod transactions;
mod wait;
mod watchdog;

pub use moto::Moto;
pub use node::{Backend, Node, TestStore};
pub use server::{SseEvent, SseReader, TestServer};
pub use wait::wait_until;
pub use watchdog::{stop_with_test, watchdog};

/// A one-off read of `basin/stream` from `start`: default limits, no `until`, no clamp,
/// no wait (tests set other fields with struct update syntax).
pub fn read_request(basin: &str, stream: &str, start: shale_reader::ReadStart) -> shale_reader::ReadRequest {
    shale_reader::ReadRequest {
        basin: basin.into(),
        stream: stream.into(),
        start,
        limits: shale_reader::ReadLimits::default(),
        until: None,
        clamp: false,
        wait: std::time::Duration::ZERO,
    }
}

/// The value of the `/metrics` series named exactly `name` (labels included) in `metrics`,
/// Prometheus' text format, parsed as `T` (a counter as `u64`, a sum of seconds as `f64`);
/// `None` when it is absent or does not parse.
pub fn series<T: std::str::FromStr>(metrics: &str, name: &str) -> Option<T> {
    metrics.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Runs each `suite(backend)` function as three tests, in modules `memory`, `file` and
/// `s3`: the conformance pattern, written once for every test file that uses it.
#[macro_export]
macro_rules! on_every_backend {
    ($($suite:ident),* $(,)?) => {
        mod memory { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $suite() { super::$suite($crate::Backend::Memory).await } )* }
        mod file { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $suite() { super::$suite($crate::Backend::File).await } )* }
        mod s3 { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $suite() { super::$suite($crate::Backend::S3).await } )* }
    };
}
