//! Container log rotation, as the kubelet's container log manager does it
//! (`pkg/kubelet/logs/container_log_manager.go`): a running container's log file larger than
//! `containerLogMaxSize` is renamed to `<path>.<time>` and the runtime reopens the log path;
//! at most `containerLogMaxFiles` files are kept per container, the current one included.
//! (The kubelet also gzips older rotated files; podwright keeps them as they are.)

use jiff::Timestamp;
use podwright_runtime::Runtime;
use podwright_runtime::cri_api::ContainerState;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::cri::labels;

/// How often running containers' logs are checked (the kubelet's monitor period).
const MONITOR_PERIOD: Duration = Duration::from_secs(10);

/// `containerLogMaxSize` and `containerLogMaxFiles`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogPolicy {
    pub max_size: u64,
    pub max_files: usize,
}

impl Default for LogPolicy {
    /// The kubelet's defaults: 10Mi, 5 files.
    fn default() -> Self {
        LogPolicy { max_size: 10 * 1024 * 1024, max_files: 5 }
    }
}

/// The rotated files of `path` (`<path>.<time>`), oldest first.
fn rotated(path: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else { return vec![] };
    let prefix = format!("{name}.");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)))
        .map(|e| e.path())
        .collect();
    // The time suffix sorts as text.
    found.sort();
    found
}

/// Rotates one container's log if it has grown past the limit. Returns whether it did.
pub async fn rotate_one(runtime: &dyn Runtime, id: &str, path: &Path, policy: LogPolicy, now: Timestamp) -> bool {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if size <= policy.max_size {
        return false;
    }
    // Room for the file about to be rotated: keep max_files - 2 older ones.
    let old = rotated(path);
    let keep = policy.max_files.saturating_sub(2);
    for p in &old[..old.len().saturating_sub(keep)] {
        let _ = std::fs::remove_file(p);
    }
    let mut target = path.as_os_str().to_owned();
    target.push(format!(".{}", now.strftime("%Y%m%d-%H%M%S")));
    let target = PathBuf::from(target);
    if let Err(e) = std::fs::rename(path, &target) {
        tracing::warn!(%e, path = %path.display(), "cannot rotate a container log");
        return false;
    }
    if let Err(e) = runtime.reopen_container_log(id).await {
        // The runtime still writes to the renamed file: give it its name back.
        tracing::warn!(%e, id, "the runtime did not reopen the container log");
        let _ = std::fs::rename(&target, path);
        return false;
    }
    true
}

/// Checks every running podwright container's log, every monitor period, for ever.
pub async fn rotate_logs(runtime: Arc<dyn Runtime>, clock: podwright_runtime::Clock, policy: LogPolicy) {
    let managed = labels::managed_selector();
    loop {
        tokio::time::sleep(MONITOR_PERIOD).await;
        let Ok(containers) = runtime.list_containers(&managed).await else { continue };
        for c in
            containers.iter().filter(|c| c.state == ContainerState::ContainerRunning as i32 && !c.log_path.is_empty())
        {
            let id = c.id.clone();
            rotate_one(runtime.as_ref(), &id, Path::new(&c.log_path), policy, clock.now()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podwright_runtime::FakeRuntime;

    #[tokio::test]
    async fn a_log_over_the_limit_is_moved_and_old_ones_pruned() {
        let dir = std::env::temp_dir().join(format!("podwright-rotate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("0.log");
        for old in ["0.log.20260101-000000", "0.log.20260101-000001", "0.log.20260101-000002"] {
            std::fs::write(dir.join(old), "x").unwrap();
        }
        std::fs::write(&log, vec![b'a'; 100]).unwrap();
        let now: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let policy = LogPolicy { max_size: 50, max_files: 3 };
        // The fake runtime cannot reopen logs: the rename is undone.
        let fake = FakeRuntime::new(podwright_runtime::Clock::new());
        assert!(!rotate_one(fake.as_ref(), "c", &log, policy, now).await);
        assert!(log.exists());
        let mut left: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["0.log", "0.log.20260101-000002"]);
        let small = LogPolicy { max_size: 1000, max_files: 3 };
        assert!(!rotate_one(fake.as_ref(), "c", &log, small, now).await);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
