//! A fetch's byte bound (`max_bytes`), shared by the partitions it reads at once: each
//! takes its part of what is left before it reads and gives back what it did not use,
//! so the partitions read at once never add up past the bound. And the bytes a
//! listener's connections read ahead of their next fetches, together.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes taken from what is left of a request's bound for one read, given back when
/// dropped unless settled: a read dropped half way gives back all of it.
pub(crate) struct Reservation<'a> {
    budget: &'a AtomicU64,
    pub(crate) bytes: u64,
    settled: bool,
}

impl<'a> Reservation<'a> {
    /// Up to `wanted` bytes of `budget`.
    pub(crate) fn take(budget: &'a AtomicU64, wanted: u64) -> Self {
        Self { budget, bytes: reserve(budget, wanted), settled: false }
    }

    /// Keeps the `used` bytes taken ([`settle`]) and gives back the rest.
    pub(crate) fn settle(mut self, used: u64) {
        settle(self.budget, self.bytes, used);
        self.settled = true;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.settled {
            settle(self.budget, self.bytes, 0);
        }
    }
}

/// Takes up to `wanted` bytes from what is left of the request's bound.
pub(crate) fn reserve(budget: &AtomicU64, wanted: u64) -> u64 {
    let mut taken = 0;
    let _ = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
        taken = left.min(wanted);
        Some(left - taken)
    });
    taken
}

/// Gives back to `budget` what was `reserved` and not `used`, or takes what was used
/// beyond it (a first batch may pass the bound).
pub(crate) fn settle(budget: &AtomicU64, reserved: u64, used: u64) {
    if used < reserved {
        budget.fetch_add(reserved - used, Ordering::Relaxed);
    } else {
        let over = used - reserved;
        let _ = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| Some(left.saturating_sub(over)));
    }
}

/// Partition bytes every connection of a listener reads ahead at once.
pub(crate) const MAX_AHEAD_BYTES_ALL: u64 = 256 << 20;

/// The partition bytes a listener's connections read ahead now, within
/// [`MAX_AHEAD_BYTES_ALL`].
#[derive(Default)]
pub(crate) struct AheadBudget {
    used: AtomicU64,
}

impl AheadBudget {
    /// `bytes` of the budget while the grant lives, if that much is left.
    pub(crate) fn grant(self: &Arc<Self>, bytes: u64) -> Option<AheadGrant> {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                (used + bytes <= MAX_AHEAD_BYTES_ALL).then_some(used + bytes)
            })
            .ok()
            .map(|_| AheadGrant { budget: self.clone(), bytes })
    }
}

/// Bytes of an [`AheadBudget`], given back when dropped.
pub(crate) struct AheadGrant {
    budget: Arc<AheadBudget>,
    bytes: u64,
}

impl Drop for AheadGrant {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}
