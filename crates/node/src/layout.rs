//! Every path podwright uses under its root directory, in one place:
//!
//! ```text
//! <root>/pods/<uid>/                                     one directory per pod, removed with it
//! <root>/pods/<uid>/checkpoint.json                      what the runtime cannot tell (checkpoint)
//! <root>/pods/<uid>/etc-hosts                            the containers' /etc/hosts
//! <root>/pods/<uid>/logs/                                the sandbox's CRI log directory
//! <root>/pods/<uid>/termination/<name>-<restart count>   each instance's termination message
//! <root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<v>  emptyDir volumes
//! <root>/seccomp/                                        `Localhost` seccomp profiles
//! <root>/image_manager/pulling/sha256-<image>            a pull begun and not yet ended
//! <root>/image_manager/pulled/sha256-<image ref>         the credentials that pulled an image
//! ```
//!
//! The embedded containerd keeps its own files under `<root>/containerd` and `<root>/cni`.

use std::path::{Path, PathBuf};

/// Where the pods' directories are: `<root>/pods`.
pub fn pods_dir(root: &Path) -> PathBuf {
    root.join("pods")
}

/// Where a pod's files live: `<root>/pods/<uid>`.
pub fn pod_dir(root: &Path, uid: &str) -> PathBuf {
    pods_dir(root).join(uid)
}

/// Where `Localhost` seccomp profiles are looked up: `<root>/seccomp` (the kubelet's
/// `seccompProfileRoot`).
pub fn seccomp_dir(root: &Path) -> PathBuf {
    root.join("seccomp")
}

/// The image pull intents (the kubelet's `image_manager/pulling`).
pub fn image_pull_intents(root: &Path) -> PathBuf {
    root.join("image_manager").join("pulling")
}

/// The records of who pulled each image (the kubelet's `image_manager/pulled`).
pub fn image_pulled_records(root: &Path) -> PathBuf {
    root.join("image_manager").join("pulled")
}

pub fn checkpoint(root: &Path, uid: &str) -> PathBuf {
    pod_dir(root, uid).join("checkpoint.json")
}

/// The hosts file mounted at every container's `/etc/hosts` (the kubelet's `etc-hosts`).
pub fn etc_hosts(root: &Path, uid: &str) -> PathBuf {
    pod_dir(root, uid).join("etc-hosts")
}

/// The sandbox's CRI log directory; container log paths are relative to it.
pub fn log_directory(root: &Path, uid: &str) -> PathBuf {
    pod_dir(root, uid).join("logs")
}

/// An instance's log, relative to the log directory (as the CRI container config wants it):
/// `<name>/<restart count>.log`, the kubelet's layout.
pub fn container_log_relative(container: &str, restart_count: i32) -> String {
    format!("{container}/{restart_count}.log")
}

pub fn container_log(root: &Path, uid: &str, container: &str, restart_count: i32) -> PathBuf {
    log_directory(root, uid).join(container_log_relative(container, restart_count))
}

/// One flat directory for every instance's termination message file, made with the sandbox,
/// so that starting a container creates a file and no directories.
pub fn termination_dir(root: &Path, uid: &str) -> PathBuf {
    pod_dir(root, uid).join("termination")
}

/// `<name>-<restart count>`: unambiguous, as a restart count holds no `-`.
pub fn termination_message(root: &Path, uid: &str, container: &str, restart_count: i32) -> PathBuf {
    termination_dir(root, uid).join(format!("{container}-{restart_count}"))
}

pub fn empty_dir(root: &Path, uid: &str, volume: &str) -> PathBuf {
    volume_dir(root, uid, "empty-dir", volume)
}

/// Where a volume of the kubelet plugin `kubernetes.io/<plugin>` lives, as the kubelet lays
/// it out: `pods/<uid>/volumes/kubernetes.io~<plugin>/<volume>`.
pub fn volume_dir(root: &Path, uid: &str, plugin: &str, volume: &str) -> PathBuf {
    pod_dir(root, uid).join("volumes").join(format!("kubernetes.io~{plugin}")).join(volume)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_of_a_pod_is_under_its_directory() {
        let root = Path::new("/r");
        let pod = pod_dir(root, "u");
        assert_eq!(pod, Path::new("/r/pods/u"));
        for p in [
            checkpoint(root, "u"),
            etc_hosts(root, "u"),
            log_directory(root, "u"),
            termination_message(root, "u", "c", 2),
            container_log(root, "u", "c", 2),
            empty_dir(root, "u", "v"),
        ] {
            assert!(p.starts_with(&pod), "{}", p.display());
        }
        assert_eq!(termination_message(root, "u", "c", 2), Path::new("/r/pods/u/termination/c-2"));
    }
}
