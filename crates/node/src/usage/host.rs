//! The node's own usage, from `/proc/stat` and `/proc/meminfo`: what runc reports for the
//! cgroup v2 root (which has no `memory.current`) and cadvisor serves as the node's usage,
//! read the same way on cgroup v1.

use std::io;

/// One reading of the whole machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSample {
    /// CPU time spent not idle since boot, over all CPUs, in nanoseconds.
    pub cpu_nanos: u64,
    /// When the machine booted, in seconds since the epoch.
    pub boot_time: i64,
    pub memory: HostMemory,
}

/// The machine's memory, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostMemory {
    pub total: u64,
    /// Total minus free: page cache included.
    pub usage: u64,
    /// Usage minus inactive file pages (cadvisor's working set).
    pub working_set: u64,
}

/// Reads `/proc/stat` and `/proc/meminfo`.
pub fn sample() -> io::Result<HostSample> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("no {what} in /proc"));
    let (ticks, boot_time) = parse_stat(&stat).ok_or_else(|| invalid("cpu line or btime"))?;
    let memory = parse_meminfo(&meminfo).ok_or_else(|| invalid("MemTotal or MemFree"))?;
    let cpu_nanos = u64::try_from(u128::from(ticks) * 1_000_000_000 / u128::from(clock_ticks())).unwrap_or(u64::MAX);
    Ok(HostSample { cpu_nanos, boot_time, memory })
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf only reads a system setting.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&hz| hz > 0).unwrap_or(100)
}

/// Busy ticks of the `cpu` line (user, nice, system, irq, softirq, steal; guest time is part of
/// user already) and `btime`.
fn parse_stat(text: &str) -> Option<(u64, i64)> {
    let mut busy = None;
    let mut boot = None;
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        match fields.next() {
            Some("cpu") => {
                let v: Vec<u64> = fields.map(|f| f.parse().unwrap_or(0)).collect();
                let at = |i: usize| v.get(i).copied().unwrap_or(0);
                busy = Some(at(0) + at(1) + at(2) + at(5) + at(6) + at(7));
            }
            Some("btime") => boot = fields.next().and_then(|f| f.parse().ok()),
            _ => {}
        }
    }
    Some((busy?, boot?))
}

fn parse_meminfo(text: &str) -> Option<HostMemory> {
    let kib = |key: &str| {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            rest.split_ascii_whitespace().next()?.parse::<u64>().ok().map(|v| v * 1024)
        })
    };
    let (total, free) = (kib("MemTotal")?, kib("MemFree")?);
    let usage = total.saturating_sub(free);
    let working_set = usage.saturating_sub(kib("Inactive(file)").unwrap_or(0));
    Some(HostMemory { total, usage, working_set })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_ticks_leave_out_idle_and_iowait() {
        let stat = "cpu  100 20 30 5000 70 4 6 2 9 0\ncpu0 1 2 3 4 5 6 7 8 9 0\nintr 1\nbtime 1700000000\n";
        assert_eq!(parse_stat(stat), Some((100 + 20 + 30 + 4 + 6 + 2, 1_700_000_000)));
        assert_eq!(parse_stat("intr 1\n"), None);
    }

    #[test]
    fn working_set_is_usage_less_inactive_file() {
        let meminfo =
            "MemTotal:       8000 kB\nMemFree:        3000 kB\nInactive(file):  1000 kB\nInactive:  1500 kB\n";
        let m = parse_meminfo(meminfo).unwrap();
        assert_eq!(m, HostMemory { total: 8000 * 1024, usage: 5000 * 1024, working_set: 4000 * 1024 });
    }

    #[test]
    fn this_machine_reads() {
        let s = sample().unwrap();
        assert!(s.memory.working_set > 0 && s.memory.working_set <= s.memory.total);
        assert!(s.cpu_nanos > 0 && s.boot_time > 0);
    }
}
