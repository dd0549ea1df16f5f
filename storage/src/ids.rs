//! Where ids and random numbers come from: the one module allowed to draw randomness
//! (`clippy.toml` bans `rand::random`, `rand::rng` and `Ulid::new` everywhere else).
//! Ids that carry a time take it from the caller's injected [`Clock`], so tests that
//! move a clock move the ids' times with it.

#![allow(clippy::disallowed_methods)]

use rand::{Rng, RngCore};

use crate::Clock;

/// A new segment id: a ULID of the clock's time and 80 random bits, so ids sort by
/// creation time and two writers never draw the same one. Gateways and the compactor
/// both name their segments with it.
pub fn segment_id(clock: &dyn Clock) -> u128 {
    ulid::Ulid::from_parts(clock.now_ms(), rand::rng().random::<u128>()).0
}

/// A new unique id as a ULID (an instance, a pipeline, a producer): time-ordered by
/// the clock given, unique by its random part.
pub fn unique_id(clock: &dyn Clock) -> ulid::Ulid {
    ulid::Ulid::from_parts(clock.now_ms(), rand::rng().random::<u128>())
}

/// A random number in `range`.
pub fn random_in(range: std::ops::Range<u64>) -> u64 {
    rand::rng().random_range(range)
}

/// Fills `bytes` from the thread's cryptographically secure generator (secrets).
pub fn fill_secret(bytes: &mut [u8]) {
    rand::rng().fill_bytes(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    #[test]
    fn ids_carry_the_clock_time_and_differ() {
        let clock = ManualClock::new(1_700_000_000_000);
        let (a, b) = (segment_id(&clock), segment_id(&clock));
        assert_ne!(a, b);
        assert_eq!(ulid::Ulid(a).timestamp_ms(), 1_700_000_000_000);
        assert_eq!(unique_id(&clock).timestamp_ms(), 1_700_000_000_000);
        let n = random_in(5..6);
        assert_eq!(n, 5);
    }
}
