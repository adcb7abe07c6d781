//! The CRI runtime the benchmarks measure on: one given by its endpoint, or the embedded
//! containerd under the benchmark's root, started here rather than by podwright so that its
//! start is in no figure.

use podwright_containerd::EmbeddedRuntime;
use podwright_runtime::CriRuntime;
use std::path::Path;

/// The CRI endpoint to use and containerd's pid: `given`, or the embedded containerd under
/// `root`, started unless it runs; no pid for a runtime the benchmark did not start.
pub(crate) async fn endpoint(given: Option<&str>, root: &Path) -> Result<(String, Option<u32>), String> {
    match given {
        Some(e) => Ok((e.to_string(), None)),
        None => {
            let embedded = EmbeddedRuntime::new(root);
            let outcome = embedded.ensure_running().await.map_err(|e| {
                format!(
                    "could not start the embedded containerd under {}: {e}\nRun scripts/setup first.",
                    root.display()
                )
            })?;
            Ok((embedded.endpoint(), Some(outcome.pid)))
        }
    }
}

pub(crate) async fn connect(endpoint: &str) -> Result<CriRuntime, String> {
    podwright_runtime::connect(endpoint).await.map_err(|e| format!("cannot connect to {endpoint}: {e}"))
}
