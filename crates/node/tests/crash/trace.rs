//! The trace of a lifecycle, kept only when a failure is being explained: every step, fault,
//! runtime change and status, with its virtual time.

use crate::common::epoch;
use podwright_runtime::Clock;
use std::sync::{Arc, Mutex};

#[derive(Clone)]
pub struct Trace {
    lines: Option<Arc<Mutex<Vec<String>>>>,
    /// Every line also goes to stderr as it comes (SIM_TRACE_LIVE set): for a lifecycle that
    /// hangs, whose trace would never be printed.
    live: bool,
    clock: Clock,
}

impl Trace {
    pub fn new(enabled: bool, clock: Clock) -> Trace {
        let live = enabled && std::env::var_os("SIM_TRACE_LIVE").is_some();
        Trace { lines: enabled.then(Arc::default), live, clock }
    }

    /// Virtual seconds since the lifecycle began.
    pub fn now(&self) -> f64 {
        self.clock.now().duration_since(epoch()).as_secs_f64()
    }

    /// Adds a line (made only when tracing).
    pub fn line(&self, what: impl FnOnce() -> String) {
        if let Some(lines) = &self.lines {
            let line = format!("{:>9.3}s  {}", self.now(), what());
            if self.live {
                eprintln!("{line}");
            }
            lines.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.as_ref().map(|l| l.lock().unwrap_or_else(|e| e.into_inner()).clone()).unwrap_or_default()
    }
}
