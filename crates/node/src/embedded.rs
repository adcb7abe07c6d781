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

use podwright_runtime::cri::{self, CriRuntime};
use podwright_runtime::{ImageService, RuntimeService};
use serde_json::json;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::process::Command;

/// Root directory used when the user names none.
pub const DEFAULT_ROOT: &str = "/var/lib/podwright";
/// Where `scripts/build-images` puts the image archives; `PODWRIGHT_IMAGE_DIR` overrides it.
pub const DEFAULT_IMAGE_DIR: &str = "/usr/local/share/podwright/images";
/// The pause image every sandbox is created from; it must be present, nothing is pulled.
pub const SANDBOX_IMAGE: &str = "localhost/pause:3.9";
/// Archives `NAME-TAG.tar` are imported as `IMAGE_PREFIX/NAME:TAG`.
pub const IMAGE_PREFIX: &str = "localhost";
const CNI_BIN_DIR: &str = "/usr/lib/cni";
const CRI_NAMESPACE: &str = "k8s.io";
const BRIDGE: &str = "podwright0";
const POD_SUBNET: &str = "10.89.0.0/16";

/// containerd itself boots in about 0.1 s here; the margin is for loaded CI machines.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The lock holder may be starting containerd and importing images.
const LOCK_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_GRACE: Duration = Duration::from_secs(10);
const KILL_WAIT: Duration = Duration::from_secs(5);
const CTR_TIMEOUT: Duration = Duration::from_secs(60);
/// CRI learns about imported images from containerd's event stream, a moment after the import.
const IMAGE_VISIBLE_TIMEOUT: Duration = Duration::from_secs(5);
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

    /// SIGTERM, then SIGKILL after a grace period; removes the pid file. Returns whether a
    /// containerd was running.
    pub async fn stop(&self) -> EmbeddedResult<bool> {
        if !self.dir().is_dir() {
            return Ok(false);
        }
        let _lock = self.lock().await?;
        let Some(pid) = self.live_pid().await else {
            self.remove_pid_file()?;
            return Ok(false);
        };
        signal(pid, libc::SIGTERM);
        if !wait_gone(pid, STOP_GRACE).await {
            tracing::warn!(pid, "containerd ignored SIGTERM for {STOP_GRACE:?}, sending SIGKILL");
            signal(pid, libc::SIGKILL);
            if !wait_gone(pid, KILL_WAIT).await {
                return Err(EmbeddedError::StopFailed { pid, waited: KILL_WAIT });
            }
        }
        self.remove_pid_file()?;
        Ok(true)
    }

    /// Exclusive flock on `<root>/containerd/lock`, released when the file is dropped. The file
    /// is opened close-on-exec (std's default), so containerd never inherits the lock.
    async fn lock(&self) -> EmbeddedResult<std::fs::File> {
        let path = self.lock_path();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|error| io_error("open", &path, error))?;
        let begin = Instant::now();
        loop {
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(file);
            }
            let error = io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io_error("lock", &path, error));
            }
            if begin.elapsed() >= LOCK_TIMEOUT {
                return Err(EmbeddedError::LockTimeout { lock: path, waited: LOCK_TIMEOUT });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The pid in the pid file, if that process is a live containerd (not a zombie, not a
    /// recycled pid).
    async fn live_pid(&self) -> Option<u32> {
        let text = tokio::fs::read_to_string(self.pid_path()).await.ok()?;
        let pid = text.trim().parse().ok()?;
        is_live_containerd(pid).then_some(pid)
    }

    fn remove_pid_file(&self) -> EmbeddedResult<()> {
        let path = self.pid_path();
        match std::fs::remove_file(&path) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(io_error("remove", &path, error)),
            _ => Ok(()),
        }
    }

    async fn write_config(&self) -> EmbeddedResult<()> {
        let conf_dir = self.cni_conf_dir();
        create_dir(&conf_dir).await?;
        write_file(&conf_dir.join("10-podwright.conflist"), &cni_conflist(&self.root.join("cni/networks"))).await?;
        write_file(&self.config_path(), &containerd_config(&self.root)).await
    }

    async fn start(&self) -> EmbeddedResult<(u32, CriRuntime)> {
        if self.socket.exists() {
            // Removing a socket that still answers would cut its containerd off from every client.
            if cri::connect(&self.endpoint()).await.is_ok() {
                return Err(EmbeddedError::Foreign { socket: self.socket.clone(), pid_file: self.pid_path() });
            }
            // A leftover from a crash or SIGKILL.
            let _ = std::fs::remove_file(&self.socket);
        }
        self.write_config().await?;

        let log_path = self.log_path();
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|error| io_error("open", &log_path, error))?;
        let log_start = log.seek(SeekFrom::End(0)).unwrap_or(0);
        let log_err = log.try_clone().map_err(|error| io_error("duplicate", &log_path, error))?;

        let mut command = Command::new("containerd");
        command
            .arg("--config")
            .arg(self.config_path())
            .env("PATH", path_with_sbin())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        // SAFETY: setsid and the close-on-exec marking only make async-signal-safe syscalls.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(io::Error::last_os_error());
                }
                mark_inherited_fds_cloexec();
                Ok(())
            });
        }
        let began = Instant::now();
        let mut child =
            command.spawn().map_err(|error| EmbeddedError::Spawn { program: "containerd".into(), error })?;
        let pid = child.id().unwrap_or_default();
        write_file(&self.pid_path(), &format!("{pid}\n")).await?;
        let cri = self.wait_ready(pid, Some(&mut child), log_start).await?;
        tracing::info!(
            pid,
            endpoint = %self.endpoint(),
            elapsed_ms = began.elapsed().as_millis() as u64,
            "started containerd"
        );
        // Dropping the handle leaves containerd running; tokio reaps it if it exits while we live.
        drop(child);
        Ok((pid, cri))
    }

    /// Polls until containerd answers a CRI `Version` on the socket. `child` is set when we just
    /// spawned it, so an early exit is reported with its status instead of as a time-out.
    async fn wait_ready(
        &self,
        pid: u32,
        mut child: Option<&mut tokio::process::Child>,
        log_start: u64,
    ) -> EmbeddedResult<CriRuntime> {
        let begin = Instant::now();
        let mut last_error = String::from("the socket does not exist yet");
        loop {
            if self.socket.exists() {
                match cri::connect(&self.endpoint()).await {
                    Ok(cri) => return Ok(cri),
                    Err(error) => last_error = error.to_string(),
                }
            }
            let exited = match child.as_deref_mut() {
                Some(child) => child.try_wait().ok().flatten().map(|s| s.to_string()),
                None => (!is_live_containerd(pid)).then(|| "gone".to_string()),
            };
            if let Some(status) = exited {
                return Err(EmbeddedError::Exited {
                    pid,
                    status,
                    log: self.log_path(),
                    tail: log_tail(&self.log_path(), log_start),
                });
            }
            if begin.elapsed() >= START_TIMEOUT {
                return Err(EmbeddedError::NotReady {
                    pid,
                    socket: self.socket.clone(),
                    waited: START_TIMEOUT,
                    last_error,
                    log: self.log_path(),
                    tail: log_tail(&self.log_path(), log_start),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Makes sure the sandbox image and the image of each `NAME-TAG.tar` in the image directory
    /// are present for CRI, importing the archives of the missing ones.
    async fn load_images(&self, cri: &CriRuntime) -> EmbeddedResult<Vec<String>> {
        let mut wanted: Vec<(String, Option<PathBuf>)> =
            image_archives(&self.image_dir).into_iter().map(|(archive, image)| (image, Some(archive))).collect();
        if !wanted.iter().any(|(image, _)| image == SANDBOX_IMAGE) {
            wanted.push((SANDBOX_IMAGE.to_string(), None));
        }
        let mut imported = Vec::new();
        for (image, archive) in wanted {
            if self.image_present(cri, &image).await? {
                continue;
            }
            let Some(archive) = archive else {
                return Err(EmbeddedError::ImageMissing {
                    image,
                    endpoint: self.endpoint(),
                    why: format!(
                        "there is no archive for it in {} (run scripts/build-images, or set PODWRIGHT_IMAGE_DIR)",
                        self.image_dir.display()
                    ),
                });
            };
            let began = Instant::now();
            self.import(&archive, &image).await?;
            self.wait_visible(cri, &image, &archive).await?;
            tracing::info!(
                image,
                archive = %archive.display(),
                elapsed_ms = began.elapsed().as_millis() as u64,
                "imported image"
            );
            imported.push(image);
        }
        Ok(imported)
    }

    async fn image_present(&self, cri: &CriRuntime, image: &str) -> EmbeddedResult<bool> {
        match cri.image_status(image).await {
            Ok(found) => Ok(found.is_some()),
            Err(error) => {
                Err(EmbeddedError::Cri { call: "ImageStatus", endpoint: self.endpoint(), message: error.to_string() })
            }
        }
    }

    /// CRI learns about an import from containerd's event stream, a moment after `ctr` returns.
    async fn wait_visible(&self, cri: &CriRuntime, image: &str, archive: &Path) -> EmbeddedResult<()> {
        let begin = Instant::now();
        while !self.image_present(cri, image).await? {
            if begin.elapsed() >= IMAGE_VISIBLE_TIMEOUT {
                return Err(EmbeddedError::ImageMissing {
                    image: image.into(),
                    endpoint: self.endpoint(),
                    why: format!(
                        "{} was imported but CRI does not see the image after {IMAGE_VISIBLE_TIMEOUT:?} (is the tag the layout's org.opencontainers.image.ref.name?)",
                        archive.display()
                    ),
                });
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    /// `ctr images import` into CRI's namespace: the layout's ref name (the tag) is appended to
    /// the base name, and --digests also records `localhost/NAME@sha256:…` as a repo digest.
    async fn import(&self, archive: &Path, image: &str) -> EmbeddedResult<()> {
        let base = image.rsplit_once(':').map_or(image, |(base, _)| base);
        let mut command = Command::new("ctr");
        command
            .arg("-a")
            .arg(&self.socket)
            .args(["-n", CRI_NAMESPACE, "images", "import", "--base-name", base, "--digests"])
            .arg(archive)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let shown = format!(
            "ctr -a {} -n {CRI_NAMESPACE} images import --base-name {base} --digests {}",
            self.socket.display(),
            archive.display()
        );
        let output = match tokio::time::timeout(CTR_TIMEOUT, command.output()).await {
            Err(_) => {
                return Err(EmbeddedError::Ctr {
                    command: shown,
                    message: format!("no answer within {CTR_TIMEOUT:?}"),
                });
            }
            Ok(Err(error)) => {
                return Err(EmbeddedError::Spawn { program: "ctr".into(), error });
            }
            Ok(Ok(output)) => output,
        };
        if !output.status.success() {
            return Err(EmbeddedError::Ctr {
                command: shown,
                message: format!("{}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim()),
            });
        }
        Ok(())
    }
}

/// containerd's configuration for a root directory (config version 2, containerd 1.6).
pub fn containerd_config(root: &Path) -> String {
    let dir = root.join("containerd");
    let path = |p: &Path| toml_string(&p.to_string_lossy());
    format!(
        r#"# Generated by podwright on every start of its embedded containerd; edits are overwritten.
version = 2
root = {root}
state = {state}
# Snapshotters that cannot work here and only log noise at start-up.
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = {socket}

[plugins."io.containerd.internal.v1.opt"]
  path = {opt}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = {sandbox_image}
  # Required without CAP_SYS_RESOURCE: the sandbox's oom_score_adj of -998 would fail otherwise.
  restrict_oom_score_adj = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = {cni_bin}
    conf_dir = {cni_conf}
    max_conf_num = 1
"#,
        root = path(&dir.join("root")),
        state = path(&dir.join("state")),
        socket = path(&dir.join("containerd.sock")),
        opt = path(&dir.join("opt")),
        sandbox_image = toml_string(SANDBOX_IMAGE),
        cni_bin = toml_string(CNI_BIN_DIR),
        cni_conf = path(&root.join("cni/net.d")),
    )
}

/// The pod network: a bridge with host-local addresses, and portmap for `hostPort`. containerd
/// sets up the loopback interface itself (with `loopback` from the CNI bin dir).
pub fn cni_conflist(ipam_data_dir: &Path) -> String {
    let conflist = json!({
        "cniVersion": "1.0.0",
        "name": "podwright",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": POD_SUBNET }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                    "dataDir": ipam_data_dir,
                },
            },
            { "type": "portmap", "capabilities": { "portMappings": true } },
        ],
    });
    format!("{conflist:#}\n")
}

/// The image an archive holds, by the `scripts/build-images` convention: `NAME-TAG.tar` is
/// `localhost/NAME:TAG` (the layout's ref name is the tag).
pub fn image_for_archive(file_name: &str) -> Option<String> {
    let stem = file_name.strip_suffix(".tar")?;
    let (name, tag) = stem.rsplit_once('-')?;
    (!name.is_empty() && !tag.is_empty()).then(|| format!("{IMAGE_PREFIX}/{name}:{tag}"))
}

/// The archives in `dir` with their images, sorted by file name; a missing directory has none.
fn image_archives(dir: &Path) -> Vec<(PathBuf, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut archives: Vec<_> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let image = image_for_archive(entry.file_name().to_str()?)?;
            Some((entry.path(), image))
        })
        .collect();
    archives.sort();
    archives
}

fn toml_string(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// (command name, state) from the text of `/proc/PID/stat`.
fn parse_proc_stat(stat: &str) -> Option<(&str, char)> {
    // The name is in parentheses and may itself contain ") ", so split at the last one.
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1;
    let state = rest.trim_start().chars().next()?;
    Some((name, state))
}

fn is_live_containerd(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    matches!(parse_proc_stat(&stat), Some(("containerd", state)) if !matches!(state, 'Z' | 'X' | 'x'))
}

async fn wait_gone(pid: u32, timeout: Duration) -> bool {
    let begin = Instant::now();
    while is_live_containerd(pid) {
        if begin.elapsed() >= timeout {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
    true
}

fn signal(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) with a pid we just checked is a containerd.
        unsafe { libc::kill(pid, signal) };
    }
}

/// In the child between fork and exec: every descriptor above stderr gets close-on-exec, so
/// containerd inherits none of ours (a CI job's pipes, sockets, the lock). They are marked
/// rather than closed so std's own exec-error pipe still works until the exec.
fn mark_inherited_fds_cloexec() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: raw syscalls on descriptors only; no allocation (we are between fork and exec).
    unsafe {
        if libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC) == 0 {
            return;
        }
        // Kernels before 5.11: one by one.
        let max = match libc::sysconf(libc::_SC_OPEN_MAX) {
            n if n > 0 => n.min(1 << 20) as libc::c_int,
            _ => 1024,
        };
        for fd in 3..max {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// The caller's PATH plus the system directories: the runc shim looks up `runc` in
/// `/usr/sbin`, which a non-root PATH lacks.
fn path_with_sbin() -> String {
    let mut path = std::env::var("PATH").unwrap_or_default();
    for dir in ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        if !path.split(':').any(|p| p == dir) {
            if !path.is_empty() {
                path.push(':');
            }
            path.push_str(dir);
        }
    }
    path
}

/// The last lines containerd logged since `from` (this start's output only).
fn log_tail(log: &Path, from: u64) -> String {
    const MAX_BYTES: u64 = 4096;
    const MAX_LINES: usize = 10;
    let read = || -> io::Result<String> {
        let mut file = std::fs::File::open(log)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(from.max(len.saturating_sub(MAX_BYTES))))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(MAX_LINES)..].join("\n")
        }
        Err(error) => format!("(cannot read {}: {error})", log.display()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_has_what_this_machine_needs() {
        let config = containerd_config(Path::new("/var/lib/podwright"));
        for line in [
            "version = 2",
            "root = \"/var/lib/podwright/containerd/root\"",
            "state = \"/var/lib/podwright/containerd/state\"",
            "address = \"/var/lib/podwright/containerd/containerd.sock\"",
            "restrict_oom_score_adj = true",
            "sandbox_image = \"localhost/pause:3.9\"",
            "runtime_type = \"io.containerd.runc.v2\"",
            "default_runtime_name = \"runc\"",
            "bin_dir = \"/usr/lib/cni\"",
            "conf_dir = \"/var/lib/podwright/cni/net.d\"",
        ] {
            assert!(config.lines().any(|l| l.trim() == line), "missing `{line}` in:\n{config}");
        }
    }

    #[test]
    fn config_socket_matches_the_endpoint() {
        let runtime = EmbeddedRuntime::new(Path::new("/tmp/pw"));
        assert_eq!(runtime.endpoint(), "unix:///tmp/pw/containerd/containerd.sock");
        assert!(containerd_config(&runtime.root).contains("address = \"/tmp/pw/containerd/containerd.sock\""));
    }

    #[test]
    fn config_paths_are_toml_escaped() {
        let config = containerd_config(Path::new("/odd\"dir\\x"));
        assert!(config.contains(r#"root = "/odd\"dir\\x/containerd/root""#), "{config}");
    }

    #[test]
    fn conflist_is_one_bridge_network_with_portmap() {
        let text = cni_conflist(Path::new("/var/lib/podwright/cni/networks"));
        let conf: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let plugins = conf["plugins"].as_array().expect("plugins");
        assert_eq!(plugins[0]["type"], "bridge");
        assert_eq!(plugins[0]["bridge"], "podwright0");
        assert_eq!(plugins[0]["ipam"]["type"], "host-local");
        assert_eq!(plugins[0]["ipam"]["ranges"][0][0]["subnet"], "10.89.0.0/16");
        assert_eq!(plugins[0]["ipam"]["dataDir"], "/var/lib/podwright/cni/networks");
        assert_eq!(plugins[1]["type"], "portmap");
    }

    #[test]
    fn archive_names_map_to_local_images() {
        assert_eq!(image_for_archive("busybox-1.36.tar").as_deref(), Some("localhost/busybox:1.36"));
        assert_eq!(image_for_archive("pause-3.9.tar").as_deref(), Some("localhost/pause:3.9"));
        assert_eq!(image_for_archive("my-app-v2.tar").as_deref(), Some("localhost/my-app:v2"));
        assert_eq!(image_for_archive("busybox.tar"), None);
        assert_eq!(image_for_archive("busybox-1.36.tar.tmp"), None);
        assert_eq!(image_for_archive("-1.tar"), None);
    }

    #[test]
    fn proc_stat_gives_name_and_state() {
        assert_eq!(parse_proc_stat("4242 (containerd) S 1 4242 4242 0 -1"), Some(("containerd", 'S')));
        assert_eq!(parse_proc_stat("7 (a) b) Z 1 7"), Some(("a) b", 'Z')));
        assert_eq!(parse_proc_stat(""), None);
    }

    #[test]
    fn the_pid_of_this_test_is_not_a_containerd() {
        assert!(!is_live_containerd(std::process::id()));
        assert!(!is_live_containerd(u32::MAX));
    }

    #[test]
    fn status_reads_as_a_sentence() {
        let mut status = EmbeddedStatus {
            running: true,
            pid: Some(42),
            socket: PathBuf::from("/r/containerd/containerd.sock"),
            version: Some("containerd 1.6.20".into()),
            log: PathBuf::from("/r/containerd/containerd.log"),
        };
        assert_eq!(
            status.to_string(),
            "containerd 1.6.20 is running (pid 42) at unix:///r/containerd/containerd.sock\n\
             log: /r/containerd/containerd.log"
        );
        status.version = None;
        assert!(status.to_string().contains("does not answer"));
        status.pid = None;
        assert_eq!(status.to_string(), "not running (its socket would be unix:///r/containerd/containerd.sock)");
    }

    #[test]
    fn path_gets_the_system_directories_once() {
        let path = path_with_sbin();
        assert_eq!(path.split(':').filter(|p| *p == "/usr/sbin").count(), 1);
    }

    #[test]
    fn log_tail_starts_at_this_start() {
        let dir = std::env::temp_dir().join(format!("podwright-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let log = dir.join("log");
        std::fs::write(&log, "old run\nnew 1\nnew 2\n").expect("write log");
        assert_eq!(log_tail(&log, 8), "new 1\nnew 2");
        assert!(log_tail(&dir.join("missing"), 0).starts_with("(cannot read"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
