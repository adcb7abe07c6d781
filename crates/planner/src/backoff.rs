//! The kubelet's container restart back-off (client-go `flowcontrol.Backoff` with 10 s initial,
//! doubling, 300 s cap, entries forgotten 600 s after their last update), as pure data.

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

pub const INITIAL: Duration = Duration::from_secs(10);
pub const MAX: Duration = Duration::from_secs(300);
/// An entry not updated for this long counts as new again (2 x cap).
pub const RESET_AFTER: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub backoff_secs: u64,
    pub last_update: Timestamp,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backoff {
    pub entries: BTreeMap<String, Entry>,
}

fn secs(d: SignedDuration) -> f64 {
    d.as_secs_f64()
}

impl Backoff {
    fn live(&self, key: &str, event_time: Timestamp) -> Option<&Entry> {
        self.entries.get(key).filter(|e| secs(event_time.duration_since(e.last_update)) <= RESET_AFTER.as_secs_f64())
    }

    /// When a restart of a container that finished at `finished` may happen, if it must wait:
    /// `Some(until)` while `now` is inside the window.
    pub fn blocked_until(&self, key: &str, finished: Timestamp, now: Timestamp) -> Option<Timestamp> {
        let e = self.live(key, finished)?;
        let until = finished + SignedDuration::from_secs(e.backoff_secs as i64);
        (now < until).then_some(until)
    }

    /// The window a blocked restart is waiting out, for messages ("back-off 20s ...").
    pub fn window(&self, key: &str) -> Duration {
        self.entries.get(key).map(|e| Duration::from_secs(e.backoff_secs)).unwrap_or(INITIAL)
    }

    /// Records a restart decision at `now` for an instance that finished at `event_time`.
    pub fn next(&mut self, key: &str, event_time: Timestamp, now: Timestamp) {
        let backoff_secs = match self.live(key, event_time) {
            None => INITIAL.as_secs(),
            Some(e) => (e.backoff_secs * 2).min(MAX.as_secs()),
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
