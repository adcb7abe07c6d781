//! The CRI runtime `run` and `serve` drive: the one `--runtime-endpoint` names, or podwright's
//! embedded containerd.

use crate::RuntimeArgs;
use podwright_containerd::EmbeddedRuntime;
use podwright_runtime::RuntimeService;
use podwright_runtime::cri;

/// Connects to the given endpoint, or starts/reuses the embedded containerd.
pub(crate) async fn connect(args: &RuntimeArgs, in_flight: cri::InFlight) -> Result<cri::CriRuntime, String> {
    let endpoint = match &args.runtime_endpoint {
        Some(e) => e.clone(),
        None => {
            let embedded = EmbeddedRuntime::new(&args.root_dir);
            embedded.ensure_running().await.map_err(|e| {
                format!("could not start the embedded containerd under {}: {e}\nRun scripts/setup first (it installs containerd and builds the local images).", args.root_dir.display())
            })?;
            embedded.endpoint()
        }
    };
    let rt = cri::connect_with(&endpoint, in_flight).await.map_err(|e| {
        format!("{e}\nStart a CRI runtime listening there (e.g. containerd), or run podwright without --runtime-endpoint to use its embedded containerd.")
    })?;
    rt.version().await.map_err(|e| format!("{e}\nIs a CRI v1 runtime listening at {endpoint}?"))?;
    Ok(rt)
}
