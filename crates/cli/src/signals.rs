//! The signals that stop `run` and `serve`: SIGINT and SIGTERM.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGINT and SIGTERM, caught from when this is made (before, they end the process as by
/// default). A signal that cannot be caught is never received.
pub(crate) struct StopSignals {
    interrupt: Option<Signal>,
    terminate: Option<Signal>,
}

impl StopSignals {
    pub(crate) fn listen() -> Self {
        Self { interrupt: signal(SignalKind::interrupt()).ok(), terminate: signal(SignalKind::terminate()).ok() }
    }

    /// Resolves at the next SIGINT or SIGTERM.
    pub(crate) async fn received(&mut self) {
        tokio::select! {
            _ = recv(&mut self.interrupt) => {}
            _ = recv(&mut self.terminate) => {}
        }
    }
}

async fn recv(s: &mut Option<Signal>) {
    match s {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}
