//! How `podwright`'s process allocates: glibc's malloc with one arena.
//!
//! glibc gives threads arenas of their own (up to eight a core), and an arena hands back to the
//! system only the free memory at its top: a daemon whose tokio workers and blocking threads
//! come and go spreads its allocations over many arenas and keeps the free memory of each. Under
//! `scripts/soak`'s load (`podwright-bench events`, 10,000 pods, an hour of events on disk) the
//! live heap did not grow while RSS grew by 146 MiB with the default arenas, 80 MiB with two,
//! and 7 MiB with one (docs/src/benchmarks.md). Threads keep their own small caches (tcache)
//! either way, so one arena is rarely waited for.

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
