//! Process-level measurements: CPU time (getrusage), resident memory (/proc/self/status), and
//! summaries of repeated timings.

use std::time::Duration;

/// User + system CPU time of the whole process so far.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the zeroed struct we pass; RUSAGE_SELF always exists.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return Duration::ZERO;
        }
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// A `kB` field of /proc/self/status (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(field: &str) -> Result<u64, String> {
    let text =
        std::fs::read_to_string("/proc/self/status").map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("no {field} in /proc/self/status"))
}

/// Resets the peak RSS (`VmHWM`) to the current RSS, so the peak measured afterwards belongs to
/// what runs afterwards (Linux ≥ 4.0). Returns whether it worked.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Median, minimum and maximum of some durations, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    pub fn of(samples: &[Duration]) -> Summary {
        let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        let min = ms.iter().copied().reduce(f64::min).unwrap_or(f64::NAN);
        let max = ms.iter().copied().reduce(f64::max).unwrap_or(f64::NAN);
        Summary { median: median(&ms), min, max }
    }
}

/// The median (mean of the middle two for an even count); NaN for none.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        let ms = |v: &[u64]| v.iter().map(|&m| Duration::from_millis(m)).collect::<Vec<_>>();
        let s = Summary::of(&ms(&[5, 1, 3]));
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 5.0));
        assert_eq!(Summary::of(&ms(&[4, 2])).median, 3.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn reads_own_status() {
        assert!(status_kib("VmRSS").unwrap() > 0);
    }
}
