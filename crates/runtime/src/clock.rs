//! The engine's one clock. It reads tokio's clock, so a test runtime started with paused time
//! (`#[tokio::test(start_paused = true)]`) turns every back-off and timer into virtual time that
//! advances as soon as all tasks are idle.

use jiff::Timestamp;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base_wall: Timestamp,
    base_instant: tokio::time::Instant,
}

impl Clock {
    /// Wall time now, tracking tokio's (possibly virtual) monotonic clock.
    // The Clock itself: the one reader of the real and tokio clocks.
    #[allow(clippy::disallowed_methods)]
    pub fn new() -> Self {
        Self::starting_at(Timestamp::now())
    }

    /// A clock whose `now()` starts at `wall` (tests use a fixed epoch).
    // The Clock itself: the one reader of the real and tokio clocks.
    #[allow(clippy::disallowed_methods)]
    pub fn starting_at(wall: Timestamp) -> Self {
        Clock { base_wall: wall, base_instant: tokio::time::Instant::now() }
    }

    // The Clock itself: the one reader of the real and tokio clocks.
    #[allow(clippy::disallowed_methods)]
    pub fn now(&self) -> Timestamp {
        let elapsed = tokio::time::Instant::now().duration_since(self.base_instant);
        self.base_wall + jiff::SignedDuration::try_from(elapsed).unwrap_or(jiff::SignedDuration::MAX)
    }

    /// The tokio instant at which wall time `t` is reached.
    pub fn instant_at(&self, t: Timestamp) -> tokio::time::Instant {
        let since_base = t.duration_since(self.base_wall);
        let d = Duration::try_from(since_base).unwrap_or(Duration::ZERO);
        self.base_instant + d
    }

    pub async fn sleep_until(&self, t: Timestamp) {
        tokio::time::sleep_until(self.instant_at(t)).await
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}
