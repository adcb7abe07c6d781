//! The engine's one clock. It reads tokio's clock, so a test runtime started with paused time
//! (`#[tokio::test(start_paused = true)]`) turns every back-off and timer into virtual time that
//! advances as soon as all tasks are idle.

use jiff::Timestamp;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base_wall: Timestamp,
    base_instant: tokio::time::Instant,
    /// Reads the machine's wall clock rather than counting from `base_wall` (see
    /// [`Clock::system`]).
    system: bool,
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
        Clock { base_wall: wall, base_instant: tokio::time::Instant::now(), system: false }
    }

    /// The machine's clock, for the binaries: `now()` is its wall time as the runtime's
    /// timestamps are, also after the clock is stepped (NTP, `date -s`). A back-off or a probe
    /// counts from a container's finish or start as containerd stamped it: a clock counting
    /// from its own start alone would be an hour behind those stamps after a step an hour
    /// forward, and would forget every back-off (each exit an hour after its last update) and
    /// probe a new container an hour late. Waits are still tokio's monotonic sleeps, each
    /// measured when it starts.
    pub fn system() -> Self {
        Clock { system: true, ..Self::new() }
    }

    // The Clock itself: the one reader of the real and tokio clocks.
    #[allow(clippy::disallowed_methods)]
    pub fn now(&self) -> Timestamp {
        if self.system {
            return Timestamp::now();
        }
        let elapsed = tokio::time::Instant::now().duration_since(self.base_instant);
        self.base_wall + jiff::SignedDuration::try_from(elapsed).unwrap_or(jiff::SignedDuration::MAX)
    }

    /// The tokio instant at which wall time `t` is reached.
    // The Clock itself: the one reader of the real and tokio clocks.
    #[allow(clippy::disallowed_methods)]
    pub fn instant_at(&self, t: Timestamp) -> tokio::time::Instant {
        if self.system {
            let left = Duration::try_from(t.duration_since(Timestamp::now())).unwrap_or(Duration::ZERO);
            return tokio::time::Instant::now() + left;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    // The tests compare with the machine's clock on purpose.
    #[allow(clippy::disallowed_methods)]
    #[tokio::test]
    async fn the_system_clock_reads_the_machines_wall_time_and_waits_for_it() {
        let clock = Clock::system();
        let off = clock.now().duration_since(Timestamp::now()).abs();
        assert!(off < jiff::SignedDuration::from_secs(1), "{off:?}");
        let wait = clock.instant_at(clock.now() + jiff::SignedDuration::from_secs(10)) - tokio::time::Instant::now();
        assert!(wait > Duration::from_secs(9) && wait <= Duration::from_secs(10), "{wait:?}");
        let past = clock.instant_at(clock.now() - jiff::SignedDuration::from_secs(10));
        assert!(past <= tokio::time::Instant::now());
    }

    // Compared with tokio's (virtual) clock on purpose.
    #[allow(clippy::disallowed_methods)]
    #[tokio::test(start_paused = true)]
    async fn a_clock_from_a_given_time_follows_tokios_virtual_time() {
        let t0: Timestamp = "2026-11-28T00:00:00Z".parse().unwrap();
        let clock = Clock::starting_at(t0);
        tokio::time::advance(Duration::from_secs(300)).await;
        assert_eq!(clock.now(), t0 + jiff::SignedDuration::from_secs(300));
        assert_eq!(
            clock.instant_at(t0 + jiff::SignedDuration::from_secs(310)) - tokio::time::Instant::now(),
            Duration::from_secs(10)
        );
    }
}
