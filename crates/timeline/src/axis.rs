//! The time axis: where a moment goes across the picture, the ticks, and how spans of time are
//! written (`500ms`, `1.5s`, `1m30s`, `2h5m`).

use jiff::Timestamp;
use std::fmt::Write;

/// Tick spacings to choose from, in milliseconds: the smallest that gives at most
/// [`MAX_TICKS`] ticks is used.
const STEPS_MS: [i64; 23] = [
    50, 100, 200, 250, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000,
    1_800_000, 3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000,
];
const MAX_TICKS: i64 = 12;

/// Maps moments between `start` and `end` onto `left..left + width`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    start: Timestamp,
    end: Timestamp,
    /// The span in milliseconds, at least 1 s so that a pod seen once still has an axis.
    span_ms: i64,
    left: f64,
    width: f64,
}

impl Scale {
    pub(crate) fn new(start: Timestamp, end: Timestamp, left: f64, width: f64) -> Scale {
        let span_ms = millis_between(start, end).max(1_000);
        Scale { start, end, span_ms, left, width }
    }

    pub(crate) fn end(&self) -> Timestamp {
        self.end
    }

    /// The x of a moment; moments outside the axis sit on its edges.
    pub(crate) fn x(&self, t: Timestamp) -> f64 {
        let ms = millis_between(self.start, t).clamp(0, self.span_ms);
        self.left + self.width * ms as f64 / self.span_ms as f64
    }

    /// A moment as an offset from the start: `+1.5s`.
    pub(crate) fn offset(&self, t: Timestamp) -> String {
        format!("+{}", span_text(millis_between(self.start, t)))
    }

    /// The ticks: their x and their label, from the start on.
    pub(crate) fn ticks(&self) -> Vec<(f64, String)> {
        let step = STEPS_MS.into_iter().find(|s| self.span_ms / s <= MAX_TICKS).unwrap_or_else(|| {
            STEPS_MS[STEPS_MS.len() - 1] * (self.span_ms / STEPS_MS[STEPS_MS.len() - 1] / MAX_TICKS + 1)
        });
        (0..=self.span_ms / step)
            .map(|i| {
                let ms = i * step;
                (self.left + self.width * ms as f64 / self.span_ms as f64, span_text(ms))
            })
            .collect()
    }
}

/// Milliseconds from `a` to `b` (negative if `b` is earlier).
pub(crate) fn millis_between(a: Timestamp, b: Timestamp) -> i64 {
    b.duration_since(a).as_millis() as i64
}

/// A span of time as people write it: `0s`, `250ms`, `1.5s`, `1m30s`, `2h5m`.
pub(crate) fn span_text(ms: i64) -> String {
    if ms < 0 {
        return format!("-{}", span_text(-ms));
    }
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let (hours, rest) = (ms / 3_600_000, ms % 3_600_000);
    let (minutes, rest) = (rest / 60_000, rest % 60_000);
    let mut out = String::new();
    if hours > 0 {
        let _ = write!(out, "{hours}h");
    }
    if minutes > 0 {
        let _ = write!(out, "{minutes}m");
    }
    if rest > 0 {
        let seconds = format!("{}.{:03}", rest / 1_000, rest % 1_000);
        let _ = write!(out, "{}s", seconds.trim_end_matches('0').trim_end_matches('.'));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(1_700_000_000_000 + ms).unwrap()
    }

    #[test]
    fn spans_are_written_as_people_write_them() {
        let table = [
            (0, "0s"),
            (250, "250ms"),
            (1_000, "1s"),
            (1_500, "1.5s"),
            (12_345, "12.345s"),
            (60_000, "1m"),
            (90_000, "1m30s"),
            (3_600_000, "1h"),
            (7_500_000, "2h5m"),
            (-1_500, "-1.5s"),
        ];
        for (ms, text) in table {
            assert_eq!(span_text(ms), text, "{ms} ms");
        }
    }

    #[test]
    fn ticks_are_round_and_few() {
        let s = Scale::new(at(0), at(7_300), 100.0, 1_000.0);
        let ticks: Vec<String> = s.ticks().into_iter().map(|(_, l)| l).collect();
        assert_eq!(ticks, ["0s", "1s", "2s", "3s", "4s", "5s", "6s", "7s"]);
        let s = Scale::new(at(0), at(95 * 60_000), 0.0, 1_000.0);
        let ticks: Vec<String> = s.ticks().into_iter().map(|(_, l)| l).collect();
        assert_eq!(ticks, ["0s", "10m", "20m", "30m", "40m", "50m", "1h", "1h10m", "1h20m", "1h30m"]);
        // Days: a multiple of the largest step.
        assert!(Scale::new(at(0), at(30 * 86_400_000), 0.0, 1_000.0).ticks().len() <= MAX_TICKS as usize + 1);
    }

    #[test]
    fn moments_map_across_the_width_and_stay_on_it() {
        let s = Scale::new(at(0), at(10_000), 100.0, 1_000.0);
        assert_eq!(s.x(at(0)), 100.0);
        assert_eq!(s.x(at(5_000)), 600.0);
        assert_eq!(s.x(at(10_000)), 1_100.0);
        assert_eq!(s.x(at(-3_000)), 100.0);
        assert_eq!(s.x(at(99_000)), 1_100.0);
        assert_eq!(s.offset(at(2_500)), "+2.5s");
        // A pod seen once still gets a second of axis.
        assert_eq!(Scale::new(at(0), at(0), 0.0, 100.0).x(at(500)), 50.0);
    }
}
