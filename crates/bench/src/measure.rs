//! Process-level measurements: CPU time (getrusage, /proc/<pid>/stat), resident memory
//! (/proc/<pid>/status), and summaries of repeated timings.

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

/// A `kB` field of /proc/<proc>/status (`VmRSS`, `VmHWM`), in KiB; `proc` is `self` or a pid.
pub fn status_kib(proc: &str, field: &str) -> Result<u64, String> {
    let path = format!("/proc/{proc}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("no {field} in {path}"))
}

/// CPU time of another process from /proc/<pid>/stat, at the kernel's tick (usually 10 ms).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcCpu {
    /// User + system time of the process itself.
    pub own: Duration,
    /// User + system time of its children that it has waited for.
    pub reaped: Duration,
}

pub fn proc_cpu(pid: u32) -> Result<ProcCpu, String> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    parse_stat(&text).ok_or_else(|| format!("cannot parse {path}"))
}

fn parse_stat(text: &str) -> Option<ProcCpu> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    // The command name (field 2) is in parentheses and may hold spaces; fields 14-17 (utime,
    // stime, cutime, cstime) count from the state, field 3, right after it.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<f64> = rest.split_whitespace().skip(11).take(4).map(|v| v.parse().ok()).collect::<Option<_>>()?;
    let secs = |ticks: f64| Duration::from_secs_f64(ticks / hz);
    (f.len() == 4).then(|| ProcCpu { own: secs(f[0] + f[1]), reaped: secs(f[2] + f[3]) })
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

/// The nearest-rank `p`th percentile (0 < p <= 100); None for no values.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1));
    v.get(rank - 1).copied()
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
        assert!(status_kib("self", "VmRSS").unwrap() > 0);
    }

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn parses_stat_with_spaces_in_the_name() {
        let line = "42 (a b) S 1 2 3 4 5 6 7 8 9 10 200 100 30 20 0 0";
        let cpu = parse_stat(line).unwrap();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        assert_eq!(cpu.own, Duration::from_secs_f64(300.0 / hz));
        assert_eq!(cpu.reaped, Duration::from_secs_f64(50.0 / hz));
        assert!(proc_cpu(std::process::id()).is_ok());
    }
}
