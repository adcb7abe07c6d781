//! A deterministic simulation of pod lifecycles under runtime faults and agent crashes (issue
//! 10, part 6). Each seed makes a random pod, the runtime's faults and the steps done to it
//! (agent SIGKILLs and restarts, lost sandboxes, crashing containers, a slower runtime, the
//! deletion); it runs in virtual time against the fake runtime, and every change of the
//! runtime's state and every status published is checked against the spec's invariants
//! ([`checker`]). A failing seed is shrunk (steps, faults, probes and hooks taken away while it
//! still fails the same way) and explained with the trace of the smallest failing lifecycle.

mod checker;
mod lifecycle;
mod rng;
mod scenario;
mod trace;

pub use checker::{Checker, Violation};
pub use lifecycle::{IMAGE, Stats};
pub use scenario::Scenario;
pub use trace::Trace;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A seed that broke an invariant, explained.
pub struct Failure {
    pub seed: u64,
    pub violation: Violation,
    /// The smallest failing scenario found and its trace.
    pub report: String,
}

/// What a run of many seeds found.
pub struct Summary {
    pub lifecycles: u64,
    pub violations: u64,
    /// The first few failures, explained.
    pub failures: Vec<Failure>,
    pub stats: Stats,
    pub wall: Duration,
}

/// How many failures of a run are shrunk and explained (each costs many reruns).
const EXPLAINED: usize = 3;
/// A lifecycle that takes this long in wall time is looping without advancing virtual time.
const HANG: Duration = Duration::from_secs(120);

/// Runs seed `seed`'s lifecycle: its violation, and what it went through.
fn lifecycle(seed: u64, root: &Path) -> (Option<Violation>, Stats) {
    let outcome = lifecycle::run(&Scenario::new(seed), root, false);
    (outcome.violation, outcome.stats)
}

/// Runs a scenario with its trace.
pub fn traced(sc: &Scenario, root: &Path) -> (Option<Violation>, Vec<String>) {
    let outcome = lifecycle::run(sc, root, true);
    (outcome.violation, outcome.trace)
}

/// Shrinks a failing seed to the simplest scenario that still breaks the same invariant, and
/// explains it.
pub fn explain(seed: u64, root: &Path) -> Option<Failure> {
    let first = lifecycle(seed, root).0?;
    let mut sc = Scenario::new(seed);
    let steps = sc.steps.len();
    'shrink: loop {
        for simpler in sc.simpler() {
            let again = lifecycle::run(&simpler, root, false).violation;
            if again.is_some_and(|v| v.invariant == first.invariant) {
                sc = simpler;
                continue 'shrink;
            }
        }
        break;
    }
    let (violation, trace) = traced(&sc, root);
    let violation = violation.unwrap_or_else(|| first.clone());
    let report = format!(
        "seed {seed}: {} broken at {:.3}s: {}\n(shrunk from {steps} steps to {}; first seen as: {})\n{sc}trace:\n{}\n",
        violation.invariant,
        violation.at,
        violation.detail,
        sc.steps.len(),
        first.detail,
        trace.join("\n"),
    );
    Some(Failure { seed, violation, report })
}

/// A directory of its own for each simulating thread, in memory when the machine has one.
fn root_dir(thread: usize) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    base.join(format!("podwright-sim-{}-{thread}", std::process::id()))
}

/// Runs seeds `first..first + count` on `threads` threads (the result does not depend on how
/// many). A lifecycle that hangs in wall time (a loop that never lets virtual time pass) ends
/// the process, naming its seed.
// Wall time: only to measure the run and to catch a hang, never in a lifecycle.
#[allow(clippy::disallowed_methods)]
pub fn run_many(first: u64, count: u64, threads: usize) -> Summary {
    let started = std::time::Instant::now();
    let next = AtomicU64::new(first);
    let failed: Mutex<Vec<u64>> = Mutex::default();
    let stats: Mutex<Stats> = Mutex::default();
    let done = AtomicBool::new(false);
    // Per thread: the seed it runs and since when.
    let running: Vec<Mutex<Option<(u64, std::time::Instant)>>> = (0..threads).map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                for slot in &running {
                    if let Some((seed, since)) = *slot.lock().unwrap_or_else(|e| e.into_inner())
                        && since.elapsed() > HANG
                    {
                        eprintln!("sim: seed {seed} has run for {}s of wall time: the agent loops", HANG.as_secs());
                        std::process::exit(101);
                    }
                }
            }
        });
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (next, failed, stats, slot) = (&next, &failed, &stats, &running[t]);
                s.spawn(move || {
                    let root = root_dir(t);
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed >= first + count {
                            break;
                        }
                        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some((seed, std::time::Instant::now()));
                        let (violation, went_through) = lifecycle(seed, &root);
                        if violation.is_some() {
                            failed.lock().unwrap_or_else(|e| e.into_inner()).push(seed);
                        }
                        *stats.lock().unwrap_or_else(|e| e.into_inner()) += went_through;
                    }
                    *slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
                    let _ = std::fs::remove_dir_all(&root);
                })
            })
            .collect();
        for w in workers {
            w.join().expect("a simulating thread");
        }
        done.store(true, Ordering::Relaxed);
    });
    let wall = started.elapsed();
    let mut failed = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    failed.sort_unstable();
    let root = root_dir(threads);
    let failures = failed.iter().take(EXPLAINED).filter_map(|&seed| explain(seed, &root)).collect();
    let _ = std::fs::remove_dir_all(&root);
    let stats = stats.into_inner().unwrap_or_else(|e| e.into_inner());
    Summary { lifecycles: count, violations: failed.len() as u64, failures, stats, wall }
}
