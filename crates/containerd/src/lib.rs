//! The embedded default runtime: a private containerd that podwright starts (or reuses) when it is
//! given no `--runtime-endpoint`.
//!
//! Everything lives under one root directory (default `/var/lib/podwright`):
//!
//! ```text
//! <root>/containerd/config.toml      generated on every start
//! <root>/containerd/containerd.sock  the CRI / containerd endpoint
//! <root>/containerd/containerd.pid   written by podwright, containerd writes none
//! <root>/containerd/containerd.log   containerd's stdout and stderr, appended
//! <root>/containerd/lock             flock'ed around check-and-start and image loading
//! <root>/containerd/{root,state,opt} containerd's own directories
//! <root>/cni/net.d/                  one bridge conflist (podwright0, 10.89.0.0/16)
//! <root>/cni/networks/               host-local IP allocations
//! ```
//!
//! # Guarantees
//! - Several podwright processes may call [`EmbeddedRuntime::ensure_running`] at the same time:
//!   the lock makes exactly one of them start containerd and import images; the others wait and
//!   then reuse it.
//! - containerd runs fully detached (own session, stdin `/dev/null`, output to the log file, no
//!   inherited descriptors), so it never holds a terminal or a CI job's pipes open and outlives
//!   the podwright process that started it.
//! - On success containerd answers CRI `Version`, and CRI `ImageStatus` finds the sandbox image
//!   [`SANDBOX_IMAGE`] and the image of every archive in the image directory: what sandbox and
//!   container creation depend on. `ctr` only imports the archives, which CRI cannot do.
//!
//! # Caveats
//! - [`EmbeddedRuntime::stop`] stops containerd only. Pods it ran keep their shims and processes,
//!   as with any containerd restart.

mod config;
mod images;
mod process;
mod supervise;
#[cfg(test)]
mod tests;

pub use config::{ALT_HANDLER, POD_GATEWAY, cni_conflist, containerd_config};
pub use images::image_for_archive;

use podwright_runtime::RuntimeService;
use podwright_runtime::cri;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// Root directory used when the user names none.
pub const DEFAULT_ROOT: &str = "/var/lib/podwright";
/// Where `scripts/build-images` puts the image archives; `PODWRIGHT_IMAGE_DIR` overrides it.
pub const DEFAULT_IMAGE_DIR: &str = "/usr/local/share/podwright/images";
/// The pause image every sandbox is created from; it must be present, nothing is pulled.
pub const SANDBOX_IMAGE: &str = "localhost/pause:3.9";
/// Archives `NAME-TAG.tar` are imported as `IMAGE_PREFIX/NAME:TAG`.
pub const IMAGE_PREFIX: &str = "localhost";
const POLL: Duration = Duration::from_millis(25);
/// `sockaddr_un.sun_path` holds 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

#[derive(Debug, Error)]
pub enum EmbeddedError {
    /// A file or directory under the root could not be used.
    #[error("cannot {action} {path}: {error}")]
    Io { action: &'static str, path: PathBuf, error: io::Error },
    /// The root directory is too deep for a unix socket inside it.
    #[error(
        "the socket path {socket} is {len} bytes long; unix sockets allow {MAX_SOCKET_PATH}: choose a shorter root directory"
    )]
    SocketPathTooLong { socket: PathBuf, len: usize },
    /// Another podwright held the lock for too long.
    #[error("waited {waited:?} for the lock {lock} held by another podwright starting containerd; is one stuck?")]
    LockTimeout { lock: PathBuf, waited: Duration },
    /// A helper program could not be run at all.
    #[error("cannot run {program}: {error} (is it installed? scripts/setup installs it)")]
    Spawn { program: String, error: io::Error },
    /// Something answers on the socket, but no live containerd is in the pid file.
    #[error(
        "a containerd that podwright did not start (no live pid in {pid_file}) serves {socket}: stop it, or pass --runtime-endpoint unix://{socket}"
    )]
    Foreign { socket: PathBuf, pid_file: PathBuf },
    /// containerd exited while starting.
    #[error("containerd (pid {pid}) exited during start-up ({status}); the end of {log}:\n{tail}")]
    Exited { pid: u32, status: String, log: PathBuf, tail: String },
    /// containerd runs but does not answer on its socket.
    #[error(
        "containerd (pid {pid}) does not answer on {socket} after {waited:?}: {last_error}; the end of {log}:\n{tail}"
    )]
    NotReady { pid: u32, socket: PathBuf, waited: Duration, last_error: String, log: PathBuf, tail: String },
    /// A CRI call to the running containerd failed.
    #[error("{call} on {endpoint} failed: {message}")]
    Cri { call: &'static str, endpoint: String, message: String },
    /// A `ctr` command failed.
    #[error("`{command}` failed: {message}")]
    Ctr { command: String, message: String },
    /// An image that must be present is not, after loading the archives.
    #[error("image {image} is not present in containerd ({endpoint}): {why}")]
    ImageMissing { image: String, endpoint: String, why: String },
    /// containerd survived SIGKILL.
    #[error("containerd (pid {pid}) is still alive {waited:?} after SIGKILL")]
    StopFailed { pid: u32, waited: Duration },
}

pub type EmbeddedResult<T> = Result<T, EmbeddedError>;

/// What [`EmbeddedRuntime::status`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedStatus {
    /// A live containerd answers on the socket.
    pub running: bool,
    /// The pid from the pid file, when that process is a live containerd.
    pub pid: Option<u32>,
    pub socket: PathBuf,
    /// e.g. "containerd 1.6.20~ds1", when it answers.
    pub version: Option<String>,
    pub log: PathBuf,
}

/// One or two lines for `podwright runtime status`.
impl std::fmt::Display for EmbeddedStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let socket = self.socket.display();
        match (&self.version, self.pid) {
            (Some(version), Some(pid)) => write!(f, "{version} is running (pid {pid}) at unix://{socket}")?,
            (_, Some(pid)) => write!(f, "containerd (pid {pid}) runs but does not answer at unix://{socket}")?,
            _ => return write!(f, "not running (its socket would be unix://{socket})"),
        }
        write!(f, "\nlog: {}", self.log.display())
    }
}

/// What [`EmbeddedRuntime::ensure_running`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsureOutcome {
    pub pid: u32,
    /// false when an already running containerd was reused.
    pub started: bool,
    /// Images imported by this call (`localhost/busybox:1.36`, ...).
    pub imported: Vec<String>,
}

/// A private containerd under one root directory.
#[derive(Debug, Clone)]
pub struct EmbeddedRuntime {
    pub root: PathBuf,
    pub socket: PathBuf,
    /// Image archives loaded at start (`PODWRIGHT_IMAGE_DIR` or [`DEFAULT_IMAGE_DIR`]).
    pub image_dir: PathBuf,
}

impl EmbeddedRuntime {
    pub fn new(root_dir: &Path) -> Self {
        let image_dir = std::env::var_os("PODWRIGHT_IMAGE_DIR")
            .filter(|dir| !dir.is_empty())
            .map_or_else(|| PathBuf::from(DEFAULT_IMAGE_DIR), PathBuf::from);
        Self { root: root_dir.to_path_buf(), socket: root_dir.join("containerd/containerd.sock"), image_dir }
    }

    /// The CRI endpoint, `unix:///…/containerd.sock`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    fn dir(&self) -> PathBuf {
        self.root.join("containerd")
    }
    fn config_path(&self) -> PathBuf {
        self.dir().join("config.toml")
    }
    fn pid_path(&self) -> PathBuf {
        self.dir().join("containerd.pid")
    }
    pub fn log_path(&self) -> PathBuf {
        self.dir().join("containerd.log")
    }
    fn lock_path(&self) -> PathBuf {
        self.dir().join("lock")
    }
    fn cni_conf_dir(&self) -> PathBuf {
        self.root.join("cni/net.d")
    }

    /// Starts containerd, or reuses the one already running under this root, waits until it
    /// answers, and imports the image archives whose images are missing.
    pub async fn ensure_running(&self) -> EmbeddedResult<EnsureOutcome> {
        let len = self.socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(EmbeddedError::SocketPathTooLong { socket: self.socket.clone(), len });
        }
        create_dir(&self.dir()).await?;
        let _lock = self.lock().await?;

        let (pid, started, cri) = match self.live_pid().await {
            Some(pid) => {
                let cri = self.wait_ready(pid, None, 0).await?;
                tracing::debug!(pid, endpoint = %self.endpoint(), "reusing containerd");
                (pid, false, cri)
            }
            None => {
                let (pid, cri) = self.start().await?;
                (pid, true, cri)
            }
        };
        let imported = self.load_images(&cri).await?;
        Ok(EnsureOutcome { pid, started, imported })
    }

    pub async fn status(&self) -> EmbeddedResult<EmbeddedStatus> {
        let pid = self.live_pid().await;
        let version = match pid {
            Some(_) => match cri::connect(&self.endpoint()).await {
                Ok(cri) => cri.version().await.ok(),
                Err(_) => None,
            },
            None => None,
        };
        Ok(EmbeddedStatus {
            running: version.is_some(),
            pid,
            socket: self.socket.clone(),
            version,
            log: self.log_path(),
        })
    }
}

fn io_error(action: &'static str, path: &Path, error: io::Error) -> EmbeddedError {
    EmbeddedError::Io { action, path: path.to_path_buf(), error }
}

async fn create_dir(path: &Path) -> EmbeddedResult<()> {
    tokio::fs::create_dir_all(path).await.map_err(|error| io_error("create", path, error))
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
async fn write_file(path: &Path, contents: &str) -> EmbeddedResult<()> {
    let tmp = path.with_extension("tmp");
    tokio::fs::write(&tmp, contents).await.map_err(|error| io_error("write", &tmp, error))?;
    tokio::fs::rename(&tmp, path).await.map_err(|error| io_error("rename", path, error))
}
