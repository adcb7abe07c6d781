//! The kubelet's container restart back-off (client-go `flowcontrol.Backoff` with 10 s initial,
//! doubling, 300 s cap, entries forgotten 600 s after their last update), as pure data. A node's
//! `crashLoopBackOff.maxContainerRestartPeriod` (KEP-5593) changes the cap of container
//! restarts ([`Curve`]); image pulls keep the default curve.

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

pub const INITIAL: Duration = Duration::from_secs(10);
pub const MAX: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub backoff_secs: u64,
    pub last_update: Timestamp,
}

/// A back-off's first window and its cap; an entry not updated for twice the cap counts as new
/// again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Curve {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Curve {
    fn default() -> Self {
        Curve { initial: INITIAL, max: MAX }
    }
}

impl Curve {
    /// The kubelet's curve with `maxContainerRestartPeriod`: capped at `max`, which is also the
    /// first window when below the default 10 s.
    pub fn with_max(max: Duration) -> Self {
        Curve { initial: INITIAL.min(max), max }
    }

    fn reset_after(self) -> f64 {
        2.0 * self.max.as_secs_f64()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backoff {
    pub entries: BTreeMap<String, Entry>,
    /// The container restarts' curve: the node's setting, so not saved with the pod.
    #[serde(skip)]
    pub restart_curve: Curve,
}

fn secs(d: SignedDuration) -> f64 {
    d.as_secs_f64()
}

impl Backoff {
    fn live(&self, key: &str, event_time: Timestamp, curve: Curve) -> Option<&Entry> {
        self.entries.get(key).filter(|e| secs(event_time.duration_since(e.last_update)) <= curve.reset_after())
    }

    /// When a restart of a container that finished at `finished` may happen, if it must wait:
    /// `Some(until)` while `now` is inside the window.
    pub fn blocked_until(&self, key: &str, finished: Timestamp, now: Timestamp) -> Option<Timestamp> {
        let e = self.live(key, finished, self.restart_curve)?;
        let until = finished + SignedDuration::from_secs(e.backoff_secs as i64);
        (now < until).then_some(until)
    }

    /// The window a blocked restart is waiting out, for messages ("back-off 20s ...").
    pub fn window(&self, key: &str) -> Duration {
        self.entries.get(key).map(|e| Duration::from_secs(e.backoff_secs)).unwrap_or(self.restart_curve.initial)
    }

    /// Records a failure at `now` of what finished (or failed) at `event_time`, on the default
    /// curve (image pulls).
    pub fn next(&mut self, key: &str, event_time: Timestamp, now: Timestamp) {
        self.next_on(Curve::default(), key, event_time, now);
    }

    /// Records a restart decision at `now` for a container instance that finished at
    /// `event_time`, on the node's restart curve.
    pub fn next_restart(&mut self, key: &str, event_time: Timestamp, now: Timestamp) {
        self.next_on(self.restart_curve, key, event_time, now);
    }

    fn next_on(&mut self, curve: Curve, key: &str, event_time: Timestamp, now: Timestamp) {
        let backoff_secs = match self.live(key, event_time, curve) {
            None => curve.initial.as_secs(),
            Some(e) => (e.backoff_secs * 2).min(curve.max.as_secs()),
        };
        self.entries.insert(key.to_string(), Entry { backoff_secs, last_update: now });
    }

    /// Whether a retry after a failure at `since` must still wait (image pulls: the kubelet asks
    /// "in back-off since the last update").
    pub fn blocked_since_update(&self, key: &str, now: Timestamp) -> Option<Timestamp> {
        let e = self.entries.get(key)?;
        let until = e.last_update + SignedDuration::from_secs(e.backoff_secs as i64);
        (now < until).then_some(until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    #[test]
    fn first_restart_is_immediate_then_doubles_to_cap() {
        let mut b = Backoff::default();
        let key = "c";
        // First crash: no entry, so no wait.
        assert_eq!(b.blocked_until(key, t(0), t(0)), None);
        b.next(key, t(0), t(0));
        let mut finished = t(1);
        let mut windows = vec![];
        for _ in 0..8 {
            let until = b.blocked_until(key, finished, finished).expect("blocked");
            windows.push(until.duration_since(finished).as_secs());
            b.next(key, finished, until);
            finished = until + SignedDuration::from_secs(1);
        }
        assert_eq!(windows, vec![10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn a_node_max_caps_restarts_and_below_ten_seconds_starts_there() {
        let windows = |max: u64| {
            let mut b = Backoff { restart_curve: Curve::with_max(Duration::from_secs(max)), ..Default::default() };
            b.next_restart("c", t(0), t(0));
            let mut finished = t(1);
            let mut windows = vec![];
            for _ in 0..4 {
                let until = b.blocked_until("c", finished, finished).expect("blocked");
                windows.push(until.duration_since(finished).as_secs());
                b.next_restart("c", finished, until);
                finished = until;
            }
            windows
        };
        assert_eq!(windows(300), vec![10, 20, 40, 80]);
        assert_eq!(windows(30), vec![10, 20, 30, 30]);
        assert_eq!(windows(5), vec![5, 5, 5, 5]);
        assert_eq!(windows(1), vec![1, 1, 1, 1]);
        // Forgotten after twice the cap: a crash 3 s after the last restart with a 1 s cap is
        // a first crash again.
        let mut b = Backoff { restart_curve: Curve::with_max(Duration::from_secs(1)), ..Default::default() };
        b.next_restart("c", t(0), t(0));
        assert_eq!(b.blocked_until("c", t(3), t(3)), None);
        // Pulls keep the default curve.
        b.next("pull:x", t(0), t(0));
        b.next("pull:x", t(1), t(1));
        assert_eq!(b.entries["pull:x"].backoff_secs, 20);
    }

    #[test]
    fn resets_after_ten_minutes_of_running() {
        let mut b = Backoff::default();
        b.next("c", t(0), t(0));
        b.next("c", t(5), t(15));
        assert_eq!(b.entries["c"].backoff_secs, 20);
        // Ran for more than 600 s after the last restart decision: treated as a first crash.
        assert_eq!(b.blocked_until("c", t(15 + 601), t(15 + 601)), None);
        b.next("c", t(15 + 601), t(15 + 601));
        assert_eq!(b.entries["c"].backoff_secs, 10);
    }
}
