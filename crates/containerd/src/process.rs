//! Process supervision: the lock, the pid file, starting containerd detached and waiting until it
//! answers, and stopping it.

use crate::{EmbeddedError, EmbeddedResult, EmbeddedRuntime, POLL, io_error, write_file};
use podwright_runtime::cri::{self, CriRuntime};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::Command;

/// containerd itself boots in about 0.1 s here; the margin is for loaded CI machines.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The lock holder may be starting containerd and importing images.
const LOCK_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_GRACE: Duration = Duration::from_secs(10);
const KILL_WAIT: Duration = Duration::from_secs(5);

impl EmbeddedRuntime {
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
    pub(crate) async fn lock(&self) -> EmbeddedResult<std::fs::File> {
        let path = self.lock_path();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|error| io_error("open", &path, error))?;
        // The embedded containerd's supervisor: real timeouts for a real process.
        #[allow(clippy::disallowed_methods)]
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
    pub(crate) async fn live_pid(&self) -> Option<u32> {
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

    pub(crate) async fn start(&self) -> EmbeddedResult<(u32, CriRuntime)> {
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
        // The embedded containerd's supervisor: real timeouts for a real process.
        #[allow(clippy::disallowed_methods)]
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
    pub(crate) async fn wait_ready(
        &self,
        pid: u32,
        mut child: Option<&mut tokio::process::Child>,
        log_start: u64,
    ) -> EmbeddedResult<CriRuntime> {
        // The embedded containerd's supervisor: real timeouts for a real process.
        #[allow(clippy::disallowed_methods)]
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
}

/// (command name, state) from the text of `/proc/PID/stat`.
pub(crate) fn parse_proc_stat(stat: &str) -> Option<(&str, char)> {
    // The name is in parentheses and may itself contain ") ", so split at the last one.
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1;
    let state = rest.trim_start().chars().next()?;
    Some((name, state))
}

pub(crate) fn is_live_containerd(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    matches!(parse_proc_stat(&stat), Some(("containerd", state)) if !matches!(state, 'Z' | 'X' | 'x'))
}

async fn wait_gone(pid: u32, timeout: Duration) -> bool {
    // The embedded containerd's supervisor: real timeouts for a real process.
    #[allow(clippy::disallowed_methods)]
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
pub(crate) fn path_with_sbin() -> String {
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
pub(crate) fn log_tail(log: &Path, from: u64) -> String {
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
