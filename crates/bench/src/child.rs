//! The processes the benchmarks start: which podwright binary runs, and stopping one.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

/// The podwright binary: `given`, else the one next to this benchmark's.
pub fn podwright_binary(given: Option<&PathBuf>) -> Result<PathBuf, String> {
    match given {
        Some(p) => Ok(p.clone()),
        None => Ok(std::env::current_exe()
            .map_err(|e| format!("cannot find this benchmark's own path: {e}"))?
            .with_file_name("podwright")),
    }
}

/// Asks `child` (`what`, for the error) to stop with SIGTERM and waits up to `limit` for it;
/// kills it after that.
pub fn stop(child: &mut Child, what: &str, limit: Duration) -> Result<(), String> {
    // SAFETY: kill has no memory effects; the pid is our unreaped child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return Ok(()),
            Ok(None) if t0.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} did not stop within {limit:?} of SIGTERM; killed"));
            }
        }
    }
}
