//! How `podwright`'s process allocates: glibc's malloc with one arena, its free memory handed
//! back to the system once a minute.
//!
//! glibc gives threads arenas of their own (up to eight a core), and an arena hands back to the
//! system only the free memory at its top: a daemon whose tokio workers and blocking threads
//! come and go spreads its allocations over many arenas and keeps the free memory of each. Under
//! `scripts/soak`'s load (`podwright-bench events`, 10,000 pods, an hour of events on disk) the
//! live heap did not grow while RSS grew by 146 MiB with the default arenas, 80 MiB with two,
//! and 7 MiB with one (docs/src/benchmarks.md). Threads keep their own small caches (tcache)
//! either way, so one arena is rarely waited for.
//!
//! Even one arena keeps the free pages between its live allocations: with pods and events
//! coming and going, RSS still crept up (+8 MiB over the same load) until those pages were
//! handed back after each expiry of events (-7 MiB), as Go's runtime scavenges its heap.

/// Limits glibc's malloc to one arena, unless the environment sets its arenas already
/// (`MALLOC_ARENA_MAX`, `GLIBC_TUNABLES`): the operator's word wins. Called before any other
/// thread starts: a thread keeps the arena it was given.
pub fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() && std::env::var_os("GLIBC_TUNABLES").is_none() {
        // SAFETY: mallopt sets one of the allocator's parameters and touches no memory of ours.
        if unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) } != 1 {
            eprintln!("podwright: glibc did not take one malloc arena; memory may grow with threads");
        }
    }
}

/// Hands the allocator's free pages back to the system (glibc's `malloc_trim`), those between
/// live allocations included. It walks the free lists under the arena's lock, up to 27 ms for
/// a heap of 150 MiB (`podwright-bench events`), so it is done once a minute on a blocking
/// thread, not after every change.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn free_memory_between_live_allocations_goes_back_to_the_system() {
        // 64 MiB in blocks below the mmap threshold, each followed by a small block that
        // stays: freed, the big blocks leave holes that glibc keeps without a trim.
        let (mut freed, mut kept) = (Vec::new(), Vec::new());
        for _ in 0..1024 {
            let mut block = vec![0u8; 64 * 1024];
            block.iter_mut().step_by(4096).for_each(|b| *b = 1);
            freed.push(block);
            kept.push(Box::new(0u64));
        }
        drop(freed);
        let before = rss_kib();
        release_free_memory();
        let after = rss_kib();
        assert!(before > after + 32 * 1024, "RSS {before} KiB before the release, {after} KiB after");
        drop(kept);
    }
}
