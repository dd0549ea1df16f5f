//! Waiting for a condition with a deadline: the one way tests wait (never a fixed sleep).

use std::future::Future;
use std::time::Duration;

/// How often [`wait_until`] asks again.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// Asks `condition` until it holds; fails the test, naming `what`, after `limit`.
pub async fn wait_until<F, Fut>(what: &str, limit: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !condition().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(POLL_EVERY).await;
    }
}
